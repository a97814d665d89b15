"""The vLLM metric names PromQL may use, the ones vLLM removed, and `check_promql`, which every expression we emit
(alerts, dashboard panels, KEDA triggers, synth-time checks) goes through.

Names are those of vLLM's V1 engine Prometheus logger (vllm/v1/metrics/loggers.py, PrometheusStatLogger; checked
against vLLM 0.29-0.33, November 2026). Every series carries the labels `model_name` (the served model name) and
`engine`. Counters are exposed with a `_total` suffix and histograms as `_bucket`, `_sum` and `_count`, so the bare
name of either is never a series.

Ray Serve LLM runs vLLM with vLLM's Ray stat logger (vllm/v1/metrics/ray_wrappers.py, RayPrometheusStatLogger),
which registers the same metrics through ray.util.metrics after replacing every character outside [A-Za-z0-9_]
with "_"; Ray's exporter prefixes custom metrics with "ray_" and keeps the counter/histogram suffixes. So
`vllm:kv_cache_usage_perc` is `ray_vllm_kv_cache_usage_perc` and `vllm:generation_tokens_total` is
`ray_vllm_generation_tokens_total` (the names Ray's own Serve LLM Grafana panels query,
python/ray/dashboard/modules/metrics/dashboards/vllm_engine_panels.py). They keep `model_name` and `engine` and gain
`ReplicaId`; Ray >= 2.53 no longer exports `WorkerId` (RAY_metric_cardinality_level=recommended), so PromQL here never
relies on it. `check_promql` checks those names against the same two vLLM tables, and the Ray Serve names against
RAY_SERVE_METRICS.

The names are read from promql-parser's AST (llm_eks.manifests.promql_parse): selector names and `__name__`
matchers, never label values, comments or recording-rule names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import Enum
from types import MappingProxyType

from llm_eks.manifests.promql_parse import PromQLError, parse_promql, selector_names

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
        # The NIXL KV connector's own (a disaggregated workload's pools; vLLM 0.33 kv_connector/v1/nixl/stats.py:
        # 188-281, labels model_name and engine as every series, v1/metrics/loggers.py:499-505). Recorded where the
        # transfer is polled to completion (nixl/base_worker.py:3420-3424): with NixlConnector (= NixlPullConnector)
        # the decode pod, which READs the prefill pod's blocks.
        "vllm:nixl_xfer_time_seconds": HISTOGRAM,
        "vllm:nixl_post_time_seconds": HISTOGRAM,
        "vllm:nixl_bytes_transferred": HISTOGRAM,
        "vllm:nixl_num_descriptors": HISTOGRAM,
        "vllm:nixl_num_failed_transfers": COUNTER,
        "vllm:nixl_num_failed_notifications": COUNTER,
        "vllm:nixl_num_kv_expired_reqs": COUNTER,
        "vllm:nixl_num_notifications_after_expiry": COUNTER,
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

# Ray Serve's own metrics, by the name Ray exports before the counter/histogram suffixes (ray_ + the name Serve
# registers). Proxy and router names checked in Ray's source (python/ray/serve/_private/proxy_metrics.py, ProxyMetrics;
# router.py, RouterMetricsManager); all of them, with their tags, in doc/source/serve/monitoring.md ("Built-in Ray
# Serve metrics") and in Ray's own Serve Grafana panels (python/ray/dashboard/modules/metrics/dashboards/).
RAY_SERVE_METRICS: Mapping[str, str] = MappingProxyType(
    {
        # Proxy (every node with a proxy): tags route, method, application, status_code / error_code.
        "ray_serve_num_http_requests": COUNTER,
        "ray_serve_num_http_error_requests": COUNTER,
        "ray_serve_http_request_latency_ms": HISTOGRAM,
        "ray_serve_num_ongoing_http_requests": GAUGE,  # tags node_id, node_ip_address
        # Router (in the caller of a deployment, here the OpenAI ingress): tags deployment, application, handle,
        # actor_id. Queued = waiting for a replica with a free slot (max_ongoing_requests).
        "ray_serve_deployment_queued_queries": GAUGE,
        "ray_serve_num_ongoing_requests_at_replicas": GAUGE,
        # Controller and replicas: tags deployment, replica, application.
        "ray_serve_deployment_replica_healthy": GAUGE,
        "ray_serve_replica_processing_queries": GAUGE,
        "ray_serve_deployment_request_counter": COUNTER,
        "ray_serve_deployment_error_counter": COUNTER,
        "ray_serve_deployment_processing_latency_ms": HISTOGRAM,
    }
)

# Other exporters' series the library's rules, queries and panels read, by their exposed name, each with where it was
# read at the pinned version. `infrastructure_problems` holds the library's own expressions to this table, so a
# misspelt name fails at synth instead of leaving an alert that can never fire. (User objects are not held to it.)
_KSM = "kube-state-metrics v2.19.1 docs/metrics"
INFRASTRUCTURE_METRICS: Mapping[str, str] = MappingProxyType(
    {
        "up": "Prometheus: one per scrape target",
        "kube_deployment_spec_replicas": f"{_KSM}/workload/deployment-metrics.md",
        "kube_deployment_status_replicas": f"{_KSM}/workload/deployment-metrics.md",
        "kube_deployment_status_replicas_ready": f"{_KSM}/workload/deployment-metrics.md",
        "kube_deployment_created": f"{_KSM}/workload/deployment-metrics.md",
        "kube_statefulset_replicas": f"{_KSM}/workload/statefulset-metrics.md",
        "kube_statefulset_status_replicas_ready": f"{_KSM}/workload/statefulset-metrics.md",
        "kube_statefulset_created": f"{_KSM}/workload/statefulset-metrics.md",
        "kube_pod_info": f"{_KSM}/workload/pod-metrics.md",
        "kube_pod_status_phase": f"{_KSM}/workload/pod-metrics.md",
        # resource = the resource name with every character outside [a-zA-Z0-9_] as "_" (internal/store/pod.go,
        # SanitizeLabelName): nvidia.com/gpu is nvidia_com_gpu.
        "kube_pod_container_resource_requests": f"{_KSM}/workload/pod-metrics.md",
        # Labels namespace, metric, scaledObject, scaler, triggerIndex, type (metricLabels).
        "keda_scaler_detail_errors_total": "KEDA v2.20.2 pkg/metricscollector/prommetrics.go (scalerErrors)",
        "DCGM_FI_DEV_GPU_UTIL": "dcgm-exporter 4.5.3-4.8.2 etc/default-counters.csv",
        "DCGM_FI_DEV_FB_USED": "dcgm-exporter 4.5.3-4.8.2 etc/default-counters.csv",
        # "Value of the last XID error encountered": the last code, held, not a count.
        "DCGM_FI_DEV_XID_ERRORS": "dcgm-exporter 4.5.3-4.8.2 etc/default-counters.csv",
        "istio_requests_total": "Istio 1.30.3 standard metrics (a gateway reports them with reporter=source)",
        "istio_request_duration_milliseconds_bucket": "Istio 1.30.3 standard metrics",
        "llm_d_epp_request_total": "llm-d-router v0.10.0 pkg/epp/metrics/llm_d_router_metrics.go",
        "llm_d_epp_request_error_total": "llm-d-router v0.10.0 pkg/epp/metrics/llm_d_router_metrics.go",
        "llm_d_epp_request_duration_seconds_bucket": "llm-d-router v0.10.0 pkg/epp/metrics/llm_d_router_metrics.go",
    }
)
# The exporters whose names INFRASTRUCTURE_METRICS lists (other names, recording rules among them, are not checked).
_INFRASTRUCTURE_NAME = re.compile(r"^(?:kube_|keda_|DCGM_|istio_|llm_d_epp_|up$)")

_SUFFIXES = {GAUGE: ("",), COUNTER: ("_total",), HISTOGRAM: ("_bucket", "_sum", "_count")}

# vllm:* names (vLLM's own); the problem texts name them, and the Ray form rewrites them.
_VLLM_NAME = re.compile(r"(?<![A-Za-z0-9_:])vllm:[A-Za-z0-9_:]+")


def vllm_series_names() -> frozenset[str]:
    """Every series name the current vLLM metrics expose (suffixes included)."""
    return frozenset(name + suffix for name, kind in CURRENT_VLLM_METRICS.items() for suffix in _SUFFIXES[kind])


_SERIES = vllm_series_names()

RAY_PREFIX = "ray_"
_RAY_VLLM = RAY_PREFIX + "vllm_"
# ray_vllm_* / ray_serve_* names; recording-rule names (level:metric:ops) have a ':' and are not Ray's.
_RAY_NAME = re.compile(r"ray_(?:vllm|serve)_[A-Za-z0-9_]*")
_SANITIZE = re.compile(r"[^A-Za-z0-9_]")


def ray_exported(vllm_name: str) -> str:
    """The name Ray exports for a vLLM series: `vllm:x_total` -> `ray_vllm_x_total` (see the module docstring)."""
    return RAY_PREFIX + _SANITIZE.sub("_", vllm_name)


class MetricSource(Enum):
    """Who exports a workload's vLLM engine metrics, and so under which series names."""

    # vLLM's own /metrics: the registered names (vllm:kv_cache_usage_perc).
    VLLM = "vllm"
    # Ray Serve LLM re-exports them through Ray's exporter: ray_vllm_kv_cache_usage_perc.
    RAY = "ray"

    def series(self, vllm_name: str) -> str:
        """The series name this source exports for a vLLM series name."""
        return ray_exported(vllm_name) if self is MetricSource.RAY else vllm_name


