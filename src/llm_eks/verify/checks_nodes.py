"""Checks 1: the GPU NodePools the node-pools chart creates (karpenter.sh/v1) exist with the planned instance types
and limit, and the GPU nodes Karpenter launched from them run a planned instance type and advertise its GPUs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_eks.verify.expected import PoolPlan
from llm_eks.verify.observed import Object, condition, is_true, labels, name, status
from llm_eks.verify.rows import Row
from llm_eks.verify.text import TIMES, count, joined

# The labels Karpenter v1 and the kubelet put on every node it launches.
NODEPOOL_LABEL = "karpenter.sh/nodepool"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def _instance_types(pool: Object) -> tuple[str, ...] | None:
    """The NodePool's `node.kubernetes.io/instance-type In [...]` requirement (None: it has none)."""
    template = ((pool.get("spec") or {}).get("template") or {}).get("spec") or {}
    for req in template.get("requirements") or ():
        if req.get("key") == INSTANCE_TYPE_LABEL and req.get("operator") == "In":
            return tuple(req.get("values") or ())
    return None


def _limit(pool: Object, resource: str) -> int | None:
    value = ((pool.get("spec") or {}).get("limits") or {}).get(resource)
    try:
        return int(str(value)) if value is not None else None
    except ValueError:
        return None


def _planned(p: PoolPlan) -> str:
    return f"{' '.join(p.instance_types)}; {p.resource} ≤ {p.accelerator_limit}"


def node_pool_row(p: PoolPlan, pool: Object | None) -> Row:
    """The NodePool: present, Ready, with the planned instance types and accelerator limit."""
    if pool is None:
        return Row("nodepool", p.name, _planned(p), "not found", "breach", f"no karpenter.sh/v1 NodePool {p.name}")
    types, limit = _instance_types(pool), _limit(pool, p.resource)
    observed = f"{' '.join(types or ('(any)',))}; {p.resource} ≤ {limit if limit is not None else '(none)'}"
    # Karpenter's root condition over ValidationSucceeded and NodeClassReady (kubernetes-sigs/karpenter
    # pkg/apis/v1/nodepool_status.go, StatusConditions): False means it launches nothing.
    ready = condition(pool, "Ready")
    if ready is not None and ready.get("status") != "True":
        why = ready.get("message") or ready.get("reason") or "not Ready"
        return Row("nodepool", p.name, _planned(p), observed, "breach", f"Karpenter reports it not Ready: {why}")
    problems = []
    if set(types or ()) != set(p.instance_types):
        problems.append(f"instance types {joined(types or ('any',))}, planned {joined(p.instance_types)}")
    if limit != p.accelerator_limit:
        problems.append(f"limit {limit} {p.resource}, planned {p.accelerator_limit}")
    if problems:
        return Row("nodepool", p.name, _planned(p), observed, "drift", "; ".join(problems))
    return Row("nodepool", p.name, _planned(p), observed, "ok", f"serves {joined(p.workloads)}")


def _allocatable(node: Object, resource: str) -> int:
    value = (status(node).get("allocatable") or {}).get(resource, "0")
    try:
        return int(str(value))
    except ValueError:
        return 0


def gpu_nodes_row(p: PoolPlan, nodes: Sequence[Object]) -> Row:
    """The pool's nodes: instance types the pool allows (the planned one, or a same-shape fallback), Ready, and
    advertising the type's accelerators (the device plugin runs)."""
    mine = [n for n in nodes if labels(n).get(NODEPOOL_LABEL) == p.name]
    planned = f"{joined(p.planned_types)} ({joined(f'{p.accelerators[t]} {p.resource}' for t in p.planned_types)})"
    if not mine:
        return Row("gpu-nodes", p.name, planned, "no nodes", "unknown", "Karpenter has launched no node of this pool")
    by_type: dict[str, int] = {}
    for n in mine:
        t = labels(n).get(INSTANCE_TYPE_LABEL, "?")
        by_type[t] = by_type.get(t, 0) + 1
    observed = joined(f"{k}{TIMES} {t}" for t, k in sorted(by_type.items()))
    foreign = sorted(t for t in by_type if t not in p.instance_types)
    if foreign:
        return Row(
            "gpu-nodes",
            p.name,
            planned,
            observed,
            "breach",
            f"{joined(foreign)} is not a size the pool allows ({joined(p.instance_types)})",
        )
    problems = []
    for n in mine:
        t = labels(n).get(INSTANCE_TYPE_LABEL, "?")
        has, wants = _allocatable(n, p.resource), p.accelerators.get(t, 0)
        if has < wants:
            problems.append(f"{name(n)} advertises {has} of its {wants} {p.resource} (is the device plugin running?)")
        if not is_true(n, "Ready"):
            problems.append(f"{name(n)} is not Ready")
    if problems:
        return Row("gpu-nodes", p.name, planned, observed, "drift", "; ".join(problems))
    fallback = sorted(t for t in by_type if t not in p.planned_types)
    detail = count(len(mine), "node") + " Ready"
    if fallback:
        detail += f"; {joined(fallback)}: a same-shape size the pool allows when the planned one has no capacity"
    return Row("gpu-nodes", p.name, planned, observed, "ok", detail)


def node_rows(pools: Sequence[PoolPlan], node_pools: Mapping[str, Any], nodes: Sequence[Object]) -> list[Row]:
    rows: list[Row] = []
    for p in pools:
        rows.append(node_pool_row(p, node_pools.get(p.name)))
        rows.append(gpu_nodes_row(p, nodes))
    return rows
