"""The latency model on Neuron: one compiled decode step and one prefill as a Neuron engine runs them, and from them
the inter-token latency, time per output token, time to first token and throughput at a load.

A bandwidth-only estimate is badly optimistic on Neuron: published decode steps are 2 to 8 times slower than the
weights over the HBM bandwidth (docs/reference/planner-accuracy.md, Neuron). The model keeps the bandwidth term and
adds what the published runs show on top of it:

- decode step: the weights and the KV cache of the compiled batch over `eta_memory` of the core's HBM bandwidth (per
  NeuronCore generation: v2 on Inferentia2 and Trainium, v3 on Trainium2), a fixed cost per step, a cost per layer
  (the tensor-parallel collectives and kernel launches of every layer), and a cost per layer and per sequence of the
  batch the step runs. That batch is the compiled one, not the live one: NxD Inference decodes its whole compiled
  batch every step (padding idle slots), vllm-neuron the smallest of its decode batch buckets that holds the live
  batch. The KV read covers the token-generation bucket that holds the context, since attention runs over the
  compiled length;
- prefill: its matrix multiplies at `eta_compute` of the core's dense BF16 peak, attention over the prompt, the
  weights read once per prefill step (vllm-neuron splits a long prompt into segments of its token budget), and the
  same per-step and per-layer costs. Prefill and decode never share a step on Neuron (vllm-neuron's features guide:
  "never mixed"; NxD Inference runs context encoding and token generation as separate compiled models);
- at a load of `b` sequences each brings a prompt every `output_tokens` steps; a prompt stalls the other sequences'
  decoding for its prefill. Time to first token: a serving overhead (HTTP, tokenization, streaming) for served runs,
  half a decode step of waiting when others run, the prompt's prefill and the others' prefills that overlap it.

The constants (FITTED) are fitted by benchmarks/neuron_latency.py on published Neuron runs (tests/fixtures/latency/
neuron_published.json), every source weighted alike; docs/reference/planner-accuracy.md scores every source with
constants fitted without it. Offline benchmarks that run a static batch (the Neuron SDK's performance tables) are
scored as such: every sequence starts together, TTFT is the batch's context encoding without a serving overhead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llm_eks.planner.latency import LatencyEstimate
from llm_eks.planner.latency.model import P99_FRACTION, poisson_quantile

# sha256 of tests/fixtures/latency/neuron_published.json when FITTED was fitted (benchmarks/neuron_latency.py
# --calibrate prints it; tests/test_neuron_latency.py fails when the fixture changes without a refit).
FIXTURE_SHA256 = "9ee6ac8c58d469ba42ef39f0058bf93cd39cdf01c9cd2598a5e5db6298060a87"


@dataclass(frozen=True)
class NeuronLatencyConstants:
    """What the Neuron model cannot read off a datasheet (the module docstring says where each enters)."""

    # Fraction of the HBM bandwidth decode reads achieve, on NeuronCore-v2 and NeuronCore-v3.
    eta_memory_v2: float = 0.705
    eta_memory_v3: float = 0.917
    # Fraction of the dense BF16 peak a prefill's matrix multiplies achieve.
    eta_compute: float = 0.16
    # Fixed cost of one step, ms.
    step_ms: float = 2.564
    # Per layer and step (collectives, launches), us.
    layer_us: float = 94.002
    # Per layer, step and sequence of the batch the step runs, us.
    sequence_layer_us: float = 6.158
    # A served request's first-token overhead beyond the engine (HTTP, tokenization, streaming), ms.
    serving_ms: float = 0.0


FITTED = NeuronLatencyConstants()


@dataclass(frozen=True)
class NeuronStep:
    """What one replica's steps move and compute on one core, at a load."""

    # "NeuronCore-v2" or "NeuronCore-v3".
    neuron_core: str
    layers: int
    weight_bytes_per_core: float
    kv_bytes_per_token_per_core: float
    bandwidth_per_core_gbps: float
    peak_tflops_per_core: float
    # 2 FLOPs per parameter a token touches, on this core (all but the embedding lookup, split over TP).
    linear_flops_per_token_per_core: float
    # Attention work per token and per token of context it attends to, on this core (QK and PV over its heads).
    attention_flops_per_context_token: float
    # The live load: sequences running, and a request's prompt and output lengths.
    batch: int
    input_tokens: int
    output_tokens: int
    # The batch the compiled decode step runs (>= batch).
    decode_batch: int
    # The compiled lengths decode attends over: the smallest holding the context is used.
    decode_buckets: tuple[int, ...]
    # Prefill tokens one step takes (vllm-neuron's segments); None: a prompt in one step.
    prefill_budget: int | None = None
    # False: an offline benchmark of a static batch (no HTTP serving, every prompt at once).
    served: bool = True


