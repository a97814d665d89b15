"""RayMonitoringChart: the PodMonitor, alerts and dashboard of a Ray Serve LLM workload, in the names Ray exports."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from llm_eks.errors import ConfigError
from llm_eks.manifests.dashboard import build_dashboard, panel_queries
from llm_eks.manifests.monitoring_targets import MonitoringTargets
from llm_eks.manifests.promql import (
    CURRENT_VLLM_METRICS,
    RAY_SERVE_METRICS,
    REMOVED_VLLM_METRICS,
    check_promql,
    ray_exported,
    ray_names,
    ray_series_names,
    vllm_names,
    vllm_series_names,
)
from llm_eks.manifests.ray_monitoring import RayMonitoringChart, RayMonitoringProps, dashboard_spec
from tests.chart_helpers import (
    DCGM_NAMESPACE,
    DCGM_SERVICE_MONITOR_SPEC,
    assert_dashboard_shape,
    by_kind_and_name,
    dashboard_json,
    rules_by_alert,
)
from tests.kube_schema import assert_valid

NAME = "ray-llama-3-1-8b"
MODEL = "llama-3.1-8b"
SEL = f'{{namespace="inference", model_name="{MODEL}"}}'
JOB = f'{{namespace="inference", job="{NAME}"}}'
ENGINE = "namespace, pod, engine, ReplicaId"
# The model's Serve deployment (llm_deployment_name) in the "llm" application.
HEALTHY = (
    'sum(ray_serve_deployment_replica_healthy{namespace="inference", job="ray-llama-3-1-8b", application="llm", '
    'deployment="LLMServer:llama-3_1-8b"})'
)
# KubeRay 1.7.0: RayCluster <name>-<5>, workers <cluster>-gpu-worker-<5>.
WORKERS = f"{NAME}-[a-z0-9]{{5}}-gpu-worker-[a-z0-9]{{5}}"
APP = f'{{namespace="inference", job="{NAME}", application="llm"}}'
DEPLOYMENT = f'{{namespace="inference", job="{NAME}", application="llm", deployment="LLMServer:llama-3_1-8b"}}'
RATE = "[$__rate_interval]"


def base_props(**overrides: Any) -> RayMonitoringProps:
    """The props with `overrides` applied; MonitoringTargets fields go to props.targets."""
    targets = MonitoringTargets(
        ttft_p99_seconds=1.0,
        itl_p99_seconds=0.05,
        cost_per_hour_per_replica=1.861,
        queue_waiting_threshold=8,
        dcgm_namespace=DCGM_NAMESPACE,
        cold_start_seconds=596.0,
    )
    target_fields = {f.name for f in dataclasses.fields(MonitoringTargets)}
    targets = dataclasses.replace(targets, **{k: v for k, v in overrides.items() if k in target_fields})
    props = RayMonitoringProps(name=NAME, model_id=MODEL, targets=targets)
    return dataclasses.replace(props, **{k: v for k, v in overrides.items() if k not in target_fields})


@pytest.fixture(scope="module")
def synthesized() -> tuple[RayMonitoringChart, dict[tuple[str, str], dict[str, Any]]]:
    import cdk8s

    chart = RayMonitoringChart(cdk8s.App(), "ray-monitoring", base_props())
    return chart, by_kind_and_name(chart.to_json())


@pytest.fixture(scope="module")
def objects(synthesized: tuple[RayMonitoringChart, Any]) -> dict[tuple[str, str], dict[str, Any]]:
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
        ("PodMonitor", NAME),
        ("PrometheusRule", "dcgm-exporter-alerts"),
        ("PrometheusRule", f"{NAME}-alerts"),
        ("ServiceMonitor", "dcgm-exporter"),
    ]
    assert all(o["metadata"]["namespace"] == "inference" for o in objects.values())
    assert objects[("PodMonitor", NAME)]["metadata"]["labels"] == {
        "app.kubernetes.io/name": "ray-serve",
        "app.kubernetes.io/instance": NAME,
        "app.kubernetes.io/part-of": "llm-eks",
    }
    assert_valid(list(objects.values()))


def test_pod_monitor_scrapes_head_and_workers(objects: dict[tuple[str, str], dict[str, Any]]) -> None:
    assert objects[("PodMonitor", NAME)]["spec"] == {
        # job = the RayService name on every series (the pod template label's value).
        "jobLabel": "app.kubernetes.io/instance",
        # No ray.io/node-type: head (Serve controller, proxy) and GPU workers (replicas, vLLM) both matter.
        "selector": {"matchLabels": {"app.kubernetes.io/instance": NAME, "ray.io/is-ray-node": "yes"}},
        "namespaceSelector": {"matchNames": ["inference"]},
        # ray_io_cluster, ray_io_node_type, ray_io_group on every series (Ray's own dashboards use ray_io_cluster).
        "podTargetLabels": ["ray.io/cluster", "ray.io/node-type", "ray.io/group"],
        "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}],
    }


def test_dcgm_service_monitor_keeps_the_gpu_pods_labels(objects: dict[tuple[str, str], dict[str, Any]]) -> None:
    assert objects[("ServiceMonitor", "dcgm-exporter")]["spec"] == DCGM_SERVICE_MONITOR_SPEC


def test_alert_expressions_exactly(rules: dict[str, dict[str, Any]]) -> None:
    by = "sum by (namespace, model_name)"
    assert {name: rule["expr"] for name, rule in rules.items()} == {
        "RayVllmKvCacheNearlyFull": f"max by (namespace, pod, model_name) (ray_vllm_kv_cache_usage_perc{SEL}) > 0.95",
        "RayVllmWaitingQueueGrowing": (
            f"{by} (ray_vllm_num_requests_waiting{SEL}) > 8"
            f" and {by} (deriv(ray_vllm_num_requests_waiting{SEL}[10m])) > 0"
        ),
        "RayVllmTimeToFirstTokenAboveSlo": (
            "histogram_quantile(0.99, sum by (le, namespace, model_name) "
            f"(rate(ray_vllm_time_to_first_token_seconds_bucket{SEL}[5m]))) > 1"
        ),
        "RayVllmInterTokenLatencyAboveSlo": (
            "histogram_quantile(0.99, sum by (le, namespace, model_name) "
            f"(rate(ray_vllm_inter_token_latency_seconds_bucket{SEL}[5m]))) > 0.05"
        ),
        "RayVllmPreemptionsRising": f"{by} (rate(ray_vllm_num_preemptions_total{SEL}[5m])) > 0",
        "RayVllmEngineStalled": (
            f"max by ({ENGINE}) (ray_vllm_num_requests_running{SEL}) > 0 and on ({ENGINE}) "
            f"(sum by ({ENGINE}) (increase(ray_vllm_generation_tokens_total{SEL}[2m])) + "
            f"sum by ({ENGINE}) (increase(ray_vllm_prompt_tokens_total{SEL}[2m]))) == 0"
        ),
        "RayServeTargetDown": f"up{JOB} == 0",
        "RayServeNoHealthyReplica": (
            f"({HEALTHY} or on () vector(0)) == 0 and on () max_over_time({HEALTHY}[1d:10m]) > 0"
        ),
        "GpuPodsPendingTooLong": (
            "max by (namespace, pod) (kube_pod_status_phase"
            f'{{namespace="inference", phase="Pending", pod=~"{WORKERS}"}}) == 1 '
            "and on (namespace, pod) max by (namespace, pod) (kube_pod_container_resource_requests"
            f'{{namespace="inference", resource="nvidia_com_gpu", pod=~"{WORKERS}"}}) > 0'
        ),
    }


def test_alert_durations_severities_and_annotations(rules: dict[str, dict[str, Any]]) -> None:
    assert {name: (r["for"], r["labels"]["severity"]) for name, r in rules.items()} == {
        "RayVllmKvCacheNearlyFull": ("5m", "warning"),
        "RayVllmWaitingQueueGrowing": ("10m", "warning"),
        "RayVllmTimeToFirstTokenAboveSlo": ("10m", "critical"),
        "RayVllmInterTokenLatencyAboveSlo": ("10m", "critical"),
        "RayVllmPreemptionsRising": ("15m", "warning"),
        "RayVllmEngineStalled": ("2m", "critical"),
        "RayServeTargetDown": ("5m", "critical"),
        "RayServeNoHealthyReplica": ("1m", "critical"),
        # The planned cold start, 596 s, rounded up.
        "GpuPodsPendingTooLong": ("10m", "warning"),
    }
    for rule in rules.values():
        assert set(rule["annotations"]) == {"summary", "description", "runbook"}
        assert all(v and "\n" not in v for v in rule["annotations"].values())
    assert rules["RayVllmTimeToFirstTokenAboveSlo"]["annotations"]["summary"] == (
        "vLLM TTFT p99 above the 1 s SLO (Ray Serve)"
    )
    assert "{{ $labels.ray_io_node_type }}" in rules["RayServeTargetDown"]["annotations"]["description"]


def test_thresholds_follow_the_props() -> None:
    from llm_eks.manifests.ray_monitoring import alert_rules

    rules = {r["alert"]: r for r in alert_rules(base_props(ttft_p99_seconds=0.25, kv_cache_usage_threshold=0.9))}
    assert rules["RayVllmTimeToFirstTokenAboveSlo"]["expr"].endswith("[5m]))) > 0.25")
    assert rules["RayVllmKvCacheNearlyFull"]["expr"].endswith(") > 0.9")


def test_every_emitted_expression_uses_current_ray_names(synthesized: tuple[RayMonitoringChart, Any]) -> None:
    expressions = synthesized[0].promql()
    assert len(expressions) > 25
    for where, expr in expressions:
        assert check_promql(expr) == [], where
        # Ray's names only: vLLM's own /metrics names do not exist in a Ray cluster.
        assert vllm_names(expr) == [], where
        assert set(ray_names(expr)) <= ray_series_names(), where
        # WorkerId is no longer exported by default (Ray >= 2.53).
        assert "WorkerId" not in expr, where


def test_dashboard_json_shape(dashboard: dict[str, Any], objects: dict[tuple[str, str], dict[str, Any]]) -> None:
    assert_dashboard_shape(dashboard, objects, NAME)
    assert dashboard["tags"] == ["llm-eks", "vllm", "ray-serve"]
    assert dashboard["title"] == f"LLM serving: {MODEL} ({NAME}, Ray Serve)"
    assert "ray_vllm_*" in dashboard["description"]


def test_dashboard_panels_and_queries(dashboard: dict[str, Any]) -> None:
    queries: dict[str, list[str]] = {}
    for title, expr in panel_queries(dashboard):
        queries.setdefault(title, []).append(expr)
    assert list(queries) == [
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
        "Serve replicas",
        "Serve router queue",
        "HTTP requests in flight (Serve proxies)",
        "HTTP latency (Serve proxy)",
        "HTTP errors",
        "GPU utilization",
        "GPU memory used",
    ]
    replicas = f"sum(ray_serve_deployment_replica_healthy{DEPLOYMENT})"
    assert queries["Ready replicas"] == [replicas]
    tokens = f"sum(rate(ray_vllm_generation_tokens_total{SEL}{RATE}))"
    assert queries["Cost per 1M output tokens"] == [f"1.861 * {replicas} / (({tokens}) * 3600 / 1e6 > 0)"]
    assert queries["Time to first token"] == [
        f"histogram_quantile({q}, sum by (le) (rate(ray_vllm_time_to_first_token_seconds_bucket{SEL}{RATE})))"
        for q in ("0.5", "0.9", "0.99")
    ]
    assert queries["Queue depth"] == [
        f"sum(ray_vllm_num_requests_waiting{SEL})",
        f"sum(ray_vllm_num_requests_running{SEL})",
    ]
    assert queries["KV-cache usage"] == [f"max by (pod) (ray_vllm_kv_cache_usage_perc{SEL})"]
    assert queries["Serve replicas"] == [f"sum by (deployment) (ray_serve_deployment_replica_healthy{APP})"]
    assert queries["Serve router queue"] == [f"sum(ray_serve_deployment_queued_queries{DEPLOYMENT})"]
    assert queries["HTTP requests in flight (Serve proxies)"] == [f"sum(ray_serve_num_ongoing_http_requests{JOB})"]
    assert queries["HTTP latency (Serve proxy)"] == [
        f"histogram_quantile({q}, sum by (le) (rate(ray_serve_http_request_latency_ms_bucket{APP}{RATE})))"
        for q in ("0.5", "0.9", "0.99")
    ]
    assert queries["HTTP errors"] == [f"sum by (error_code) (rate(ray_serve_num_http_error_requests_total{APP}{RATE}))"]
    assert queries["GPU utilization"] == ['avg by (Hostname, gpu) (DCGM_FI_DEV_GPU_UTIL{namespace="inference"})']


def test_dashboard_without_dcgm_has_no_gpu_panels() -> None:
    board = build_dashboard(dashboard_spec(base_props(dcgm=False)))
    assert not any("DCGM" in expr for _, expr in panel_queries(board))
    assert board["panels"][-1]["title"] == "HTTP errors"


def test_ray_names_map_from_the_vllm_tables() -> None:
    assert ray_exported("vllm:kv_cache_usage_perc") == "ray_vllm_kv_cache_usage_perc"
    assert ray_exported("vllm:generation_tokens_total") == "ray_vllm_generation_tokens_total"
    assert ray_exported("vllm:iteration_tokens_total_bucket") == "ray_vllm_iteration_tokens_total_bucket"
    series = ray_series_names()
    assert {ray_exported(s) for s in vllm_series_names()} <= series
    assert {"ray_serve_num_http_requests_total", "ray_serve_http_request_latency_ms_bucket"} <= series
    assert "ray_vllm_generation_tokens" not in series
    # One table per engine family: the Ray forms are derived, never listed.
    assert len(series) == len(vllm_series_names()) + sum(
        {"gauge": 1, "counter": 1, "histogram": 3}[kind] for kind in RAY_SERVE_METRICS.values()
    )
    assert not {ray_exported(name) for name in REMOVED_VLLM_METRICS} & series
    assert all(ray_exported(name).startswith("ray_vllm_") for name in CURRENT_VLLM_METRICS)


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        (
            "avg(ray_vllm_gpu_cache_usage_perc)",
            "ray_vllm_gpu_cache_usage_perc was removed from vLLM; use ray_vllm_kv_cache_usage_perc",
        ),
        (
            "sum(ray_vllm_num_requests_swapped)",
            "ray_vllm_num_requests_swapped was removed from vLLM; V1 never swaps; watch ray_vllm_num_preemptions_total",
        ),
        (
            "ray_vllm_gpu_prefix_cache_hit_rate",
            "ray_vllm_gpu_prefix_cache_hit_rate was removed from vLLM; use rate(ray_vllm_prefix_cache_hits_total) / "
            "rate(ray_vllm_prefix_cache_queries_total)",
        ),
        (
            "rate(ray_vllm_generation_tokens[5m])",
            "ray_vllm_generation_tokens is a counter and is exposed only as ray_vllm_generation_tokens_total",
        ),
        (
            "ray_vllm_time_to_first_token_seconds",
            "ray_vllm_time_to_first_token_seconds is a histogram and is exposed only as "
            "ray_vllm_time_to_first_token_seconds_bucket, ray_vllm_time_to_first_token_seconds_sum and "
            "ray_vllm_time_to_first_token_seconds_count",
        ),
        (
            "ray_vllm_foo",
            "ray_vllm_foo is not a current vLLM metric (see llm_eks.manifests.promql.CURRENT_VLLM_METRICS)",
        ),
        (
            "rate(ray_serve_num_http_requests[5m])",
            "ray_serve_num_http_requests is a counter and is exposed only as ray_serve_num_http_requests_total",
        ),
        (
            "ray_serve_http_request_latency_ms",
            "ray_serve_http_request_latency_ms is a histogram and is exposed only as "
            "ray_serve_http_request_latency_ms_bucket, ray_serve_http_request_latency_ms_sum and "
            "ray_serve_http_request_latency_ms_count",
        ),
        (
            "sum(ray_serve_num_ongoing_requests)",
            "ray_serve_num_ongoing_requests is not a Ray Serve metric llm-eks knows (see "
            "llm_eks.manifests.promql.RAY_SERVE_METRICS)",
        ),
        (
            '{__name__="ray_vllm_gpu_cache_usage_perc"}',
            "ray_vllm_gpu_cache_usage_perc was removed from vLLM; use ray_vllm_kv_cache_usage_perc",
        ),
    ],
)
def test_check_promql_reports_ray_names(expr: str, problem: str) -> None:
    assert check_promql(expr) == [problem]


def test_label_values_recording_rules_and_other_ray_metrics_are_not_checked() -> None:
    expr = (
        'sum(ray_vllm_num_requests_waiting{model_name="ray_vllm_gpu_cache_usage_perc"})'
        " + llm_eks:ray_vllm_x:rate5m + ray_vllm_x:rate5m + xray_serve_foo"
        ' + sum(ray_node_gpus_utilization{ray_io_cluster="c"}) + count(ray_serve_deployment_replica_healthy)'
    )
    assert ray_names(expr) == ["ray_vllm_num_requests_waiting", "ray_serve_deployment_replica_healthy"]
    assert check_promql(expr) == []


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"name": "Ray_8B"},
            "ray_monitoring.name: 'Ray_8B' is not allowed; must be a DNS-1035 label: lowercase letters, digits and "
            "'-', starting with a letter, at most 63 characters [LLMEKS-E400]",
        ),
        (
            {"model_id": 'bad"id'},
            "ray_monitoring.model_id: 'bad\"id' is not allowed; must be 1-253 characters of letters, digits and "
            "._/:@+- starting with a letter or digit [LLMEKS-E400]",
        ),
        (
            {"application": "my app"},
            "ray_monitoring.application: 'my app' is not allowed; must be a Serve application name (letters, digits, "
            "._-) [LLMEKS-E410]",
        ),
        (
            {"ttft_p99_seconds": -1.0},
            "ray_monitoring.targets.ttft_p99_seconds: -1.0 is not allowed; must be a positive number of "
            "seconds, at most 600 [LLMEKS-E410]",
        ),
        (
            {"itl_p99_seconds": 0},
            "ray_monitoring.targets.itl_p99_seconds: 0 is not allowed; must be a positive number of seconds, at "
            "most 600 [LLMEKS-E410]",
        ),
        (
            {"cost_per_hour_per_replica": float("inf")},
            "ray_monitoring.targets.cost_per_hour_per_replica: inf is not allowed; must be a positive USD amount"
            " [LLMEKS-E410]",
        ),
        (
            {"queue_waiting_threshold": 0},
            "ray_monitoring.targets.queue_waiting_threshold: 0 is not allowed; must be a positive whole number "
            "of requests [LLMEKS-E410]",
        ),
        (
            {"kv_cache_usage_threshold": 1.0},
            "ray_monitoring.targets.kv_cache_usage_threshold: 1.0 is not allowed; must be between 0 and 1 (exclusive)"
            " [LLMEKS-E410]",
        ),
        (
            {"scrape_interval": "15"},
            "ray_monitoring.targets.scrape_interval: '15' is not allowed; must be a Prometheus duration such as "
            "15s or 1m [LLMEKS-E410]",
        ),
        (
            {"dcgm_namespace": "GPU"},
            "ray_monitoring.targets.dcgm_namespace: 'GPU' is not allowed; must be a DNS-1123 label: lowercase letters, "
            "digits and '-', at most 63 characters [LLMEKS-E400]",
        ),
        (
            {"dcgm_service_labels": {}},
            "ray_monitoring.targets.dcgm_service_labels: {} is not allowed; must select the DCGM exporter Service"
            " [LLMEKS-E410]",
        ),
    ],
)
def test_bad_props_fail_with_one_line(overrides: dict[str, Any], message: str) -> None:
    import cdk8s

    with pytest.raises(ConfigError) as err:
        RayMonitoringChart(cdk8s.App(), "ray-monitoring", base_props(**overrides))
    assert str(err.value) == message
    assert "\n" not in str(err.value)


def test_the_five_engine_alerts_are_the_vllm_charts_in_rays_names() -> None:
    """One alert builder: the Ray chart's engine alerts are the vLLM chart's with Ray's series and alert names."""
    from llm_eks.manifests.monitoring import MonitoringProps
    from llm_eks.manifests.monitoring import alert_rules as vllm_alert_rules
    from llm_eks.manifests.ray_monitoring import alert_rules

    ray = base_props()
    vllm = MonitoringProps(name="vllm-x", served_model_name=ray.model_id, targets=ray.targets)
    ray_rules = {r["alert"]: r for r in alert_rules(ray)}
    for rule in vllm_alert_rules(vllm)[:5]:
        twin = ray_rules["Ray" + rule["alert"]]
        assert twin["expr"] == re.sub(r"vllm:(\w+)", lambda m: "ray_vllm_" + m.group(1), rule["expr"])
        assert (twin["for"], twin["labels"]) == (rule["for"], rule["labels"])
        assert twin["annotations"]["summary"] == rule["annotations"]["summary"] + " (Ray Serve)"
    # The stall alert too, told apart per Serve replica as well (several may share a pod).
    stalled = next(r for r in vllm_alert_rules(vllm) if r["alert"] == "VllmEngineStalled")
    twin = ray_rules["RayVllmEngineStalled"]
    assert twin["expr"] == re.sub(r"vllm:(\w+)", lambda m: "ray_vllm_" + m.group(1), stalled["expr"]).replace(
        "namespace, pod, engine", "namespace, pod, engine, ReplicaId"
    )


def test_targets_must_be_a_monitoring_targets() -> None:
    import cdk8s

    with pytest.raises(ConfigError) as err:
        RayMonitoringChart(cdk8s.App(), "ray-monitoring", base_props(targets={"ttft_p99_seconds": 1.0}))
    assert str(err.value) == (
        "ray_monitoring.targets: {'ttft_p99_seconds': 1.0} is not allowed; must be a MonitoringTargets [LLMEKS-E410]"
    )
