"""The inference gateway's Kubernetes side: one Gateway per environment, each workload's HTTPRoute matching exactly
the names it serves, InferencePools over exactly its pods, the endpoint pickers, the payload processor, the
NetworkPolicies that let each hop through and nothing else, and the gateway panels on each dashboard."""

from __future__ import annotations

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
    EPP_IMAGE,
    IPP_IMAGE,
    MODEL_HEADER,
    GatewayChart,
    GatewayProps,
    ModelRoute,
    PoolBackend,
    ServiceBackend,
)
from llm_eks.manifests.gateway.panels import EPP_DURATION, EPP_ERRORS, EPP_REQUESTS, ISTIO_REQUESTS
from llm_eks.manifests.promql import check_promql
from llm_eks.manifests.promql_parse import parse_promql
from tests.chart_helpers import placement_groups
from tests.kube_schema import assert_valid, validation_errors
from tests.netpol import Cluster, External, Pod

SG = ("sg-0123456789abcdef0",)
ADAPTERS = {"sql": "acme/llama-3.1-8b-sql-lora", "support-fr": "acme/llama-3.1-8b-support-fr-lora"}
ISSUER = "https://login.example.com/realms/llm"
JWT = {"mode": "jwt", "issuer": ISSUER, "jwks_uri": f"{ISSUER}/protocol/openid-connect/certs"}
CLIENTS = ["192.168.0.0/16"]
# Three workloads on two engines behind one endpoint that checks a JWT on every request (Ray Serve checks no key of
# its own): a vLLM model with two LoRA adapters, a second vLLM model, and a Ray Serve model.
BODY: dict[str, Any] = {
    "gateway": {"allow_http": True, "inbound_cidrs": CLIENTS, "auth": JWT},
    # The adapters are staged into the environment's bucket, as LoRA requires.
    "weights_bucket": {},
    "workloads": {
        "chat": {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "accelerator": "g6e.xlarge",
            "replicas": {"min": 1, "max": 3},
            "weights": "staged",
            "lora_adapters": ADAPTERS,
            "api_key": False,
        },
        "small": {
            "model": "Qwen/Qwen3-8B",
            "accelerator": "g6e.xlarge",
            "replicas": {"min": 1, "max": 2},
            "api_key": False,
        },
        "moe": {
            "engine": "ray-serve",
            "model": "Qwen/Qwen3-30B-A3B",
            "accelerator": "g6e.12xlarge",
            "max_model_len": 16384,
            "replicas": {"min": 1, "max": 2},
        },
    },
}
CERT = "arn:aws:acm:us-east-1:123456789012:certificate/0f6b3c1e-1234-4d5e-8f9a-0123456789ab"


