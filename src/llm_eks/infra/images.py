"""Which images an environment runs, and the per-environment switch that refuses synth without their digests.

Pure Python (no aws_cdk, cdk8s or jsii): `llm-eks images lock` imports it too. The Helm releases listed here
mirror what InferenceStack installs (charts.addons, GpuDeviceSoftware); a test compares this list with the
releases in the synthesized templates, so the two cannot drift apart.

What the lock covers for an environment: the workload's own image (vLLM, which the benchmark Job reuses, or Ray
LLM) and every image of its Helm releases that `llm_eks.images.charts` can pin through the chart's values. With
`require_image_digests: true` synth stops at the first of those without a digest in the lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from llm_eks.config import EnvironmentConfig, WorkloadConfig
from llm_eks.config.capacity import efa_interfaces
from llm_eks.error_codes import E704
from llm_eks.errors import ConfigError, fail
from llm_eks.images.charts import chart_images
from llm_eks.images.lock import LOCK_FILE, ImageLock, load_lock
from llm_eks.images.snapshot import SNAPSHOT_FILE, SnapshotRecord
from llm_eks.planner import Plan
from llm_eks.versions import (
    AI_GATEWAY_VERSION,
    AWS_LOAD_BALANCER_CONTROLLER_CHART_VERSION,
    DCGM_EXPORTER_CHART_VERSION,
    DISAGG_SIDECAR_IMAGE,
    EFA_DEVICE_PLUGIN_CHART_VERSION,
    ENVOY_GATEWAY_VERSION,
    ENVOY_PROXY_IMAGE,
    EPP_IMAGE,
    EXTERNAL_SECRETS_CHART_VERSION,
    KARPENTER_VERSION,
    KEDA_CHART_VERSION,
    KUBE_PROMETHEUS_STACK_CHART_VERSION,
    KUBERAY_OPERATOR_CHART_VERSION,
    LWS_CHART_VERSION,
    NEURON_HELM_CHART_VERSION,
    NEURON_MONITOR_IMAGE,
    PAUSE_IMAGE,
    PROMETHEUS_OPERATOR_CRDS_CHART_VERSION,
    RAY_LLM_IMAGE,
    SECRETS_STORE_CSI_DRIVER_CHART_VERSION,
    SECRETS_STORE_CSI_PROVIDER_AWS_CHART_VERSION,
    VALKEY_IMAGE,
    VLLM_IMAGE,
)

# CDK context key naming the lock file (default: images.lock.json in the directory cdk runs the app from, which
# is the one holding cdk.json).
LOCK_FILE_CONTEXT = "llm-eks:image-lock-file"


def environment_charts(config: EnvironmentConfig, plans: Sequence[Plan]) -> dict[str, str]:
    """Helm chart -> version for every release the environment's stack installs (`plans`: one per workload, in
    `config.served` order)."""
    workloads = [s.config for s in config.served]
    engines = {w.engine for w in workloads}
    charts = {
        "karpenter-crd": KARPENTER_VERSION,
        "karpenter": KARPENTER_VERSION,
        "prometheus-operator-crds": PROMETHEUS_OPERATOR_CRDS_CHART_VERSION,
        "kube-prometheus-stack": KUBE_PROMETHEUS_STACK_CHART_VERSION,
    }
    # Ray Serve scales its own replicas: KEDA comes with vLLM only.
    if "vllm" in engines:
        charts["keda"] = KEDA_CHART_VERSION
    if "ray-serve" in engines:
        charts["kuberay-operator"] = KUBERAY_OPERATOR_CHART_VERSION
    # vLLM runs a replica that spans nodes as a LeaderWorkerSet.
    if any(s.config.engine == "vllm" and p.nodes_per_replica > 1 for s, p in zip(config.served, plans, strict=True)):
        charts["lws"] = LWS_CHART_VERSION
    # The Secrets Store CSI driver mounts the Hub token and vLLM's API key (charts.workload_secrets).
    if any(w.hf_token_secret is not None or (w.engine == "vllm" and w.api_key) for w in workloads):
        charts["secrets-store-csi-driver"] = SECRETS_STORE_CSI_DRIVER_CHART_VERSION
        charts["secrets-store-csi-driver-provider-aws"] = SECRETS_STORE_CSI_PROVIDER_AWS_CHART_VERSION
    if any(w.engine == "vllm" and w.alb is not None for w in workloads) or (
        config.gateway is not None and config.gateway.expose == "nlb"
    ):
        charts["aws-load-balancer-controller"] = AWS_LOAD_BALANCER_CONTROLLER_CHART_VERSION
    # The gateway: Envoy Gateway with the AI Gateway, and the operator that syncs the tenants' keys.
    if config.gateway is not None:
        charts["gateway-helm"] = ENVOY_GATEWAY_VERSION
        charts["ai-gateway-helm"] = AI_GATEWAY_VERSION
        charts["external-secrets"] = EXTERNAL_SECRETS_CHART_VERSION
    # The node pools run Bottlerocket, whose NVIDIA variant runs the device plugin itself: no nvidia-device-plugin.
    vendors = {plan.instance.accelerator_vendor for plan in plans}
    if "nvidia" in vendors:
        charts["dcgm-exporter"] = DCGM_EXPORTER_CHART_VERSION
    if vendors - {"nvidia"}:
        charts["neuron-helm-chart"] = NEURON_HELM_CHART_VERSION
    # EFA pools (a replica spanning nodes of an instance type with EFA): the EFA device plugin.
    if any(efa_interfaces(s, plan) for s, plan in zip(config.served, plans, strict=True)):
        charts["aws-efa-k8s-device-plugin"] = EFA_DEVICE_PLUGIN_CHART_VERSION
    return charts


def workload_images(w: WorkloadConfig, plan: Plan | None = None) -> list[str]:
    """One workload's own images: its serving image (workload.image, else the pinned release: on Neuron its engine
    path's container, with the pinned vLLM image as the benchmark's client), and the warm headroom's pause image."""
    if plan is not None and plan.neuron is not None:
        serving = [w.image if w.image is not None else plan.neuron.image, VLLM_IMAGE]
    else:
        serving = [w.image if w.image is not None else VLLM_IMAGE if w.engine == "vllm" else RAY_LLM_IMAGE]
    decision = None if plan is None else plan.disaggregation
    # A disaggregated workload's decode pods run llm-d's routing sidecar.
    sidecar = [DISAGG_SIDECAR_IMAGE] if decision is not None and decision.kv_transfer_configs() is not None else []
    return [*serving, *sidecar, *([PAUSE_IMAGE] if w.warm_replicas else [])]