def promql_number(value: float) -> str:
    """A float as PromQL and alert text read it, without float noise (0.95, 1, 0.1)."""
    return format(value, ".12g")


def ray_series_names() -> frozenset[str]:
    """Every series name Ray exports for the current vLLM metrics and the Ray Serve metrics (suffixes included)."""
    serve = (name + suffix for name, kind in RAY_SERVE_METRICS.items() for suffix in _SUFFIXES[kind])
    return frozenset({*(ray_exported(name) for name in _SERIES), *serve})


_RAY_SERIES = ray_series_names()


def _removed_reason(name: str) -> str | None:
    bases = (name, *(name.removesuffix(s) for s in ("_total", "_bucket", "_sum", "_count") if name.endswith(s)))
    for base in bases:
        if base in REMOVED_VLLM_METRICS:
            return REMOVED_VLLM_METRICS[base]
    for pattern, reason in _REMOVED_PATTERNS:
        if any(pattern.match(base) for base in bases):
            return reason
    return None


def _suffix_problem(name: str, kind: str | None) -> str | None:
    """A known counter or histogram named without the suffix Prometheus exposes it under."""
    if kind == COUNTER:
        return f"{name} is a counter and is exposed only as {name}_total"
    if kind == HISTOGRAM:
        return f"{name} is a histogram and is exposed only as {name}_bucket, {name}_sum and {name}_count"
    return None


