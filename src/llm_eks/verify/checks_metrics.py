"""Checks 3 and 4, on what Prometheus measured: the KV cache each vLLM server sized against the plan's, and the
window's TTFT and ITL against the SLO (p99) and the planner's estimate at the load the window held (median). Too few
observations for a percentile is `insufficient`, never ok. The estimate at a load is the planner's
(llm_eks.planner.at_load); the drift ratios and the observations a percentile needs are planner/drift.py's. A
workload served as separate prefill and decode pools is judged per phase against its P/D decision: the prefill pool's
prefill time (a `prefill` row) and the decode pool's ITL."""

from __future__ import annotations

from dataclasses import dataclass

from llm_eks.planner.at_load import LoadEstimate
from llm_eks.planner.drift import DRIFT_RATIOS, MEDIAN_MIN_SAMPLES, P99_MIN_SAMPLES, drift_ratio, drifted
from llm_eks.verify.expected import PhasePlan, WorkloadPlan
from llm_eks.verify.observed import KvSample, Latency, WorkloadMetrics
from llm_eks.verify.rows import Row, Verdict
from llm_eks.verify.text import count, load_text, ms, percent, planned_ms, tokens

# A server's KV cache further than this from the plan's is drift. The planner mirrors vLLM 0.33's memory accounting
# and aims at 5 % (docs/reference/planner-accuracy.md); twice that means something sized the cache differently: the
# GPU, gpu_memory_utilization, the dtype or max_model_len, or a term of the planner that is wrong for this model.
KV_TOLERANCE = 0.10
# Median ITL and TTFT against the estimate: the drift ratio and its thresholds are planner/drift.py's, the ones the
# drift alerts use too (manifests/monitoring_drift.py). ITL drifts either way, TTFT only above.
ITL_MEDIAN_RATIO = DRIFT_RATIOS.itl
TTFT_MEDIAN_RATIO = DRIFT_RATIOS.ttft


def kv_rows(w: WorkloadPlan, m: WorkloadMetrics) -> list[Row]:
    """The workload's `kv-cache` row; a disaggregated workload's prefill pool has its own, against the same plan: both
    pools run the plan's replica layout and engine settings (one --gpu-memory-utilization and --max-model-len), so
    vLLM sizes the same cache on each (the KV drift alert holds both pools to it too)."""
    if w.phases is None:
        return [kv_row(w, m)]
    return [kv_row(w, m), _kv_row(w, m.prefill_kv, w.phases.prefill_job, w.phases.prefill_job)]


def kv_row(w: WorkloadPlan, m: WorkloadMetrics) -> Row:
    """Each server's num_gpu_blocks x block_size (or vLLM's group-aware kv_cache_size_tokens) against the plan's
    kv_cache_tokens per replica."""
    return _kv_row(w, m.kv, w.name, w.metrics_job)


def _kv_row(w: WorkloadPlan, kv: tuple[KvSample, ...], owner: str, job: str) -> Row:
    """The KV cache of the servers scraped under `job` (`owner`'s) against the plan's."""
    planned = tokens(w.kv_cache_tokens)
    metric = "ray_vllm_cache_config_info" if w.engine == "ray-serve" else "vllm:cache_config_info"
    if not kv:
        why = f"no {metric} series for job {job} in {w.namespace} (no server up, or not scraped)"
        return Row("kv-cache", owner, planned, "no series", "unknown", why)
    values = sorted(s.tokens for s in kv)
    observed = tokens(values[0]) if values[0] == values[-1] else f"{values[0]:,}-{values[-1]:,} tokens"
    observed += f" ({count(len(values), 'server')})"
    off = [s for s in kv if abs(s.tokens / w.kv_cache_tokens - 1) > KV_TOLERANCE]
    worst = max(kv, key=lambda s: abs(s.tokens / w.kv_cache_tokens - 1))
    deviation = f"{percent(worst.tokens / w.kv_cache_tokens)} ({worst.source}), tolerance ±{KV_TOLERANCE:.0%}"
    if off:
        return Row("kv-cache", owner, planned, observed, "drift", f"{worst.pod}: {deviation}")
    return Row("kv-cache", owner, planned, observed, "ok", deviation)


