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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from constructs import Construct

from llm_eks.manifests.dashboard import UID_MAX_LENGTH, DashboardSpec, build_dashboard
from llm_eks.manifests.labels import VLLM_APP, app_labels, plain_object, selector_labels
from llm_eks.manifests.monitoring_common import (
    BY_MODEL,
    BY_MODEL_LE,
    WorkloadMonitoringChart,
    alert_rule,
    default_dcgm_service_labels,
    promql_number,
    validate_common,
    validate_names,
)
from llm_eks.manifests.promql import selector


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
    dcgm_service_labels: Mapping[str, str] = field(default_factory=default_dcgm_service_labels)

    @property
    def dashboard_uid(self) -> str:
        """Stable across synths (Grafana keys bookmarks and links on it); Grafana allows 40 characters."""
        return f"llm-eks-{self.name}"[:UID_MAX_LENGTH]


def validate(props: MonitoringProps) -> None:
    """Raise ConfigError (one line naming the field) on the first bad prop."""
    validate_names("monitoring", props, "served_model_name")
    validate_common("monitoring", props)


def alert_rules(props: MonitoringProps) -> list[dict[str, Any]]:
    """The alerting rules, each with severity, summary, description and a runbook hint."""
    vllm = selector({"namespace": props.namespace, "model_name": props.served_model_name})
    model = props.served_model_name
    ttft = promql_number(props.ttft_p99_seconds)
    itl = promql_number(props.itl_p99_seconds)
    kv = promql_number(props.kv_cache_usage_threshold)
    waiting = props.queue_waiting_threshold
    return [
        alert_rule(
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
        alert_rule(
            "VllmWaitingQueueGrowing",
            f"{BY_MODEL} (vllm:num_requests_waiting{vllm}) > {waiting}"
            f" and {BY_MODEL} (deriv(vllm:num_requests_waiting{vllm}[10m])) > 0",
            "10m",
            "warning",
            f"vLLM waiting queue above {waiting} requests and still growing",
            "{{ $value }} requests wait for " + model + " in {{ $labels.namespace }} and the queue has grown for 10 "
            "minutes: demand exceeds what the running replicas serve.",
            "Look for pending GPU pods (Karpenter NodeClaims, Spot capacity, the node pool limit) and for the "
            "ScaledObject at max replicas; scale out or shed load.",
        ),
        alert_rule(
            "VllmTimeToFirstTokenAboveSlo",
            "histogram_quantile(0.99, "
            f"{BY_MODEL_LE} (rate(vllm:time_to_first_token_seconds_bucket{vllm}[5m]))) > {ttft}",
            "10m",
            "critical",
            f"vLLM TTFT p99 above the {ttft} s SLO",
            "p99 time to first token of " + model + " is {{ $value | humanizeDuration }} (SLO " + ttft + " s).",
            "Usually queueing: check the waiting queue and KV-cache panels and scale out; if the queue is empty, long "
            "prompts dominate (lower max-num-batched-tokens to interleave prefill with decode).",
        ),
        alert_rule(
            "VllmInterTokenLatencyAboveSlo",
            "histogram_quantile(0.99, "
            f"{BY_MODEL_LE} (rate(vllm:inter_token_latency_seconds_bucket{vllm}[5m]))) > {itl}",
            "10m",
            "critical",
            f"vLLM inter-token latency p99 above the {itl} s SLO",
            "p99 inter-token latency of " + model + " is {{ $value | humanizeDuration }} (SLO " + itl + " s).",
            "Batches are too large for the GPU: scale out, or lower max-num-seqs; large prefills stalling decode "
            "show as ITL spikes (lower max-num-batched-tokens).",
        ),
        alert_rule(
            "VllmPreemptionsRising",
            f"{BY_MODEL} (rate(vllm:num_preemptions_total{vllm}[5m])) > 0",
            "15m",
            "warning",
            "vLLM keeps preempting requests",
            model + " has preempted {{ $value | humanize }} requests/s for 15 minutes: the KV cache is too small "
            "for the running batch, and preempted work is recomputed.",
            "Scale out, lower max-num-seqs, or give the KV cache more room (gpu-memory-utilization, an fp8 KV cache, "
            "a larger GPU) through the capacity plan.",
        ),
        alert_rule(
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


class MonitoringChart(WorkloadMonitoringChart):
    """ServiceMonitors, alerts and the Grafana dashboard of one vLLM workload."""

    def __init__(self, scope: Construct, construct_id: str, props: MonitoringProps) -> None:
        validate(props)
        dashboard = build_dashboard(
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
        super().__init__(scope, construct_id, props.namespace, alert_rules(props), dashboard, "vLLM metric names")
        self.props = props
        labels = app_labels(VLLM_APP, props.name)
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
        self.add_dcgm_alerts_and_dashboard(props, labels)
