"""The latency model: one decode step as vLLM 0.33 runs it, the time per output token with chunked prefill mixed
in, the time to first token, and a replica's output throughput, all at the planned batch.

A decode step of `batch` sequences, per GPU of one pipeline stage:
- memory: the weights the step reads (for MoE, the shared part and the experts the batch routes to) and the KV
  cache of every running sequence at the typical context, at `eta_memory` of the datasheet bandwidth;
- compute: 2 FLOPs per active parameter per token, plus attention (QK and PV over the context) at `eta_compute`
  of the dense peak; the step takes the longer of the two (roofline);
- a fixed cost per step (scheduler, sampler, launch) and per layer (the kernels a small batch cannot fill,
  larger for MoE routing and for multi-head latent attention), expressed as time on an H100 and scaled by
  3,350 GB/s over the GPU's bandwidth, since those kernels run at the GPU's speed;
- two all-reduces per layer when TP > 1 (hardware.py), and pipeline stages one after another;
- under expert parallelism (DP x EP layouts, `moe_layers_per_stage` > 0), each DP rank steps its own share of the
  batch, and every MoE layer adds the dispatch (all-gather) and combine (reduce-scatter) of vLLM 0.33's default
  allgather_reducescatter all2all over the EP group: within a node over NVLink, across nodes over EFA
  (hardware.collective_us, computed by the caller); a prompt token adds its share of those bytes.
Chunked prefill: in steady state each of `batch` sequences brings its prompt once per `output_tokens` steps, so a
step carries batch x input / output prefill tokens on average; each costs its compute, and a step that carries a
chunk also reads the experts the decode batch alone would skip. The median inter-token latency is a step without
prefill (unless most steps carry one); the time per output token is the mean, with it.
TTFT: 1.5 steps (the wait for the running step, one more for async output processing), the prompt's own chunks,
stretched by the other sequences' prefills that overlap it, and a fixed serving overhead (HTTP, tokenization,
streaming). With `synchronized` arrivals (a benchmark with fixed lengths and ignore-eos starts every request of a
wave together) the median request waits for half the wave's prefill instead.

The fitted constants (fitted.py) come from published measurements (tests/fixtures/latency); see
docs/reference/planner-accuracy.md for the error on every point, with a held-out part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llm_eks.planner.latency.fitted import FITTED, LatencyConstants
from llm_eks.planner.latency.hardware import ALL_REDUCE_BUS_GBPS, ALL_REDUCE_US

# Per-layer costs are given as time on this bandwidth (an H100 SXM) and scale with the GPU's.
REFERENCE_BANDWIDTH_GBPS = 3350.0
# Steps before the first token besides the prompt's own: half a step waiting for the running one, and one step
# for asynchronous output processing (vLLM 0.33 schedules step N+1 while it processes step N's output).
TTFT_WAIT_STEPS = 1.5


@dataclass(frozen=True)
class StepShape:
    """What one decode step of the planned batch moves and computes on one GPU of one pipeline stage."""

    batch: int
    input_tokens: int
    output_tokens: int
    layers_per_stage: int
    pipeline_stages: int
    tensor_parallel_size: int
    # Bytes a decode step reads: weights (the experts the batch routes to), and KV at the typical context.
    weight_bytes_read: float
    kv_bytes_read: float
    # Expert bytes a decode step skips and a prefill chunk reads (0 for a dense model).
    skipped_expert_bytes: float
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
    # max_num_batched_tokens: the most prompt tokens one step takes.
    token_budget: int
    # Expert parallelism (0 for TP x PP): the MoE layers of a stage, the dispatch and combine collectives of one of
    # them at the decode batch (us), and what each prompt token of a rank adds to them (us per token).
    moe_layers_per_stage: int = 0
    moe_collective_us: float = 0.0
    moe_collective_us_per_token: float = 0.0
    # Sequences the whole replica runs when `batch` is one data-parallel rank's share; None: `batch` (one engine).
    replica_sequences: int | None = None


@dataclass(frozen=True)
class LatencyEstimate:
    """The estimates at the planned batch, and the parts of a decode step (ms) that make them."""

    itl_ms: float
    tpot_ms: float
    ttft_ms: float
    # Output tokens per second one replica produces at the planned batch.
    output_tokens_per_s: float
    step_ms: float
    memory_ms: float
    compute_ms: float
    layers_ms: float
    prefill_interference_ms: float
    # Of layers_ms: the expert-parallel dispatch and combine collectives (0 for TP x PP).
    collectives_ms: float = 0.0

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
        )


def estimate(s: StepShape, c: LatencyConstants = FITTED, *, synchronized: bool = False) -> LatencyEstimate:
    """The latency estimates for `s` with constants `c` (see the module docstring)."""
    bandwidth = s.memory_bandwidth_gbps * 1e9 * c.eta_memory
    flops = s.peak_tflops * 1e12 * c.eta_compute
    memory_ms = (s.weight_bytes_read + s.kv_bytes_read) / bandwidth * 1e3
    compute_ms = s.batch * (s.linear_flops_per_token + s.decode_attention_flops_per_token) / flops * 1e3
    layer_us = c.layer_us + (c.moe_layer_us if s.is_moe else 0.0) + (c.mla_layer_us if s.is_mla else 0.0)
    layer_us *= REFERENCE_BANDWIDTH_GBPS / s.memory_bandwidth_gbps
    tp = s.tensor_parallel_size
    if tp > 1:
        link = "nvlink" if s.interconnect == "nvlink" else "pcie"
        message = s.batch * s.hidden_size * 2
        layer_us += 2 * (ALL_REDUCE_US[link] + message / (ALL_REDUCE_BUS_GBPS[link] * 1e3)) + c.tp_layer_us * math.log2(
            tp
        )
    collectives_ms = s.moe_layers_per_stage * s.moe_collective_us / 1e3
    layers_ms = s.layers_per_stage * layer_us / 1e3 + collectives_ms
    stage_ms = c.step_ms + max(memory_ms, compute_ms) + layers_ms
    step_ms = stage_ms * s.pipeline_stages + (s.pipeline_stages - 1) * s.pipeline_hop_us / 1e3

    prefill_token_ms = (
        s.linear_flops_per_token + s.prefill_attention_flops_per_token
    ) / flops * 1e3 * s.pipeline_stages + s.moe_layers_per_stage * s.moe_collective_us_per_token / 1e3
    skipped_ms = s.skipped_expert_bytes / bandwidth * 1e3 * s.pipeline_stages
    out = max(s.output_tokens, 1)
    prefill_tokens = s.batch * s.input_tokens / out
    chunked_fraction = min(1.0, s.batch * math.ceil(s.input_tokens / s.token_budget) / out)
    interference_ms = prefill_tokens * prefill_token_ms + chunked_fraction * skipped_ms
    tpot_ms = step_ms + interference_ms
    itl_ms = step_ms + (interference_ms if chunked_fraction > 0.5 else 0.0)

    chunks = math.ceil(s.input_tokens / max(s.token_budget - s.batch, 1))
    own_prefill_ms = chunks * (step_ms + skipped_ms) + s.input_tokens * prefill_token_ms
    if synchronized:
        wave = s.batch * s.input_tokens
        wave_ms = math.ceil(wave / s.token_budget) * (step_ms + skipped_ms) + wave * prefill_token_ms
        prefill_ms = own_prefill_ms + (wave_ms - own_prefill_ms) / 2
    else:
        request_ms = TTFT_WAIT_STEPS * step_ms + own_prefill_ms + out * tpot_ms
        prefill_ms = own_prefill_ms * (1 + (s.batch - 1) * own_prefill_ms / request_ms)
    ttft_ms = c.serving_ms + TTFT_WAIT_STEPS * step_ms + prefill_ms
    return LatencyEstimate(
        itl_ms=itl_ms,
        tpot_ms=tpot_ms,
        ttft_ms=ttft_ms,
        output_tokens_per_s=(s.replica_sequences or s.batch) * 1e3 / tpot_ms,
        step_ms=step_ms,
        memory_ms=memory_ms,
        compute_ms=compute_ms,
        layers_ms=layers_ms,
        prefill_interference_ms=interference_ms,
        collectives_ms=collectives_ms,
    )
