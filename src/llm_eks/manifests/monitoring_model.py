"""The monitoring model both engines share: one alert builder fed by the engine's series names and wording
(`EngineAlerts`), the name checks, and `WorkloadMonitoringChart`, which emits the objects besides the workload's own
scrape config (the DCGM exporter's ServiceMonitor, the PrometheusRule, the dashboard ConfigMap).

The engine modules (llm_eks.manifests.monitoring for vLLM, llm_eks.manifests.ray_monitoring for Ray Serve LLM) build
on this one and this one knows neither.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cdk8s
import cdk8s_plus_35 as kplus
from constructs import Construct

from llm_eks.manifests import plus
from llm_eks.manifests.dashboard import UID_MAX_LENGTH, panel_queries
from llm_eks.manifests.labels import PART_OF, plain_object, require_dns1035, require_dns1123
from llm_eks.manifests.monitoring_targets import (
    MonitoringTargets,
    cold_start_minutes,
    ksm_resource,
    validate_targets,
)
from llm_eks.manifests.promql import MetricSource, check_promql, infrastructure_problems, promql_number, selector
from llm_eks.manifests.source import sourced_metadata
from llm_eks.validation import require_model_name

# Series of one served model in one namespace (what the alerts aggregate by).
BY_MODEL = "sum by (namespace, model_name)"
BY_MODEL_LE = "sum by (le, namespace, model_name)"


def validate_names(prefix: str, name: str, namespace: str, model_field: str, model: str) -> None:
    """Raise ConfigError on a bad workload name (DNS-1035), namespace (DNS-1123) or served model name."""
    require_dns1035(f"{prefix}.name", name)
    require_dns1123(f"{prefix}.namespace", namespace)
    require_model_name(f"{prefix}.{model_field}", model)


def validate_monitoring(prefix: str, name: str, namespace: str, model_field: str, model: str, targets: Any) -> None:
    """Raise ConfigError (one line naming the field) on the first bad name or target."""
    validate_names(prefix, name, namespace, model_field, model)
    validate_targets(f"{prefix}.targets", targets)


def dashboard_uid(name: str) -> str:
    """Stable across synths (Grafana keys bookmarks and links on it); Grafana allows 40 characters."""
    return f"llm-eks-{name}"[:UID_MAX_LENGTH]


def alert_rule(
    alert: str, expr: str, duration: str, severity: str, summary: str, description: str, runbook: str
) -> dict[str, Any]:
    """One PrometheusRule alerting rule, with severity, summary, description and a runbook hint."""
    return {
        "alert": alert,
        "expr": expr,
        "for": duration,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "description": description, "runbook": runbook},
    }


@dataclass(frozen=True)
class EngineAlerts:
    """How one engine's vLLM metrics and operations read in the shared alerts."""

    # Alert names start with it (VllmKvCacheNearlyFull, RayVllmKvCacheNearlyFull).
    prefix: str
    # Whose series names the expressions read (vLLM's own or Ray's re-export).
    metrics: MetricSource
    # Appended to every summary, so a page says which engine fired.
    summary_suffix: str
    # What holds the KV cache, in the KV alert's description (a Go template over the alert's labels).
    kv_holder: str
    # Runbook hints in the engine's own words: what scales it and how its flags are spelled.
    kv_runbook: str
    queue_runbook: str
    ttft_runbook: str
    itl_runbook: str
    preemption_runbook: str
    # What restarts a stalled engine and what to do when it stalls again.
    stall_runbook: str = ""
    # The labels that tell one engine from another (vLLM's `engine` index within a pod; Ray adds ReplicaId).
    engine_labels: str = "namespace, pod, engine"


