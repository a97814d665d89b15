"""The Grafana dashboard of one vLLM workload, built as a plain dict (the monitoring charts ship it as JSON in a
ConfigMap the Grafana sidecar loads).

Every query reads current vLLM metric names only (llm_eks.manifests.promql) and the DCGM exporter's default
counters; for Ray Serve LLM the same panels read the names Ray re-exports (ray_vllm_*), and the caller adds its own
panels (Ray Serve's proxy and router metrics). The Prometheus datasource is a dashboard variable, so the same JSON
works in any Grafana.

A disaggregated workload's two pools report the same model name, so its panels select each pool by its scrape job
(the Service name, as the KEDA triggers do): the standard panels read the decode pool, and panels of their own show
the prefill pool (its queue, its first-token time, vLLM's per-request prefill time,
`vllm:request_prefill_time_seconds`: first token - scheduled, vLLM 0.33 v1/metrics/stats.py:601, loggers.py:991)
and the KV transfer from NIXL's own series on the decode pool, which pulls the blocks (`vllm:nixl_xfer_time_seconds`,
`vllm:nixl_bytes_transferred`, `vllm:nixl_num_failed_transfers`, `vllm:nixl_num_kv_expired_reqs`; vLLM 0.33
kv_connector/v1/nixl/stats.py:188-281, recorded in nixl/base_worker.py:3420-3424).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from llm_eks.manifests.monitoring_targets import MonitoringTargets
from llm_eks.manifests.neuron_monitor import on_workload_nodes
from llm_eks.manifests.promql import MetricSource, promql_number, selector

# Grafana's newest dashboard schema (apps/dashboard/pkg/migration/schemaversion/v43.go in grafana/grafana, 2026);
# an older Grafana loads it as is, a newer one migrates it forward on load.
SCHEMA_VERSION = 43
# Grafana caps dashboard uids at 40 characters.
UID_MAX_LENGTH = 40

_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_RATE = "$__rate_interval"
_QUANTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class ExtraPanel:
    """A time-series graph a caller adds to the standard panels."""

    title: str
    description: str
    # Grafana unit id (none, s, ms, reqps, percentunit, ...).
    unit: str
    # (expr, legend) per series.
    queries: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class DashboardSpec:
    """What the dashboard shows; the monitoring chart fills it from its props."""

    uid: str
    title: str
    namespace: str
    # Scrape job of the vLLM Service (a ServiceMonitor's job label is the Service name).
    job: str
    served_model_name: str
    # SLO lines, alert threshold line, the price in the cost panels, GPU panels when DCGM is scraped.
    targets: MonitoringTargets
    # Whose names the vLLM panels read: vLLM's own /metrics, or Ray Serve LLM's re-export (ray_vllm_*).
    metrics: MetricSource = MetricSource.VLLM
    # "Ready replicas" (also the cost panels' replica count) and its description; None counts the vLLM pods
    # Prometheus scrapes (up == 1 for job).
    replicas_expr: str | None = None
    replicas_description: str | None = None
    # Dashboard description; None describes a plain vLLM workload.
    description: str | None = None
    tags: tuple[str, ...] = ("llm-eks", "vllm")
    # Graphs added after the standard ones (laid out the same way).
    extra_panels: tuple[ExtraPanel, ...] = ()
    # A disaggregated workload: the prefill pool's scrape job (`job` is then the decode pool's); None: one pool.
    prefill_job: str | None = None


class _Queries:
    """The PromQL of every panel, in one place so the alerts and tests can read the same strings."""

    def __init__(self, spec: DashboardSpec) -> None:
        self.spec = spec
        self.vllm = selector({"namespace": spec.namespace, "model_name": spec.served_model_name})
        self.up = selector({"job": spec.job, "namespace": spec.namespace})
        if spec.prefill_job is not None:
            # Both pools report the model: the standard panels read the decode pool's job, the prefill panels theirs.
            self.vllm = pool_selector(spec.namespace, spec.served_model_name, spec.job)
            self.prefill = pool_selector(spec.namespace, spec.served_model_name, spec.prefill_job)
            # Ready replicas (and the cost panels' count) span both pools: a prefill replica costs as much.
            self.up = selector({"namespace": spec.namespace}, {"job": f"{spec.job}|{spec.prefill_job}"})
        self.gpu = selector({"namespace": spec.namespace})

    def name(self, vllm_name: str) -> str:
        """A vLLM series name as this dashboard's source exports it."""
        return self.spec.metrics.series(vllm_name)

    def series(self, vllm_name: str, pool: str | None = None) -> str:
        """A series of the workload's (decode) pool, or of the pool `pool` selects."""
        return f"{self.name(vllm_name)}{pool or self.vllm}"

    def quantile(self, q: float, histogram: str, pool: str | None = None) -> str:
        bucket = self.series(f"{histogram}_bucket", pool)
        return f"histogram_quantile({promql_number(q)}, sum by (le) (rate({bucket}[{_RATE}])))"

    def rate(self, counter: str, pool: str | None = None) -> str:
        return f"sum(rate({self.series(counter, pool)}[{_RATE}]))"

    def replicas(self) -> str:
        return self.spec.replicas_expr or f"count(up{self.up} == 1)"

    def cost_per_million(self, counters: tuple[str, ...]) -> str:
        tokens_per_second = " + ".join(self.rate(c) for c in counters)
        return (
            f"{promql_number(self.spec.targets.cost_per_hour_per_replica)} * {self.replicas()}"
            f" / (({tokens_per_second}) * 3600 / 1e6 > 0)"
        )

    def prefix_hit_ratio(self) -> str:
        return f"{self.rate('vllm:prefix_cache_hits_total')} / ({self.rate('vllm:prefix_cache_queries_total')} > 0)"


