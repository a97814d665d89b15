"""The planner's prefill/decode (P/D) estimate against published P/D benchmarks (tests/fixtures/pd/published.json):
per benchmark the published and estimated TTFT and time per output token of the disaggregated mode, their errors,
and whether the planner's `auto` decision agrees with the mode the source found better. A benchmark that prints
numbers; tests/test_pd_accuracy.py pins the fixture and the accuracy page's section is generated from `scores()`.

    .venv/bin/python -m benchmarks.pd_error_table

Which benchmarks are scored, and how each is planned, is decided first by benchmarks/pd_rules.py. The P/D model is
scored as it is: nothing is fitted to these benchmarks.
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

from benchmarks.pd_rules import every_breach, excluded, ttft_excluded
from llm_eks.catalog.models import model
from llm_eks.errors import ConfigError
from llm_eks.planner import PlanRequest, plan

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "pd" / "published.json"


def digest(path: Path = FIXTURE) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load(path: Path = FIXTURE) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return runs


def source_of(run: dict[str, Any]) -> str:
    src = run["source"]
    if src.get("repo"):
        return f"{src['repo']}/{src.get('path', '')}".rstrip("/")
    return str(src.get("url"))


def request(run: dict[str, Any], disaggregation: str) -> PlanRequest:
    """The planner's request for `run` as it was served (pd_rules' docstring): `on` with its prefill pool, or `auto`
    for the planner's own choice."""
    spec = model(run["llm_eks"]["model"])
    inp, out = int(run["input_len"]), int(run["output_len"])
    max_len = min(max(4096, 1 << (inp + out - 1).bit_length()), spec.max_position_embeddings)
    return PlanRequest(
        model=run["llm_eks"]["model"],
        accelerator=run["llm_eks"]["instance_type"],
        max_model_len=max_len,
        target_concurrency=int(run["concurrency"]),
        typical_input_tokens=inp,
        typical_output_tokens=out,
        tensor_parallel_size=int(run["decode"]["tp"]),
        disaggregation=disaggregation,
        prefill_replicas=int(run["prefill"]["replicas"]) if disaggregation == "on" else None,
    )


def published_decode(run: dict[str, Any]) -> tuple[str, float]:
    """The P/D decode figure compared: the median ITL where the source says its gaps are decode steps, else the
    median or mean TPOT (a chunked stream's ITL is not a step)."""
    pd = run["pd"]
    itl = pd.get("itl_ms") or {}
    if itl.get("median") and not pd.get("itl_note"):
        return "ITL median", float(itl["median"])
    tpot = pd.get("tpot_ms") or {}
    for key in ("median", "mean"):
        if tpot.get(key):
            return f"TPOT {key}", float(tpot[key])
    raise ValueError(f"{run['id']}: no ITL or TPOT")


def published_ttft(run: dict[str, Any]) -> tuple[str, float]:
    ttft = run["pd"]["ttft_ms"]
    key = "median" if ttft.get("median") else "mean"
    return key, float(ttft[key])


@dataclass(frozen=True)
class Row:
    id: str
    source: str
    setting: str
    ttft_metric: str
    ttft_measured: float
    ttft_estimated: float | None
    # Why the TTFT is not scored (rule id: finding), or None.
    ttft_rule: str | None
    decode_metric: str
    decode_measured: float
    decode_estimated: float | None
    # The mode the source found better, or None where it measured one mode; the planner's auto recommendation.
    published_better: str | None
    recommended: str | None
    # The planner's one-line refusal where it would not plan the benchmark, else None.
    refused: str | None

    @property
    def ttft_error(self) -> float | None:
        if self.ttft_estimated is None or self.ttft_rule is not None:
            return None
        return self.ttft_estimated / self.ttft_measured - 1

    @property
    def decode_error(self) -> float | None:
        return None if self.decode_estimated is None else self.decode_estimated / self.decode_measured - 1

    @property
    def agrees(self) -> bool | None:
        if self.published_better is None or self.recommended is None:
            return None
        return self.published_better == self.recommended


def setting(run: dict[str, Any]) -> str:
    p, d = run["prefill"], run["decode"]
    load = f"{run['concurrency']} in flight" if run.get("concurrency") else f"{run.get('request_rate')} req/s"
    return (
        f"{run['gpu']}, {p['replicas']}xTP{p['tp']} prefill + {d['replicas']}xTP{d['tp']} decode, "
        f"{run['input_len']}/{run['output_len']} tokens, {load}"
    )


def score(run: dict[str, Any]) -> Row:
    """One admitted benchmark planned as it was served and compared."""
    ttft_metric, ttft = published_ttft(run)
    decode_metric, decode = published_decode(run)
    ttft_rule = ttft_excluded(run)
    base = {
        "id": run["id"],
        "source": source_of(run),
        "setting": setting(run),
        "ttft_metric": ttft_metric,
        "ttft_measured": ttft,
        "ttft_rule": None if ttft_rule is None else f"{ttft_rule[0]}: {ttft_rule[1]}",
        "decode_metric": decode_metric,
        "decode_measured": decode,
        "published_better": run.get("published_better"),
    }
    try:
        forced = plan(request(run, "on")).disaggregation
        chosen = plan(request(run, "auto")).disaggregation
    except ConfigError as error:
        return Row(**base, ttft_estimated=None, decode_estimated=None, recommended=None, refused=str(error))
    pd = forced.disaggregated if forced is not None else None
    return Row(
        **base,
        ttft_estimated=None if pd is None else float(pd.ttft_ms),
        decode_estimated=None if pd is None else float(pd.tpot_ms),
        recommended=None if chosen is None else chosen.recommended,
        refused=None if pd is not None else (forced.why if forced is not None else "no P/D decision"),
    )


@dataclass(frozen=True)
class Scores:
    rows: list[Row]
    # Excluded benchmarks: (id, source, every rule it breaks as (rule id, why)).
    excluded: list[tuple[str, str, list[tuple[str, str]]]]


@functools.cache
def scores(path: Path = FIXTURE) -> Scores:
    rows, dropped = [], []
    for run in load(path):
        if excluded(run) is not None:
            dropped.append((run["id"], source_of(run), every_breach(run)))
        else:
            rows.append(score(run))
    return Scores(rows, dropped)


@dataclass(frozen=True)
class Summary:
    figure: str
    points: int
    median: float | None
    worst: float | None


def summarize(rows: list[Row]) -> list[Summary]:
    """Median and worst |error| of the TTFT and the decode figure, and the share of decisions that agree."""
    out = []
    for figure, errors in (
        ("TTFT", [abs(e) for r in rows if (e := r.ttft_error) is not None]),
        ("time per output token", [abs(e) for r in rows if (e := r.decode_error) is not None]),
    ):
        out.append(
            Summary(figure, len(errors), statistics.median(errors) if errors else None, max(errors, default=None))
        )
    return out


def main() -> int:
    result = scores()
    print(f"fixture sha256 {digest()}: {len(result.rows)} scored, {len(result.excluded)} excluded")
    for r in result.rows:
        print(dataclasses.asdict(r))
    for run_id, _source, breaches in result.excluded:
        print(f"excluded {run_id}: " + "; ".join(f"{rule}: {why}" for rule, why in breaches))
    for s in summarize(result.rows):
        stats = "none scored" if s.median is None else f"median {s.median:.1%} worst {s.worst:.1%}"
        print(f"{s.figure:22} n={s.points} {stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
