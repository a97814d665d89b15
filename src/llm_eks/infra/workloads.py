"""Map one environment's config and capacity plan onto the props of its charts.

Pure Python (no aws_cdk): every number a chart or node pool uses comes from the plan or the config through here,
so a chart never guesses a tensor-parallel size and a node pool never guesses an instance family.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

import cdk8s

from llm_eks.catalog.accelerators import FAMILIES
from llm_eks.errors import ConfigError, fail
from llm_eks.images.lock import ImageLock
from llm_eks.infra.config import EnvironmentConfig
from llm_eks.infra.images import require_locked
from llm_eks.infra.plan import Plan
from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.autoscaling import AutoscalingProps, ScaleToZeroSchedule, VllmAutoscalingChart
from llm_eks.manifests.benchmark import BENCHMARK_APP, BenchmarkChart, BenchmarkProps
from llm_eks.manifests.labels import VLLM_APP, selector_labels
from llm_eks.manifests.monitoring import MonitoringChart, MonitoringProps
from llm_eks.manifests.monitoring_targets import MonitoringTargets
from llm_eks.manifests.node_pools import CpuPoolSpec, GpuPoolSpec, NodePoolsChart, NodePoolsProps, workload_placement
from llm_eks.manifests.ray_monitoring import RayMonitoringChart, RayMonitoringProps, pod_selector
from llm_eks.manifests.ray_serve import RayServeChart, RayServeProps
from llm_eks.manifests.serving_objects import add_objects
from llm_eks.manifests.vllm import PORT, IngressProps, VllmChart, VllmProps

GIB = 1024**3
# The flags the workload charts set themselves from typed props (they reject them in engine_args).
_CHART_OWNED_FLAGS = ("--tensor-parallel-size", "--pipeline-parallel-size", "--served-model-name")


@dataclass(frozen=True)
class Workload:
    """Everything the stack needs to place one environment's model."""

    gpu_pool: GpuPoolSpec
    cpu_pool: CpuPoolSpec
    vllm: VllmProps | None
    autoscaling: AutoscalingProps | None
    monitoring: MonitoringProps | None
    benchmark: BenchmarkProps | None
    ray: RayServeProps | None
    ray_monitoring: RayMonitoringProps | None = None


def slug(model_id: str) -> str:
    """`meta-llama/Llama-3.1-8B-Instruct` -> `llama-3-1-8b-instruct` (object names reviewers can read)."""
    name = model_id.rsplit("/", 1)[-1].lower()
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-")[:40].rstrip("-")


def workload_name(config: EnvironmentConfig) -> str:
    prefix = "vllm" if config.workload.engine == "vllm" else "ray"
    return f"{prefix}-{slug(config.workload.model)}"


def gpu_pool(config: EnvironmentConfig, plan: Plan) -> GpuPoolSpec:
    """One NodePool for the planned family, sized for max replicas in whole nodes (unless config caps it)."""
    w = config.workload
    per_node = plan.instance.accelerators
    if plan.nodes_per_replica > 1:
        nodes = w.replicas.max * plan.nodes_per_replica
    else:
        nodes = math.ceil(w.replicas.max / max(plan.replicas_per_node, 1))
    needed = nodes * per_node
    limit = w.accelerator_limit if w.accelerator_limit is not None else needed
    path = f"environments.{config.name}.workload.accelerator_limit"
    if limit < per_node:
        raise fail(path, limit, f"must be at least one {plan.instance.instance_type} node's {per_node} accelerators")
    if limit < needed:
        raise fail(
            path,
            limit,
            f"must be at least {needed}: replicas.max {w.replicas.max} needs {nodes} {plan.instance.instance_type} "
            f"node(s) of {per_node}; lower replicas.max or raise the limit",
        )
    return GpuPoolSpec(
        name=f"gpu-{plan.instance.family}",
        vendor=plan.instance.accelerator_vendor,
        instance_family=plan.instance.family,
        instance_types=pool_sizes(plan),
        capacity_types=w.capacity_types,
        accelerator_limit=limit,
    )


# A bigger size of the planned family may serve a replica for at most this multiple of the planned price.
_SIZE_PRICE_CAP = 1.5


def pool_sizes(plan: Plan) -> tuple[str, ...]:
    """The planned size plus the family's sizes that hold the same pod (same accelerators, no less CPU, memory or
    NVMe) for at most 1.5x its price: more Spot pools to draw from when one runs dry, at a bounded cost."""
    planned = plan.instance
    price = planned.on_demand_usd_per_hour
    sizes = [
        other.instance_type
        for other in FAMILIES[planned.family]
        if other.instance_type == planned.instance_type
        or (
            other.accelerators == planned.accelerators
            and other.vcpus >= planned.vcpus
            and other.memory_gib >= planned.memory_gib
            and other.local_nvme_gb >= planned.local_nvme_gb
            and price is not None
            and other.on_demand_usd_per_hour is not None
            and other.on_demand_usd_per_hour <= price * _SIZE_PRICE_CAP
        )
    ]
    return tuple(sizes)


