"""`RayMonitoringChart`: what Prometheus and Grafana need to watch one Ray Serve LLM workload (`RayServeChart`).

- a PodMonitor for every Ray pod of the RayService (head and GPU workers, port `metrics`, `/metrics`): Ray exports
  all metrics of a node on that port, its own (Serve proxy, router, controller, replicas) and vLLM's engine metrics,
  which Ray Serve LLM re-exports as `ray_vllm_*` (llm_eks.manifests.promql explains the renaming);
- a ServiceMonitor for the DCGM exporter (GPU panels), as the vLLM monitoring chart has;
- a PrometheusRule with the vLLM chart's alerts in Ray's names: KV cache above 95 % for 5 minutes, a growing waiting
  queue, TTFT and ITL p99 above the SLO, rising preemptions, a scrape target down; and the drift group (the plan's
  figures, observed latency quantiles, alerts on drift from the plan), also in Ray's names;
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

import re
from dataclasses import dataclass
from typing import Any

from constructs import Construct

from llm_eks.error_codes import E410
from llm_eks.errors import fail
from llm_eks.manifests.dashboard import DashboardSpec, ExtraPanel, build_dashboard
from llm_eks.manifests.labels import app_labels, plain_object
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
from llm_eks.manifests.monitoring_targets import MonitoringTargets
from llm_eks.manifests.promql import MetricSource, promql_number, selector
from llm_eks.manifests.ray_serve import (
    APPLICATION_NAME,
    METRICS_PORT_NAME,
    RAY_SERVE_APP,
    WORKER_GROUP,
    llm_deployment_name,
)

# Serve application names in serveConfigV2.
_APPLICATION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
# Pod labels copied onto every series: ray_io_cluster is what Ray's own Grafana dashboards filter on.
POD_TARGET_LABELS = ("ray.io/cluster", "ray.io/node-type", "ray.io/group")
_RATE = "$__rate_interval"


@dataclass(frozen=True)
class RayMonitoringProps:
    """One Ray Serve LLM workload's monitoring. The lead fills the first three from the config, the plan and the
    RayServeProps of the same workload (name, model_id)."""

    # The RayService name (RayServeProps.name); the job label of every scraped series.
    name: str
    # The LLMConfig model_id (RayServeProps.model_id): the `model_name` label of every ray_vllm_* series.
    model_id: str
    # SLOs, price, alert thresholds and scraping (shared with vLLM monitoring).
    targets: MonitoringTargets
    # The workload namespace (cross-chart contract).
    namespace: str = "inference"
    # The Serve application in serveConfigV2 (RayServeChart names it "llm").
    application: str = APPLICATION_NAME
    # Graphs after Ray Serve's own: the gateway's view of this workload, when it is behind one.
    extra_panels: tuple[ExtraPanel, ...] = ()
    # The capacity plan's figures the drift rules hold production to, as for vLLM (MonitoringProps); Ray re-exports
    # every series they read (ray_vllm_*). None records no plan figure and drops its alert.
    planned_kv_cache_tokens: int | None = None
    planned_itl_seconds: float | None = None
    planned_ttft_seconds: float | None = None

    @property
    def dashboard_uid(self) -> str:
        """Stable across synths (Grafana keys bookmarks and links on it); Grafana allows 40 characters."""
        return dashboard_uid(self.name)

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


def validate(props: RayMonitoringProps) -> None:
    """Raise ConfigError (one line naming the field) on the first bad prop."""
    validate_monitoring("ray_monitoring", props.name, props.namespace, "model_id", props.model_id, props.targets)
    if not isinstance(props.application, str) or not _APPLICATION.match(props.application):
        raise fail(
            E410,
            "ray_monitoring.application",
            props.application,
            "must be a Serve application name (letters, digits, ._-)",
        )
    validate_planned(
        "ray_monitoring", props.planned_kv_cache_tokens, props.planned_itl_seconds, props.planned_ttft_seconds
    )


def drift_inputs(props: RayMonitoringProps) -> DriftInputs:
    """What the drift rules read: Ray's re-export of the engine's series, scraped under the RayService's name."""
    return DriftInputs(
        engine=RAY_ALERTS,
        namespace=props.namespace,
        model=props.model_id,
        job=props.name,
        planned_kv_cache_tokens=props.planned_kv_cache_tokens,
        planned_itl_seconds=props.planned_itl_seconds,
        planned_ttft_seconds=props.planned_ttft_seconds,
    )


class _Selectors:
    """The label selectors every expression uses, in one place."""

    def __init__(self, props: RayMonitoringProps) -> None:
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


