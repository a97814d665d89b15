"""The gateway's threats, one test each (issue 23 item 2, 3 and 8): every source explicit, every routed model behind
a credential, no client-chosen model header, a body-size limit, access logs, routes that cannot capture each
other's traffic, and a Service that can only ever be an internal NLB. The admission policies' CEL is evaluated
(tests/admission.py) against our own objects, which it must admit, and against the captures it must refuse."""

from __future__ import annotations

import copy
import json
from typing import Any

import cdk8s
import pytest

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.infra.charts import build_charts
from llm_eks.infra.workloads import build_workloads
from llm_eks.manifests.gateway import MODEL_HEADER
from tests.admission import denials
from tests.kube_schema import assert_valid
from tests.test_gateway import BODY, CLIENTS, JWT, SG

ISSUER_TOKEN = "https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
API_KEY_BODY: dict[str, Any] = {
    "gateway": {"allow_http": True, "inbound_cidrs": CLIENTS},
    "workloads": {
        "chat": {"model": "meta-llama/Llama-3.1-8B-Instruct", "accelerator": "g6e.xlarge"},
        "small": {"model": "Qwen/Qwen3-8B", "accelerator": "g6e.xlarge"},
    },
}


def _objects(body: dict[str, Any], issuer: str | None = None) -> list[dict[str, Any]]:
    config = parse_environment("qa", body)
    workloads = build_workloads(config, plan_workloads(config))
    charts = build_charts(
        cdk8s.App(), config, workloads, node_role_name="r", security_group_ids=SG, cluster_oidc_issuer=issuer
    )
    return [o for c in charts for o in c.chart.to_json()]


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _error(body: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        config = parse_environment("qa", body)
        build_workloads(config, plan_workloads(config))
    return str(info.value)


@pytest.fixture(scope="module")
def jwt_objects() -> list[dict[str, Any]]:
    return _objects(BODY)


@pytest.fixture(scope="module")
def key_objects() -> list[dict[str, Any]]:
    return _objects(API_KEY_BODY)


# -- sources -----------------------------------------------------------------------------------------------------


def test_the_nlb_no_longer_admits_the_whole_vpc_by_default() -> None:
    """With the VPC CNI every pod holds a VPC address: the VPC's CIDR as the NLB's source range admitted every pod."""
    assert _error({**API_KEY_BODY, "gateway": {"allow_http": True}}) == (
        "environments.qa.gateway.inbound_cidrs: [] is not allowed; name the client ranges the NLB admits (with the "
        "VPC CNI every pod holds a VPC address, so the VPC's CIDR would admit every pod); in-cluster clients call "
        "the gateway's own Service instead"
    )


def test_a_client_range_inside_the_vpc_is_refused() -> None:
    assert _error({**API_KEY_BODY, "gateway": {"allow_http": True, "inbound_cidrs": ["10.0.8.0/24"]}}) == (
        "environments.qa.gateway.inbound_cidrs[0]: '10.0.8.0/24' is not allowed; overlaps the environment's VPC "
        "10.0.0.0/16, where every pod holds an address: list client ranges outside it (in-cluster clients call the "
        "gateway's own Service)"
    )


def test_an_in_cluster_gateway_has_no_load_balancer_and_admits_no_load_balancer_service() -> None:
    body = {**API_KEY_BODY, "gateway": {"expose": "cluster"}}
    objects = _objects(body)
    gateway = _one(objects, "Gateway", "inference")
    assert gateway["metadata"]["annotations"] == {"networking.istio.io/service-type": "ClusterIP"}
    assert "infrastructure" not in gateway["spec"]
    assert not [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "inference-options"]
    policy = _one(objects, "ValidatingAdmissionPolicy", "llm-eks-gateway-services")
    service = {"metadata": {"name": "inference-istio"}, "spec": {"type": "LoadBalancer"}}
    assert denials(policy, service, kind="Service") == [
        "the inference gateway is exposed in-cluster only: no LoadBalancer Service in inference-gateway"
    ]
    assert denials(policy, {"metadata": {"name": "x"}, "spec": {"type": "ClusterIP"}}, kind="Service") == []
    assert "alb" not in {n for c in _charts_needs(body) for n in c}


def _charts_needs(body: dict[str, Any]) -> list[tuple[str, ...]]:
    config = parse_environment("qa", body)
    workloads = build_workloads(config, plan_workloads(config))
    charts = build_charts(cdk8s.App(), config, workloads, node_role_name="r", security_group_ids=SG)
    return [c.needs for c in charts]


# -- credentials -------------------------------------------------------------------------------------------------


def test_a_ray_serve_model_is_not_routed_without_a_credential() -> None:
    """Ray Serve LLM checks no API key: behind a gateway that relies on the backends' keys it would answer anyone."""
    body = {**API_KEY_BODY, "workloads": {**API_KEY_BODY["workloads"], "moe": BODY["workloads"]["moe"]}}
    assert _error(body) == (
        "environments.qa.gateway.auth.mode: 'api-key' is not allowed; environments.qa.workloads.moe runs Ray Serve, "
        "which checks no API key, so through the gateway it would answer anyone: use mode jwt (the gateway "
        "authenticates every request), or serve that model with vLLM"
    )


def test_a_vllm_workload_without_its_key_is_not_routed_when_the_backends_authenticate() -> None:
    body = copy.deepcopy(API_KEY_BODY)
    body["workloads"]["small"]["api_key"] = False
    assert _error(body) == (
        "environments.qa.workloads.small.api_key: False is not allowed; with gateway.auth mode api-key each routed "
        "workload checks its own key: keep api_key true, or use gateway.auth mode jwt"
    )


def test_the_old_opt_out_for_ray_serve_is_gone_with_a_pointer() -> None:
    body = {**API_KEY_BODY, "gateway": {"allow_http": True, "ray_serve_without_api_key": True}}
    assert _error(body).startswith("environments.qa.gateway.ray_serve_without_api_key: no longer exists;")


def test_with_jwt_the_gateway_refuses_requests_without_a_verified_token(jwt_objects: list[dict[str, Any]]) -> None:
    auth = _one(jwt_objects, "RequestAuthentication", "inference-jwt")
    target = [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference"}]
    assert auth["spec"] == {
        "targetRefs": target,
        "jwtRules": [
            {
                "issuer": JWT["issuer"],
                "jwksUri": JWT["jwks_uri"],
                "audiences": ["llm-eks-gateway"],
                "forwardOriginalToken": False,
            }
        ],
    }
    # RequestAuthentication alone admits a request without a token; the policy requires a verified principal.
    policy = _one(jwt_objects, "AuthorizationPolicy", "inference-require-jwt")
    assert policy["spec"] == {
        "targetRefs": target,
        "action": "ALLOW",
        "rules": [{"from": [{"source": {"requestPrincipals": ["*"]}}]}],
    }
    assert_valid([auth, policy])


def test_a_keyless_workload_behind_the_jwt_gateway_cannot_be_reached_around_it(
    jwt_objects: list[dict[str, Any]], key_objects: list[dict[str, Any]]
) -> None:
    """A labelled client pod could otherwise call the Service directly and skip the token check."""

    def sources(objects: list[dict[str, Any]], namespace: str, name: str) -> list[Any]:
        policy = [o for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == name]
        policy = [o for o in policy if o["metadata"]["namespace"] == namespace]
        return [peer for p in policy for r in p["spec"]["ingress"] for peer in r["from"]]

    client = {"podSelector": {"matchLabels": {"llm-eks.io/inference-client": "true"}}}
    # jwt: vLLM without a key of its own, and Ray Serve (no key at all), admit the gateway and nothing else.
    assert client not in sources(jwt_objects, "inference-chat", "vllm-chat-serving")
    assert sources(jwt_objects, "inference-moe", "ray-moe-serving") == []
    assert sources(jwt_objects, "inference-moe", "ray-moe-gateway") != []
    # api-key: each workload checks its key, so a labelled client may still call it directly.
    assert client in sources(key_objects, "inference-chat", "vllm-chat-serving")


def test_the_clusters_own_tokens_come_from_its_oidc_issuer() -> None:
    body = {**BODY, "gateway": {"expose": "cluster", "auth": {"mode": "jwt", "issuer": "eks-cluster"}}}
    auth = _one(_objects(body, issuer=ISSUER_TOKEN), "RequestAuthentication", "inference-jwt")
    (rule,) = auth["spec"]["jwtRules"]
    # EKS serves the cluster issuer's signing keys at <issuer>/keys.
    assert (rule["issuer"], rule["jwksUri"]) == (ISSUER_TOKEN, f"{ISSUER_TOKEN}/keys")
    with pytest.raises(ConfigError, match=r"^gateway.auth.issuer: 'eks-cluster' needs the cluster's OIDC issuer URL"):
        _objects(body)


def test_with_jwt_a_vllm_key_would_clash_with_the_token() -> None:
    body = copy.deepcopy(BODY)
    body["workloads"]["chat"]["api_key"] = True
    assert _error(body).startswith(
        "environments.qa.workloads.chat.api_key: True is not allowed; behind a gateway with auth mode jwt the token "
        "takes the Authorization header"
    )


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        (
            {"mode": "jwt"},
            "environments.qa.gateway.auth.issuer: None is not allowed; mode jwt needs the token issuer: eks-cluster "
            "(this cluster's service-account tokens) or the https URL of your OIDC provider",
        ),
        (
            {"mode": "jwt", "issuer": "http://login.example.com", "jwks_uri": "https://login.example.com/jwks"},
            "environments.qa.gateway.auth.issuer: 'http://login.example.com' is not allowed; must be an https URL "
            "(https://host/path)",
        ),
        (
            {"mode": "oidc"},
            "environments.qa.gateway.auth.mode: 'oidc' is not allowed; must be one of api-key, jwt",
        ),
    ],
)
def test_bad_gateway_auth_is_one_line(auth: dict[str, Any], message: str) -> None:
    assert _error({**BODY, "gateway": {**BODY["gateway"], "auth": auth}}) == message