def engine_args(plan: Plan) -> tuple[str, ...]:
    """The plan's `vllm serve` arguments minus the flags the chart sets from typed props."""
    args = list(plan.engine_args)
    out: list[str] = []
    i = 0
    while i < len(args):
        if args[i] in _CHART_OWNED_FLAGS:
            i += 2
            continue
        out.append(args[i])
        i += 1
    return tuple(out)


def shm_size(plan: Plan) -> str:
    """/dev/shm: NCCL's intra-node buffers and the engine's worker processes need more with tensor parallelism."""
    return "2Gi" if plan.gpus_per_pod == 1 else f"{min(4 * plan.gpus_per_pod, 32)}Gi"


def cache_size(plan: Plan) -> str:
    """Model cache: the checkpoint on disk plus 20% and 10 GiB (tokenizer, compile cache, a partial download)."""
    return f"{math.ceil(plan.checkpoint_bytes * 1.2 / GIB) + 10}Gi"


def generated_api_key_secret(config: EnvironmentConfig) -> str:
    """The name of the API key secret the stack generates when the config names none."""
    return f"llm-eks/{config.name}/api-key"


def api_key_secret(config: EnvironmentConfig) -> str | None:
    """The Secrets Manager secret holding the vLLM endpoint's API key; None when the key is off or the engine has
    no key check (Ray Serve LLM)."""
    w = config.workload
    if not w.api_key or w.engine != "vllm":
        return None
    return w.api_key_secret or generated_api_key_secret(config)


def vllm_props(config: EnvironmentConfig, plan: Plan, pool: GpuPoolSpec, region: str | None) -> VllmProps:
    w = config.workload
    if plan.nodes_per_replica > 1:
        raise ConfigError(
            f"environments.{config.name}.workload.engine: 'vllm' is not allowed; {plan.model.id} needs "
            f"{plan.nodes_per_replica} {plan.instance.instance_type} nodes per replica (pipeline parallel "
            f"{plan.pipeline_parallel_size}): use engine 'ray-serve', quantization, or a bigger instance"
        )
    selector, tolerations = workload_placement(pool)
    return VllmProps(
        name=workload_name(config),
        model=w.weights_s3_uri if w.weights == "s3" and w.weights_s3_uri else plan.checkpoint,
        served_model_name=plan.served_model_name,
        engine_args=engine_args(plan),
        tensor_parallel_size=plan.tensor_parallel_size,
        pipeline_parallel_size=plan.pipeline_parallel_size,
        accelerators_per_pod=plan.gpus_per_pod,
        accelerators_per_node=plan.instance.accelerators,
        accelerator_resource=pool.resource,
        cpu=plan.pod_resources.cpu,
        memory=plan.pod_resources.memory,
        shm_size=shm_size(plan),
        cache_size=cache_size(plan),
        startup_seconds=math.ceil(plan.cold_start.startup_s),
        replicas=max(w.replicas.min, 1),
        node_selector=selector,
        tolerations=tuple(tolerations),
        weights=w.weights,  # type: ignore[arg-type]
        hf_token_secret=w.hf_token_secret,
        api_key_secret=api_key_secret(config),
        aws_region=region,
        # Internal ALB only when the environment asks: in-cluster clients use the ClusterIP Service.
        ingress=ingress_props(config) if w.internal_alb else None,
    )


def ingress_props(config: EnvironmentConfig) -> IngressProps:
    """The ALB's listener and inbound CIDRs from `workload.load_balancer` (validated by config)."""
    lb = config.workload.load_balancer
    return IngressProps(
        certificate_arn=lb.certificate_arn,
        allow_http=lb.allow_http,
        # Default: the VPC we create (config requires the list for an existing VPC, whose CIDR is never looked up).
        inbound_cidrs=lb.inbound_cidrs or (config.vpc.cidr,),
    )


