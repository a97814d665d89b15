"""`RayMonitoringChart`: what Prometheus and Grafana need to watch one Ray Serve LLM workload (`RayServeChart`).

- a PodMonitor for every Ray pod of the RayService (head and GPU workers, port `metrics`, `/metrics`): Ray exports
  all metrics of a node on that port, its own (Serve proxy, router, controller, replicas) and vLLM's engine metrics,
  which Ray Serve LLM re-exports as `ray_vllm_*` (llm_eks.manifests.promql explains the renaming);
- a ServiceMonitor for the DCGM exporter (GPU panels), as the vLLM monitoring chart has;
- a PrometheusRule with the vLLM chart's alerts in Ray's names: KV cache above 95 % for 5 minutes, a growing waiting
  queue, TTFT and ITL p99 above the SLO, rising preemptions, a scrape target down;
- the Grafana dashboard (llm_eks.manifests.dashboard with Ray's names, plus Ray Serve's proxy and router panels) in a
  ConfigMap labelled `grafana_dashboard: "1"`.

Scraping follows KubeRay's own PodMonitors (ray-project/kuberay config/prometheus/podMonitor.yaml): port `metrics`,
which KubeRay adds to every Ray container (8080, the `metrics-export-port` it sets; ray-operator/controllers/ray/
common/pod.go), and the pod's `ray.io/cluster` label copied to `ray_io_cluster`, the label Ray's own Grafana
dashboards filter on. Here one PodMonitor selects both node types by the chart's `app.kubernetes.io/instance` template
label (the RayCluster name carries a random suffix) and takes its job name from that label, so `job` is the RayService
name on every series, as a ServiceMonitor makes it the Service name for vLLM.

Label sets: ray_vllm_* series carry `model_name` (= the LLMConfig model_id, which Ray Serve LLM passes to vLLM as the
served model name), `engine` and `ReplicaId`; Ray Serve series carry `application`, `deployment` and `replica` (or
`node_id` for the proxies' gauge); Prometheus adds `namespace`, `pod`, `job`. Every PromQL string emitted here passes
`promql.check_promql`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import cdk8s
from constructs import Construct

from llm_eks.errors import ConfigError
from llm_eks.manifests.dashboard import (
    UID_MAX_LENGTH,
    DashboardSpec,
    ExtraPanel,
    build_dashboard,
    panel_queries,
)
from llm_eks.manifests.labels import app_labels, plain_object, require_dns1035, require_dns1123
from llm_eks.manifests.promql import check_promql, ray_exported, selector
from llm_eks.manifests.ray_serve import (
    APPLICATION_NAME,
    METRICS_PORT_NAME,
    RAY_SERVE_APP,
    llm_deployment_name,
)

# Prometheus duration (the pattern the monitoring CRDs enforce, without the bare "0").
_DURATION = re.compile(r"^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$")
# LLMConfig model ids (ray_serve._MODEL_ID): no quotes or braces, so they read cleanly in PromQL.
_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,252}$")
# Serve application names in serveConfigV2.
_APPLICATION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
# A p99 above ten minutes is a misconfiguration, not an SLO.
_MAX_SLO_SECONDS = 600.0
# Pod labels copied onto every series: ray_io_cluster is what Ray's own Grafana dashboards filter on.
POD_TARGET_LABELS = ("ray.io/cluster", "ray.io/node-type", "ray.io/group")
_RATE = "$__rate_interval"


@dataclass(frozen=True)
class RayMonitoringProps:
    """One Ray Serve LLM workload's monitoring. The lead fills the first six from the config, the plan and the
    RayServeProps of the same workload (name, model_id)."""

    # The RayService name (RayServeProps.name); the job label of every scraped series.
    name: str
    # The LLMConfig model_id (RayServeProps.model_id): the `model_name` label of every ray_vllm_* series.
    model_id: str
    # Environment SLOs (config slo.ttft_p99_ms / itl_p99_ms, in seconds).
    ttft_p99_seconds: float
    itl_p99_seconds: float
    # USD per hour for one model replica (all the nodes it spans), from the capacity plan (baked into the cost panel).
    cost_per_hour_per_replica: float
    # Total waiting requests above which a still-growing queue alerts; waiting_per_replica x max replicas means Serve's
    # autoscaler has run out of room.
    queue_waiting_threshold: int
    # The workload namespace (cross-chart contract).
    namespace: str = "inference"
    # The Serve application in serveConfigV2 (RayServeChart names it "llm").
    application: str = APPLICATION_NAME
    # 15 s resolves a queue building up within one Serve autoscaling look-back without loading Prometheus.
    scrape_interval: str = "15s"
    # Above 95 % KV-cache use vLLM starts preempting requests (issue 5).
    kv_cache_usage_threshold: float = 0.95
    # Scrape the NVIDIA DCGM exporter too (GPU panels). Its Helm chart's own ServiceMonitor must then be off
    # (serviceMonitor.enabled=false): that one keeps honorLabels false, which renames the GPU pod's namespace label.
    dcgm: bool = True
    # Namespace of the DCGM exporter's Service; None finds it in any namespace by its labels.
    dcgm_namespace: str | None = None
    # The dcgm-exporter chart's Service labels (selectorLabels in deployment/templates/_helpers.tpl).
    dcgm_service_labels: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({"app.kubernetes.io/name": "dcgm-exporter"})
    )

    @property
    def dashboard_uid(self) -> str:
        """Stable across synths (Grafana keys bookmarks and links on it); Grafana allows 40 characters."""
        return f"llm-eks-{self.name}"[:UID_MAX_LENGTH]

    @property
    def deployment(self) -> str:
        """The Serve deployment of the model (`deployment` label of Ray Serve's replica and router metrics)."""
        return llm_deployment_name(self.model_id)


def pod_selector(name: str) -> dict[str, str]:
    """The labels the PodMonitor selects: every Ray pod (head and workers) of RayService `name`."""
    return {
        # RayServeChart's pod template label, on the head and every worker.
        "app.kubernetes.io/instance": name,
        # Set by KubeRay on every Ray pod (ray-operator/controllers/ray/common/pod.go, labelPod).
        "ray.io/is-ray-node": "yes",
    }


def _fail(prop: str, value: object, allowed: str) -> ConfigError:
    return ConfigError(f"ray_monitoring.{prop}: {value!r} is not allowed; {allowed}")


def _positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def validate(props: RayMonitoringProps) -> None:
    """Raise ConfigError (one line naming the field) on the first bad prop."""
    require_dns1035("ray_monitoring.name", props.name)
    require_dns1123("ray_monitoring.namespace", props.namespace)
    if not isinstance(props.model_id, str) or not _MODEL_ID.match(props.model_id):
        raise _fail(
            "model_id",
            props.model_id,
            "must be 1-253 characters of letters, digits and ._/:@+- starting with a letter or digit",
        )
    if not isinstance(props.application, str) or not _APPLICATION.match(props.application):
        raise _fail("application", props.application, "must be a Serve application name (letters, digits, ._-)")
    for prop in ("ttft_p99_seconds", "itl_p99_seconds"):
        value = getattr(props, prop)
        if not _positive_number(value) or value > _MAX_SLO_SECONDS:
            raise _fail(prop, value, f"must be a positive number of seconds, at most {_MAX_SLO_SECONDS:g}")
    if not _positive_number(props.cost_per_hour_per_replica):
        raise _fail("cost_per_hour_per_replica", props.cost_per_hour_per_replica, "must be a positive USD amount")
    threshold = props.queue_waiting_threshold
    if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1:
        raise _fail("queue_waiting_threshold", threshold, "must be a positive whole number of requests")
    if not _positive_number(props.kv_cache_usage_threshold) or props.kv_cache_usage_threshold >= 1:
        raise _fail("kv_cache_usage_threshold", props.kv_cache_usage_threshold, "must be between 0 and 1 (exclusive)")
    if (
        not isinstance(props.scrape_interval, str)
        or not props.scrape_interval
        or not _DURATION.match(props.scrape_interval)
    ):
        raise _fail("scrape_interval", props.scrape_interval, "must be a Prometheus duration such as 15s or 1m")
    if props.dcgm:
        if props.dcgm_namespace is not None:
            require_dns1123("ray_monitoring.dcgm_namespace", props.dcgm_namespace)
        if not props.dcgm_service_labels:
            raise _fail("dcgm_service_labels", dict(props.dcgm_service_labels), "must select the DCGM exporter Service")


def _number(value: float) -> str:
    return format(value, ".12g")


class _Selectors:
    """The label selectors every expression uses, in one place."""

    def __init__(self, props: RayMonitoringProps) -> None:
        # vLLM engine series: the same selector as the vLLM chart's (model_name is the served model name).
        self.vllm = selector({"namespace": props.namespace, "model_name": props.model_id})
        # Scrape targets and the proxies' node-level gauge.
        self.job = selector({"namespace": props.namespace, "job": props.name})
        # Proxy request metrics of the application (drops KubeRay's /-/healthz probes, which have no application).
        self.application = selector({"namespace": props.namespace, "job": props.name, "application": props.application})
        # Router and replica metrics of the model's deployment.
        self.deployment = selector(
            {
                "namespace": props.namespace,
                "job": props.name,
                "application": props.application,
                "deployment": props.deployment,
            }
        )


def alert_rules(props: RayMonitoringProps) -> list[dict[str, Any]]:
    """The alerting rules (the vLLM chart's, in Ray's names), each with severity, summary, description, runbook."""
    sel = _Selectors(props)
    by = "sum by (namespace, model_name)"
    by_le = "sum by (le, namespace, model_name)"
    model = props.model_id
    ttft = _number(props.ttft_p99_seconds)
    itl = _number(props.itl_p99_seconds)
    kv = _number(props.kv_cache_usage_threshold)
    waiting = props.queue_waiting_threshold

    def series(vllm_name: str) -> str:
        return f"{ray_exported(vllm_name)}{sel.vllm}"

    def rule(
        alert: str, expr: str, duration: str, severity: str, summary: str, description: str, runbook: str
    ) -> dict[str, Any]:
        return {
            "alert": alert,
            "expr": expr,
            "for": duration,
            "labels": {"severity": severity},
            "annotations": {"summary": summary, "description": description, "runbook": runbook},
        }

    return [
        rule(
            "RayVllmKvCacheNearlyFull",
            f"max by (namespace, pod, model_name) ({series('vllm:kv_cache_usage_perc')}) > {kv}",
            "5m",
            "warning",
            f"vLLM KV cache above {round(props.kv_cache_usage_threshold * 100)}% for 5 minutes (Ray Serve)",
            "KV cache of the replica on {{ $labels.pod }} (" + model + ") is at {{ $value | humanizePercentage }}; "
            "new requests queue and running ones get preempted.",
            "Check that Serve is adding replicas (RayService status, autoscaling_config max_replicas, pending worker "
            "pods, the node pool's GPU limit); at the maximum, raise max_replicas or lower max_num_seqs / "
            "max_model_len in the plan.",
        ),
        rule(
            "RayVllmWaitingQueueGrowing",
            f"{by} ({series('vllm:num_requests_waiting')}) > {waiting}"
            f" and {by} (deriv({series('vllm:num_requests_waiting')}[10m])) > 0",
            "10m",
            "warning",
            f"vLLM waiting queue above {waiting} requests and still growing (Ray Serve)",
            "{{ $value }} requests wait for " + model + " in {{ $labels.namespace }} and the queue has grown for 10 "
            "minutes: demand exceeds what the running replicas serve.",
            "Look for pending Ray worker pods (Karpenter NodeClaims, Spot capacity, the node pool limit) and for "
            "Serve at max_replicas; scale out or shed load.",
        ),
        rule(
            "RayVllmTimeToFirstTokenAboveSlo",
            "histogram_quantile(0.99, "
            f"{by_le} (rate({series('vllm:time_to_first_token_seconds_bucket')}[5m]))) > {ttft}",
            "10m",
            "critical",
            f"vLLM TTFT p99 above the {ttft} s SLO (Ray Serve)",
            "p99 time to first token of " + model + " is {{ $value | humanizeDuration }} (SLO " + ttft + " s).",
            "Usually queueing: check the waiting queue, Serve router queue and KV-cache panels and scale out; if the "
            "queues are empty, long prompts dominate (lower max_num_batched_tokens to interleave prefill with "
            "decode).",
        ),
        rule(
            "RayVllmInterTokenLatencyAboveSlo",
            "histogram_quantile(0.99, "
            f"{by_le} (rate({series('vllm:inter_token_latency_seconds_bucket')}[5m]))) > {itl}",
            "10m",
            "critical",
            f"vLLM inter-token latency p99 above the {itl} s SLO (Ray Serve)",
            "p99 inter-token latency of " + model + " is {{ $value | humanizeDuration }} (SLO " + itl + " s).",
            "Batches are too large for the GPU: scale out, or lower max_num_seqs; large prefills stalling decode show "
            "as ITL spikes (lower max_num_batched_tokens).",
        ),
        rule(
            "RayVllmPreemptionsRising",
            f"{by} (rate({series('vllm:num_preemptions_total')}[5m])) > 0",
            "15m",
            "warning",
            "vLLM keeps preempting requests (Ray Serve)",
            model + " has preempted {{ $value | humanize }} requests/s for 15 minutes: the KV cache is too small for "
            "the running batch, and preempted work is recomputed.",
            "Scale out, lower max_num_seqs, or give the KV cache more room (gpu_memory_utilization, an fp8 KV cache, a "
            "larger GPU) through the capacity plan.",
        ),
        rule(
            "RayServeTargetDown",
            f"up{sel.job} == 0",
            "5m",
            "critical",
            f"Prometheus cannot scrape a Ray pod of {props.name}",
            "{{ $labels.pod }} ({{ $labels.ray_io_node_type }}, {{ $labels.instance }}) has not answered Ray's "
            "metrics endpoint for 5 minutes.",
            f"kubectl -n {props.namespace} describe pod {{{{ $labels.pod }}}}: look for OOMKilled or a failing "
            "readiness probe; on the head, `ray status` and the dashboard (port 8265) show the cluster's state.",
        ),
    ]


def serve_panels(props: RayMonitoringProps) -> tuple[ExtraPanel, ...]:
    """Ray Serve's own graphs: replicas, the router queue, proxy traffic, latency and errors."""
    sel = _Selectors(props)
    latency = "ray_serve_http_request_latency_ms_bucket" + sel.application

    def quantile(q: float) -> tuple[str, str]:
        return (
            f"histogram_quantile({_number(q)}, sum by (le) (rate({latency}[{_RATE}])))",
            f"p{round(q * 100)}",
        )

    return (
        ExtraPanel(
            "Serve replicas",
            "Healthy Serve replicas per deployment of the application (the model's LLMServer and the OpenAI "
            "ingress), as the Serve controller reports them.",
            "none",
            (
                (
                    f"sum by (deployment) (ray_serve_deployment_replica_healthy{sel.application})",
                    "{{deployment}}",
                ),
            ),
        ),
        ExtraPanel(
            "Serve router queue",
            "Requests the ingress holds for the model's deployment because every replica is at max_ongoing_requests. "
            "Near zero is normal: vLLM's own waiting queue (Queue depth) is where excess load waits.",
            "none",
            ((f"sum(ray_serve_deployment_queued_queries{sel.deployment})", "queued for a replica"),),
        ),
        ExtraPanel(
            "HTTP requests in flight (Serve proxies)",
            "Requests the Serve HTTP proxies hold, summed over the Ray pods.",
            "none",
            ((f"sum(ray_serve_num_ongoing_http_requests{sel.job})", "in flight"),),
        ),
        ExtraPanel(
            "HTTP latency (Serve proxy)",
            "End-to-end request latency measured at the Serve HTTP proxy (whole responses, streamed ones included).",
            "ms",
            tuple(quantile(q) for q in (0.5, 0.9, 0.99)),
        ),
        ExtraPanel(
            "HTTP errors",
            "Non-2xx responses per second from the Serve HTTP proxies, by status code.",
            "reqps",
            (
                (
                    f"sum by (error_code) (rate(ray_serve_num_http_error_requests_total{sel.application}[{_RATE}]))",
                    "{{error_code}}",
                ),
            ),
        ),
    )


def dashboard_spec(props: RayMonitoringProps) -> DashboardSpec:
    """The shared vLLM dashboard, reading Ray's names, counting Serve replicas, plus Ray Serve's panels."""
    sel = _Selectors(props)
    return DashboardSpec(
        uid=props.dashboard_uid,
        title=f"LLM serving: {props.model_id} ({props.name}, Ray Serve)",
        namespace=props.namespace,
        job=props.name,
        served_model_name=props.model_id,
        ttft_p99_seconds=props.ttft_p99_seconds,
        itl_p99_seconds=props.itl_p99_seconds,
        kv_cache_usage_threshold=props.kv_cache_usage_threshold,
        cost_per_hour_per_replica=props.cost_per_hour_per_replica,
        dcgm=props.dcgm,
        ray_exported_vllm_metrics=True,
        # Ray's own Serve dashboard counts replicas the same way ("Replicas per deployment").
        replicas_expr=f"sum(ray_serve_deployment_replica_healthy{sel.deployment})",
        replicas_description=(
            f"Healthy replicas of the Serve deployment {props.deployment} (one model replica may span several GPU "
            "nodes)."
        ),
        description=(
            f"Ray Serve LLM (vLLM) serving {props.model_id} from RayService {props.name} in namespace "
            f"{props.namespace} (llm-eks). vLLM panels read the engine metrics Ray re-exports (ray_vllm_*)."
        ),
        tags=("llm-eks", "vllm", "ray-serve"),
        extra_panels=serve_panels(props),
    )


class RayMonitoringChart(cdk8s.Chart):
    """PodMonitor, DCGM ServiceMonitor, alerts and the Grafana dashboard of one Ray Serve LLM workload."""

    def __init__(self, scope: Construct, construct_id: str, props: RayMonitoringProps) -> None:
        validate(props)
        super().__init__(scope, construct_id, namespace=props.namespace, disable_resource_name_hashes=True)
        self.props = props
        labels = app_labels(RAY_SERVE_APP, props.name)
        self.alert_rules = alert_rules(props)
        self.dashboard = build_dashboard(dashboard_spec(props))
        problems = [f"{where}: {p}" for where, expr in self.promql() for p in check_promql(expr)]
        if problems:  # a bug here, not bad input: every expression is built from the names in promql.py
            raise AssertionError("stale metric names:\n" + "\n".join(problems))

        plain_object(
            self,
            "RayPodMonitor",
            api_version="monitoring.coreos.com/v1",
            kind="PodMonitor",
            metadata={"name": props.name, "labels": labels},
            body={
                "spec": {
                    # job = the RayService name on every series (see the module docstring).
                    "jobLabel": "app.kubernetes.io/instance",
                    "selector": {"matchLabels": pod_selector(props.name)},
                    "namespaceSelector": {"matchNames": [props.namespace]},
                    "podTargetLabels": list(POD_TARGET_LABELS),
                    "podMetricsEndpoints": [
                        {"port": METRICS_PORT_NAME, "path": "/metrics", "interval": props.scrape_interval}
                    ],
                }
            },
        )
        if props.dcgm:
            namespaces = {"matchNames": [props.dcgm_namespace]} if props.dcgm_namespace else {"any": True}
            plain_object(
                self,
                "DcgmServiceMonitor",
                api_version="monitoring.coreos.com/v1",
                kind="ServiceMonitor",
                metadata={
                    "name": "dcgm-exporter",
                    "labels": {"app.kubernetes.io/part-of": labels["app.kubernetes.io/part-of"]},
                },
                body={
                    "spec": {
                        "selector": {"matchLabels": dict(props.dcgm_service_labels)},
                        "namespaceSelector": namespaces,
                        "endpoints": [
                            {
                                "port": "metrics",
                                "path": "/metrics",
                                "interval": props.scrape_interval,
                                # Keep the exporter's pod/namespace labels (the Ray worker pod that holds the GPU)
                                # instead of renaming them exported_*; the GPU panels filter on the namespace.
                                "honorLabels": True,
                            }
                        ],
                    }
                },
            )
        plain_object(
            self,
            "Alerts",
            api_version="monitoring.coreos.com/v1",
            kind="PrometheusRule",
            metadata={"name": f"{props.name}-alerts", "labels": labels},
            body={"spec": {"groups": [{"name": f"{props.name}.alerts", "rules": self.alert_rules}]}},
        )
        plain_object(
            self,
            "Dashboard",
            api_version="v1",
            kind="ConfigMap",
            metadata={"name": f"{props.name}-dashboard", "labels": {**labels, "grafana_dashboard": "1"}},
            body={"data": {f"{props.name}.json": json.dumps(self.dashboard, indent=2, sort_keys=True)}},
        )

    def promql(self) -> list[tuple[str, str]]:
        """(where, expr) for every PromQL expression this chart emits: alerts, then dashboard panels."""
        return [(f"alert {r['alert']}", r["expr"]) for r in self.alert_rules] + [
            (f"panel {title!r}", expr) for title, expr in panel_queries(self.dashboard)
        ]
