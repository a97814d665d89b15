"""The planner's latency estimates against published `vllm bench serve` runs (tests/fixtures/latency/published.json),
each source scored by constants fitted without it (leave one source out): one row per run with the measured and
estimated inter-token latency (or time per output token), time to first token and, where the source prints them,
their p99; then the error per GPU generation and per source. A benchmark that prints numbers;
tests/test_latency_accuracy.py holds the goals and the docs' tables are generated from `scores()`.

    .venv/bin/python -m benchmarks.latency_error_table

Which runs are scored is decided first, by the rules in benchmarks/latency_rules.py. Each run is planned as it was
served: its GPU (one catalog instance of that GPU), TP and PP, weight format and KV cache dtype, at its concurrency
with its mean prompt and output lengths. The estimate compared is the one the run's metric measures: the median ITL
against a decode step, the mean or median TPOT against the time per output token with chunked prefill. A run whose
lengths were fixed with ignore-eos, or that sent one wave of requests at once, is scored with synchronized arrivals.
"""

from __future__ import annotations

import functools
import hashlib
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.latency_fit import Target, fit
from benchmarks.latency_rules import arrivals, async_scheduling, excluded, ttft_excluded
from llm_eks.catalog.accelerators import instance_type
from llm_eks.catalog.models import ModelSpec, model
from llm_eks.planner import PlanRequest
from llm_eks.planner.latency import FITTED, LatencyConstants, LatencyEstimate, StepShape, estimate
from llm_eks.planner.sizing import Context, evaluate

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "latency" / "published.json"
GENERATIONS = {
    "A100": "Ampere",
    "A10G": "Ampere",
    "L4": "Ada",
    "L40S": "Ada",
    "H100": "Hopper",
    "H200": "Hopper",
    "B200": "Blackwell",
    "B300": "Blackwell",
    "RTX": "Blackwell",
}


def digest(path: Path = FIXTURE) -> str:
    """sha256 of the fixture's bytes, as fitted.py records it."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


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


def lengths(run: dict[str, Any]) -> tuple[int, int]:
    inp = run.get("mean_input_tokens") or run.get("input_len")
    out = run.get("mean_output_tokens") or run.get("output_len")
    return round(float(inp)), round(float(out))


def _spec(plan: dict[str, Any]) -> ModelSpec:
    if "model_config" in plan:
        return ModelSpec.from_hf_config(plan["model_config"], plan["model"])
    return model(plan["model"])


def step_shape(run: dict[str, Any]) -> StepShape:
    """The planner's step for one published run, planned as it was served."""
    plan = run["llm_eks"]
    spec = _spec(plan)
    inp, out = lengths(run)
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
    return evaluate(Context(request), instance_type(plan["instance_type"]), tp, pp, 1).step


def estimate_run(run: dict[str, Any], constants: LatencyConstants = FITTED) -> LatencyEstimate:
    """The planner's estimate for one published run, with `constants` (the fitted ones by default)."""
    return estimate(
        step_shape(run),
        constants,
        synchronized=arrivals(run) == "synchronized",
        async_scheduling=async_scheduling(run),
    )


def source_of(run: dict[str, Any]) -> str:
    src = run["source"]
    if src.get("repo"):
        return f"{src['repo']}/{src.get('path', '')}".rstrip("/")
    return str(src.get("url") or src.get("title") or src.get("kind"))


@dataclass(frozen=True)
class Prepared:
    """An admitted run with its planned step, ready to estimate with any constants."""

    run: dict[str, Any]
    step: StepShape
    source: str
    metric: str
    measured: float
    ttft: float | None
    # Why the TTFT is not scored (a rule's id and finding), or None.
    ttft_rule: tuple[str, str] | None

    def estimate(self, constants: LatencyConstants) -> LatencyEstimate:
        return estimate(
            self.step,
            constants,
            synchronized=arrivals(self.run) == "synchronized",
            async_scheduling=async_scheduling(self.run),
        )


