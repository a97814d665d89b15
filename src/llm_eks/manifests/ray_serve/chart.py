"""The RayService: Serve config, head and worker groups built from RayServeProps (props.py).

`RayServeChart` is a cdk8s-plus chart (manifests/plus): its ServiceAccount is a cdk8s-plus ServiceAccount, and the
objects an environment adds (serving_objects.add_objects) of the kinds cdk8s-plus models are cdk8s-plus objects too.
The RayService is a custom resource (ray.io/v1), a dict validated against the vendored KubeRay CRD. The typed
attributes PUBLIC_ATTRIBUTES lists are the chart's public API (tests/test_chart_api.py snapshots them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cdk8s
import cdk8s_plus_35 as kplus
import yaml
from constructs import Construct

from llm_eks.manifests import plus
from llm_eks.manifests.labels import PART_OF, app_labels, plain_object
from llm_eks.manifests.pods import (
    POD_INTERFACE,
    SOCKET_INTERFACE_ENV,
    container_security_context,
    hf_token_env,
    hf_token_mount,
    hf_token_volume,
    pod_security_context,
)
from llm_eks.manifests.ray_serve.props import (
    APPLICATION_NAME,
    DO_NOT_DISRUPT,
    IMPORT_PATH,
    METRICS_PORT,
    METRICS_PORT_NAME,
    RAY_DRAIN_TIMEOUT_ENV,
    RAY_SERVE_APP,
    SERVE_PORT,
    STAGED_WEIGHTS_DIR,
    STAGED_WEIGHTS_VOLUME,
    WORKER_GROUP,
    RayServeProps,
    validate,
)
from llm_eks.manifests.serving_objects import workload_identity, workload_namespace
from llm_eks.manifests.weights_staging import fetch_weights_init_container
from llm_eks.planner.engine import ray_engine_kwargs
from llm_eks.planner.result import EFA_RESOURCE


def _typed_engine_kwargs(p: RayServeProps) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "tensor_parallel_size": p.tensor_parallel_size,
        "pipeline_parallel_size": p.pipeline_parallel_size,
    }
    return {**kwargs, **ray_engine_kwargs(p.engine)}


def llm_config(p: RayServeProps) -> dict[str, Any]:
    """The LLMConfig of the model (ray.serve.llm; field names as in Ray 2.60.0, which forbids unknown ones)."""
    deployment: dict[str, Any] = {
        "autoscaling_config": {
            "min_replicas": p.min_replicas,
            "max_replicas": p.max_replicas,
            "target_ongoing_requests": p.target_ongoing_requests,
        },
        # Spot drain and scale-down: a stopping replica finishes its in-flight requests first.
        "graceful_shutdown_timeout_s": p.graceful_shutdown_timeout_seconds,
        "graceful_shutdown_wait_loop_s": p.graceful_shutdown_wait_loop_seconds,
    }
    if p.max_ongoing_requests is not None:
        deployment["max_ongoing_requests"] = p.max_ongoing_requests
    config: dict[str, Any] = {
        "model_loading_config": {"model_id": p.model_id, "model_source": p.model_source},
        "accelerator_type": p.accelerator_type,
        "engine_kwargs": {**_typed_engine_kwargs(p), **p.extra_engine_kwargs},
        # One GPU per bundle, tensor_parallel_size x pipeline_parallel_size bundles (Ray Serve LLM expands
        # bundle_per_worker and adds the accelerator_type constraint to each).
        "placement_group_config": {
            "bundle_per_worker": {"GPU": 1},
            "strategy": "PACK" if p.nodes_per_replica > 1 else "STRICT_PACK",
        },
        "deployment_config": deployment,
        # vLLM's engine metrics through Ray's metrics export (ray_vllm_*): the default since Ray 2.51, stated here
        # because the alerts and the dashboard depend on it.
        "log_engine_metrics": True,
    }
    if p.runtime_env_vars:
        config["runtime_env"] = {"env_vars": dict(p.runtime_env_vars)}
    return config


def serve_config(p: RayServeProps) -> dict[str, Any]:
    """The Serve config KubeRay deploys (serveConfigV2, as a dict)."""
    return {
        "applications": [
            {
                "name": APPLICATION_NAME,
                "route_prefix": "/",
                "import_path": IMPORT_PATH,
                "args": {"llm_configs": [llm_config(p)]},
            }
        ]
    }


def _resources(cpu: str, memory: str, extra: Mapping[str, str] | None = None) -> dict[str, Any]:
    # Requests equal limits: Guaranteed QoS, and the Ray autoscaler reads a node's size from the limits.
    amounts = {"cpu": cpu, "memory": memory, **(extra or {})}
    return {"requests": dict(amounts), "limits": dict(amounts)}


# The chart's public API: attribute name and type. A user's extended chart relies on these; tests/test_chart_api.py
# fails when one is removed or its type changes (a breaking change: a 0.x minor, announced in the changelog).
PUBLIC_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("props", "RayServeProps"),
    # The Serve config KubeRay deploys (serveConfigV2, as a dict).
    ("serve_config", "dict[str, Any]"),
    # The account the head and workers run as (Pod Identity binds it to the token secret and the weights bucket).
    ("service_account", "kplus.ServiceAccount"),
    # The RayService (a custom resource: a plain object); extend it with add_json_patch.
    ("ray_service", "cdk8s.ApiObject"),
    # The labels of the workload's Ray pods (head and workers): select them by these.
    ("selector", "dict[str, str]"),
    # Its NetworkPolicies by name (the ones an environment adds, with the namespace's default-deny): allow more
    # traffic with `add_ingress_rule` on one, or a policy of your own.
    ("network_policies", "dict[str, kplus.NetworkPolicy]"),
)


class RayServeChart(plus.PlusChart):
    """The Ray Serve LLM workload for one model (see the module docstring for how it scales); its public attributes
    are PUBLIC_ATTRIBUTES."""

    props: RayServeProps
    serve_config: dict[str, Any]
    service_account: kplus.ServiceAccount
    ray_service: cdk8s.ApiObject
    selector: dict[str, str]
    network_policies: dict[str, kplus.NetworkPolicy]

    def __init__(self, scope: Construct, construct_id: str, props: RayServeProps) -> None:
        validate(props)
        super().__init__(scope, construct_id)
        self.props = props
        self.serve_config = serve_config(props)
        self.selector = _template_labels(props)
        labels = app_labels(RAY_SERVE_APP, props.name)

        def meta(name: str) -> dict[str, Any]:
            return {"name": name, "namespace": props.namespace, "labels": labels}

        if props.create_namespace:
            workload_namespace(self, props.namespace)
        self.service_account = workload_identity(self, meta, props.name, props.hf_token_secret, props.aws_region)
        self.ray_service = plain_object(
            self,
            "ray-service",
            api_version="ray.io/v1",
            kind="RayService",
            metadata=meta(props.name),
            body={"spec": self._spec(props)},
            source=__name__,
        )

    def _spec(self, p: RayServeProps) -> dict[str, Any]:
        return {
            "serveConfigV2": yaml.safe_dump(self.serve_config, sort_keys=False),
            "upgradeStrategy": {"type": p.upgrade_strategy},
            "rayClusterConfig": {
                "rayVersion": p.ray_version,
                # Token on the GCS, the client server and the dashboard/Jobs API (module docstring).
                "authOptions": {"mode": "token"},
                "enableInTreeAutoscaling": True,
                "autoscalerOptions": {
                    # v2 understands placement groups spanning nodes and per-group idle timeouts.
                    "version": "v2",
                    "upscalingMode": p.upscaling_mode,
                    "idleTimeoutSeconds": p.idle_timeout_seconds,
                    "imagePullPolicy": "IfNotPresent",
                    # KubeRay's own default size for the sidecar, made explicit.
                    "resources": _resources("500m", "512Mi"),
                    "securityContext": container_security_context(),
                },
                "headGroupSpec": head_group_spec(p),
                "workerGroupSpecs": [worker_group_spec(p)],
            },
        }


def _template_labels(p: RayServeProps) -> dict[str, str]:
    # Not app.kubernetes.io/name: KubeRay sets it on Ray pods (to "kuberay") and a template label would win.
    return {"app.kubernetes.io/instance": p.name, "app.kubernetes.io/part-of": PART_OF}


def head_group_spec(p: RayServeProps) -> dict[str, Any]:
    """The head group: system capacity, no Ray work, the cluster's ports."""
    metadata: dict[str, Any] = {"labels": _template_labels(p)}
    if p.head_on_karpenter:
        # Losing the head restarts every replica: Karpenter must not consolidate or replace its node.
        metadata["annotations"] = {DO_NOT_DISRUPT: "true"}
    return {
        # No Ray tasks, actors or Serve replicas on the head: it has no GPU and it is the cluster's brain.
        "rayStartParams": {"num-cpus": "0", "num-gpus": "0"},
        "template": {
            "metadata": metadata,
            "spec": {
                "nodeSelector": dict(p.head_node_selector),
                "tolerations": [dict(t) for t in p.head_tolerations],
                "securityContext": pod_security_context(p.run_as_user),
                "containers": [
                    {
                        "name": "ray-head",
                        "image": p.image,
                        # A pinned tag of a ~10 GB image: pull once per node.
                        "imagePullPolicy": "IfNotPresent",
                        "ports": [
                            {"name": "gcs-server", "containerPort": 6379},
                            {"name": "dashboard", "containerPort": 8265},
                            {"name": "client", "containerPort": 10001},
                            {"name": "serve", "containerPort": SERVE_PORT},
                            {"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT},
                        ],
                        "resources": _resources(p.head_cpu, p.head_memory),
                        "securityContext": container_security_context(),
                    }
                ],
            },
        },
    }


def worker_group_spec(p: RayServeProps) -> dict[str, Any]:
    """The GPU worker group: one node's GPUs per pod, the planned pool, the Spot drain."""
    gpus = str(p.gpus_per_worker)
    extra = {p.gpu_resource: gpus}
    if p.worker_ephemeral_storage is not None:
        extra["ephemeral-storage"] = p.worker_ephemeral_storage
    env = [{"name": RAY_DRAIN_TIMEOUT_ENV, "value": str(p.drain_timeout_seconds)}]
    if p.nodes_per_replica > 1:
        # As the vLLM chart's groups (manifests/vllm/pod.py): NCCL and Gloo on the pod's own interface.
        env += [{"name": name, "value": POD_INTERFACE} for name in SOCKET_INTERFACE_ENV]
    if p.efa_interfaces:
        extra[EFA_RESOURCE] = str(p.efa_interfaces)
    container: dict[str, Any] = {
        "name": "ray-worker",
        "image": p.image,
        "imagePullPolicy": "IfNotPresent",
        "resources": _resources(p.worker_cpu, p.worker_memory, extra),
        "env": env,
        "ports": [{"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT}],
        "securityContext": container_security_context(),
    }
    if p.pre_stop_seconds:
        container["lifecycle"] = {"preStop": {"sleep": {"seconds": p.pre_stop_seconds}}}
    pod: dict[str, Any] = {
        "serviceAccountName": p.name,
        "nodeSelector": dict(p.node_selector),
        "tolerations": [dict(t) for t in p.tolerations],
        "terminationGracePeriodSeconds": p.termination_grace_seconds,
        "securityContext": pod_security_context(p.run_as_user),
        "containers": [container],
    }
    if p.hf_token_secret is not None:
        env.append(hf_token_env())
        container["volumeMounts"] = [hf_token_mount()]
        pod["volumes"] = [hf_token_volume(p.name)]
    if p.staged_weights is not None:
        _with_staged_weights(p, pod, container)
    nodes = p.nodes_per_replica
    return {
        "groupName": WORKER_GROUP,
        # Pods, not model replicas: a replica spanning N nodes needs N worker pods.
        "replicas": p.min_replicas * nodes,
        "minReplicas": p.min_replicas * nodes,
        "maxReplicas": p.max_replicas * nodes,
        "rayStartParams": {"num-gpus": gpus},
        # Advertise the GPU model up front: every bundle of the model asks for accelerator_type:<type>, and
        # without this the autoscaler would not know that a new pod of this group provides it.
        "resources": {f"accelerator_type:{p.accelerator_type}": "1"},
        "template": {"metadata": {"labels": _template_labels(p)}, "spec": pod},
    }


def _with_staged_weights(p: RayServeProps, pod: dict[str, Any], container: dict[str, Any]) -> None:
    """Every worker pod copies the staged checkpoint onto its node before Ray starts there: an init container waits
    for the staging key's marker, then copies the files it lists, each checked against its size and sha256, into
    an emptyDir that the Ray container mounts read-only at STAGED_WEIGHTS_DIR (model_source). Any replica, on any
    of its nodes, then finds the model locally (Ray Serve LLM downloads nothing for a local path)."""
    assert p.staged_weights is not None and p.worker_ephemeral_storage is not None  # validate() checked both
    prefix, key = p.staged_weights
    fetch = fetch_weights_init_container(prefix, key, STAGED_WEIGHTS_DIR, p.image, p.aws_region)
    fetch["volumeMounts"] = [{"name": STAGED_WEIGHTS_VOLUME, "mountPath": STAGED_WEIGHTS_DIR}]
    pod["initContainers"] = [fetch]
    pod.setdefault("volumes", []).append(
        {"name": STAGED_WEIGHTS_VOLUME, "emptyDir": {"sizeLimit": p.worker_ephemeral_storage}}
    )
    mount = {"name": STAGED_WEIGHTS_VOLUME, "mountPath": STAGED_WEIGHTS_DIR, "readOnly": True}
    container.setdefault("volumeMounts", []).append(mount)


def worker_gpus_total(p: RayServeProps) -> int:
    """GPUs the group holds at max replicas (what the node pool's limit must allow)."""
    return p.max_replicas * p.nodes_per_replica * p.gpus_per_worker
