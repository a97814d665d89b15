"""What verify holds a measured latency against: the planner's estimate re-made at the load verify observed, one
drift ratio with its limits, and the fewest observations a percentile is judged on.

Latency depends on the load: a decode step of one sequence reads the same weights as a step of sixteen but little
else, and an MoE model at one sequence touches a fraction of its experts (the planner's own model puts a quiet MoE
replica at about 0.4x its ITL estimate at 16 sequences). A median measured at one load is therefore judged against
the estimate at that load (`estimate_at_load`); the plan's figure at `target_concurrency` stays in the report as
context.

`estimate_at_load(plan, running, prompt_len, output_len)` is the one place verify asks the
planner for an estimate at a load: today it evaluates the plan's own deployment (the instance, TP x PP or DP x EP
layout and nodes, vLLM's max_num_seqs and token budget as deployed) with the planner's latency model
(llm_eks.planner.latency) at the observed sequences and request sizes. `drift_ratio` and the ratios below are
verify's side of the drift definition the PrometheusRule alerts share (manifests/monitoring_drift.py,
DriftThresholds: the same 1.5x and 2x, a test keeps them equal). A planner-side function that estimates at a load,
with p99 figures and the shared ratio, replaces the body of `estimate_at_load` and these constants without changing
their callers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from llm_eks.planner import Plan
from llm_eks.planner.expert_parallel import evaluate_expert_parallel
from llm_eks.planner.sizing import Context, evaluate

# Median ITL against the estimate: drift above 1.5x or below 1/1.5 of it (DriftThresholds.itl_p50_ratio). vLLM's ITL
# buckets between 25 and 200 ms are 33-100 % wide and histogram_quantile interpolates inside one, so a median at the
# estimate can read ~25 % off from the buckets alone; 50 % is above that noise and below the errors worth acting on
# (a slower kernel, a throttled GPU). Far below the estimate at the load it ran is the latency model being wrong.
ITL_MEDIAN_RATIO = 1.5
# Median TTFT: drift above 2x the estimate (DriftThresholds.ttft_p50_ratio: TTFT buckets are up to 150 % wide). Only
# above: first tokens that come sooner than estimated are noted, not held against the plan (prefix-cache hits and
# shorter prompts than the mean do that).
TTFT_MEDIAN_RATIO = 2.0
# A percentile q is judged on at least 5 / (1 - q) observations in the window, so that five of them lie above it: 10
# for the median, 500 for the p99. Fewer is "insufficient data", never ok: a p99 of 100 observations is their
# slowest one, and a median of three is any of them.
ABOVE_THE_PERCENTILE = 5


def min_samples(quantile: float) -> int:
    """The fewest observations a `quantile` (0.5, 0.99) is judged on."""
    return math.ceil(round(ABOVE_THE_PERCENTILE / (1 - quantile), 6))


MEDIAN_MIN_SAMPLES = min_samples(0.5)
P99_MIN_SAMPLES = min_samples(0.99)


def drift_ratio(measured_ms: float, estimate_ms: float) -> float:
    """How far a measured median is from its estimate: measured / estimate (1.0: as estimated)."""
    return measured_ms / estimate_ms


@dataclass(frozen=True)
class LoadEstimate:
    """The latency the planner estimates at one load, and the load it was estimated at."""

    ttft_ms: float
    itl_ms: float
    # Sequences one engine runs (a data-parallel rank's share under DP x EP), and the request sizes, as estimated.
    sequences: int
    prompt_tokens: int
    output_tokens: int
    # Output tokens per second of one replica at that load (None: not estimated).
    output_tokens_per_s: float | None = None

    def text(self) -> str:
        """`8 running, 1,024 -> 256 tokens`."""
        return f"{self.sequences} running, {self.prompt_tokens:,} \N{RIGHTWARDS ARROW} {self.output_tokens:,} tokens"


def estimate_at_load(plan: Plan, running: float, prompt_len: float, output_len: float) -> LoadEstimate:
    """TTFT and ITL of `plan`'s deployment with `running` sequences per engine on average (rounded, at least one,
    at most max_num_seqs: vLLM never batches more), prompts of `prompt_len` and outputs of `output_len` tokens
    (rounded, within max_model_len), arriving on their own (as production traffic does)."""
    sequences = min(max(1, round(running)), plan.max_num_seqs)
    prompt = min(max(1, round(prompt_len)), plan.max_model_len - 1)
    output = min(max(1, round(output_len)), plan.max_model_len - prompt)
    dp = plan.data_parallel_size
    request = replace(
        plan.request,
        # The replica's sequences: one engine's, times the data-parallel ranks that each run as many.
        target_concurrency=sequences * dp,
        typical_input_tokens=prompt,
        typical_output_tokens=output,
        # As deployed: the token budget and memory follow from it, not from the load.
        max_num_seqs=plan.max_num_seqs,
        data_parallel_size=dp if plan.expert_parallel else None,
        max_itl_ms=None,
        max_ttft_ms=None,
    )
    ctx = Context(request, suggest=False)
    tp, nodes = plan.tensor_parallel_size, plan.nodes_per_replica
    if plan.expert_parallel:
        fit = evaluate_expert_parallel(ctx, plan.instance, tp, dp, nodes)
    else:
        fit = evaluate(ctx, plan.instance, tp, plan.pipeline_parallel_size, nodes)
    latency = fit.latency
    return LoadEstimate(latency.ttft_ms, latency.itl_ms, sequences, prompt, output, latency.output_tokens_per_s)