def _problem(name: str) -> str | None:
    if name in _SERIES:
        return None
    reason = _removed_reason(name)
    if reason is not None:
        return f"{name} was removed from vLLM; {reason}"
    return _suffix_problem(name, CURRENT_VLLM_METRICS.get(name)) or (
        f"{name} is not a current vLLM metric (see llm_eks.manifests.promql.CURRENT_VLLM_METRICS)"
    )


def _ray_problem(name: str) -> str | None:
    if name in _RAY_SERIES:
        return None
    if name.startswith(_RAY_VLLM):
        # vLLM names have one ':' (after "vllm"), so the Ray form maps back one to one; reuse the vLLM verdict and
        # say it in Ray's names.
        problem = _problem("vllm:" + name.removeprefix(_RAY_VLLM))
        assert problem is not None  # a current vLLM series would be in _RAY_SERIES
        return _VLLM_NAME.sub(lambda m: ray_exported(m.group()), problem)
    return _suffix_problem(name, RAY_SERVE_METRICS.get(name)) or (
        f"{name} is not a Ray Serve metric llm-eks knows (see llm_eks.manifests.promql.RAY_SERVE_METRICS)"
    )


def ray_names(expr: str) -> list[str]:
    """The ray_vllm_* and ray_serve_* series names an expression selects, in order (label values and recording-rule
    names excluded). PromQLError when it is not PromQL."""
    return [n for n in selector_names(parse_promql(expr)) if _RAY_NAME.fullmatch(n)]


