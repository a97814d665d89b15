"""The latency model: one engine step as vLLM 0.33 runs it, and from it the inter-token latency, the time per output
token with chunked prefill mixed in, the time to first token (median and p99 each) and a replica's output throughput.

One step of `d` decoding sequences and `p` prompt tokens, per GPU of one pipeline stage (`step_ms`):
- memory: the weights every step reads (all but the routed experts), the routed experts its `d + p` tokens route to
  (1 - (1 - k/E)^tokens of them; a prompt chunk reads nearly all), and the KV cache of the `d` sequences at the
  typical context, at `eta_memory` of the datasheet bandwidth;
- compute: 2 FLOPs per active parameter per token, attention over the context (decode) or the prompt (prefill), at
  `eta_compute` of the dense peak. The step takes both, one after the other: the short matrix multiplies of a decode
  batch do not hide their loads under their math (a roofline's max() scored 30-40 % optimistic on A100 at 50-200
  sequences; fitted as a free fraction, the overlap came out at 0 on eight of ten leave-one-source-out folds);
- a fixed cost per step (`step_ms`: scheduler, sampler, launch), and per layer for MoE routing and for multi-head
  latent attention (expressed as time on an H100 and scaled by 3,350 GB/s over the GPU's bandwidth);
- with TP > 1 two all-reduces per layer of the step's tokens' activations (hardware.all_reduce_us), so a prompt
  chunk's all-reduce grows with its tokens; pipeline stages one after another; under expert parallelism the
  dispatch and combine of every MoE layer (computed by the caller, expert_parallel.py), more with prompt tokens.

The decode batch `b` (the plan's target_concurrency, or the load verify observed):
- in steady state each sequence brings a prompt every `output_tokens` steps, split into chunks of at most the token
  budget less the decode batch; a fraction `f` of steps carries a chunk. The median inter-token latency is a step
  without one (unless most steps carry one), the time per output token the mean over steps, the p99 inter-token
  latency a step carrying a chunk once at least 1 % of steps do;
- the time to first token: a fixed serving overhead (`serving_ms`: HTTP, tokenization, detokenization, streaming),
  the wait for the engine when other sequences run (vLLM 0.33 schedules step N+1 while step N runs, engine/core.py
  `step_with_batch_queue` with a batch queue of 2, so a request arriving during step N joins step N+2: one and a half
  steps on average, `TTFT_WAIT_STEPS`; half a step without async scheduling; none when the engine is idle), the
  prompt's own chunks, each a step carrying the other sequences' decodes, and the other prompts that overlap it. The
  p99 waits a whole prefill step plus the one already scheduled, and meets the 99th percentile of overlapping prompts
  (Poisson);
- with `synchronized` arrivals (a benchmark with fixed lengths and ignore-eos starts each wave of requests together)
  the median request waits for half the wave's prefill and the last for all of it.
The p99s have no constant of their own: they are the step and queue shapes above at their worst percentile.

The fitted constants (fitted.py) come from published measurements (tests/fixtures/latency); docs/reference/
planner-accuracy.md scores the model on every source with that source left out of the fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llm_eks.planner.latency.fitted import FITTED, LatencyConstants
from llm_eks.planner.latency.hardware import all_reduce_us

# Per-layer costs are given as time on this bandwidth (an H100 SXM) and scale with the GPU's.
REFERENCE_BANDWIDTH_GBPS = 3350.0
# Steps a request waits for a busy engine before its own: the rest of the running step (half on average) and, with
# async scheduling (vLLM's default from 0.14: vllm-project/vllm#27614, deepjavalibrary/djl#3833; on in 0.33), the step
# scheduled while that one ran (engine/core.py step_with_batch_queue, a batch queue of 2 at PP 1), which a request
# arriving meanwhile misses.
TTFT_WAIT_STEPS = {True: 1.5, False: 0.5}
# The p99 request arrives as a prefill step starts: it waits all of it (and the step scheduled behind it).
TTFT_P99_WAIT_STEPS = {True: 2.0, False: 1.0}
# A step kind that at least this fraction of inter-token gaps see is the p99 inter-token latency.
P99_FRACTION = 0.01


@dataclass(frozen=True)
class StepShape:
    """What one step of the planned batch moves and computes on one GPU of one pipeline stage."""

    batch: int
    input_tokens: int
    output_tokens: int
    layers_per_stage: int
    pipeline_stages: int
    tensor_parallel_size: int
    # Bytes every step reads (all weights but the routed experts), and the routed experts this GPU holds.
    dense_bytes: float
    expert_bytes: float
    # Routing (0 and 0 for a dense model), and how many tokens reach this GPU's experts per token of this engine
    # (the data-parallel ranks step in lockstep under expert parallelism, each with its own tokens).
    experts_per_token: int
    num_experts: int
    # KV bytes a decode step reads per running sequence at the typical context.
    kv_bytes_per_sequence: float
    # FLOPs per token: the linear layers, and attention at the decode context and (on average) over the prompt.
    linear_flops_per_token: float
    decode_attention_flops_per_token: float
    prefill_attention_flops_per_token: float
    hidden_size: int
    is_moe: bool
    is_mla: bool
    memory_bandwidth_gbps: float
    peak_tflops: float
    # "nvlink", "pcie" or "none".
    interconnect: str
    pipeline_hop_us: float
    # max_num_batched_tokens: the most tokens one step takes.
    token_budget: int
    expert_token_scale: int = 1
    # Expert parallelism (0 for TP x PP): the MoE layers of a stage, the dispatch and combine collectives of one of
    # them at the decode batch (us), and what each prompt token of a rank adds to them (us per token).
    moe_layers_per_stage: int = 0
    moe_collective_us: float = 0.0
    moe_collective_us_per_token: float = 0.0
    # Sequences the whole replica runs when `batch` is one data-parallel rank's share; None: `batch` (one engine).
    replica_sequences: int | None = None


@dataclass(frozen=True)
class StepTime:
    """One step's time (ms) and its parts."""

    total_ms: float
    memory_ms: float
    compute_ms: float
    layers_ms: float
    collectives_ms: float