def pool_selector(namespace: str, model: str, job: str) -> str:
    """One pool's vLLM series: its namespace, model and scrape job."""
    return selector({"namespace": namespace, "job": job, "model_name": model})


def _target(expr: str, legend: str, ref: str) -> dict[str, Any]:
    return {"datasource": _DATASOURCE, "expr": expr, "legendFormat": legend, "range": True, "refId": ref}


def _targets(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [_target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(pairs)]


def _thresholds(limit: float | None) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
    if limit is not None:
        steps.append({"color": "red", "value": limit})
    return {"mode": "absolute", "steps": steps}


def _timeseries(
    title: str,
    description: str,
    unit: str,
    targets: list[dict[str, Any]],
    *,
    limit: float | None = None,
    min_value: float | None = 0,
    max_value: float | None = None,
) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "unit": unit,
        "thresholds": _thresholds(limit),
        # A dashed red line at the limit (SLO or alert threshold) when there is one.
        "custom": {"thresholdsStyle": {"mode": "dashed" if limit is not None else "off"}, "fillOpacity": 10},
    }
    if min_value is not None:
        defaults["min"] = min_value
    if max_value is not None:
        defaults["max"] = max_value
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": _DATASOURCE,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": targets,
    }


def _stat(title: str, description: str, unit: str, targets: list[dict[str, Any]], decimals: int) -> dict[str, Any]:
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": _DATASOURCE,
        "fieldConfig": {
            "defaults": {"unit": unit, "decimals": decimals, "thresholds": _thresholds(None)},
            "overrides": [],
        },
        "options": {
            "colorMode": "none",
            "graphMode": "area",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "textMode": "value",
        },
        "targets": targets,
    }


