"""VllmAutoscalingChart: the KEDA ScaledObject, its PromQL and its HPA behavior."""

from __future__ import annotations

import re
from typing import Any

import pytest

from llm_eks.error_codes import E130
from llm_eks.errors import ConfigError
from llm_eks.manifests.autoscaling import (
    PROMETHEUS_URL,
    AutoscalingProps,
    ScaleToZeroSchedule,
    VllmAutoscalingChart,
    validate_autoscaling_props,
)
from llm_eks.manifests.checks import check_objects
from tests.chart_helpers import DESIGN_VLLM_METRICS
from tests.coded import raises_code
from tests.kube_schema import assert_valid
from tests.test_vllm_chart import NAME, base_props

# DESIGN.md: vLLM V1 metric names, current and removed.
CURRENT_METRICS = set(DESIGN_VLLM_METRICS)
REMOVED_METRIC_PATTERNS = (
    r"vllm:gpu_cache_usage_perc",
    r"vllm:gpu_prefix_cache_\w+",
    r"vllm:time_per_output_token_seconds",
    r"vllm:\w*_hit_rate",
    r"vllm:num_requests_swapped",
    r"vllm:avg_\w*_throughput_toks_per_s",
)

PROPS = AutoscalingProps(max_replicas=4, waiting_requests_per_replica=4, kv_cache_usage_target=0.8)
SCHEDULE = ScaleToZeroSchedule(timezone="Europe/Paris", start="30 6 * * 1-5", end="0 20 * * 1-5", replicas=1)


def synth(autoscaling: AutoscalingProps, **vllm_overrides: Any) -> dict[str, Any]:
    import cdk8s

    chart = VllmAutoscalingChart(cdk8s.App(), "autoscaling", base_props(**vllm_overrides), autoscaling)
    (scaled_object,) = chart.to_json()
    return scaled_object


@pytest.fixture(scope="module")
def scaled_object() -> dict[str, Any]:
    return synth(PROPS)


@pytest.fixture(scope="module")
def scheduled() -> dict[str, Any]:
    return synth(
        AutoscalingProps(
            max_replicas=2,
            waiting_requests_per_replica=4,
            kv_cache_usage_target=0.8,
            min_replicas=0,
            scale_to_zero=SCHEDULE,
        ),
        replicas=0,
    )


def test_valid_against_keda_crd(scaled_object: dict[str, Any], scheduled: dict[str, Any]) -> None:
    assert_valid([scaled_object, scheduled])


def test_targets_the_vllm_deployment(scaled_object: dict[str, Any]) -> None:
    assert scaled_object["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled_object["metadata"]["name"] == NAME
    assert scaled_object["metadata"]["namespace"] == "inference"
    spec = scaled_object["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": NAME}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 4)
    assert spec["pollingInterval"] == 15
    assert spec["cooldownPeriod"] == 900
    assert spec["advanced"]["horizontalPodAutoscalerConfig"]["name"] == NAME


def test_trigger_queries_exactly(scaled_object: dict[str, Any]) -> None:
    assert scaled_object["spec"]["triggers"] == [
        {
            "type": "prometheus",
            "name": "waiting-requests",
            "metricType": "AverageValue",
            "metadata": {
                "serverAddress": "http://thanos-query.monitoring.svc.cluster.local:10902",
                "query": 'sum(vllm:num_requests_waiting{model_name="llama-3.1-8b"}) '
                'or on() (sum(kube_deployment_status_replicas_ready{namespace="inference", '
                f'deployment="{NAME}"}}) == 0)',
                "threshold": "4",
                "ignoreNullValues": "false",
            },
        },
        {
            "type": "prometheus",
            "name": "kv-cache-usage",
            "metricType": "Value",
            "metadata": {
                "serverAddress": "http://thanos-query.monitoring.svc.cluster.local:10902",
                "query": 'avg(vllm:kv_cache_usage_perc{model_name="llama-3.1-8b"}) '
                'or on() (sum(kube_deployment_status_replicas_ready{namespace="inference", '
                f'deployment="{NAME}"}}) == 0)',
                "threshold": "0.8",
                "ignoreNullValues": "false",
            },
        },
    ]
    assert PROMETHEUS_URL == "http://thanos-query.monitoring.svc.cluster.local:10902"


