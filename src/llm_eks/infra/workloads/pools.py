"""GPU node pools from plans: one per family (or per workload, dedicated), sized in whole nodes, merged across the
environment's workloads; EFA pools for replicas that span nodes, capacity reservations per family; when nodes go
(self-managed Karpenter's, or EKS Auto Mode's 20-day pools); and how a workload's pods land on its pool."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from llm_eks.catalog.accelerators import FAMILIES, INSTANCE_TYPES
from llm_eks.config import CapacityReservationConfig, ServedWorkload, WorkloadConfig
from llm_eks.config.capacity import ON_DEMAND, compile_writer, efa_interfaces, nodes_at_max, replica_nodes
from llm_eks.error_codes import E137
from llm_eks.errors import fail
from llm_eks.manifests.disruption import AUTO_MODE_CPU_DISRUPTION, AUTO_MODE_GPU_DISRUPTION, GPU_DISRUPTION, Disruption
from llm_eks.manifests.node_pools import (
    CAPACITY_BLOCK_DRAIN,
    POOL_CAPACITY_TYPES,
    RESERVED,
    CpuPoolSpec,
    GpuPoolSpec,
    ReservedCapacity,
    workload_placement,
)
from llm_eks.manifests.node_pools.reserved import duration_seconds
from llm_eks.planner import Plan
from llm_eks.planner.compute_mode import AUTO_MODE, KARPENTER


def gpu_pool(
    s: ServedWorkload,
    plan: Plan,
    reservation: CapacityReservationConfig | None = None,
    compute: str = KARPENTER,
) -> GpuPoolSpec:
    """The NodePool for the planned family, sized for this workload's max replicas in whole nodes (unless config
    caps it). Workloads on the same family share it (merge_pools sums their limits) unless one is dedicated. A
    replica spanning nodes gets an EFA pool of the family (`gpu-<family>-efa<count>`, its own node class and
    placement group); `reservation` (the family's capacity reservations) makes it launch into them first, or only."""
    w = s.config
    per_node = plan.instance.accelerators
    # The compile cache's writer Job runs one server of its own (once per cache key): one more node's worth.
    writer = compile_writer(w, plan)
    needed = nodes_at_max(w, plan) * per_node
    nodes = replica_nodes(plan, w.replicas.max)
    limit = w.accelerator_limit if w.accelerator_limit is not None else needed
    path = f"{s.path}.accelerator_limit"
    if limit < per_node:
        raise fail(
            E137, path, limit, f"must be at least one {plan.instance.instance_type} node's {per_node} accelerators"
        )
    if limit < needed:
        raise fail(
            E137,
            path,
            limit,
            f"must be at least {needed}: replicas.max {w.replicas.max} needs {nodes} {plan.instance.instance_type} "
            f"node(s) of {per_node}"
            + (", and the compile cache's writer Job one more" if writer else "")
            + "; lower replicas.max or raise the limit",
        )
    efa = efa_interfaces(s, plan)
    family = plan.instance.family
    sizes = pool_sizes(plan)
    if efa:
        # One networkInterfaces list per node class: only the sizes with the planned size's EFA count.
        sizes = tuple(t for t in sizes if INSTANCE_TYPES[t].efa_interfaces == efa)
    base = f"gpu-{family}" + (f"-efa{efa}" if efa else "")
    reserved = reserved_capacity(reservation)
    return GpuPoolSpec(
        name=base + (f"-{s.key}" if w.dedicated_pool and s.key is not None else ""),
        vendor=plan.instance.accelerator_vendor,
        instance_family=family,
        instance_types=sizes,
        capacity_types=pool_capacity_types(w, reservation),
        accelerator_limit=limit,
        efa_interfaces=efa,
        reservation=reserved,
        disruption=gpu_disruption(plan, compute, capacity_block=reserved is not None and reserved.capacity_block),
    )


def gpu_disruption(plan: Plan, compute: str, *, capacity_block: bool) -> Disruption:
    """When a GPU pool's nodes go. A Capacity Block's nodes drain 40 minutes before its end and EC2 takes them 10
    minutes later, so their grace period is CAPACITY_BLOCK_DRAIN. On EKS Auto Mode nodes expire at 20 days, and
    expiry is forceful (disruption budgets do not hold it, Karpenter's concepts/disruption.md): the grace period then
    lasts at least one replica's restart on a new node (the plan's scale-out), so the PodDisruptionBudget holds a
    second expiring node's replica until the first one serves again, instead of both going at once."""
    if capacity_block:
        base = GPU_DISRUPTION if compute != AUTO_MODE else AUTO_MODE_GPU_DISRUPTION
        return replace(base, termination_grace_period=CAPACITY_BLOCK_DRAIN)
    if compute != AUTO_MODE:
        return GPU_DISRUPTION
    restart = -(-int(plan.cold_start.scale_out_s) // 60)
    minutes = max(duration_minutes(AUTO_MODE_GPU_DISRUPTION.termination_grace_period), restart)
    return replace(AUTO_MODE_GPU_DISRUPTION, termination_grace_period=f"{minutes}m")


def duration_minutes(text: str) -> int:
    """Minutes of a Karpenter duration (whole minutes, rounded up)."""
    return -(-duration_seconds(text) // 60)


def cpu_pool(compute: str) -> CpuPoolSpec:
    """The CPU pool: Karpenter's 30-day expiry, or on EKS Auto Mode the 20-day one."""
    return CpuPoolSpec(disruption=AUTO_MODE_CPU_DISRUPTION) if compute == AUTO_MODE else CpuPoolSpec()


# Karpenter NodePool weights (a higher weight is tried first, kubernetes-sigs/karpenter@v1.14.1
# pkg/apis/v1/nodepool.go): the on-demand floor above the planned family's Spot/on-demand pool, above a fallback
# family's.
FLOOR_WEIGHT = 100
PRIMARY_WEIGHT = 50
FALLBACK_WEIGHT = 10


def floor_pool(pool: GpuPoolSpec, plan: Plan, replicas: int, compute: str = KARPENTER) -> GpuPoolSpec:
    """The on-demand NodePool of a workload's floor (`<pool>-floor`): the planned family's sizes, on-demand only,
    weighted above `pool`, its limit exactly the floor's replicas in whole nodes. A floor pod that does not fit it
    (a rolling update's surge, a replacement while the old node drains) lands on `pool` as on-demand: the floor's
    pods require on-demand, not this pool."""
    return replace(
        pool,
        name=f"{pool.name}-floor",
        capacity_types=(ON_DEMAND,),
        accelerator_limit=replica_nodes(plan, replicas) * plan.instance.accelerators,
        reservation=None,
        # Never a Capacity Block's drain: the floor launches no reservation.
        disruption=gpu_disruption(plan, compute, capacity_block=False),
        weight=FLOOR_WEIGHT,
    )


def fallback_pool(s: ServedWorkload, fallback: Plan, compute: str = KARPENTER) -> GpuPoolSpec:
    """The NodePool of a workload's fallback family (`gpu-<family>-fallback`), weighted below the planned family's:
    Karpenter launches it only when the planned family has no capacity; its limit holds replicas.max there."""
    w = s.config
    family = fallback.instance.family
    return GpuPoolSpec(
        name=f"gpu-{family}-fallback" + (f"-{s.key}" if w.dedicated_pool and s.key is not None else ""),
        vendor=fallback.instance.accelerator_vendor,
        instance_family=family,
        instance_types=pool_sizes(fallback),
        capacity_types=w.capacity_types,
        accelerator_limit=replica_nodes(fallback, w.replicas.max) * fallback.instance.accelerators,
        efa_interfaces=efa_interfaces(s, fallback),
        disruption=gpu_disruption(fallback, compute, capacity_block=False),
        weight=FALLBACK_WEIGHT,
    )


def pool_capacity_types(w: WorkloadConfig, reservation: CapacityReservationConfig | None) -> tuple[str, ...]:
    """The workload's capacity types; with reservations `reserved` first (Karpenter prefers it anyway), alone unless
    the reservation allows a fallback."""
    if reservation is None:
        return w.capacity_types
    return (RESERVED, *w.capacity_types) if reservation.fallback else (RESERVED,)


def reserved_capacity(reservation: CapacityReservationConfig | None) -> ReservedCapacity | None:
    """The node pool's view of a family's reservations (what its EC2NodeClass selects)."""
    if reservation is None:
        return None
    return ReservedCapacity(
        ids=reservation.ids,
        tags=reservation.tags,
        owner_id=reservation.owner_id,
        reservation_type=reservation.reservation_type,
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


def placement(w: WorkloadConfig, pool: GpuPoolSpec) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The pool's nodeSelector and tolerations; a workload allowing one capacity type is pinned to it, since a pool
    shared with other workloads may allow both. Not on a pool with reservations: the pin would keep the pods off
    the reserved nodes (a fallback there may then use another workload's capacity type too)."""
    pin = len(w.capacity_types) == 1 and pool.reservation is None
    return workload_placement(pool, capacity_type=w.capacity_types[0] if pin else None)


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
            capacity_types=tuple(t for t in POOL_CAPACITY_TYPES if t in (*have.capacity_types, *pool.capacity_types)),
            accelerator_limit=have.accelerator_limit + pool.accelerator_limit,
            weight=have.weight or pool.weight,
        )
    return merged
