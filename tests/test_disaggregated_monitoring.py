"""A disaggregated workload's monitoring: both pools report the same model name, so the dashboard, the alerts and the
drift rules of the example `disaggregated` select each pool by its scrape job (the decode Service's name and
`<name>-prefill`'s, both scraped by the workload's one ServiceMonitor), and read the KV transfer from NIXL's series,
whose names are vLLM 0.33's own (read here in the wheel's source)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import cdk8s
import pytest

from llm_eks.errors import ConfigError
from llm_eks.manifests.dashboard import panel_queries
from llm_eks.manifests.monitoring import MonitoringChart
from llm_eks.manifests.promql import CURRENT_VLLM_METRICS
from tests.test_disaggregated_serving import NAME, PREFILL, _context, _one, _synth
from tests.test_monitoring_chart import base_props
from tests.upstream_wheels import VLLM, extracted, missing_reason

MODEL = "meta-llama/Llama-3.3-70B-Instruct"
DECODE_SERIES = f'{{namespace="inference", job="{NAME}", model_name="{MODEL}"}}'
PREFILL_SERIES = f'{{namespace="inference", job="{PREFILL}", model_name="{MODEL}"}}'
BOTH_POOLS = f'job=~"{NAME}|{PREFILL}"'
NIXL_STATS = "vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py"
LOGGERS = "vllm/v1/metrics/loggers.py"


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The example "disaggregated" as `cdk synth` in its folder."""
    return _synth(_context(), tmp_path_factory.mktemp("disaggregated-monitoring"))


def test_nixl_and_phase_metric_names_are_registered_by_vllm_0_33() -> None:
    wheel = extracted(VLLM)
    if wheel is None:
        pytest.skip(missing_reason(VLLM))
    nixl = set(re.findall(r'name="(vllm:nixl_\w+)"', (wheel / NIXL_STATS).read_text()))
    listed = {name for name in CURRENT_VLLM_METRICS if name.startswith("vllm:nixl_")}
    assert listed == nixl
    assert len(nixl) == 8
    loggers = set(re.findall(r'name="(vllm:\w+)"', (wheel / LOGGERS).read_text()))
    assert {"vllm:request_prefill_time_seconds", "vllm:inter_token_latency_seconds"} <= loggers


def _dashboard(objects: list[dict[str, Any]]) -> dict[str, Any]:
    config_map = _one(objects, "ConfigMap", f"{NAME}-dashboard")
    return dict(json.loads(config_map["data"][f"{NAME}.json"]))


