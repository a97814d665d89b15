"""check_promql: the one gate every PromQL string we emit passes (alerts, dashboards, KEDA triggers)."""

from __future__ import annotations

import pytest

from llm_eks.manifests.promql import (
    CURRENT_VLLM_METRICS,
    REMOVED_VLLM_METRICS,
    check_promql,
    selector,
    vllm_names,
    vllm_series_names,
)
from tests.chart_helpers import DESIGN_VLLM_METRICS

# The current names DESIGN.md lists (checked upstream facts), as series: histograms by their _bucket series.
DESIGN_CURRENT_SERIES = [f"{name}_bucket" if name.endswith("_seconds") else name for name in DESIGN_VLLM_METRICS]


@pytest.mark.parametrize("series", DESIGN_CURRENT_SERIES)
def test_every_current_name_in_the_design_passes(series: str) -> None:
    assert check_promql(f'sum(rate({series}{{model_name="m"}}[5m]))') == []


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        (
            "avg(vllm:gpu_cache_usage_perc)",
            "vllm:gpu_cache_usage_perc was removed from vLLM; use vllm:kv_cache_usage_perc",
        ),
        (
            "rate(vllm:gpu_prefix_cache_hits_total[5m])",
            "vllm:gpu_prefix_cache_hits_total was removed from vLLM; use vllm:prefix_cache_hits_total",
        ),
        (
            "vllm:gpu_prefix_cache_hit_rate",
            "vllm:gpu_prefix_cache_hit_rate was removed from vLLM; use rate(vllm:prefix_cache_hits_total) / "
            "rate(vllm:prefix_cache_queries_total)",
        ),
        (
            "histogram_quantile(0.99, sum by (le) (rate(vllm:time_per_output_token_seconds_bucket[5m])))",
            "vllm:time_per_output_token_seconds_bucket was removed from vLLM; use vllm:inter_token_latency_seconds "
            "(or vllm:request_time_per_output_token_seconds per request)",
        ),
        (
            "sum(vllm:num_requests_swapped)",
            "vllm:num_requests_swapped was removed from vLLM; V1 never swaps; watch vllm:num_preemptions_total",
        ),
        (
            "vllm:avg_generation_throughput_toks_per_s",
            "vllm:avg_generation_throughput_toks_per_s was removed from vLLM; use "
            "rate(vllm:generation_tokens_total[5m])",
        ),
        (
            "vllm:cpu_prefix_cache_hit_rate",
            "vllm:cpu_prefix_cache_hit_rate was removed from vLLM; use rate(vllm:prefix_cache_hits_total) / "
            "rate(vllm:prefix_cache_queries_total)",
        ),
        (
            "vllm:avg_prompt_throughput_toks_per_s",
            "vllm:avg_prompt_throughput_toks_per_s was removed from vLLM; use rate(vllm:prompt_tokens_total[5m])",
        ),
        (
            "vllm:lora_hit_rate",
            "vllm:lora_hit_rate was removed from vLLM; hit-rate gauges are gone; divide the rates of the "
            "_hits_total/_queries_total",
        ),
        (
            "rate(vllm:prompt_tokens[5m])",
            "vllm:prompt_tokens is a counter and is exposed only as vllm:prompt_tokens_total",
        ),
        (
            "vllm:time_to_first_token_seconds",
            "vllm:time_to_first_token_seconds is a histogram and is exposed only as "
            "vllm:time_to_first_token_seconds_bucket, vllm:time_to_first_token_seconds_sum and "
            "vllm:time_to_first_token_seconds_count",
        ),
        (
            "vllm:num_requests_waiting_total",
            "vllm:num_requests_waiting_total is not a current vLLM metric (see "
            "llm_eks.manifests.promql.CURRENT_VLLM_METRICS)",
        ),
    ],
)
def test_removed_unknown_and_bare_names_are_reported(expr: str, problem: str) -> None:
    assert check_promql(expr) == [problem]


def test_every_removed_name_is_reported_in_any_suffix_form() -> None:
    for name in REMOVED_VLLM_METRICS:
        for series in (name, f"{name}_total", f"{name}_bucket"):
            problems = check_promql(f"sum({series})")
            assert len(problems) == 1 and "was removed from vLLM" in problems[0], series


def test_removed_and_current_lists_do_not_overlap() -> None:
    assert not set(REMOVED_VLLM_METRICS) & set(CURRENT_VLLM_METRICS)
    assert not set(REMOVED_VLLM_METRICS) & vllm_series_names()