def judge_latency(
    check: str,
    median_ms: float | None,
    p99_ms: float | None,
    samples: float,
    slo_ms: float,
    estimate_ms: float | None,
    basis: str,
    counted: str,
    unit: str,
    p99_estimate_ms: float | None = None,
) -> tuple[Verdict, str, str]:
    """(verdict, observed, detail) of a TTFT or ITL measured on `samples` observations (`counted` says how many, and
    where): a median or p99 above the SLO is a breach (a p99's detail names the planner's p99 at this load,
    `p99_estimate_ms`, when there is one: above the SLO too, the load is more than the plan meets it at; below, the
    deployment is slower than planned); a median off `estimate_ms` ("~X estimated at ...": `basis`) beyond its ratio
    is drift; a percentile on fewer observations than it needs is not judged, and leaves the row insufficient rather
    than ok."""
    if samples < MEDIAN_MIN_SAMPLES or median_ms is None:
        return (
            "insufficient",
            "insufficient data",
            f"{counted}: a median needs {MEDIAN_MIN_SAMPLES}, a p99 {P99_MIN_SAMPLES}",
        )
    judged = samples >= P99_MIN_SAMPLES and p99_ms is not None
    p99 = f"p99 {ms(p99_ms / 1000)}" if judged and p99_ms is not None else "p99 not judged"
    observed = f"median {ms(median_ms / 1000)}, {p99}"
    if median_ms > slo_ms:
        return (
            "breach",
            observed,
            f"the median is above the SLO's p99 {planned_ms(slo_ms)}: most {unit} miss it; {counted}",
        )
    if judged and p99_ms is not None and p99_ms > slo_ms:
        expected = "" if p99_estimate_ms is None else f" (~{planned_ms(p99_estimate_ms)} estimated at this load)"
        return "breach", observed, f"p99 above the SLO's {planned_ms(slo_ms)}{expected}; {counted}"
    settled: Verdict = "ok" if judged else "insufficient"
    short = "" if judged else f"; a p99 needs {P99_MIN_SAMPLES} {unit}"
    if estimate_ms is None:
        return settled, observed, counted + short
    ratio = drift_ratio(median_ms, estimate_ms)
    limit = ITL_MEDIAN_RATIO if check == "itl" else TTFT_MEDIAN_RATIO
    off = f"median {ratio:.2f}x {basis}"
    if drifted(check, ratio):
        bounds = f"1/{limit:g}-{limit:g}x" if check == "itl" else f"at most {limit:g}x"
        return "drift", observed, f"{off} (allowed {bounds}); {counted}"
    if ratio < 1 / limit:
        off += ": faster than estimated"
    return settled, observed, f"{off}; {counted}{short}"


@dataclass(frozen=True)
class _Held:
    """What a latency row's median is held to: the estimate (None: not planned), what it is (`basis`), the planner's
    p99 at the observed load where it has one."""

    estimate_ms: float | None
    basis: str
    p99_estimate_ms: float | None = None


def _latency_row(
    check: str,
    w: WorkloadPlan,
    measured: Latency,
    planned: str,
    held: _Held,
    slo_ms: float,
    counted: str,
    unit: str,
) -> Row:
    n = measured.count or 0
    verdict, observed, detail = judge_latency(
        # The prefill phase drifts as a TTFT does (planner/drift.py): only above, beyond the TTFT ratio.
        "ttft" if check == "prefill" else check,
        None if measured.median_s is None else measured.median_s * 1000,
        None if measured.p99_s is None else measured.p99_s * 1000,
        n,
        slo_ms,
        held.estimate_ms,
        held.basis,
        f"{n:,.0f} {unit} {counted}",
        unit,
        held.p99_estimate_ms,
    )
    return Row(check, w.name, planned, observed, verdict, detail)