def _queries(objects: list[dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for title, expr in panel_queries(_dashboard(objects)):
        out.setdefault(title, []).append(expr)
    return out


def _rules(objects: list[dict[str, Any]]) -> dict[str, str]:
    rule = _one(objects, "PrometheusRule", f"{NAME}-alerts")
    return {r.get("alert") or r["record"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}


def test_one_service_monitor_scrapes_both_pools_services(synthesized: list[dict[str, Any]]) -> None:
    monitor = _one(synthesized, "ServiceMonitor", NAME)["spec"]["selector"]["matchLabels"]
    for service in (NAME, PREFILL):
        labels = _one(synthesized, "Service", service)["metadata"]["labels"]
        assert monitor.items() <= labels.items()


def test_dashboard_reads_each_pool_by_its_job(synthesized: list[dict[str, Any]]) -> None:
    q = _queries(synthesized)
    assert all(DECODE_SERIES in e for e in q["Time to first token (decode pool)"])
    assert all(DECODE_SERIES in e for e in q["Inter-token latency (decode pool)"])
    assert all(PREFILL_SERIES in e for e in q["Time to first token (prefill pool)"])
    assert q["Prefill time per request (prefill pool)"][0] == (
        f"histogram_quantile(0.5, sum by (le) (rate(vllm:request_prefill_time_seconds_bucket{PREFILL_SERIES}"
        "[$__rate_interval])))"
    )
    assert q["Queue depth (prefill pool)"] == [
        f"sum(vllm:num_requests_waiting{PREFILL_SERIES})",
        f"sum(vllm:num_requests_running{PREFILL_SERIES})",
    ]
    # Ready replicas and the cost count both pools' servers.
    assert q["Ready replicas"] == [f'count(up{{namespace="inference", {BOTH_POOLS}}} == 1)']
    # No vLLM series of the dashboard mixes the pools: each names one job.
    for title, exprs in q.items():
        for expr in exprs:
            for match in re.finditer(r"vllm:\w+\{([^}]*)\}", expr):
                assert re.search(r'job="[^"]+"', match.group(1)), (title, expr)


def test_kv_transfer_panels(synthesized: list[dict[str, Any]]) -> None:
    q = _queries(synthesized)
    assert q["KV transfer time"] == [
        f"histogram_quantile({p}, sum by (le) (rate(vllm:nixl_xfer_time_seconds_bucket{DECODE_SERIES}"
        "[$__rate_interval])))"
        for p in ("0.5", "0.99")
    ]
    assert q["KV transfer throughput"] == [
        f"sum(rate(vllm:nixl_bytes_transferred_sum{DECODE_SERIES}[$__rate_interval]))"
    ]
    assert q["KV transfer failures"] == [
        f"sum(rate(vllm:nixl_num_failed_transfers_total{DECODE_SERIES}[$__rate_interval]))",
        f"sum(rate(vllm:nixl_num_kv_expired_reqs_total{PREFILL_SERIES}[$__rate_interval]))",
    ]
    panel = next(p for p in _dashboard(synthesized)["panels"] if p["title"] == "KV transfer throughput")
    assert panel["fieldConfig"]["defaults"]["unit"] == "Bps"


def test_alerts_judge_itl_on_the_decode_pool_and_ttft_per_pool(synthesized: list[dict[str, Any]]) -> None:
    rules = _rules(synthesized)
    assert f"vllm:inter_token_latency_seconds_bucket{DECODE_SERIES}" in rules["VllmInterTokenLatencyAboveSlo"]
    ttft = rules["VllmTimeToFirstTokenAboveSlo"]
    assert ttft.startswith("histogram_quantile(0.99, sum by (le, namespace, model_name, job) (")
    assert BOTH_POOLS in ttft
    assert "sum by (namespace, model_name, job)" in rules["VllmWaitingQueueGrowing"]
    assert rules["VllmTargetDown"] == f'up{{namespace="inference", {BOTH_POOLS}}} == 0'
    assert BOTH_POOLS in rules["VllmKvCacheBelowPlan"]


def test_drift_rules_hold_decode_itl_and_prefill_time_to_the_plan(synthesized: list[dict[str, Any]]) -> None:
    rules = _rules(synthesized)
    assert f"vllm:inter_token_latency_seconds_bucket{DECODE_SERIES}" in rules["llm_eks:itl_seconds:p50_10m"]
    assert f"vllm:request_prefill_time_seconds_bucket{PREFILL_SERIES}" in rules["llm_eks:prefill_seconds:p50_10m"]
    assert "llm_eks:prefill_seconds:p50_10m" in rules["VllmPrefillTimeAbovePlan"]
    # No whole-path TTFT series exists to record: no TTFT drift record or alert mixes the pools.
    assert not {"llm_eks:ttft_seconds:p50_10m", "llm_eks:plan_ttft_seconds", "VllmTimeToFirstTokenAbovePlan"} & set(
        rules
    )
    # The plan's figures: the decode step (the example's plan: 14.4 ms) and the prefill phase.
    assert rules["llm_eks:plan_itl_seconds"] == "vector(0.0144)"
    assert rules["llm_eks:plan_prefill_seconds"].startswith("vector(0.")


def test_prefill_job_must_name_another_service() -> None:
    props = base_props()
    with pytest.raises(
        ConfigError, match=r"^monitoring\.prefill_job: .* must differ from the decode pool's name \[LLMEKS-E410\]$"
    ):
        MonitoringChart(cdk8s.App(), "m", replace(props, prefill_job=props.name))
