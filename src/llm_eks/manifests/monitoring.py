"""`MonitoringChart`: what Prometheus and Grafana need to watch one vLLM workload.

- a ServiceMonitor for the vLLM Service (port `http`, `/metrics`) and one for the DCGM exporter;
- a PrometheusRule alerting on KV-cache pressure, a growing queue, TTFT and ITL above the SLO, preemptions and a
  scrape target down, and a second group recording the plan's figures and the observed latency quantiles, alerting
  when production drifts from the plan (llm_eks.manifests.monitoring_drift);
- the Grafana dashboard in a ConfigMap labelled `grafana_dashboard: "1"` (kube-prometheus-stack's sidecar loads
  those from every namespace).

kube-prometheus-stack's Prometheus selects every ServiceMonitor and PrometheusRule in every namespace, so these
objects need no release label. Every PromQL string emitted here passes `promql.check_promql`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from constructs import Construct

from llm_eks.manifests.dashboard import DashboardSpec, ExtraPanel, build_dashboard
from llm_eks.manifests.labels import VLLM_APP, app_labels, plain_object, selector_labels
from llm_eks.manifests.monitoring_drift import DriftInputs, drift_rules, validate_planned
from llm_eks.manifests.monitoring_model import (
    EngineAlerts,
    WorkloadMonitoringChart,
    alert_rule,
    dashboard_uid,
    engine_alert_rules,
    validate_monitoring,
)
from llm_eks.manifests.monitoring_targets import MonitoringTargets
from llm_eks.manifests.promql import MetricSource, selector


@dataclass(frozen=True)
class MonitoringProps:
    """One vLLM workload's monitoring. The lead fills the first three from the config and the capacity plan."""

    # The vLLM Deployment and Service name (e.g. vllm-llama-3-1-8b); a ServiceMonitor's job label is this name.
    name: str
    # vLLM's --served-model-name: the `model_name` label on every vLLM series.
    served_model_name: str
    # SLOs, price, alert thresholds and scraping (shared with Ray Serve monitoring).
    targets: MonitoringTargets
    # The workload namespace (cross-chart contract).
    namespace: str = "inference"
    # Graphs after the standard ones: the gateway's view of this workload, when it is behind one.
    extra_panels: tuple[ExtraPanel, ...] = ()
    # The capacity plan's figures the drift rules hold production to (llm_eks.manifests.monitoring_drift); None
    # records no plan figure and drops its alert. KV-cache tokens per replica, as vLLM logs them.
    planned_kv_cache_tokens: int | None = None
    # Median inter-token latency estimate at target_concurrency, seconds (Plan.itl_estimate_ms / 1000).
    planned_itl_seconds: float | None = None
    # Median time-to-first-token estimate at target_concurrency, seconds (Plan.ttft_estimate_ms / 1000).
    planned_ttft_seconds: float | None = None

    @property
    def dashboard_uid(self) -> str:
        """Stable across synths (Grafana keys bookmarks and links on it); Grafana allows 40 characters."""
        return dashboard_uid(self.name)


# vLLM's own names and flags (--max-num-seqs), scaled by KEDA.
VLLM_ALERTS = EngineAlerts(
    prefix="Vllm",
    metrics=MetricSource.VLLM,
    summary_suffix="",
    kv_holder="{{ $labels.pod }}",
    kv_runbook="Check that the autoscaler is adding replicas (KEDA ScaledObject events, max replicas, the node pool's "
    "GPU limit); if it is at its maximum, raise max replicas or lower max-num-seqs / max-model-len.",
    queue_runbook="Look for pending GPU pods (Karpenter NodeClaims, Spot capacity, the node pool limit) and for the "
    "ScaledObject at max replicas; scale out or shed load.",
    ttft_runbook="Usually queueing: check the waiting queue and KV-cache panels and scale out; if the queue is empty, "
    "long prompts dominate (lower max-num-batched-tokens to interleave prefill with decode).",
    itl_runbook="Batches are too large for the GPU: scale out, or lower max-num-seqs; large prefills stalling decode "
    "show as ITL spikes (lower max-num-batched-tokens).",
    preemption_runbook="Scale out, lower max-num-seqs, or give the KV cache more room (gpu-memory-utilization, an fp8 "
    "KV cache, a larger GPU) through the capacity plan.",
)


def validate(props: MonitoringProps) -> None:
    """Raise ConfigError (one line naming the field) on the first bad prop."""
    validate_monitoring(
        "monitoring", props.name, props.namespace, "served_model_name", props.served_model_name, props.targets
    )
    validate_planned("monitoring", props.planned_kv_cache_tokens, props.planned_itl_seconds, props.planned_ttft_seconds)


def drift_inputs(props: MonitoringProps) -> DriftInputs:
    """What the drift rules read: vLLM's series of the served model, scraped under the Service's name."""
    return DriftInputs(
        engine=VLLM_ALERTS,
        namespace=props.namespace,
        model=props.served_model_name,
        job=props.name,
        planned_kv_cache_tokens=props.planned_kv_cache_tokens,
        planned_itl_seconds=props.planned_itl_seconds,
        planned_ttft_seconds=props.planned_ttft_seconds,
    )


def alert_rules(props: MonitoringProps) -> list[dict[str, Any]]:
    """The alerting rules, each with severity, summary, description and a runbook hint."""
    return [
        *engine_alert_rules(VLLM_ALERTS, props.namespace, props.served_model_name, props.targets),
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
                targets=props.targets,
                extra_panels=props.extra_panels,
            )
        )
        super().__init__(
            scope,
            construct_id,
            props.namespace,
            alert_rules(props),
            dashboard,
            "vLLM metric names",
            drift_rules(drift_inputs(props)),
        )
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
                    "endpoints": [{"port": "http", "path": "/metrics", "interval": props.targets.scrape_interval}],
                }
            },
            source=__name__,
        )
        self.add_dcgm_alerts_and_dashboard(props.name, props.targets, labels)
