"""The inference gateway's Kubernetes side on Envoy Gateway and Envoy AI Gateway: one Gateway per environment with a
listener per credential kind, each workload's AIGatewayRoute matching exactly the names it serves (and the HTTPRoute
the AI Gateway's controller writes from it), InferencePools over exactly their own pods, the endpoint pickers with
flow control, the NetworkPolicies that let each hop through and nothing else, and the gateway panels on each
dashboard."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import cdk8s
import pytest

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.images.lock import ImageLock, LockEntry
from llm_eks.infra.charts import build_charts
from llm_eks.infra.images import environment_images
from llm_eks.infra.workloads import VllmWorkload, build_workloads
from llm_eks.manifests.gateway import (
    ENVOY_PROXY_IMAGE,
    EPP_IMAGE,
    MODEL_HEADER,
    FlowControl,
    GatewayChart,
    GatewayProps,
    ModelRoute,
    PoolBackend,
    ServiceBackend,
    Tenant,
)
from llm_eks.manifests.gateway.panels import EPP_DURATION, EPP_ERRORS, EPP_REQUESTS, GENAI_REQUESTS
from llm_eks.manifests.gateway.routes import generated_rules, route_kind
from llm_eks.manifests.promql import check_promql
from llm_eks.manifests.promql_parse import parse_promql
from tests.gateway_cases import (
    ADAPTERS,
    BODY,
    CERT,
    CHAT_MODEL,
    CLIENTS,
    CLUSTER_OIDC,
    MOE_MODEL,
    SG,
    SMALL_MODEL,
    all_of,
    body,
    charts,
    flat,
    one,
)
from tests.kube_schema import assert_valid, validation_errors
from tests.netpol import Cluster, External, Pod


@pytest.fixture(scope="module")
def by_chart() -> dict[str, list[dict[str, Any]]]:
    return charts(BODY)


@pytest.fixture(scope="module")
def objects(by_chart: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return flat(by_chart)


def _serving_pods(objects: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, str]]]:
    """Workload name -> (namespace, pod template labels) of every vLLM Deployment."""
    return {
        d["metadata"]["name"]: (d["metadata"]["namespace"], d["spec"]["template"]["metadata"]["labels"])
        for d in all_of(objects, "Deployment")
        if d["metadata"]["name"].startswith("vllm-") and not d["metadata"]["name"].endswith("-epp")
    }


def _route_table(objects: list[dict[str, Any]]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """model name -> [(route namespace, backendRef)] from every AIGatewayRoute's header matches."""
    table: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for route in all_of(objects, "AIGatewayRoute"):
        for rule in route["spec"]["rules"]:
            for match in rule["matches"]:
                (header,) = match["headers"]
                assert (header["type"], header["name"]) == ("Exact", MODEL_HEADER)
                for backend in rule["backendRefs"]:
                    table.setdefault(header["value"], []).append((route["metadata"]["namespace"], backend))
    return table


# -- the objects -------------------------------------------------------------------------------------------------


def test_the_environment_has_one_gateway_chart_and_a_route_chart_per_workload(
    by_chart: dict[str, list[dict[str, Any]]],
) -> None:
    assert [c for c in by_chart if c == "gateway" or c.endswith("-route")] == [
        "gateway",
        "chat-route",
        "small-route",
        "moe-route",
    ]


def test_every_gateway_object_validates_against_its_schema(by_chart: dict[str, list[dict[str, Any]]]) -> None:
    for chart in ("gateway", "chat-route", "small-route", "moe-route"):
        assert_valid(by_chart[chart])


def test_the_schemas_catch_a_misspelled_field(objects: list[dict[str, Any]]) -> None:
    """The vendored CRDs are strict here: a typo the API server would prune silently fails the test."""
    policy = json.loads(json.dumps(one(objects, "BackendTrafficPolicy", "inference")))
    policy["spec"]["rateLimit"]["global"]["rules"][0]["limit"]["request"] = 5
    assert validation_errors(policy)
    route = json.loads(json.dumps(one(objects, "AIGatewayRoute", "vllm-chat")))
    route["spec"]["rules"][0]["timeout"] = {"request": "1s"}
    assert validation_errors(route)


