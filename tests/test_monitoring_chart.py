"""MonitoringChart: ServiceMonitors, alert rules and the Grafana dashboard, read the way Prometheus and Grafana do."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from llm_eks.errors import ConfigError
from llm_eks.manifests.dashboard import panel_queries
from llm_eks.manifests.monitoring import MonitoringChart, MonitoringProps
from llm_eks.manifests.monitoring_targets import MonitoringTargets
from llm_eks.manifests.promql import check_promql, vllm_names, vllm_series_names
from tests.chart_helpers import (
    DCGM_NAMESPACE,
    DCGM_SERVICE_MONITOR_SPEC,
    assert_dashboard_shape,
    by_kind_and_name,
    dashboard_json,
    rules_by_alert,
)
from tests.kube_schema import assert_valid

NAME = "vllm-llama-3-1-8b"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SEL = f'{{namespace="inference", model_name="{MODEL}"}}'
READY = f'kube_deployment_status_replicas_ready{{namespace="inference", deployment="{NAME}"}}'


def base_props(**overrides: Any) -> MonitoringProps:
    """The props with `overrides` applied; MonitoringTargets fields go to props.targets."""
    targets = MonitoringTargets(
        ttft_p99_seconds=1.0,
        itl_p99_seconds=0.05,
        cost_per_hour_per_replica=1.861,
        queue_waiting_threshold=8,
        dcgm_namespace=DCGM_NAMESPACE,
        cold_start_seconds=273.0,
    )
    target_fields = {f.name for f in dataclasses.fields(MonitoringTargets)}
    targets = dataclasses.replace(targets, **{k: v for k, v in overrides.items() if k in target_fields})
    props = MonitoringProps(name=NAME, served_model_name=MODEL, targets=targets, scaled_object=NAME)
    return dataclasses.replace(props, **{k: v for k, v in overrides.items() if k not in target_fields})


def synth(props: MonitoringProps) -> tuple[MonitoringChart, dict[tuple[str, str], dict[str, Any]]]:
    import cdk8s

    chart = MonitoringChart(cdk8s.App(), "monitoring", props)
    return chart, by_kind_and_name(chart.to_json())


@pytest.fixture(scope="module")
def synthesized() -> tuple[MonitoringChart, dict[tuple[str, str], dict[str, Any]]]:
    return synth(base_props())


@pytest.fixture(scope="module")
def objects(synthesized: tuple[MonitoringChart, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return synthesized[1]


@pytest.fixture(scope="module")
def rules(objects: dict[tuple[str, str], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return rules_by_alert(objects, NAME)


@pytest.fixture(scope="module")
def dashboard(objects: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    return dashboard_json(objects, NAME)


def test_every_object_is_valid(objects: dict[tuple[str, str], dict[str, Any]]) -> None:
    assert sorted(objects) == [
        ("ConfigMap", f"{NAME}-dashboard"),
        # The GPU rules go with the one DCGM ServiceMonitor (llm_eks.manifests.monitoring_model.gpu_rules).
        ("PrometheusRule", "dcgm-exporter-alerts"),
        ("PrometheusRule", f"{NAME}-alerts"),
        ("ServiceMonitor", "dcgm-exporter"),
        ("ServiceMonitor", NAME),
    ]
    assert all(o["metadata"]["namespace"] == "inference" for o in objects.values())
    assert_valid(list(objects.values()))


def test_vllm_service_monitor_selects_the_contract_service(objects: dict[tuple[str, str], dict[str, Any]]) -> None:
    monitor = objects[("ServiceMonitor", NAME)]
    assert monitor["spec"] == {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": NAME}},
        "namespaceSelector": {"matchNames": ["inference"]},
        "endpoints": [{"port": "http", "path": "/metrics", "interval": "15s"}],
    }
    # No jobLabel: the job label is the Service name, which the target-down alert and the dashboard use.
    assert "jobLabel" not in monitor["spec"]


def test_dcgm_service_monitor_keeps_the_gpu_pods_labels(objects: dict[tuple[str, str], dict[str, Any]]) -> None:
    assert objects[("ServiceMonitor", "dcgm-exporter")]["spec"] == DCGM_SERVICE_MONITOR_SPEC


def test_alert_expressions_exactly(rules: dict[str, dict[str, Any]]) -> None:
    by = "sum by (namespace, model_name)"
    assert {name: rule["expr"] for name, rule in rules.items()} == {
        "VllmKvCacheNearlyFull": f"max by (namespace, pod, model_name) (vllm:kv_cache_usage_perc{SEL}) > 0.95",
        "VllmWaitingQueueGrowing": (
            f"{by} (vllm:num_requests_waiting{SEL}) > 8 and {by} (deriv(vllm:num_requests_waiting{SEL}[10m])) > 0"
        ),
        "VllmTimeToFirstTokenAboveSlo": (
            "histogram_quantile(0.99, sum by (le, namespace, model_name) "
            f"(rate(vllm:time_to_first_token_seconds_bucket{SEL}[5m]))) > 1"
        ),
        "VllmInterTokenLatencyAboveSlo": (
            "histogram_quantile(0.99, sum by (le, namespace, model_name) "
            f"(rate(vllm:inter_token_latency_seconds_bucket{SEL}[5m]))) > 0.05"
        ),
        "VllmPreemptionsRising": f"{by} (rate(vllm:num_preemptions_total{SEL}[5m])) > 0",
        "VllmEngineStalled": (
            f"max by (namespace, pod, engine) (vllm:num_requests_running{SEL}) > 0 and on (namespace, pod, engine) "
            f"(sum by (namespace, pod, engine) (increase(vllm:generation_tokens_total{SEL}[2m])) + "
            f"sum by (namespace, pod, engine) (increase(vllm:prompt_tokens_total{SEL}[2m]))) == 0"
        ),
        "VllmNoReadyReplica": (
            f"sum by (namespace) ({READY}) == 0 and on (namespace) "
            f'sum by (namespace) (kube_deployment_spec_replicas{{namespace="inference", deployment="{NAME}"}}) > 0 '
            "and on (namespace) (time() - min by (namespace) "
            f'(kube_deployment_created{{namespace="inference", deployment="{NAME}"}})) > 273'
        ),
        "VllmSeriesAbsent": (
            f"sum by (namespace) ({READY}) > 0 unless on (namespace) count by (namespace) "
            f"(vllm:num_requests_waiting{SEL})"
        ),
        "KedaScalerErrors": (
            "sum by (scaledObject) (rate(keda_scaler_detail_errors_total"
            f'{{exported_namespace="inference", scaledObject="{NAME}"}}[5m])) > 0 and on () sum({READY}) > 0'
        ),
        "GpuPodsPendingTooLong": (
            "max by (namespace, pod) (kube_pod_status_phase"
            f'{{namespace="inference", phase="Pending", pod=~"{NAME}-[a-z0-9]{{1,10}}-[a-z0-9]{{5}}"}}) == 1 '
            "and on (namespace, pod) max by (namespace, pod) (kube_pod_container_resource_requests"
            f'{{namespace="inference", resource="nvidia_com_gpu", pod=~"{NAME}-[a-z0-9]{{1,10}}-[a-z0-9]{{5}}"}}) > 0'
        ),
        "VllmTargetDown": f'up{{job="{NAME}", namespace="inference"}} == 0',
    }


def test_a_floor_and_a_leader_worker_set_count_their_own_objects() -> None:
    """An on-demand floor's Deployment counts with the burst one; a LeaderWorkerSet's replicas are its leader
    StatefulSet's (kube_statefulset_replicas for the wanted count), its pods `<name>-<group>[-<worker>]`."""
    from llm_eks.manifests.monitoring import alert_rules

    floor = {r["alert"]: r["expr"] for r in alert_rules(base_props(replica_names=(NAME, f"{NAME}-floor")))}
    assert f'deployment=~"{NAME}|{NAME}-floor"' in floor["VllmNoReadyReplica"]
    assert f'pod=~"({NAME}|{NAME}-floor)-[a-z0-9]{{1,10}}-[a-z0-9]{{5}}"' in floor["GpuPodsPendingTooLong"]
    lws = {r["alert"]: r["expr"] for r in alert_rules(base_props(replica_kind="statefulset"))}
    assert f'kube_statefulset_replicas{{namespace="inference", statefulset="{NAME}"}}' in lws["VllmNoReadyReplica"]
    assert f'pod=~"{NAME}-[0-9]+(-[0-9]+)?"' in lws["GpuPodsPendingTooLong"]
    asleep = {r["alert"]: r["for"] for r in alert_rules(base_props(scales_to_zero=True))}
    assert asleep["VllmNoReadyReplica"] == "5m"  # waking takes the cold start (273 s)