def autoscaling_props(config: EnvironmentConfig, plan: Plan) -> AutoscalingProps:
    w = config.workload
    a = w.autoscaling
    schedule = None
    if a.scale_to_zero is not None:
        schedule = ScaleToZeroSchedule(
            timezone=a.scale_to_zero.timezone,
            start=a.scale_to_zero.start,
            end=a.scale_to_zero.end,
            replicas=max(w.replicas.min, 1),
        )
    return AutoscalingProps(
        max_replicas=w.replicas.max,
        waiting_requests_per_replica=a.waiting_per_replica,
        kv_cache_usage_target=a.kv_cache_usage,
        min_replicas=w.replicas.min,
        scale_to_zero=schedule,
        # Scale-down must wait out a cold start, or a bounce costs a full model load.
        scale_down_stabilization_seconds=max(600, math.ceil(plan.cold_start.scale_out_s)),
    )


def _monitoring_targets(config: EnvironmentConfig, plan: Plan) -> MonitoringTargets:
    """What both engines' monitoring charts take from the SLO, the autoscaling config and the plan."""
    w = config.workload
    return MonitoringTargets(
        ttft_p99_seconds=w.slo.ttft_p99_ms / 1000,
        itl_p99_seconds=w.slo.itl_p99_ms / 1000,
        # The plan prices a replica across all the nodes it spans (build_workload refuses a plan without a price).
        cost_per_hour_per_replica=plan.cost_per_replica_hour,
        # Alert when more requests wait than the whole fleet at max scale is meant to queue.
        queue_waiting_threshold=w.autoscaling.waiting_per_replica * w.replicas.max,
        dcgm=plan.instance.accelerator_vendor == "nvidia",
    )


def monitoring_props(config: EnvironmentConfig, plan: Plan, vllm: VllmProps) -> MonitoringProps:
    return MonitoringProps(
        name=vllm.name, served_model_name=vllm.served_model_name, targets=_monitoring_targets(config, plan)
    )


def benchmark_props(config: EnvironmentConfig, cpu: CpuPoolSpec) -> BenchmarkProps:
    w = config.workload
    selector, tolerations = workload_placement(cpu)
    return BenchmarkProps(
        name=f"bench-{slug(w.model)}",
        input_len=w.typical_input_tokens,
        output_len=w.typical_output_tokens,
        num_prompts=w.benchmark.num_prompts,
        request_rate=w.benchmark.request_rate,
        max_concurrency=w.target_concurrency * w.replicas.max,
        slo_ttft_p99_ms=w.slo.ttft_p99_ms,
        slo_itl_p99_ms=w.slo.itl_p99_ms,
        node_selector=selector,
        tolerations=tuple(tolerations),
    )


def ray_props(config: EnvironmentConfig, plan: Plan, pool: GpuPoolSpec, region: str | None) -> RayServeProps:
    w = config.workload
    selector, tolerations = workload_placement(pool)
    gpus = plan.tensor_parallel_size * plan.pipeline_parallel_size
    quantization = _flag_value(plan.engine_args, "--quantization")
    return RayServeProps(
        name=workload_name(config),
        model_id=plan.served_model_name,
        model_source=w.weights_s3_uri if w.weights == "s3" and w.weights_s3_uri else plan.checkpoint,
        accelerator_type=plan.instance.ray_accelerator_type or plan.instance.accelerator_name,
        gpus_per_worker=min(gpus, plan.instance.accelerators),
        tensor_parallel_size=plan.tensor_parallel_size,
        pipeline_parallel_size=plan.pipeline_parallel_size,
        max_model_len=plan.max_model_len,
        gpu_memory_utilization=plan.gpu_memory_utilization,
        min_replicas=max(w.replicas.min, 1),
        max_replicas=w.replicas.max,
        # Ray Serve adds a replica when ongoing requests per replica pass the planned concurrency.
        target_ongoing_requests=max(1, plan.max_num_seqs),
        worker_cpu=plan.pod_resources.cpu,
        worker_memory=plan.pod_resources.memory,
        node_selector=selector,
        tolerations=tuple(tolerations),
        kv_cache_dtype=w.kv_cache_dtype,
        quantization=quantization,
        max_num_batched_tokens=plan.max_num_batched_tokens,
        max_num_seqs=plan.max_num_seqs,
        hf_token_secret=w.hf_token_secret,
        aws_region=region,
        worker_ephemeral_storage=cache_size(plan),
        gpu_resource=pool.resource,
    )


def ray_monitoring_props(config: EnvironmentConfig, plan: Plan, ray: RayServeProps) -> RayMonitoringProps:
    return RayMonitoringProps(name=ray.name, model_id=ray.model_id, targets=_monitoring_targets(config, plan))


