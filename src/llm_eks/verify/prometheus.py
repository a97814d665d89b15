"""The Prometheus side of verify: the PromQL it sends (one builder per question, names from
`llm_eks.manifests.promql` so Ray Serve's re-exported names follow) and the queries themselves, through the API
server's service proxy to kube-prometheus-stack's Prometheus (`llm_eks.manifests.verifier.reads`): no port-forward,
nothing but the kubeconfig.

Series and labels (vLLM 0.33, vllm/v1/metrics/loggers.py; Prometheus Operator v0.93.0 ServiceMonitor relabelling,
pkg/prometheus/promcfg.go): latency histograms and counters carry `model_name` (the served model name) and `engine`;
`vllm:cache_config_info` is a gauge of 1 whose labels are CacheConfig's fields as strings and has no `model_name`, so
it is selected by the labels the ServiceMonitor adds: `namespace`, `job` (the Service name), `pod`. Ray Serve's
PodMonitor sets `job` to the RayService name the same way (llm_eks.manifests.ray_monitoring).

A disaggregated workload's two pools report the same model name, each under its own `job`: the decode pool's is the
workload's `metrics_job`, the prefill pool's `PhasePlan.prefill_job`. The prefill phase is read from the prefill pool's
`vllm:request_prefill_time_seconds` (vLLM 0.33 vllm/v1/metrics/loggers.py:991, a per-engine histogram on the request
latency buckets, labels model_name and engine; first token - scheduled per request, queueing excluded, as
llm_eks.manifests.monitoring_drift's rules read it too).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import promql_parser

from llm_eks.error_codes import E502, E503
from llm_eks.errors import fail
from llm_eks.manifests.promql import MetricSource, selector
from llm_eks.manifests.verifier import reads
from llm_eks.verify.expected import EnvironmentPlan, WorkloadPlan
from llm_eks.verify.kube import HELP, ClusterError, status_message
from llm_eks.verify.observed import KvSample, Latency, WorkloadMetrics

DEFAULT_WINDOW = "1h"
_WINDOW_TEXT = re.compile(r"^[0-9a-z]{1,20}$")
Sample = tuple[Mapping[str, str], float]


class Transport(Protocol):
    """What queries go through: `Kube.raw` (a GET through the API server)."""

    def raw(self, path: str, query: Sequence[tuple[str, str]] = ()) -> tuple[int, bytes]: ...


def duration_seconds(field: str, text: str) -> float:
    """Seconds of a Prometheus duration (1h, 30m, 2h30m, 1d), read by the PromQL parser itself; at least a minute."""
    allowed = "a Prometheus duration such as 1h, 30m or 2h30m (at least 1m)"
    if not _WINDOW_TEXT.match(text):
        raise fail(E503, field, text, allowed)
    try:
        call: Any = promql_parser.parse(f"rate(up[{text}])")
        seconds = float(call.args[0].range.total_seconds())
    except (ValueError, AttributeError, IndexError):
        raise fail(E503, field, text, allowed) from None
    if seconds < 60:
        raise fail(E503, field, text, allowed)
    return seconds


def window_seconds(window: str) -> float:
    """Seconds of the --window range."""
    return duration_seconds("--window", window)


def source(w: WorkloadPlan) -> MetricSource:
    """Who exports the workload's vLLM metrics: vLLM itself, or Ray Serve LLM under ray_vllm_* names."""
    return MetricSource.RAY if w.engine == "ray-serve" else MetricSource.VLLM


def _server(w: WorkloadPlan) -> str:
    """The workload's scrape targets (cache_config_info has no model_name)."""
    return selector({"namespace": w.namespace, "job": w.metrics_job})


def _model(w: WorkloadPlan, job: str | None = None) -> str:
    """The workload's own servers' series of its model: by job too, since a next version serves the same model in the
    same namespace (pool share) and must be judged on its own replicas, and a disaggregated workload's prefill pool
    (`job`) reports the same model as its decode pool."""
    return selector({"namespace": w.namespace, "job": job or w.metrics_job, "model_name": w.served_model_name})


