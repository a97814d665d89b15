"""A workload's next version (`canary`): served beside the current one as its own workload (namespace, pool,
picker, replicas), the current version's HTTPRoute splitting requests between the two InferencePools by weight, the
ReferenceGrant that lets it reach across namespaces, the capacity both versions need, and the refusals."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from llm_eks.config import parse_environment
from llm_eks.config.canary_capacity import canary_overlaps
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.infra.workloads import build_workloads
from llm_eks.manifests.gateway import ModelRoute, NextVersion, PoolBackend
from llm_eks.manifests.gateway.pool import backend_refs
from tests.chart_helpers import environment_objects
from tests.kube_schema import assert_valid

POOL = "inference.networking.k8s.io"
# One model behind the gateway, its next version changing the KV-cache dtype and running one replica at 10%.
BODY: dict[str, Any] = {
    "gateway": {"allow_http": True, "inbound_cidrs": ["192.168.0.0/16"]},
    "workloads": {
        "chat": {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "accelerator": "g6e.xlarge",
            "replicas": {"min": 1, "max": 3},
            "canary": {"kv_cache_dtype": "fp8", "replicas": {"min": 1, "max": 1}, "weight": 10},
        }
    },
}


def _body(**canary: Any) -> dict[str, Any]:
    body = copy.deepcopy(BODY)
    body["workloads"]["chat"]["canary"].update(canary)
    return body


def _objects(body: dict[str, Any]) -> list[dict[str, Any]]:
    return environment_objects("qa", body)


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return _objects(BODY)


def _kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _error(body: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        config = parse_environment("qa", body)
        build_workloads(config, plan_workloads(config))
    return str(info.value)


# -- the objects -------------------------------------------------------------------------------------------------


def test_both_versions_have_their_own_pool_picker_and_pods(objects: list[dict[str, Any]]) -> None:
    pools = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in _kind(objects, "InferencePool")}
    assert set(pools) == {("inference-chat", "vllm-chat"), ("inference-chat-canary", "vllm-chat-canary")}
    canary = pools[("inference-chat-canary", "vllm-chat-canary")]["spec"]
    assert canary["selector"]["matchLabels"]["app.kubernetes.io/instance"] == "vllm-chat-canary"
    assert canary["endpointPickerRef"]["name"] == "vllm-chat-canary-epp"
    current = _one(objects, "Deployment", "vllm-chat")
    nxt = _one(objects, "Deployment", "vllm-chat-canary")
    assert nxt["metadata"]["namespace"] == "inference-chat-canary"
    args = nxt["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--kv-cache-dtype") + 1] == "fp8"
    assert "--kv-cache-dtype" not in current["spec"]["template"]["spec"]["containers"][0]["args"]
    # Both answer to the same name: clients do not change what they ask for.
    assert args[args.index("--served-model-name") + 1] == "meta-llama/Llama-3.1-8B-Instruct"
    scaled = {o["metadata"]["name"]: o["spec"] for o in _kind(objects, "ScaledObject")}
    assert (scaled["vllm-chat-canary"]["minReplicaCount"], scaled["vllm-chat-canary"]["maxReplicaCount"]) == (1, 1)


def test_one_route_splits_the_names_by_weight_across_the_two_pools(objects: list[dict[str, Any]]) -> None:
    (route,) = _kind(objects, "HTTPRoute")
    assert route["metadata"]["namespace"] == "inference-chat"
    (rule,) = route["spec"]["rules"]
    assert rule["backendRefs"] == [
        {"group": POOL, "kind": "InferencePool", "name": "vllm-chat", "weight": 90},
        {"group": POOL, "kind": "InferencePool", "name": "vllm-chat-canary", "namespace": "inference-chat-canary",
         "weight": 10},
    ]  # fmt: skip
    assert [m["headers"][0]["value"] for m in rule["matches"]] == ["meta-llama/Llama-3.1-8B-Instruct"]


def test_the_next_versions_namespace_grants_the_route_its_pool_and_attaches_no_route(
    objects: list[dict[str, Any]],
) -> None:
    (grant,) = _kind(objects, "ReferenceGrant")
    assert grant["apiVersion"] == "gateway.networking.k8s.io/v1beta1"
    assert grant["metadata"]["namespace"] == "inference-chat-canary"
    assert grant["spec"] == {
        "from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "inference-chat"}],
        "to": [{"group": POOL, "kind": "InferencePool", "name": "vllm-chat-canary"}],
    }
    gateway = _one(objects, "Gateway", "inference")
    (listener,) = gateway["spec"]["listeners"]
    (expr,) = listener["allowedRoutes"]["namespaces"]["selector"]["matchExpressions"]
    assert expr["values"] == ["inference-chat"]
    policy = _one(objects, "ValidatingAdmissionPolicy", "llm-eks-gateway-routes")
    allowed = next(v for v in policy["spec"]["variables"] if v["name"] == "allowed")
    assert "inference-chat-canary" not in allowed["expression"]


def test_the_rollout_group_may_get_and_patch_that_one_route(objects: list[dict[str, Any]]) -> None:
    role = _one(objects, "Role", "vllm-chat-rollout")
    assert role["metadata"]["namespace"] == "inference-chat"
    assert role["rules"] == [
        {"apiGroups": ["gateway.networking.k8s.io"], "resources": ["httproutes"], "resourceNames": ["vllm-chat"],
         "verbs": ["get", "patch"]}
    ]  # fmt: skip
    binding = _one(objects, "RoleBinding", "vllm-chat-rollout")
    group = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "llm-eks-rollout"}
    assert binding["subjects"] == [group]


def test_the_canary_objects_validate_against_the_crd_schemas(objects: list[dict[str, Any]]) -> None:
    kinds = {"HTTPRoute", "ReferenceGrant", "InferencePool", "Deployment", "ScaledObject", "NodePool", "Role"}
    assert_valid([o for o in objects if o["kind"] in kinds])


def test_the_node_pool_holds_both_versions(objects: list[dict[str, Any]]) -> None:
    pool = _one(objects, "NodePool", "gpu-g6e")
    # Three current replicas and one next on g6e.xlarge (one GPU each).
    assert pool["spec"]["limits"]["nvidia.com/gpu"] == 4


# -- the weights -------------------------------------------------------------------------------------------------


def _route(weight: int) -> ModelRoute:
    return ModelRoute(
        "vllm-chat",
        "inference-chat",
        ("m",),
        PoolBackend({"app": "chat"}),
        next_version=NextVersion("vllm-chat-canary", "inference-chat-canary", weight),
    )


@pytest.mark.parametrize(
    ("weight", "shares"),
    [
        (0, [("vllm-chat", None)]),
        (5, [("vllm-chat", 95), ("vllm-chat-canary", 5)]),
        (25, [("vllm-chat", 75), ("vllm-chat-canary", 25)]),
        (50, [("vllm-chat", 50), ("vllm-chat-canary", 50)]),
        (100, [("vllm-chat-canary", None)]),
    ],
)
def test_each_weight_step_renders_its_shares(weight: int, shares: list[tuple[str, int | None]]) -> None:
    # 0 and 100 leave the idle pool out of the rule (on Istio 1.30.3 an idle pool's picker can fail the rule).
    assert [(b["name"], b.get("weight")) for b in backend_refs(_route(weight))] == shares


def test_weight_zero_deploys_the_next_version_without_routing_to_it() -> None:
    objects = _objects(_body(weight=0))
    (route,) = _kind(objects, "HTTPRoute")
    assert [b["name"] for b in route["spec"]["rules"][0]["backendRefs"]] == ["vllm-chat"]
    assert _one(objects, "Deployment", "vllm-chat-canary")


# -- capacity ----------------------------------------------------------------------------------------------------


def test_the_plan_shows_what_the_overlap_adds() -> None:
    config = parse_environment("qa", _body(replicas={"min": 1, "max": 2}))
    (overlap,) = canary_overlaps(config, plan_workloads(config))
    price = plan_workloads(config)[1].cost_per_replica_hour
    assert price is not None
    assert (overlap.key, overlap.current, overlap.accelerators_min, overlap.accelerators_max) == (
        "chat-canary", "chat", 1, 2
    )  # fmt: skip
    assert overlap.usd_per_hour_max == pytest.approx(2 * price)
    assert overlap.line() == (
        f"canary chat-canary (next version of chat): +1-2 accelerators, +${price:.2f}-{2 * price:.2f}/h while both "
        "versions serve"
    )


def test_a_canary_that_does_not_fit_the_accelerator_limit_is_refused() -> None:
    body = _body(replicas={"min": 1, "max": 2})
    body["workloads"]["chat"]["accelerator_limit"] = 4
    assert _error(body) == (
        "environments.qa.workloads.chat.canary.replicas.max: 2 is not allowed; needs 2 accelerators (g6e.xlarge) "
        "beside the current version's 3, above environments.qa.workloads.chat.accelerator_limit 4: lower "
        "canary.replicas.max or raise the limit"
    )


def test_a_canary_within_the_limit_adds_nothing_to_it() -> None:
    body = _body()
    body["workloads"]["chat"]["accelerator_limit"] = 4
    pool = _one(_objects(body), "NodePool", "gpu-g6e")
    assert pool["spec"]["limits"]["nvidia.com/gpu"] == 4


# -- bad input ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda b: b.pop("gateway"),
            "environments.qa.workloads.chat.canary: needs the environment's `gateway` (its route splits the traffic "
            "between the two versions)",
        ),
        (
            lambda b: b["workloads"]["chat"].update(engine="ray-serve"),
            "environments.qa.workloads.chat.canary: 'ray-serve' is not allowed; is for engine vllm (the gateway "
            "weighs two InferencePools; Ray Serve routes inside its own application)",
        ),
        (
            lambda b: b["workloads"]["chat"]["canary"].update(weight=101),
            "environments.qa.workloads.chat.canary.weight: 101 is not allowed; must be 0 to 100 (the next version's "
            "share of requests)",
        ),
        (
            lambda b: b["workloads"]["chat"]["canary"].update(steps=[50, 25, 100]),
            "environments.qa.workloads.chat.canary.steps: [50, 25, 100] is not allowed; must rise strictly from at "
            "least 1 and end at 100",
        ),
        (
            lambda b: b["workloads"]["chat"].update(canary={"weight": 5}),
            "environments.qa.workloads.chat.canary: names no change; set at least one of revision, weight_format, "
            "image, kv_cache_dtype, gpu_memory_utilization, max_num_seqs (what the next version changes)",
        ),
        (
            lambda b: b["workloads"]["chat"]["canary"].update(replicas={"min": 0, "max": 1}),
            "environments.qa.workloads.chat.canary.replicas.min: 0 is not allowed; must be at least 1 (the route "
            "sends the next version its share only while it has a replica)",
        ),
        (
            lambda b: b["workloads"].update({"chat-canary": copy.deepcopy(b["workloads"]["chat"])}),
            "environments.qa.workloads.chat.canary: 'chat' is not allowed; names the next version 'chat-canary', "
            "already a workload here",
        ),
    ],
    ids=["no-gateway", "ray-serve", "weight", "steps", "no-change", "min-zero", "key-taken"],
)
def test_bad_canaries_are_one_line_errors(change: Any, message: str) -> None:
    body = copy.deepcopy(BODY)
    change(body)
    assert _error(body) == message


def test_llm_eks_plan_names_the_next_version_by_its_key(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from llm_eks.cli import main

    context = tmp_path / "cdk.json"
    context.write_text(json.dumps({"context": {"environments": {"qa": BODY}}}))
    price = plan_workloads(parse_environment("qa", BODY))[1].cost_per_replica_hour
    assert main(["plan", "--env", "qa", "--context-file", str(context)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln for ln in lines if ln.startswith(("workload ", "canary "))] == [
        "workload chat:",
        "workload chat-canary:",
        f"canary chat-canary (next version of chat): +1 accelerator, +${price:.2f}/h while both versions serve",
    ]
    assert main(["plan", "--env", "qa", "--context-file", str(context), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert list(body) == ["chat", "chat-canary"]
    assert body["chat-canary"]["canary_overlap"] == {"current": "chat", "accelerators": [1, 1],
                                                     "usd_per_hour": [price, price]}  # fmt: skip
