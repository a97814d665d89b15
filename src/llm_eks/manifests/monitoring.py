"""`MonitoringChart`: what Prometheus and Grafana need to watch one vLLM workload.

- a ServiceMonitor for the vLLM Service (port `http`, `/metrics`) and one for the DCGM exporter;
- a PrometheusRule alerting on KV-cache pressure, a growing queue, TTFT and ITL above the SLO, preemptions and a
  scrape target down;
- the Grafana dashboard in a ConfigMap labelled `grafana_dashboard: "1"` (kube-prometheus-stack's sidecar loads
  those from every namespace).

kube-prometheus-stack's Prometheus selects every ServiceMonitor and PrometheusRule in every namespace, so these
objects need no release label. Every PromQL string emitted here passes `promql.check_promql`.
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
from llm_eks.manifests.dashboard import UID_MAX_LENGTH, DashboardSpec, build_dashboard, panel_queries
from llm_eks.manifests.labels import (
    VLLM_APP,
    app_labels,
    plain_object,
    require_dns1035,
    require_dns1123,
    selector_labels,
)
from llm_eks.manifests.promql import check_promql, selector

# Prometheus duration (the pattern the ServiceMonitor and PrometheusRule CRDs enforce, without the bare "0").
_DURATION = re.compile(r"^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$")
# Served model names are Hugging Face ids or plain names; no quotes or braces, so they read cleanly in PromQL.
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,252}$")
# A p99 above ten minutes is a misconfiguration, not an SLO.
_MAX_SLO_SECONDS = 600.0


@dataclass(frozen=True)
class MonitoringProps:
    """One vLLM workload's monitoring. The lead fills the first six from the config and the capacity plan."""

    # The vLLM Deployment and Service name (e.g. vllm-llama-3-1-8b); a ServiceMonitor's job label is this name.
    name: str
    # vLLM's --served-model-name: the `model_name` label on every vLLM series.
    served_model_name: str
    # Environment SLOs (config slo.ttft_p99_ms / itl_p99_ms, in seconds).
    ttft_p99_seconds: float
    itl_p99_seconds: float
    # USD per hour for one serving replica, from the capacity plan (baked into the cost panel).
    cost_per_hour_per_replica: float
    # Total waiting requests above which a still-growing queue alerts; waiting_per_replica x max replicas means the
    # autoscaler has run out of room.
    queue_waiting_threshold: int
    # The workload namespace (cross-chart contract).
    namespace: str = "inference"
    # 15 s resolves a queue building up within one KEDA polling cycle without loading Prometheus.
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


def _fail(prop: str, value: object, allowed: str) -> ConfigError:
    return ConfigError(f"monitoring.{prop}: {value!r} is not allowed; {allowed}")


def _positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def validate(props: MonitoringProps) -> None:
    """Raise ConfigError (one line naming the field) on the first bad prop."""
    require_dns1035("monitoring.name", props.name)
    require_dns1123("monitoring.namespace", props.namespace)
    if not isinstance(props.served_model_name, str) or not _MODEL_NAME.match(props.served_model_name):
        raise _fail(
            "served_model_name",
            props.served_model_name,
            "must be 1-253 characters of letters, digits and ._/:@+- starting with a letter or digit",
        )
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
            require_dns1123("monitoring.dcgm_namespace", props.dcgm_namespace)
        if not props.dcgm_service_labels:
            raise _fail("dcgm_service_labels", dict(props.dcgm_service_labels), "must select the DCGM exporter Service")


def _number(value: float) -> str:
    return format(value, ".12g")