# -- the request path ----------------------------------------------------------------------------------------------


def _patches(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    envoy_filter = _one(objects, "EnvoyFilter", "payload-processor")
    return {p["patch"]["value"]["name"]: p for p in envoy_filter["spec"]["configPatches"]}


def test_a_client_supplied_model_header_is_removed_before_the_payload_processor(
    key_objects: list[dict[str, Any]],
) -> None:
    """The payload processor leaves a request without `model` as it came: a client's own header would pick the route."""
    patches = _patches(key_objects)
    strip = patches["llm-eks.strip-model-header"]["patch"]["value"]["typed_config"]
    assert strip["@type"].endswith("header_mutation.v3.HeaderMutation")
    assert strip["mutations"] == {"request_mutations": [{"remove": MODEL_HEADER.lower()}]}
    processor = patches["envoy.filters.http.ext_proc.payload-processor"]["match"]["listener"]["filterChain"]
    assert processor["filter"]["subFilter"] == {"name": "llm-eks.strip-model-header"}


def test_request_bodies_are_capped_at_envoy(key_objects: list[dict[str, Any]]) -> None:
    body_limit = _patches(key_objects)["llm-eks.request-body-limit"]
    assert body_limit["patch"]["operation"] == "INSERT_FIRST"
    assert body_limit["patch"]["value"]["typed_config"] == {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
        "max_request_bytes": 8 * 1024 * 1024,
    }
    smaller = _patches(_objects({**API_KEY_BODY, "gateway": {**API_KEY_BODY["gateway"], "max_request_bytes": 1048576}}))
    assert smaller["llm-eks.request-body-limit"]["patch"]["value"]["typed_config"]["max_request_bytes"] == 1048576


def test_gateway_access_logs_are_on(key_objects: list[dict[str, Any]]) -> None:
    telemetry = _one(key_objects, "Telemetry", "inference-access-log")
    assert telemetry["spec"] == {
        "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference"}],
        "accessLogging": [{"providers": [{"name": "envoy"}]}],
    }
    assert_valid([telemetry])


