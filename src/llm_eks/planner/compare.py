"""Compare before choosing: every catalog instance type that can serve a request, on its best split, with what a
million output tokens costs there at the target load.

Uses the search's own functions (candidate shapes, `evaluate`, `usable`, `meets`), so a row is what
`llm-eks plan --accelerator <type> --tensor-parallel-size <tp> --pipeline-parallel-size <pp>` plans.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from llm_eks.catalog.accelerators import CATALOG as INSTANCE_CATALOG
from llm_eks.catalog.accelerators import InstanceType
from llm_eks.planner.parallelism import candidate_shapes
from llm_eks.planner.request import PlanRequest
from llm_eks.planner.search import meets, usable
from llm_eks.planner.sizing import Context, Fit, evaluate

# Said in `llm-eks plan --help` and the docs (Reproduce and compare); `cost_per_million_output_tokens` computes it.
COST_FORMULA = (
    "$ per million output tokens = replicas x $/h per replica / output tokens per hour x 1e6, where replicas = "
    "ceil(target_concurrency / sequences one replica runs at the typical size) and output tokens per hour = "
    "target_concurrency x 3600 x 1000 / inter-token latency (ms) at target_concurrency sequences per replica"
)


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
    # None: no on-demand price in the catalog (then no cost per token either).
    usd_per_replica_hour: float | None
    # Replicas that together run target_concurrency sequences.
    replicas: int
    usd_per_million_output_tokens: float | None
    meets_targets: bool

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def compare(request: PlanRequest) -> list[Comparison]:
    """Every NVIDIA catalog instance type that can serve `request` (its accelerator is ignored), best first: those
    that meet the targets, then by cost per million output tokens (unpriced last), then by $/h."""
    ctx = Context(request)
    rows = []
    for inst in INSTANCE_CATALOG:
        if inst.accelerator_vendor != "nvidia":
            continue
        best = best_fit(ctx, inst)
        if best is not None:
            rows.append(row(ctx, best))
    return sorted(rows, key=rank)


def best_fit(ctx: Context, inst: InstanceType) -> Fit | None:
    """As auto plans: a replica fills its node, one-node splits first, then whole nodes; among the usable splits,
    the one that meets the targets at the lowest cost per token, then with the fewest GPUs. None: nothing fits."""
    single, multi = candidate_shapes(ctx, inst)
    whole = [s for s in single if s[0] * s[1] == inst.accelerators]
    for shapes in (whole, multi):
        fits = [f for f in (evaluate(ctx, inst, *s) for s in shapes) if usable(ctx, f)]
        if fits:
            return min(fits, key=lambda f: (not meets(ctx, f), _per_million(ctx, f) or math.inf, f.gpus * f.nodes))
    return None


def replicas_for_target(ctx: Context, fit: Fit) -> int:
    """Replicas that together run target_concurrency sequences: each runs what its KV cache holds at the typical
    size, capped by max_num_seqs (given, or the target)."""
    r = ctx.request
    per_replica = min(fit.typical, r.scheduled_sequences)
    return math.ceil(r.target_concurrency / per_replica)


def cost_per_million_output_tokens(replicas: int, usd_per_replica_hour: float, target: int, itl_ms: float) -> float:
    """COST_FORMULA: what the target load costs per hour over the output tokens it produces per hour."""
    tokens_per_hour = target * 3600 * 1000 / itl_ms
    return replicas * usd_per_replica_hour / tokens_per_hour * 1e6


def _per_million(ctx: Context, fit: Fit) -> float | None:
    if fit.cost is None:
        return None
    return cost_per_million_output_tokens(
        replicas_for_target(ctx, fit), fit.cost, ctx.request.target_concurrency, fit.itl_ms
    )


def row(ctx: Context, fit: Fit) -> Comparison:
    inst = fit.instance
    per_million = _per_million(ctx, fit)
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
        usd_per_replica_hour=None if fit.cost is None else round(fit.cost, 4),
        replicas=replicas_for_target(ctx, fit),
        usd_per_million_output_tokens=None if per_million is None else round(per_million, 4),
        meets_targets=meets(ctx, fit),
    )


def rank(c: Comparison) -> tuple[bool, bool, float, float, str]:
    """Meets the targets first, then priced, then cheapest per million output tokens, then per hour."""
    cost = c.usd_per_million_output_tokens
    hourly = c.usd_per_replica_hour
    return (
        not c.meets_targets,
        cost is None,
        math.inf if cost is None else cost,
        math.inf if hourly is None else hourly,
        c.instance_type,
    )
