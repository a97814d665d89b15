"""Checks 3 and 4, on what Prometheus measured: the KV cache each vLLM server sized against the plan's, and the
window's TTFT and ITL against the SLO (p99) and the plan's estimates (median). No samples is `unknown`, never ok."""

from __future__ import annotations

from llm_eks.planner.drift import DRIFT_RATIOS, drift_ratio, drifted
from llm_eks.verify.expected import WorkloadPlan
from llm_eks.verify.observed import Latency, WorkloadMetrics
from llm_eks.verify.rows import Row
from llm_eks.verify.text import count, ms, percent, planned_ms, tokens

# A server's KV cache further than this from the plan's is drift. The planner mirrors vLLM 0.33's memory accounting
# and aims at 5 % (docs/reference/planner-accuracy.md); twice that means something sized the cache differently: the
# GPU, gpu_memory_utilization, the dtype or max_model_len, or a term of the planner that is wrong for this model.
KV_TOLERANCE = 0.10
# Median ITL and TTFT against the plan's estimate: the drift ratio and its thresholds are planner/drift.py's, the
# ones the drift alerts use too (manifests/monitoring_drift.py). ITL drifts either way, TTFT only above: the estimate
# is at target_concurrency with chunked prefill sharing each step, and a lighter load starts first tokens sooner.
ITL_MEDIAN_RATIO = DRIFT_RATIOS.itl
TTFT_MEDIAN_RATIO = DRIFT_RATIOS.ttft


def kv_row(w: WorkloadPlan, m: WorkloadMetrics) -> Row:
    """Each server's num_gpu_blocks x block_size (or vLLM's group-aware kv_cache_size_tokens) against the plan's
    kv_cache_tokens per replica."""
    planned = tokens(w.kv_cache_tokens)
    metric = "ray_vllm_cache_config_info" if w.engine == "ray-serve" else "vllm:cache_config_info"
    if not m.kv:
        why = f"no {metric} series for job {w.metrics_job} in {w.namespace} (no server up, or not scraped)"
        return Row("kv-cache", w.name, planned, "no series", "unknown", why)
    values = sorted(s.tokens for s in m.kv)
    observed = tokens(values[0]) if values[0] == values[-1] else f"{values[0]:,}-{values[-1]:,} tokens"
    observed += f" ({count(len(values), 'server')})"
    off = [s for s in m.kv if abs(s.tokens / w.kv_cache_tokens - 1) > KV_TOLERANCE]
    worst = max(m.kv, key=lambda s: abs(s.tokens / w.kv_cache_tokens - 1))
    deviation = f"{percent(worst.tokens / w.kv_cache_tokens)} ({worst.source}), tolerance ±{KV_TOLERANCE:.0%}"
    if off:
        return Row("kv-cache", w.name, planned, observed, "drift", f"{worst.pod}: {deviation}")
    return Row("kv-cache", w.name, planned, observed, "ok", deviation)


def _latency_row(
    check: str,
    w: WorkloadPlan,
    measured: Latency,
    estimate_ms: float | None,
    slo_ms: float,
    window: str,
    unit: str,
    note: str = "",
) -> Row:
    planned = f"p99 ≤ {planned_ms(slo_ms)}, median " + (
        f"~{planned_ms(estimate_ms)}" if estimate_ms is not None else "not planned"
    )
    if not measured.measured:
        return Row(check, w.name, planned, "no samples", "unknown", f"no {unit} in the last {window} (no traffic)")
    assert measured.median_s is not None and measured.p99_s is not None and measured.count is not None
    observed = f"median {ms(measured.median_s)}, p99 {ms(measured.p99_s)}"
    detail = f"{measured.count:,.0f} {unit} in {window}" + note
    if measured.p99_s * 1000 > slo_ms:
        return Row(check, w.name, planned, observed, "breach", f"p99 above the SLO's {planned_ms(slo_ms)}; {detail}")
    if estimate_ms is None:
        return Row(check, w.name, planned, observed, "ok", detail)
    ratio = drift_ratio(measured.median_s * 1000, estimate_ms)
    limit = ITL_MEDIAN_RATIO if check == "itl" else TTFT_MEDIAN_RATIO
    off = f"median {ratio:.2f}x the estimate"
    if drifted(check, ratio):
        bounds = f"1/{limit:g}-{limit:g}x" if check == "itl" else f"at most {limit:g}x"
        return Row(check, w.name, planned, observed, "drift", f"{off} (allowed {bounds}); {detail}")
    if ratio < 1 / limit:
        detail = f"{off}: faster than planned (lighter load than target_concurrency?); {detail}"
    return Row(check, w.name, planned, observed, "ok", detail)


def latency_rows(w: WorkloadPlan, m: WorkloadMetrics, window: str) -> list[Row]:
    """TTFT and ITL: p99 above the SLO is a breach; a median off the plan's estimate by more than its ratio is
    drift; a TTFT the plan does not estimate is held against the SLO alone."""
    load = ""
    if m.running_mean is not None:
        load = f"; {m.running_mean:.1f} running per server on average, planned at {w.target_concurrency}"
    return [
        _latency_row("ttft", w, m.ttft, w.ttft_estimate_ms, w.slo_ttft_p99_ms, window, "requests"),
        _latency_row("itl", w, m.itl, w.itl_estimate_ms, w.slo_itl_p99_ms, window, "token gaps", load),
    ]
