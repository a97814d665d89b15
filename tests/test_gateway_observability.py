"""The gateway's alerts run by Prometheus's own evaluator (`promtool test rules`) on series in the names and labels of
the pinned releases, its per-tenant dashboard, and its fault matrix: every alert has a row and every row's alert
exists."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from llm_eks.manifests.gateway.observability import FAULTS, REFUSED
from llm_eks.manifests.gateway.usage import INPUT_RECORD, OUTPUT_RECORD
from llm_eks.manifests.promql import check_promql
from llm_eks.manifests.promql_parse import parse_promql
from tests.gateway_cases import BODY, charts, flat, one, token_labels
from tests.kube_schema import assert_valid
from tests.promtool import run_rule_tests
from tests.promtool_cases import render, sample, series_text
from tests.promtool_fault_cases import picker_standby_missing

SPAN = "60"


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return flat(charts(BODY))


@pytest.fixture(scope="module")
def groups(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    rule = one(objects, "PrometheusRule", "inference-alerts")
    assert rule["metadata"]["namespace"] == "inference-gateway"
    return {g["name"]: g["rules"] for g in rule["spec"]["groups"]}


@pytest.fixture(scope="module")
def rules(groups: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    assert set(groups) == {"inference-gateway.alerts", "inference-gateway.usage"}
    return groups["inference-gateway.alerts"]


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    return {"series": series_text(name, labels), "values": values}


def _expected(rules: list[dict[str, Any]], alert: str, labels: dict[str, str], value: float) -> dict[str, Any]:
    """The alert as promtool reports it: from whichever rule of that name fires with those labels."""
    named = [r for r in rules if r["alert"] == alert]
    rule = named[0] if len(named) == 1 else next(r for r in named if all(v in r["expr"] for v in labels.values()))
    return {
        "exp_labels": {**labels, **rule["labels"]},
        "exp_annotations": {k: render(v, labels, value) for k, v in rule["annotations"].items()},
    }


def _case(
    rules: list[dict[str, Any]],
    alert: str,
    title: str,
    inputs: list[dict[str, str]],
    fired: list[tuple[dict[str, str], float]],
) -> dict[str, Any]:
    wait = int(next(r for r in rules if r["alert"] == alert)["for"].removesuffix("m"))
    return {
        "name": f"{alert}: {title}",
        "interval": "1m",
        "input_series": inputs,
        "alert_rule_test": [
            {
                "eval_time": f"{wait + 3}m",
                "alertname": alert,
                "exp_alerts": [_expected(rules, alert, lbl, v) for lbl, v in fired],
            }
        ],
    }


PICKER = {"namespace": "inference-chat", "job": "vllm-chat-epp"}
ENVOY = {"namespace": "inference-gateway", "job": "inference-gateway/inference"}


def _up(labels: dict[str, str], pod: str, value: int) -> dict[str, str]:
    return _series("up", {**labels, "pod": pod, "instance": f"{pod}:9090"}, f"{value}x{SPAN}")


def _deployment(namespace: str, deployment: str, value: int) -> dict[str, str]:
    labels = {"namespace": namespace, "deployment": deployment, "job": "kube-state-metrics"}
    return _series("kube_deployment_status_replicas_available", labels, f"{value}x{SPAN}")


def _refused(fairness: str, outcome: str, per_minute: int) -> dict[str, str]:
    labels = {
        **PICKER,
        "fairness_id": fairness,
        "priority": "0",
        "outcome": outcome,
        "inference_pool": "vllm-chat",
        "model_name": "m",
        "target_model_name": "m",
    }
    return _series("llm_d_epp_flow_control_request_queue_duration_seconds_count", labels, f"0+{per_minute}x{SPAN}")


def _envoy_answers(code_class: str, per_minute: int, listener: str = "https-10443") -> dict[str, str]:
    """The Envoy pods' answers of one class on one HTTP listener, as Envoy's tag extraction labels them."""
    labels = {
        **ENVOY,
        "pod": "envoy-a",
        "envoy_http_conn_manager_prefix": listener,
        "envoy_response_code_class": code_class,
    }
    return _series("envoy_http_downstream_rq_xx", labels, f"0+{per_minute}x{SPAN}")


def _all_up(objects: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Every part of the gateway healthy."""
    return [
        _up(ENVOY, "envoy-a", 1),
        _up(PICKER, "vllm-chat-epp-a", 1),
        _up({"namespace": "inference-small", "job": "vllm-small-epp"}, "vllm-small-epp-a", 1),
        *(
            _deployment(ns, d, 1)
            for ns, d in (
                ("envoy-gateway-system", "envoy-ratelimit"),
                ("envoy-gateway-system", "valkey"),
                ("envoy-gateway-system", "envoy-gateway"),
                ("external-secrets", "external-secrets"),
                ("envoy-ai-gateway-system", "ai-gateway-controller"),
            )
        ),
    ]


