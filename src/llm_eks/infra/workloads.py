"""Map one environment's config and capacity plan onto the props of its charts.

Pure Python (no aws_cdk): every number a chart or node pool uses comes from the plan or the config through here,
so a chart never guesses a tensor-parallel size and a node pool never guesses an instance family.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypeAlias

from llm_eks.catalog.accelerators import FAMILIES
from llm_eks.errors import ConfigError, fail
from llm_eks.images.lock import ImageLock
from llm_eks.infra.config import CAPACITY_TYPES, EnvironmentConfig, ServedWorkload, WorkloadConfig
from llm_eks.infra.images import require_locked
from llm_eks.infra.plan import Plan
from llm_eks.manifests.autoscaling import AutoscalingProps, ScaleToZeroSchedule
from llm_eks.manifests.benchmark import BenchmarkProps
from llm_eks.manifests.headroom import HeadroomProps
from llm_eks.manifests.monitoring import MonitoringProps
from llm_eks.manifests.monitoring_targets import MonitoringTargets
from llm_eks.manifests.node_pools import CpuPoolSpec, GpuPoolSpec, workload_placement
from llm_eks.manifests.ray_monitoring import RayMonitoringProps
from llm_eks.manifests.ray_serve import RayServeProps
from llm_eks.manifests.vllm import IngressProps, VllmProps
from llm_eks.versions import PAUSE_IMAGE

GIB = 1024**3
# The add-ons a workload's charts can wait for, by the names ChartPlan.needs and the CDK stack use.
Addon: TypeAlias = Literal["keda", "kuberay", "lws", "secrets", "weights", "alb"]


@dataclass(frozen=True)
class VllmWorkload:
    """One model served by `vllm serve`: KEDA scales it, Prometheus alerts on it, a benchmark Job measures it."""

    gpu_pool: GpuPoolSpec
    cpu_pool: CpuPoolSpec
    vllm: VllmProps
    autoscaling: AutoscalingProps
    monitoring: MonitoringProps
    benchmark: BenchmarkProps
    # Replica-shaped placeholders kept warm (manifests/headroom.py); 0: none.
    headroom: HeadroomProps | None = None
    # Its name in `workloads`; None: the one-model `workload` shorthand.
    key: str | None = None

    @property
    def service_account(self) -> tuple[str, str]:
        """(namespace, name) of the serving pods' ServiceAccount."""
        return self.vllm.namespace, self.vllm.name

    @property
    def secrets(self) -> tuple[str, ...]:
        """The Secrets Manager secrets (by name) the pods read: the Hub token, the API key."""
        return tuple(name for name in (self.vllm.hf_token_secret, self.vllm.api_key_secret) if name is not None)

    @property
    def api_key_secret(self) -> str | None:
        """The secret holding the endpoint's API key; None when the key is off."""
        return self.vllm.api_key_secret

    @property
    def weights_s3_uri(self) -> str | None:
        """The S3 prefix the pods stream weights from; None: the Hugging Face Hub."""
        return self.vllm.model if self.vllm.weights == "s3" else None


@dataclass(frozen=True)
class RayServeWorkload:
    """One model served by Ray Serve LLM on a KubeRay RayService, which scales its own replicas."""

    gpu_pool: GpuPoolSpec
    cpu_pool: CpuPoolSpec
    ray: RayServeProps
    monitoring: RayMonitoringProps
    # Its name in `workloads`; None: the one-model `workload` shorthand.
    key: str | None = None

    @property
    def service_account(self) -> tuple[str, str]:
        """(namespace, name) of the Ray pods' ServiceAccount."""
        return self.ray.namespace, self.ray.name

    @property
    def secrets(self) -> tuple[str, ...]:
        """The Secrets Manager secrets (by name) the pods read: the Hub token."""
        return () if self.ray.hf_token_secret is None else (self.ray.hf_token_secret,)

    @property
    def api_key_secret(self) -> str | None:
        """Always None: Ray Serve LLM's endpoint has no API key check (see manifests.ray_serve)."""
        return None

    @property
    def weights_s3_uri(self) -> str | None:
        """The S3 prefix the workers stream weights from; None: the Hugging Face Hub."""
        return self.ray.model_source if self.ray.model_source.startswith("s3://") else None