@dataclass(frozen=True)
class LatencyEstimate:
    """The estimates at one load, and the parts of a decode step (ms) that make them."""

    itl_ms: float
    tpot_ms: float
    ttft_ms: float
    # Output tokens per second one replica produces at this load.
    output_tokens_per_s: float
    step_ms: float
    memory_ms: float
    compute_ms: float
    layers_ms: float
    prefill_interference_ms: float
    # Of layers_ms: the expert-parallel dispatch and combine collectives (0 for TP x PP).
    collectives_ms: float = 0.0
    itl_p99_ms: float = 0.0
    ttft_p99_ms: float = 0.0

    def rounded(self) -> LatencyEstimate:
        """As a plan shows it: 0.1 ms (TTFT 1 ms, throughput 1 token/s); estimates, not measurements."""
        return LatencyEstimate(
            itl_ms=round(self.itl_ms, 1),
            tpot_ms=round(self.tpot_ms, 1),
            ttft_ms=round(self.ttft_ms),
            output_tokens_per_s=round(self.output_tokens_per_s),
            step_ms=round(self.step_ms, 1),
            memory_ms=round(self.memory_ms, 1),
            compute_ms=round(self.compute_ms, 1),
            layers_ms=round(self.layers_ms, 1),
            prefill_interference_ms=round(self.prefill_interference_ms, 1),
            collectives_ms=round(self.collectives_ms, 1),
            itl_p99_ms=round(self.itl_p99_ms, 1),
            ttft_p99_ms=round(self.ttft_p99_ms),
        )


def experts_read(s: StepShape, tokens: float) -> float:
    """Fraction of this GPU's routed experts a step of `tokens` tokens reads, each token picking experts_per_token of
    num_experts uniformly: 1 - (1 - k/E)^tokens (0 for a dense model, which has none)."""
    if not s.num_experts:
        return 0.0
    routed = max(tokens, 1.0) * s.expert_token_scale
    return 1.0 - math.pow(1.0 - s.experts_per_token / s.num_experts, routed)