def test_every_gateway_alert_passes_promtool(
    rules: list[dict[str, Any]], objects: list[dict[str, Any]], tmp_path: Path
) -> None:
    healthy = _all_up(objects)
    without = {
        "envoy": [s for s in healthy if "inference-gateway/inference" not in s["series"]],
        "picker": [s for s in healthy if "vllm-chat-epp" not in s["series"]],
    }
    tests = []
    for alert in sorted({r["alert"] for r in rules}):
        tests.append(_case(rules, alert, "quiet while everything is up", healthy, []))
    tests += [
        _case(
            rules, "GatewayEnvoyDown", "every Envoy pod down", [*without["envoy"], _up(ENVOY, "envoy-a", 0)], [({}, 0)]
        ),
        _case(rules, "GatewayEnvoyDown", "no Envoy pod scraped at all", without["envoy"], [(ENVOY, 1)]),
        _case(
            rules,
            "GatewayEndpointPickerDown",
            "a picker that does not answer",
            [*without["picker"], _up(PICKER, "vllm-chat-epp-a", 0), _up(PICKER, "vllm-chat-epp-b", 0)],
            [(PICKER, 0)],
        ),
        _case(rules, "GatewayEndpointPickerDown", "a picker never scraped", without["picker"], [(PICKER, 1)]),
        _case(
            rules,
            "GatewayEndpointPickerDown",
            "one picker replica of two up (the follower, or the leader) is enough",
            [*without["picker"], _up(PICKER, "vllm-chat-epp-a", 0), _up(PICKER, "vllm-chat-epp-b", 1)],
            [],
        ),
    ]
    # 5xx share: 60 of 600 a minute is 10 %; the stats listener's 2xx scrapes do not dilute it.
    tests += [
        _case(
            rules,
            "GatewayErrorRatioHigh",
            "one answer in ten is a 5xx",
            [*healthy, _envoy_answers("2", 540), _envoy_answers("5", 60), _envoy_answers("2", 6000, "eg-stats-http")],
            [({}, 0.1)],
        ),
        _case(
            rules,
            "GatewayErrorRatioHigh",
            "one in a hundred",
            [*healthy, _envoy_answers("2", 594), _envoy_answers("5", 6)],
            [],
        ),
        _case(
            rules,
            "GatewayErrorRatioHigh",
            "every answer a 5xx, but below one request every ten seconds",
            [*healthy, _envoy_answers("5", 3)],
            [],
        ),
    ]
    refused = {**{k: v for k, v in PICKER.items() if k == "namespace"}, "inference_pool": "vllm-chat"}
    tests += [
        _case(
            rules,
            "GatewayTenantRefused",
            "a tenant refused for a full band",
            [*healthy, _refused("team-b", "RejectedCapacity", 60), _refused("team-a", "Dispatched", 600)],
            [({**refused, "fairness_id": "team-b", "outcome": "RejectedCapacity"}, 1.0)],
        ),
        _case(
            rules,
            "GatewayTenantRefused",
            "served requests only",
            [*healthy, _refused("team-a", "Dispatched", 600), _refused("team-b", "EvictedContextCancelled", 60)],
            [],
        ),
    ]
    for alert, (namespace, deployment) in {
        "GatewayRateLimitServiceDown": ("envoy-gateway-system", "envoy-ratelimit"),
        "GatewayCounterStoreDown": ("envoy-gateway-system", "valkey"),
        "GatewaySecretSyncDown": ("external-secrets", "external-secrets"),
        "GatewayAiGatewayControllerDown": ("envoy-ai-gateway-system", "ai-gateway-controller"),
        "GatewayControllerDown": ("envoy-gateway-system", "envoy-gateway"),
    }.items():
        others = [s for s in healthy if f'deployment="{deployment}"' not in s["series"]]
        labels = {"namespace": namespace, "deployment": deployment}
        tests += [
            _case(
                rules, alert, "no replica available", [*others, _deployment(namespace, deployment, 0)], [(labels, 0)]
            ),
            _case(rules, alert, "not in kube-state-metrics at all", others, [(labels, 1)]),
        ]
    # Each picker's standby: its pods counted (only the leader is ever Ready).
    standby = [r for r in rules if r["alert"] == "GatewayEndpointPickerStandbyMissing"]
    assert len(standby) == 2, "one per vLLM pool"
    for rule in standby:
        tests += picker_standby_missing(rule, re.findall(r'namespace="([^"]+)"', rule["expr"])[0])
    run_rule_tests(tmp_path, "gateway", [{"name": "gateway", "rules": rules}], tests)