def _flag_value(args: tuple[str, ...], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
    return None


def build_workload(
    config: EnvironmentConfig, plan: Plan, region: str | None = None, images: ImageLock | None = None
) -> Workload:
    """All chart props for one environment; raises ConfigError (one line) when the plan cannot be served, or when
    the environment requires image digests that `images` (the lock file) does not hold. Locked images are pinned
    `repo:tag@sha256:...`."""
    lock = images or ImageLock()
    require_locked(config, plan, lock)
    if plan.cost_per_replica_hour is None:
        # No price means no on-demand or Spot offer (Capacity Blocks only), which these node pools cannot launch;
        # the cost panels and the plan's $/h would be empty too.
        raise fail(
            f"environments.{config.name}.workload.accelerator",
            plan.instance.instance_type,
            f"{plan.instance.note or 'it has no on-demand price'}; pick an instance type with an on-demand price",
        )
    pool = gpu_pool(config, plan)
    cpu = CpuPoolSpec()
    if config.workload.engine == "ray-serve":
        ray = ray_props(config, plan, pool, region)
        ray = replace(ray, image=lock.pin(ray.image))
        return Workload(pool, cpu, None, None, None, None, ray, ray_monitoring_props(config, plan, ray))
    vllm = vllm_props(config, plan, pool, region)
    vllm = replace(vllm, image=lock.pin(vllm.image))
    return Workload(
        gpu_pool=pool,
        cpu_pool=cpu,
        vllm=vllm,
        autoscaling=autoscaling_props(config, plan),
        monitoring=monitoring_props(config, plan, vllm),
        benchmark=benchmark_props(config, cpu),
        ray=None,
    )


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
    props: Any = workload.vllm or workload.ray
    return props.namespace, props.name


def workload_secrets(workload: Workload) -> tuple[str, ...]:
    """The Secrets Manager secrets (by name) the workload's ServiceAccount reads: the Hub token, the API key."""
    props: Any = workload.vllm or workload.ray
    secrets = (props.hf_token_secret, workload.vllm.api_key_secret if workload.vllm is not None else None)
    return tuple(name for name in secrets if name is not None)


def prerequisites(workload: Workload, config: EnvironmentConfig) -> tuple[str, ...]:
    """The add-ons the workload chart itself waits for (besides its node pools)."""
    w = config.workload
    needs = ["kuberay"] if workload.ray is not None else []
    if workload_secrets(workload):
        needs.append("secrets")
    if w.weights == "s3":
        needs.append("weights")
    if workload.vllm is not None and workload.vllm.ingress is not None:
        needs.append("alb")
    return tuple(needs)


def addons(workload: Workload, config: EnvironmentConfig) -> tuple[str, ...]:
    """Every add-on this environment installs besides Karpenter and observability. Ray Serve scales its own
    replicas, so KEDA comes only with vLLM (its autoscaling chart waits for it)."""
    return (*prerequisites(workload, config), *(("keda",) if workload.vllm is not None else ()))


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
    if workload.ray is not None:
        assert workload.ray_monitoring is not None
        r = workload.ray
        ray = RayServeChart(app, "ray-serve", r)
        # The namespace's policies travel with the workload: one apply, so no pod ever runs unprotected.
        add_objects(ray, netpol.ray_policies(r.namespace, r.name, pod_selector(r.name)))
        return [
            *charts,
            ChartPlan("ray-serve", ray, needs=("node-pools", *extra)),
            ChartPlan(
                "monitoring",
                RayMonitoringChart(app, "monitoring", workload.ray_monitoring),
                needs=("ray-serve", "observability"),
            ),
        ]
    assert workload.vllm is not None and workload.autoscaling is not None and workload.monitoring is not None
    vllm = workload.vllm
    vllm_chart = VllmChart(app, "vllm", vllm)
    bench = workload.benchmark
    policies = netpol.vllm_policies(
        vllm.namespace,
        vllm.name,
        selector_labels(VLLM_APP, vllm.name),
        PORT,
        benchmark=None if bench is None else selector_labels(BENCHMARK_APP, bench.name),
        # Target type ip: the internal ALB's ENIs connect to the pods directly, from its own subnets (no pod's).
        alb_cidrs=v.load_balancer_subnet_cidrs() if vllm.ingress is not None else (),
    )
    add_objects(vllm_chart, policies)
    charts += [
        ChartPlan("vllm", vllm_chart, needs=("node-pools", *extra)),
        ChartPlan(
            "autoscaling", VllmAutoscalingChart(app, "autoscaling", vllm, workload.autoscaling), ("vllm", "keda")
        ),
        ChartPlan("monitoring", MonitoringChart(app, "monitoring", workload.monitoring), ("vllm", "observability")),
    ]
    if bench is not None:
        charts.append(
            ChartPlan("benchmark", BenchmarkChart(app, "benchmark", vllm, bench), needs=("vllm",), apply=False)
        )
    return charts