def prepare(runs: list[dict[str, Any]]) -> tuple[list[Prepared], list[tuple[dict[str, Any], str, str]]]:
    """The runs the rules admit, planned; and the others with the rule that excluded each."""
    admitted, dropped = [], []
    for run in runs:
        rule = excluded(run)
        if rule is not None:
            dropped.append((run, *rule))
            continue
        metric, value = measured(run)
        ttft = (run.get("ttft_ms") or {}).get("median")
        ttft_rule = ttft_excluded(run) if ttft else None
        admitted.append(
            Prepared(
                run, step_shape(run), source_of(run), metric, value, None if ttft is None else float(ttft), ttft_rule
            )
        )
    return admitted, dropped


def _decode(p: Prepared) -> Callable[[LatencyConstants], float]:
    return lambda c: p.estimate(c).itl_ms if p.metric == "itl" else p.estimate(c).tpot_ms


def targets(prepared: list[Prepared]) -> list[Target]:
    """What the constants are fitted to: every admitted run's decode figure and its scored TTFT."""
    out = [Target(p.source, "decode", p.measured, _decode(p)) for p in prepared]
    out += [
        Target(p.source, "ttft", p.ttft, lambda c, p=p: p.estimate(c).ttft_ms)
        for p in prepared
        if p.ttft is not None and p.ttft_rule is None
    ]
    return out


def fit_constants(prepared: list[Prepared], start: LatencyConstants = FITTED) -> LatencyConstants:
    return fit(targets(prepared), start)


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
    # With the constants fitted on every source (FITTED), and fitted without this run's source.
    estimated: float
    held_out: float
    ttft_measured: float | None
    ttft_held_out: float | None
    ttft_rule: str | None
    itl_p99_measured: float | None
    itl_p99_held_out: float
    ttft_p99_measured: float | None
    ttft_p99_held_out: float
    single_request: bool

    @property
    def error(self) -> float:
        """Leave-one-source-out error of the decode figure."""
        return self.held_out / self.measured - 1

    @property
    def ttft_error(self) -> float | None:
        if self.ttft_measured is None or self.ttft_held_out is None:
            return None
        return self.ttft_held_out / self.ttft_measured - 1

    @property
    def itl_p99_error(self) -> float | None:
        return None if self.itl_p99_measured is None else self.itl_p99_held_out / self.itl_p99_measured - 1

    @property
    def ttft_p99_error(self) -> float | None:
        if self.ttft_p99_measured is None or self.ttft_rule is not None:
            return None
        return self.ttft_p99_held_out / self.ttft_p99_measured - 1


@dataclass(frozen=True)
class Scores:
    rows: list[Row]
    # Excluded runs: (id, rule id, why).
    excluded: list[tuple[str, str, str]]
    # Constants fitted without each source.
    folds: dict[str, LatencyConstants]


def _row(p: Prepared, full: LatencyEstimate, held: LatencyEstimate) -> Row:
    run = p.run
    gpu = instance_type(run["llm_eks"]["instance_type"]).accelerator_name.split("-")[0]
    inp, out = lengths(run)
    itl_p99 = (run.get("itl_ms") or {}).get("p99") if p.metric == "itl" else None
    ttft_p99 = (run.get("ttft_ms") or {}).get("p99")
    return Row(
        id=run["id"],
        generation=GENERATIONS.get(gpu, gpu),
        gpu=gpu,
        model=run["llm_eks"]["model"],
        setting=f"TP{run['tp']}, {run['concurrency']} seqs, {inp}/{out} tokens, vLLM {run['vllm_version'].split()[0]}",
        source=p.source,
        metric=p.metric,
        measured=p.measured,
        estimated=full.itl_ms if p.metric == "itl" else full.tpot_ms,
        held_out=held.itl_ms if p.metric == "itl" else held.tpot_ms,
        ttft_measured=p.ttft,
        ttft_held_out=None if p.ttft is None else held.ttft_ms,
        ttft_rule=None if p.ttft_rule is None else f"{p.ttft_rule[0]}: {p.ttft_rule[1]}",
        itl_p99_measured=None if itl_p99 is None else float(itl_p99),
        itl_p99_held_out=held.itl_p99_ms,
        ttft_p99_measured=None if ttft_p99 is None else float(ttft_p99),
        ttft_p99_held_out=held.ttft_p99_ms,
        single_request=int(run["concurrency"]) == 1,
    )