def test_the_gateway_has_a_listener_per_credential_kind_behind_an_internal_tls_nlb(
    objects: list[dict[str, Any]],
) -> None:
    gw = one(objects, "Gateway", "inference")
    assert gw["spec"]["gatewayClassName"] == "llm-eks"
    assert [(listener["name"], listener["port"], listener["protocol"]) for listener in gw["spec"]["listeners"]] == [
        ("api-key", 443, "HTTP"),
        ("jwt", 8443, "HTTP"),
    ]
    namespaces = gw["spec"]["listeners"][0]["allowedRoutes"]["namespaces"]["selector"]["matchExpressions"][0]
    assert namespaces["values"] == ["inference-chat", "inference-moe", "inference-small"]
    assert gw["metadata"]["annotations"]["aigateway.envoyproxy.io/gateway-config"] == "inference"
    service = one(objects, "EnvoyProxy", "inference")["spec"]["provider"]["kubernetes"]["envoyService"]
    annotations = service["annotations"]
    assert service["type"] == "LoadBalancer" and service["loadBalancerClass"] == "service.k8s.aws/nlb"
    assert service["loadBalancerSourceRanges"] == CLIENTS
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] == CERT
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-ports"] == "443,8443"
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy"].startswith(
        "ELBSecurityPolicy-TLS13-1-2"
    )


