"""GPU_LIMIT: A workload's accelerators at its maximum scale must fit the `spec.limits` of the NodePool(s) it can land
on: max replicas (ScaledObject maxReplicaCount, KEDA's default 100 when unset; else an HPA's maxReplicas;
else spec.replicas; Ray worker groups maxReplicas x numOfHosts; LeaderWorkerSet replicas x size) x
accelerators per pod, counted as whole nodes when the pool's instance types are known (Karpenter limits
count node capacity: 3-GPU pods on 4-GPU nodes use 4 each). Workloads pinned to the same pool are summed.
Rolling-update surge and RayService upgrades (a second cluster) need extra headroom on top; not checked.
Placeholders (pods of a PriorityClass below 0, which every ordinary pod pre-empts: warm headroom) are not counted:
once the pool is full they stay Pending by design, and the serving pods take their place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any

from llm_eks.manifests.checks.capacity import Capacity
from llm_eks.manifests.checks.findings import GPU_LIMIT, Finding
from llm_eks.manifests.checks.instances import ACCELERATOR_RESOURCES, INSTANCE_TYPE_LABEL, InstanceResources
from llm_eks.manifests.checks.objects import (
    PodTemplate,
    amount,
    group_kind,
    mapping_at,
    object_ref,
    part_prefix,
    pod_requests,
)
from llm_eks.manifests.checks.scheduling import Scheduler


def _pods_per_node(res: InstanceResources, requests: Mapping[str, Fraction], pool: Capacity) -> int:
    """How many of these pods one node of this type holds (accelerators, cpu, memory)."""
    allocatable = {"cpu": res.allocatable_cpu, "memory": res.allocatable_memory}
    for resource in ACCELERATOR_RESOURCES:
        allocatable[resource] = Fraction(res.accelerators.get(resource, 0))
    counts = []
    for resource, need in requests.items():
        if need > 0 and resource in allocatable:
            room = allocatable[resource] - pool.daemon_requests.get(resource, Fraction(0))
            counts.append(math.floor(room / need) if room > 0 else 0)
    return min(counts, default=0)


def _demand(
    sched: Scheduler, template: PodTemplate, pool: Capacity, resource: str, pods: int, per_pod: Fraction
) -> tuple[Fraction, str, Callable[[Fraction], int]]:
    """Accelerators of the nodes Karpenter must launch for `pods` pods (Karpenter limits count node capacity, not pod
    requests): the tightest packing among the instance types the pool allows, or pods x per-pod when unknown.
    Also returns how many pods fit within a given limit."""

    def simple(limit: Fraction) -> int:
        return math.floor(limit / per_pod)

    if len(sched.matches(template.spec)[0]) != 1:
        return pods * per_pod, "", simple
    type_req = pool.requirements.get(INSTANCE_TYPE_LABEL)
    if type_req is None or type_req.complement:
        return pods * per_pod, "", simple
    requests = pod_requests(template.spec)
    best: tuple[Fraction, str, Callable[[Fraction], int]] | None = None
    for name in sorted(type_req.values):
        res = sched.resources(name)
        if res is None:
            return pods * per_pod, "", simple
        per_node = _pods_per_node(res, requests, pool)
        if per_node <= 0:
            continue
        nodes = math.ceil(pods / per_node)
        node_accelerators = res.accelerators.get(resource, 0)
        need = Fraction(nodes * node_accelerators)
        if best is None or need < best[0]:

            def within(limit: Fraction, per_node: int = per_node, each: int = node_accelerators) -> int:
                return math.floor(limit / each) * per_node if each else 0

            text = f"{nodes} {name} node{'s' if nodes != 1 else ''}, {per_node} pod{'s' if per_node != 1 else ''} each"
            best = (need, text, within)
    return best if best is not None else (pods * per_pod, "", simple)


def placeholder(template: PodTemplate, objects: Sequence[Mapping[str, Any]]) -> bool:
    """True for a pod template of a PriorityClass with a negative value (pre-empted by any default-priority pod)."""
    name = template.spec.get("priorityClassName")
    return (
        any(
            group_kind(o) == ("scheduling.k8s.io", "PriorityClass")
            and mapping_at(o, "metadata").get("name") == name
            and isinstance(o.get("value"), int)
            and o["value"] < 0
            for o in objects
        )
        if name
        else False
    )


def check_gpu_limits(templates: Sequence[PodTemplate], sched: Scheduler) -> Iterator[Finding]:
    """GPU_LIMIT findings: workloads (alone or together) whose maximum scale exceeds a NodePool limit."""
    pinned: dict[tuple[str, str], list[tuple[PodTemplate, Fraction]]] = {}
    for template in templates:
        pods = template.max_pods or 0
        ok, _ = sched.matches(template.spec)
        if pods <= 0 or not ok or any(not pool.karpenter for pool in ok):
            continue  # unschedulable (reported above) or able to use fixed capacity, which has no limit
        requests = pod_requests(template.spec)
        for resource in ACCELERATOR_RESOURCES:
            per_pod = requests.get(resource, Fraction(0))
            if per_pod <= 0 or any(resource not in pool.limits for pool in ok):
                continue  # a pool without a limit on it can grow without bound
            limit = sum((pool.limits[resource] for pool in ok), Fraction(0))
            need, nodes, within = _demand(sched, template, ok[0], resource, pods, per_pod)
            if need > limit:
                yield _limit_finding(template, ok, resource, pods, per_pod, need, nodes, limit, within(limit))
            elif len(ok) == 1:
                pinned.setdefault((ok[0].name, resource), []).append((template, need))
    for (pool_name, resource), users in pinned.items():
        pool = next(p for p in sched.capacity if p.karpenter and p.name == pool_name)
        total = sum((need for _, need in users), Fraction(0))
        if len(users) > 1 and total > pool.limits[resource]:
            parts = ", ".join(f"{object_ref(t.obj)}{' ' + t.part if t.part else ''} {need}" for t, need in users)
            limit_text = amount(resource, pool.limits[resource]).removesuffix(" " + resource)
            yield Finding(
                GPU_LIMIT,
                object_ref(pool.obj or {}),
                f"the workloads it runs need {total} {resource} at their maximum scale ({parts}) but its limit is "
                f"{limit_text}; the last pods stay Pending",
                f'raise spec.limits["{resource}"] to at least {total} (workload.accelerator_limit) or lower the '
                "workloads' maximum replicas",
            )


def _limit_finding(
    template: PodTemplate,
    pools: Sequence[Capacity],
    resource: str,
    pods: int,
    per_pod: Fraction,
    need: Fraction,
    nodes: str,
    limit: Fraction,
    fit_pods: int,
) -> Finding:
    names = " + ".join(p.name for p in pools)
    what = "replicas" if template.part == "" and template.unit_pods == 1 else "pods"
    per = amount(resource, per_pod).removesuffix(" " + resource)
    counted = f" ({nodes})" if nodes and need != pods * per_pod else ""
    allowed = amount(resource, limit).removesuffix(" " + resource)
    fit_units = fit_pods // template.unit_pods
    scale_fix = f" or lower {template.scale_fix} to {fit_units}" if template.scale_fix and fit_units > 0 else ""
    target = f"NodePool {names}" if len(pools) == 1 else f"NodePools {names}"
    return Finding(
        GPU_LIMIT,
        object_ref(template.obj),
        f"{part_prefix(template)}{pods} {what} ({template.scale}) x {per} {resource} need {need} {resource}{counted} "
        f"but {target} allow{'s' if len(pools) == 1 else ''} {allowed} (spec.limits); "
        f"{what} beyond {fit_pods} stay Pending",
        f'raise {target}\'s spec.limits["{resource}"] to at least {need} (workload.accelerator_limit){scale_fix}',
    )