def test_every_query_returns_one_element_and_uses_current_metric_names(
    scaled_object: dict[str, Any], scheduled: dict[str, Any]
) -> None:
    queries = [
        t["metadata"]["query"]
        for obj in (scaled_object, scheduled)
        for t in obj["spec"]["triggers"]
        if t["type"] == "prometheus"
    ]
    assert len(queries) == 4
    for query in queries:
        # One aggregation around the whole selector (a single-element vector, whatever the pod count), or a 0 that
        # holds only while no replica is ready.
        assert re.match(r'(sum|avg)\(vllm:[a-z_]+\{model_name="[^"]+"\}\) or on\(\) \(sum\(kube_', query), query
        assert not check_objects([obj for obj in (scaled_object, scheduled)]), query
        assert set(re.findall(r"vllm:\w+", query)) <= CURRENT_METRICS
        for pattern in REMOVED_METRIC_PATTERNS:
            assert not re.search(pattern, query), (pattern, query)


def test_fallback_holds_the_current_count_never_below_the_minimum(
    scaled_object: dict[str, Any], scheduled: dict[str, Any]
) -> None:
    assert scaled_object["spec"]["fallback"] == {
        "failureThreshold": 3,
        "replicas": 1,
        "behavior": "currentReplicasIfHigher",
    }
    assert scheduled["spec"]["fallback"]["replicas"] == 0


def test_a_sleeping_model_reads_zero_even_without_kube_state_metrics(scheduled: dict[str, Any]) -> None:
    (waiting, _, _) = scheduled["spec"]["triggers"]
    assert waiting["metadata"]["query"].endswith(
        f' or on() (vector(0) unless on() count(kube_deployment_status_replicas_ready{{namespace="inference", '
        f'deployment="{NAME}"}}))'
    )


def test_a_replica_spanning_nodes_is_guarded_by_its_leader_statefulset() -> None:
    obj = synth(
        PROPS,
        nodes_per_replica=2,
        accelerators_per_node=4,
        tensor_parallel_size=4,
        pipeline_parallel_size=2,
        accelerators_per_pod=4,
        ingress=None,
    )
    for trigger in obj["spec"]["triggers"]:
        assert (
            f'kube_statefulset_status_replicas_ready{{namespace="inference", statefulset="{NAME}"}}'
            in (trigger["metadata"]["query"])
        )


def test_behavior_fast_up_slow_down(scaled_object: dict[str, Any]) -> None:
    behavior = scaled_object["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleUp"] == {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Max",
        "policies": [
            {"type": "Percent", "value": 100, "periodSeconds": 60},
            {"type": "Pods", "value": 2, "periodSeconds": 60},
        ],
    }
    assert behavior["scaleDown"] == {
        "stabilizationWindowSeconds": 600,
        "selectPolicy": "Min",
        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 300}],
    }
    # The down window covers the planner's cold start (600 s here).
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] >= base_props().startup_seconds


def test_scale_to_zero_is_a_working_hours_schedule(scheduled: dict[str, Any]) -> None:
    spec = scheduled["spec"]
    assert spec["minReplicaCount"] == 0
    assert spec["triggers"][-1] == {
        "type": "cron",
        "name": "working-hours",
        "metadata": {
            "timezone": "Europe/Paris",
            "start": "30 6 * * 1-5",
            "end": "0 20 * * 1-5",
            "desiredReplicas": "1",
        },
    }


