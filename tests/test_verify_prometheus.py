"""The PromQL verify and the scalers depend on, executed by Prometheus itself: a real Prometheus server (Debian's
2.42, tests/prometheus_server.py) holding each default environment's vLLM 0.33 series, backfilled from their
OpenMetrics text, answers every query `llm-eks verify` sends, every KEDA trigger's query and every expression of the
environments' PrometheusRules, with the values the series were written to give."""

from __future__ import annotations

from typing import Any

import pytest

from llm_eks.config import parse_environment
from llm_eks.manifests.autoscaling import kv_cache_query, waiting_query
from llm_eks.verify.prometheus import workload_queries
from tests.conftest import CDK_JSON, ENVIRONMENTS
from tests.prometheus_server import PrometheusServer
from tests.verify_cluster import StubCluster, rendered_objects
from tests.verify_metrics import GAPS, OUTPUT_TOKENS, PROMPT_TOKENS, REQUESTS, series
from tests.verify_run import fresh, healthy_clusters


@pytest.fixture(scope="module")
def clusters(prometheus: PrometheusServer) -> dict[str, StubCluster]:
    return healthy_clusters(prometheus, *ENVIRONMENTS)


def _at(prometheus: PrometheusServer, cluster: StubCluster) -> float:
    return prometheus.at(series(cluster))


@pytest.mark.parametrize("env", ENVIRONMENTS)
@pytest.mark.parametrize("window", ["1h", "10m"])
def test_every_verify_query_answers_what_the_series_hold(
    prometheus: PrometheusServer, clusters: dict[str, StubCluster], env: str, window: str
) -> None:
    cluster = clusters[env]
    at = _at(prometheus, cluster)
    share = {"1h": 1.0, "10m": 1 / 6}[window]
    for w in cluster.plan.workloads:
        servers = [t for (namespace, _), t in cluster.metrics.items() if namespace == w.namespace]
        q = workload_queries(w, window)
        answers = {name: prometheus.value(expr, at) for name, expr in q.items()}
        # One cache_config_info per server, carrying the KV tokens vLLM sized; every other query is one number.
        assert len(answers.pop("kv")) == len(servers)
        assert all(len(v) == 1 for v in answers.values()), answers
        value = {name: v[0][1] for name, v in answers.items()}
        assert value["ttft_count"] == pytest.approx(REQUESTS * len(servers) * share)
        assert value["itl_count"] == pytest.approx(GAPS * len(servers) * share)
        # Little's law over the inference-time histogram gives the running requests per engine.
        assert value["running"] == pytest.approx(w.target_concurrency / 2)
        assert (value["input_tokens"], value["output_tokens"]) == pytest.approx((PROMPT_TOKENS, OUTPUT_TOKENS))
        assert value["output_rate"] == pytest.approx(REQUESTS * OUTPUT_TOKENS * len(servers) / 3600)
        # The quantiles fall where the observations were written: the median within 10 % of the central value
        # (bucket interpolation aside), the p99 at or below the SLO.
        for check, slo in (("ttft", w.slo_ttft_p99_ms), ("itl", w.slo_itl_p99_ms)):
            assert 0 < value[f"{check}_median"] <= value[f"{check}_p99"] <= slo / 1000


def test_the_keda_triggers_return_one_element_each(
    prometheus: PrometheusServer, clusters: dict[str, StubCluster]
) -> None:
    """KEDA takes the first element of the trigger's answer: each query aggregates to exactly one, whatever the
    number of servers, and reads what they report (waiting requests summed, KV-cache use averaged)."""
    for env, cluster in clusters.items():
        changed = fresh(clusters, env)
        for i, target in enumerate(changed.metrics.values()):
            target.load.waiting, target.load.kv_usage = 3.0 + i, 0.4 + 0.2 * i
        at = _at(prometheus, changed)
        for w in cluster.plan.workloads:
            if w.engine != "vllm":
                continue
            servers = [t for (namespace, _), t in changed.metrics.items() if namespace == w.namespace]
            ((_, waiting),) = prometheus.value(waiting_query(w.served_model_name), at)
            ((_, usage),) = prometheus.value(kv_cache_query(w.served_model_name), at)
            assert waiting == pytest.approx(sum(t.load.waiting for t in servers)), env
            assert usage == pytest.approx(sum(t.load.kv_usage for t in servers) / len(servers)), env


def _rules(env: str) -> list[dict[str, Any]]:
    objects = rendered_objects(parse_environment(env, CDK_JSON["context"]["environments"][env]))
    return [
        rule
        for o in objects
        # The gateway's own alerts read series this stand-in does not hold (Envoy, the pickers, kube-state-metrics):
        # tests/test_gateway_observability.py runs them with promtool.
        if o["kind"] == "PrometheusRule" and o["metadata"]["namespace"] != "inference-gateway"
        for group in o["spec"]["groups"]
        for rule in group["rules"]
    ]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_rule_expression_runs_and_a_healthy_environment_fires_nothing(
    prometheus: PrometheusServer, clusters: dict[str, StubCluster], env: str
) -> None:
    at = _at(prometheus, clusters[env])
    rules = _rules(env)
    assert rules
    for rule in rules:
        answer = prometheus.value(rule["expr"], at)
        if "alert" in rule:
            assert answer == [], (rule["alert"], answer)


def test_the_kv_cache_alert_fires_on_a_smaller_cache(
    prometheus: PrometheusServer, clusters: dict[str, StubCluster]
) -> None:
    """The drift alert matches vllm:cache_config_info's kv_cache_size_tokens label against a regular expression of
    the integers below the bound: on the real series a cache 20 % smaller than planned is selected."""
    cluster = fresh(clusters, "dev")
    for target in cluster.metrics.values():
        target.load.kv_tokens = int(target.load.kv_tokens * 0.8)
    at = _at(prometheus, cluster)
    (alert,) = [r for r in _rules("dev") if r.get("alert") == "VllmKvCacheBelowPlan"]
    ((labels, _),) = prometheus.value(alert["expr"], at)
    assert labels["namespace"] == "inference"