# -- routes cannot capture each other's traffic --------------------------------------------------------------------


@pytest.fixture(scope="module")
def route_policy(jwt_objects: list[dict[str, Any]]) -> dict[str, Any]:
    return _one(jwt_objects, "ValidatingAdmissionPolicy", "llm-eks-gateway-routes")


CAPTURE = "a route attached to the inference gateway must match, in every rule and every match, the "
CAPTURE += f"{MODEL_HEADER} header exactly, with a model name its own namespace serves"


def _route(
    namespace: str, rules: list[dict[str, Any]], gateway_namespace: str | None = "inference-gateway"
) -> dict[str, Any]:
    parent: dict[str, Any] = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference"}
    if gateway_namespace is not None:
        parent["namespace"] = gateway_namespace
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "capture", "namespace": namespace},
        "spec": {"parentRefs": [parent], "rules": rules},
    }


def _header(value: str, name: str = MODEL_HEADER, kind: str = "Exact") -> dict[str, Any]:
    return {"path": {"type": "PathPrefix", "value": "/v1"}, "headers": [{"type": kind, "name": name, "value": value}]}


def test_our_own_routes_are_admitted(route_policy: dict[str, Any], jwt_objects: list[dict[str, Any]]) -> None:
    routes = [o for o in jwt_objects if o["kind"] == "HTTPRoute"]
    assert len(routes) == 3
    for route in routes:
        assert denials(route_policy, route, kind="HTTPRoute") == [], route["metadata"]["name"]