def cache_config_query(w: WorkloadPlan, job: str | None = None) -> str:
    """The servers' vllm:cache_config_info: the workload's, or its pool `job`'s."""
    server = _server(w) if job is None else selector({"namespace": w.namespace, "job": job})
    return f"{source(w).series('vllm:cache_config_info')}{server}"


def quantile_query(w: WorkloadPlan, histogram: str, q: float, window: str, job: str | None = None) -> str:
    """histogram_quantile over the window's rate of a classic histogram, all servers of the workload (or of its pool
    `job`) pooled."""
    bucket = source(w).series(f"{histogram}_bucket")
    return f"histogram_quantile({q}, sum by (le) (rate({bucket}{_model(w, job)}[{window}])))"


def count_query(w: WorkloadPlan, histogram: str, window: str, job: str | None = None) -> str:
    return f"sum(increase({source(w).series(f'{histogram}_count')}{_model(w, job)}[{window}]))"


def running_query(w: WorkloadPlan, window: str) -> str:
    """Requests running per engine on average over the window, by Little's law from vLLM's own histogram: the
    seconds its finished requests spent in the RUNNING phase, per second of the window (vLLM 0.33 observes
    last token - first scheduled per request in vllm:request_inference_time_seconds), averaged over the engines (a
    server's, or each data-parallel rank's: the `engine` label)."""
    return f"avg(rate({source(w).series('vllm:request_inference_time_seconds_sum')}{_model(w)}[{window}]))"


def per_request_query(w: WorkloadPlan, histogram: str, window: str) -> str:
    """The mean of a per-request histogram (prompt or generated tokens) over the window: its sum over its count."""
    s = source(w)
    count = f"sum(rate({s.series(f'{histogram}_count')}{_model(w)}[{window}]))"
    return f"sum(rate({s.series(f'{histogram}_sum')}{_model(w)}[{window}])) / {count}"


def rate_query(w: WorkloadPlan, counter: str, window: str) -> str:
    return f"sum(rate({source(w).series(counter)}{_model(w)}[{window}]))"


TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
PREFILL = "vllm:request_prefill_time_seconds"


def workload_queries(w: WorkloadPlan, window: str) -> dict[str, str]:
    """Every query verify sends for one workload, by what it answers; a disaggregated workload's prefill time too, on
    its prefill pool."""
    prefill: dict[str, str] = {}
    if w.phases is not None:
        job = w.phases.prefill_job
        prefill = {
            "prefill_median": quantile_query(w, PREFILL, 0.5, window, job),
            "prefill_p99": quantile_query(w, PREFILL, 0.99, window, job),
            "prefill_count": count_query(w, PREFILL, window, job),
            "prefill_kv": cache_config_query(w, job),
        }
    return {
        "kv": cache_config_query(w),
        "ttft_median": quantile_query(w, TTFT, 0.5, window),
        "ttft_p99": quantile_query(w, TTFT, 0.99, window),
        "ttft_count": count_query(w, TTFT, window),
        "itl_median": quantile_query(w, ITL, 0.5, window),
        "itl_p99": quantile_query(w, ITL, 0.99, window),
        "itl_count": count_query(w, ITL, window),
        "running": running_query(w, window),
        "input_tokens": per_request_query(w, "vllm:request_prompt_tokens", window),
        "output_tokens": per_request_query(w, "vllm:request_generation_tokens", window),
        "output_rate": rate_query(w, "vllm:generation_tokens_total", window),
        **prefill,
    }


