"""The environments the gateway tests build: three workloads on two engines (a vLLM model with two LoRA adapters, a
second vLLM model, a Ray Serve model) behind one gateway with four tenants (two API keys, one of them in a secret
the user names; a JWT of the cluster's own service accounts; a JWT of an outside issuer), and the helpers that build
and read their charts."""

from __future__ import annotations

import copy
from typing import Any

import cdk8s

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.infra.charts import build_charts
from llm_eks.infra.workloads import build_workloads
from tests.chart_helpers import placement_groups

SG = ("sg-0123456789abcdef0",)
REGION = "us-west-2"
CLUSTER_OIDC = "https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
ISSUER = "https://login.example.com/realms/llm"
JWKS = f"{ISSUER}/protocol/openid-connect/certs"
ADAPTERS = {"sql": "acme/llama-3.1-8b-sql-lora", "support-fr": "acme/llama-3.1-8b-support-fr-lora"}
CLIENTS = ["192.168.0.0/16"]
CERT = "arn:aws:acm:us-west-2:123456789012:certificate/0f6b3c1e-1234-4d5e-8f9a-0123456789ab"
CHAT_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SMALL_MODEL = "Qwen/Qwen3-8B"
MOE_MODEL = "Qwen/Qwen3-30B-A3B"
LIMITS = {
    "requests_per_second": 20,
    "input_tokens_per_minute": 2_000_000,
    "output_tokens_per_minute": 500_000,
    "input_tokens_per_day": 200_000_000,
    "output_tokens_per_day": 50_000_000,
}
TENANTS: dict[str, Any] = {
    "team-a": {"credential": {"api_key": {}}, "models": ["chat", "moe"], "priority": 10, "limits": LIMITS},
    "team-b": {
        "credential": {"jwt": {"issuer": "eks-cluster", "principal": "system:serviceaccount:team-b:chat-client"}},
        "models": ["chat"],
        "limits": {"requests_per_second": 2, "output_tokens_per_day": 400_000},
    },
    "team-c": {
        "credential": {"api_key": {"secret": "acme/team-c/llm-key"}},
        "models": ["sql", "small"],
        "priority": -10,
    },
    "partner": {"credential": {"jwt": {"issuer": "corp", "principal": "svc-partner"}}, "models": [SMALL_MODEL]},
}
BODY: dict[str, Any] = {
    "gateway": {
        "certificate_arn": CERT,
        "inbound_cidrs": CLIENTS,
        "tenants": TENANTS,
        "issuers": {"corp": {"issuer": ISSUER, "jwks_uri": JWKS}},
    },
    # The adapters are staged into the environment's bucket, as LoRA requires.
    "weights_bucket": {},
    "workloads": {
        "chat": {
            "model": CHAT_MODEL,
            "accelerator": "g6e.xlarge",
            "replicas": {"min": 1, "max": 3},
            "weights": "staged",
            "lora_adapters": ADAPTERS,
            "api_key": False,
        },
        "small": {
            "model": SMALL_MODEL,
            "accelerator": "g6e.xlarge",
            "replicas": {"min": 1, "max": 2},
            "api_key": False,
        },
        "moe": {
            "engine": "ray-serve",
            "model": MOE_MODEL,
            "accelerator": "g6e.12xlarge",
            "max_model_len": 16384,
            "replicas": {"min": 1, "max": 2},
        },
    },
}


def body(**gateway: Any) -> dict[str, Any]:
    """BODY with the gateway's fields replaced (None removes one)."""
    b = copy.deepcopy(BODY)
    for key, value in gateway.items():
        if value is None:
            b["gateway"].pop(key, None)
        else:
            b["gateway"][key] = value
    return b


def charts(b: dict[str, Any], name: str = "qa") -> dict[str, list[dict[str, Any]]]:
    """Chart id -> its objects, for environment `name` with body `b`."""
    config = parse_environment(name, b)
    workloads = build_workloads(config, plan_workloads(config))
    built = build_charts(
        cdk8s.App(),
        config,
        workloads,
        node_role_name="r",
        security_group_ids=SG,
        placement_groups=placement_groups(workloads),
        cluster_oidc_issuer=CLUSTER_OIDC,
        region=REGION,
    )
    return {c.id: c.chart.to_json() for c in built}


def flat(by_chart: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [o for objects in by_chart.values() for o in objects]


def all_of(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def token_labels(tenant: str, model: str, kind: str, pod: str, namespace: str = "inference-gateway") -> dict[str, str]:
    """The labels of one Envoy pod's gen_ai_client_token_usage series: the AI Gateway v1.1.0's attributes
    (internal/metrics/metrics_impl.go buildBaseAttributes and RecordTokenUsage), the tenant header's attribute and the
    PodMonitor's target labels."""
    return {
        "namespace": namespace,
        "job": f"{namespace}/inference",
        "pod": pod,
        "tenant": tenant,
        "gen_ai_original_model": model,
        "gen_ai_request_model": model,
        "gen_ai_response_model": model,
        "gen_ai_operation_name": "chat",
        "gen_ai_provider_name": "openai",
        "gen_ai_token_type": kind,
    }