def engine_alert_rules(
    engine: EngineAlerts, namespace: str, model: str, targets: MonitoringTargets, pools: tuple[str, str] | None = None
) -> list[dict[str, Any]]:
    """The six vLLM engine alerts (KV cache, growing queue, TTFT and ITL above the SLO, preemptions, a stalled
    engine) on the model's series in the engine's names. `pools`: a disaggregated workload's (decode, prefill) scrape
    jobs, whose series share the model name: ITL is then judged on the decode pool, the queue, preemptions and TTFT
    per pool (`job` label; each pool's TTFT is one leg of the path, so either above the SLO breaches it); the KV and
    stall alerts are per pod already."""
    vllm = selector({"namespace": namespace, "model_name": model})
    by, by_le, decode, on_pool = BY_MODEL, BY_MODEL_LE, vllm, ""
    if pools is not None:
        vllm = selector({"namespace": namespace, "model_name": model}, {"job": "|".join(pools)})
        decode = selector({"namespace": namespace, "job": pools[0], "model_name": model})
        by, by_le, on_pool = f"{BY_MODEL[:-1]}, job)", f"{BY_MODEL_LE[:-1]}, job)", " on {{ $labels.job }}"

    def series(vllm_name: str, pool: str | None = None) -> str:
        return f"{engine.metrics.series(vllm_name)}{pool or vllm}"

    ttft = promql_number(targets.ttft_p99_seconds)
    itl = promql_number(targets.itl_p99_seconds)
    kv = promql_number(targets.kv_cache_usage_threshold)
    waiting = targets.queue_waiting_threshold
    waiting_series = series("vllm:num_requests_waiting")
    suffix = engine.summary_suffix
    return [
        alert_rule(
            f"{engine.prefix}KvCacheNearlyFull",
            f"max by (namespace, pod, model_name) ({series('vllm:kv_cache_usage_perc')}) > {kv}",
            "5m",
            "warning",
            f"vLLM KV cache above {round(targets.kv_cache_usage_threshold * 100)}% for 5 minutes{suffix}",
            f"KV cache of {engine.kv_holder} ({model}) is at {{{{ $value | humanizePercentage }}}}; new requests queue "
            "and running ones get preempted.",
            engine.kv_runbook,
        ),
        alert_rule(
            f"{engine.prefix}WaitingQueueGrowing",
            f"{by} ({waiting_series}) > {waiting} and {by} (deriv({waiting_series}[10m])) > 0",
            "10m",
            "warning",
            f"vLLM waiting queue above {waiting} requests and still growing{suffix}",
            "{{ $value }} requests wait for " + model + on_pool + " in {{ $labels.namespace }} and the queue has "
            "grown for 10 "
            "minutes: demand exceeds what the running replicas serve.",
            engine.queue_runbook,
        ),
        alert_rule(
            f"{engine.prefix}TimeToFirstTokenAboveSlo",
            "histogram_quantile(0.99, "
            f"{by_le} (rate({series('vllm:time_to_first_token_seconds_bucket')}[5m]))) > {ttft}",
            "10m",
            "critical",
            f"vLLM TTFT p99 above the {ttft} s SLO{suffix}",
            "p99 time to first token of "
            + model
            + on_pool
            + " is {{ $value | humanizeDuration }} (SLO "
            + ttft
            + " s).",
            engine.ttft_runbook,
        ),
        alert_rule(
            f"{engine.prefix}InterTokenLatencyAboveSlo",
            "histogram_quantile(0.99, "
            f"{BY_MODEL_LE} (rate({series('vllm:inter_token_latency_seconds_bucket', decode)}[5m]))) > {itl}",
            "10m",
            "critical",
            f"vLLM inter-token latency p99 above the {itl} s SLO{suffix}",
            "p99 inter-token latency of " + model + " is {{ $value | humanizeDuration }} (SLO " + itl + " s).",
            engine.itl_runbook,
        ),
        alert_rule(
            f"{engine.prefix}PreemptionsRising",
            f"{by} (rate({series('vllm:num_preemptions_total')}[5m])) > 0",
            "15m",
            "warning",
            f"vLLM keeps preempting requests{suffix}",
            model + on_pool + " has preempted {{ $value | humanize }} requests/s for 15 minutes: the KV cache is "
            "too small "
            "for the running batch, and preempted work is recomputed.",
            engine.preemption_runbook,
        ),
        engine_stalled(engine, namespace, model),
    ]


# How long an engine may hold running requests without processing a token before it counts as stalled. One
# scheduler step is at most max-num-batched-tokens of prefill (well under a second on these GPUs): two minutes is two
# orders of magnitude above the longest legitimate gap.
STALL_WINDOW = "2m"


