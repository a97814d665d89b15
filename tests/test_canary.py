"""A workload's next version (`canary`): served beside the current one as its own Deployment in the current version's
namespace and InferencePool (pool share: its share of the pool's replicas is its share of the requests, the smallest
step one pod), one route and one picker for both, the Role that may move the share and nothing else, the capacity both
versions need, and the refusals."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from llm_eks.config import parse_environment
from llm_eks.config.canary_capacity import canary_overlaps
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.infra.workloads import build_workloads
from llm_eks.manifests.gateway import ModelRoute, NextVersion, PoolBackend, route_kind, traffic_split
from llm_eks.manifests.gateway.routes import TrafficSplit
from tests.chart_helpers import environment_objects
from tests.kube_schema import assert_valid

POOL = "inference.networking.k8s.io"
# One model behind the gateway, its next version changing the KV-cache dtype at a share of 10 %.
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


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


# -- the objects -------------------------------------------------------------------------------------------------


def test_both_versions_serve_from_one_pool_each_deployment_keeping_its_own_pods(objects: list[dict[str, Any]]) -> None:
    (pool,) = _kind(objects, "InferencePool")
    assert (pool["metadata"]["namespace"], pool["metadata"]["name"]) == ("inference-chat", "vllm-chat")
    selector = pool["spec"]["selector"]["matchLabels"]
    current = _one(objects, "Deployment", "vllm-chat")
    nxt = _one(objects, "Deployment", "vllm-chat-canary")
    assert nxt["metadata"]["namespace"] == "inference-chat"
    labels = {name: d["spec"]["template"]["metadata"]["labels"] for name, d in (("current", current), ("next", nxt))}
    # The pool takes both versions' pods; each Deployment (and Service) only its own.
    assert _matches(selector, labels["current"]) and _matches(selector, labels["next"])
    assert not _matches(current["spec"]["selector"]["matchLabels"], labels["next"])
    assert not _matches(nxt["spec"]["selector"]["matchLabels"], labels["current"])
    for service in _kind(objects, "Service"):
        if service["metadata"]["name"] in ("vllm-chat", "vllm-chat-canary"):
            own = labels["current" if service["metadata"]["name"] == "vllm-chat" else "next"]
            other = labels["next" if service["metadata"]["name"] == "vllm-chat" else "current"]
            assert _matches(service["spec"]["selector"], own) and not _matches(service["spec"]["selector"], other)
    args = nxt["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--kv-cache-dtype") + 1] == "fp8"
    assert "--kv-cache-dtype" not in current["spec"]["template"]["spec"]["containers"][0]["args"]
    # Both answer to the same name: clients do not change what they ask for.
    assert args[args.index("--served-model-name") + 1] == "meta-llama/Llama-3.1-8B-Instruct"


def test_one_route_and_one_picker_serve_both_versions(objects: list[dict[str, Any]]) -> None:
    (route,) = _kind(objects, route_kind().kind)
    assert route["metadata"]["namespace"] == "inference-chat"
    (rule,) = route["spec"]["rules"]
    assert rule["backendRefs"] == [{"group": POOL, "kind": "InferencePool", "name": "vllm-chat"}]
    assert [d["metadata"]["name"] for d in _kind(objects, "Deployment") if d["metadata"]["name"].endswith("-epp")] == [
        "vllm-chat-epp"
    ]
    assert not _kind(objects, "HTTPRoute")


def test_the_share_is_set_by_the_next_versions_replicas_and_no_autoscaler_moves_it(
    objects: list[dict[str, Any]],
) -> None:
    """Weight 10 beside one current replica: the smallest step is one pod, so one replica (half the pool)."""
    assert _one(objects, "Deployment", "vllm-chat-canary")["spec"]["replicas"] == 1
    scaled = {o["metadata"]["name"] for o in _kind(objects, "ScaledObject")}
    assert scaled == {"vllm-chat"}


def test_the_rollout_group_may_scale_the_next_version_and_nothing_else(objects: list[dict[str, Any]]) -> None:
    role = _one(objects, "Role", "vllm-chat-rollout")
    assert role["metadata"]["namespace"] == "inference-chat"
    assert role["rules"] == [
        {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["vllm-chat-canary", "vllm-chat"],
         "verbs": ["get"]},
        {"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": ["vllm-chat-canary"],
         "verbs": ["get", "patch"]},
    ]  # fmt: skip
    binding = _one(objects, "RoleBinding", "vllm-chat-rollout")
    group = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "llm-eks-rollout"}
    assert binding["subjects"] == [group]


def test_the_canary_objects_validate_against_the_crd_schemas(objects: list[dict[str, Any]]) -> None:
    kinds = {"AIGatewayRoute", "InferencePool", "Deployment", "ScaledObject", "NodePool", "Role"}
    assert_valid([o for o in objects if o["kind"] in kinds])


def test_the_node_pool_holds_both_versions(objects: list[dict[str, Any]]) -> None:
    pool = _one(objects, "NodePool", "gpu-g6e")
    # Three current replicas and one next on g6e.xlarge (one GPU each).
    assert pool["spec"]["limits"]["nvidia.com/gpu"] == 4


# -- the shares --------------------------------------------------------------------------------------------------


def test_the_split_is_named_by_one_function() -> None:
    route = ModelRoute(
        "vllm-chat",
        "inference-chat",
        ("m",),
        PoolBackend({"app.kubernetes.io/instance": "vllm-chat"}),
        next_version=NextVersion("vllm-chat-canary"),
    )
    assert traffic_split(route) == TrafficSplit(
        "apps", "deployments", "vllm-chat-canary", "vllm-chat", "inference-chat"
    )
    big = ModelRoute(
        "vllm-big", "inference-big", ("m",), PoolBackend({}), next_version=NextVersion("n", "LeaderWorkerSet")
    )
    assert (traffic_split(big).api_group, traffic_split(big).resource) == (
        "leaderworkerset.x-k8s.io",
        "leaderworkersets",
    )


@pytest.mark.parametrize(
    ("asked", "current", "replicas", "share"),
    [
        (0, 3, 0, 0),
        # The smallest step is one pod: 5 % beside one current replica is half the pool.
        (5, 1, 1, 50),
        (5, 19, 1, 5),
        (5, 4, 1, 20),
        (25, 3, 1, 25),
        (50, 3, 3, 50),
        # Capped at canary.replicas.max: asked 50 % of a pool of 6 current replicas, 2 next at most.
        (50, 6, 2, 25),
    ],
)
def test_each_share_is_a_whole_number_of_pods(asked: int, current: int, replicas: int, share: int) -> None:
    n = TrafficSplit.next_replicas(asked, current, lowest=1, highest=3 if current < 6 else 2)
    assert (n, TrafficSplit.share(n, current)) == (replicas, share)


def test_weight_zero_deploys_the_next_version_at_zero_replicas_still_in_the_pool() -> None:
    objects = _objects(_body(weight=0))
    assert _one(objects, "Deployment", "vllm-chat-canary")["spec"]["replicas"] == 0
    (pool,) = _kind(objects, "InferencePool")
    assert pool["spec"]["selector"]["matchLabels"] == {"llm-eks.io/inference-pool": "vllm-chat"}


def test_the_pool_takes_both_versions_and_each_versions_own_selectors_only_its_own_pods() -> None:
    """The pool selects the pool label both versions' pods carry (and an on-demand floor's); every other selector of
    a version (its Deployment, Service, PodDisruptionBudget, NetworkPolicies) selects its own pods only, so no pod is
    covered by two PodDisruptionBudgets (which the eviction API refuses) or scraped under the other version's job."""
    objects = _objects(_body(weight=25))
    (pool,) = _kind(objects, "InferencePool")
    pods = {
        d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"] for d in _kind(objects, "Deployment")
        if d["metadata"]["name"] in ("vllm-chat", "vllm-chat-canary")
    }  # fmt: skip
    assert len(pods) == 2
    for labels in pods.values():
        assert pool["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pods["vllm-chat-canary"]["app.kubernetes.io/name"] == "vllm-next"

    def selected(selector: dict[str, str]) -> set[str]:
        return {name for name, labels in pods.items() if selector.items() <= labels.items()}

    checked = []
    for kind in ("Service", "PodDisruptionBudget"):
        for o in _kind(objects, kind):
            if o["metadata"]["name"] in pods:
                spec = o["spec"]["selector"]
                assert selected(spec.get("matchLabels", spec)) == {o["metadata"]["name"]}, (kind, o["metadata"])
                checked.append((kind, o["metadata"]["name"]))
    assert len(checked) == 4, checked


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
        "canary.replicas.max or raise the limit [LLMEKS-E133]"
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
            "between the two versions) [LLMEKS-E133]",
        ),
        (
            lambda b: b["workloads"]["chat"].update(engine="ray-serve"),
            "environments.qa.workloads.chat.canary: 'ray-serve' is not allowed; is for engine vllm (the next version's "
            "pods join the workload's InferencePool; Ray Serve routes inside its own application) [LLMEKS-E133]",
        ),
        (
            lambda b: b["workloads"]["chat"]["canary"].update(weight=100),
            "environments.qa.workloads.chat.canary.weight: 100 is not allowed; must be 0 to 99 (the next version's "
            "share of the pool's replicas; all of it is a promotion) [LLMEKS-E133]",
        ),
        (
            lambda b: b["workloads"]["chat"]["canary"].update(steps=[5, 25, 100]),
            "environments.qa.workloads.chat.canary.steps: [5, 25, 100] is not allowed; must rise strictly from at "
            "least 1 to at most 99 (100 is the promotion, docs/how-to/promote.md) [LLMEKS-E133]",
        ),
        (
            lambda b: b["workloads"]["chat"].update(canary={"weight": 5}),
            "environments.qa.workloads.chat.canary: names no change; set at least one of revision, weight_format, "
            "image, kv_cache_dtype, gpu_memory_utilization, max_num_seqs (what the next version changes) [LLMEKS-E133]",
        ),
        (
            lambda b: b["workloads"]["chat"]["canary"].update(replicas={"min": 0, "max": 1}),
            "environments.qa.workloads.chat.canary.replicas.min: 0 is not allowed; must be at least 1 (any share "
            "above 0 runs at least one pod of the next version) [LLMEKS-E133]",
        ),
        (
            lambda b: b["workloads"].update({"chat-canary": copy.deepcopy(b["workloads"]["chat"])}),
            "environments.qa.workloads.chat.canary: 'chat' is not allowed; names the next version 'chat-canary', "
            "already a workload here [LLMEKS-E133]",
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


def test_the_current_version_keeps_a_replica_while_it_has_a_next_version() -> None:
    body = copy.deepcopy(BODY)
    body["workloads"]["chat"]["replicas"] = {"min": 0, "max": 3}
    assert _error(body) == (
        "environments.qa.workloads.chat.replicas.min: 0 is not allowed; must be at least 1 with a canary (the next "
        "version's share is its pods over the pool's, so the current version keeps at least one replica) [LLMEKS-E133]"
    )


def test_the_ai_gateway_cannot_weigh_two_pools_so_both_versions_share_one(objects: list[dict[str, Any]]) -> None:
    """Why pool share: the AIGatewayRoute CRD (envoyproxy/ai-gateway v1.1.0) allows one InferencePool per rule, so a
    rule weighing the two versions' pools is refused; the rendered rule names the one pool both versions are in."""
    from tests.crd_cel import AI_GATEWAY_ROUTE, failed_item_rules

    (route,) = _kind(objects, route_kind().kind)
    (rule,) = route["spec"]["rules"]
    assert failed_item_rules(AI_GATEWAY_ROUTE, "rules", rule) == []
    pool = {"group": POOL, "kind": "InferencePool"}
    weighted = {
        **rule,
        "backendRefs": [{**pool, "name": "vllm-chat", "weight": 90}, {**pool, "name": "next", "weight": 10}],
    }
    assert failed_item_rules(AI_GATEWAY_ROUTE, "rules", weighted) == [
        "only one InferencePool backend is allowed per rule"
    ]