def step_time(s: StepShape, c: LatencyConstants, decode: float, prefill: float = 0.0) -> StepTime:
    """One step carrying `decode` decoding sequences and `prefill` prompt tokens (see the module docstring)."""
    tokens = decode + prefill
    bytes_read = s.dense_bytes + s.expert_bytes * experts_read(s, tokens) + decode * s.kv_bytes_per_sequence
    memory = bytes_read / (s.memory_bandwidth_gbps * 1e9 * c.eta_memory) * 1e3
    flops = (
        tokens * s.linear_flops_per_token
        + decode * s.decode_attention_flops_per_token
        + prefill * s.prefill_attention_flops_per_token
    )
    compute = flops / (s.peak_tflops * 1e12 * c.eta_compute) * 1e3
    # MoE routing and latent attention add work per layer that runs at the GPU's speed.
    scaled_us = (c.moe_layer_us if s.is_moe else 0.0) + (c.mla_layer_us if s.is_mla else 0.0)
    per_layer_us = scaled_us * REFERENCE_BANDWIDTH_GBPS / s.memory_bandwidth_gbps
    per_layer_us += 2 * all_reduce_us(s.interconnect, max(tokens, 1.0) * s.hidden_size * 2, s.tensor_parallel_size)
    collectives = s.moe_layers_per_stage * (s.moe_collective_us + prefill * s.moe_collective_us_per_token) / 1e3
    layers = s.layers_per_stage * per_layer_us / 1e3 + collectives
    stage = c.step_ms + memory + compute + layers
    total = stage * s.pipeline_stages + (s.pipeline_stages - 1) * s.pipeline_hop_us / 1e3
    return StepTime(total, memory, compute, layers, collectives)


def poisson_quantile(mean: float, q: float) -> int:
    """The smallest k with P(X <= k) >= q for X ~ Poisson(mean)."""
    term = cumulative = math.exp(-mean)
    k = 0
    while cumulative < q and k < 10_000:
        k += 1
        term *= mean / k
        cumulative += term
    return k


def estimate(
    s: StepShape,
    c: LatencyConstants = FITTED,
    *,
    synchronized: bool = False,
    others: float | None = None,
    async_scheduling: bool = True,
) -> LatencyEstimate:
    """The latency estimates for `s` with constants `c` (see the module docstring). `others`: how many other
    sequences a new request finds running (a mean, from an observed load; the engine is then busy with probability
    1 - e^-others); None: `batch - 1`, a full batch as the plan targets it (a closed loop of `batch` clients).
    `async_scheduling`: False for a vLLM that schedules a step only after the previous one (before 0.14, by
    default)."""
    b = s.batch
    out = max(s.output_tokens, 1)
    decode = step_time(s, c, b)
    room = max(s.token_budget - b, 1)
    chunks = math.ceil(s.input_tokens / room)
    chunk = s.input_tokens / chunks
    loaded = step_time(s, c, b, chunk)

    if synchronized:
        wave_tokens = b * s.input_tokens
        wave_steps = math.ceil(wave_tokens / s.token_budget)
        wave_ms = wave_steps * step_time(s, c, 0, wave_tokens / wave_steps).total_ms
        own_ms = chunks * step_time(s, c, 0, chunk).total_ms
        # A request waits, after its first token, for half the wave's prefill on average.
        interference = (wave_ms - own_ms) / 2 / out
        tpot = decode.total_ms + interference
        itl = decode.total_ms
        itl_p99 = loaded.total_ms if wave_steps / 2 / out >= P99_FRACTION else decode.total_ms
        ttft = c.serving_ms + own_ms + (wave_ms - own_ms) / 2
        ttft_p99 = c.serving_ms + wave_ms
    else:
        # Each sequence brings a prompt every `out` steps; a fraction f of steps carries a chunk of one.
        f = min(1.0, b * chunks / out)
        tpot = (1 - f) * decode.total_ms + f * loaded.total_ms
        interference = tpot - decode.total_ms
        itl = decode.total_ms if f <= 0.5 else loaded.total_ms
        itl_p99 = loaded.total_ms if f >= P99_FRACTION else decode.total_ms
        running = b - 1 if others is None else others
        busy = (1.0 if running >= 1 else 0.0) if others is None else 1.0 - math.exp(-running)
        own = chunks * step_time(s, c, running, chunk).total_ms
        request_ms = own + out * tpot
        overlapping = running * own / request_ms
        ttft = c.serving_ms + busy * TTFT_WAIT_STEPS[async_scheduling] * tpot + own * (1 + overlapping)
        worst = poisson_quantile(overlapping, 0.99)
        ttft_p99 = c.serving_ms + busy * TTFT_P99_WAIT_STEPS[async_scheduling] * loaded.total_ms + own * (1 + worst)
    return LatencyEstimate(
        itl_ms=itl,
        tpot_ms=tpot,
        ttft_ms=ttft,
        output_tokens_per_s=(s.replica_sequences or b) * 1e3 / tpot,
        step_ms=decode.total_ms,
        memory_ms=decode.memory_ms,
        compute_ms=decode.compute_ms,
        layers_ms=decode.layers_ms,
        prefill_interference_ms=interference,
        collectives_ms=decode.collectives_ms,
        itl_p99_ms=itl_p99,
        ttft_p99_ms=ttft_p99,
    )
