"""`VllmChart`: the objects of one served model (see the package docstring)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import cdk8s
from constructs import Construct

from llm_eks.manifests.api_key import api_key_secret_provider_class
from llm_eks.manifests.checkov import serving_pod_annotations
from llm_eks.manifests.ingress import IngressProps, ingress_annotations, ingress_rule
from llm_eks.manifests.labels import (
    FLOOR_APP,
    PART_OF,
    VLLM_APP,
    app_labels,
    plain_object,
    selector_labels,
    serving_selector,
)
from llm_eks.manifests.serving_objects import add_objects, workload_identity, workload_namespace
from llm_eks.manifests.vllm.compile_job import writer_objects
from llm_eks.manifests.vllm.disaggregated import PREFILL_APP, ROLE_LABEL, prefill_name, sidecar_rbac
from llm_eks.manifests.vllm.pod import LWS_WORKER_INDEX_LABEL, serving_pod_spec
from llm_eks.manifests.vllm.props import (
    PORT,
    PORT_NAME,
    VllmProps,
    pod_selector,
    pool_label,
    probe_timing,
    validate_vllm_props,
)

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"


def floor_name(p: VllmProps) -> str:
    """The on-demand floor's Deployment (or LeaderWorkerSet): `<name>-floor`."""
    return f"{p.name}-floor"