def _charts(body: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    config = parse_environment("qa", body)
    workloads = build_workloads(config, plan_workloads(config))
    charts = build_charts(
        cdk8s.App(),
        config,
        workloads,
        node_role_name="r",
        security_group_ids=SG,
        placement_groups=placement_groups(workloads),
    )
    return {c.id: c.chart.to_json() for c in charts}


@pytest.fixture(scope="module")
def charts() -> dict[str, list[dict[str, Any]]]:
    return _charts(BODY)


@pytest.fixture(scope="module")
def objects(charts: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [o for objs in charts.values() for o in objs]


def _all(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _serving_pods(objects: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, str]]]:
    """Workload name -> (namespace, pod template labels) of every vLLM Deployment."""
    return {
        d["metadata"]["name"]: (d["metadata"]["namespace"], d["spec"]["template"]["metadata"]["labels"])
        for d in _all(objects, "Deployment")
        if d["metadata"]["name"].startswith("vllm-") and not d["metadata"]["name"].endswith("-epp")
    }


def _route_table(objects: list[dict[str, Any]]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """model name -> [(route namespace, backendRef)] from every HTTPRoute's header matches."""
    table: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for route in _all(objects, "HTTPRoute"):
        for rule in route["spec"]["rules"]:
            for match in rule["matches"]:
                (header,) = match["headers"]
                assert (header["type"], header["name"]) == ("Exact", MODEL_HEADER)
                for backend in rule["backendRefs"]:
                    table.setdefault(header["value"], []).append((route["metadata"]["namespace"], backend))
    return table


# -- the objects -------------------------------------------------------------------------------------------------


def test_the_environment_has_one_gateway_chart_and_a_route_chart_per_workload(charts: dict[str, Any]) -> None:
    assert [c for c in charts if c == "gateway" or c.endswith("-route")] == [
        "gateway",
        "chat-route",
        "small-route",
        "moe-route",
    ]


def test_every_gateway_object_validates_against_its_schema(charts: dict[str, list[dict[str, Any]]]) -> None:
    ours = [o for cid, objs in charts.items() if cid == "gateway" or cid.endswith("-route") for o in objs]
    kinds = {o["kind"] for o in ours}
    assert {"Gateway", "HTTPRoute", "InferencePool", "EnvoyFilter", "DestinationRule", "ServiceMonitor"} <= kinds
    assert_valid(ours)


def test_the_schemas_catch_a_bad_inference_pool_and_a_bad_envoy_filter(objects: list[dict[str, Any]]) -> None:
    pool = _one(objects, "InferencePool", "vllm-chat")
    bad_pool = {**pool, "spec": {**pool["spec"], "targetPorts": []}}
    assert validation_errors(bad_pool)
    envoy_filter = _one(objects, "EnvoyFilter", "payload-processor")
    patch = envoy_filter["spec"]["configPatches"][0]
    bad_filter = {
        **envoy_filter,
        "spec": {**envoy_filter["spec"], "configPatches": [{**patch, "applyTo": "HTTP_FILTERS"}]},
    }
    assert validation_errors(bad_filter)


def test_the_gateway_listens_on_an_internal_nlb_and_admits_routes_from_the_workload_namespaces_only(
    objects: list[dict[str, Any]],
) -> None:
    gw = _one(objects, "Gateway", "inference")
    assert gw["metadata"]["namespace"] == "inference-gateway"
    assert gw["spec"]["gatewayClassName"] == "istio"
    annotations = gw["spec"]["infrastructure"]["annotations"]
    assert annotations["service.beta.kubernetes.io/load-balancer-source-ranges"] == "192.168.0.0/16"
    assert gw["spec"]["infrastructure"]["parametersRef"] == {
        "group": "",
        "kind": "ConfigMap",
        "name": "inference-options",
    }
    (listener,) = gw["spec"]["listeners"]
    assert (listener["name"], listener["port"], listener["protocol"]) == ("http", 80, "HTTP")
    (expression,) = listener["allowedRoutes"]["namespaces"]["selector"]["matchExpressions"]
    assert expression == {
        "key": "kubernetes.io/metadata.name",
        "operator": "In",
        "values": ["inference-chat", "inference-moe", "inference-small"],
    }


def test_with_a_certificate_the_nlb_ends_tls_on_443_with_a_tls12_policy() -> None:
    charts = _charts(
        {
            **BODY,
            "account": "123456789012",
            "region": "us-east-1",
            "vpc": {"availability_zones": ["us-east-1a", "us-east-1b"]},
            "gateway": {"certificate_arn": CERT, "inbound_cidrs": CLIENTS, "auth": JWT},
        }
    )
    gw = _one(charts["gateway"], "Gateway", "inference")
    annotations = gw["spec"]["infrastructure"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] == CERT
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-ports"] == "443"
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy"].startswith(
        "ELBSecurityPolicy-TLS13-1-2-"
    )
    (listener,) = gw["spec"]["listeners"]
    assert (listener["name"], listener["port"]) == ("https", 443)
    for route in _all(charts["chat-route"], "HTTPRoute"):
        assert route["spec"]["parentRefs"][0]["sectionName"] == "https"


# -- routing -----------------------------------------------------------------------------------------------------


def test_each_model_and_adapter_name_routes_to_exactly_its_own_workload(objects: list[dict[str, Any]]) -> None:
    table = _route_table(objects)
    assert sorted(table) == sorted(
        ["meta-llama/Llama-3.1-8B-Instruct", "sql", "support-fr", "Qwen/Qwen3-8B", "Qwen/Qwen3-30B-A3B"]
    )
    assert all(len(backends) == 1 for backends in table.values())
    pool = {"group": "inference.networking.k8s.io", "kind": "InferencePool"}
    assert table["meta-llama/Llama-3.1-8B-Instruct"] == [("inference-chat", {**pool, "name": "vllm-chat"})]
    assert table["sql"] == table["support-fr"] == table["meta-llama/Llama-3.1-8B-Instruct"]
    assert table["Qwen/Qwen3-8B"] == [("inference-small", {**pool, "name": "vllm-small"})]
    assert table["Qwen/Qwen3-30B-A3B"] == [
        ("inference-moe", {"kind": "Service", "name": "ray-moe-serve-svc", "port": 8000})
    ]


def test_each_pool_selects_its_own_workloads_pods_and_no_other(objects: list[dict[str, Any]]) -> None:
    pods = _serving_pods(objects)
    assert sorted(pods) == ["vllm-chat", "vllm-small"]
    for pool in _all(objects, "InferencePool"):
        selector = pool["spec"]["selector"]["matchLabels"]
        selected = [
            name
            for name, (ns, labels) in pods.items()
            if ns == pool["metadata"]["namespace"] and _labels_match(selector, labels)
        ]
        assert selected == [pool["metadata"]["name"]]
        assert pool["spec"]["targetPorts"] == [{"number": 8000}]
        picker = pool["spec"]["endpointPickerRef"]
        assert picker == {"name": f"{selected[0]}-epp", "port": {"number": 9002}, "failureMode": "FailOpen"}


def test_a_picker_serves_its_own_pool_with_load_kv_and_prefix_scorers(objects: list[dict[str, Any]]) -> None:
    deployment = _one(objects, "Deployment", "vllm-chat-epp")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[args.index("--pool-name") + 1] == "vllm-chat"
    assert args[args.index("--pool-namespace") + 1] == "inference-chat"
    assert "--metrics-endpoint-auth=false" in args and "--enable-pprof=false" in args
    config = _one(objects, "ConfigMap", "vllm-chat-epp")["data"]["plugins.yaml"]
    for scorer in ("queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer"):
        assert f"pluginRef: {scorer}" in config
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_a_picker_has_a_standby_on_another_node_and_no_budget_that_would_pin_its_leader(
    objects: list[dict[str, Any]],
) -> None:
    """Two replicas elect a leader; only the leader is Ready (llm-d-router v0.10.0 cmd/epp/runner/health.go). So the
    Deployment recreates on update (a rolling update would wait for the standby to be Ready, which it never is) and no
    PodDisruptionBudget covers it (with one Ready pod it would refuse every eviction of the leader, so a drain of its
    node would never end); the standby is spread to another node and zone."""
    deployment = _one(objects, "Deployment", "vllm-chat-epp")
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


def test_the_gateway_and_each_picker_alert(objects: list[dict[str, Any]]) -> None:
    """Their rules live with the gateway (llm_eks.manifests.gateway.alerts; promtool runs them in
    test_promtool_rules)."""
    rules = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): [
            r["alert"] for g in o["spec"]["groups"] for r in g["rules"] if "alert" in r
        ]
        for o in objects
        if o["kind"] == "PrometheusRule"
    }
    assert rules[("inference-gateway", "inference-gateway-alerts")] == [
        "GatewayErrorRatioHigh",
        "GatewayPayloadProcessorDown",
        "GatewayPayloadProcessorDegraded",
    ]
    assert rules[("inference-chat", "vllm-chat-epp-alerts")] == ["EndpointPickerDown", "EndpointPickerStandbyMissing"]


