"""The endpoint picker's flow control: every rendered EndpointPickerConfig against the field names read from llm-d
router v0.10.0's source (tests/fixtures/epp, there is no published schema), the bands per tenant priority, and the
three numbers of a hold (how long, what Retry-After, the route's timeout) held together from the plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_eks import versions
from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.infra.workloads.gateway import flow_control
from llm_eks.manifests.gateway import FlowControl, hold_for
from llm_eks.manifests.gateway.hold import MIN_RETRY_AFTER_S, PICKER_MESSAGE_TIMEOUT_S
from llm_eks.manifests.gateway.picker_config import picker_config
from tests.gateway_cases import BODY, all_of, charts, flat, one

FIXTURE = Path(__file__).parent / "fixtures" / "epp" / "endpoint_picker_config_v0.10.0.yaml"
SPEC = yaml.safe_load(FIXTURE.read_text())
BAND_FIELDS = (
    "flowControl.defaultPriorityBand",
    "flowControl.defaultNegativePriorityBand",
    "flowControl.priorityBands",
)


def _paths(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every (key path, value) in `value`, lists as `[]`, a priority band's fields as `<band>.`."""
    out: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for key, child in value.items():
            path = f"{prefix}.{key}" if prefix else key
            out.append((path, child))
            if path == "plugins[].parameters":
                continue  # checked per plugin type
            band = prefix in BAND_FIELDS or prefix == "flowControl.priorityBands[]"
            out += _paths(child, f"<band>.{key}" if band else path)
    elif isinstance(value, list):
        for child in value:
            out += _paths(child, f"{prefix}[]")
    return out


def check_config(config: dict[str, Any]) -> list[str]:
    """What the picker at the pinned version would refuse (or ignore) in `config`, as readable lines."""
    problems = []
    if config.get("apiVersion") not in SPEC["api_versions"] or config.get("kind") != SPEC["kind"]:
        problems.append(f"apiVersion/kind: {config.get('apiVersion')}/{config.get('kind')}")
    for path, _ in _paths(config):
        normalized = path.replace("flowControl.priorityBands[].", "<band>.")
        for band in BAND_FIELDS[:2]:
            normalized = normalized.replace(f"{band}.", "<band>.")
        if normalized not in SPEC["fields"]:
            problems.append(f"unknown field {path}")
    for gate in config.get("featureGates", []):
        if gate.split("=")[0] not in SPEC["feature_gates"]:
            problems.append(f"unknown feature gate {gate}")
    for plugin in config.get("plugins", []):
        kind = plugin["type"]
        if kind not in SPEC["plugin_types"]:
            problems.append(f"unknown plugin type {kind}")
        for key, value in (plugin.get("parameters") or {}).items():
            if key not in SPEC["plugin_parameters"].get(kind, ()):
                problems.append(f"unknown parameter {kind}.{key}")
            allowed = SPEC["enums"].get(f"{kind}.{key}")
            if allowed is not None and value not in allowed:
                problems.append(f"{kind}.{key}: {value!r} not in {allowed}")
    names = {p.get("name", p["type"]) for p in config.get("plugins", [])}
    refs = [ref for path, ref in _paths(config) if path.endswith("pluginRef") or path.endswith("PolicyRef")]
    defaults = set(SPEC["plugin_types"])  # a ref may name a system default the picker injects
    problems += [f"reference to no plugin: {ref}" for ref in refs if ref not in names and ref not in defaults]
    return problems


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return flat(charts(BODY))


def _configs(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        cm["metadata"]["name"]: yaml.safe_load(cm["data"]["plugins.yaml"])
        for cm in all_of(objects, "ConfigMap")
        if cm["metadata"]["name"].endswith("-epp")
    }


def test_the_fixture_is_the_pinned_release() -> None:
    assert SPEC["source"]["tag"] == versions.LLMD_VERSION
    assert versions.EPP_IMAGE.endswith(f":{versions.LLMD_VERSION}")


def test_every_rendered_picker_config_uses_only_fields_the_pinned_picker_reads(objects: list[dict[str, Any]]) -> None:
    configs = _configs(objects)
    assert set(configs) == {"vllm-chat-epp", "vllm-small-epp"}
    for name, config in configs.items():
        assert check_config(config) == [], name


def test_the_checker_catches_a_misspelled_field_parameter_and_gate() -> None:
    config = picker_config(FLOW, [0])
    config["flowControl"]["defaultRequestTtl"] = "30s"
    config["featureGates"] = ["flowcontrol"]
    config["plugins"][5]["parameters"]["maxConcurency"] = 4
    assert check_config(config) == [
        "unknown field flowControl.defaultRequestTtl",
        "unknown feature gate flowcontrol",
        "unknown parameter concurrency-detector.maxConcurency",
    ]


def test_flow_control_is_on_holds_for_the_plan_and_takes_turns_between_tenants(objects: list[dict[str, Any]]) -> None:
    config = _configs(objects)["vllm-chat-epp"]
    # Off by default in v0.10.0: every flowControl setting is ignored without the gate.
    assert config["featureGates"] == ["flowControl"] and SPEC["feature_gates"]["flowControl"] is False
    flow = config["flowControl"]
    assert flow["saturationDetector"] == {"pluginRef": "concurrency-detector"}
    # One band per tenant priority on this pool (team-a 10, team-b 0, team-c -10), flows taking turns in each.
    assert [band["priority"] for band in flow["priorityBands"]] == [10, 0]
    assert {band["fairnessPolicyRef"] for band in flow["priorityBands"]} == {"round-robin-fairness-policy"}
    assert flow["defaultNegativePriorityBand"]["priority"] == -1
    assert int(flow["defaultNegativePriorityBand"]["maxRequests"]) < int(flow["defaultPriorityBand"]["maxRequests"])
    ttl = int(flow["defaultRequestTTL"].removesuffix("s"))
    assert 60 < ttl < PICKER_MESSAGE_TIMEOUT_S