class Prometheus:
    """Instant queries through the API server's service proxy."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def query(self, expr: str, at: float | None = None) -> list[Sample]:
        """The instant vector `expr` evaluates to now, or at the Unix time `at`. ClusterError when Prometheus cannot
        be reached through the proxy or refuses the query."""
        where = f"{reads.PROMETHEUS_NAMESPACE}/{reads.PROMETHEUS_PROXY_NAME}"
        params = [("query", expr)] + ([("time", f"{at:.3f}")] if at is not None else [])
        status, body = self.transport.raw(reads.prometheus_query_path(), params)
        try:
            parsed: Any = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and parsed.get("kind") == "Status":
            # The API server's own answer: the proxy could not reach Prometheus, or RBAC refused the proxy.
            if status == 403:
                raise ClusterError(
                    E502,
                    f"prometheus: 403 Forbidden through the service proxy ({where}): {status_message(body)}; verify "
                    f"needs the llm-eks-verify group's ClusterRole and Roles ({HELP})",
                )
            raise ClusterError(
                E502,
                f"prometheus: unreachable through the API server's service proxy ({where}): {status_message(body)}",
            )
        if not isinstance(parsed, dict) or "status" not in parsed:
            raise ClusterError(E502, f"prometheus: {where} answered {status} with no Prometheus API body")
        if parsed["status"] != "success":
            raise ClusterError(
                E502, f"prometheus: query refused ({parsed.get('errorType')}: {parsed.get('error')}): {expr}"
            )
        data = parsed.get("data") or {}
        if data.get("resultType") != "vector":
            raise ClusterError(E502, f"prometheus: {expr} returned a {data.get('resultType')}, not an instant vector")
        return [(item.get("metric") or {}, float(item["value"][1])) for item in data.get("result") or ()]

    def scalar(self, expr: str) -> float | None:
        """The one finite value of a query that aggregates to one sample; None when empty or NaN/Inf."""
        samples = self.query(expr)
        if not samples or not math.isfinite(samples[0][1]):
            return None
        return samples[0][1]

    def quantile(self, expr: str) -> float | None:
        """A histogram quantile: None without samples (NaN or empty); +Inf stays (the top bucket)."""
        samples = self.query(expr)
        if not samples or math.isnan(samples[0][1]):
            return None
        return samples[0][1]


def kv_samples(samples: Sequence[Sample]) -> tuple[KvSample, ...]:
    """One KvSample per server from vllm:cache_config_info: vLLM's group-aware kv_cache_size_tokens where the
    version exports it (0.33, vllm/config/cache.py: "num_gpu_blocks * block_size can be wrong for hybrid models"),
    else num_gpu_blocks x block_size."""
    found: dict[str, KvSample] = {}
    for labels, _ in samples:
        pod = labels.get("pod") or labels.get("instance") or "?"
        size = _int(labels.get("kv_cache_size_tokens"))
        if size is not None:
            found[pod] = KvSample(pod, size, "kv_cache_size_tokens")
            continue
        blocks, block = _int(labels.get("num_gpu_blocks")), _int(labels.get("block_size"))
        if blocks is not None and block is not None:
            found[pod] = KvSample(pod, blocks * block, "num_gpu_blocks x block_size")
    return tuple(found[pod] for pod in sorted(found))


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:  # "None": not sized yet
        return None


def _latency(prometheus: Prometheus, q: Mapping[str, str], name: str) -> Latency:
    return Latency(
        prometheus.quantile(q[f"{name}_median"]),
        prometheus.quantile(q[f"{name}_p99"]),
        prometheus.scalar(q[f"{name}_count"]),
    )


def workload_metrics(prometheus: Prometheus, w: WorkloadPlan, window: str) -> WorkloadMetrics:
    q = workload_queries(w, window)
    return WorkloadMetrics(
        kv=kv_samples(prometheus.query(q["kv"])),
        ttft=_latency(prometheus, q, "ttft"),
        itl=_latency(prometheus, q, "itl"),
        prefill=_latency(prometheus, q, "prefill") if w.phases is not None else None,
        prefill_kv=kv_samples(prometheus.query(q["prefill_kv"])) if w.phases is not None else (),
        running_mean=prometheus.scalar(q["running"]),
        mean_input_tokens=prometheus.scalar(q["input_tokens"]),
        mean_output_tokens=prometheus.scalar(q["output_tokens"]),
        output_tokens_per_s=prometheus.scalar(q["output_rate"]),
    )


def read_metrics(prometheus: Prometheus, plan: EnvironmentPlan, window: str) -> dict[str, WorkloadMetrics]:
    """Each workload's metrics over `window`, by workload name."""
    return {w.name: workload_metrics(prometheus, w, window) for w in plan.workloads}