def alert_rules(props: MonitoringProps) -> list[dict[str, Any]]:
    """The alerting rules, each with severity, summary, description and a runbook hint."""
    vllm = selector({"namespace": props.namespace, "model_name": props.served_model_name})
    by = "sum by (namespace, model_name)"
    by_le = "sum by (le, namespace, model_name)"
    model = props.served_model_name
    ttft = _number(props.ttft_p99_seconds)
    itl = _number(props.itl_p99_seconds)
    kv = _number(props.kv_cache_usage_threshold)
    waiting = props.queue_waiting_threshold

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
            "VllmKvCacheNearlyFull",
            f"max by (namespace, pod, model_name) (vllm:kv_cache_usage_perc{vllm}) > {kv}",
            "5m",
            "warning",
            f"vLLM KV cache above {round(props.kv_cache_usage_threshold * 100)}% for 5 minutes",
            "KV cache of {{ $labels.pod }} (" + model + ") is at {{ $value | humanizePercentage }}; "
            "new requests queue and running ones get preempted.",
            "Check that the autoscaler is adding replicas (KEDA ScaledObject events, max replicas, the node pool's "
            "GPU limit); if it is at its maximum, raise max replicas or lower max-num-seqs / max-model-len.",
        ),
        rule(
            "VllmWaitingQueueGrowing",
            f"{by} (vllm:num_requests_waiting{vllm}) > {waiting}"
            f" and {by} (deriv(vllm:num_requests_waiting{vllm}[10m])) > 0",
            "10m",
            "warning",
            f"vLLM waiting queue above {waiting} requests and still growing",
            "{{ $value }} requests wait for " + model + " in {{ $labels.namespace }} and the queue has grown for 10 "
            "minutes: demand exceeds what the running replicas serve.",
            "Look for pending GPU pods (Karpenter NodeClaims, Spot capacity, the node pool limit) and for the "
            "ScaledObject at max replicas; scale out or shed load.",
        ),
        rule(
            "VllmTimeToFirstTokenAboveSlo",
            f"histogram_quantile(0.99, {by_le} (rate(vllm:time_to_first_token_seconds_bucket{vllm}[5m]))) > {ttft}",
            "10m",
            "critical",
            f"vLLM TTFT p99 above the {ttft} s SLO",
            "p99 time to first token of " + model + " is {{ $value | humanizeDuration }} (SLO " + ttft + " s).",
            "Usually queueing: check the waiting queue and KV-cache panels and scale out; if the queue is empty, long "
            "prompts dominate (lower max-num-batched-tokens to interleave prefill with decode).",
        ),
        rule(
            "VllmInterTokenLatencyAboveSlo",
            f"histogram_quantile(0.99, {by_le} (rate(vllm:inter_token_latency_seconds_bucket{vllm}[5m]))) > {itl}",
            "10m",
            "critical",
            f"vLLM inter-token latency p99 above the {itl} s SLO",
            "p99 inter-token latency of " + model + " is {{ $value | humanizeDuration }} (SLO " + itl + " s).",
            "Batches are too large for the GPU: scale out, or lower max-num-seqs; large prefills stalling decode "
            "show as ITL spikes (lower max-num-batched-tokens).",
        ),
        rule(
            "VllmPreemptionsRising",
            f"{by} (rate(vllm:num_preemptions_total{vllm}[5m])) > 0",
            "15m",
            "warning",
            "vLLM keeps preempting requests",
            model + " has preempted {{ $value | humanize }} requests/s for 15 minutes: the KV cache is too small "
            "for the running batch, and preempted work is recomputed.",
            "Scale out, lower max-num-seqs, or give the KV cache more room (gpu-memory-utilization, an fp8 KV cache, "
            "a larger GPU) through the capacity plan.",
        ),
        rule(
            "VllmTargetDown",
            f"up{selector({'job': props.name, 'namespace': props.namespace})} == 0",
            "5m",
            "critical",
            f"Prometheus cannot scrape {props.name}",
            "{{ $labels.pod }} ({{ $labels.instance }}) has not answered /metrics for 5 minutes.",
            f"kubectl -n {props.namespace} describe pod {{{{ $labels.pod }}}}: look for OOMKilled, CrashLoopBackOff "
            "or a failing readiness probe; kubectl logs shows vLLM's own error.",
        ),
    ]


class MonitoringChart(cdk8s.Chart):
    """ServiceMonitors, alerts and the Grafana dashboard of one vLLM workload."""

    def __init__(self, scope: Construct, construct_id: str, props: MonitoringProps) -> None:
        validate(props)
        super().__init__(scope, construct_id, namespace=props.namespace, disable_resource_name_hashes=True)
        self.props = props
        labels = app_labels(VLLM_APP, props.name)
        self.alert_rules = alert_rules(props)
        self.dashboard = build_dashboard(
            DashboardSpec(
                uid=props.dashboard_uid,
                title=f"LLM serving: {props.served_model_name} ({props.name})",
                namespace=props.namespace,
                job=props.name,
                served_model_name=props.served_model_name,
                ttft_p99_seconds=props.ttft_p99_seconds,
                itl_p99_seconds=props.itl_p99_seconds,
                kv_cache_usage_threshold=props.kv_cache_usage_threshold,
                cost_per_hour_per_replica=props.cost_per_hour_per_replica,
                dcgm=props.dcgm,
            )
        )
        problems = [f"{where}: {p}" for where, expr in self.promql() for p in check_promql(expr)]
        if problems:  # a bug here, not bad input: every expression is built from the names in promql.py
            raise AssertionError("stale vLLM metric names:\n" + "\n".join(problems))

        plain_object(
            self,
            "VllmServiceMonitor",
            api_version="monitoring.coreos.com/v1",
            kind="ServiceMonitor",
            metadata={"name": props.name, "labels": labels},
            body={
                "spec": {
                    "selector": {"matchLabels": selector_labels(VLLM_APP, props.name)},
                    "namespaceSelector": {"matchNames": [props.namespace]},
                    "endpoints": [{"port": "http", "path": "/metrics", "interval": props.scrape_interval}],
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
                                # Keep the exporter's pod/namespace labels (the pod that holds the GPU) instead of
                                # renaming them exported_*; the GPU panels filter on the workload namespace.
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
