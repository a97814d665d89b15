"""The gateway's threats at its edge, one test each: every source explicit, HTTPS in production, an in-cluster gateway
with no load balancer at all, every routed model behind a credential (Ray Serve's too, which checks none itself), a
capped request body and connection limits, and the removed settings named with what replaces them. Tenants, keys and
authorization are in test_gateway_tenants.py; the admission policies in test_gateway_admission.py."""

from __future__ import annotations

from typing import Any

import pytest

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.infra.workloads import build_workloads
from llm_eks.manifests.gateway.guard import SERVICES_POLICY
from tests.admission import denials
from tests.gateway_cases import BODY, CLIENTS, MOE_MODEL, all_of, charts, flat, one

KEY_BODY: dict[str, Any] = {
    "gateway": {"allow_http": True, "inbound_cidrs": CLIENTS},
    "workloads": {
        "chat": {"model": "meta-llama/Llama-3.1-8B-Instruct", "accelerator": "g6e.xlarge"},
        "moe": BODY["workloads"]["moe"],
    },
}


def _error(body: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        config = parse_environment("qa", body)
        build_workloads(config, plan_workloads(config))
    message = str(info.value)
    assert "\n" not in message
    return message


def _with_gateway(**gateway: Any) -> dict[str, Any]:
    return {**KEY_BODY, "gateway": gateway}


# -- sources -----------------------------------------------------------------------------------------------------


def test_the_nlb_admits_only_named_client_ranges() -> None:
    """With the VPC CNI every pod holds a VPC address: the VPC's CIDR as the NLB's source range admits every pod."""
    assert _error(_with_gateway(allow_http=True)) == (
        "environments.qa.gateway.inbound_cidrs: [] is not allowed; name the client ranges the NLB admits (with the "
        "VPC CNI every pod holds a VPC address, so the VPC's CIDR would admit every pod); in-cluster clients call "
        "the Service instead [LLMEKS-E131]"
    )
    assert _error(_with_gateway(allow_http=True, inbound_cidrs=["10.0.8.0/24"])) == (
        "environments.qa.gateway.inbound_cidrs[0]: '10.0.8.0/24' is not allowed; overlaps the environment's VPC "
        "10.0.0.0/16, where every pod holds an address: list client ranges outside it (in-cluster clients call the "
        "Service) [LLMEKS-E131]"
    )


def test_a_production_front_door_serves_https_only() -> None:
    body = {**_with_gateway(allow_http=True, inbound_cidrs=CLIENTS), "production": True}
    assert _error(body) == (
        "environments.qa.gateway.allow_http: True is not allowed; a production environment's front door serves "
        "HTTPS only: name an ACM certificate in certificate_arn [LLMEKS-E131]"
    )


def test_an_in_cluster_gateway_has_no_load_balancer_and_admits_no_load_balancer_service() -> None:
    objects = flat(charts(_with_gateway(expose="cluster")))
    service = one(objects, "EnvoyProxy", "inference")["spec"]["provider"]["kubernetes"]["envoyService"]
    assert service == {"type": "ClusterIP"}
    # Plain HTTP inside the cluster; the listeners' NetworkPolicy admits labelled clients only.
    gateway = one(objects, "Gateway", "inference")
    assert [(lst["name"], lst["port"]) for lst in gateway["spec"]["listeners"]] == [("api-key", 80)]
    policy = one(objects, "ValidatingAdmissionPolicy", SERVICES_POLICY)
    load_balancer = {"metadata": {"name": "x", "namespace": "inference-gateway"}, "spec": {"type": "LoadBalancer"}}
    assert denials(policy, load_balancer, kind="Service") == [
        "the inference gateway is exposed in-cluster only: no LoadBalancer Service in llm-eks's namespaces"
    ]
    listener = one(objects, "NetworkPolicy", "inference-listener")["spec"]["ingress"]
    assert not any("ipBlock" in peer for rule in listener for peer in rule.get("from", []))


# -- credentials -------------------------------------------------------------------------------------------------


def test_without_tenants_each_workload_is_its_own_tenant_ray_serve_included() -> None:
    """Ray Serve LLM checks no key: the gateway checks its workload's own key for it; vLLM checks its key again."""
    objects = flat(charts(KEY_BODY))
    auth = one(objects, "SecurityPolicy", "inference-api-key")["spec"]
    rules = {r["name"]: r["principal"]["headers"] for r in auth["authorization"]["rules"]}
    assert rules["moe"][1]["values"] == [MOE_MODEL]
    synced = {
        e["metadata"]["name"]: e["spec"]["data"][0]["remoteRef"]["key"] for e in all_of(objects, "ExternalSecret")
    }
    assert synced == {
        "tenant-chat-api-key": "llm-eks/qa/chat/api-key",
        "tenant-moe-api-key": "llm-eks/qa/moe/api-key",
    }
    assert auth["apiKeyAuth"]["sanitize"] is False


@pytest.mark.parametrize(
    ("gateway", "message"),
    [
        (
            {"allow_http": True, "inbound_cidrs": CLIENTS, "auth": {"mode": "jwt"}},
            "environments.qa.gateway.auth: no longer exists; declare gateway.tenants instead: each caller with its own "
            "credential (api_key, or jwt with an issuer and a principal), the models it may call and its limits; "
            "without tenants each workload's own API key is its caller's credential [LLMEKS-E106]",
        ),
        (
            {"allow_http": True, "inbound_cidrs": CLIENTS, "ray_serve_without_api_key": True},
            "environments.qa.gateway.ray_serve_without_api_key: no longer exists; every routed model needs a "
            "credential, and the gateway now checks one for every tenant (gateway.tenants; without tenants, each "
            "workload's own API key) [LLMEKS-E106]",
        ),
    ],
)
def test_removed_gateway_settings_name_what_replaces_them(gateway: dict[str, Any], message: str) -> None:
    assert _error(_with_gateway(**gateway)) == message


# -- what a request may cost the gateway ------------------------------------------------------------------------


def test_bodies_connections_and_slow_uploads_are_bounded() -> None:
    objects = flat(charts(BODY))
    traffic = one(objects, "BackendTrafficPolicy", "inference")["spec"]
    client = one(objects, "ClientTrafficPolicy", "inference")["spec"]
    assert traffic["requestBuffer"] == {"limit": str(8 * 1024 * 1024)}
    assert client["connection"] == {"connectionLimit": {"value": 4096}, "bufferLimit": str(8 * 1024 * 1024)}
    assert client["timeout"] == {"http": {"requestReceivedTimeout": "60s"}}
    assert client["http2"] == {"maxConcurrentStreams": 100}
    assert client["path"] == {"escapedSlashesAction": "RejectRequest"}
    assert _error({**BODY, "gateway": {**BODY["gateway"], "max_request_bytes": 100}}).startswith(
        "environments.qa.gateway.max_request_bytes: 100 is not allowed;"
    )
