"""GPU node pools from plans: one per family (or per workload, dedicated), sized in whole nodes, merged across the
environment's workloads; and how a workload's pods land on its pool."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from llm_eks.catalog.accelerators import FAMILIES
from llm_eks.config import CAPACITY_TYPES, ServedWorkload, WorkloadConfig
from llm_eks.errors import fail
from llm_eks.manifests.node_pools import GpuPoolSpec, workload_placement
from llm_eks.planner import Plan


def gpu_pool(s: ServedWorkload, plan: Plan) -> GpuPoolSpec:
    """The NodePool for the planned family, sized for this workload's max replicas in whole nodes (unless config
    caps it). Workloads on the same family share it (merge_pools sums their limits) unless one is dedicated."""
    w = s.config
    per_node = plan.instance.accelerators
    if plan.nodes_per_replica > 1:
        nodes = w.replicas.max * plan.nodes_per_replica
    else:
        nodes = math.ceil(w.replicas.max / max(plan.replicas_per_node, 1))
    # The compile cache's writer Job runs one server of its own (once per cache key): one more node's worth.
    writer = w.weights == "staged" and w.compile_cache and plan.nodes_per_replica == 1
    needed = (nodes + (1 if writer else 0)) * per_node
    limit = w.accelerator_limit if w.accelerator_limit is not None else needed
    path = f"{s.path}.accelerator_limit"
    if limit < per_node:
        raise fail(path, limit, f"must be at least one {plan.instance.instance_type} node's {per_node} accelerators")
    if limit < needed:
        raise fail(
            path,
            limit,
            f"must be at least {needed}: replicas.max {w.replicas.max} needs {nodes} {plan.instance.instance_type} "
            f"node(s) of {per_node}"
            + (", and the compile cache's writer Job one more" if writer else "")
            + "; lower replicas.max or raise the limit",
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


def placement(w: WorkloadConfig, pool: GpuPoolSpec) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The pool's nodeSelector and tolerations; a workload allowing one capacity type is pinned to it, since a pool
    shared with other workloads may allow both."""
    return workload_placement(pool, capacity_type=w.capacity_types[0] if len(w.capacity_types) == 1 else None)


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
