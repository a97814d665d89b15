"""The admission policies that keep the gateway closed to anyone who may write objects in a workload's namespace,
evaluated with a CEL implementation (tests/admission.py) the way the API server evaluates them: every rendered object
is admitted, and every capture a namespace admin could try is refused with the policy's message.

The table of cases (route or object, expected, and what the policies said) is the parametrization below; `pytest
-v tests/test_gateway_admission.py` prints it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from llm_eks.manifests.gateway import MODEL_HEADER
from llm_eks.manifests.gateway.guard import (
    OTHER_ROUTES_POLICY,
    POLICIES_POLICY,
    ROUTES_POLICY,
    SERVICES_POLICY,
    ai_gateway_controller,
)
from tests.admission import denials
from tests.gateway_cases import ADAPTERS, BODY, CHAT_MODEL, SMALL_MODEL, all_of, charts, flat, one
from tests.kube_schema import validation_errors

GATEWAY_NS = "inference-gateway"
USER = {"username": "alice@example.com", "groups": ["team-chat-admins"]}
CONTROLLER = {"username": ai_gateway_controller(), "groups": ["system:serviceaccounts"]}


def _gateways(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The gateway's admission objects of `kind` (each vLLM workload carries a load policy of its own:
    tests/test_load_policy.py)."""
    return [o for o in all_of(objects, kind) if o["metadata"]["name"].startswith("llm-eks-gateway-")]


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return flat(charts(BODY))


@pytest.fixture(scope="module")
def policies(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found = {p["metadata"]["name"]: p for p in _gateways(objects, "ValidatingAdmissionPolicy")}
    assert set(found) == {ROUTES_POLICY, OTHER_ROUTES_POLICY, POLICIES_POLICY, SERVICES_POLICY}
    return found


def test_every_policy_is_bound_with_deny_and_fails_closed(objects: list[dict[str, Any]]) -> None:
    bindings = {b["metadata"]["name"]: b["spec"] for b in _gateways(objects, "ValidatingAdmissionPolicyBinding")}
    assert bindings == {
        name: {"policyName": name, "validationActions": ["Deny"]}
        for name in (ROUTES_POLICY, OTHER_ROUTES_POLICY, POLICIES_POLICY, SERVICES_POLICY)
    }
    for policy in _gateways(objects, "ValidatingAdmissionPolicy"):
        assert policy["spec"]["failurePolicy"] == "Fail"
        assert validation_errors(policy) == []


def _route(namespace: str = "inference-chat", **spec: Any) -> dict[str, Any]:
    """An AIGatewayRoute a namespace admin writes, attached to the gateway, as the API server holds it after
    defaulting."""
    base: dict[str, Any] = {
        "parentRefs": [
            {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference", "namespace": GATEWAY_NS}
        ],
        "rules": [
            {
                "matches": [{"headers": [{"type": "Exact", "name": MODEL_HEADER, "value": CHAT_MODEL}]}],
                "backendRefs": [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "vllm-chat"}],
            }
        ],
    }
    base.update(spec)
    return {
        "apiVersion": "aigateway.envoyproxy.io/v1beta1",
        "kind": "AIGatewayRoute",
        "metadata": {"name": "capture", "namespace": namespace},
        "spec": base,
    }


def _with_rule(**rule: Any) -> dict[str, Any]:
    route = _route()
    route["spec"]["rules"][0].update(rule)
    return route


def _headers(*headers: dict[str, str]) -> dict[str, Any]:
    return _with_rule(matches=[{"headers": list(headers)}])


EXACT = {"type": "Exact", "name": MODEL_HEADER}
# (case, route, refused?)
ROUTE_CASES = [
    ("a route like ours", _route(), False),
    ("an adapter of its own namespace", _headers({**EXACT, "value": next(iter(ADAPTERS))}), False),
    ("hostnames", _route(hostnames=["api.example.com"]), True),
    (
        "llmRequestCosts (its tokens priced at 0)",
        _route(llmRequestCosts=[{"metadataKey": "x", "type": "InputToken"}]),
        True,
    ),
    ("matches: [] (every request)", _with_rule(matches=[]), True),
    ("a rule without matches", {**_route(), "spec": {**_route()["spec"], "rules": [{"backendRefs": []}]}}, True),
    ("a path match alone", _with_rule(matches=[{"path": {"type": "PathPrefix", "value": "/v1"}}]), True),
    (
        "the model header twice in another case",
        _headers({**EXACT, "value": CHAT_MODEL}, {"type": "Exact", "name": "X-AI-EG-Model", "value": SMALL_MODEL}),
        True,
    ),
    (
        "an extra header",
        _headers({**EXACT, "value": CHAT_MODEL}, {"type": "Exact", "name": "x-team", "value": "a"}),
        True,
    ),
    ("a RegularExpression match", _headers({"type": "RegularExpression", "name": MODEL_HEADER, "value": ".*"}), True),
    ("another namespace's model", _headers({**EXACT, "value": SMALL_MODEL}), True),
    (
        "the model header in upper case, its own model",
        _headers({**EXACT, "name": "X-AI-EG-MODEL", "value": CHAT_MODEL}),
        False,
    ),
    (
        "a backend in another namespace",
        _with_rule(
            backendRefs=[
                {
                    "group": "inference.networking.k8s.io",
                    "kind": "InferencePool",
                    "name": "vllm-small",
                    "namespace": "inference-small",
                }
            ]
        ),
        True,
    ),
    ("a namespace with no workload", _route(namespace="default"), True),
    ("the gateway's own namespace", _route(namespace=GATEWAY_NS), True),
    (
        "a listener the gateway lacks",
        _route(parentRefs=[{"kind": "Gateway", "name": "inference", "namespace": GATEWAY_NS, "sectionName": "admin"}]),
        True,
    ),
    (
        "another gateway (not ours to judge)",
        _route(parentRefs=[{"name": "other", "namespace": "other-gateway"}], hostnames=["x.example.com"]),
        False,
    ),
]


@pytest.mark.parametrize(("case", "route", "refused"), ROUTE_CASES, ids=[c[0] for c in ROUTE_CASES])
def test_capture_routes_are_refused_and_honest_ones_admitted(
    policies: dict[str, dict[str, Any]], case: str, route: dict[str, Any], refused: bool
) -> None:
    messages = denials(policies[ROUTES_POLICY], route, kind="AIGatewayRoute")
    assert bool(messages) == refused, (case, messages)
    for message in messages:
        assert "inference-gateway/inference" in message


def test_every_rendered_route_is_admitted(policies: dict[str, dict[str, Any]], objects: list[dict[str, Any]]) -> None:
    routes = all_of(objects, "AIGatewayRoute")
    assert len(routes) == 3
    for route in routes:
        assert denials(policies[ROUTES_POLICY], route, kind="AIGatewayRoute") == []


def _http_route(namespace: str = "inference-chat", parent: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "vllm-chat", "namespace": namespace},
        "spec": {
            "parentRefs": [parent or {"name": "inference", "namespace": GATEWAY_NS}],
            "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/v1/chat"}}]}],
        },
    }


