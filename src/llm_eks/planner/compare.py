"""Compare before choosing: every catalog instance type that can serve a request, on its best split, with what a
million output tokens costs there at the target load; for a MoE model, also its best DP x EP layout, as a row of
its own.

Uses the search's own functions (candidate shapes, `evaluate`, `usable`, `meets`), so a row is what
`llm-eks plan --accelerator <type> --tensor-parallel-size <tp> --pipeline-parallel-size <pp>` plans (with
`--data-parallel-size <dp> --enable-expert-parallel` for a DP x EP row).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from llm_eks.catalog import auto_mode
from llm_eks.catalog.accelerators import CATALOG as INSTANCE_CATALOG
from llm_eks.catalog.accelerators import InstanceType
from llm_eks.planner.compute_mode import AUTO_MODE
from llm_eks.planner.cost import COST_FORMULA, cost_per_million_output_tokens, per_million, replicas_for_target
from llm_eks.planner.expert_parallel import evaluate_expert_parallel
from llm_eks.planner.parallelism import candidate_shapes, expert_parallel_shapes
from llm_eks.planner.request import PlanRequest
from llm_eks.planner.result import layout_text
from llm_eks.planner.search import efa_allowed, meets, usable
from llm_eks.planner.sizing import Context, Fit, evaluate

__all__ = [
    "COST_FORMULA",
    "Comparison",
    "best_expert_parallel_fit",
    "best_fit",
    "compare",
    "cost_per_million_output_tokens",
    "rank",
    "replicas_for_target",
    "row",
]


@dataclass(frozen=True)
class Comparison:
    """One instance type on its best split for the request, and what serving the target load there costs."""

    instance_type: str
    accelerator_name: str
    gpus_per_node: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    nodes_per_replica: int
    kv_cache_tokens: int
    # Sequences of the typical size the KV cache of one replica holds.
    concurrency_typical: int
    itl_ms: float
    # Mean time per output token with chunked prefill, median time to first token, and output tokens per second one
    # replica produces, all at target_concurrency sequences (latency/model.py).
    tpot_ms: float
    ttft_ms: float
    output_tokens_per_s: float
    # None: no on-demand price in the catalog (then no cost per token either).
    usd_per_replica_hour: float | None
    # Replicas that together run target_concurrency sequences.
    replicas: int
    usd_per_million_output_tokens: float | None
    meets_targets: bool
    # "tp-pp" or "dp-ep" (data-parallel attention with the experts spread over DP x TP GPUs).
    layout: str = "tp-pp"
    # Data-parallel ranks and the expert-parallel size (1 and 1 for TP x PP).
    data_parallel_size: int = 1
    expert_parallel_size: int = 1

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def shape(self) -> str:
        """The split as the table shows it: "TP8 PP2" or "DP16 TP1 EP16"."""
        return layout_text(
            self.tensor_parallel_size, self.pipeline_parallel_size, self.data_parallel_size, self.layout == "dp-ep"
        )


def compare(request: PlanRequest) -> list[Comparison]:
    """Every NVIDIA catalog instance type that can serve `request` (its accelerator is ignored), best first: those
    that meet the targets, then by cost per million output tokens (unpriced last), then by $/h. A MoE model gets a
    second row per instance type for its best DP x EP layout where one fits."""
    ctx = Context(request)
    rows = []
    for inst in INSTANCE_CATALOG:
        if inst.accelerator_vendor != "nvidia":
            continue
        if request.compute == AUTO_MODE and not auto_mode.launches(inst.family):
            continue  # EKS Auto Mode does not launch this family
        for best in (best_fit(ctx, inst), best_expert_parallel_fit(ctx, inst)):
            if best is not None:
                rows.append(row(ctx, best))
    return sorted(rows, key=rank)


def _cheapest(ctx: Context, fits: list[Fit]) -> Fit:
    return min(fits, key=lambda f: (not meets(ctx, f), per_million(ctx, f) or math.inf, f.gpus * f.nodes))


def best_fit(ctx: Context, inst: InstanceType) -> Fit | None:
    """As auto plans: a replica fills its node, one-node splits first, then whole nodes; among the usable splits,
    the one that meets the targets at the lowest cost per token, then with the fewest GPUs. None: nothing fits."""
    if ctx.request.expert_parallel_only:
        return None
    single, multi = candidate_shapes(ctx, inst)
    whole = [s for s in single if s[0] * s[1] == inst.accelerators]
    for shapes in (whole, multi if efa_allowed(ctx, inst) else []):
        fits = [f for f in (evaluate(ctx, inst, *s) for s in shapes) if usable(ctx, f)]
        if fits:
            return _cheapest(ctx, fits)
    return None


def best_expert_parallel_fit(ctx: Context, inst: InstanceType) -> Fit | None:
    """The DP x EP layout auto would weigh on `inst`: whole nodes, one node first, then several; None: none fits
    (or the model, the request or the instance type rules expert parallelism out)."""
    single, multi = expert_parallel_shapes(ctx, inst)
    whole = [s for s in single if s[0] * s[1] == inst.accelerators]
    for shapes in (whole, multi if efa_allowed(ctx, inst) else []):
        fits = [f for f in (evaluate_expert_parallel(ctx, inst, *s) for s in shapes) if usable(ctx, f)]
        if fits:
            return _cheapest(ctx, fits)
    return None


def row(ctx: Context, fit: Fit) -> Comparison:
    inst = fit.instance
    cost = per_million(ctx, fit)
    return Comparison(
        instance_type=inst.instance_type,
        accelerator_name=inst.accelerator_name,
        gpus_per_node=inst.accelerators,
        tensor_parallel_size=fit.tp,
        pipeline_parallel_size=fit.pp,
        nodes_per_replica=fit.nodes,
        kv_cache_tokens=fit.kv_cache_tokens,
        concurrency_typical=fit.typical,
        itl_ms=fit.itl_ms,
        tpot_ms=fit.latency.tpot_ms,
        ttft_ms=fit.latency.ttft_ms,
        output_tokens_per_s=fit.latency.output_tokens_per_s,
        usd_per_replica_hour=None if fit.cost is None else round(fit.cost, 4),
        replicas=replicas_for_target(ctx, fit),
        usd_per_million_output_tokens=None if cost is None else round(cost, 4),
        meets_targets=meets(ctx, fit),
        layout=fit.layout,
        data_parallel_size=fit.dp,
        expert_parallel_size=fit.tp * fit.dp if fit.expert_parallel else 1,
    )


def rank(c: Comparison) -> tuple[bool, bool, float, float, str, str]:
    """Meets the targets first, then priced, then cheapest per million output tokens, then per hour."""
    cost = c.usd_per_million_output_tokens
    hourly = c.usd_per_replica_hour
    return (
        not c.meets_targets,
        cost is None,
        math.inf if cost is None else cost,
        math.inf if hourly is None else hourly,
        c.instance_type,
        c.layout,
    )
