"""`--load`: the benchmark Job's own measurements against the plan at the load it sent. Pure: the run's spec and
result in, rows out (the run itself: llm_eks.verify.load).

The Job (`vllm bench serve`, the environment's benchmark chart) sends the plan's typical request (random prompts of
exactly the typical length, `--ignore-eos`) as Poisson arrivals at the rate that keeps `target_concurrency` of them
in flight per Ready replica, capped there (llm_eks.verify.derive.load_specs): production-like arrivals at the planned
load, held against the planner's estimate at that load. Requests started all at once instead would arrive in waves,
each first token waiting for the whole wave's prefill, and breach a TTFT SLO sized for arrivals that spread out. The
percentiles are vLLM's own, over each request's measurements (not histogram buckets), and the same sample rule
applies: a p99 on fewer than 500 requests is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_eks.planner.at_load import LoadEstimate
from llm_eks.planner.drift import DRIFT_RATIOS, P99_MIN_SAMPLES
from llm_eks.verify.checks_metrics import judge_latency
from llm_eks.verify.rows import Row
from llm_eks.verify.text import count, load_text, planned_ms

# Measured output throughput outside 1/1.5-1.5x the estimate is drift: the time per output token it follows from
# is held to the ITL's ratio.
THROUGHPUT_RATIO = DRIFT_RATIOS.itl


@dataclass(frozen=True)
class LoadSpec:
    """One workload's load run: the Job, and what the plan says of the load it sends."""

    # The workload's object name (the report's WORKLOAD column) and namespace, and the Job.
    workload: str
    namespace: str
    job_name: str
    job: dict[str, Any] = field(repr=False, hash=False, compare=False)
    replicas: int = 1
    # Requests in flight, the request's sizes and how many are sent.
    concurrency: int = 1
    input_len: int = 1
    output_len: int = 1
    num_prompts: int = 1
    # The planner's estimate at the load on each replica, and the SLO.
    estimate: LoadEstimate | None = None
    slo_ttft_p99_ms: float = 0.0
    slo_itl_p99_ms: float = 0.0

    @property
    def planned_throughput(self) -> float | None:
        """Output tokens per second of every replica at the estimate."""
        if self.estimate is None:
            return None
        return self.estimate.output_tokens_per_s * self.replicas


@dataclass(frozen=True)
class LoadResult:
    """What the Job ended with: Complete or Failed, and `vllm bench serve`'s result JSON when it printed one."""

    state: str
    result: dict[str, Any] | None = None
    # The last lines of its log, for a run that printed no result.
    log_tail: str = ""

    @property
    def seconds(self) -> float:
        duration = (self.result or {}).get("duration")
        return float(duration) if isinstance(duration, int | float) else 0.0


def _number(result: dict[str, Any], key: str) -> float | None:
    value = result.get(key)
    return float(value) if isinstance(value, int | float) else None


def _sent(spec: LoadSpec) -> str:
    return (
        f"{spec.num_prompts} requests, {spec.concurrency} at a time ({count(spec.replicas, 'replica')}), "
        f"{spec.input_len:,} \N{RIGHTWARDS ARROW} {spec.output_len:,} tokens"
    )


def _latency_row(check: str, spec: LoadSpec, result: dict[str, Any], completed: int) -> Row:
    name = check.removeprefix("load-")
    slo = spec.slo_ttft_p99_ms if name == "ttft" else spec.slo_itl_p99_ms
    at = spec.estimate
    estimate = None if at is None else (at.ttft_ms if name == "ttft" else at.itl_ms)
    p99_estimate = None if at is None else (at.ttft_p99_ms if name == "ttft" else at.itl_p99_ms)
    planned = f"p99 ≤ {planned_ms(slo)}, median "
    planned += (
        f"~{planned_ms(estimate)} at {load_text(at)}" if estimate is not None and at is not None else "not planned"
    )
    median = _number(result, f"median_{name}_ms")
    if median is None:
        return Row(check, spec.workload, planned, "not measured", "unknown", f"the result has no median_{name}_ms")
    counted = f"{completed:,} requests measured by vllm bench serve"
    verdict, observed, detail = judge_latency(
        name, median, _number(result, f"p99_{name}_ms"), completed, slo, estimate, "the estimate at this load",
        counted, "requests", p99_estimate,
    )  # fmt: skip
    return Row(check, spec.workload, planned, observed, verdict, detail)


def _throughput_row(spec: LoadSpec, result: dict[str, Any]) -> Row:
    planned_tps = spec.planned_throughput
    planned = f"~{planned_tps:,.0f} output tokens/s" if planned_tps is not None else "not planned"
    measured = _number(result, "output_throughput")
    if measured is None:
        return Row("load-throughput", spec.workload, planned, "not measured", "unknown", "no output_throughput")
    observed = f"{measured:,.0f} output tokens/s"
    if planned_tps is None:
        return Row("load-throughput", spec.workload, planned, observed, "ok")
    ratio = measured / planned_tps
    detail = f"{ratio:.2f}x the estimate at this load"
    if not 1 / THROUGHPUT_RATIO <= ratio <= THROUGHPUT_RATIO:
        bounds = f"1/{THROUGHPUT_RATIO:g}-{THROUGHPUT_RATIO:g}x"
        return Row("load-throughput", spec.workload, planned, observed, "drift", f"{detail} (allowed {bounds})")
    return Row("load-throughput", spec.workload, planned, observed, "ok", detail)


def load_rows(spec: LoadSpec, run: LoadResult) -> list[Row]:
    """The run (its Job and its requests), then TTFT, ITL and output throughput against the plan at that load."""
    sent = _sent(spec)
    result = run.result
    if run.state != "Complete" or result is None:
        why = run.log_tail.strip().splitlines()[-1] if run.log_tail.strip() else "no log"
        observed = f"Job {run.state.lower()}"
        return [Row("load", spec.workload, sent, observed, "breach", f"{spec.namespace}/{spec.job_name}: {why}")]
    completed, failed = int(_number(result, "completed") or 0), int(_number(result, "failed") or 0)
    observed = f"{completed:,} completed, {failed:,} failed in {run.seconds:,.0f} s"
    if failed:
        detail = f"{failed:,} of {completed + failed:,} requests failed (errors, 429s, timeouts)"
        run_row = Row("load", spec.workload, sent, observed, "breach", detail)
    elif completed < P99_MIN_SAMPLES:
        detail = f"a p99 needs {P99_MIN_SAMPLES} completed requests"
        run_row = Row("load", spec.workload, sent, observed, "insufficient", detail)
    else:
        run_row = Row("load", spec.workload, sent, observed, "ok", f"Job {spec.namespace}/{spec.job_name}")
    return [
        run_row,
        _latency_row("load-ttft", spec, result, completed),
        _latency_row("load-itl", spec, result, completed),
        _throughput_row(spec, result),
    ]