@functools.cache
def scores(path: Path = FIXTURE) -> Scores:
    """Every admitted run scored by the constants fitted without its source (and by FITTED); the excluded ones."""
    prepared, dropped = prepare(load(path))
    everything = fit_constants(prepared)
    folds = {}
    rows = []
    for source in sorted({p.source for p in prepared}):
        folds[source] = fit_constants([p for p in prepared if p.source != source], everything)
    for p in prepared:
        rows.append(_row(p, p.estimate(FITTED), p.estimate(folds[p.source])))
    return Scores(rows, [(run["id"], rule, why) for run, rule, why in dropped], folds)


@dataclass(frozen=True)
class Summary:
    group: str
    points: int
    median: float
    worst: float


def summarize(table: list[Row], key: str, figure: str = "decode") -> list[Summary]:
    """Median and worst |error| of `figure` ("decode", "ttft", "itl_p99", "ttft_p99") per value of `key` (a Row
    attribute, or "all")."""
    groups: dict[str, list[float]] = {}
    for r in table:
        error = {"decode": r.error, "ttft": r.ttft_error if r.ttft_rule is None else None}.get(figure)
        if figure == "itl_p99":
            error = r.itl_p99_error
        elif figure == "ttft_p99":
            error = r.ttft_p99_error
        if error is None:
            continue
        group = "all" if key == "all" else str(getattr(r, key))
        groups.setdefault(group, []).append(abs(error))
    return [Summary(g, len(e), statistics.median(e), max(e)) for g, e in sorted(groups.items())]


# The latency model's goals on runs it was not fitted on (leave one source out): median and worst |error| of the
# decode figure, median |error| of TTFT, and the worst TTFT |error| of a single-request run.
GOALS = {"ITL median": 0.08, "ITL worst": 0.25, "TTFT median": 0.20, "single-request TTFT worst": 0.50}


def goals(table: list[Row]) -> dict[str, tuple[float, float, bool]]:
    """Each goal's (figure, limit, met) on `table`'s leave-one-source-out errors."""
    decode = [abs(r.error) for r in table]
    ttft = [abs(e) for r in table if (e := r.ttft_error) is not None and r.ttft_rule is None]
    single = [abs(e) for r in table if r.single_request and (e := r.ttft_error) is not None and r.ttft_rule is None]
    figures = {
        "ITL median": statistics.median(decode),
        "ITL worst": max(decode),
        "TTFT median": statistics.median(ttft),
        "single-request TTFT worst": max(single),
    }
    return {name: (value, GOALS[name], value <= GOALS[name]) for name, value in figures.items()}


def main() -> int:
    result = scores()
    print(f"fixture sha256 {digest()}; fitted on every admitted run: {fit_constants(prepare(load())[0])}")
    print(f"{'run':58} {'metric':6} {'measured':>8} {'loso':>8} {'error':>7} {'TTFT':>7} {'loso':>7} {'error':>7}")
    for r in result.rows:
        ttft = "" if r.ttft_error is None else f"{r.ttft_measured:7.0f} {r.ttft_held_out:7.0f} {r.ttft_error:+7.1%}"
        if r.ttft_rule and r.ttft_measured is not None:
            ttft = f"{r.ttft_measured:7.0f} ({r.ttft_rule.split(':')[0]})"
        print(f"{r.id[:58]:58} {r.metric:6} {r.measured:8.2f} {r.held_out:8.2f} {r.error:+7.1%} {ttft}")
    for run_id, rule, why in result.excluded:
        print(f"excluded {run_id[:60]:60} {rule}: {why}")
    for name, (value, limit, met) in goals(result.rows).items():
        print(f"goal {name:28} {value:6.1%} (goal <= {limit:.0%}): {'met' if met else 'not met'}")
    for figure in ("decode", "ttft", "itl_p99", "ttft_p99"):
        for key in ("all", "generation", "source"):
            for s in summarize(result.rows, key, figure):
                stats = f"n={s.points:<3} median {s.median:6.1%} worst {s.worst:6.1%}"
                print(f"{figure:8} by {key:10} {s.group[:60]:60} {stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
