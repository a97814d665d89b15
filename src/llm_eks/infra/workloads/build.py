"""Every workload of an environment built from its config and plans, checked across workloads (served names), with
their GPU pools merged and the cluster-wide objects given to one workload each."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from llm_eks.config import EnvironmentConfig, ServedWorkload
from llm_eks.config.canary_capacity import check_canary_capacity
from llm_eks.config.capacity import check_reservations, floor_replicas, replica_price, reservation
from llm_eks.config.plans import fallback_plan
from llm_eks.error_codes import E120, E137
from llm_eks.errors import fail
from llm_eks.images.lock import ImageLock
from llm_eks.infra.images import require_locked
from llm_eks.infra.workloads.gateway import gateway_props
from llm_eks.infra.workloads.pinning import require_pinned_revisions
from llm_eks.infra.workloads.pools import (
    FALLBACK_WEIGHT,
    PRIMARY_WEIGHT,
    cpu_pool,
    fallback_pool,
    floor_pool,
    gpu_pool,
    merge_pools,
)
from llm_eks.infra.workloads.props import (
    adapter_staging_props,
    autoscaling_props,
    benchmark_props,
    disaggregation_props,
    monitoring_props,
    ray_monitoring_props,
    ray_props,
    vllm_props,
    weights_staging_props,
    with_staged_ray_weights,
    with_staged_weights,
)
from llm_eks.infra.workloads.types import RayServeWorkload, VllmWorkload, Workload
from llm_eks.manifests.dashboard import ExtraPanel
from llm_eks.manifests.gateway import GatewayProps
from llm_eks.manifests.gateway.panels import gateway_panels
from llm_eks.manifests.headroom import HeadroomProps
from llm_eks.manifests.node_pools import GpuPoolSpec
from llm_eks.manifests.vllm import VllmProps
from llm_eks.manifests.weights_staging import WeightsStagingProps, compile_cache_prefix
from llm_eks.planner import Plan
from llm_eks.versions import NEURON_MONITOR_IMAGE, PAUSE_IMAGE


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
    reserved = reservation(config, plan)
    replica_price(s, plan, reserved)
    pool = gpu_pool(s, plan, reserved, config.compute)
    cpu = cpu_pool(config.compute)
    if s.config.engine == "ray-serve":
        ray = ray_props(s, plan, pool, region, cpu)
        ray = replace(ray, image=lock.pin(ray.image))
        ray_staging = weights_staging_props(s, plan, ray, cpu) if s.config.weights == "staged" else None
        if ray_staging is not None:
            ray = with_staged_ray_weights(ray, ray_staging)
        return RayServeWorkload(
            gpu_pool=pool,
            cpu_pool=cpu,
            ray=ray,
            monitoring=ray_monitoring_props(s, plan, ray, dcgm_service_monitor=dcgm_service_monitor, reserved=reserved),
            key=s.key,
            staging=ray_staging,
        )
    floor = floor_replicas(config, s)
    fallback = fallback_plan(s, plan, config.compute)
    extra = (
        *((floor_pool(pool, plan, floor, config.compute),) if floor else ()),
        *((fallback_pool(s, fallback, config.compute),) if fallback else ()),
    )
    if extra:
        # Weighted against them: the floor above, a fallback family below.
        pool = replace(pool, weight=PRIMARY_WEIGHT)
    pools = (pool.name, *(p.name for p in extra if p.weight == FALLBACK_WEIGHT))
    vllm = vllm_props(config, s, plan, pool, region)
    vllm = replace(
        vllm,
        image=lock.pin(vllm.image),
        disaggregation=disaggregation_props(config, s, plan, vllm.name, lock),
        floor_replicas=floor,
        floor_pools=(f"{pool.name}-floor", *pools) if floor else (),
        pools=pools if fallback else (),
    )
    staging = None
    benchmark = benchmark_props(s, cpu, plan)
    if benchmark.image is not None:
        benchmark = replace(benchmark, image=lock.pin(benchmark.image))
    adapters: tuple[tuple[str, WeightsStagingProps], ...] = ()
    if s.config.weights == "staged":
        staging = weights_staging_props(s, plan, vllm, cpu)
        adapters = tuple(
            (name, adapter_staging_props(staging, name, repo, revision)) for name, repo, revision in s.config.adapters
        )
        # Per workload and GPU family: a cache compiled for another GPU would be another hash directory anyway. One
        # writer pod compiles one server, so a replica that spans nodes keeps no cache (each start compiles).
        keep = s.config.compile_cache and plan.nodes_per_replica == 1
        cache = compile_cache_prefix(vllm.name, plan.instance.family) if keep else None
        vllm = with_staged_weights(vllm, staging, cache, adapters)
        # The benchmark reads the staged tokenizer files: no Hub token, no weights.
        benchmark = replace(benchmark, tokenizer_prefix=staging.prefix)
    return VllmWorkload(
        canary_of=s.canary_of,
        gpu_pool=pool,
        cpu_pool=cpu,
        vllm=vllm,
        autoscaling=autoscaling_props(s, plan, floor, vllm if config.gateway is not None else None),
        monitoring=monitoring_props(s, plan, vllm, dcgm_service_monitor=dcgm_service_monitor, reserved=reserved),
        benchmark=benchmark,
        headroom=warm_headroom(s, plan, pool, vllm, lock),
        staging=staging,
        adapter_stagings=adapters,
        key=s.key,
        extra_pools=extra,
        neuron_monitor_image=lock.pin(NEURON_MONITOR_IMAGE) if plan.neuron is not None else None,
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
    require_pinned_revisions(config, plans)
    check_reservations(config, plans)
    _unique_served_names(served, plans)
    check_canary_capacity(config, plans)
    built: list[Workload] = []
    # The shorthand's workload carries the PriorityClass; with several workloads the node-pools chart does (charts).
    headroom_class = not config.workloads
    # One workload on NVIDIA GPUs carries the dcgm-exporter ServiceMonitor; with several workloads none does (charts
    # give it a chart of its own, so adding or removing a workload never moves it).
    nvidia = [p.instance.accelerator_vendor == "nvidia" for p in plans]
    dcgm_owner = nvidia.index(True) if True in nvidia and not config.workloads else -1
    for index, (s, workload_plan) in enumerate(zip(served, plans, strict=True)):
        workload = _build_one(config, s, workload_plan, region, lock, dcgm_service_monitor=index == dcgm_owner)
        if isinstance(workload, VllmWorkload) and workload.headroom is not None:
            # The PriorityClass is cluster-scoped: one workload carries it, or (several workloads) none.
            workload = replace(workload, headroom=replace(workload.headroom, priority_class=headroom_class))
            headroom_class = False
        built.append(workload)
    extras = [p for w in built if isinstance(w, VllmWorkload) for p in w.extra_pools]
    pools = merge_pools([*_canary_shares(config, built), *extras])
    # Each workload keeps its own headroom check against its own share; the pools now carry the sums.
    merged = tuple(_with_pools(w, pools) for w in built)
    gateway = gateway_props(config, merged, plans, lock)
    if gateway is None:
        return merged
    # Each workload knows the gateway it is behind, and its dashboard shows the gateway's view of it (a next version's
    # requests are in its current version's picker: no panels of its own).
    return tuple(
        _behind(w, gateway, gateway_panels(gateway, route) if route.routed else ())
        for w, route in zip(merged, gateway.routes, strict=True)
    )


def _with_pools(w: Workload, pools: dict[str, GpuPoolSpec]) -> Workload:
    """`w` with its pools as merged (the environment's sizes, the sum of the limits)."""
    if isinstance(w, VllmWorkload):
        return replace(w, gpu_pool=pools[w.gpu_pool.name], extra_pools=tuple(pools[p.name] for p in w.extra_pools))
    return replace(w, gpu_pool=pools[w.gpu_pool.name])


def _behind(workload: Workload, gateway: GatewayProps, panels: tuple[ExtraPanel, ...]) -> Workload:
    if isinstance(workload, VllmWorkload):
        return replace(workload, gateway=gateway, monitoring=replace(workload.monitoring, extra_panels=panels))
    return replace(workload, gateway=gateway, monitoring=replace(workload.monitoring, extra_panels=panels))


def _canary_shares(config: EnvironmentConfig, built: Sequence[Workload]) -> list[GpuPoolSpec]:
    """Each workload's pool before merging; a next version on its current version's pool adds nothing to a limit
    the current version set (check_canary_capacity showed both fit in it)."""
    pools = {w.key: w.gpu_pool.name for w in built}
    shares = []
    for s, w in zip(config.served, built, strict=True):
        shared = (
            s.canary_of is not None
            and config.workloads[s.canary_of].accelerator_limit is not None
            and pools[s.canary_of] == w.gpu_pool.name
        )
        shares.append(replace(w.gpu_pool, accelerator_limit=0) if shared else w.gpu_pool)
    return shares


def _unique_served_names(served: Sequence[ServedWorkload], plans: Sequence[Plan]) -> None:
    """A request's `model` picks the workload (a LoRA adapter's name, its workload), so no two may answer to the
    same name; a next version answers its current version's names (the route splits them by weight)."""
    seen: dict[str, str] = {}
    for s, workload_plan in zip(served, plans, strict=True):
        if s.canary_of is not None:
            continue
        names = [(f"{s.path}.model", workload_plan.served_model_name)]
        names += [(f"{s.path}.lora_adapters", adapter) for adapter in s.config.lora_adapters]
        for path, name in names:
            if name in seen:
                raise fail(
                    E120,
                    path,
                    name,
                    f"is already served by {seen[name]}; served model and adapter names must be unique in an "
                    "environment (rename one, or drop one of the two)",
                )
            seen[name] = s.path


def warm_headroom(
    s: ServedWorkload, plan: Plan, pool: GpuPoolSpec, vllm: VllmProps, lock: ImageLock
) -> HeadroomProps | None:
    """The placeholders of workload.warm_replicas, which must fit the workload's share of the pool's limit."""
    warm = s.config.warm_replicas
    if not warm:
        return None
    path = f"{s.path}.warm_replicas"
    if plan.nodes_per_replica > 1:
        raise fail(E137, path, warm, "needs a replica that fits one node (this plan spans nodes); use 0")
    held = warm * vllm.accelerators_per_pod
    if held > pool.accelerator_limit:
        raise fail(
            E137,
            path,
            warm,
            f"holds {held} accelerators, above the node pool's limit of {pool.accelerator_limit} "
            "(workload.accelerator_limit, or what replicas.max needs): lower it or raise the limit",
        )
    return HeadroomProps(replicas=warm, serving=vllm, image=lock.pin(PAUSE_IMAGE))