def _panels(spec: DashboardSpec) -> list[dict[str, Any]]:
    q = _Queries(spec)
    cost = promql_number(spec.targets.cost_per_hour_per_replica)
    cost_description = (
        f"USD per million tokens = ${cost}/h per replica (the capacity plan's price, baked into this query at "
        "synth time) x ready replicas / (tokens per hour / 1e6). It rises when replicas sit idle; change the price "
        "in the plan, not here."
    )

    def quantiles(histogram: str, pool: str | None = None) -> list[dict[str, Any]]:
        return _targets(*((q.quantile(p, histogram, pool), f"p{round(p * 100)}") for p in _QUANTILES))

    # A disaggregated workload's standard panels read its decode pool, and say so.
    pool = "" if spec.prefill_job is None else " (decode pool)"

    panels = [
        _stat(
            "Ready replicas",
            spec.replicas_description
            or (
                f"vLLM pods whose /metrics Prometheus scrapes (up == 1 for job {spec.job})."
                if spec.prefill_job is None
                else f"vLLM pods of both pools Prometheus scrapes (up == 1 for jobs {spec.job}, {spec.prefill_job})."
            ),
            "none",
            _targets((q.replicas(), "replicas")),
            0,
        ),
        _stat(
            "Cost per 1M output tokens",
            cost_description,
            "currencyUSD",
            _targets((q.cost_per_million(("vllm:generation_tokens_total",)), "USD / 1M output tokens")),
            2,
        ),
        _stat(
            "Output tokens/s",
            "Generated tokens per second across all replicas.",
            "none",
            _targets((q.rate("vllm:generation_tokens_total"), "tokens/s")),
            0,
        ),
        _stat(
            "Prefix cache hit ratio" + pool,
            "Prompt tokens served from the prefix cache / prompt tokens looked up.",
            "percentunit",
            _targets((q.prefix_hit_ratio(), "hit ratio")),
            1,
        ),
        _timeseries(
            "Time to first token" + pool,
            f"TTFT percentiles; the dashed line is the p99 SLO ({promql_number(spec.targets.ttft_p99_seconds)} s).",
            "s",
            quantiles("vllm:time_to_first_token_seconds"),
            limit=spec.targets.ttft_p99_seconds,
        ),
        _timeseries(
            "Inter-token latency" + pool,
            f"ITL percentiles; the dashed line is the p99 SLO ({promql_number(spec.targets.itl_p99_seconds)} s).",
            "s",
            quantiles("vllm:inter_token_latency_seconds"),
            limit=spec.targets.itl_p99_seconds,
        ),
        _timeseries(
            "End-to-end request latency" + pool,
            "Percentiles of the time from request arrival to the last token.",
            "s",
            quantiles("vllm:e2e_request_latency_seconds"),
        ),
        _timeseries(
            "Token throughput" + pool,
            "Prompt (prefill) and generated (decode) tokens per second across all replicas.",
            "none",
            _targets(
                (q.rate("vllm:prompt_tokens_total"), "prompt tokens/s"),
                (q.rate("vllm:generation_tokens_total"), "generated tokens/s"),
            ),
        ),
        _timeseries(
            "Queue depth" + pool,
            "Requests waiting for a batch slot and requests in the running batch, summed over replicas. A waiting "
            "queue that keeps growing means the autoscaler is out of room.",
            "none",
            _targets(
                (f"sum({q.series('vllm:num_requests_waiting')})", "waiting"),
                (f"sum({q.series('vllm:num_requests_running')})", "running"),
            ),
        ),
        _timeseries(
            "KV-cache usage" + pool,
            f"KV-cache blocks in use per pod (0-1); the dashed line is the alert threshold "
            f"({promql_number(spec.targets.kv_cache_usage_threshold)}). Near 1, vLLM preempts requests.",
            "percentunit",
            _targets((f"max by (pod) ({q.series('vllm:kv_cache_usage_perc')})", "{{pod}}")),
            limit=spec.targets.kv_cache_usage_threshold,
            max_value=1,
        ),
        _timeseries(
            "Preemptions" + pool,
            "Requests preempted per second (KV cache exhausted; their work is recomputed).",
            "none",
            _targets((q.rate("vllm:num_preemptions_total"), "preemptions/s")),
        ),
        _timeseries(
            "Finished requests" + pool,
            "Requests finished per second, by finish reason (stop, length, abort, ...).",
            "reqps",
            _targets(
                (
                    f"sum by (finished_reason) (rate({q.series('vllm:request_success_total')}[{_RATE}]))",
                    "{{finished_reason}}",
                )
            ),
        ),
        _timeseries(
            "Cost per 1M tokens",
            cost_description + " The second series counts prompt and generated tokens together.",
            "currencyUSD",
            _targets(
                (q.cost_per_million(("vllm:generation_tokens_total",)), "per 1M output tokens"),
                (
                    q.cost_per_million(("vllm:prompt_tokens_total", "vllm:generation_tokens_total")),
                    "per 1M prompt + output tokens",
                ),
            ),
        ),
    ]
    if spec.prefill_job is not None:
        panels += _disaggregated_panels(spec, q, quantiles)
    panels += [
        _timeseries(extra.title, extra.description, extra.unit, _targets(*extra.queries)) for extra in spec.extra_panels
    ]
    if spec.targets.dcgm:
        panels += [
            _timeseries(
                "GPU utilization",
                f"DCGM_FI_DEV_GPU_UTIL of the GPUs allocated to pods in namespace {spec.namespace}, per node and GPU.",
                "percent",
                _targets((f"avg by (Hostname, gpu) (DCGM_FI_DEV_GPU_UTIL{q.gpu})", "{{Hostname}} GPU {{gpu}}")),
                max_value=100,
            ),
            _timeseries(
                "GPU memory used",
                "DCGM_FI_DEV_FB_USED (framebuffer MiB in use: weights, KV cache, activations) per node and GPU.",
                "mbytes",
                _targets((f"max by (Hostname, gpu) (DCGM_FI_DEV_FB_USED{q.gpu})", "{{Hostname}} GPU {{gpu}}")),
            ),
        ]
    if spec.targets.neuron:
        on_nodes = f"namespace {spec.namespace}'s pods"
        panels += [
            _timeseries(
                "NeuronCore utilization",
                f"neuroncore_utilization_ratio (Neuron monitor) of every NeuronCore on the nodes that run {on_nodes}, "
                "per node and core.",
                "percentunit",
                _targets(
                    (
                        on_workload_nodes("avg by (node, neuroncore) (neuroncore_utilization_ratio)", spec.namespace),
                        "{{node}} core {{neuroncore}}",
                    )
                ),
                max_value=1,
            ),
            _timeseries(
                "Neuron runtime memory used",
                "neuron_runtime_memory_used_bytes (Neuron monitor: weights, KV cache and buffers the Neuron runtime "
                f"holds) per node and memory location, on the nodes that run {on_nodes}.",
                "bytes",
                _targets(
                    (
                        on_workload_nodes(
                            "sum by (node, memory_location) (neuron_runtime_memory_used_bytes)", spec.namespace
                        ),
                        "{{node}} {{memory_location}}",
                    )
                ),
            ),
        ]
    return panels


