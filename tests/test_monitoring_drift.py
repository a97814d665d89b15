"""The drift rules (llm_eks.manifests.monitoring_drift) as a reviewer reads them: which plan figures each workload
records, the KV-size pattern, and the one-line errors. What the rules do on real series is
tests/test_promtool_rules.py's job (promtool)."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

import pytest

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.infra.workloads import build_workloads
from llm_eks.manifests.monitoring import MonitoringProps
from llm_eks.manifests.monitoring_drift import integers_below, kv_cache_alert_limit
from llm_eks.manifests.monitoring_targets import MonitoringTargets

TARGETS = MonitoringTargets(
    ttft_p99_seconds=1.0, itl_p99_seconds=0.05, cost_per_hour_per_replica=1.0, queue_waiting_threshold=8
)
PROPS = MonitoringProps(name="vllm-x", served_model_name="org/model", targets=TARGETS)


def _groups(props: MonitoringProps) -> dict[str, list[dict[str, Any]]]:
    import cdk8s

    from llm_eks.manifests.monitoring import MonitoringChart

    (rule,) = [
        o
        for o in MonitoringChart(cdk8s.App(), "m", props).to_json()
        if o["kind"] == "PrometheusRule" and o["metadata"]["name"] == f"{props.name}-alerts"
    ]
    return {g["name"]: g["rules"] for g in rule["spec"]["groups"]}


def test_integers_below_matches_exactly_the_smaller_integers() -> None:
    for limit in (*range(1, 1200), 29_780, 100_000, 285_034, 999_999, 1_000_000):
        pattern = re.compile(integers_below(limit))
        rng = random.Random(limit)
        numbers = sorted({0, limit - 1, limit, limit + 1, 10 * limit, *(rng.randrange(3 * limit) for _ in range(50))})
        assert [n for n in numbers if pattern.fullmatch(str(n))] == [n for n in numbers if n < limit], limit
        # vLLM writes str(int): never a sign, a leading zero, a fraction or "None".
        assert not any(pattern.fullmatch(text) for text in ("", "-1", "00", f"0{limit - 1}", "1.0", "None")), limit


def test_kv_cache_alert_limit_is_ninety_percent_rounded_up() -> None:
    assert kv_cache_alert_limit(33_088) == 29_780  # 29,779.2 tokens: 29,779 is below it, 29,780 is not
    assert kv_cache_alert_limit(10) == 9  # exactly 90 %: 9 tokens is not below it, 8 is


def test_without_plan_figures_only_the_observed_quantiles_are_recorded() -> None:
    groups = _groups(PROPS)
    assert list(groups) == ["vllm-x.alerts", "vllm-x.drift"]
    assert [r.get("record") or r["alert"] for r in groups["vllm-x.drift"]] == [
        "llm_eks:itl_seconds:p50_10m",
        "llm_eks:itl_seconds:p99_10m",
        "llm_eks:ttft_seconds:p50_10m",
        "llm_eks:ttft_seconds:p99_10m",
    ]


def test_each_plan_figure_brings_its_record_and_alert() -> None:
    props = dataclasses.replace(PROPS, planned_kv_cache_tokens=33_088, planned_itl_seconds=0.0411)
    drift = {r.get("record") or r["alert"]: r for r in _groups(props)["vllm-x.drift"]}
    assert drift["llm_eks:plan_kv_cache_tokens"] == {
        "record": "llm_eks:plan_kv_cache_tokens",
        "expr": "vector(33088)",
        "labels": {"namespace": "inference", "model_name": "org/model"},
    }
    assert drift["llm_eks:plan_itl_seconds"]["expr"] == "vector(0.0411)"
    assert "llm_eks:plan_ttft_seconds" not in drift and "VllmTimeToFirstTokenAbovePlan" not in drift
    assert drift["VllmInterTokenLatencyAbovePlan"]["for"] == "30m"
    assert drift["VllmInterTokenLatencyAbovePlan"]["annotations"]["description"] == (
        "p50 inter-token latency of org/model over 10m is {{ $value | humanizeDuration }}; the plan estimated "
        "41.1 ms (alert above 61.65 ms for 30m)."
    )
    assert drift["VllmKvCacheBelowPlan"]["expr"].startswith(
        'max by (namespace, pod, kv_cache_size_tokens) (vllm:cache_config_info{namespace="inference", '
        'job="vllm-x", kv_cache_size_tokens=~"'
    )


@pytest.mark.parametrize("engine", ["vllm", "ray-serve"])
def test_monitoring_props_carry_the_plans_figures(engine: str) -> None:
    config = parse_environment("qa", {"workload": {"model": "meta-llama/Llama-3.1-8B-Instruct", "engine": engine}})
    plans = plan_workloads(config)
    ((plan,), (workload,)) = plans, build_workloads(config, plans)
    props = workload.monitoring
    assert props.planned_kv_cache_tokens == plan.kv_cache_tokens
    assert props.planned_itl_seconds == plan.itl_estimate_ms / 1000
    ttft = getattr(plan, "ttft_estimate_ms", None)
    assert props.planned_ttft_seconds == (ttft / 1000 if ttft else None)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"planned_kv_cache_tokens": 0},
            "monitoring.planned_kv_cache_tokens: 0 is not allowed; must be a positive whole number or None"
            " [LLMEKS-E410]",
        ),
        (
            {"planned_itl_seconds": -0.04},
            "monitoring.planned_itl_seconds: -0.04 is not allowed; must be a positive number of seconds or None"
            " [LLMEKS-E410]",
        ),
        (
            {"planned_ttft_seconds": float("nan")},
            "monitoring.planned_ttft_seconds: nan is not allowed; must be a positive number of seconds or None"
            " [LLMEKS-E410]",
        ),
    ],
)
def test_bad_plan_figures_fail_with_one_line(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _groups(dataclasses.replace(PROPS, **overrides))
    assert str(err.value) == message