FLOW = FlowControl(
    hold_seconds=120, retry_after_seconds=30, request_timeout_seconds=600, max_concurrency=16, band_capacity=64
)


# -- the hold ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scale_out", "expected"),
    [
        # A small model from the node cache: held through its whole cold start.
        (90, (120, 132, 30)),
        # Staging's llama cold start on a new node: the hold is capped under the AI Gateway's 300 s picker timeout,
        # and the caller is told to come back for the rest.
        (300, (330, 290, 40)),
        # A large model: capped, Retry-After the remainder.
        (1046, (1076, 290, 786)),
    ],
)
def test_the_hold_covers_a_cold_start_up_to_the_pickers_timeout(scale_out: float, expected: tuple[int, ...]) -> None:
    hold = hold_for(scale_out, ttft_p99_s=1.0, itl_p99_s=0.05, max_tokens=8192)
    assert (hold.cold_start, hold.hold, hold.retry_after) == expected
    assert hold.hold < PICKER_MESSAGE_TIMEOUT_S
    assert hold.retry_after >= MIN_RETRY_AFTER_S
    # The route waits for a hold and then a whole generation at the SLO.
    assert hold.request_timeout == hold.hold + 1 + 410


def test_each_workloads_flow_control_comes_from_its_plan() -> None:
    config = parse_environment("qa", BODY)
    plans = plan_workloads(config)
    for served, plan in zip(config.served, plans, strict=True):
        if served.config.engine != "vllm":
            continue
        flow = flow_control(served, plan)
        hold = hold_for(
            plan.cold_start.scale_out_s,
            served.config.slo.ttft_p99_ms / 1000,
            served.config.slo.itl_p99_ms / 1000,
            served.config.max_model_len,
        )
        assert (flow.hold_seconds, flow.retry_after_seconds, flow.request_timeout_seconds) == (
            hold.hold,
            hold.retry_after,
            hold.request_timeout,
        )
        assert flow.max_concurrency == plan.max_num_seqs
        assert flow.max_concurrency <= flow.band_capacity <= 5000


def test_the_route_timeout_and_retry_after_are_the_holds(objects: list[dict[str, Any]]) -> None:
    config = parse_environment("qa", BODY)
    plans = plan_workloads(config)
    flows = {s.key: flow_control(s, p) for s, p in zip(config.served, plans, strict=True) if s.config.engine == "vllm"}
    (rule,) = one(objects, "AIGatewayRoute", "vllm-chat")["spec"]["rules"]
    assert rule["timeouts"]["request"] == f"{flows['chat'].request_timeout_seconds}s"
    overrides = one(objects, "BackendTrafficPolicy", "inference")["spec"]["responseOverride"]
    (starting,) = [o for o in overrides if o["match"]["statusCodes"][0]["value"] == 503]
    assert starting["response"]["header"]["set"] == [
        {"name": "Retry-After", "value": str(max(f.retry_after_seconds for f in flows.values()))}
    ]


# -- scale from zero on held requests -------------------------------------------------------------------------------


def test_a_vllm_workload_behind_the_gateway_may_sleep_at_zero_and_wakes_on_held_requests() -> None:
    """replicas.min 0 without a schedule: the picker holds the first request, KEDA reads the held requests and wakes
    the workload (activation at any held request), an unscraped picker reads as an error (KEDA's fallback), never as
    an idle one."""
    from tests.gateway_cases import body

    b = body()
    b["workloads"]["small"] = {**b["workloads"]["small"], "replicas": {"min": 0, "max": 2}}
    objects = flat(charts(b))
    scaled = one(objects, "ScaledObject", "vllm-small")["spec"]
    assert scaled["minReplicaCount"] == 0
    (held,) = [t for t in scaled["triggers"] if t["name"] == "held-requests"]
    assert held["metricType"] == "AverageValue"
    assert held["metadata"]["activationThreshold"] == "0"
    assert held["metadata"]["ignoreNullValues"] == "false"
    query = held["metadata"]["query"]
    assert 'llm_d_epp_flow_control_queue_size{namespace="inference-small", job="vllm-small-epp"' in query
    assert 'inference_pool="vllm-small"' in query
    assert not [t for t in scaled["triggers"] if t["type"] == "cron"]


def test_only_a_vllm_workload_behind_the_gateway_may_sleep_without_a_schedule() -> None:
    import pytest

    from llm_eks.errors import ConfigError

    b = {"workload": {"replicas": {"min": 0, "max": 1}}}
    with pytest.raises(ConfigError) as info:
        parse_environment("qa", b)
    assert str(info.value).startswith("environments.qa.workload.replicas.min: 0 is not allowed; must be at least 1")
    from tests.gateway_cases import body

    ray = body()
    ray["workloads"]["moe"] = {**ray["workloads"]["moe"], "replicas": {"min": 0, "max": 2}}
    with pytest.raises(ConfigError) as info:
        parse_environment("qa", ray)
    assert str(info.value).startswith("environments.qa.workloads.moe.replicas.min: 0 is not allowed")