def _tokens(
    tenant: str, model: str, kind: str, per_minute: int, pod: str = "envoy-a", namespace: str = ""
) -> dict[str, str]:
    """One Envoy pod's gen_ai_client_token_usage_sum, rising by `per_minute`."""
    labels = token_labels(tenant, model, kind, pod, namespace or ENVOY["namespace"])
    return _series("gen_ai_client_token_usage_sum", labels, f"0+{per_minute}x{SPAN}")


def test_the_usage_records_hold_each_tenants_tokens_per_model_over_the_hour(
    groups: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """Summed over the Envoy pods, split by tenant and model; another type (cached input) and another namespace's
    gateway are not counted."""
    inputs = [
        _tokens("team-a", "llama", "input", 100),
        _tokens("team-a", "llama", "input", 50, pod="envoy-b"),
        _tokens("team-a", "llama", "output", 20),
        _tokens("team-a", "qwen", "input", 7),
        _tokens("team-b", "llama", "output", 3, pod="envoy-b"),
        _tokens("team-a", "llama", "cached_input", 1000),
        _tokens("team-a", "llama", "input", 1000, namespace="other-gateway"),
    ]
    gw = {"namespace": "inference-gateway"}

    def row(tenant: str, model: str) -> dict[str, str]:
        return {**gw, "tenant": tenant, "gen_ai_original_model": model}

    checks = [
        # 60 minutes of a counter rising every minute: increase over the hour is 60 x the rise.
        {
            "expr": INPUT_RECORD,
            "eval_time": "60m",
            "exp_samples": [
                sample(INPUT_RECORD, row("team-a", "llama"), 150 * 60),
                sample(INPUT_RECORD, row("team-a", "qwen"), 7 * 60),
            ],
        },
        {
            "expr": OUTPUT_RECORD,
            "eval_time": "60m",
            "exp_samples": [
                sample(OUTPUT_RECORD, row("team-a", "llama"), 20 * 60),
                sample(OUTPUT_RECORD, row("team-b", "llama"), 3 * 60),
            ],
        },
    ]
    test = {"name": "usage records", "interval": "1m", "input_series": inputs, "promql_expr_test": checks}
    run_rule_tests(tmp_path, "usage", [{"name": "usage", "rules": groups["inference-gateway.usage"]}], [test])


def test_the_refusal_outcomes_are_the_pickers_own() -> None:
    """llm-d router v0.10.0 pkg/epp/flowcontrol/types/outcomes.go: the refusals, and not Dispatched or a client's
    own cancellation."""
    assert set(REFUSED.split("|")) == {"RejectedCapacity", "RejectedNoEndpoints", "RejectedOther", "EvictedTTL"}


def test_the_dashboard_shows_each_tenants_traffic(objects: list[dict[str, Any]]) -> None:
    board = one(objects, "ConfigMap", "inference-dashboard")
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert_valid([board])
    (text,) = board["data"].values()
    dashboard = json.loads(text)
    assert dashboard["uid"] == "llm-eks-inference-gateway"
    titles = [p["title"] for p in dashboard["panels"]]
    assert titles == [
        "Requests per tenant (vLLM models)",
        "Tokens per tenant (vLLM models)",
        "Time held per tenant (p99)",
        "Held now per tenant",
        "Refused by flow control per tenant",
        "Requests and errors per tenant (every model)",
        "Tokens per tenant (every model)",
        "Tokens per tenant and model, last hour (usage)",
    ]
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            parse_promql(expr)
            assert check_promql(expr) == []
            assert "fairness_id" in expr or "tenant" in expr, panel["title"]


def test_every_alert_has_a_row_in_the_fault_matrix_and_every_row_an_alert(rules: list[dict[str, Any]]) -> None:
    alerts = {r["alert"] for r in rules}
    rows = {f.alert for f in FAULTS}
    assert rows == alerts
    for fault in FAULTS:
        assert fault.part and fault.failure and fault.seen and fault.action


def test_the_concepts_page_shows_the_fault_matrix_as_the_code_holds_it() -> None:
    page = (Path(__file__).parents[1] / "docs" / "concepts" / "gateway.md").read_text()
    shown = page.split("<!-- gateway-faults:start -->\n")[1].split("<!-- gateway-faults:end -->")[0]

    def cell(text: str) -> str:
        return text.replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")

    rows = [
        "| part | failure | what a caller sees | alert | what to do |",
        "|---|---|---|---|---|",
        *(f"| {cell(f.part)} | {cell(f.failure)} | {cell(f.seen)} | `{f.alert}` | {cell(f.action)} |" for f in FAULTS),
    ]
    assert shown == "\n".join(rows) + "\n"
