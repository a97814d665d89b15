"""`VllmChart`: the objects of one served model (see the package docstring).

Its Deployments, Services, ServiceAccounts, compile-cache Job and P/D sidecar's Role and RoleBinding, and the
NetworkPolicies and Roles an environment adds, are cdk8s-plus objects (manifests/plus builds them so they synthesize
exactly the reviewed dicts), exposed as the typed attributes PUBLIC_ATTRIBUTES lists: a user extends them with
cdk8s-plus's API (`chart.deployment.add_container(...)`, `add_volume`,
`chart.network_policies[...].add_ingress_rule(...)`). The rest are plain objects: custom resources (LeaderWorkerSet,
SecretProviderClass), and the kinds cdk8s-plus-35 has no class for (PodDisruptionBudget) or that stay dicts for now
(Ingress): tests/test_chart_api.py lists each with its reason.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import cdk8s
import cdk8s_plus_35 as kplus
from constructs import Construct

from llm_eks.manifests import plus
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
from llm_eks.manifests.source import sourced_metadata
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

# The chart's public API: attribute name and type. A user's extended chart relies on these; tests/test_chart_api.py
# fails when one is removed or its type changes: a breaking change, made only in a release that may break (0.x: a
# minor) and announced in the changelog.
PUBLIC_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("props", "VllmProps"),
    ("service_account", "kplus.ServiceAccount"),
    # The serving Deployment; None when a LeaderWorkerSet serves (a replica spanning nodes).
    ("deployment", "kplus.Deployment | None"),
    # The on-demand floor's Deployment (floor_replicas > 0, one node per replica).
    ("floor_deployment", "kplus.Deployment | None"),
    # A replica spanning nodes: its LeaderWorkerSet (a custom resource, a plain object), and the floor's.
    ("leader_worker_set", "cdk8s.ApiObject | None"),
    ("floor_leader_worker_set", "cdk8s.ApiObject | None"),
    # A disaggregated workload's prefill Deployment (or, a replica spanning nodes, its LeaderWorkerSet) and the
    # Service over its pods (`deployment` or `leader_worker_set` decodes).
    ("prefill_deployment", "kplus.Deployment | None"),
    ("prefill_leader_worker_set", "cdk8s.ApiObject | None"),
    ("prefill_service", "kplus.Service | None"),
    ("service", "kplus.Service"),
    ("pod_disruption_budget", "cdk8s.ApiObject"),
    # The compile cache's writer Job and its own ServiceAccount (compile_cache set).
    ("compile_cache_job", "kplus.Job | None"),
    ("compile_cache_service_account", "kplus.ServiceAccount | None"),
    # The labels of every serving pod (both Deployments, all pools): select the workload's pods by them.
    ("selector", "dict[str, str]"),
    # Its NetworkPolicies by name (the ones an environment adds, with the namespace's default-deny): allow more
    # traffic with `add_ingress_rule` on one, or a policy of your own.
    ("network_policies", "dict[str, kplus.NetworkPolicy]"),
)


def floor_name(p: VllmProps) -> str:
    """The on-demand floor's Deployment (or LeaderWorkerSet): `<name>-floor`."""
    return f"{p.name}-floor"


def _leaders(p: VllmProps) -> dict[str, str]:
    """The label selecting only a LeaderWorkerSet group's leader (its workers serve no HTTP); none for a Deployment."""
    return {LWS_WORKER_INDEX_LABEL: "0"} if p.nodes_per_replica > 1 else {}


def _split(workload: kplus.Deployment | cdk8s.ApiObject) -> tuple[kplus.Deployment | None, cdk8s.ApiObject | None]:
    """(the Deployment, None) or (None, the LeaderWorkerSet)."""
    return (workload, None) if isinstance(workload, kplus.Deployment) else (None, workload)


