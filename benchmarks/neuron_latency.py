"""The Neuron latency model (src/llm_eks/planner/neuron/latency.py) against published Neuron runs
(tests/fixtures/latency/neuron_published.json): the fit of its constants and, for every source, the error of the
constants fitted without it (leave one source out). A benchmark that prints numbers; tests/test_neuron_latency.py
holds the fit to the fixture, and docs/reference/planner-accuracy.md's Neuron table is generated from `scores()`.

    .venv/bin/python -m benchmarks.neuron_latency              # the error table
    .venv/bin/python -m benchmarks.neuron_latency --calibrate  # the constants and digest to paste into latency.py

Each run is planned as it ran: its instance type's chips and cores, its tensor-parallel size, its compiled batch and
length (NxD Inference's default buckets; a static batch decodes its whole compiled batch every step, as the served
runs here also do), its weight bytes (the Neuron SDK tables' Llama-3-8B rows store int8 weights), at its concurrency
with its prompt and output lengths. The decode figure is compared with the decode step, the TTFT with the time to
first token (an offline static batch: its context encoding, no serving overhead). A source is a benchmark suite
(`group`): a Neuron SDK performance table, the NxD Inference tutorial, optimum-neuron's vLLM benchmarks per chip.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.latency_fit import Target, fit
from llm_eks.catalog.accelerators import instance_type
from llm_eks.catalog.models import model
from llm_eks.planner import PlanRequest
from llm_eks.planner.latency import LatencyEstimate
from llm_eks.planner.neuron.latency import FITTED, NeuronLatencyConstants, NeuronStep, estimate
from llm_eks.planner.neuron.shape import compiled_shape, sharded_heads
from llm_eks.planner.neuron.sizing import kv_bytes_per_token_per_core, step_for, weight_bytes_per_core
from llm_eks.planner.sizing import Context

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "latency" / "neuron_published.json"
# What is fitted, with the bounds a physical reading allows.
BOUNDS: dict[str, tuple[float, float]] = {
    "eta_memory_v2": (0.2, 0.95),
    "eta_memory_v3": (0.2, 0.95),
    "eta_compute": (0.05, 0.9),
    "step_ms": (0.0, 20.0),
    "layer_us": (0.0, 500.0),
    "sequence_layer_us": (0.0, 200.0),
    "serving_ms": (0.0, 200.0),
}


def digest(path: Path = FIXTURE) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load(path: Path = FIXTURE) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return runs


def step_of(run: dict[str, Any]) -> NeuronStep:
    """The Neuron model's step for one published run, planned as it ran."""
    inst = instance_type(run["instance_type"])
    request = PlanRequest(
        model=model(run["model"]),
        accelerator=inst.instance_type,
        max_model_len=int(run["compiled_length"]),
        target_concurrency=int(run["concurrency"]),
        typical_input_tokens=int(run["input_tokens"]),
        typical_output_tokens=int(run["output_tokens"]),
    )
    ctx = Context(request)
    heads = sharded_heads(ctx.spec, int(run["tp"]))
    weights = weight_bytes_per_core(ctx, heads) * int(run["weight_bytes_per_parameter"]) / 2
    shape = compiled_shape("nxd-inference", int(run["compiled_batch"]), int(run["compiled_length"]))
    return step_for(
        ctx,
        inst,
        heads,
        shape,
        round(weights),
        kv_bytes_per_token_per_core(ctx, heads),
        int(run["concurrency"]),
        int(run["input_tokens"]),
        int(run["output_tokens"]),
        served=bool(run["served"]),
    )


@dataclass(frozen=True)
class Prepared:
    run: dict[str, Any]
    step: NeuronStep

    @property
    def source(self) -> str:
        return str(self.run["group"])

    def estimate(self, constants: NeuronLatencyConstants) -> LatencyEstimate:
        return estimate(self.step, constants)


def prepare(runs: list[dict[str, Any]]) -> list[Prepared]:
    return [Prepared(run, step_of(run)) for run in runs]