def test_alert_durations_severities_and_annotations(rules: dict[str, dict[str, Any]]) -> None:
    assert {name: (r["for"], r["labels"]["severity"]) for name, r in rules.items()} == {
        "VllmKvCacheNearlyFull": ("5m", "warning"),
        "VllmWaitingQueueGrowing": ("10m", "warning"),
        "VllmTimeToFirstTokenAboveSlo": ("10m", "critical"),
        "VllmInterTokenLatencyAboveSlo": ("10m", "critical"),
        "VllmPreemptionsRising": ("15m", "warning"),
        "VllmEngineStalled": ("2m", "critical"),
        "VllmNoReadyReplica": ("1m", "critical"),
        "VllmSeriesAbsent": ("3m", "critical"),
        "KedaScalerErrors": ("5m", "warning"),
        # The planned cold start, 273 s, rounded up.
        "GpuPodsPendingTooLong": ("5m", "warning"),
        "VllmTargetDown": ("5m", "critical"),
    }
    for rule in rules.values():
        assert set(rule["annotations"]) == {"summary", "description", "runbook"}
        assert all(v and "\n" not in v for v in rule["annotations"].values())
    assert rules["VllmTimeToFirstTokenAboveSlo"]["annotations"]["summary"] == "vLLM TTFT p99 above the 1 s SLO"


