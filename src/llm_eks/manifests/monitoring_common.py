"""What the vLLM and the Ray Serve monitoring charts share: the checks on their common props, the alert-rule shape,
and the objects besides the workload's own scrape config (the DCGM exporter's ServiceMonitor, the PrometheusRule,
the dashboard ConfigMap)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import cdk8s
from constructs import Construct

from llm_eks.errors import fail
from llm_eks.manifests.dashboard import panel_queries
from llm_eks.manifests.labels import PART_OF, plain_object, require_dns1035, require_dns1123
from llm_eks.manifests.promql import check_promql
from llm_eks.manifests.validation import positive_number, require_model_name, whole_number

if TYPE_CHECKING:
    from llm_eks.manifests.monitoring import MonitoringProps
    from llm_eks.manifests.ray_monitoring import RayMonitoringProps

# Prometheus duration (the pattern the ServiceMonitor and PrometheusRule CRDs enforce, without the bare "0").
_DURATION = re.compile(r"^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$")
# A p99 above ten minutes is a misconfiguration, not an SLO.
_MAX_SLO_SECONDS = 600.0
# Series of one served model in one namespace (what the alerts aggregate by).
BY_MODEL = "sum by (namespace, model_name)"
BY_MODEL_LE = "sum by (le, namespace, model_name)"


def default_dcgm_service_labels() -> Mapping[str, str]:
    """The dcgm-exporter chart's Service labels (selectorLabels in deployment/templates/_helpers.tpl)."""
    return MappingProxyType({"app.kubernetes.io/name": "dcgm-exporter"})


def validate_names(prefix: str, props: MonitoringProps | RayMonitoringProps, model_field: str) -> None:
    """Raise ConfigError on a bad workload name (DNS-1035), namespace (DNS-1123) or served model name."""
    require_dns1035(f"{prefix}.name", props.name)
    require_dns1123(f"{prefix}.namespace", props.namespace)
    require_model_name(f"{prefix}.{model_field}", getattr(props, model_field))


def validate_common(prefix: str, props: MonitoringProps | RayMonitoringProps) -> None:
    """Raise ConfigError on the first bad shared prop (SLOs, cost, thresholds, scrape interval, DCGM)."""
    for prop in ("ttft_p99_seconds", "itl_p99_seconds"):
        value = getattr(props, prop)
        if not positive_number(value) or value > _MAX_SLO_SECONDS:
            raise fail(f"{prefix}.{prop}", value, f"must be a positive number of seconds, at most {_MAX_SLO_SECONDS:g}")
    if not positive_number(props.cost_per_hour_per_replica):
        raise fail(
            f"{prefix}.cost_per_hour_per_replica", props.cost_per_hour_per_replica, "must be a positive USD amount"
        )
    threshold = props.queue_waiting_threshold
    if not whole_number(threshold) or threshold < 1:
        raise fail(f"{prefix}.queue_waiting_threshold", threshold, "must be a positive whole number of requests")
    if not positive_number(props.kv_cache_usage_threshold) or props.kv_cache_usage_threshold >= 1:
        raise fail(
            f"{prefix}.kv_cache_usage_threshold",
            props.kv_cache_usage_threshold,
            "must be between 0 and 1 (exclusive)",
        )
    if (
        not isinstance(props.scrape_interval, str)
        or not props.scrape_interval
        or not _DURATION.match(props.scrape_interval)
    ):
        raise fail(
            f"{prefix}.scrape_interval", props.scrape_interval, "must be a Prometheus duration such as 15s or 1m"
        )
    if props.dcgm:
        if props.dcgm_namespace is not None:
            require_dns1123(f"{prefix}.dcgm_namespace", props.dcgm_namespace)
        if not props.dcgm_service_labels:
            raise fail(
                f"{prefix}.dcgm_service_labels",
                dict(props.dcgm_service_labels),
                "must select the DCGM exporter Service",
            )


def promql_number(value: float) -> str:
    """A threshold as PromQL and alert text read it (0.95, 1, 0.05)."""
    return format(value, ".12g")


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


class WorkloadMonitoringChart(cdk8s.Chart):
    """A monitoring chart: alert rules and a dashboard whose PromQL must use current metric names."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        namespace: str,
        alert_rules: list[dict[str, Any]],
        dashboard: dict[str, Any],
        metric_names: str,
    ) -> None:
        super().__init__(scope, construct_id, namespace=namespace, disable_resource_name_hashes=True)
        self.alert_rules = alert_rules
        self.dashboard = dashboard
        problems = [f"{where}: {p}" for where, expr in self.promql() for p in check_promql(expr)]
        if problems:  # a bug here, not bad input: every expression is built from the names in promql.py
            raise AssertionError(f"stale {metric_names}:\n" + "\n".join(problems))

    def add_dcgm_alerts_and_dashboard(
        self, props: MonitoringProps | RayMonitoringProps, labels: Mapping[str, str]
    ) -> None:
        """The objects after the workload's own scrape config: DCGM ServiceMonitor, PrometheusRule, dashboard."""
        if props.dcgm:
            namespaces = {"matchNames": [props.dcgm_namespace]} if props.dcgm_namespace else {"any": True}
            plain_object(
                self,
                "DcgmServiceMonitor",
                api_version="monitoring.coreos.com/v1",
                kind="ServiceMonitor",
                metadata={"name": "dcgm-exporter", "labels": {"app.kubernetes.io/part-of": PART_OF}},
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
