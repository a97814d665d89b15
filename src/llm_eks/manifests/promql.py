"""The vLLM metric names PromQL may use, the ones vLLM removed, and `check_promql`, which every expression we emit
(alerts, dashboard panels, KEDA triggers, synth-time checks) goes through.

Names are those of vLLM's V1 engine Prometheus logger (vllm/v1/metrics/loggers.py, PrometheusStatLogger; checked
against vLLM 0.29-0.33, November 2026). Every series carries the labels `model_name` (the served model name) and
`engine`. Counters are exposed with a `_total` suffix and histograms as `_bucket`, `_sum` and `_count`, so the bare
name of either is never a series.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

GAUGE = "gauge"
COUNTER = "counter"
HISTOGRAM = "histogram"

# Current vLLM metrics, by the name vLLM registers (before prometheus_client adds suffixes).
CURRENT_VLLM_METRICS: Mapping[str, str] = MappingProxyType(
    {
        # Scheduler state.
        "vllm:num_requests_running": GAUGE,
        "vllm:num_requests_waiting": GAUGE,
        "vllm:kv_cache_usage_perc": GAUGE,  # 0..1
        "vllm:engine_sleep_state": GAUGE,
        "vllm:lora_requests_info": GAUGE,
        "vllm:cache_config_info": GAUGE,
        # Counters.
        "vllm:prefix_cache_queries": COUNTER,
        "vllm:prefix_cache_hits": COUNTER,
        "vllm:external_prefix_cache_queries": COUNTER,
        "vllm:external_prefix_cache_hits": COUNTER,
        "vllm:mm_cache_queries": COUNTER,
        "vllm:mm_cache_hits": COUNTER,
        "vllm:num_preemptions": COUNTER,
        "vllm:prompt_tokens": COUNTER,
        "vllm:prompt_tokens_by_source": COUNTER,
        "vllm:prompt_tokens_cached": COUNTER,
        "vllm:prompt_tokens_recomputed": COUNTER,
        "vllm:generation_tokens": COUNTER,
        "vllm:request_success": COUNTER,  # label finished_reason
        "vllm:corrupted_requests": COUNTER,  # only with VLLM_COMPUTE_NANS_IN_LOGITS
        # Histograms of counts.
        "vllm:request_prompt_tokens": HISTOGRAM,
        "vllm:request_generation_tokens": HISTOGRAM,
        "vllm:iteration_tokens_total": HISTOGRAM,  # the registered name already ends in _total
        "vllm:request_max_num_generation_tokens": HISTOGRAM,
        "vllm:request_params_n": HISTOGRAM,
        "vllm:request_params_max_tokens": HISTOGRAM,
        "vllm:request_prefill_kv_computed_tokens": HISTOGRAM,
        # Histograms of time.
        "vllm:time_to_first_token_seconds": HISTOGRAM,
        "vllm:inter_token_latency_seconds": HISTOGRAM,
        "vllm:request_time_per_output_token_seconds": HISTOGRAM,
        "vllm:e2e_request_latency_seconds": HISTOGRAM,
        "vllm:request_queue_time_seconds": HISTOGRAM,
        "vllm:request_inference_time_seconds": HISTOGRAM,
        "vllm:request_prefill_time_seconds": HISTOGRAM,
        "vllm:request_decode_time_seconds": HISTOGRAM,
        # Only with --kv-cache-metrics.
        "vllm:kv_block_lifetime_seconds": HISTOGRAM,
        "vllm:kv_block_idle_before_evict_seconds": HISTOGRAM,
        "vllm:kv_block_reuse_gap_seconds": HISTOGRAM,
    }
)

_HIT_RATIO = "use rate(vllm:prefix_cache_hits_total) / rate(vllm:prefix_cache_queries_total)"

# Removed with the V0 engine or renamed in V1; the value says what to use instead.
REMOVED_VLLM_METRICS: Mapping[str, str] = MappingProxyType(
    {
        "vllm:gpu_cache_usage_perc": "use vllm:kv_cache_usage_perc",
        "vllm:cpu_cache_usage_perc": "V1 has no CPU swap space; use vllm:kv_cache_usage_perc",
        "vllm:gpu_prefix_cache_queries": "use vllm:prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_hits": "use vllm:prefix_cache_hits_total",
        "vllm:gpu_prefix_cache_hit_rate": _HIT_RATIO,
        "vllm:cpu_prefix_cache_hit_rate": _HIT_RATIO,
        "vllm:time_per_output_token_seconds": (
            "use vllm:inter_token_latency_seconds (or vllm:request_time_per_output_token_seconds per request)"
        ),
        "vllm:num_requests_swapped": "V1 never swaps; watch vllm:num_preemptions_total",
        "vllm:avg_prompt_throughput_toks_per_s": "use rate(vllm:prompt_tokens_total[5m])",
        "vllm:avg_generation_throughput_toks_per_s": "use rate(vllm:generation_tokens_total[5m])",
    }
)

# Whole removed families, for names not listed one by one above.
_REMOVED_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"^vllm:gpu_prefix_cache_\w+$"),
        "use vllm:prefix_cache_hits_total and vllm:prefix_cache_queries_total",
    ),
    (
        re.compile(r"^vllm:\w+_hit_rate$"),
        "hit-rate gauges are gone; divide the rates of the _hits_total/_queries_total",
    ),
    (
        re.compile(r"^vllm:avg_\w+_throughput_toks_per_s$"),
        "use rate() of vllm:prompt_tokens_total/generation_tokens_total",
    ),
)

_SUFFIXES = {GAUGE: ("",), COUNTER: ("_total",), HISTOGRAM: ("_bucket", "_sum", "_count")}

# A metric name token: not preceded by a name character, so `llm_eks:vllm_x` or `foo_vllm:x` never match.
_VLLM_NAME = re.compile(r"(?<![A-Za-z0-9_:])vllm:[A-Za-z0-9_:]+")
# PromQL string literals ("...", '...', `...`); metric names inside them are label values, not series.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
# {__name__="vllm:..."} names a series through a string; check those too.
_NAME_MATCHER = re.compile(r'__name__\s*=\s*"([^"]*)"')


def vllm_series_names() -> frozenset[str]:
    """Every series name the current vLLM metrics expose (suffixes included)."""
    return frozenset(name + suffix for name, kind in CURRENT_VLLM_METRICS.items() for suffix in _SUFFIXES[kind])


_SERIES = vllm_series_names()


def _removed_reason(name: str) -> str | None:
    bases = (name, *(name.removesuffix(s) for s in ("_total", "_bucket", "_sum", "_count") if name.endswith(s)))
    for base in bases:
        if base in REMOVED_VLLM_METRICS:
            return REMOVED_VLLM_METRICS[base]
    for pattern, reason in _REMOVED_PATTERNS:
        if any(pattern.match(base) for base in bases):
            return reason
    return None


def _problem(name: str) -> str | None:
    if name in _SERIES:
        return None
    reason = _removed_reason(name)
    if reason is not None:
        return f"{name} was removed from vLLM; {reason}"
    kind = CURRENT_VLLM_METRICS.get(name)
    if kind == COUNTER:
        return f"{name} is a counter and is exposed only as {name}_total"
    if kind == HISTOGRAM:
        return f"{name} is a histogram and is exposed only as {name}_bucket, {name}_sum and {name}_count"
    return f"{name} is not a current vLLM metric (see llm_eks.manifests.promql.CURRENT_VLLM_METRICS)"


def vllm_names(expr: str) -> list[str]:
    """The vllm:* series names an expression reads, in order of appearance (label values excluded)."""
    named = _NAME_MATCHER.findall(expr)
    return [*_VLLM_NAME.findall(_STRING.sub('""', expr)), *(n for n in named if n.startswith("vllm:"))]


def check_promql(expr: str) -> list[str]:
    """Problems with the vllm:* names in a PromQL expression: removed, unknown, or a bare counter/histogram name.

    Returns one line per distinct problem; an empty list means every vLLM name is a current series.
    """
    problems: list[str] = []
    for name in dict.fromkeys(vllm_names(expr)):
        problem = _problem(name)
        if problem is not None:
            problems.append(problem)
    return problems


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def selector(labels: Mapping[str, str]) -> str:
    """A PromQL label selector, `{k="v", ...}`, values escaped as PromQL double-quoted strings."""
    return "{" + ", ".join(f"{key}={_quote(value)}" for key, value in labels.items()) + "}"