def vllm_names(expr: str) -> list[str]:
    """The vllm:* series names an expression selects, in order (label values excluded). PromQLError when it is not
    PromQL."""
    return [n for n in selector_names(parse_promql(expr)) if n.startswith("vllm:")]


def name_problems(names: Iterable[str]) -> list[str]:
    """One line per distinct problem with the vLLM and Ray Serve names among the series `names` (see check_promql)."""
    problems: list[str] = []
    for name in dict.fromkeys(names):
        if name.startswith("vllm:"):
            problem = _problem(name)
        elif _RAY_NAME.fullmatch(name):
            problem = _ray_problem(name)
        else:
            continue
        if problem is not None:
            problems.append(problem)
    return problems


def check_promql(expr: str) -> list[str]:
    """Problems with the vLLM and Ray Serve names a PromQL expression selects: removed, unknown, or a bare
    counter/histogram name. vllm:* names are vLLM's own; ray_vllm_* the same metrics as Ray Serve LLM exports them;
    ray_serve_* Ray Serve's own. Grafana variables are read as llm_eks.manifests.promql_parse says.

    Returns one line per distinct problem; an empty list means every such name is a current series. Text that is not
    PromQL is one problem: "cannot be parsed as PromQL (<the parser's reason>)".
    """
    try:
        names = selector_names(parse_promql(expr))
    except PromQLError as err:
        return [unparsable(err)]
    return name_problems(names)


def infrastructure_problems(expr: str) -> list[str]:
    """The kube-state-metrics, KEDA, DCGM, Istio and endpoint-picker names `expr` selects that
    INFRASTRUCTURE_METRICS does not list, one line each (or the parse error)."""
    try:
        names = selector_names(parse_promql(expr))
    except PromQLError as err:
        return [unparsable(err)]
    return [
        f"{name} is not a series llm-eks knows (see llm_eks.manifests.promql.INFRASTRUCTURE_METRICS)"
        for name in dict.fromkeys(names)
        if _INFRASTRUCTURE_NAME.match(name) and name not in INFRASTRUCTURE_METRICS
    ]


def ksm_workload(metric: str, kind: str, namespace: str, names: Iterable[str]) -> str:
    """kube-state-metrics' `kube_<kind>_<metric>` of the objects `names` (Deployments or StatefulSets) in
    `namespace`: `kube_deployment_status_replicas_ready{namespace="inference", deployment="vllm-x"}`, or a regular
    expression over several names (object names are DNS labels: nothing in them needs escaping)."""
    if kind not in ("deployment", "statefulset"):
        raise ValueError(f"kind: {kind!r} is not deployment or statefulset")
    names = list(names)
    owner = f'{kind}="{names[0]}"' if len(names) == 1 else f'{kind}=~"{"|".join(names)}"'
    return f'kube_{kind}_{metric}{{namespace="{namespace}", {owner}}}'


def unparsable(err: PromQLError) -> str:
    """The problem line for text that is not PromQL."""
    return f"cannot be parsed as PromQL ({err})"


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def selector(labels: Mapping[str, str], matching: Mapping[str, str] | None = None) -> str:
    """A PromQL label selector, `{k="v", ...}`, then `{..., k=~"regex"}` for each of `matching`, values escaped as
    PromQL double-quoted strings."""
    equal = [f"{key}={_quote(value)}" for key, value in labels.items()]
    regex = [f"{key}=~{_quote(value)}" for key, value in (matching or {}).items()]
    return "{" + ", ".join(equal + regex) + "}"