def test_envoy_runs_two_pods_in_two_zones_with_a_budget_and_drains_a_generation(objects: list[dict[str, Any]]) -> None:
    spec = one(objects, "EnvoyProxy", "inference")["spec"]
    kubernetes = spec["provider"]["kubernetes"]
    deployment = kubernetes["envoyDeployment"]
    assert deployment["replicas"] == 2 and kubernetes["envoyPDB"] == {"minAvailable": 1}
    (spread,) = deployment["pod"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone" and spread["whenUnsatisfiable"] == "DoNotSchedule"
    assert deployment["container"]["image"] == ENVOY_PROXY_IMAGE
    assert deployment["container"]["resources"]["limits"]["memory"]
    assert spec["shutdown"]["drainTimeout"] == "600s"


def test_each_model_and_adapter_name_routes_to_exactly_its_own_workload(objects: list[dict[str, Any]]) -> None:
    table = _route_table(objects)
    pool = "inference.networking.k8s.io"
    assert table == {
        CHAT_MODEL: [("inference-chat", {"group": pool, "kind": "InferencePool", "name": "vllm-chat"})],
        **{a: [("inference-chat", {"group": pool, "kind": "InferencePool", "name": "vllm-chat"})] for a in ADAPTERS},
        SMALL_MODEL: [("inference-small", {"group": pool, "kind": "InferencePool", "name": "vllm-small"})],
        MOE_MODEL: [("inference-moe", {"name": "ray-moe"})],
    }
    for route in all_of(objects, "AIGatewayRoute"):
        assert route["apiVersion"] == route_kind().api_version
        assert route["spec"]["parentRefs"] == [
            {
                "group": "gateway.networking.k8s.io",
                "kind": "Gateway",
                "name": "inference",
                "namespace": "inference-gateway",
            }
        ]
        assert "llmRequestCosts" not in route["spec"] and "hostnames" not in route["spec"]


def test_the_route_timeout_outlasts_the_pickers_hold(objects: list[dict[str, Any]]) -> None:
    """The AI Gateway's default request timeout is 60 s; a held request at zero replicas waits far longer."""
    for route in all_of(objects, "AIGatewayRoute"):
        for rule in route["spec"]["rules"]:
            timeout = int(rule["timeouts"]["request"].removesuffix("s"))
            assert timeout > 60, route["metadata"]["name"]
    config = one(objects, "ConfigMap", "vllm-chat-epp")["data"]["plugins.yaml"]
    ttl = int(config.split("defaultRequestTTL: ")[1].split("s")[0])
    (rule,) = one(objects, "AIGatewayRoute", "vllm-chat")["spec"]["rules"]
    assert int(rule["timeouts"]["request"].removesuffix("s")) > ttl


def test_the_http_route_the_controller_writes_is_what_verify_expects() -> None:
    """generated_rules: each rule's matches under "/" with its backend (`llm-eks verify` compares the cluster's
    HTTPRoute with it)."""
    route = ModelRoute("vllm-a", "inference-a", ("a", "b"), PoolBackend({"app": "a"}), flow=_FLOW)
    props = _props(routes=(route,))
    (rule,) = generated_rules(props, route)
    assert rule["matches"] == [
        {"headers": [{"type": "Exact", "name": MODEL_HEADER, "value": m}], "path": {"type": "PathPrefix", "value": "/"}}
        for m in ("a", "b")
    ]
    assert rule["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "vllm-a", "namespace": "inference-a"}
    ]


def test_each_pool_selects_its_own_workloads_pods_and_no_other(objects: list[dict[str, Any]]) -> None:
    pods = _serving_pods(objects)
    for pool in all_of(objects, "InferencePool"):
        selector = pool["spec"]["selector"]["matchLabels"]
        matched = [
            n
            for n, (ns, labels) in pods.items()
            if ns == pool["metadata"]["namespace"] and _labels_match(selector, labels)
        ]
        assert matched == [pool["metadata"]["name"]]
        assert pool["spec"]["endpointPickerRef"] == {
            "name": f"{pool['metadata']['name']}-epp",
            "port": {"number": 9002},
            "failureMode": "FailClose",
        }


def _labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_a_picker_runs_two_replicas_under_leader_election_without_a_budget(objects: list[dict[str, Any]]) -> None:
    """Only the leader is Ready: a PDB would block every drain; two replicas make a drain a failover."""
    deployment = one(objects, "Deployment", "vllm-chat-epp")
    assert deployment["spec"]["replicas"] == 2
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--ha-enable-leader-election" in container["args"]
    assert not [p for p in all_of(objects, "PodDisruptionBudget") if p["metadata"]["name"].endswith("-epp")]
    leases = one(objects, "Role", "vllm-chat-epp-leader-election")["rules"][0]
    assert leases["resources"] == ["leases"]
    # A held request on a draining leader is answered before the pod goes.
    ttl = int(
        one(objects, "ConfigMap", "vllm-chat-epp")["data"]["plugins.yaml"]
        .split("defaultRequestTTL: ")[1][:-2]
        .split("s")[0]
    )
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > ttl


def test_each_pool_has_an_objective_per_tenant_that_may_call_it(objects: list[dict[str, Any]]) -> None:
    objectives = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o["spec"] for o in all_of(objects, "InferenceObjective")
    }
    pool = "inference.networking.k8s.io"
    assert objectives == {
        ("inference-chat", "tenant-team-a"): {"priority": 10, "poolRef": {"group": pool, "name": "vllm-chat"}},
        ("inference-chat", "tenant-team-b"): {"priority": 0, "poolRef": {"group": pool, "name": "vllm-chat"}},
        ("inference-chat", "tenant-team-c"): {"priority": -10, "poolRef": {"group": pool, "name": "vllm-chat"}},
        ("inference-small", "tenant-team-c"): {"priority": -10, "poolRef": {"group": pool, "name": "vllm-small"}},
        ("inference-small", "tenant-partner"): {"priority": 0, "poolRef": {"group": pool, "name": "vllm-small"}},
    }


def test_a_ray_serve_model_is_an_ai_service_backend_of_its_own_serve_service(objects: list[dict[str, Any]]) -> None:
    backend = one(objects, "Backend", "ray-moe")
    assert backend["spec"] == {
        "type": "Endpoints",
        "endpoints": [{"fqdn": {"hostname": "ray-moe-serve-svc.inference-moe.svc.cluster.local", "port": 8000}}],
    }
    assert one(objects, "AIServiceBackend", "ray-moe")["spec"]["backendRef"] == {
        "group": "gateway.envoyproxy.io",
        "kind": "Backend",
        "name": "ray-moe",
    }


