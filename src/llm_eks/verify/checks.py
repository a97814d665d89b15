"""Every check of `llm-eks verify`, in the report's order: the node pools and their nodes, then per workload its
pods, arguments, KV cache, TTFT, ITL, route and start-up. Pure: observed data and the plan in, rows out."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from llm_eks.planner.at_load import LoadEstimate
from llm_eks.verify.checks_metrics import kv_rows, latency_rows
from llm_eks.verify.checks_nodes import node_rows
from llm_eks.verify.checks_pods import args_row, serving_rows, startup_row
from llm_eks.verify.checks_routes import route_row
from llm_eks.verify.expected import EnvironmentPlan
from llm_eks.verify.observed import NO_METRICS, ClusterState, WorkloadMetrics, WorkloadObjects, name
from llm_eks.verify.rows import Row


def evaluate(
    plan: EnvironmentPlan,
    state: ClusterState,
    metrics: Mapping[str, WorkloadMetrics],
    window: str,
    now: datetime,
    at_load: Mapping[str, LoadEstimate | None] | None = None,
) -> list[Row]:
    """`at_load`: per workload name, the planner's estimate at the load the window held (None: none observed)."""
    rows = node_rows(plan.pools, state.node_pools, state.nodes)
    nodes = {name(n): n for n in state.nodes}
    for w in plan.workloads:
        objs = state.workloads.get(w.name) or WorkloadObjects(owner=None)
        m = metrics.get(w.name, NO_METRICS)
        rows += [
            *serving_rows(w, objs),
            args_row(w, objs),
            *kv_rows(w, m),
            *latency_rows(w, m, window, (at_load or {}).get(w.name)),
        ]
        route = route_row(w, objs)
        if route is not None:
            rows.append(route)
        rows.append(startup_row(w, objs, nodes, now))
    return rows + accepted_risk_rows(plan)


def accepted_risk_rows(plan: EnvironmentPlan) -> list[Row]:
    """One row per risk a production environment accepts (accepted_risks): nothing to measure, so never ok and never
    failing, but on every report until it is removed (cdk synth warns of each too)."""
    return [
        Row("risk", plan.environment, "none accepted", f"accepted: {risk}", "unknown", f"accepted_risks: {why}")
        for risk, why in sorted(plan.accepted_risks.items())
    ]
