"""What Prometheus holds for a StubCluster: each serving pod's vLLM 0.33 /metrics text (written with prometheus_client,
as vLLM writes it, and read back with prometheus_client's parser), the labels the ServiceMonitor (or Ray's PodMonitor)
adds, and a Prometheus that evaluates the PromQL verify sends over those samples (parsed with promql-parser).

Names, labels and buckets are vLLM 0.33's (vllm/v1/metrics/loggers.py PrometheusStatLogger: labelnames
["model_name", "engine"], request_success adds finished_reason; vllm/v1/metrics/buckets.py; vllm/config/cache.py
CacheConfig, whose fields become vllm:cache_config_info's labels through metrics_info()). Ray Serve LLM re-exports
them as ray_vllm_* (llm_eks.manifests.promql.ray_exported).

Counters and histograms hold what the server counted during the query's window (it started at the window's start),
so rate() is the value over the window's seconds and increase() the value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import promql_parser
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from llm_eks.manifests.promql import ray_exported
from llm_eks.verify.expected import WorkloadPlan
from tests.verify_cluster import StubCluster

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
               80.0)  # fmt: skip
# CacheConfig's fields in vLLM 0.33 (its metrics_info() exports every one as a string label).
CACHE_CONFIG_FIELDS = (
    "block_size", "user_specified_block_size", "kv_cache_layout", "prefix_match_unit", "gpu_memory_utilization",
    "cache_dtype", "is_attention_free", "num_gpu_blocks_override", "sliding_window", "enable_prefix_caching",
    "prefix_caching_hash_algo", "prefix_cache_retention_interval", "kv_cache_dtype_skip_layers",
    "mamba_page_size_padded", "skip_page_size_padded", "mamba_block_size", "mamba_cache_dtype",
    "mamba_ssm_cache_dtype", "mamba_cache_mode", "enable_mamba_shared_prefix_checkpoint", "replayssm_buffer_len",
    "use_replayssm", "use_kda_recoverssm", "num_gpu_blocks", "num_cpu_blocks", "simple_cpu_offload_num_blocks",
    "effective_attention_block_size", "kv_cache_size_tokens", "kv_cache_max_concurrency", "hash_block_size",
    "cache_hit_alignment_tokens", "kv_sharing_fast_prefill", "swa_bounded_replay", "kv_cache_memory_bytes",
    "kv_offloading_size", "kv_offloading_backend",
)  # fmt: skip
BLOCK_SIZE = 16
# Requests and token gaps each healthy server saw in the window (enough for a stable p99, few enough to be fast).
REQUESTS = 600
GAPS = 6000


@dataclass
class ServerLoad:
    """What one vLLM server measured over the window."""

    kv_tokens: int
    ttft_s: list[float]
    itl_s: list[float]
    running: float
    prompt_tokens: int
    output_tokens: int
    # False: labels as a vLLM without kv_cache_size_tokens writes them (only num_gpu_blocks and block_size).
    group_aware: bool = True

    @property
    def requests(self) -> int:
        return len(self.ttft_s)


@dataclass
class Target:
    """One scrape target: the workload's job label, its vLLM metrics, and whether Ray re-exports them."""

    job: str
    model_name: str
    load: ServerLoad
    ray: bool = False
    extra_labels: dict[str, str] = field(default_factory=dict)


def spread(centre: float, n: int, tail: float | None = None, tail_share: float = 0.015) -> list[float]:
    """`n` values around `centre` (±10 %), a `tail_share` of them at `tail`: a median near `centre`, a p99 in the
    tail's bucket."""
    k = round(n * tail_share) if tail is not None else 0
    body = [centre * (0.9 + 0.2 * i / max(n - k - 1, 1)) for i in range(n - k)]
    return body + [tail] * k if tail is not None else body


def _ceiling(buckets: Sequence[float], slo_s: float) -> float:
    """The largest bucket bound at or below the SLO: with 99 % of the observations at or below it, the histogram's
    p99 (interpolated within a bucket) cannot pass the SLO."""
    return max(b for b in buckets if b <= slo_s)


