"""What Prometheus holds for a StubCluster: each serving pod's vLLM 0.33 /metrics text over the last hour (written with
prometheus_client, as vLLM writes it, and read back with prometheus_client's parser) and the labels the
ServiceMonitor (or Ray's PodMonitor) adds. tests/prometheus_server.py backfills those series into a real Prometheus,
which evaluates the PromQL verify sends.

Names, labels and buckets are vLLM 0.33's (vllm/v1/metrics/loggers.py PrometheusStatLogger: labelnames
["model_name", "engine"], request_success adds finished_reason; vllm/v1/metrics/buckets.py; vllm/config/cache.py
CacheConfig, whose fields become vllm:cache_config_info's labels through metrics_info()). Ray Serve LLM re-exports
them as ray_vllm_* (llm_eks.manifests.promql.ray_exported).

Counters and histograms hold what the server counted over the hour that ends at the scenario's time (steady
traffic: a 10-minute window holds a sixth of it); gauges hold their value throughout.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from llm_eks.manifests.promql import ray_exported
from llm_eks.verify.args_diff import flags
from llm_eks.verify.expected import WorkloadPlan
from tests.prometheus_server import SPAN, Series
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
# vLLM 0.33's REQUEST_LATENCY_BUCKETS (the request phase histograms: e2e, queue, inference, prefill, decode).
REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                           240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
BLOCK_SIZE = 16
# Requests and token gaps each healthy server saw in the hour: steady enough that a 10-minute window (a canary
# step's hold) still holds 600 requests, above the 500 a p99 needs (llm_eks.planner.drift.P99_MIN_SAMPLES).
REQUESTS = 3600
GAPS = 36000
# The typical request of the plans (PlanRequest's defaults).
PROMPT_TOKENS = 1024
OUTPUT_TOKENS = 256


@dataclass
class ServerLoad:
    """What one vLLM server measured over the hour."""

    kv_tokens: int
    ttft_s: list[float]
    itl_s: list[float]
    # Requests in the RUNNING phase on average: the vllm:num_requests_running gauge, and (Little's law) the sum of
    # vllm:request_inference_time_seconds over the hour / 3600.
    running: float
    # Prompt and generated tokens of each request.
    prompt_tokens: int = PROMPT_TOKENS
    output_tokens: int = OUTPUT_TOKENS
    # Requests waiting for a batch slot, and the KV cache's use (0..1): what the KEDA triggers read.
    waiting: float = 0.0
    kv_usage: float = 0.3
    # vLLM sizes the request-token buckets up to max_model_len (1-2-5 series).
    max_model_len: int = 8192
    # False: labels as a vLLM without kv_cache_size_tokens writes them (only num_gpu_blocks and block_size).
    group_aware: bool = True
    # Each request's prefill time (vllm:request_prefill_time_seconds); written where not None: a disaggregated
    # workload's prefill pool (an empty list: the histogram of a server that prefilled nothing).
    prefill_s: list[float] | None = None

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


def max_model_len(w: WorkloadPlan) -> int:
    """The served context length: the vLLM argument, or the Ray Serve LLMConfig's engine_kwargs."""
    if w.llm_config is not None:
        return int((w.llm_config.get("engine_kwargs") or {}).get("max_model_len") or 8192)
    (value,) = flags(w.args.get("server") or w.args["leader"])["--max-model-len"]
    return int(value)


def healthy_load(w: WorkloadPlan) -> ServerLoad:
    """Steady traffic at half the planned concurrency, inside the SLO: medians near the plan's estimates (below the
    highest bucket bound within the SLO), the slowest 1.5 % at that bound."""
    ttft_cap, itl_cap = _ceiling(TTFT_BUCKETS, w.slo_ttft_p99_ms / 1000), _ceiling(ITL_BUCKETS, w.slo_itl_p99_ms / 1000)
    ttft = (w.ttft_estimate_ms if w.ttft_estimate_ms is not None else w.slo_ttft_p99_ms / 3) / 1000
    # A disaggregated workload's decode pool steps at the plan's decode step.
    itl = w.itl_estimate_ms if w.phases is None else w.phases.decode_itl_ms
    return ServerLoad(
        kv_tokens=w.kv_cache_tokens,
        ttft_s=spread(min(ttft, ttft_cap / 1.1), REQUESTS, ttft_cap),
        itl_s=spread(min(itl / 1000, itl_cap / 1.1), GAPS, itl_cap),
        running=w.target_concurrency / 2,
        max_model_len=max_model_len(w),
    )


def prefill_load(w: WorkloadPlan, factor: float = 1.0, requests: int = REQUESTS) -> ServerLoad:
    """A disaggregated workload's prefill server: `requests` prompts each prefilled in `factor` x the plan's prefill
    phase (±10 %), and the one token each generates."""
    assert w.phases is not None
    prefill_s = spread(factor * w.phases.prefill_ms / 1000, requests)
    return replace(
        healthy_load(w),
        ttft_s=prefill_s,
        itl_s=[],
        prefill_s=prefill_s,
        output_tokens=1,
    )


def request_token_buckets(max_len: int) -> list[int]:
    """vLLM 0.33's request_tokens family: 1, 2, 5, 10, ... up to max_model_len (buckets.build_1_2_5_buckets)."""
    out, scale = [], 1
    while True:
        for m in (1, 2, 5):
            if m * scale > max_len:
                return out
            out.append(m * scale)
        scale *= 10