class VllmChart(cdk8s.Chart):
    """The vLLM serving workload for one model (see the module docstring for the timing arithmetic)."""

    def __init__(self, scope: Construct, construct_id: str, props: VllmProps) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        validate_vllm_props(props)
        self.props = props
        disaggregation = props.disaggregation
        if disaggregation is not None:
            # This workload's own Deployment (and floor) decode; `<name>-prefill` prefills.
            props = replace(props, pd_role="decode")
        self.timing = probe_timing(props)
        labels = app_labels(VLLM_APP, props.name)
        # The Deployment's immutable selector (a next version's name label is `vllm-next`).
        selector = pod_selector(props)
        # Every serving pod also carries the InferencePool it joins (a next version: its current version's).
        pool = pool_label(props)
        # The picker's prefill and decode filters read the role label (llm-d router v0.10.0 bylabel/roles.go).
        role = {} if disaggregation is None else {ROLE_LABEL: "decode"}
        pod_labels = {**selector, "app.kubernetes.io/part-of": PART_OF, **pool, **role}
        # Both Deployments' pods (the Spot/on-demand one and the on-demand floor): what the Service and PDB select.
        serving = serving_selector(props.name)

        def meta(name: str, **extra: Any) -> dict[str, Any]:
            return {"name": name, "namespace": props.namespace, "labels": labels, **extra}

        if props.create_namespace:
            # The ALB controller then gates rollouts on ALB target health, not only on pod readiness.
            readiness_gate = {"elbv2.k8s.aws/pod-readiness-gate-inject": "enabled"} if props.ingress is not None else {}
            workload_namespace(self, props.namespace, readiness_gate)
        workload_identity(self, meta, props.name, props.hf_token_secret, props.aws_region)
        if props.api_key_secret is not None:
            api_key_secret_provider_class(self, meta, props.name, props.api_key_secret, props.aws_region)
        self._serving(props, props.name, props.replicas, (labels, pod_labels), selector, meta, floor=False)
        if props.floor_replicas:
            floor = floor_name(props)
            # Its own `name` label: neither Deployment's selector (immutable) matches the other's pods.
            floor_selector = selector_labels(FLOOR_APP, props.name)
            floor_labels = {**floor_selector, "app.kubernetes.io/part-of": PART_OF}
            floor_pods = (floor_labels, {**floor_labels, **pool, **role})
            self._serving(props, floor, props.floor_replicas, floor_pods, floor_selector, meta, floor=True)
        plain_object(
            self,
            "service",
            api_version="v1",
            kind="Service",
            metadata=meta(props.name),
            body={
                "spec": {
                    "type": "ClusterIP",
                    # Only a group's leader serves (its workers run --headless); of a disaggregated workload, the
                    # decode pods (their sidecar prefills a long prompt on the prefill pool).
                    "selector": (
                        {**serving, **role}
                        if props.nodes_per_replica == 1
                        else {**serving, LWS_WORKER_INDEX_LABEL: "0"}
                    ),
                    "ports": [{"name": PORT_NAME, "port": PORT, "targetPort": PORT_NAME, "protocol": "TCP"}],
                }
            },
            source=__name__,
        )
        plain_object(
            self,
            "pdb",
            api_version="policy/v1",
            kind="PodDisruptionBudget",
            metadata=meta(props.name),
            body={
                "spec": {
                    "maxUnavailable": props.pdb_max_unavailable,
                    "selector": {"matchLabels": serving},
                    # A replica that never became Ready (stuck loading) must not block a drain.
                    "unhealthyPodEvictionPolicy": "AlwaysAllow",
                }
            },
            source=__name__,
        )
        if disaggregation is not None:
            self._prefill(replace(props, pd_role="prefill"), disaggregation.prefill_replicas, pool, meta)
            add_objects(self, sidecar_rbac(props.name, props.namespace, labels))
        if props.ingress is not None:
            self._ingress(props, props.ingress, meta)
        if props.compile_cache is not None:
            add_objects(self, writer_objects(props, self.timing))

    def _prefill(self, p: VllmProps, replicas: int, pool: dict[str, str], meta: Any) -> None:
        """The prefill Deployment `<name>-prefill` (its own immutable selector, the workload's instance and pool), and
        a Service over its pods for the workload's ServiceMonitor (its job label is the Service's name)."""
        name = prefill_name(p.name)
        selector = selector_labels(PREFILL_APP, p.name)
        own = {**selector, "app.kubernetes.io/part-of": PART_OF}
        self._serving(p, name, replicas, (own, {**own, **pool, ROLE_LABEL: "prefill"}), selector, meta, floor=False)
        plain_object(
            self,
            "service-prefill",
            api_version="v1",
            kind="Service",
            metadata=meta(name),
            body={
                "spec": {
                    "type": "ClusterIP",
                    "selector": selector,
                    "ports": [{"name": PORT_NAME, "port": PORT, "targetPort": PORT_NAME, "protocol": "TCP"}],
                }
            },
            source=__name__,
        )

    def _serving(
        self,
        p: VllmProps,
        name: str,
        replicas: int,
        labels: tuple[dict[str, str], dict[str, str]],
        selector: dict[str, str],
        meta: Any,
        *,
        floor: bool,
    ) -> None:
        """The Deployment (or LeaderWorkerSet) `name` of `replicas` serving pods; `floor`: the on-demand floor's."""
        suffix = "-floor" if floor else "-prefill" if p.pd_role == "prefill" else ""
        # The object's own labels, and its pods' (the pool label too).
        own, pods = labels
        metadata = {**meta(name, annotations=serving_pod_annotations(p.image)), "labels": own}
        if p.nodes_per_replica == 1:
            spec = self._deployment_spec(p, replicas, pods, selector, floor)
            plain_object(
                self,
                f"deployment{suffix}",
                api_version="apps/v1",
                kind="Deployment",
                metadata=metadata,
                body={"spec": spec},
                source=__name__,
            )
        else:
            spec = self._leader_worker_set_spec(p, replicas, pods, selector, floor)
            plain_object(
                self,
                f"leader-worker-set{suffix}",
                api_version=LWS_API_VERSION,
                kind="LeaderWorkerSet",
                metadata=metadata,
                body={"spec": spec},
                source=__name__,
            )

    def _deployment_spec(
        self, p: VllmProps, replicas: int, labels: dict[str, str], selector: dict[str, str], floor: bool
    ) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            # Surge one new replica before removing an old one: capacity never dips during a rollout.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "progressDeadlineSeconds": p.provisioning_seconds + self.timing.startup_budget_seconds,
            "template": {
                "metadata": {"labels": labels},
                "spec": serving_pod_spec(p, self.timing, selector, floor=floor),
            },
        }

    def _leader_worker_set_spec(
        self, p: VllmProps, replicas: int, labels: dict[str, str], selector: dict[str, str], floor: bool
    ) -> dict[str, Any]:
        return {
            "replicas": replicas,
            # Workers are created with the leader, so the group's pods schedule (and Karpenter launches) together.
            "startupPolicy": "LeaderCreated",
            # As the Deployment: one new group before an old one goes, so capacity never dips during a rollout.
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "leaderWorkerTemplate": {
                "size": p.nodes_per_replica,
                # A failed pod leaves its group's process group broken: recreate the whole group.
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {
                    "metadata": {"labels": labels},
                    "spec": serving_pod_spec(p, self.timing, selector, "leader", floor=floor),
                },
                "workerTemplate": {
                    "metadata": {"labels": labels},
                    "spec": serving_pod_spec(p, self.timing, selector, "worker", floor=floor),
                },
            },
        }

    def _ingress(self, p: VllmProps, i: IngressProps, meta: Any) -> None:
        # The ALB keeps a deregistered pod's connections for as long as the pod drains.
        annotations = ingress_annotations(i, drain_seconds=p.pre_stop_seconds + p.shutdown_timeout_seconds)
        plain_object(
            self,
            "ingress",
            api_version="networking.k8s.io/v1",
            kind="Ingress",
            metadata=meta(p.name, annotations=annotations),
            body={"spec": {"ingressClassName": "alb", "rules": [ingress_rule(i, p.name, PORT_NAME)]}},
            source=__name__,
        )