@pytest.mark.parametrize(
    ("autoscaling", "vllm_overrides", "message"),
    [
        (
            AutoscalingProps(min_replicas=3, max_replicas=2, waiting_requests_per_replica=4, kv_cache_usage_target=0.8),
            {},
            "autoscaling.min_replicas: 3 is not allowed; must be at most max_replicas (2) [LLMEKS-E130]",
        ),
        (
            AutoscalingProps(max_replicas=0, waiting_requests_per_replica=4, kv_cache_usage_target=0.8),
            {},
            "autoscaling.max_replicas: 0 is not allowed; must be at least 1 [LLMEKS-E130]",
        ),
        (
            AutoscalingProps(max_replicas=2, waiting_requests_per_replica=0, kv_cache_usage_target=0.8),
            {},
            "autoscaling.waiting_requests_per_replica: 0 is not allowed; must be above 0 [LLMEKS-E130]",
        ),
        (
            AutoscalingProps(max_replicas=2, waiting_requests_per_replica=4, kv_cache_usage_target=80),
            {},
            "autoscaling.kv_cache_usage_target: 80 is not allowed; must be above 0 and at most 1 "
            "(vllm:kv_cache_usage_perc is a fraction) [LLMEKS-E130]",
        ),
        (
            AutoscalingProps(
                max_replicas=2,
                waiting_requests_per_replica=4,
                kv_cache_usage_target=0.8,
                scale_down_stabilization_seconds=300,
            ),
            {},
            "autoscaling.scale_down_stabilization_seconds: 300 is not allowed; must be at least startup_seconds "
            "(600): removing a replica sooner than one starts again thrashes GPU nodes [LLMEKS-E130]",
        ),
        (
            AutoscalingProps(min_replicas=0, max_replicas=2, waiting_requests_per_replica=4, kv_cache_usage_target=0.8),
            {"replicas": 0},
            "autoscaling.min_replicas: 0 is not allowed without scale_to_zero or held_requests; vLLM's metrics "
            "vanish with its last pod, so nothing would ever wake it: set a scale_to_zero schedule (KEDA cron), or "
            "put the workload behind the gateway, whose endpoint picker holds the requests that wake it [LLMEKS-E130]",
        ),
        (
            AutoscalingProps(
                max_replicas=2, waiting_requests_per_replica=4, kv_cache_usage_target=0.8, scale_to_zero=SCHEDULE
            ),
            {},
            "autoscaling.min_replicas: 1 is not allowed with scale_to_zero; must be 0 (the schedule is what "
            "brings replicas back) [LLMEKS-E130]",
        ),
        (
            AutoscalingProps(
                min_replicas=0,
                max_replicas=2,
                waiting_requests_per_replica=4,
                kv_cache_usage_target=0.8,
                scale_to_zero=ScaleToZeroSchedule("Europe/Paris", "0 7 * * *", "0 7 * * *", 1),
            ),
            {},
            "autoscaling.scale_to_zero.end: '0 7 * * *' is not allowed; must differ from start (KEDA rejects it)"
            " [LLMEKS-E130]",
        ),
        (
            AutoscalingProps(
                min_replicas=0,
                max_replicas=2,
                waiting_requests_per_replica=4,
                kv_cache_usage_target=0.8,
                scale_to_zero=ScaleToZeroSchedule("Europe/Paris", "7am", "0 20 * * *", 1),
            ),
            {},
            "autoscaling.scale_to_zero.start: '7am' is not allowed; must be a 5-field cron expression such as "
            "'0 7 * * 1-5' [LLMEKS-E130]",
        ),
        (
            AutoscalingProps(max_replicas=4, waiting_requests_per_replica=4, kv_cache_usage_target=0.8),
            {"replicas": 5},
            "replicas: 5 is not allowed; must be between autoscaling.min_replicas (1) and autoscaling.max_replicas (4)"
            " [LLMEKS-E130]",
        ),
    ],
)
def test_bad_props_get_one_line_errors(
    autoscaling: AutoscalingProps, vllm_overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        validate_autoscaling_props(autoscaling, base_props(**vllm_overrides))
    assert str(err.value) == message


def test_chart_refuses_scale_to_zero_without_a_signal() -> None:
    import cdk8s

    with raises_code(E130, match=r"^autoscaling\.min_replicas: 0 is not allowed without scale_to_zero"):
        VllmAutoscalingChart(
            cdk8s.App(),
            "autoscaling",
            base_props(replicas=0),
            AutoscalingProps(min_replicas=0, max_replicas=2, waiting_requests_per_replica=4, kv_cache_usage_target=0.8),
        )