def healthy_load(w: WorkloadPlan) -> ServerLoad:
    """A light load inside the SLO: medians near the plan's estimates (below the highest bucket bound within the
    SLO), the slowest 1.5 % at that bound."""
    ttft_cap, itl_cap = _ceiling(TTFT_BUCKETS, w.slo_ttft_p99_ms / 1000), _ceiling(ITL_BUCKETS, w.slo_itl_p99_ms / 1000)
    ttft = (w.ttft_estimate_ms if w.ttft_estimate_ms is not None else w.slo_ttft_p99_ms / 3) / 1000
    return ServerLoad(
        kv_tokens=w.kv_cache_tokens,
        ttft_s=spread(min(ttft, ttft_cap / 1.1), REQUESTS, ttft_cap),
        itl_s=spread(min(w.itl_estimate_ms / 1000, itl_cap / 1.1), GAPS, itl_cap),
        running=w.target_concurrency / 2,
        prompt_tokens=REQUESTS * 1024,
        output_tokens=REQUESTS * 256,
    )


def exposition(model_name: str, load: ServerLoad) -> str:
    """The server's /metrics text, as vLLM 0.33's PrometheusStatLogger registers and prometheus_client writes it."""
    registry = CollectorRegistry()
    labels = {"model_name": model_name, "engine": "0"}
    info = Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                 [*CACHE_CONFIG_FIELDS, "engine"], registry=registry)  # fmt: skip
    values = dict.fromkeys(CACHE_CONFIG_FIELDS, "None")
    values.update(block_size=str(BLOCK_SIZE), gpu_memory_utilization="0.92", cache_dtype="auto",
                  enable_prefix_caching="True", num_gpu_blocks=str(load.kv_tokens // BLOCK_SIZE))  # fmt: skip
    if load.group_aware:
        values["kv_cache_size_tokens"] = str(load.kv_tokens)
    info.labels(**values, engine="0").set(1)
    Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", list(labels),
          registry=registry).labels(**labels).set(load.running)  # fmt: skip
    Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", list(labels),
            registry=registry).labels(**labels).inc(load.prompt_tokens)  # fmt: skip
    Counter("vllm:generation_tokens", "Number of generation tokens processed.", list(labels),
            registry=registry).labels(**labels).inc(load.output_tokens)  # fmt: skip
    success = Counter("vllm:request_success", "Count of successfully processed requests.",
                      [*labels, "finished_reason"], registry=registry)  # fmt: skip
    success.labels(**labels, finished_reason="length").inc(load.requests)
    for metric, doc, buckets, values_s in (
        ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS,
         load.ttft_s),
        ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS, load.itl_s),
    ):  # fmt: skip
        h = Histogram(metric, doc, list(labels), buckets=buckets, registry=registry).labels(**labels)
        for v in values_s:
            h.observe(v)
    return generate_latest(registry).decode()


def healthy_metrics(cluster: StubCluster) -> None:
    """One target per serving pod: each vLLM server (a LeaderWorkerSet's leader), or each Ray GPU worker."""
    for w in cluster.plan.workloads:
        for p in cluster.pods(w):
            labels = p["metadata"]["labels"]
            if labels.get("leaderworkerset.sigs.k8s.io/worker-index", "0") != "0":
                continue
            key = (w.namespace, p["metadata"]["name"])
            cluster.metrics[key] = Target(w.metrics_job, w.served_model_name, healthy_load(w), w.engine == "ray-serve")


Series = tuple[str, dict[str, str], float]


def series(cluster: StubCluster) -> list[Series]:
    """Every sample Prometheus would hold: vLLM's text parsed back, renamed as Ray exports it where Ray Serve runs
    vLLM, with the target labels the ServiceMonitor / PodMonitor add (namespace, pod, job, service, ...)."""
    out: list[Series] = []
    for (namespace, pod), target in cluster.metrics.items():
        text = exposition(target.model_name, target.load)
        added = {"namespace": namespace, "pod": pod, "job": target.job, "instance": f"{pod}:8000",
                 "container": "vllm", "endpoint": "http", "service": target.job, **target.extra_labels}  # fmt: skip
        if target.ray:
            added.update(container="ray-worker", endpoint="metrics", ReplicaId="abc123")
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name.endswith("_created"):
                    continue
                name = ray_exported(s.name) if target.ray else s.name
                out.append((name, {**s.labels, **added}, float(s.value)))
    return out