def test_slo_threshold_follows_the_props() -> None:
    from llm_eks.manifests.monitoring import alert_rules

    rules = {r["alert"]: r for r in alert_rules(base_props(ttft_p99_seconds=0.25, kv_cache_usage_threshold=0.9))}
    assert rules["VllmTimeToFirstTokenAboveSlo"]["expr"].endswith("[5m]))) > 0.25")
    assert rules["VllmKvCacheNearlyFull"]["expr"].endswith(") > 0.9")


def test_every_emitted_expression_uses_current_vllm_names(synthesized: tuple[MonitoringChart, Any]) -> None:
    chart = synthesized[0]
    expressions = chart.promql()
    assert len(expressions) > 20
    for where, expr in expressions:
        assert check_promql(expr) == [], where
        assert set(vllm_names(expr)) <= vllm_series_names(), where


def test_dashboard_json_shape(dashboard: dict[str, Any], objects: dict[tuple[str, str], dict[str, Any]]) -> None:
    assert_dashboard_shape(dashboard, objects, NAME)
    assert len(dashboard["uid"]) <= 40
    assert dashboard["templating"]["list"] == [
        {
            "name": "datasource",
            "label": "Prometheus",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
            "refresh": 1,
            "regex": "",
        }
    ]
    for panel in dashboard["panels"]:
        assert all(t["datasource"] == panel["datasource"] for t in panel["targets"])


def test_dashboard_panels_and_queries(dashboard: dict[str, Any]) -> None:
    queries: dict[str, list[str]] = {}
    for title, expr in panel_queries(dashboard):
        queries.setdefault(title, []).append(expr)
        assert check_promql(expr) == [], title
    assert set(queries) == {
        "Ready replicas",
        "Cost per 1M output tokens",
        "Output tokens/s",
        "Prefix cache hit ratio",
        "Time to first token",
        "Inter-token latency",
        "End-to-end request latency",
        "Token throughput",
        "Queue depth",
        "KV-cache usage",
        "Preemptions",
        "Finished requests",
        "Cost per 1M tokens",
        "GPU utilization",
        "GPU memory used",
    }
    rate = "[$__rate_interval]"
    assert queries["Time to first token"] == [
        f"histogram_quantile({q}, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{SEL}{rate})))"
        for q in ("0.5", "0.9", "0.99")
    ]
    assert all("vllm:inter_token_latency_seconds_bucket" in e for e in queries["Inter-token latency"])
    assert all("vllm:e2e_request_latency_seconds_bucket" in e for e in queries["End-to-end request latency"])
    assert queries["Queue depth"] == [f"sum(vllm:num_requests_waiting{SEL})", f"sum(vllm:num_requests_running{SEL})"]
    assert queries["KV-cache usage"] == [f"max by (pod) (vllm:kv_cache_usage_perc{SEL})"]
    assert queries["Prefix cache hit ratio"] == [
        f"sum(rate(vllm:prefix_cache_hits_total{SEL}{rate})) / (sum(rate(vllm:prefix_cache_queries_total{SEL}{rate}))"
        " > 0)"
    ]
    assert queries["GPU utilization"] == ['avg by (Hostname, gpu) (DCGM_FI_DEV_GPU_UTIL{namespace="inference"})']
    assert queries["GPU memory used"] == ['max by (Hostname, gpu) (DCGM_FI_DEV_FB_USED{namespace="inference"})']


def test_cost_per_million_tokens_bakes_in_the_plan_price(dashboard: dict[str, Any]) -> None:
    panel = next(p for p in dashboard["panels"] if p["title"] == "Cost per 1M output tokens")
    replicas = f'count(up{{job="{NAME}", namespace="inference"}} == 1)'
    tokens = f"sum(rate(vllm:generation_tokens_total{SEL}[$__rate_interval]))"
    assert panel["targets"][0]["expr"] == f"1.861 * {replicas} / (({tokens}) * 3600 / 1e6 > 0)"
    assert panel["fieldConfig"]["defaults"]["unit"] == "currencyUSD"
    assert "$1.861/h per replica" in panel["description"]
    assert "baked into this query" in panel["description"]