OTHER_ROUTE_CASES = [
    ("an HTTPRoute by the AI Gateway's controller", "HTTPRoute", _http_route(), CONTROLLER, False),
    ("an HTTPRoute by a namespace admin", "HTTPRoute", _http_route(), USER, True),
    (
        "an HTTPRoute naming the gateway by default kind and own namespace",
        "HTTPRoute",
        _http_route(GATEWAY_NS, {"name": "inference"}),
        USER,
        True,
    ),
    ("a GRPCRoute, even by the controller", "GRPCRoute", _http_route(), CONTROLLER, True),
    (
        "an HTTPRoute on another gateway",
        "HTTPRoute",
        _http_route(parent={"name": "other", "namespace": "x"}),
        USER,
        False,
    ),
]


@pytest.mark.parametrize(
    ("case", "kind", "route", "user", "refused"), OTHER_ROUTE_CASES, ids=[c[0] for c in OTHER_ROUTE_CASES]
)
def test_only_the_ai_gateways_controller_writes_routes_of_the_gateway(
    policies: dict[str, dict[str, Any]],
    case: str,
    kind: str,
    route: dict[str, Any],
    user: dict[str, Any],
    refused: bool,
) -> None:
    route = {**route, "kind": kind}
    messages = denials(policies[OTHER_ROUTES_POLICY], route, kind=kind, request={"userInfo": user})
    assert bool(messages) == refused, (case, messages)


def _policy_object(kind: str, namespace: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": namespace},
        "spec": spec
        or {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "vllm-chat"}]},
    }


def _resource(kind: str) -> str:
    return {
        "SecurityPolicy": "securitypolicies",
        "BackendTrafficPolicy": "backendtrafficpolicies",
        "ClientTrafficPolicy": "clienttrafficpolicies",
        "EnvoyExtensionPolicy": "envoyextensionpolicies",
        "EnvoyPatchPolicy": "envoypatchpolicies",
        "EnvoyProxy": "envoyproxies",
        "HTTPRouteFilter": "httproutefilters",
        "Backend": "backends",
        "Gateway": "gateways",
        "GatewayConfig": "gatewayconfigs",
    }[kind]


def _backend(hostname: str) -> dict[str, Any]:
    return _policy_object(
        "Backend", "inference-chat", {"type": "Endpoints", "endpoints": [{"fqdn": {"hostname": hostname, "port": 80}}]}
    )