def test_a_picker_has_a_standby_on_another_node_and_no_budget_that_would_pin_its_leader(
    objects: list[dict[str, Any]],
) -> None:
    """Two replicas elect a leader; only the leader is Ready (llm-d-router v0.10.0 cmd/epp/runner/health.go). So the
    Deployment recreates on update (a rolling update would wait for the standby to be Ready, which it never is) and no
    PodDisruptionBudget covers it (with one Ready pod it would refuse every eviction of the leader, so a drain of its
    node would never end); the standby is spread to another node and zone."""
    deployment = one(objects, "Deployment", "vllm-chat-epp")
    assert deployment["spec"]["replicas"] == 2 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert "--ha-enable-leader-election" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert [(c["topologyKey"], c["whenUnsatisfiable"]) for c in spread] == [
        ("topology.kubernetes.io/zone", "ScheduleAnyway"),
        ("kubernetes.io/hostname", "ScheduleAnyway"),
    ]
    budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    picker = deployment["spec"]["template"]["metadata"]["labels"]
    assert not [b for b in budgets if _labels_match(b["spec"]["selector"]["matchLabels"], picker)]


def test_the_gateway_alerts_on_each_pickers_outage_and_its_standby(objects: list[dict[str, Any]]) -> None:
    """Their rules live with the gateway (llm_eks.manifests.gateway.observability; promtool runs them in
    test_gateway_observability): per vLLM pool, its picker down (fail-closed: the model's requests fail) and its
    standby missing (the next loss of the leader is that outage)."""
    rule = one(objects, "PrometheusRule", "inference-alerts")
    alerts = [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    for alert in ("GatewayEndpointPickerDown", "GatewayEndpointPickerStandbyMissing"):
        assert alerts.count(alert) == 2, alert  # vllm-chat and vllm-small
    assert not [o for o in objects if o["kind"] == "PrometheusRule" and o["metadata"]["name"].endswith("-epp-alerts")]


def test_a_model_spanning_nodes_routes_to_its_leaders_only() -> None:
    from llm_eks.infra.workloads.gateway import model_route

    big = {
        "model": "deepseek-ai/DeepSeek-V3",
        "accelerator": "p5.48xlarge",
        "replicas": {"min": 1, "max": 1},
        "api_key": False,
    }
    b = body(tenants={"t": {"credential": {"api_key": {}}, "models": ["big"]}})
    b["workloads"] = {"big": big}
    config = parse_environment("qa", b)
    plans = plan_workloads(config)
    (workload,) = build_workloads(config, plans)
    assert isinstance(workload, VllmWorkload) and workload.vllm.nodes_per_replica > 1
    route = model_route(config.served[0], workload, plans[0], ImageLock())
    assert isinstance(route.backend, PoolBackend)
    assert route.backend.selector["leaderworkerset.sigs.k8s.io/worker-index"] == "0"


# -- network policies --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def network(objects: list[dict[str, Any]]) -> Cluster:
    namespaces = {o["metadata"]["name"]: o["metadata"].get("labels", {}) for o in all_of(objects, "Namespace")}
    return Cluster(all_of(objects, "NetworkPolicy"), namespaces)


ENVOY = Pod(
    "inference-gateway",
    {
        "app.kubernetes.io/name": "envoy",
        "app.kubernetes.io/component": "proxy",
        "app.kubernetes.io/managed-by": "envoy-gateway",
        "gateway.envoyproxy.io/owning-gateway-name": "inference",
        "gateway.envoyproxy.io/owning-gateway-namespace": "inference-gateway",
    },
)
STRANGER = Pod("default", {"app": "curl"})


def test_envoy_reaches_the_pods_and_pickers_and_nothing_else_does(
    network: Cluster, objects: list[dict[str, Any]]
) -> None:
    pods = _serving_pods(objects)
    chat = Pod(*pods["vllm-chat"])
    small = Pod(*pods["vllm-small"])
    chat_picker = Pod("inference-chat", one(objects, "Deployment", "vllm-chat-epp")["spec"]["selector"]["matchLabels"])
    for dest, port in ((chat, 8000), (small, 8000), (chat_picker, 9002)):
        assert network.allows(ENVOY, dest, port), dest
        assert not network.allows(STRANGER, dest, port), dest
    assert network.allows(chat_picker, chat, 8000)
    # One workload's picker reads only its own pool's metrics.
    assert not network.allows(chat_picker, small, 8000)
    moe = Pod("inference-moe", {"app.kubernetes.io/instance": "ray-moe", "ray.io/is-ray-node": "yes"})
    assert network.allows(ENVOY, moe, 8000)
    assert not network.allows(ENVOY, moe, 6379)


def test_only_the_load_balancer_subnets_and_labelled_clients_reach_envoys_listeners(network: Cluster) -> None:
    """A listener below 1024 binds 10000 higher in the pod (Envoy Gateway): 443 is 10443 there."""
    envoy_ip = replace(ENVOY, ip="10.0.1.10")
    lb_subnet = External("10.0.255.200")
    assert network.allows(lb_subnet, envoy_ip, 10443) and network.allows(lb_subnet, envoy_ip, 8443)
    assert not network.allows(External("10.0.1.20"), envoy_ip, 10443)
    assert not network.allows(lb_subnet, envoy_ip, 19000)
    assert not network.allows(STRANGER, envoy_ip, 10443)
    client = Pod("apps", {"llm-eks.io/inference-client": "true"})
    labelled = {"apps": {"llm-eks.io/inference-client": "true", "kubernetes.io/metadata.name": "apps"}}
    assert Cluster(network.policies, {**network.namespaces, **labelled}).allows(client, envoy_ip, 8443)


# -- observability -----------------------------------------------------------------------------------------------


def _dashboard_exprs(objects: list[dict[str, Any]], namespace: str) -> list[str]:
    maps = [
        o for o in all_of(objects, "ConfigMap") if o["metadata"]["namespace"] == namespace and "dashboard" in str(o)
    ]
    exprs = []
    for cm in maps:
        for text in cm.get("data", {}).values():
            if text.lstrip().startswith("{"):
                board = json.loads(text)
                exprs += [t["expr"] for p in board.get("panels", []) for t in p.get("targets", [])]
    return exprs


def test_each_dashboard_shows_the_gateways_requests_latency_and_errors_for_its_model(
    objects: list[dict[str, Any]],
) -> None:
    chat = [e for e in _dashboard_exprs(objects, "inference-chat") if "llm_d_epp" in e]
    assert [name for name in (EPP_REQUESTS, EPP_DURATION, EPP_ERRORS) if any(name in e for e in chat)] == [
        EPP_REQUESTS,
        EPP_DURATION,
        EPP_ERRORS,
    ]
    assert all('job="vllm-chat-epp", namespace="inference-chat"' in e for e in chat)
    moe = [e for e in _dashboard_exprs(objects, "inference-moe") if "gen_ai_server" in e]
    assert any(GENAI_REQUESTS in e for e in moe)
    assert moe and all(f'gen_ai_original_model="{MOE_MODEL}"' in e for e in moe)
    for expr in (*chat, *moe):
        parse_promql(expr)
        assert check_promql(expr) == []


def test_the_pickers_and_envoy_are_scraped(objects: list[dict[str, Any]]) -> None:
    monitors = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects}
    assert ("ServiceMonitor", "inference-chat", "vllm-chat-epp") in monitors
    pod_monitor = one(objects, "PodMonitor", "inference")
    assert pod_monitor["spec"]["podMetricsEndpoints"] == [
        {"targetPort": 19001, "path": "/stats/prometheus", "interval": "15s"},
        {"targetPort": 1064, "path": "/metrics", "interval": "15s"},
    ]