def engine_stalled(engine: EngineAlerts, namespace: str, model: str) -> dict[str, Any]:
    """Requests running and no prompt or output token processed for STALL_WINDOW: a hung engine. `/health` only
    reports a dead engine (vLLM's check_health raises only once the engine core is gone), so a wedged GPU kernel
    keeps it at 200 while /metrics, served by the API process, still answers with the gauges frozen. Blind spot: a
    hang on the first step after idle leaves `running` at its last published value, 0, until a later update."""
    vllm = selector({"namespace": namespace, "model_name": model})
    by = engine.engine_labels

    def series(vllm_name: str) -> str:
        return f"{engine.metrics.series(vllm_name)}{vllm}"

    progress = " + ".join(
        f"sum by ({by}) (increase({series(name)}[{STALL_WINDOW}]))"
        for name in ("vllm:generation_tokens_total", "vllm:prompt_tokens_total")
    )
    return alert_rule(
        f"{engine.prefix}EngineStalled",
        f"max by ({by}) ({series('vllm:num_requests_running')}) > 0 and on ({by}) ({progress}) == 0",
        STALL_WINDOW,
        "critical",
        f"vLLM engine stalled: requests running, no token processed{engine.summary_suffix}",
        f"{{{{ $value }}}} requests are running on {engine.kv_holder} ({model}) and it has processed no prompt or "
        f"output token for {minutes_text(STALL_WINDOW)}: the engine is hung (a wedged GPU keeps /health at 200).",
        engine.stall_runbook,
    )


def minutes_text(duration: str) -> str:
    """'2m' -> '2 minutes' (alert texts)."""
    n = int(duration.removesuffix("m"))
    return f"{n} minute" + ("" if n == 1 else "s")


def gpu_pods_pending(namespace: str, pod_pattern: str, targets: MonitoringTargets, what: str) -> dict[str, Any]:
    """A pod of the workload that requests its accelerator and is still Pending after the planned cold start: no
    capacity (Karpenter cannot launch the GPU node: Spot and on-demand short, the pool's limit, a quota), or an init
    container that never ends (the wait for staged weights, a compile-cache restore, a Secrets Manager mount). A pod
    is Pending until every init container has run, so this covers S3 and Secrets Manager outages at start too."""
    pods = {"pod": pod_pattern}
    pending = selector({"namespace": namespace, "phase": "Pending"}, pods)
    gpus = selector({"namespace": namespace, "resource": ksm_resource(targets.gpu_resource)}, pods)
    wait = cold_start_minutes(targets)
    return alert_rule(
        "GpuPodsPendingTooLong",
        f"max by (namespace, pod) (kube_pod_status_phase{pending}) == 1 and on (namespace, pod) "
        f"max by (namespace, pod) (kube_pod_container_resource_requests{gpus}) > 0",
        f"{wait}m",
        "warning",
        f"A GPU pod of {what} has been pending longer than the planned cold start",
        f"{{{{ $labels.pod }}}} requests {targets.gpu_resource} and has been Pending for {minutes_text(f'{wait}m')} "
        f"(the plan's cold start on a new node is {targets.cold_start_seconds:.0f} s).",
        f"kubectl -n {namespace} describe pod {{{{ $labels.pod }}}}: 'FailedScheduling' or no node means capacity "
        "(kubectl get nodeclaims; Karpenter's logs name the shortage, the pool's limit or a quota); 'Init' means an "
        "init container waits (kubectl logs -c wait-for-weights: its last line says which staging Job to look at).",
    )