def targets(prepared: list[Prepared]) -> list[Target]:
    """Every run's decode figure and time to first token."""
    out = [Target(p.source, "decode", float(p.run["decode_ms"]), lambda c, p=p: p.estimate(c).itl_ms) for p in prepared]
    out += [Target(p.source, "ttft", float(p.run["ttft_ms"]), lambda c, p=p: p.estimate(c).ttft_ms) for p in prepared]
    return out


def fit_constants(prepared: list[Prepared], start: NeuronLatencyConstants = FITTED) -> NeuronLatencyConstants:
    return fit(targets(prepared), start, bounds=BOUNDS)


@dataclass(frozen=True)
class Row:
    id: str
    source: str
    instance_type: str
    setting: str
    decode_measured: float
    decode_held_out: float
    ttft_measured: float
    ttft_held_out: float
    # The weights over the whole bandwidth alone (what a bandwidth-only model would say), ms.
    bandwidth_only_ms: float

    @property
    def decode_error(self) -> float:
        return self.decode_held_out / self.decode_measured - 1

    @property
    def ttft_error(self) -> float:
        return self.ttft_held_out / self.ttft_measured - 1


@dataclass(frozen=True)
class Scores:
    rows: list[Row]
    folds: dict[str, NeuronLatencyConstants]
    fitted: NeuronLatencyConstants


def _row(p: Prepared, held: LatencyEstimate) -> Row:
    run, s = p.run, p.step
    return Row(
        id=run["id"],
        source=p.source,
        instance_type=run["instance_type"],
        setting=(
            f"{run['model'].rsplit('/', 1)[-1]}, TP{run['tp']}, batch {run['compiled_batch']}, "
            f"{run['input_tokens']}/{run['output_tokens']} tokens"
        ),
        decode_measured=float(run["decode_ms"]),
        decode_held_out=held.itl_ms,
        ttft_measured=float(run["ttft_ms"]),
        ttft_held_out=held.ttft_ms,
        bandwidth_only_ms=s.weight_bytes_per_core / (s.bandwidth_per_core_gbps * 1e9) * 1e3,
    )


@functools.cache
def scores(path: Path = FIXTURE) -> Scores:
    """Every run scored by the constants fitted without its source."""
    prepared = prepare(load(path))
    everything = fit_constants(prepared)
    folds = {
        source: fit_constants([p for p in prepared if p.source != source], everything)
        for source in sorted({p.source for p in prepared})
    }
    rows = [_row(p, p.estimate(folds[p.source])) for p in prepared]
    return Scores(rows, folds, everything)


def summary(rows: list[Row]) -> dict[str, tuple[float, float]]:
    """(median, worst) |error| of the decode figure and TTFT on held-out sources, and of a bandwidth-only decode."""
    decode = [abs(r.decode_error) for r in rows]
    ttft = [abs(r.ttft_error) for r in rows]
    bandwidth = [abs(r.bandwidth_only_ms / r.decode_measured - 1) for r in rows]
    return {
        "decode": (statistics.median(decode), max(decode)),
        "ttft": (statistics.median(ttft), max(ttft)),
        "bandwidth-only decode": (statistics.median(bandwidth), max(bandwidth)),
    }


def main(argv: list[str]) -> int:
    if "--calibrate" in argv:
        fitted = fit_constants(prepare(load()))
        print(f'FIXTURE_SHA256 = "{digest()}"')
        for field in dataclasses.fields(fitted):
            print(f"    {field.name}: float = {getattr(fitted, field.name)!r}")
        return 0
    result = scores()
    print(f"fixture sha256 {digest()}; fitted on every run: {result.fitted}")
    print(f"{'run':70} {'decode':>7} {'loso':>7} {'error':>7} {'TTFT':>7} {'loso':>7} {'error':>7}")
    for r in result.rows:
        print(
            f"{r.id[:70]:70} {r.decode_measured:7.2f} {r.decode_held_out:7.2f} {r.decode_error:+7.1%} "
            f"{r.ttft_measured:7.0f} {r.ttft_held_out:7.0f} {r.ttft_error:+7.1%}"
        )
    for name, (median, worst) in summary(result.rows).items():
        print(f"{name:22} median |error| {median:6.1%}, worst {worst:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