def _gateway(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "side-door", "namespace": namespace},
        "spec": {"gatewayClassName": "llm-eks", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
    }


POLICY_CASES = [
    ("a SecurityPolicy on a workload's route", _policy_object("SecurityPolicy", "inference-chat"), USER, True),
    (
        "a BackendTrafficPolicy on a workload's route",
        _policy_object("BackendTrafficPolicy", "inference-chat"),
        USER,
        True,
    ),
    (
        "an EnvoyExtensionPolicy in a workload namespace",
        _policy_object("EnvoyExtensionPolicy", "inference-small"),
        USER,
        True,
    ),
    ("an EnvoyPatchPolicy in a workload namespace", _policy_object("EnvoyPatchPolicy", "inference-chat"), USER, True),
    ("a SecurityPolicy in the gateway's namespace", _policy_object("SecurityPolicy", GATEWAY_NS), USER, False),
    ("an HTTPRouteFilter by a namespace admin", _policy_object("HTTPRouteFilter", "inference-chat"), USER, True),
    (
        "an HTTPRouteFilter by the AI Gateway's controller",
        _policy_object("HTTPRouteFilter", "inference-chat"),
        CONTROLLER,
        False,
    ),
    (
        "a Backend to a Service of its own namespace",
        _backend("ray-moe-serve-svc.inference-chat.svc.cluster.local"),
        USER,
        False,
    ),
    ("a Backend to another namespace's Service", _backend("vllm-small.inference-small.svc.cluster.local"), USER, True),
    ("a Backend outside the cluster", _backend("api.example.com"), USER, True),
    (
        "a Backend by IP",
        _policy_object("Backend", "inference-chat", {"endpoints": [{"ip": {"address": "10.0.0.1", "port": 80}}]}),
        USER,
        True,
    ),
    ("a Gateway of llm-eks's class in a workload namespace", _gateway("inference-chat"), USER, True),
]


@pytest.mark.parametrize(("case", "obj", "user", "refused"), POLICY_CASES, ids=[c[0] for c in POLICY_CASES])
def test_gateway_policies_live_in_the_gateways_namespace_only(
    policies: dict[str, dict[str, Any]], case: str, obj: dict[str, Any], user: dict[str, Any], refused: bool
) -> None:
    request = {"userInfo": user, "resource": {"resource": _resource(obj["kind"])}}
    messages = denials(policies[POLICIES_POLICY], obj, kind=obj["kind"], request=request)
    assert bool(messages) == refused, (case, messages)


def test_every_rendered_gateway_object_passes_the_policy_policy(
    policies: dict[str, dict[str, Any]], objects: list[dict[str, Any]]
) -> None:
    kinds = ("SecurityPolicy", "BackendTrafficPolicy", "ClientTrafficPolicy", "EnvoyExtensionPolicy", "EnvoyProxy")
    rendered = [o for o in objects if o["kind"] in (*kinds, "Backend", "Gateway", "GatewayConfig")]
    assert len(rendered) >= 9
    for obj in rendered:
        request = {"userInfo": USER, "resource": {"resource": _resource(obj["kind"])}}
        assert denials(policies[POLICIES_POLICY], obj, kind=obj["kind"], request=request) == [], obj["metadata"]


def _service(namespace: str, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "namespace": namespace, "annotations": annotations or {}},
        "spec": spec,
    }


def test_services_cannot_open_a_side_door(policies: dict[str, dict[str, Any]], objects: list[dict[str, Any]]) -> None:
    policy = policies[SERVICES_POLICY]
    envoy_service = one(objects, "EnvoyProxy", "inference")["spec"]["provider"]["kubernetes"]["envoyService"]
    # The Service Envoy Gateway generates from the EnvoyProxy: its type, class and annotations.
    generated = _service(
        GATEWAY_NS,
        {"type": "LoadBalancer", "loadBalancerClass": envoy_service["loadBalancerClass"]},
        envoy_service["annotations"],
    )
    internet = copy.deepcopy(generated)
    internet["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-scheme"] = "internet-facing"
    cases = [
        ("the gateway's generated internal NLB", generated, False),
        ("the same NLB made internet-facing", internet, True),
        ("a LoadBalancer in a workload namespace", _service("inference-chat", {"type": "LoadBalancer"}), True),
        ("a NodePort", _service("inference-chat", {"type": "NodePort"}), True),
        ("externalIPs", _service("inference-chat", {"type": "ClusterIP", "externalIPs": ["10.0.0.9"]}), True),
        ("a ClusterIP Service", _service("inference-chat", {"type": "ClusterIP"}), False),
    ]
    for case, service, refused in cases:
        assert bool(denials(policy, service, kind="Service")) == refused, case
    for service in all_of(objects, "Service"):
        assert denials(policy, service, kind="Service") == [], service["metadata"]["name"]