# Everything the stack needs to place one environment's model: one type per engine.
Workload: TypeAlias = VllmWorkload | RayServeWorkload


def slug(model_id: str) -> str:
    """`meta-llama/Llama-3.1-8B-Instruct` -> `llama-3-1-8b-instruct` (object names reviewers can read)."""
    name = model_id.rsplit("/", 1)[-1].lower()
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-")[:40].rstrip("-")


def workload_name(s: ServedWorkload) -> str:
    """`vllm-<model>` for the one-model shorthand (names kept since the first release); `vllm-<key>` in
    `workloads`, where two workloads may serve the same model."""
    prefix = "vllm" if s.config.engine == "vllm" else "ray"
    return f"{prefix}-{slug(s.config.model) if s.key is None else s.key}"


def workload_namespace(s: ServedWorkload) -> str:
    """`inference` for the shorthand; `inference-<key>` in `workloads`: a namespace per workload, so removing one
    workload deletes its own namespace and nothing of another's."""
    return "inference" if s.key is None else f"inference-{s.key}"


def gpu_pool(s: ServedWorkload, plan: Plan) -> GpuPoolSpec:
    """The NodePool for the planned family, sized for this workload's max replicas in whole nodes (unless config
    caps it). Workloads on the same family share it (merge_pools sums their limits) unless one is dedicated."""
    w = s.config
    per_node = plan.instance.accelerators
    if plan.nodes_per_replica > 1:
        nodes = w.replicas.max * plan.nodes_per_replica
    else:
        nodes = math.ceil(w.replicas.max / max(plan.replicas_per_node, 1))
    needed = nodes * per_node
    limit = w.accelerator_limit if w.accelerator_limit is not None else needed
    path = f"{s.path}.accelerator_limit"
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
        name=f"gpu-{plan.instance.family}" + (f"-{s.key}" if w.dedicated_pool and s.key is not None else ""),
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


def shm_size(plan: Plan) -> str:
    """/dev/shm: NCCL's intra-node buffers and the engine's worker processes need more with tensor parallelism."""
    return "2Gi" if plan.gpus_per_pod == 1 else f"{min(4 * plan.gpus_per_pod, 32)}Gi"


def cache_size(plan: Plan) -> str:
    """Model cache: the checkpoint on disk plus 20% and 10 GiB (tokenizer, compile cache, a partial download)."""
    return f"{math.ceil(plan.checkpoint_bytes * 1.2 / GIB) + 10}Gi"


def generated_api_key_secret(config: EnvironmentConfig) -> str:
    """The name of the API key secret the stack generates when the config names none."""
    return f"llm-eks/{config.name}/api-key"


def api_key_secret(config: EnvironmentConfig, s: ServedWorkload | None = None) -> str | None:
    """The Secrets Manager secret holding the vLLM endpoint's API key (of workload `s`, default the environment's
    only one); None when the key is off or the engine has no key check (Ray Serve LLM). Every workload without a
    secret of its own shares the environment's generated key: one endpoint, one key."""
    w = (s or only_workload(config)).config
    if not w.api_key or w.engine != "vllm":
        return None
    return w.api_key_secret or generated_api_key_secret(config)


def only_workload(config: EnvironmentConfig) -> ServedWorkload:
    """The environment's single workload; a ConfigError where `workloads` names several."""
    if len(config.served) != 1:
        raise ConfigError(
            f"environments.{config.name}.workloads: several workloads; name one ({', '.join(config.workloads)})"
        )
    return config.served[0]


