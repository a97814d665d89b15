"""`MonitoringTargets`: what every workload's monitoring is held to (SLOs, price, alert thresholds) and how it is
scraped (interval, the DCGM exporter or the Neuron monitor), whichever engine serves the model. The dashboard and both
engines' monitoring charts read the same object."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from llm_eks.error_codes import E410
from llm_eks.errors import fail
from llm_eks.manifests.labels import require_dns1123
from llm_eks.validation import positive_number, whole_number

# Prometheus duration (the pattern the ServiceMonitor and PrometheusRule CRDs enforce, without the bare "0").
_DURATION = re.compile(r"^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$")
# A p99 above ten minutes is a misconfiguration, not an SLO.
_MAX_SLO_SECONDS = 600.0
# The planner's slowest path (Hub download of the largest models on a new node) stays well under two hours.
_MAX_COLD_START_SECONDS = 7200.0
# An extended resource name: a domain, '/', a name (nvidia.com/gpu, aws.amazon.com/neuron).
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def cold_start_minutes(targets: MonitoringTargets) -> int:
    """The planned cold start in whole minutes, rounded up (an alert's `for`)."""
    return max(1, math.ceil(targets.cold_start_seconds / 60))


def ksm_resource(resource: str) -> str:
    """The `resource` label kube-state-metrics gives a request of `resource`: every character outside [a-zA-Z0-9_]
    becomes "_" (kube-state-metrics v2.19.1 internal/store/utils.go, SanitizeLabelName): nvidia_com_gpu."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", resource)


def default_dcgm_service_labels() -> Mapping[str, str]:
    """The dcgm-exporter chart's Service labels (selectorLabels in deployment/templates/_helpers.tpl)."""
    return MappingProxyType({"app.kubernetes.io/name": "dcgm-exporter"})


@dataclass(frozen=True)
class MonitoringTargets:
    """SLOs, price, thresholds and scraping of one workload. The lead fills the first four from the config and the
    capacity plan (llm_eks.infra.workloads)."""

    # Environment SLOs (config slo.ttft_p99_ms / itl_p99_ms, in seconds).
    ttft_p99_seconds: float
    itl_p99_seconds: float
    # USD per hour for one model replica (all the nodes it spans), from the capacity plan (baked into the cost panel).
    cost_per_hour_per_replica: float
    # Total waiting requests above which a still-growing queue alerts; waiting_per_replica x max replicas means the
    # autoscaler has run out of room.
    queue_waiting_threshold: int
    # 15 s resolves a queue building up within one KEDA polling cycle (or one Serve autoscaling look-back) without
    # loading Prometheus.
    scrape_interval: str = "15s"
    # Above 95 % KV-cache use vLLM starts preempting requests (issue 5).
    kv_cache_usage_threshold: float = 0.95
    # Scrape the NVIDIA DCGM exporter too (GPU panels). Its Helm chart's own ServiceMonitor must then be off
    # (serviceMonitor.enabled=false): that one keeps honorLabels false, which renames the GPU pod's namespace label.
    dcgm: bool = True
    # With dcgm, emit the one dcgm-exporter ServiceMonitor; False where another workload's chart already does (two
    # would scrape every GPU series twice).
    dcgm_service_monitor: bool = True
    # Namespace of the DCGM exporter's Service; None finds it in any namespace by its labels.
    dcgm_namespace: str | None = None
    # The dcgm-exporter chart's Service labels (selectorLabels in deployment/templates/_helpers.tpl).
    dcgm_service_labels: Mapping[str, str] = field(default_factory=default_dcgm_service_labels)
    # The plan's cold start of a replica on a new node (Plan.cold_start.scale_out_s): a GPU pod pending longer than
    # this (rounded up to whole minutes) alerts, and a workload younger than it is starting, not down.
    cold_start_seconds: float = 600.0
    # The accelerator resource a replica's pod requests (the GPU pool's), as the pod spec spells it.
    gpu_resource: str = "nvidia.com/gpu"
    # Neuron panels (NeuronCore utilization, Neuron runtime memory) from the cluster's Neuron monitor
    # (manifests/neuron_monitor.py), on the nodes that run the workload's pods.
    neuron: bool = False


def validate_targets(prefix: str, targets: MonitoringTargets) -> None:
    """Raise ConfigError on the first bad target (SLOs, cost, thresholds, scrape interval, DCGM); `prefix` names the
    field that holds them (e.g. monitoring.targets)."""
    if not isinstance(targets, MonitoringTargets):
        raise fail(E410, prefix, targets, "must be a MonitoringTargets")
    for prop in ("ttft_p99_seconds", "itl_p99_seconds"):
        value = getattr(targets, prop)
        if not positive_number(value) or value > _MAX_SLO_SECONDS:
            raise fail(
                E410, f"{prefix}.{prop}", value, f"must be a positive number of seconds, at most {_MAX_SLO_SECONDS:g}"
            )
    if not positive_number(targets.cost_per_hour_per_replica):
        raise fail(
            E410,
            f"{prefix}.cost_per_hour_per_replica",
            targets.cost_per_hour_per_replica,
            "must be a positive USD amount",
        )
    threshold = targets.queue_waiting_threshold
    if not whole_number(threshold) or threshold < 1:
        raise fail(E410, f"{prefix}.queue_waiting_threshold", threshold, "must be a positive whole number of requests")
    if not positive_number(targets.kv_cache_usage_threshold) or targets.kv_cache_usage_threshold >= 1:
        raise fail(
            E410,
            f"{prefix}.kv_cache_usage_threshold",
            targets.kv_cache_usage_threshold,
            "must be between 0 and 1 (exclusive)",
        )
    interval = targets.scrape_interval
    if not isinstance(interval, str) or not interval or not _DURATION.match(interval):
        raise fail(E410, f"{prefix}.scrape_interval", interval, "must be a Prometheus duration such as 15s or 1m")
    if not positive_number(targets.cold_start_seconds) or targets.cold_start_seconds > _MAX_COLD_START_SECONDS:
        raise fail(
            E410,
            f"{prefix}.cold_start_seconds",
            targets.cold_start_seconds,
            f"must be a positive number of seconds, at most {_MAX_COLD_START_SECONDS:g}",
        )
    if not isinstance(targets.gpu_resource, str) or not _RESOURCE.match(targets.gpu_resource):
        raise fail(
            E410, f"{prefix}.gpu_resource", targets.gpu_resource, "must be an extended resource name (vendor.com/x)"
        )
    if targets.dcgm:
        if targets.dcgm_namespace is not None:
            require_dns1123(f"{prefix}.dcgm_namespace", targets.dcgm_namespace)
        if not targets.dcgm_service_labels:
            raise fail(
                E410,
                f"{prefix}.dcgm_service_labels",
                dict(targets.dcgm_service_labels),
                "must select the DCGM exporter Service",
            )