def test_a_model_spanning_nodes_routes_to_its_leaders_only() -> None:
    big = {
        "model": "Qwen/Qwen3-235B-A22B-FP8",
        "accelerator": "g6e.12xlarge",
        "max_model_len": 8192,
        "replicas": {"min": 1, "max": 2},
    }
    charts = _charts({"gateway": {"allow_http": True, "inbound_cidrs": CLIENTS}, "workloads": {"big": big}})
    pool = _one(charts["big-route"], "InferencePool", "vllm-big")
    assert pool["spec"]["selector"]["matchLabels"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"


def test_the_payload_processor_runs_after_the_jwt_check_and_fails_closed(objects: list[dict[str, Any]]) -> None:
    envoy_filter = _one(objects, "EnvoyFilter", "payload-processor")
    assert envoy_filter["spec"]["targetRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference"}
    ]
    chain = [
        (p["applyTo"], p["match"]["context"], p["patch"]["operation"], _anchor(p), p["patch"]["value"]["name"])
        for p in envoy_filter["spec"]["configPatches"]
    ]
    # Istio's JWT filter and RBAC come first; ours follow RBAC, each after the one before it.
    assert chain == [
        ("HTTP_FILTER", "GATEWAY", "INSERT_AFTER", "envoy.filters.http.rbac", "llm-eks.request-body-limit"),
        ("HTTP_FILTER", "GATEWAY", "INSERT_AFTER", "llm-eks.request-body-limit", "llm-eks.strip-model-header"),
        (
            "HTTP_FILTER",
            "GATEWAY",
            "INSERT_AFTER",
            "llm-eks.strip-model-header",
            "envoy.filters.http.ext_proc.payload-processor",
        ),
    ]
    config = envoy_filter["spec"]["configPatches"][2]["patch"]["value"]["typed_config"]
    assert config["failure_mode_allow"] is False
    assert config["grpc_service"]["envoy_grpc"]["cluster_name"] == (
        "outbound|9004||payload-processor.inference-gateway.svc.cluster.local"
    )
    ipp_config = _one(objects, "ConfigMap", "payload-processor")["data"]["ipp-config.yaml"]
    assert "fieldName: model" in ipp_config and f"headerName: {MODEL_HEADER}" in ipp_config