# Ray's re-exported names, Serve's autoscaler and the plan's LLMConfig spellings (max_num_seqs).
RAY_ALERTS = EngineAlerts(
    prefix="RayVllm",
    metrics=MetricSource.RAY,
    summary_suffix=" (Ray Serve)",
    kv_holder="the replica on {{ $labels.pod }}",
    kv_runbook="Check that Serve is adding replicas (RayService status, autoscaling_config max_replicas, pending "
    "worker pods, the node pool's GPU limit); at the maximum, raise max_replicas or lower max_num_seqs / "
    "max_model_len in the plan.",
    queue_runbook="Look for pending Ray worker pods (Karpenter NodeClaims, Spot capacity, the node pool limit) and "
    "for Serve at max_replicas; scale out or shed load.",
    ttft_runbook="Usually queueing: check the waiting queue, Serve router queue and KV-cache panels and scale out; if "
    "the queues are empty, long prompts dominate (lower max_num_batched_tokens to interleave prefill with decode).",
    itl_runbook="Batches are too large for the GPU: scale out, or lower max_num_seqs; large prefills stalling decode "
    "show as ITL spikes (lower max_num_batched_tokens).",
    preemption_runbook="Scale out, lower max_num_seqs, or give the KV cache more room (gpu_memory_utilization, an fp8 "
    "KV cache, a larger GPU) through the capacity plan.",
    stall_runbook="Ray Serve's replica health check calls the same engine check as /health and does not see a stall: "
    "delete the worker pod (kubectl delete pod) so Serve starts the replica again; if it stalls again on the same "
    "node its GPU is bad: kubectl delete nodeclaim on that node's NodeClaim.",
    engine_labels="namespace, pod, engine, ReplicaId",
)

# How far back RayServeNoHealthyReplica looks for a healthy replica: a deployment that never had one is starting
# (GpuPodsPendingTooLong covers a start that never ends), one that had one in the last day is down.
_SERVED_LOOKBACK = "1d:10m"


def worker_pod_pattern(name: str) -> str:
    """The GPU worker pods of RayService `name` (RE2, anchored): KubeRay 1.7.0 names the RayCluster `<name>-<5>`
    (GenerateRayClusterName) and a worker `<cluster>-<group>-worker-<5>` (PodName)."""
    return f"{name}-[a-z0-9]{{5}}-{WORKER_GROUP}-worker-[a-z0-9]{{5}}"


def alert_rules(props: RayMonitoringProps) -> list[dict[str, Any]]:
    """The alerting rules (the vLLM chart's, in Ray's names), each with severity, summary, description, runbook."""
    return [
        *engine_alert_rules(RAY_ALERTS, props.namespace, props.model_id, props.targets),
        alert_rule(
            "RayServeTargetDown",
            f"up{_Selectors(props).job} == 0",
            "5m",
            "critical",
            f"Prometheus cannot scrape a Ray pod of {props.name}",
            "{{ $labels.pod }} ({{ $labels.ray_io_node_type }}, {{ $labels.instance }}) has not answered Ray's "
            "metrics endpoint for 5 minutes.",
            f"kubectl -n {props.namespace} describe pod {{{{ $labels.pod }}}}: look for OOMKilled or a failing "
            "readiness probe; on the head, `ray status` and the dashboard (port 8265) show the cluster's state.",
        ),
        no_healthy_replica(props),
        gpu_pods_pending(props.namespace, worker_pod_pattern(props.name), props.targets, props.name),
    ]


def no_healthy_replica(props: RayMonitoringProps) -> dict[str, Any]:
    """No healthy replica of the model's Serve deployment (or no Serve controller reporting any: the head is gone),
    where one was healthy within the last day."""
    healthy = f"sum(ray_serve_deployment_replica_healthy{_Selectors(props).deployment})"
    return alert_rule(
        "RayServeNoHealthyReplica",
        f"({healthy} or on () vector(0)) == 0 and on () max_over_time({healthy}[{_SERVED_LOOKBACK}]) > 0",
        "1m",
        "critical",
        f"{props.name} has no healthy Serve replica: {props.model_id} is down",
        f"No replica of the Serve deployment {props.deployment} is healthy (or the Serve controller on the head "
        f"reports none), though one was within the last day: every request to {props.model_id} fails.",
        f"kubectl -n {props.namespace} get rayservice {props.name} and its pods: a lost head restarts the whole Ray "
        "cluster (no GCS fault tolerance here: the head is a single point of failure), which takes the planned cold "
        f"start ({props.targets.cold_start_seconds:.0f} s); Pending workers mean capacity (GpuPodsPendingTooLong).",
    )


def serve_panels(props: RayMonitoringProps) -> tuple[ExtraPanel, ...]:
    """Ray Serve's own graphs: replicas, the router queue, proxy traffic, latency and errors."""
    sel = _Selectors(props)
    latency = "ray_serve_http_request_latency_ms_bucket" + sel.application

    def quantile(q: float) -> tuple[str, str]:
        return (
            f"histogram_quantile({promql_number(q)}, sum by (le) (rate({latency}[{_RATE}])))",
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
        targets=props.targets,
        metrics=MetricSource.RAY,
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
        extra_panels=(*serve_panels(props), *props.extra_panels),
    )


class RayMonitoringChart(WorkloadMonitoringChart):
    """PodMonitor, DCGM ServiceMonitor, alerts and the Grafana dashboard of one Ray Serve LLM workload."""

    def __init__(self, scope: Construct, construct_id: str, props: RayMonitoringProps) -> None:
        validate(props)
        dashboard = build_dashboard(dashboard_spec(props))
        super().__init__(
            scope,
            construct_id,
            props.namespace,
            alert_rules(props),
            dashboard,
            "metric names",
            drift_rules(drift_inputs(props)),
        )
        self.props = props
        labels = app_labels(RAY_SERVE_APP, props.name)
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
                        {"port": METRICS_PORT_NAME, "path": "/metrics", "interval": props.targets.scrape_interval}
                    ],
                }
            },
            source=__name__,
        )
        self.add_dcgm_alerts_and_dashboard(props.name, props.targets, labels)