def _eta_memory(s: NeuronStep, c: NeuronLatencyConstants) -> float:
    return c.eta_memory_v3 if s.neuron_core == "NeuronCore-v3" else c.eta_memory_v2


def _bucket(buckets: tuple[int, ...], tokens: float) -> int:
    return next((b for b in buckets if b >= tokens), buckets[-1])


def decode_ms(s: NeuronStep, c: NeuronLatencyConstants, context: float) -> tuple[float, float]:
    """(step, of which memory) for one decode step of the compiled batch at `context` tokens, ms."""
    attended = _bucket(s.decode_buckets, context)
    read = s.weight_bytes_per_core + s.decode_batch * s.kv_bytes_per_token_per_core * attended
    memory = read / (s.bandwidth_per_core_gbps * 1e9 * _eta_memory(s, c)) * 1e3
    overhead = c.step_ms + s.layers * (c.layer_us + s.decode_batch * c.sequence_layer_us) / 1e3
    return overhead + memory, memory


def prefill_ms(s: NeuronStep, c: NeuronLatencyConstants, prompts: int, tokens: int, together: bool = False) -> float:
    """Prefill of `prompts` prompts of `tokens` tokens each, ms: one after another in steps of the token budget, or
    (`together`, a static batch) all in the same steps."""
    total = prompts * tokens
    steps = (1 if together else prompts) * (math.ceil(tokens / s.prefill_budget) if s.prefill_budget else 1)
    # Each prompt token attends to the ones before it: tokens^2 / 2 context tokens per prompt.
    flops = total * s.linear_flops_per_token_per_core + prompts * s.attention_flops_per_context_token * tokens**2 / 2
    compute = flops / (s.peak_tflops_per_core * 1e12 * c.eta_compute) * 1e3
    memory = steps * s.weight_bytes_per_core / (s.bandwidth_per_core_gbps * 1e9 * _eta_memory(s, c)) * 1e3
    return compute + memory + steps * (c.step_ms + s.layers * c.layer_us / 1e3)


def estimate(s: NeuronStep, c: NeuronLatencyConstants = FITTED) -> LatencyEstimate:
    """The estimates for `s` with constants `c` (see the module docstring)."""
    b, out = s.batch, max(s.output_tokens, 1)
    decode, memory = decode_ms(s, c, s.input_tokens + s.output_tokens / 2)
    if not s.served:
        # A static batch: all prompts encoded together, then decoding with no prompt in between.
        ttft = prefill_ms(s, c, b, s.input_tokens, together=True)
        return LatencyEstimate(
            itl_ms=decode,
            tpot_ms=decode,
            ttft_ms=ttft,
            output_tokens_per_s=b * 1e3 / decode,
            step_ms=decode,
            memory_ms=memory,
            compute_ms=0.0,
            layers_ms=decode - memory,
            prefill_interference_ms=0.0,
            itl_p99_ms=decode,
            ttft_p99_ms=ttft,
        )
    own = prefill_ms(s, c, 1, s.input_tokens)
    # The other b - 1 sequences each bring a prompt every `out` steps; each stalls this one's decoding.
    others = b - 1
    tpot = decode + others * own / out
    request_ms = own + out * tpot
    overlapping = others * own / request_ms
    busy = 0.5 * decode if others else 0.0
    ttft = c.serving_ms + busy + own * (1 + overlapping)
    stalled = others / out >= P99_FRACTION
    return LatencyEstimate(
        itl_ms=decode,
        tpot_ms=tpot,
        ttft_ms=ttft,
        output_tokens_per_s=b * 1e3 / tpot,
        step_ms=decode,
        memory_ms=memory,
        compute_ms=0.0,
        layers_ms=decode - memory,
        prefill_interference_ms=tpot - decode,
        itl_p99_ms=decode + own if stalled else decode,
        ttft_p99_ms=c.serving_ms + (decode if others else 0.0) + own * (1 + poisson_quantile(overlapping, 0.99)),
    )