def _matches(labels: dict[str, str], matchers: Any) -> bool:
    import re

    for m in matchers.matchers:
        value, op = labels.get(m.name, ""), str(m.op)
        ok = {
            "MatchOp.Equal": value == m.value,
            "MatchOp.NotEqual": value != m.value,
            "MatchOp.Re": re.fullmatch(m.value, value) is not None,
            "MatchOp.NotRe": re.fullmatch(m.value, value) is None,
        }[op]
        if not ok:
            return False
    return True


Vector = list[tuple[dict[str, str], float]]


def _select(store: Sequence[Series], vs: Any) -> Vector:
    return [(dict(labels, __name__=name), v) for name, labels, v in store if name == vs.name
            and _matches(labels, vs.matchers)]  # fmt: skip


def _bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus's histogram_quantile on classic buckets (promql/quantile.go, bucketQuantile)."""
    buckets.sort()
    if not buckets or not math.isinf(buckets[-1][0]):
        return math.nan
    total = buckets[-1][1]
    if total == 0:
        return math.nan
    rank = q * total
    b = next((i for i, (_, c) in enumerate(buckets[:-1]) if c >= rank), len(buckets) - 1)
    if b == len(buckets) - 1:
        return buckets[-2][0]
    start = 0.0 if b == 0 else buckets[b - 1][0]
    below = 0.0 if b == 0 else buckets[b - 1][1]
    return start + (buckets[b][0] - start) * ((rank - below) / (buckets[b][1] - below))


def evaluate(store: Sequence[Series], expr: Any) -> Vector:
    """The instant vector of the PromQL shapes verify sends (selectors, rate/increase/avg_over_time, sum/avg by,
    histogram_quantile, a division of two aggregates)."""
    kind = type(expr).__name__
    if kind == "VectorSelector":
        return _select(store, expr)
    if kind == "ParenExpr":
        return evaluate(store, expr.expr)
    if kind == "Call":
        name = expr.func.name
        if name == "histogram_quantile":
            q = float(expr.args[0].val)
            groups: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
            for labels, v in evaluate(store, expr.args[1]):
                key = tuple(sorted((k, x) for k, x in labels.items() if k not in ("le", "__name__")))
                groups.setdefault(key, []).append((float(labels["le"]), v))
            return [(dict(key), _bucket_quantile(q, b)) for key, b in groups.items()]
        matrix = expr.args[0]
        seconds = matrix.range.total_seconds()
        picked = [({k: x for k, x in labels.items() if k != "__name__"}, v)
                  for labels, v in _select(store, matrix.vector_selector)]  # fmt: skip
        per = {"rate": lambda v: v / seconds, "increase": lambda v: v, "avg_over_time": lambda v: v}[name]
        return [(labels, per(v)) for labels, v in picked]
    if kind == "AggregateExpr":
        by = list(expr.modifier.labels) if expr.modifier is not None else []
        grouped: dict[tuple[tuple[str, str], ...], list[float]] = {}
        for labels, v in evaluate(store, expr.expr):
            grouped.setdefault(tuple((k, labels.get(k, "")) for k in by), []).append(v)
        op = str(expr.op)
        agg = {"sum": sum, "avg": lambda vs: sum(vs) / len(vs)}[op]
        return [(dict(key), agg(vs)) for key, vs in grouped.items()]
    if kind == "BinaryExpr" and str(expr.op) == "/":
        lhs, rhs = evaluate(store, expr.lhs), evaluate(store, expr.rhs)
        right = {tuple(sorted(labels.items())): v for labels, v in rhs}
        out = []
        for labels, v in lhs:
            d = right.get(tuple(sorted(labels.items())))
            if d is not None:
                out.append((labels, v / d if d else (math.nan if v == 0 else math.inf)))
        return out
    raise AssertionError(f"the stub Prometheus does not evaluate {kind}: {expr}")


def value_text(v: float) -> str:
    """A sample value as Prometheus's API writes it: a quoted string, NaN and +Inf spelled its way."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


def query(store: Sequence[Series], text: str, at: float) -> dict[str, Any]:
    """Prometheus's /api/v1/query answer for `text` over `store` (the envelope, the vector, values as strings)."""
    try:
        expr = promql_parser.parse(text)
    except ValueError as err:
        return {"status": "error", "errorType": "bad_data", "error": f'invalid parameter "query": {err}'}
    vector = evaluate(store, expr)
    return {
        "status": "success",
        "data": {"resultType": "vector",
                 "result": [{"metric": labels, "value": [at, value_text(v)]} for labels, v in vector]},
    }  # fmt: skip