def test_slo_lines_on_latency_panels(dashboard: dict[str, Any]) -> None:
    panels = {p["title"]: p for p in dashboard["panels"]}
    for title, slo in (("Time to first token", 1.0), ("Inter-token latency", 0.05)):
        defaults = panels[title]["fieldConfig"]["defaults"]
        assert defaults["thresholds"]["steps"][-1] == {"color": "red", "value": slo}
        assert defaults["custom"]["thresholdsStyle"] == {"mode": "dashed"}
        assert [t["legendFormat"] for t in panels[title]["targets"]] == ["p50", "p90", "p99"]


def test_without_dcgm_there_is_no_gpu_scrape_or_panel() -> None:
    chart, objects = synth(base_props(dcgm=False, dcgm_namespace=None))
    assert ("ServiceMonitor", "dcgm-exporter") not in objects
    assert not any("DCGM" in expr for _, expr in chart.promql())


def test_dcgm_found_in_any_namespace_when_none_is_given() -> None:
    _, objects = synth(base_props(dcgm_namespace=None))
    assert objects[("ServiceMonitor", "dcgm-exporter")]["spec"]["namespaceSelector"] == {"any": True}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"name": "Vllm_8B"},
            "monitoring.name: 'Vllm_8B' is not allowed; must be a DNS-1035 label: lowercase letters, digits and '-', "
            "starting with a letter, at most 63 characters [LLMEKS-E400]",
        ),
        (
            {"served_model_name": 'bad"name'},
            "monitoring.served_model_name: 'bad\"name' is not allowed; must be 1-253 characters of letters, digits "
            "and ._/:@+- starting with a letter or digit [LLMEKS-E400]",
        ),
        (
            {"ttft_p99_seconds": -1.0},
            "monitoring.targets.ttft_p99_seconds: -1.0 is not allowed; must be a positive number of seconds, at "
            "most 600 [LLMEKS-E410]",
        ),
        (
            {"itl_p99_seconds": 0},
            "monitoring.targets.itl_p99_seconds: 0 is not allowed; must be a positive number of seconds, at most 600"
            " [LLMEKS-E410]",
        ),
        (
            {"cost_per_hour_per_replica": float("nan")},
            "monitoring.targets.cost_per_hour_per_replica: nan is not allowed; must be a positive USD amount"
            " [LLMEKS-E410]",
        ),
        (
            {"queue_waiting_threshold": 0},
            "monitoring.targets.queue_waiting_threshold: 0 is not allowed; must be a positive whole number of requests"
            " [LLMEKS-E410]",
        ),
        (
            {"kv_cache_usage_threshold": 1.0},
            "monitoring.targets.kv_cache_usage_threshold: 1.0 is not allowed; must be between 0 and 1 (exclusive)"
            " [LLMEKS-E410]",
        ),
        (
            {"scrape_interval": "15"},
            "monitoring.targets.scrape_interval: '15' is not allowed; must be a Prometheus duration such as 15s or 1m"
            " [LLMEKS-E410]",
        ),
        (
            {"dcgm_namespace": "GPU"},
            "monitoring.targets.dcgm_namespace: 'GPU' is not allowed; must be a DNS-1123 label: lowercase "
            "letters, digits "
            "and '-', at most 63 characters [LLMEKS-E400]",
        ),
        (
            {"dcgm_service_labels": {}},
            "monitoring.targets.dcgm_service_labels: {} is not allowed; must select the DCGM exporter Service"
            " [LLMEKS-E410]",
        ),
        (
            {"cold_start_seconds": 0},
            "monitoring.targets.cold_start_seconds: 0 is not allowed; must be a positive number of seconds, at most "
            "7200 [LLMEKS-E410]",
        ),
        (
            {"gpu_resource": "gpu"},
            "monitoring.targets.gpu_resource: 'gpu' is not allowed; must be an extended resource name (vendor.com/x)"
            " [LLMEKS-E410]",
        ),
        (
            {"replica_kind": "leaderworkerset"},
            "monitoring.replica_kind: 'leaderworkerset' is not allowed; must be 'deployment' or 'statefulset'"
            " [LLMEKS-E410]",
        ),
        (
            {"replica_names": ("vllm-floor", NAME)},
            "monitoring.replica_names: ['vllm-floor', 'vllm-llama-3-1-8b'] is not allowed; must start with the "
            "workload 'vllm-llama-3-1-8b' [LLMEKS-E410]",
        ),
    ],
)
def test_bad_props_fail_with_one_line(overrides: dict[str, Any], message: str) -> None:
    import cdk8s

    with pytest.raises(ConfigError) as err:
        MonitoringChart(cdk8s.App(), "monitoring", base_props(**overrides))
    assert str(err.value) == message