def test_series_names_carry_the_prometheus_client_suffixes() -> None:
    series = vllm_series_names()
    assert {"vllm:kv_cache_usage_perc", "vllm:generation_tokens_total"} <= series
    assert {
        "vllm:iteration_tokens_total_bucket",  # its registered name already ends in _total
        "vllm:e2e_request_latency_seconds_sum",
        "vllm:e2e_request_latency_seconds_count",
    } <= series
    assert "vllm:generation_tokens" not in series
    assert "vllm:e2e_request_latency_seconds" not in series


def test_one_line_per_distinct_problem_in_order() -> None:
    expr = "vllm:gpu_cache_usage_perc + vllm:gpu_cache_usage_perc + vllm:foo + vllm:kv_cache_usage_perc"
    assert check_promql(expr) == [
        "vllm:gpu_cache_usage_perc was removed from vLLM; use vllm:kv_cache_usage_perc",
        "vllm:foo is not a current vLLM metric (see llm_eks.manifests.promql.CURRENT_VLLM_METRICS)",
    ]


def test_label_values_and_other_prefixes_are_not_metric_names() -> None:
    expr = (
        "sum(vllm:num_requests_waiting{model_name=\"vllm:gpu_cache_usage_perc\", job='vllm:x'})"
        " + llm_eks:vllm_generation_tokens:rate5m + my_vllm:thing"
    )
    assert vllm_names(expr) == ["vllm:num_requests_waiting"]
    assert check_promql(expr) == []


def test_name_matchers_are_checked() -> None:
    assert check_promql('{__name__="vllm:gpu_cache_usage_perc"}') == [
        "vllm:gpu_cache_usage_perc was removed from vLLM; use vllm:kv_cache_usage_perc"
    ]


def test_grafana_variables_and_non_vllm_metrics_pass() -> None:
    assert check_promql("sum(rate(vllm:generation_tokens_total[$__rate_interval])) / count(up == 1)") == []
    assert check_promql("avg(DCGM_FI_DEV_GPU_UTIL)") == []


def test_selector_escapes_label_values() -> None:
    assert selector({"namespace": "inference", "model_name": 'a"b\\c'}) == (
        '{namespace="inference", model_name="a\\"b\\\\c"}'
    )


def test_names_in_comments_are_not_series() -> None:
    assert check_promql("sum(vllm:num_requests_waiting) # was vllm:gpu_cache_usage_perc") == []


def test_text_that_is_not_promql_is_one_problem() -> None:
    assert check_promql("sum(vllm:num_requests_waiting{model_name='m'}") == [
        "cannot be parsed as PromQL (unclosed left parenthesis)"
    ]


@pytest.mark.parametrize(
    "expr",
    [
        "histogram_quantile($q, sum by (le) (rate(vllm:time_per_output_token_seconds_bucket[$__rate_interval])))",
        'sum by (${group}) (vllm:time_per_output_token_seconds_bucket{pod=~"$pod"} offset $__interval)',
        "topk([[k]], vllm:time_per_output_token_seconds_bucket)",
    ],
)
def test_grafana_variables_are_read_as_grafana_sends_them(expr: str) -> None:
    assert check_promql(expr) == [
        "vllm:time_per_output_token_seconds_bucket was removed from vLLM; use vllm:inter_token_latency_seconds "
        "(or vllm:request_time_per_output_token_seconds per request)"
    ]


def test_other_exporters_names_are_held_to_the_table_the_library_reads() -> None:
    """The library's own rules read kube-state-metrics, KEDA, DCGM, Istio and picker series by the names
    INFRASTRUCTURE_METRICS lists (each read at its pinned version); a misspelt one is reported, other names are not
    this check's business."""
    from llm_eks.manifests.promql import infrastructure_problems, ksm_workload

    ready = ksm_workload("status_replicas_ready", "deployment", "inference", ["vllm-x", "vllm-x-floor"])
    assert ready == 'kube_deployment_status_replicas_ready{namespace="inference", deployment=~"vllm-x|vllm-x-floor"}'
    assert infrastructure_problems(f"sum({ready}) == 0 and DCGM_FI_DEV_XID_ERRORS > 0") == []
    assert infrastructure_problems("kube_deployment_ready_replicas > 0 or node_load1 > 1 or llm_eks:x") == [
        "kube_deployment_ready_replicas is not a series llm-eks knows (see "
        "llm_eks.manifests.promql.INFRASTRUCTURE_METRICS)"
    ]