def environment_images(config: EnvironmentConfig, plans: Sequence[Plan]) -> tuple[str, ...]:
    """Every image of the environment the lock covers: the workloads' own first, then the Helm releases' (the
    Thanos image among kube-prometheus-stack's: its sidecars, and the query endpoint Observability applies beside
    them)."""
    own = [ref for s, plan in zip(config.served, plans, strict=True) for ref in workload_images(s.config, plan)]
    if any(plan.neuron is not None for plan in plans):
        # The Neuron monitor's exporter on the Neuron nodes (constructs/gpu_devices.py).
        own.append(NEURON_MONITOR_IMAGE)
    if config.gateway is not None:
        # The gateway's data plane, endpoint pickers and counter store (manifests/gateway): on the system nodes, so
        # not in a GPU node's image snapshot.
        own += [ENVOY_PROXY_IMAGE, EPP_IMAGE, VALKEY_IMAGE]
    chart = [
        image.ref
        for name, version in environment_charts(config, plans).items()
        for image in chart_images(name, version)
    ]
    return tuple(dict.fromkeys([*own, *chart]))


# The accepted_risks id that lets a production environment run images by tag.
IMAGES_BY_TAG = "images-by-tag"


def require_locked(config: EnvironmentConfig, plans: Sequence[Plan], lock: ImageLock) -> None:
    """With `require_image_digests`, or in production unless the risk is accepted, one line naming the first image
    without a locked digest (and how to lock)."""
    production = config.production and IMAGES_BY_TAG not in config.accepted_risks
    if not config.require_image_digests and not production:
        return
    missing = [ref for ref in environment_images(config, plans) if lock.digest(ref) is None]
    if not missing:
        return
    more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
    lacking = f"{missing[0]}{more} ha{'ve' if more else 's'} no digest in {lock.name}"
    lock_it = (
        f"run `llm-eks images lock --env {config.name}` where the registries are reachable, review and commit the file"
    )
    if config.require_image_digests:
        raise ConfigError(
            E704,
            f"environments.{config.name}.require_image_digests: true is not allowed while {lacking}; {lock_it}, or "
            "set require_image_digests to false",
        )
    raise ConfigError(
        E704,
        f"environments.{config.name}.production: true refuses images by tag, and {lacking}; {lock_it}, or accept "
        f'the risk: accepted_risks {{"{IMAGES_BY_TAG}": "<why>"}}',
    )


def app_lock(context_value: object) -> ImageLock:
    """The lock file the CDK app reads: the context value if set, else images.lock.json in the working directory."""
    path = context_value if isinstance(context_value, str) and context_value else LOCK_FILE
    return load_lock(Path(path))


def gpu_node_images(config: EnvironmentConfig, plans: Sequence[Plan], lock: ImageLock | None = None) -> tuple[str, ...]:
    """The images GPU nodes run for this environment: each workload's serving image (and the headroom's pause
    image), and the DCGM exporter on NVIDIA nodes; locked ones by digest."""
    refs: list[str] = []
    for served, plan in zip(config.served, plans, strict=True):
        refs += workload_images(served.config, plan)
        if plan.neuron is not None:
            refs.append(NEURON_MONITOR_IMAGE)
        if plan.instance.accelerator_vendor == "nvidia":
            refs += [image.ref for image in chart_images("dcgm-exporter", DCGM_EXPORTER_CHART_VERSION)]
    lock = lock or ImageLock()
    return tuple(dict.fromkeys(lock.pin(ref) for ref in refs))


def require_snapshot_images(
    config: EnvironmentConfig, plans: Sequence[Plan], record: SnapshotRecord | None, lock: ImageLock | None = None
) -> None:
    """A snapshot this environment names that the record says holds other images than its GPU nodes run (another
    model engine, a new vLLM release) is a one-line error: the nodes would restore it and pull anyway."""
    wanted = {s.config.image_snapshot_id for s in config.served} - {None}
    if record is None or record.snapshot_id not in wanted:
        return
    images = gpu_node_images(config, plans, lock)
    if set(record.images) != set(images):
        missing = sorted(set(images) - set(record.images))
        raise fail(
            E704,
            f"environments.{config.name}.workload.image_snapshot_id",
            record.snapshot_id,
            f"{SNAPSHOT_FILE} says it holds another image list (missing {', '.join(missing) or 'none'}); run "
            f"`llm-eks images snapshot --env {config.name}` again and use the new snapshot",
        )