def vllm_props(
    config: EnvironmentConfig, s: ServedWorkload, plan: Plan, pool: GpuPoolSpec, region: str | None
) -> VllmProps:
    w = s.config
    if plan.nodes_per_replica > 1 and w.internal_alb:
        raise fail(
            f"{s.path}.internal_alb",
            True,
            f"{plan.model.id} needs {plan.nodes_per_replica} {plan.instance.instance_type} nodes per replica (a "
            "LeaderWorkerSet, whose workers never serve); reach it through its Service, or use engine 'ray-serve'",
        )
    selector, tolerations = placement(w, pool)
    # Config validation allows exactly these two.
    weights: Literal["hf", "s3"] = "s3" if w.weights == "s3" else "hf"
    return VllmProps(
        name=workload_name(s),
        namespace=workload_namespace(s),
        model=w.weights_s3_uri if weights == "s3" and w.weights_s3_uri else plan.checkpoint,
        served_model_name=plan.served_model_name,
        engine=plan.engine,
        tensor_parallel_size=plan.tensor_parallel_size,
        pipeline_parallel_size=plan.pipeline_parallel_size,
        accelerators_per_pod=plan.gpus_per_pod,
        nodes_per_replica=plan.nodes_per_replica,
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
        weights=weights,
        hf_token_secret=w.hf_token_secret,
        api_key_secret=api_key_secret(config, s),
        aws_region=region,
        # Internal ALB only when the environment asks: in-cluster clients use the ClusterIP Service.
        ingress=ingress_props(config) if w.internal_alb else None,
    )


def placement(w: WorkloadConfig, pool: GpuPoolSpec) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The pool's nodeSelector and tolerations; a workload allowing one capacity type is pinned to it, since a pool
    shared with other workloads may allow both."""
    return workload_placement(pool, capacity_type=w.capacity_types[0] if len(w.capacity_types) == 1 else None)


def ingress_props(config: EnvironmentConfig) -> IngressProps:
    """The ALB's listener and inbound CIDRs from `workload.load_balancer` (validated by config: only the one-model
    shorthand has one)."""
    lb = config.workload.load_balancer
    return IngressProps(
        certificate_arn=lb.certificate_arn,
        allow_http=lb.allow_http,
        # Default: the VPC we create (config requires the list for an existing VPC, whose CIDR is never looked up).
        inbound_cidrs=lb.inbound_cidrs or (config.vpc.cidr,),
    )


def autoscaling_props(s: ServedWorkload, plan: Plan) -> AutoscalingProps:
    w = s.config
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


def _replica_price(s: ServedWorkload, plan: Plan) -> float:
    """The plan's $/h per replica; a ConfigError when the instance type has none."""
    if plan.cost_per_replica_hour is None:
        # No price means no on-demand or Spot offer (Capacity Blocks only), which these node pools cannot launch;
        # the cost panels and the plan's $/h would be empty too.
        raise fail(
            f"{s.path}.accelerator",
            plan.instance.instance_type,
            f"{plan.instance.note or 'it has no on-demand price'}; pick an instance type with an on-demand price",
        )
    return plan.cost_per_replica_hour


def _monitoring_targets(s: ServedWorkload, plan: Plan, *, dcgm_service_monitor: bool = True) -> MonitoringTargets:
    """What both engines' monitoring charts take from the SLO, the autoscaling config and the plan; with
    `dcgm_service_monitor` this workload's chart carries the environment's one dcgm-exporter ServiceMonitor."""
    w = s.config
    return MonitoringTargets(
        ttft_p99_seconds=w.slo.ttft_p99_ms / 1000,
        itl_p99_seconds=w.slo.itl_p99_ms / 1000,
        # The plan prices a replica across all the nodes it spans (build_workload refuses a plan without a price).
        cost_per_hour_per_replica=_replica_price(s, plan),
        # Alert when more requests wait than the whole fleet at max scale is meant to queue.
        queue_waiting_threshold=w.autoscaling.waiting_per_replica * w.replicas.max,
        dcgm=plan.instance.accelerator_vendor == "nvidia",
        dcgm_service_monitor=dcgm_service_monitor,
    )


def monitoring_props(
    s: ServedWorkload, plan: Plan, vllm: VllmProps, *, dcgm_service_monitor: bool = True
) -> MonitoringProps:
    return MonitoringProps(
        name=vllm.name,
        namespace=vllm.namespace,
        served_model_name=vllm.served_model_name,
        targets=_monitoring_targets(s, plan, dcgm_service_monitor=dcgm_service_monitor),
    )


