"""An environment's charts, in apply order, built from its workload props (infra/workloads.py): the one place charts
are built. The CDK stack applies them through the cluster; `llm-eks manifests` writes the same objects for GitOps.
Also which add-ons and secrets a workload's charts need before they apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cdk8s

from llm_eks.infra.config import EnvironmentConfig
from llm_eks.infra.workloads import Addon, RayServeWorkload, VllmWorkload, Workload
from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.autoscaling import VllmAutoscalingChart
from llm_eks.manifests.benchmark import BENCHMARK_APP, BenchmarkChart
from llm_eks.manifests.headroom import headroom_objects
from llm_eks.manifests.labels import VLLM_APP, selector_labels
from llm_eks.manifests.monitoring import MonitoringChart
from llm_eks.manifests.node_pools import NodePoolsChart, NodePoolsProps
from llm_eks.manifests.ray_monitoring import RayMonitoringChart, pod_selector
from llm_eks.manifests.ray_serve import RayServeChart
from llm_eks.manifests.serving_objects import add_objects
from llm_eks.manifests.vllm import PORT, VllmChart


@dataclass(frozen=True)
class ChartPlan:
    """One chart of an environment, in apply order, with what must exist in the cluster before it."""

    id: str
    chart: cdk8s.Chart
    # Prerequisites by name: "karpenter", "observability", "keda", "kuberay", "secrets", "weights", "alb", or the
    # id of an earlier chart. The CDK stack maps each to a construct; a GitOps pipeline to a sync wave.
    needs: tuple[str, ...] = ()
    # False: written for review only, applied by hand (a Job cannot be updated in place).
    apply: bool = True


def service_account(workload: Workload) -> tuple[str, str]:
    """(namespace, name) of the workload pods' ServiceAccount, the subject of their Pod Identity association."""
    return workload.service_account


def workload_secrets(workload: Workload) -> tuple[str, ...]:
    """The Secrets Manager secrets (by name) the workload's ServiceAccount reads: the Hub token, the API key."""
    return workload.secrets


def prerequisites(workload: Workload, config: EnvironmentConfig) -> tuple[Addon, ...]:
    """The add-ons the workload chart itself waits for (besides its node pools)."""
    needs: list[Addon] = ["kuberay"] if isinstance(workload, RayServeWorkload) else []
    if workload.secrets:
        needs.append("secrets")
    if config.workload.weights == "s3":
        needs.append("weights")
    if isinstance(workload, VllmWorkload) and workload.vllm.ingress is not None:
        needs.append("alb")
    return tuple(needs)


def addons(workload: Workload, config: EnvironmentConfig) -> tuple[Addon, ...]:
    """Every add-on this environment installs besides Karpenter and observability. Ray Serve scales its own
    replicas, so KEDA comes only with vLLM (its autoscaling chart waits for it)."""
    keda: tuple[Addon, ...] = ("keda",) if isinstance(workload, VllmWorkload) else ()
    return (*prerequisites(workload, config), *keda)


def addon_namespaces(workload: Workload, config: EnvironmentConfig) -> list[dict[str, Any]]:
    """The namespaces of this environment's add-ons, at the constructs' defaults, each with its Pod Security labels
    and NetworkPolicies: what the CDK stack applies before each add-on's Helm releases, and what a GitOps pipeline
    applies before installing the add-ons itself (into these namespaces, without --create-namespace)."""
    # The control plane calls webhooks and the external metrics API from its ENIs in the VPC's subnets.
    cidrs = (config.vpc.cidr,)
    names = addons(workload, config)
    keda = [netpol.pods(netpol.KEDA_OPERATOR_POD, netpol.KEDA_NAMESPACE)] if "keda" in names else []
    objects = netpol.monitoring_namespace(netpol.MONITORING_NAMESPACE, cidrs, keda)
    if "kuberay" in names:
        objects += netpol.kuberay_namespace(netpol.KUBERAY_NAMESPACE)
    if "keda" in names:
        objects += netpol.keda_namespace(netpol.KEDA_NAMESPACE, cidrs)
    if workload.gpu_pool.vendor == "nvidia":
        objects += netpol.nvidia_namespace(netpol.NVIDIA_NAMESPACE)
    if workload.gpu_pool.vendor == "neuron":
        objects += netpol.neuron_namespace(netpol.NEURON_NAMESPACE)
    return objects


def build_charts(
    app: cdk8s.App,
    config: EnvironmentConfig,
    workload: Workload,
    *,
    node_role_name: str,
    security_group_ids: tuple[str, ...],
) -> list[ChartPlan]:
    """Every chart of one environment. The single place charts are built: the CDK stack applies these through
    the cluster, `llm-eks manifests` writes the same objects for GitOps."""
    v = config.vpc
    pools = NodePoolsProps(
        cluster_name=config.cluster_name,
        node_role_name=node_role_name,
        gpu_pools=(workload.gpu_pool,),
        cpu_pool=workload.cpu_pool,
        security_group_ids=security_group_ids,
        subnet_ids=v.private_subnet_ids if v.imported else (),
        image_snapshot_id=config.workload.image_snapshot_id,
        tags=dict(config.tags),
    )
    charts = [ChartPlan("node-pools", NodePoolsChart(app, "node-pools", pools), needs=("karpenter",))]
    extra = prerequisites(workload, config)
    if isinstance(workload, RayServeWorkload):
        return [*charts, *_ray_serve_charts(app, workload, extra)]
    return [*charts, *_vllm_charts(app, config, workload, extra)]


def _ray_serve_charts(app: cdk8s.App, workload: RayServeWorkload, extra: tuple[Addon, ...]) -> list[ChartPlan]:
    r = workload.ray
    ray = RayServeChart(app, "ray-serve", r)
    # The namespace's policies travel with the workload: one apply, so no pod ever runs unprotected.
    add_objects(ray, netpol.ray_policies(r.namespace, r.name, pod_selector(r.name)))
    return [
        ChartPlan("ray-serve", ray, needs=("node-pools", *extra)),
        ChartPlan(
            "monitoring",
            RayMonitoringChart(app, "monitoring", workload.monitoring),
            needs=("ray-serve", "observability"),
        ),
    ]


def _vllm_charts(
    app: cdk8s.App, config: EnvironmentConfig, workload: VllmWorkload, extra: tuple[Addon, ...]
) -> list[ChartPlan]:
    vllm = workload.vllm
    vllm_chart = VllmChart(app, "vllm", vllm)
    bench = workload.benchmark
    policies = netpol.vllm_policies(
        vllm.namespace,
        vllm.name,
        selector_labels(VLLM_APP, vllm.name),
        PORT,
        benchmark=selector_labels(BENCHMARK_APP, bench.name),
        # Target type ip: the internal ALB's ENIs connect to the pods directly, from its own subnets (no pod's).
        alb_cidrs=config.vpc.load_balancer_subnet_cidrs() if vllm.ingress is not None else (),
    )
    add_objects(vllm_chart, policies)
    if workload.headroom is not None:
        add_objects(vllm_chart, headroom_objects(workload.headroom))
    return [
        ChartPlan("vllm", vllm_chart, needs=("node-pools", *extra)),
        ChartPlan(
            "autoscaling", VllmAutoscalingChart(app, "autoscaling", vllm, workload.autoscaling), ("vllm", "keda")
        ),
        ChartPlan("monitoring", MonitoringChart(app, "monitoring", workload.monitoring), ("vllm", "observability")),
        ChartPlan("benchmark", BenchmarkChart(app, "benchmark", vllm, bench), needs=("vllm",), apply=False),
    ]