class WorkloadMonitoringChart(plus.PlusChart):
    """A monitoring chart: alert rules and a dashboard whose PromQL must use current metric names. Its dashboard's
    ConfigMap is a cdk8s-plus ConfigMap (`dashboard_config_map`, set by add_dcgm_alerts_and_dashboard); the rules and
    monitors are Prometheus Operator custom resources, plain objects."""

    dashboard_config_map: kplus.ConfigMap

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        namespace: str,
        alert_rules: list[dict[str, Any]],
        dashboard: dict[str, Any],
        metric_names: str,
        drift_rules: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(scope, construct_id, namespace=namespace)
        self.alert_rules = alert_rules
        # The plan and observed recording rules and the drift alerts (llm_eks.manifests.monitoring_drift), in a
        # group of their own: a group evaluates in order, so its alerts read the series it has just recorded.
        self.drift_rules = drift_rules or []
        self.dashboard = dashboard
        problems = [
            f"{where}: {p}"
            for where, expr in self.promql()
            for p in (*check_promql(expr), *infrastructure_problems(expr))
        ]
        if problems:  # a bug here, not bad input: every expression is built from the names in promql.py
            raise AssertionError(f"stale {metric_names}:\n" + "\n".join(problems))

    def add_dcgm_alerts_and_dashboard(self, name: str, targets: MonitoringTargets, labels: Mapping[str, str]) -> None:
        """The objects after the workload's own scrape config: DCGM ServiceMonitor, PrometheusRule, dashboard."""
        if targets.dcgm and targets.dcgm_service_monitor:
            dcgm_service_monitor(self, targets)
        plain_object(
            self,
            "Alerts",
            api_version="monitoring.coreos.com/v1",
            kind="PrometheusRule",
            metadata={"name": f"{name}-alerts", "labels": labels},
            body={"spec": {"groups": self.rule_groups(name)}},
            source=__name__,
        )
        metadata = {
            "name": f"{name}-dashboard",
            # As cdk8s puts the chart's namespace on an object that names none.
            "namespace": self.namespace,
            "labels": {**labels, "grafana_dashboard": "1"},
        }
        self.dashboard_config_map = plus.config_map(
            self,
            "Dashboard",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": sourced_metadata(metadata, __name__),
                "data": {f"{name}.json": json.dumps(self.dashboard, indent=2, sort_keys=True)},
            },
        )

    def rule_groups(self, name: str) -> list[dict[str, Any]]:
        """The PrometheusRule's groups: `<name>.alerts`, then `<name>.drift` when there are drift rules."""
        groups = [{"name": f"{name}.alerts", "rules": self.alert_rules}]
        if self.drift_rules:
            groups.append({"name": f"{name}.drift", "rules": self.drift_rules})
        return groups

    def promql(self) -> list[tuple[str, str]]:
        """(where, expr) for every PromQL expression this chart emits: rules, then dashboard panels."""
        rules = [*self.alert_rules, *self.drift_rules]
        return [(f"alert {r['alert']}" if "alert" in r else f"record {r['record']}", r["expr"]) for r in rules] + [
            (f"panel {title!r}", expr) for title, expr in panel_queries(self.dashboard)
        ]


def dcgm_service_monitor(scope: Construct, targets: MonitoringTargets, namespace: str | None = None) -> None:
    """The one ServiceMonitor of the cluster's DCGM exporter (its chart's own stays off, see MonitoringTargets), and
    the GPU rules that read it (gpu_rules), once per cluster too."""
    selector = {"matchNames": [targets.dcgm_namespace]} if targets.dcgm_namespace else {"any": True}
    metadata: dict[str, Any] = {"name": "dcgm-exporter", "labels": {"app.kubernetes.io/part-of": PART_OF}}
    if namespace is not None:
        metadata["namespace"] = namespace
    plain_object(
        scope,
        "DcgmServiceMonitor",
        api_version="monitoring.coreos.com/v1",
        kind="ServiceMonitor",
        metadata=metadata,
        body={
            "spec": {
                "selector": {"matchLabels": dict(targets.dcgm_service_labels)},
                "namespaceSelector": selector,
                "endpoints": [
                    {
                        "port": "metrics",
                        "path": "/metrics",
                        "interval": targets.scrape_interval,
                        # Keep the exporter's pod/namespace labels (the pod that holds the GPU) instead of
                        # renaming them exported_*; the GPU panels filter on the workload namespace.
                        "honorLabels": True,
                    }
                ],
            }
        },
        source=__name__,
    )
    rule_metadata: dict[str, Any] = {"name": GPU_ALERTS, "labels": {"app.kubernetes.io/part-of": PART_OF}}
    if namespace is not None:
        rule_metadata["namespace"] = namespace
    plain_object(
        scope,
        "GpuAlerts",
        api_version="monitoring.coreos.com/v1",
        kind="PrometheusRule",
        metadata=rule_metadata,
        body={"spec": {"groups": [{"name": "gpu.xid", "rules": gpu_rules()}]}},
        source=__name__,
    )