# -- bad input ---------------------------------------------------------------------------------------------------


def _config_error(b: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        config = parse_environment("qa", b)
        build_workloads(config, plan_workloads(config))
    return str(info.value)


def test_a_gateway_without_certificate_or_http_choice_is_refused() -> None:
    assert _config_error(body(certificate_arn=None)) == (
        "environments.qa.gateway.certificate_arn: None is not allowed; gateway needs an ACM certificate ARN for "
        "HTTPS, or allow_http: true to serve plain HTTP [LLMEKS-E131]"
    )


def test_a_gateway_certificate_in_another_region_is_refused() -> None:
    b = {**body(), "account": "123456789012", "region": "eu-west-1"}
    b["vpc"] = {"availability_zones": ["eu-west-1a", "eu-west-1b"]}
    assert _config_error(b) == (
        f"environments.qa.gateway.certificate_arn: {CERT!r} is not allowed; must be a certificate in eu-west-1, "
        "the NLB's [LLMEKS-E131]"
    )


def test_an_adapter_named_like_another_workloads_model_is_refused() -> None:
    b = body()
    b["workloads"]["chat"] = {**b["workloads"]["chat"], "lora_adapters": {SMALL_MODEL: "acme/x-lora"}}
    assert SMALL_MODEL in _config_error(b)


_FLOW = FlowControl(
    hold_seconds=120, retry_after_seconds=30, request_timeout_seconds=600, max_concurrency=16, band_capacity=64
)


def _props(**overrides: Any) -> GatewayProps:
    route = ModelRoute("vllm-a", "inference-a", ("a",), PoolBackend({"app": "a"}), flow=_FLOW)
    base = GatewayProps(
        routes=(route,),
        tenants=(Tenant("t", ("a",), api_key_secret="llm-eks/qa/tenants/t/api-key"),),
        inbound_cidrs=("10.0.0.0/16",),
        load_balancer_cidrs=("10.0.255.0/26",),
    )
    return replace(base, **{"allow_http": True, **overrides})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"inbound_cidrs": ()}, "gateway.inbound_cidrs: () is not allowed; name at least one IPv4 CIDR [LLMEKS-E131]"),
        (
            {"inbound_cidrs": ("0.0.0.0/0",)},
            "gateway.inbound_cidrs: '0.0.0.0/0' is not allowed; must not be the whole internet, list your own ranges"
            " [LLMEKS-E131]",
        ),
        (
            {"ssl_policy": "ELBSecurityPolicy-2016-08"},
            "gateway.ssl_policy: 'ELBSecurityPolicy-2016-08' is not allowed; must be an "
            "ELBSecurityPolicy-TLS13-1-2-* or -TLS13-1-3-* policy (TLS 1.2 and newer) [LLMEKS-E131]",
        ),
        (
            {"certificate_arn": CERT},
            "gateway.allow_http: True is not allowed with certificate_arn; the endpoint serves HTTPS only"
            " [LLMEKS-E131]",
        ),
        (
            {
                "routes": (
                    ModelRoute("vllm-a", "inference-a", ("a",), PoolBackend({"app": "a"}), flow=_FLOW),
                    ModelRoute("ray-b", "inference-b", ("a",), ServiceBackend("ray-b-serve-svc", {"app": "b"})),
                )
            },
            "gateway.routes[ray-b].model_names: 'a' is not allowed; gateway.routes[vllm-a] already serves it (each "
            "model name routes to exactly one workload) [LLMEKS-E131]",
        ),
        (
            {"routes": (ModelRoute("vllm-a", "inference-a", ("has space",), PoolBackend({"app": "a"}), flow=_FLOW),)},
            "gateway.routes[vllm-a].model_names: 'has space' is not allowed; must be 1-4096 visible ASCII "
            "characters, no spaces [LLMEKS-E131]",
        ),
        (
            {"routes": (ModelRoute("vllm-a", "inference-a", ("a",), PoolBackend({"app": "a"})),)},
            "gateway.routes[vllm-a].flow: None is not allowed; a pool's picker holds and sheds by its flow control"
            " [LLMEKS-E131]",
        ),
        (
            {
                "routes": (
                    ModelRoute(
                        "vllm-a",
                        "inference-a",
                        ("a",),
                        PoolBackend({"app": "a"}),
                        flow=replace(_FLOW, hold_seconds=300),
                    ),
                )
            },
            "gateway.routes[vllm-a].flow.hold_seconds: 300 is not allowed; must be 1 to 299 (the AI Gateway's 300 s "
            "picker timeout) [LLMEKS-E131]",
        ),
        (
            {
                "routes": (
                    ModelRoute(
                        "vllm-a",
                        "inference-a",
                        ("a",),
                        PoolBackend({"app": "a"}),
                        flow=replace(_FLOW, request_timeout_seconds=100),
                    ),
                )
            },
            "gateway.routes[vllm-a].flow.request_timeout_seconds: 100 is not allowed; must exceed the hold (120 s): "
            "a held request would time out before it is served [LLMEKS-E131]",
        ),
        (
            {"tenants": ()},
            "gateway.tenants: () is not allowed; at least one tenant must be able to call the gateway [LLMEKS-E132]",
        ),
        (
            {"tenants": (Tenant("t", ("b",), api_key_secret="k"),)},
            "gateway.tenants[t].models: 'b' is not allowed; must be a name one of the gateway's routes serves"
            " [LLMEKS-E132]",
        ),
    ],
)
def test_bad_gateway_props_are_one_line_errors(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        GatewayChart(cdk8s.App(), "gateway", _props(**overrides), region="us-west-2")
    assert str(info.value) == message


def test_api_key_tenants_need_the_region_of_their_secrets() -> None:
    with pytest.raises(ConfigError) as info:
        GatewayChart(cdk8s.App(), "gateway", _props())
    assert str(info.value).startswith("region: None is not allowed with API-key tenants;")


def test_the_gateway_props_are_the_workloads_own() -> None:
    config = parse_environment("qa", BODY)
    workloads = build_workloads(config, plan_workloads(config))
    chat = next(w for w in workloads if isinstance(w, VllmWorkload) and w.key == "chat")
    assert chat.monitoring.extra_panels[0].title == "Gateway: requests per model"


def test_locked_gateway_images_are_pinned_by_digest_and_listed_for_the_lock() -> None:
    """`llm-eks images lock` covers the picker and the data plane's Envoy: a locked digest reaches both (and the
    unlocked-digest checkov suppression goes), and the environment's image list names them."""
    digest = "sha256:" + "ab" * 32
    entry = LockEntry(digest, "2026-11-30T00:00:00Z", "https://ghcr.io/v2/x/manifests/y")
    lock = ImageLock(entries={EPP_IMAGE: entry, ENVOY_PROXY_IMAGE: entry})
    config = parse_environment("qa", BODY)
    plans = plan_workloads(config)
    workloads = build_workloads(config, plans, images=lock)
    built = build_charts(
        cdk8s.App(),
        config,
        workloads,
        node_role_name="r",
        security_group_ids=SG,
        region="us-west-2",
        cluster_oidc_issuer=CLUSTER_OIDC,
    )
    objects = [o for c in built for o in c.chart.to_json()]
    deployment = one(objects, "Deployment", "vllm-chat-epp")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{EPP_IMAGE}@{digest}"
    assert not any(v.startswith("CKV_K8S_43=") for v in deployment["metadata"]["annotations"].values())
    envoy = one(objects, "EnvoyProxy", "inference")["spec"]["provider"]["kubernetes"]["envoyDeployment"]
    assert envoy["container"]["image"] == f"{ENVOY_PROXY_IMAGE}@{digest}"
    assert {EPP_IMAGE, ENVOY_PROXY_IMAGE} <= set(environment_images(config, plans))
