"""The planner's latency estimates against published `vllm bench serve` runs (tests/fixtures/latency/published.json):
one row per run with the measured and estimated inter-token latency (or time per output token) and time to first
token, then the error per GPU generation, per source and for the held-out part. A benchmark that prints numbers;
tests/test_latency_accuracy.py holds the goals and the docs' table is generated from `rows()`.

    .venv/bin/python benchmarks/latency_error_table.py

Each run is planned as it was served: its GPU (one catalog instance of that GPU), TP and PP, weight format and KV
cache dtype, at its concurrency with its mean prompt and output lengths. The estimate compared is the one the
run's metric measures: the median ITL against a decode step, the mean or median TPOT against the time per output
token with chunked prefill. A run whose lengths were fixed with ignore-eos is scored with synchronized arrivals (the
benchmark starts each wave of requests together). A quarter of the runs (sha256 of the id, mod 4 == 0) is held
out of benchmarks/calibrate_latency.py's fit.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_eks.catalog.accelerators import instance_type
from llm_eks.catalog.models import ModelSpec, model
from llm_eks.planner import PlanRequest
from llm_eks.planner.latency import FITTED, LatencyConstants, LatencyEstimate, estimate
from llm_eks.planner.sizing import Context, evaluate

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "latency" / "published.json"
GENERATIONS = {"A100": "Ampere", "L4": "Ada", "L40S": "Ada", "H100": "Hopper", "H200": "Hopper", "B200": "Blackwell"}


@dataclass(frozen=True)
class Row:
    id: str
    generation: str
    gpu: str
    model: str
    setting: str
    source: str
    metric: str
    measured: float
    estimated: float
    ttft_measured: float | None
    ttft_estimated: float
    held_out: bool
    # Why the model cannot reproduce this run (a reason read from the data), or None.
    unexplained: str | None

    @property
    def error(self) -> float:
        return self.estimated / self.measured - 1

    @property
    def ttft_error(self) -> float | None:
        return None if self.ttft_measured is None else self.ttft_estimated / self.ttft_measured - 1


def held_out(run_id: str) -> bool:
    """A quarter of the runs, chosen by their id alone, never used to fit the constants."""
    return int(hashlib.sha256(run_id.encode()).hexdigest(), 16) % 4 == 0


def load(path: Path = FIXTURE) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return runs


def measured(run: dict[str, Any]) -> tuple[str, float]:
    """The run's decode figure: its median ITL, else its median, mean or unlabelled TPOT."""
    itl, tpot = run.get("itl_ms") or {}, run.get("tpot_ms") or {}
    if itl.get("median"):
        return "itl", float(itl["median"])
    for key in ("median", "mean", "unlabelled"):
        if tpot.get(key):
            return "tpot", float(tpot[key])
    raise ValueError(f"{run['id']}: no ITL or TPOT")


def _lengths(run: dict[str, Any]) -> tuple[int, int]:
    inp = run.get("mean_input_tokens") or run.get("input_len")
    out = run.get("mean_output_tokens") or run.get("output_len")
    return round(float(inp)), round(float(out))


def _spec(plan: dict[str, Any]) -> ModelSpec:
    if "model_config" in plan:
        return ModelSpec.from_hf_config(plan["model_config"], plan["model"])
    return model(plan["model"])


def estimate_run(run: dict[str, Any], constants: LatencyConstants = FITTED) -> LatencyEstimate:
    """The planner's estimate for one published run, with `constants` (the fitted ones by default)."""
    plan = run["llm_eks"]
    spec = _spec(plan)
    inp, out = _lengths(run)
    tp, pp = int(run["tp"]), int(run.get("pp") or 1)
    kv = "fp8" if str(run.get("kv_cache_dtype") or "").startswith("fp8") else "auto"
    max_len = min(max(4096, 1 << (inp + out - 1).bit_length()), spec.max_position_embeddings)
    request = PlanRequest(
        model=spec,
        weight_format=plan["weight_format"],
        kv_cache_dtype=kv,
        max_model_len=max_len,
        accelerator=plan["instance_type"],
        target_concurrency=int(run["concurrency"]),
        typical_input_tokens=inp,
        typical_output_tokens=out,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
    )
    fit = evaluate(Context(request), instance_type(plan["instance_type"]), tp, pp, 1)
    return estimate(fit.step, constants, synchronized=plan["arrivals"] == "synchronized")


def _source(run: dict[str, Any]) -> str:
    src = run["source"]
    if src.get("repo"):
        return f"{src['repo']}/{src.get('path', '')}".rstrip("/")
    return str(src.get("url") or src.get("title") or src.get("kind"))


def rows(constants: LatencyConstants = FITTED, path: Path = FIXTURE) -> list[Row]:
    out = []
    for run in load(path):
        plan = run["llm_eks"]
        metric, value = measured(run)
        est = estimate_run(run, constants)
        gpu = instance_type(plan["instance_type"]).accelerator_name.split("-")[0]
        inp, outl = _lengths(run)
        ttft = (run.get("ttft_ms") or {}).get("median")
        out.append(
            Row(
                id=run["id"],
                generation=GENERATIONS.get(gpu, gpu),
                gpu=gpu,
                model=plan["model"],
                setting=f"TP{run['tp']}, {run['concurrency']} seqs, {inp}/{outl} tokens, vLLM {run['vllm_version']}",
                source=_source(run),
                metric=metric,
                measured=value,
                estimated=est.itl_ms if metric == "itl" else est.tpot_ms,
                ttft_measured=None if ttft is None else float(ttft),
                ttft_estimated=est.ttft_ms,
                held_out=held_out(run["id"]),
                unexplained=plan.get("unexplained"),
            )
        )
    return out


@dataclass(frozen=True)
class Summary:
    group: str
    points: int
    median: float
    worst: float


def summarize(table: list[Row], key: str, *, ttft: bool = False) -> list[Summary]:
    """Median and worst |error| per value of `key` (a Row attribute, or "part": calibration / held-out)."""
    groups: dict[str, list[float]] = {}
    for r in table:
        error = r.ttft_error if ttft else r.error
        if error is None:
            continue
        group = ("held-out" if r.held_out else "calibration") if key == "part" else str(getattr(r, key))
        groups.setdefault(group, []).append(abs(error))
    return [Summary(g, len(e), statistics.median(e), max(e)) for g, e in sorted(groups.items())]


def main() -> int:
    table = rows()
    print(f"{'run':58} {'metric':6} {'measured':>8} {'estimate':>8} {'error':>7} {'TTFT':>7} {'est':>7} {'error':>7}")
    for r in table:
        ttft = "" if r.ttft_error is None else f"{r.ttft_measured:7.0f} {r.ttft_estimated:7.0f} {r.ttft_error:+7.1%}"
        mark = " H" if r.held_out else ("  " if r.unexplained is None else " ?")
        print(f"{r.id[:56]:56}{mark} {r.metric:6} {r.measured:8.2f} {r.estimated:8.2f} {r.error:+7.1%} {ttft}")
    for key in ("part", "generation", "source"):
        for s in summarize(table, key):
            print(f"ITL by {key:10} {s.group[:60]:60} n={s.points:<3} median {s.median:6.1%} worst {s.worst:6.1%}")
    for s in summarize(table, "part", ttft=True):
        print(f"TTFT by part       {s.group:60} n={s.points:<3} median {s.median:6.1%} worst {s.worst:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
