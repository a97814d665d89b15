"""Reading synthesized cdk8s charts the way a reviewer, Prometheus and Grafana do, shared by the chart tests."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from llm_eks.manifests.dashboard import SCHEMA_VERSION

# The vLLM V1 metric names DESIGN.md lists as current (checked upstream facts); histograms by their base name.
DESIGN_VLLM_METRICS = (
    "vllm:num_requests_waiting",
    "vllm:num_requests_running",
    "vllm:kv_cache_usage_perc",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:request_time_per_output_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:num_preemptions_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:request_success_total",
)

# Where the monitoring charts' base props put the DCGM exporter, and the ServiceMonitor both charts emit for it.
DCGM_NAMESPACE = "gpu-monitoring"
DCGM_SERVICE_MONITOR_SPEC = {
    "selector": {"matchLabels": {"app.kubernetes.io/name": "dcgm-exporter"}},
    "namespaceSelector": {"matchNames": [DCGM_NAMESPACE]},
    "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s", "honorLabels": True}],
}


def by_kind(objects: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A chart's objects by kind, for charts that emit at most one object of each kind."""
    return {obj["kind"]: obj for obj in objects}


def by_kind_and_name(objects: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """A chart's objects by (kind, metadata.name)."""
    return {(obj["kind"], obj["metadata"]["name"]): obj for obj in objects}


def rules_by_alert(objects: dict[tuple[str, str], dict[str, Any]], name: str) -> dict[str, dict[str, Any]]:
    """The alerting rules of group `<name>.alerts` in PrometheusRule `<name>-alerts`, whose groups are that one and
    `<name>.drift` (the plan and observed recording rules and the drift alerts, llm_eks.manifests.monitoring_drift)."""
    groups = objects[("PrometheusRule", f"{name}-alerts")]["spec"]["groups"]
    assert [g["name"] for g in groups] == [f"{name}.alerts", f"{name}.drift"]
    return {r["alert"]: r for r in groups[0]["rules"]}


def dashboard_json(objects: dict[tuple[str, str], dict[str, Any]], name: str) -> dict[str, Any]:
    """The Grafana dashboard in ConfigMap `<name>-dashboard`, its only key `<name>.json`."""
    data = objects[("ConfigMap", f"{name}-dashboard")]["data"]
    assert list(data) == [f"{name}.json"]
    return json.loads(data[f"{name}.json"])


def assert_dashboard_shape(
    dashboard: dict[str, Any], objects: dict[tuple[str, str], dict[str, Any]], name: str
) -> None:
    """Found by Grafana's sidecar, uid from the workload name, current schema, panel ids 1..n, every panel on the
    chosen Prometheus data source, described, and inside the 24-column grid."""
    labels = objects[("ConfigMap", f"{name}-dashboard")]["metadata"]["labels"]
    assert labels["grafana_dashboard"] == "1"
    assert labels["app.kubernetes.io/instance"] == name
    assert dashboard["uid"] == f"llm-eks-{name}"
    assert dashboard["schemaVersion"] == SCHEMA_VERSION
    ids = [p["id"] for p in dashboard["panels"]]
    assert ids == list(range(1, len(ids) + 1))
    for panel in dashboard["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["description"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24


def placement_groups(workloads: Iterable[Any]) -> dict[str, str]:
    """A stand-in cluster placement group id for each EFA node class of `workloads` (the stack creates real ones)."""
    from llm_eks.infra.charts import efa_node_classes

    return {name: "pg-0123456789abcdef0" for name in efa_node_classes(list(workloads))}


def charts_of(config: Any, workloads: Iterable[Any], **options: Any) -> list[Any]:
    """Every chart (ChartPlan) of `workloads` of `config`, with stand-ins for what the stack creates (node role,
    security group, placement groups); `options` are build_charts' other keywords."""
    import cdk8s

    from llm_eks.infra.charts import build_charts

    built = list(workloads)
    return build_charts(
        cdk8s.App(),
        config,
        built,
        node_role_name="r",
        security_group_ids=("sg-0123456789abcdef0",),
        placement_groups=placement_groups(built),
        **{"region": "us-west-2", **options},
    )


def applied_objects(config: Any, workloads: Iterable[Any]) -> list[dict[str, Any]]:
    """The objects of every chart the stack applies for `workloads` of `config` (charts_of)."""
    return [o for c in charts_of(config, workloads) if c.apply for o in c.chart.to_json()]


def environment_objects(name: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """`applied_objects` of the environment `name` read from `body` (its cdk.json entry), planned as synth plans."""
    from llm_eks.config import parse_environment
    from llm_eks.config.plans import plan_workloads
    from llm_eks.infra.workloads import build_workloads

    config = parse_environment(name, body)
    return applied_objects(config, build_workloads(config, plan_workloads(config)))