@pytest.mark.parametrize(
    ("namespace", "rules", "message"),
    [
        # A longer path prefix with no header match at all: it would win over every other workload's route.
        ("inference-small", [{"matches": [{"path": {"type": "PathPrefix", "value": "/v1/chat"}}]}], CAPTURE),
        # Another workload's model name.
        ("inference-small", [{"matches": [_header("meta-llama/Llama-3.1-8B-Instruct")]}], CAPTURE),
        # A regular expression that matches every name.
        ("inference-small", [{"matches": [_header(".*", kind="RegularExpression")]}], CAPTURE),
        # One honest match beside a capturing one.
        ("inference-small", [{"matches": [_header("Qwen/Qwen3-8B"), {"path": {"value": "/"}}]}], CAPTURE),
        # A rule without matches matches everything.
        ("inference-small", [{"backendRefs": [{"name": "x", "port": 80}]}], CAPTURE),
        # A namespace that serves no model behind the gateway.
        ("default", [{"matches": [_header("Qwen/Qwen3-8B")]}], None),
    ],
    ids=["path-prefix", "other-model", "regex", "mixed", "no-matches", "other-namespace"],
)
def test_a_route_cannot_capture_another_workloads_traffic(
    route_policy: dict[str, Any], namespace: str, rules: list[dict[str, Any]], message: str | None
) -> None:
    found = denials(route_policy, _route(namespace, rules), kind="HTTPRoute")
    if message is None:
        assert (
            "only the workloads' namespaces may attach routes to the inference gateway inference-gateway/inference"
            in found
        )
    else:
        assert found == [message]


def test_the_header_name_is_matched_whatever_its_case(route_policy: dict[str, Any]) -> None:
    route = _route("inference-small", [{"matches": [_header("Qwen/Qwen3-8B", name=MODEL_HEADER.lower())]}])
    assert denials(route_policy, route, kind="HTTPRoute") == []


def test_the_policy_applies_to_a_parent_ref_without_a_namespace_only_in_the_gateways_namespace(
    route_policy: dict[str, Any],
) -> None:
    # Without a namespace a parentRef means the route's own: in a workload namespace it names no gateway of ours.
    unrelated = _route("inference-small", [{"matches": [{"path": {"value": "/"}}]}], gateway_namespace=None)
    assert denials(route_policy, unrelated, kind="HTTPRoute") == []
    other_kind = _route("inference-small", [{"matches": [_header("Qwen/Qwen3-8B")]}])
    assert denials(route_policy, {**other_kind, "kind": "GRPCRoute"}, kind="GRPCRoute") == [
        "only HTTPRoutes may attach to the inference gateway inference-gateway/inference"
    ]


def test_the_route_policy_is_bound_to_deny_and_validates(jwt_objects: list[dict[str, Any]]) -> None:
    binding = _one(jwt_objects, "ValidatingAdmissionPolicyBinding", "llm-eks-gateway-routes")
    assert binding["spec"] == {"policyName": "llm-eks-gateway-routes", "validationActions": ["Deny"]}
    policy = _one(jwt_objects, "ValidatingAdmissionPolicy", "llm-eks-gateway-routes")
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert_valid([policy, binding])


# -- the generated Service -----------------------------------------------------------------------------------------


def _rendered_service(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The Service istiod 1.30.3 generates for the Gateway (kube-gateway.yaml: type LoadBalancer, the Gateway's
    infrastructure annotations), with the options ConfigMap's `service` overlay strategic-merged over it as
    deploymentcontroller.go does (maps merge key by key)."""
    gateway = _one(objects, "Gateway", "inference")
    service: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "inference-istio", "annotations": dict(gateway["spec"]["infrastructure"]["annotations"])},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80}]},
    }
    overlay = json.loads(_one(objects, "ConfigMap", "inference-options")["data"]["service"])
    service["metadata"]["annotations"].update(overlay["metadata"]["annotations"])
    service["spec"].update(overlay["spec"])
    return service


def test_the_generated_service_is_an_internal_nlb_even_without_copied_annotations(
    key_objects: list[dict[str, Any]],
) -> None:
    service = _rendered_service(key_objects)
    assert service["spec"]["loadBalancerClass"] == "service.k8s.aws/nlb"
    assert service["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    gateway = _one(key_objects, "Gateway", "inference")
    assert gateway["spec"]["infrastructure"]["parametersRef"]["name"] == "inference-options"
    policy = _one(key_objects, "ValidatingAdmissionPolicy", "llm-eks-gateway-services")
    assert denials(policy, service, kind="Service") == []
    without_class = copy.deepcopy(service)
    del without_class["spec"]["loadBalancerClass"]
    internet = copy.deepcopy(service)
    internet["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-scheme"] = "internet-facing"
    expected = [
        "a LoadBalancer Service in inference-gateway must be an internal NLB of the AWS Load Balancer Controller "
        "(loadBalancerClass service.k8s.aws/nlb, service.beta.kubernetes.io/aws-load-balancer-scheme: internal)"
    ]
    assert denials(policy, without_class, kind="Service") == expected
    assert denials(policy, internet, kind="Service") == expected
