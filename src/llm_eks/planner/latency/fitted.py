"""The latency model's fitted constants, and the fixture they were fitted to.

No source states them: each is what makes the model reproduce published `vllm bench serve` measurements. They are
fitted by `benchmarks/calibrate_latency.py` (robust least squares over the log errors, every source weighted alike)
on every run of tests/fixtures/latency/published.json the scoring rules admit; `FIXTURE_SHA256` is the sha256 of
that file as it was read, and tests/test_latency_accuracy.py fails when the fixture changes without a refit. How well
the model predicts a source it was not fitted on is scored by refitting without each source in turn (leave one
source out, docs/reference/planner-accuracy.md).

Not fitted but read: the NVLink and PCIe all-reduce costs (hardware.py), and how long a request waits for a busy
engine (model.py TTFT_WAIT_STEPS, from vLLM's scheduler).
"""

from __future__ import annotations

from dataclasses import dataclass

# sha256 of tests/fixtures/latency/published.json when FITTED was fitted (benchmarks/calibrate_latency.py prints it).
FIXTURE_SHA256 = "d75438f9e65c4febdc2dc9d154b0feb1d9d3c83b18661f0ff57bbe8dca494ead"


@dataclass(frozen=True)
class LatencyConstants:
    """What the model cannot read off a datasheet (model.py says where each enters)."""

    # Fraction of the datasheet memory bandwidth a step's weight and KV reads achieve.
    eta_memory: float = 0.787
    # Fraction of the dense tensor-core peak the matrix multiplies achieve.
    eta_compute: float = 0.659
    # Fixed cost of one engine step (scheduler, sampler, launch), ms.
    step_ms: float = 1.286
    # Per layer for MoE routing and for multi-head latent attention, us on an H100, scaled by 3,350 GB/s over the
    # GPU's bandwidth (this work runs at the GPU's speed).
    moe_layer_us: float = 39.204
    mla_layer_us: float = 253.58
    # Fixed overhead of a request's first token beyond the engine (HTTP, tokenization, detokenization, streaming and
    # the benchmark client's own, tenstorrent/tt-inference-server#190), ms: what published TTFTs hold on average.
    serving_ms: float = 40.683


FITTED = LatencyConstants()
