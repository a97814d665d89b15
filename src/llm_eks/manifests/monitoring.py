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

from llm_eks.error_codes import E410
from llm_eks.errors import fail
from llm_eks.manifests.dashboard import DashboardSpec, ExtraPanel, build_dashboard
from llm_eks.manifests.labels import VLLM_APP, app_labels, plain_object, require_dns1123, selector_labels
from llm_eks.manifests.monitoring_drift import DriftInputs, drift_rules, validate_planned
from llm_eks.manifests.monitoring_model import (
    EngineAlerts,
    WorkloadMonitoringChart,
    alert_rule,
    dashboard_uid,
    engine_alert_rules,
    gpu_pods_pending,
    validate_monitoring,
)
from llm_eks.manifests.monitoring_targets import MonitoringTargets, cold_start_minutes
from llm_eks.manifests.promql import MetricSource, ksm_workload, selector


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
    # What holds the replicas, as kube-state-metrics names it: "deployment", or "statefulset" for the leader
    # StatefulSet of a LeaderWorkerSet (llm_eks.manifests.autoscaling.replica_kind) ...
    replica_kind: str = "deployment"
    # ... and their names: the Deployment and its on-demand floor's (autoscaling.replica_names); () is (name,).
    replica_names: tuple[str, ...] = ()
    # The ScaledObject that scales it (KEDA's scaler errors alert), None without one.
    scaled_object: str | None = None
    # It may sit at 0 replicas on its schedule: waking it takes the cold start, so "no ready replica" waits as long.
    scales_to_zero: bool = False
    # A disaggregated workload (VllmProps.disaggregation): the prefill pool's Service, so its scrape job (`name` is
    # the decode pool's); the dashboard, the alerts and the drift rules then select each pool by job. None: one pool.
    prefill_job: str | None = None
    # The plan's prefill time per request on the prefill pool, seconds (its P/D decision's prefill phase).
    planned_prefill_seconds: float | None = None

    @property
    def pools(self) -> tuple[str, str] | None:
        """(decode, prefill) scrape jobs of a disaggregated workload; None for one pool."""
        return None if self.prefill_job is None else (self.name, self.prefill_job)

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
    stall_runbook="The liveness probe (token progress) restarts the vLLM container about three minutes into a stall; "
    "until then /health, and so readiness, still passes and the pod keeps receiving requests. If the same pod stalls "
    "again after restarts its GPU is bad: kubectl delete nodeclaim on its node's NodeClaim (Karpenter drains and "
    "replaces the node).",
)


def validate(props: MonitoringProps) -> None:
    """Raise ConfigError (one line naming the field) on the first bad prop."""
    validate_monitoring(
        "monitoring", props.name, props.namespace, "served_model_name", props.served_model_name, props.targets
    )
    if props.replica_kind not in ("deployment", "statefulset"):
        raise fail(E410, "monitoring.replica_kind", props.replica_kind, "must be 'deployment' or 'statefulset'")
    for i, owner in enumerate(props.replica_names):
        require_dns1123(f"monitoring.replica_names[{i}]", owner)
    if props.replica_names and props.replica_names[0] != props.name:
        raise fail(
            E410, "monitoring.replica_names", list(props.replica_names), f"must start with the workload {props.name!r}"
        )
    if props.scaled_object is not None:
        require_dns1123("monitoring.scaled_object", props.scaled_object)
    validate_planned(
        "monitoring",
        props.planned_kv_cache_tokens,
        props.planned_itl_seconds,
        props.planned_ttft_seconds,
        props.planned_prefill_seconds,
    )
    if props.prefill_job is not None:
        require_dns1123("monitoring.prefill_job", props.prefill_job)
        if props.prefill_job == props.name:
            raise fail(E410, "monitoring.prefill_job", props.prefill_job, "must differ from the decode pool's name")


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
        prefill_job=props.prefill_job,
        planned_prefill_seconds=props.planned_prefill_seconds,
    )


def _replicas(props: MonitoringProps, metric: str) -> str:
    """kube-state-metrics' `metric` of the workload's replica objects."""
    kind = props.replica_kind
    if metric == "spec_replicas" and kind == "statefulset":
        metric = "replicas"  # kube_statefulset_replicas
    return ksm_workload(metric, kind, props.namespace, props.replica_names or (props.name,))


def _pod_pattern(props: MonitoringProps) -> str:
    """The names of the workload's serving pods (RE2, anchored): `<deployment>-<pod-template-hash>-<suffix>` of each
    Deployment, or a LeaderWorkerSet's `<name>-<group>` leaders and `<name>-<group>-<worker>` workers
    (kubernetes-sigs/lws@v0.10.0 leader and worker StatefulSets)."""
    names = props.replica_names or (props.name,)
    # A disaggregated workload's prefill Deployment (or LeaderWorkerSet) is named after its pool's scrape job.
    names = (*names, props.prefill_job) if props.prefill_job is not None else names
    owners = names[0] if len(names) == 1 else f"({'|'.join(names)})"
    if props.replica_kind == "statefulset":
        return f"{owners}-[0-9]+(-[0-9]+)?"
    return f"{owners}-[a-z0-9]{{1,10}}-[a-z0-9]{{5}}"