# The Xid codes the EKS node monitoring agent treats as fatal (aws/eks-node-monitoring-agent@v1.7.0
# monitors/nvidia/dcgm/dcgm_policies.go, WellKnownXidCodes): it marks the node AcceleratedHardwareReady=False, and
# Karpenter 1.14.1 (node repair on) replaces it after 10 minutes (aws/karpenter-provider-aws@v1.14.1
# pkg/cloudprovider/cloudprovider.go, RepairPolicies). Any other code is a Kubernetes event only.
FATAL_XIDS = (46, 48, 54, 62, 63, 64, 74, 79, 95, 109, 110, 119, 120, 136, 140, 142, 143, 151, 155, 156, 158)
# DCGM's Xid field holds the last code a GPU reported, not a count: the recording rule turns it into a label.
LAST_XID = "llm_eks:gpu_last_xid"
GPU_ALERTS = "dcgm-exporter-alerts"


def gpu_rules() -> list[dict[str, Any]]:
    """The GPU rules of the cluster (one group, next to the one DCGM ServiceMonitor): the last Xid as a label, a fatal
    one (critical: the node is being repaired, or must be), any other new one (warning)."""
    fatal = selector({}, {"xid": "|".join(str(x) for x in FATAL_XIDS)})
    gpu = "GPU {{ $labels.gpu }} ({{ $labels.modelName }}) of {{ $labels.Hostname }}"
    rules = [
        {
            "record": LAST_XID,
            "expr": 'count_values by (Hostname, UUID, gpu, modelName, namespace, pod) ("xid", DCGM_FI_DEV_XID_ERRORS)',
        },
        alert_rule(
            "GpuXidFatal",
            f"{LAST_XID}{fatal}",
            "0m",
            "critical",
            "A GPU reported a fatal Xid: its node is out of service",
            f"{gpu} reported Xid {{{{ $labels.xid }}}}, which the EKS node monitoring agent treats as fatal: it sets "
            "AcceleratedHardwareReady=False on the node, and Karpenter replaces the node 10 minutes later when its "
            "node repair is on.",
            "kubectl get nodeclaims: with node repair on, the node is replaced about 10 minutes after the Xid and the "
            "replica starts again on the new one (the planned cold start). With node repair off, or if the node "
            "stays: kubectl delete nodeclaim on that node's NodeClaim (Karpenter drains and replaces it); the "
            "serving pod on that GPU fails until then.",
        ),
        alert_rule(
            "GpuXidError",
            # The value is the code (the left operand's); changes() finds a new one within 15 minutes.
            f"DCGM_FI_DEV_XID_ERRORS > 0 and changes(DCGM_FI_DEV_XID_ERRORS[15m]) > 0 "
            f"unless on (Hostname, UUID) {LAST_XID}{fatal}",
            "0m",
            "warning",
            "A GPU reported an Xid error",
            f"{gpu} reported Xid {{{{ $value }}}} in the last 15 minutes (not one the node monitoring agent treats "
            "as fatal: no node repair follows).",
            "Application Xids (13, 31, 43) come with a CUDA error in the serving pod's log (kubectl logs, previous "
            "container) and end with its restart; repeated ones on one GPU mean bad hardware: kubectl delete "
            "nodeclaim on its node's NodeClaim.",
        ),
    ]
    problems = [p for r in rules for p in infrastructure_problems(r["expr"])]
    assert not problems, problems
    return rules


class GpuMonitoringChart(cdk8s.Chart):
    """The DCGM exporter's ServiceMonitor on its own, for an environment of several workloads: it then belongs to
    no workload, so adding or removing one never moves it (or scrapes the GPUs twice)."""

    def __init__(self, scope: Construct, construct_id: str, targets: MonitoringTargets, namespace: str) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        dcgm_service_monitor(self, targets, namespace)
