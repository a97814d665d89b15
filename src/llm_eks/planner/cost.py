"""What a million output tokens cost on a candidate: the ranking `llm-eks plan --compare` shows, and how the search
chooses between a TP x PP and a DP x EP layout."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llm_eks.planner.sizing import Context, Fit

# Said in `llm-eks plan --help` and the docs (Reproduce and compare); `cost_per_million_output_tokens` computes it.
COST_FORMULA = (
    "$ per million output tokens = replicas x $/h per replica / output tokens per hour x 1e6, where replicas = "
    "ceil(target_concurrency / sequences one replica runs at the typical size) and output tokens per hour = "
    "target_concurrency x 3600 x 1000 / time per output token (ms, chunked prefill included) at "
    "target_concurrency sequences per replica"
)


def replicas_for_target(ctx: Context, fit: Fit) -> int:
    """Replicas that together run target_concurrency sequences: each runs what its KV cache holds at the typical
    size, capped by max_num_seqs (given, per data-parallel rank as vLLM applies it; else the target)."""
    r = ctx.request
    cap = r.max_num_seqs * fit.dp if r.max_num_seqs is not None else r.target_concurrency
    per_replica = min(fit.typical, cap)
    return math.ceil(r.target_concurrency / per_replica)


def cost_per_million_output_tokens(replicas: int, usd_per_replica_hour: float, target: int, tpot_ms: float) -> float:
    """COST_FORMULA: what the target load costs per hour over the output tokens it produces per hour."""
    tokens_per_hour = target * 3600 * 1000 / tpot_ms
    return replicas * usd_per_replica_hour / tokens_per_hour * 1e6


def per_million(ctx: Context, fit: Fit) -> float | None:
    """COST_FORMULA for `fit` at the request's target; None without an on-demand price."""
    if fit.cost is None:
        return None
    return cost_per_million_output_tokens(
        replicas_for_target(ctx, fit), fit.cost, ctx.request.target_concurrency, fit.latency.tpot_ms
    )