def _scrape_jobs(props: MonitoringProps) -> str:
    """The workload's scrape targets: its Service's job, or both pools' of a disaggregated workload."""
    if props.pools is None:
        return selector({"job": props.name, "namespace": props.namespace})
    return selector({"namespace": props.namespace}, {"job": "|".join(props.pools)})


def health_rules(props: MonitoringProps) -> list[dict[str, Any]]:
    """Alerts on the workload as Kubernetes and KEDA see it: no ready replica, vLLM's series absent while replicas are
    ready, KEDA's scaler failing while replicas are ready, a GPU pod pending past the planned cold start. The absent
    and scaler alerts hold only while a replica is ready, so a model asleep on its schedule pages nobody."""
    ns, name, targets = props.namespace, props.name, props.targets
    ready = _replicas(props, "status_replicas_ready")
    cold = round(targets.cold_start_seconds)
    waiting = f"vllm:num_requests_waiting{selector({'namespace': ns, 'model_name': props.served_model_name})}"
    what = f"{props.replica_kind} {'/'.join(props.replica_names or (name,))}"
    rules = [
        alert_rule(
            "VllmNoReadyReplica",
            f"sum by (namespace) ({ready}) == 0 and on (namespace) "
            f"sum by (namespace) ({_replicas(props, 'spec_replicas')}) > 0 and on (namespace) "
            f"(time() - min by (namespace) ({_replicas(props, 'created')})) > {cold}",
            f"{cold_start_minutes(targets)}m" if props.scales_to_zero else "1m",
            "critical",
            f"{name} has no ready replica: {props.served_model_name} is down",
            f"No replica of {what} in {ns} is ready while some are wanted, and the workload is older than its "
            f"planned cold start ({cold} s): every request to {props.served_model_name} fails.",
            f"kubectl -n {ns} get pods -l app.kubernetes.io/instance={name} -o wide: Pending means capacity (see "
            "GpuPodsPendingTooLong), CrashLoopBackOff or Init means a start that fails (kubectl logs, previous "
            "container). A Spot reclaim or a node repair recovers on its own within the planned cold start.",
        ),
        alert_rule(
            "VllmSeriesAbsent",
            f"sum by (namespace) ({ready}) > 0 unless on (namespace) count by (namespace) ({waiting})",
            "3m",
            "critical",
            f"{name} serves but Prometheus has none of its vLLM series",
            f"{what} in {ns} has ready replicas and Prometheus has no vllm:num_requests_waiting for "
            f"{props.served_model_name}: autoscaling holds its count (KEDA's fallback) and the SLO alerts are blind.",
            f"Check the ServiceMonitor {name} (Prometheus targets page), the NetworkPolicy admitting Prometheus to "
            "port 8000, and vLLM's metric names (a vLLM upgrade may rename them; llm-eks check reports stale names).",
        ),
    ]
    if props.scaled_object is not None:
        scaled, which = {"scaledObject": props.scaled_object}, {}
        if props.prefill_job is not None:
            # The prefill pool has a ScaledObject of its own, named as its Deployment.
            scaled, which = {}, {"scaledObject": f"{props.scaled_object}|{props.prefill_job}"}
        errors = "keda_scaler_detail_errors_total" + selector({"exported_namespace": ns, **scaled}, which)
        described = props.scaled_object if props.prefill_job is None else "{{ $labels.scaledObject }}"
        rules.append(
            alert_rule(
                "KedaScalerErrors",
                # KEDA's own `namespace` label is exported_namespace: the chart's PodMonitor keeps the target's.
                f"sum by (scaledObject) (rate({errors}[5m])) > 0 and on () sum({ready}) > 0",
                "5m",
                "warning",
                f"KEDA cannot read the metrics that scale {name}",
                f"The ScaledObject {ns}/{{{{ $labels.scaledObject }}}} fails {{{{ $value | humanize }}}} reads a "
                "second while replicas are ready: KEDA holds the current count (fallback) and cannot scale out.",
                f"kubectl -n {ns} describe scaledobject {described} (KEDAScalerFailed events say why); "
                "kubectl -n monitoring get pods -l app.kubernetes.io/name=thanos-query: the query endpoint KEDA reads.",
            )
        )
    rules.append(gpu_pods_pending(ns, _pod_pattern(props), targets, name))
    return rules


def alert_rules(props: MonitoringProps) -> list[dict[str, Any]]:
    """The alerting rules, each with severity, summary, description and a runbook hint."""
    return [
        *engine_alert_rules(VLLM_ALERTS, props.namespace, props.served_model_name, props.targets, props.pools),
        *health_rules(props),
        alert_rule(
            "VllmTargetDown",
            f"up{_scrape_jobs(props)} == 0",
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
                prefill_job=props.prefill_job,
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