def benchmark_props(s: ServedWorkload, cpu: CpuPoolSpec) -> BenchmarkProps:
    w = s.config
    selector, tolerations = workload_placement(cpu)
    return BenchmarkProps(
        name=f"bench-{slug(w.model) if s.key is None else s.key}",
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


def ray_props(s: ServedWorkload, plan: Plan, pool: GpuPoolSpec, region: str | None) -> RayServeProps:
    w = s.config
    selector, tolerations = placement(w, pool)
    gpus = plan.tensor_parallel_size * plan.pipeline_parallel_size
    return RayServeProps(
        name=workload_name(s),
        namespace=workload_namespace(s),
        model_id=plan.served_model_name,
        model_source=w.weights_s3_uri if w.weights == "s3" and w.weights_s3_uri else plan.checkpoint,
        accelerator_type=plan.instance.ray_accelerator_type or plan.instance.accelerator_name,
        gpus_per_worker=min(gpus, plan.instance.accelerators),
        tensor_parallel_size=plan.tensor_parallel_size,
        pipeline_parallel_size=plan.pipeline_parallel_size,
        engine=plan.engine,
        min_replicas=max(w.replicas.min, 1),
        max_replicas=w.replicas.max,
        # Ray Serve adds a replica when ongoing requests per replica pass the planned concurrency.
        target_ongoing_requests=max(1, plan.max_num_seqs),
        worker_cpu=plan.pod_resources.cpu,
        worker_memory=plan.pod_resources.memory,
        node_selector=selector,
        tolerations=tuple(tolerations),
        hf_token_secret=w.hf_token_secret,
        aws_region=region,
        worker_ephemeral_storage=cache_size(plan),
        gpu_resource=pool.resource,
    )


def ray_monitoring_props(
    s: ServedWorkload, plan: Plan, ray: RayServeProps, *, dcgm_service_monitor: bool = True
) -> RayMonitoringProps:
    return RayMonitoringProps(
        name=ray.name,
        namespace=ray.namespace,
        model_id=ray.model_id,
        targets=_monitoring_targets(s, plan, dcgm_service_monitor=dcgm_service_monitor),
    )


def build_workload(
    config: EnvironmentConfig, plan: Plan, region: str | None = None, images: ImageLock | None = None
) -> Workload:
    """All chart props for an environment with one workload; see build_workloads."""
    return build_workloads(config, [plan], region, images)[0]


def _build_one(
    config: EnvironmentConfig,
    s: ServedWorkload,
    plan: Plan,
    region: str | None,
    lock: ImageLock,
    *,
    dcgm_service_monitor: bool,
) -> Workload:
    """All chart props for workload `s`; with `dcgm_service_monitor` its monitoring chart carries the environment's
    one dcgm-exporter ServiceMonitor."""
    _replica_price(s, plan)
    pool = gpu_pool(s, plan)
    cpu = CpuPoolSpec()
    if s.config.engine == "ray-serve":
        ray = ray_props(s, plan, pool, region)
        ray = replace(ray, image=lock.pin(ray.image))
        return RayServeWorkload(
            gpu_pool=pool,
            cpu_pool=cpu,
            ray=ray,
            monitoring=ray_monitoring_props(s, plan, ray, dcgm_service_monitor=dcgm_service_monitor),
            key=s.key,
        )
    vllm = vllm_props(config, s, plan, pool, region)
    vllm = replace(vllm, image=lock.pin(vllm.image))
    return VllmWorkload(
        gpu_pool=pool,
        cpu_pool=cpu,
        vllm=vllm,
        autoscaling=autoscaling_props(s, plan),
        monitoring=monitoring_props(s, plan, vllm, dcgm_service_monitor=dcgm_service_monitor),
        benchmark=benchmark_props(s, cpu),
        headroom=warm_headroom(s, plan, pool, vllm, lock),
        key=s.key,
    )


def build_workloads(
    config: EnvironmentConfig, plans: Sequence[Plan], region: str | None = None, images: ImageLock | None = None
) -> tuple[Workload, ...]:
    """Every workload's chart props (one plan each, in `config.served` order), their GPU pools merged per family:
    one NodePool whose limit is the sum of what each workload's replicas.max needs. Raises ConfigError (one line)
    when a plan cannot be served, two workloads answer to one model name, or the environment requires image digests
    that `images` (the lock file) does not hold. Locked images are pinned `repo:tag@sha256:...`."""
    served = config.served
    if len(plans) != len(served):
        raise ValueError(f"{len(plans)} plans for {len(served)} workloads")  # a bug in the caller
    lock = images or ImageLock()
    require_locked(config, plans, lock)
    _unique_served_names(served, plans)
    built: list[Workload] = []
    headroom_class = True
    # The first workload on NVIDIA GPUs carries the dcgm-exporter ServiceMonitor.
    nvidia = [p.instance.accelerator_vendor == "nvidia" for p in plans]
    dcgm_owner = nvidia.index(True) if True in nvidia else -1
    for index, (s, workload_plan) in enumerate(zip(served, plans, strict=True)):
        workload = _build_one(config, s, workload_plan, region, lock, dcgm_service_monitor=index == dcgm_owner)
        if isinstance(workload, VllmWorkload) and workload.headroom is not None:
            # The PriorityClass is cluster-scoped: the first workload with headroom carries it.
            workload = replace(workload, headroom=replace(workload.headroom, priority_class=headroom_class))
            headroom_class = False
        built.append(workload)
    pools = merge_pools([w.gpu_pool for w in built])
    # Each workload keeps its own headroom check against its own share; the pools now carry the sums.
    return tuple(replace(w, gpu_pool=pools[w.gpu_pool.name]) for w in built)


def _unique_served_names(served: Sequence[ServedWorkload], plans: Sequence[Plan]) -> None:
    """A request's `model` picks the workload (a LoRA adapter's name, its workload), so no two may answer to the
    same name."""
    seen: dict[str, str] = {}
    for s, workload_plan in zip(served, plans, strict=True):
        names = [(f"{s.path}.model", workload_plan.served_model_name)]
        names += [(f"{s.path}.lora_adapters", adapter) for adapter in s.config.lora_adapters]
        for path, name in names:
            if name in seen:
                raise fail(
                    path,
                    name,
                    f"is already served by {seen[name]}; served model and adapter names must be unique in an "
                    "environment (rename one, or drop one of the two)",
                )
            seen[name] = s.path


def merge_pools(pools: Sequence[GpuPoolSpec]) -> dict[str, GpuPoolSpec]:
    """Pools of the same name (same GPU family, not dedicated) become one: the sizes and capacity types of all,
    the sum of their accelerator limits. Workloads pinned to one capacity type keep that in their nodeSelector."""
    merged: dict[str, GpuPoolSpec] = {}
    for pool in pools:
        have = merged.get(pool.name)
        if have is None:
            merged[pool.name] = pool
            continue
        merged[pool.name] = replace(
            have,
            instance_types=tuple(dict.fromkeys((*have.instance_types, *pool.instance_types))),
            capacity_types=tuple(t for t in CAPACITY_TYPES if t in (*have.capacity_types, *pool.capacity_types)),
            accelerator_limit=have.accelerator_limit + pool.accelerator_limit,
        )
    return merged


def warm_headroom(
    s: ServedWorkload, plan: Plan, pool: GpuPoolSpec, vllm: VllmProps, lock: ImageLock
) -> HeadroomProps | None:
    """The placeholders of workload.warm_replicas, which must fit the workload's share of the pool's limit."""
    warm = s.config.warm_replicas
    if not warm:
        return None
    path = f"{s.path}.warm_replicas"
    if plan.nodes_per_replica > 1:
        raise fail(path, warm, "needs a replica that fits one node (this plan spans nodes); use 0")
    held = warm * vllm.accelerators_per_pod
    if held > pool.accelerator_limit:
        raise fail(
            path,
            warm,
            f"holds {held} accelerators, above the node pool's limit of {pool.accelerator_limit} "
            "(workload.accelerator_limit, or what replicas.max needs): lower it or raise the limit",
        )
    return HeadroomProps(replicas=warm, serving=vllm, image=lock.pin(PAUSE_IMAGE))