def _disaggregated_panels(spec: DashboardSpec, q: _Queries, quantiles: Any) -> list[dict[str, Any]]:
    """The prefill pool's panels and the KV transfer's, of a disaggregated workload (see the module docstring)."""
    prefill = q.prefill
    return [
        _timeseries(
            "Time to first token (prefill pool)",
            f"TTFT percentiles of the prefill pool ({spec.prefill_job}): its queue and the prompt's prefill, the "
            "first leg of a disaggregated request's first token (the decode pool's TTFT panel is the second: the KV "
            f"read and the first decode step). The dashed line is the p99 SLO of the whole path "
            f"({promql_number(spec.targets.ttft_p99_seconds)} s).",
            "s",
            quantiles("vllm:time_to_first_token_seconds", prefill),
            limit=spec.targets.ttft_p99_seconds,
        ),
        _timeseries(
            "Prefill time per request (prefill pool)",
            "vLLM's time from a request's scheduling to its first token on the prefill pool (queueing excluded): "
            "the planner's prefill estimate (llm-eks plan, the P/D decision) is a median of this.",
            "s",
            quantiles("vllm:request_prefill_time_seconds", prefill),
        ),
        _timeseries(
            "Queue depth (prefill pool)",
            "Requests waiting and running on the prefill pool (what its ScaledObject scales on, with the requests "
            "the endpoint picker holds).",
            "none",
            _targets(
                (f"sum({q.series('vllm:num_requests_waiting', prefill)})", "waiting"),
                (f"sum({q.series('vllm:num_requests_running', prefill)})", "running"),
            ),
        ),
        _timeseries(
            "KV transfer time",
            "NIXL transfer time per transfer (decode pool, which reads the prefill pod's KV blocks), p50 and p99.",
            "s",
            _targets(*((q.quantile(p, "vllm:nixl_xfer_time_seconds"), f"p{round(p * 100)}") for p in (0.5, 0.99))),
        ),
        _timeseries(
            "KV transfer throughput",
            "Bytes of KV cache the decode pool reads from the prefill pool per second (NIXL).",
            "Bps",
            _targets((q.rate("vllm:nixl_bytes_transferred_sum"), "bytes/s")),
        ),
        _timeseries(
            "KV transfer failures",
            "Failed NIXL transfers per second on the decode pool (each fails its request: kv_load_failure_policy "
            "'fail'), and requests whose KV expired on the prefill pool before a decode pod read it.",
            "none",
            _targets(
                (q.rate("vllm:nixl_num_failed_transfers_total"), "failed transfers/s"),
                (q.rate("vllm:nixl_num_kv_expired_reqs_total", prefill), "expired KV/s (prefill pool)"),
            ),
        ),
    ]


def _layout(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stats in one row of four, then graphs two per row; ids in reading order."""
    x = y = previous_height = 0
    laid_out = []
    for index, panel in enumerate(panels, start=1):
        stat = panel["type"] == "stat"
        width, height = (6, 4) if stat else (12, 8)
        if x + width > 24:
            x, y = 0, y + previous_height
        laid_out.append({"id": index, "gridPos": {"h": height, "w": width, "x": x, "y": y}, **panel})
        x += width
        previous_height = height
    return laid_out


def build_dashboard(spec: DashboardSpec) -> dict[str, Any]:
    """The dashboard as a dict (json.dumps it for Grafana)."""
    description = spec.description or f"vLLM serving {spec.served_model_name} in namespace {spec.namespace} (llm-eks)."
    return _dashboard(spec.uid, spec.title, description, spec.tags, _panels(spec))


def panels_dashboard(
    uid: str, title: str, description: str, tags: tuple[str, ...], panels: tuple[ExtraPanel, ...]
) -> dict[str, Any]:
    """A dashboard of `panels` alone (the gateway's), laid out like a workload's."""
    graphs = [_timeseries(p.title, p.description, p.unit, _targets(*p.queries)) for p in panels]
    return _dashboard(uid, title, description, tags, graphs)


def _dashboard(
    uid: str, title: str, description: str, tags: tuple[str, ...], panels: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": list(tags),
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "time": {"from": "now-3h", "to": "now"},
        "timezone": "browser",
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                    "refresh": 1,
                    "regex": "",
                }
            ]
        },
        "annotations": {"list": []},
        "links": [],
        "panels": _layout(panels),
    }


def panel_queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title, expr) for every query in a dashboard built here."""
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]