def _anchor(patch: dict[str, Any]) -> str | None:
    hcm = patch["match"]["listener"]["filterChain"]["filter"]
    assert hcm["name"] == "envoy.filters.network.http_connection_manager"
    return hcm.get("subFilter", {}).get("name")


# -- network policies --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def network(objects: list[dict[str, Any]]) -> Cluster:
    namespaces = {o["metadata"]["name"]: o["metadata"].get("labels", {}) for o in _all(objects, "Namespace")}
    return Cluster(_all(objects, "NetworkPolicy"), namespaces)


ENVOY = Pod("inference-gateway", {"gateway.networking.k8s.io/gateway-name": "inference"})
STRANGER = Pod("default", {"app": "curl"})


def test_envoy_reaches_the_pods_pickers_and_payload_processor_and_nothing_else_does(
    network: Cluster, objects: list[dict[str, Any]]
) -> None:
    pods = _serving_pods(objects)
    chat = Pod(*pods["vllm-chat"])
    small = Pod(*pods["vllm-small"])
    chat_picker = Pod("inference-chat", _one(objects, "Deployment", "vllm-chat-epp")["spec"]["selector"]["matchLabels"])
    ipp = Pod("inference-gateway", {"app.kubernetes.io/name": "payload-processor"})
    for dest, port in ((chat, 8000), (small, 8000), (chat_picker, 9002), (ipp, 9004)):
        assert network.allows(ENVOY, dest, port), dest
        assert not network.allows(STRANGER, dest, port), dest
    assert network.allows(chat_picker, chat, 8000)
    # One workload's picker reads only its own pool's metrics.
    assert not network.allows(chat_picker, small, 8000)
    moe = Pod("inference-moe", {"app.kubernetes.io/instance": "ray-moe", "ray.io/is-ray-node": "yes"})
    assert network.allows(ENVOY, moe, 8000)
    assert not network.allows(ENVOY, moe, 6379)


def test_only_the_load_balancer_subnets_and_labelled_clients_reach_envoys_listener(network: Cluster) -> None:
    envoy_ip = replace(ENVOY, ip="10.0.1.10")
    assert network.allows(External("10.0.255.200"), envoy_ip, 80)
    assert not network.allows(External("10.0.1.20"), envoy_ip, 80)
    assert not network.allows(External("10.0.255.200"), envoy_ip, 15000)
    assert not network.allows(STRANGER, envoy_ip, 80)


# -- observability -----------------------------------------------------------------------------------------------


def _dashboard_exprs(objects: list[dict[str, Any]], namespace: str) -> list[str]:
    import json

    maps = [o for o in _all(objects, "ConfigMap") if o["metadata"]["namespace"] == namespace and "dashboard" in str(o)]
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
    moe = [e for e in _dashboard_exprs(objects, "inference-moe") if ISTIO_REQUESTS in e]
    assert moe and all('destination_service_name="ray-moe-serve-svc"' in e for e in moe)
    for expr in (*chat, *moe):
        parse_promql(expr)
        assert check_promql(expr) == []


def test_the_pickers_payload_processor_and_envoy_are_scraped(objects: list[dict[str, Any]]) -> None:
    monitors = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects}
    assert ("ServiceMonitor", "inference-chat", "vllm-chat-epp") in monitors
    assert ("ServiceMonitor", "inference-gateway", "payload-processor") in monitors
    pod_monitor = _one(objects, "PodMonitor", "inference")
    assert pod_monitor["spec"]["podMetricsEndpoints"] == [
        {"port": "metrics", "path": "/stats/prometheus", "interval": "15s"}
    ]


# -- bad input ---------------------------------------------------------------------------------------------------