class VllmChart(plus.PlusChart):
    """The vLLM serving workload for one model (see the package docstring for the timing arithmetic); its public
    attributes are PUBLIC_ATTRIBUTES."""

    props: VllmProps
    service_account: kplus.ServiceAccount
    deployment: kplus.Deployment | None
    floor_deployment: kplus.Deployment | None
    leader_worker_set: cdk8s.ApiObject | None
    floor_leader_worker_set: cdk8s.ApiObject | None
    prefill_deployment: kplus.Deployment | None
    prefill_leader_worker_set: cdk8s.ApiObject | None
    prefill_service: kplus.Service | None
    service: kplus.Service
    pod_disruption_budget: cdk8s.ApiObject
    compile_cache_job: kplus.Job | None
    compile_cache_service_account: kplus.ServiceAccount | None
    selector: dict[str, str]
    network_policies: dict[str, kplus.NetworkPolicy]

    def __init__(self, scope: Construct, construct_id: str, props: VllmProps) -> None:
        super().__init__(scope, construct_id)
        validate_vllm_props(props)
        self.props = props
        self.deployment = self.floor_deployment = self.prefill_deployment = None
        self.leader_worker_set = self.floor_leader_worker_set = self.prefill_leader_worker_set = None
        self.prefill_service = None
        self.compile_cache_job = self.compile_cache_service_account = None
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
        self.selector = dict(serving)

        def meta(name: str, **extra: Any) -> dict[str, Any]:
            return {"name": name, "namespace": props.namespace, "labels": labels, **extra}

        if props.create_namespace:
            # The ALB controller then gates rollouts on ALB target health, not only on pod readiness.
            readiness_gate = {"elbv2.k8s.aws/pod-readiness-gate-inject": "enabled"} if props.ingress is not None else {}
            workload_namespace(self, props.namespace, readiness_gate)
        self.service_account = workload_identity(self, meta, props.name, props.hf_token_secret, props.aws_region)
        if props.api_key_secret is not None:
            api_key_secret_provider_class(self, meta, props.name, props.api_key_secret, props.aws_region)
        self.deployment, self.leader_worker_set = _split(
            self._serving(props, props.name, props.replicas, (labels, pod_labels), selector, meta, floor=False)
        )
        if props.floor_replicas:
            floor = floor_name(props)
            # Its own `name` label: neither Deployment's selector (immutable) matches the other's pods.
            floor_selector = selector_labels(FLOOR_APP, props.name)
            floor_labels = {**floor_selector, "app.kubernetes.io/part-of": PART_OF}
            floor_pods = (floor_labels, {**floor_labels, **pool, **role})
            self.floor_deployment, self.floor_leader_worker_set = _split(
                self._serving(props, floor, props.floor_replicas, floor_pods, floor_selector, meta, floor=True)
            )
        self.service = self._service(
            "service",
            meta(props.name),
            # Only a group's leader serves (its workers run --headless); of a disaggregated workload, the decode
            # pods (their sidecar prefills a long prompt on the prefill pool).
            {**serving, **role, **_leaders(props)},
        )
        self.pod_disruption_budget = plain_object(
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
            account_obj, job_obj = writer_objects(props, self.timing)
            account = plus.service_account(self, "serviceaccount-" + account_obj["metadata"]["name"], account_obj)
            self.compile_cache_service_account = account
            self.compile_cache_job = plus.job(self, "job-" + job_obj["metadata"]["name"], job_obj, account)

    def _service(self, construct_id: str, metadata: dict[str, Any], selector: dict[str, str]) -> kplus.Service:
        """A ClusterIP Service over `selector`'s pods on the serving port (named, so it follows the pods' port)."""
        obj = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": sourced_metadata(metadata, __name__),
            "spec": {
                "type": "ClusterIP",
                "selector": selector,
                "ports": [{"name": PORT_NAME, "port": PORT, "targetPort": PORT_NAME, "protocol": "TCP"}],
            },
        }
        return plus.service(self, construct_id, obj)

    def _prefill(self, p: VllmProps, replicas: int, pool: dict[str, str], meta: Any) -> None:
        """The prefill Deployment (or LeaderWorkerSet) `<name>-prefill` (its own immutable selector, the workload's
        instance and pool), and a Service over its pods (a group's leaders) for the workload's ServiceMonitor (its
        job label is the Service's name)."""
        name = prefill_name(p.name)
        selector = selector_labels(PREFILL_APP, p.name)
        own = {**selector, "app.kubernetes.io/part-of": PART_OF}
        self.prefill_deployment, self.prefill_leader_worker_set = _split(
            self._serving(p, name, replicas, (own, {**own, **pool, ROLE_LABEL: "prefill"}), selector, meta, floor=False)
        )
        self.prefill_service = self._service("service-prefill", meta(name), {**selector, **_leaders(p)})

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
    ) -> kplus.Deployment | cdk8s.ApiObject:
        """The Deployment (or LeaderWorkerSet, a custom resource) `name` of `replicas` serving pods; `floor`: the
        on-demand floor's."""
        suffix = "-floor" if floor else "-prefill" if p.pd_role == "prefill" else ""
        # The object's own labels, and its pods' (the pool label too).
        own, pods = labels
        metadata = {**meta(name, annotations=serving_pod_annotations(p.image)), "labels": own}
        if p.nodes_per_replica == 1:
            spec = self._deployment_spec(p, replicas, pods, selector, floor)
            obj = {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": sourced_metadata(metadata, __name__),
                "spec": spec,
            }
            return plus.deployment(self, f"deployment{suffix}", obj, self.service_account)
        spec = self._leader_worker_set_spec(p, replicas, pods, selector, floor)
        return plain_object(
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