def _planned(slo_ms: float, estimate_ms: float | None, at: str) -> str:
    median = f"~{planned_ms(estimate_ms)} {at}" if estimate_ms is not None else "not planned"
    return f"p99 ≤ {planned_ms(slo_ms)}, median {median}"


def _at_load(check: str, planned_estimate_ms: float | None, at_load: LoadEstimate | None) -> _Held:
    """The planner's estimate at the observed load (`at_load`), else the planned one."""
    if at_load is None:
        return _Held(planned_estimate_ms, "the planned estimate (no observed load)")
    estimate_ms = at_load.ttft_ms if check == "ttft" else at_load.itl_ms
    p99_ms = at_load.ttft_p99_ms if check == "ttft" else at_load.itl_p99_ms
    return _Held(estimate_ms, f"~{planned_ms(estimate_ms)} estimated at the observed {load_text(at_load)}", p99_ms)


def latency_rows(w: WorkloadPlan, m: WorkloadMetrics, window: str, at_load: LoadEstimate | None) -> list[Row]:
    """TTFT and ITL: a p99 above the SLO (or a median above it) is a breach; a median off the planner's estimate at
    the observed load (`at_load`; the planned estimate when there is none) by more than its ratio is drift; fewer
    observations than a percentile needs leave that percentile unjudged and the row `insufficient`. A disaggregated
    workload is judged per phase instead (`_phase_rows`)."""
    if w.phases is not None:
        return _phase_rows(w, w.phases, m, window)
    at = f"at {w.target_concurrency} running"
    checks = (
        ("ttft", m.ttft, w.ttft_estimate_ms, w.slo_ttft_p99_ms, "requests"),
        ("itl", m.itl, w.itl_estimate_ms, w.slo_itl_p99_ms, "token gaps"),
    )
    return [
        _latency_row(
            check,
            w,
            measured,
            _planned(slo, estimate, at),
            _at_load(check, estimate, at_load),
            slo,
            f"in {window}",
            unit,
        )
        for check, measured, estimate, slo, unit in checks
    ]


def _phase_rows(w: WorkloadPlan, phases: PhasePlan, m: WorkloadMetrics, window: str) -> list[Row]:
    """A disaggregated workload, each pool by its scrape job: the decode pool's TTFT against the SLO only (its
    histogram times the decode leg, KV transfer and first step, not the whole path the plan estimates), its ITL
    against the plan's decode step, and the prefill pool's prefill time against the plan's prefill phase, with the
    TTFT's drift ratio and the TTFT SLO as its bound (a prefill is part of every first token)."""
    decode, prefill = f"on the decode pool ({w.metrics_job}) in {window}", f"on {phases.prefill_job} in {window}"
    step = f"the plan's decode step (~{planned_ms(phases.decode_itl_ms)} at {w.target_concurrency} running)"
    phase = f"the plan's prefill phase (~{planned_ms(phases.prefill_ms)} per prompt)"
    return [
        _latency_row(
            "ttft",
            w,
            m.ttft,
            f"p99 ≤ {planned_ms(w.slo_ttft_p99_ms)}, median per phase (prefill ~{planned_ms(phases.prefill_ms)}, "
            f"KV transfer ~{planned_ms(phases.transfer_ms)})",
            _Held(None, ""),
            w.slo_ttft_p99_ms,
            decode,
            "requests",
        ),
        _latency_row(
            "itl",
            w,
            m.itl,
            _planned(w.slo_itl_p99_ms, phases.decode_itl_ms, "decode step"),
            _Held(phases.decode_itl_ms, step),
            w.slo_itl_p99_ms,
            decode,
            "token gaps",
        ),
        _latency_row(
            "prefill",
            w,
            m.prefill or Latency(),
            _planned(w.slo_ttft_p99_ms, phases.prefill_ms, "prefill phase"),
            _Held(phases.prefill_ms, phase),
            w.slo_ttft_p99_ms,
            prefill,
            "requests",
        ),
    ]
