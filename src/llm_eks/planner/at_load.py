"""A plan's latency at the load a deployment actually saw: `llm-eks verify` measures TTFT and ITL over a window at
whatever load the window had, and a latency model says those depend on the load, so the comparison must be against
the estimate at that load (drift.py judges the ratio), not at the plan's target_concurrency.

The load is what vLLM's own metrics give over the window: the mean number of running sequences per replica
(`vllm:num_requests_running`, summed over a replica's engines) and the mean prompt and output lengths of the requests
that finished (`vllm:request_prompt_tokens` and `vllm:request_generation_tokens` histograms, sum over count). The
plan's deployed layout stays as planned: instance, TP/PP (or DP x EP), max_num_seqs, max_num_batched_tokens.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from llm_eks.planner.expert_parallel import evaluate_expert_parallel
from llm_eks.planner.latency import estimate
from llm_eks.planner.request import MAX_TARGET_CONCURRENCY
from llm_eks.planner.result import Plan
from llm_eks.planner.sizing import Context, evaluate


@dataclass(frozen=True)
class ObservedLoad:
    """What a replica ran over a window (means)."""

    # Running sequences per replica (a time average; fractional at light load, 0 when idle).
    running: float
    # Prompt and output tokens per request.
    prompt_tokens: float
    output_tokens: float


@dataclass(frozen=True)
class LoadEstimate:
    """The plan's latency estimates at one observed load (ms), and the load as estimated."""

    load: ObservedLoad
    # What the step was estimated with: the replica's decode batch (at least 1, at most what its engines batch) and
    # the request's lengths (whole tokens within max_model_len).
    batch: int
    prompt_tokens: int
    output_tokens: int
    ttft_ms: float
    ttft_p99_ms: float
    itl_ms: float
    itl_p99_ms: float
    # Mean time per output token with the prompts' chunks mixed in.
    tpot_ms: float
    # Output tokens per second of the replica at that load.
    output_tokens_per_s: float


def estimate_at_load(plan: Plan, load: ObservedLoad) -> LoadEstimate:
    """TTFT and ITL (median and p99) the latency model expects for `plan`'s deployment at `load`: the decode batch is
    the running sequences (at least the request itself, at most max_num_seqs per engine), the typical request the
    observed mean lengths (within max_model_len), and a new request finds its engine busy with probability
    1 - e^-running (Poisson arrivals; per data-parallel rank, running / DP), waiting as model.py describes."""
    for name in ("running", "prompt_tokens", "output_tokens"):
        value = getattr(load, name)
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"ObservedLoad.{name} must be a finite number >= 0, not {value!r}")
    limit = min(plan.max_num_seqs * plan.data_parallel_size, MAX_TARGET_CONCURRENCY)
    batch = min(max(1, round(load.running)), limit)
    prompt = max(1, round(load.prompt_tokens))
    output = max(1, round(load.output_tokens))
    if prompt + output > plan.max_model_len:
        prompt = max(1, min(prompt, plan.max_model_len - 1))
        output = plan.max_model_len - prompt
    request = dataclasses.replace(
        plan.request,
        accelerator=plan.instance.instance_type,
        target_concurrency=batch,
        typical_input_tokens=prompt,
        typical_output_tokens=output,
        max_num_seqs=plan.max_num_seqs,
        max_ttft_ms=None,
        max_itl_ms=None,
    )
    ctx = Context(request)
    tp, nodes = plan.tensor_parallel_size, plan.nodes_per_replica
    if plan.expert_parallel:
        fit = evaluate_expert_parallel(ctx, plan.instance, tp, plan.data_parallel_size, nodes)
    else:
        fit = evaluate(ctx, plan.instance, tp, plan.pipeline_parallel_size, nodes)
    step = dataclasses.replace(fit.step, token_budget=plan.max_num_batched_tokens)
    # A request joins one engine: under data parallelism, one rank's share of the running sequences.
    est = estimate(step, others=load.running / plan.data_parallel_size)
    return LoadEstimate(
        load=load,
        batch=batch,
        prompt_tokens=prompt,
        output_tokens=output,
        ttft_ms=est.ttft_ms,
        ttft_p99_ms=est.ttft_p99_ms,
        itl_ms=est.itl_ms,
        itl_p99_ms=est.itl_p99_ms,
        tpot_ms=est.tpot_ms,
        output_tokens_per_s=est.output_tokens_per_s,
    )