def _config_error(body: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        config = parse_environment("qa", body)
        build_workloads(config, plan_workloads(config))
    return str(info.value)


def test_a_gateway_without_certificate_or_http_choice_is_refused() -> None:
    assert _config_error({**BODY, "gateway": {"inbound_cidrs": CLIENTS, "auth": JWT}}) == (
        "environments.qa.gateway.certificate_arn: None is not allowed; gateway needs an ACM certificate ARN for "
        "HTTPS, or allow_http: true to serve plain HTTP"
    )


EU_ZONES = {"availability_zones": ["eu-west-1a", "eu-west-1b"]}


def test_a_gateway_certificate_in_another_region_is_refused() -> None:
    gateway = {"certificate_arn": CERT, "inbound_cidrs": CLIENTS, "auth": JWT}
    assert _config_error(
        {**BODY, "account": "123456789012", "region": "eu-west-1", "vpc": EU_ZONES, "gateway": gateway}
    ) == (
        f"environments.qa.gateway.certificate_arn: {CERT!r} is not allowed; must be a certificate in eu-west-1, "
        "the NLB's"
    )


def test_an_adapter_named_like_another_workloads_model_is_refused() -> None:
    body = {**BODY, "workloads": {**BODY["workloads"]}}
    body["workloads"]["chat"] = {**body["workloads"]["chat"], "lora_adapters": {"Qwen/Qwen3-8B": "acme/x-lora"}}
    assert "Qwen/Qwen3-8B" in _config_error(body)


def _props(**overrides: Any) -> GatewayProps:
    route = ModelRoute("vllm-a", "inference-a", ("a",), PoolBackend({"app": "a"}))
    base = GatewayProps(routes=(route,), inbound_cidrs=("10.0.0.0/16",), load_balancer_cidrs=("10.0.255.0/26",))
    return replace(base, **{"allow_http": True, **overrides})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"inbound_cidrs": ()},
            "gateway.inbound_cidrs: () is not allowed; name at least one IPv4 CIDR",
        ),
        (
            {"inbound_cidrs": ("0.0.0.0/0",)},
            "gateway.inbound_cidrs: '0.0.0.0/0' is not allowed; must not be the whole internet, list your own ranges",
        ),
        (
            {"ssl_policy": "ELBSecurityPolicy-2016-08"},
            "gateway.ssl_policy: 'ELBSecurityPolicy-2016-08' is not allowed; must be an "
            "ELBSecurityPolicy-TLS13-1-2-* or -TLS13-1-3-* policy (TLS 1.2 and newer)",
        ),
        (
            {"certificate_arn": CERT},
            "gateway.allow_http: True is not allowed with certificate_arn; the endpoint serves HTTPS only",
        ),
        (
            {
                "routes": (
                    ModelRoute("vllm-a", "inference-a", ("a",), PoolBackend({"app": "a"})),
                    ModelRoute("ray-b", "inference-b", ("a",), ServiceBackend("ray-b-serve-svc", {"app": "b"})),
                )
            },
            "gateway.routes[ray-b].model_names: 'a' is not allowed; gateway.routes[vllm-a] already serves it (each "
            "model name routes to exactly one workload)",
        ),
        (
            {"routes": (ModelRoute("vllm-a", "inference-a", ("has space",), PoolBackend({"app": "a"})),)},
            "gateway.routes[vllm-a].model_names: 'has space' is not allowed; must be 1-4096 visible ASCII "
            "characters, no spaces",
        ),
    ],
)
def test_bad_gateway_props_are_one_line_errors(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        GatewayChart(cdk8s.App(), "gateway", _props(**overrides))
    assert str(info.value) == message


def test_the_gateway_props_are_the_workloads_own() -> None:
    config = parse_environment("qa", BODY)
    workloads = build_workloads(config, plan_workloads(config))
    chat = next(w for w in workloads if isinstance(w, VllmWorkload) and w.key == "chat")
    assert chat.monitoring.extra_panels[0].title == "Gateway: requests per model"


def test_locked_router_images_are_pinned_by_digest_and_listed_for_the_lock() -> None:
    """`llm-eks images lock` covers the routers: a locked digest reaches both Deployments (and the unlocked-digest
    checkov suppression goes), and the environment's image list names them."""
    digest = "sha256:" + "ab" * 32
    entry = LockEntry(digest, "2026-11-30T00:00:00Z", "https://ghcr.io/v2/x/manifests/y")
    lock = ImageLock(entries={EPP_IMAGE: entry, IPP_IMAGE: entry})
    config = parse_environment("qa", BODY)
    plans = plan_workloads(config)
    workloads = build_workloads(config, plans, images=lock)
    charts = build_charts(cdk8s.App(), config, workloads, node_role_name="r", security_group_ids=SG)
    objects = [o for c in charts for o in c.chart.to_json()]
    for name, image in (("vllm-chat-epp", EPP_IMAGE), ("payload-processor", IPP_IMAGE)):
        deployment = _one(objects, "Deployment", name)
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == f"{image}@{digest}"
        assert not any(v.startswith("CKV_K8S_43=") for v in deployment["metadata"]["annotations"].values())
    assert {EPP_IMAGE, IPP_IMAGE} <= set(environment_images(config, plans))