def _histogram(
    name: str, doc: str, labels: dict[str, str], buckets: Sequence[float], observed: Sequence[float]
) -> HistogramMetricFamily:
    """A classic histogram of `observed` (cumulative bucket counts, +Inf, sum), as vLLM's prometheus_client
    Histogram would hold it after observing each value."""
    ordered = sorted(observed)
    family = HistogramMetricFamily(name, doc, labels=list(labels))
    counts = [(floatToGoString(le), float(bisect.bisect_right(ordered, le))) for le in buckets]
    family.add_metric(list(labels.values()), [*counts, ("+Inf", float(len(ordered)))], sum_value=sum(ordered))
    return family


class _Server:
    """prometheus_client's collector of one vLLM server's families (its custom-collector API, which writes the same
    text a registry of Gauge, Counter and Histogram objects does)."""

    def __init__(self, model_name: str, load: ServerLoad) -> None:
        self.model_name, self.load = model_name, load

    def collect(self) -> Iterator[Metric]:
        load = self.load
        labels = {"model_name": self.model_name, "engine": "0"}
        values = dict.fromkeys(CACHE_CONFIG_FIELDS, "None")
        values.update(block_size=str(BLOCK_SIZE), gpu_memory_utilization="0.92", cache_dtype="auto",
                      enable_prefix_caching="True", num_gpu_blocks=str(load.kv_tokens // BLOCK_SIZE))  # fmt: skip
        if load.group_aware:
            values["kv_cache_size_tokens"] = str(load.kv_tokens)
        info = GaugeMetricFamily("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                                 labels=[*CACHE_CONFIG_FIELDS, "engine"])  # fmt: skip
        info.add_metric([*values.values(), "0"], 1)
        yield info
        for name, doc, value in (
            ("vllm:num_requests_running", "Number of requests in model execution batches.", load.running),
            ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", load.waiting),
            ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", load.kv_usage),
        ):
            gauge = GaugeMetricFamily(name, doc, labels=list(labels))
            gauge.add_metric(list(labels.values()), value)
            yield gauge
        n = load.requests
        for name, doc, value in (
            ("vllm:prompt_tokens", "Number of prefill tokens processed.", n * load.prompt_tokens),
            ("vllm:generation_tokens", "Number of generation tokens processed.", n * load.output_tokens),
        ):
            counter = CounterMetricFamily(name, doc, labels=list(labels))
            counter.add_metric(list(labels.values()), value)
            yield counter
        success = CounterMetricFamily("vllm:request_success", "Count of successfully processed requests.",
                                      labels=[*labels, "finished_reason"])  # fmt: skip
        success.add_metric([*labels.values(), "length"], n)
        yield success
        tokens = request_token_buckets(load.max_model_len)
        # Each request runs for running x SPAN / n seconds: their sum over the hour is `running` requests at a time.
        inference = [load.running * SPAN / n] * n if n else []
        yield _histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels,
                         TTFT_BUCKETS, load.ttft_s)  # fmt: skip
        yield _histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", labels,
                         ITL_BUCKETS, load.itl_s)  # fmt: skip
        yield _histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", labels, tokens,
                         [load.prompt_tokens] * n)  # fmt: skip
        yield _histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", labels, tokens,
                         [load.output_tokens] * n)  # fmt: skip
        yield _histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
                         labels, REQUEST_LATENCY_BUCKETS, inference)  # fmt: skip
        if load.prefill_s is not None:
            doc = "Histogram of time spent in PREFILL phase for request."
            yield _histogram("vllm:request_prefill_time_seconds", doc, labels, REQUEST_LATENCY_BUCKETS, load.prefill_s)


def exposition(model_name: str, load: ServerLoad) -> str:
    """The server's /metrics text: vLLM 0.33's PrometheusStatLogger families, written by prometheus_client."""
    registry = CollectorRegistry()
    registry.register(_Server(model_name, load))
    return generate_latest(registry).decode()


def healthy_metrics(cluster: StubCluster) -> None:
    """One target per serving pod: each vLLM server (a LeaderWorkerSet's leader), or each Ray GPU worker."""
    for w in cluster.plan.workloads:
        # A next version's standby pods too: what the replicas a scale-up brings serve over a step's hold.
        for p in [*cluster.pods(w), *cluster.standby_pods(w)]:
            labels = p["metadata"]["labels"]
            if labels.get("leaderworkerset.sigs.k8s.io/worker-index", "0") != "0":
                continue
            key = (w.namespace, p["metadata"]["name"])
            if w.phases is not None and p["metadata"]["name"].startswith(f"{w.phases.prefill_job}-"):
                cluster.metrics[key] = Target(w.phases.prefill_job, w.served_model_name, prefill_load(w))
                continue
            cluster.metrics[key] = Target(w.metrics_job, w.served_model_name, healthy_load(w), w.engine == "ray-serve")


# prometheus_client's family types whose samples only rise (rate() and increase() read them).
_CUMULATIVE = {"counter", "histogram"}


def series(cluster: StubCluster) -> list[Series]:
    """Every series Prometheus holds for the hour: vLLM's text parsed back, renamed as Ray exports it where Ray Serve
    runs vLLM, with the target labels the ServiceMonitor / PodMonitor add (namespace, pod, job, service, ...)."""
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
                out.append((name, {**s.labels, **added}, float(s.value), family.type in _CUMULATIVE))
    return out
