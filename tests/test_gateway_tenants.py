"""Tenants on the gateway: one credential each and held alone, each identity reading only its own key, keys that
rotate without a redeploy, authorization to exactly the tenant's models, the tenant filter that sets the endpoint
picker's flow-control headers (run on LuaJIT as Envoy runs it), the limits per tenant and model, and the one-line
errors of a bad tenant."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.infra.workloads import build_workloads
from llm_eks.manifests.gateway import MODEL_HEADER
from llm_eks.manifests.gateway.auth import REFRESH_INTERVAL
from llm_eks.manifests.gateway.props import FAIRNESS_HEADER, OBJECTIVE_HEADER, PRINCIPAL_HEADER, TENANT_HEADER
from llm_eks.manifests.gateway.proxy import STRIPPED_NAMES, STRIPPED_PREFIXES
from llm_eks.manifests.gateway.tenant_filter import DENIED_BODY, SCRIPT
from tests import envoy_lua
from tests.gateway_cases import (
    ADAPTERS,
    BODY,
    CHAT_MODEL,
    CLUSTER_OIDC,
    ISSUER,
    JWKS,
    MOE_MODEL,
    SMALL_MODEL,
    TENANTS,
    all_of,
    body,
    charts,
    flat,
    one,
)


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return flat(charts(BODY))


def _policy(objects: list[dict[str, Any]], listener: str) -> dict[str, Any]:
    return one(objects, "SecurityPolicy", f"inference-{listener}")["spec"]


# -- credentials: one each, held alone, read only by their own listener ---------------------------------------------


def test_each_api_key_tenant_has_its_own_secret_synced_under_its_own_name(objects: list[dict[str, Any]]) -> None:
    synced = {
        e["metadata"]["name"]: (e["spec"]["data"], e["spec"]["target"]["name"])
        for e in all_of(objects, "ExternalSecret")
    }
    assert synced == {
        "tenant-team-a-api-key": (
            [{"secretKey": "team-a", "remoteRef": {"key": "llm-eks/qa/tenants/team-a/api-key"}}],
            "tenant-team-a-api-key",
        ),
        "tenant-team-c-api-key": (
            [{"secretKey": "team-c", "remoteRef": {"key": "acme/team-c/llm-key"}}],
            "tenant-team-c-api-key",
        ),
    }
    remote = [d["remoteRef"]["key"] for data, _ in synced.values() for d in data]
    assert len(remote) == len(set(remote))


def test_the_api_key_listener_reads_exactly_the_api_key_tenants_secrets(objects: list[dict[str, Any]]) -> None:
    auth = _policy(objects, "api-key")["apiKeyAuth"]
    assert auth["credentialRefs"] == [
        {"group": "", "kind": "Secret", "name": f"tenant-{t}-api-key", "namespace": "external-secrets"}
        for t in ("team-a", "team-c")
    ]
    # The client id forwarded is the Secret's data key: the tenant's name, never the key.
    assert auth["forwardClientIDHeader"] == PRINCIPAL_HEADER
    assert auth["extractFrom"] == [{"headers": ["authorization"]}]
    # Declared tenants: the key stays at the gateway.
    assert auth["sanitize"] is True
    grant = one(objects, "ReferenceGrant", "inference-tenant-keys")["spec"]
    assert grant["from"] == [
        {"group": "gateway.envoyproxy.io", "kind": "SecurityPolicy", "namespace": "inference-gateway"}
    ]
    assert grant["to"] == [{"group": "", "kind": "Secret", "name": f"tenant-{t}-api-key"} for t in ("team-a", "team-c")]


def test_the_jwt_listener_trusts_only_named_issuers_from_the_authorization_header(
    objects: list[dict[str, Any]],
) -> None:
    providers = {p["name"]: p for p in _policy(objects, "jwt")["jwt"]["providers"]}
    assert set(providers) == {"eks-cluster", "corp"}
    assert providers["eks-cluster"]["issuer"] == CLUSTER_OIDC
    assert providers["eks-cluster"]["remoteJWKS"] == {"uri": f"{CLUSTER_OIDC}/keys"}
    assert providers["corp"]["issuer"] == ISSUER and providers["corp"]["remoteJWKS"] == {"uri": JWKS}
    for provider in providers.values():
        assert provider["audiences"] == ["llm-eks-gateway"]
        # Not the query string: a token there would land in access logs.
        assert provider["extractFrom"] == {"headers": [{"name": "Authorization", "valuePrefix": "Bearer "}]}
        assert provider["claimToHeaders"] == [{"claim": "sub", "header": PRINCIPAL_HEADER}]


def test_each_tenant_is_authorized_for_exactly_its_models_and_everything_else_is_denied(
    objects: list[dict[str, Any]],
) -> None:
    def rules(listener: str) -> dict[str, dict[str, Any]]:
        authorization = _policy(objects, listener)["authorization"]
        assert authorization["defaultAction"] == "Deny"
        assert all(r["action"] == "Allow" for r in authorization["rules"])
        return {r["name"]: r["principal"] for r in authorization["rules"]}

    key = rules("api-key")
    assert key == {
        "team-a": {
            "headers": [
                {"name": PRINCIPAL_HEADER, "values": ["team-a"]},
                {"name": MODEL_HEADER, "values": [CHAT_MODEL, *ADAPTERS, MOE_MODEL]},
            ]
        },
        "team-c": {
            "headers": [
                {"name": PRINCIPAL_HEADER, "values": ["team-c"]},
                {"name": MODEL_HEADER, "values": ["sql", SMALL_MODEL]},
            ]
        },
    }
    jwt = rules("jwt")
    assert jwt["team-b"] == {
        "headers": [{"name": MODEL_HEADER, "values": [CHAT_MODEL, *ADAPTERS]}],
        "jwt": {
            "provider": "eks-cluster",
            "claims": [{"name": "sub", "values": ["system:serviceaccount:team-b:chat-client"]}],
        },
    }
    assert jwt["partner"]["jwt"]["provider"] == "corp" and jwt["partner"]["headers"][0]["values"] == [SMALL_MODEL]


def test_no_two_tenants_or_workloads_share_a_credential() -> None:
    """Without declared tenants, each workload is its own tenant holding its own key: no key serves two."""
    b = {
        "gateway": {"expose": "cluster"},
        "workloads": {k: {**v, "api_key": True} for k, v in BODY["workloads"].items() if k != "moe"},
    }
    b["workloads"]["chat"].pop("lora_adapters")
    b["workloads"]["chat"].pop("weights")
    objects = flat(charts(b))
    remote = {e["metadata"]["name"]: e["spec"]["data"] for e in all_of(objects, "ExternalSecret")}
    assert remote == {
        "tenant-chat-api-key": [{"secretKey": "chat", "remoteRef": {"key": "llm-eks/qa/chat/api-key"}}],
        "tenant-small-api-key": [{"secretKey": "small", "remoteRef": {"key": "llm-eks/qa/small/api-key"}}],
    }
    # Each workload's pods mount exactly their own key, the one its tenant holds.
    provider_classes = {
        o["metadata"]["namespace"]: json.loads(json.dumps(o["spec"])) for o in all_of(objects, "SecretProviderClass")
    }
    for workload in ("chat", "small"):
        text = json.dumps(provider_classes[f"inference-{workload}"])
        assert f"llm-eks/qa/{workload}/api-key" in text
        assert f"llm-eks/qa/{'small' if workload == 'chat' else 'chat'}/api-key" not in text
    # The key still reaches vLLM, which checks it again.
    assert _policy(objects, "api-key")["apiKeyAuth"]["sanitize"] is False
    rules = {
        r["name"]: r["principal"]["headers"][1]["values"] for r in _policy(objects, "api-key")["authorization"]["rules"]
    }
    assert rules == {"chat": [CHAT_MODEL], "small": [SMALL_MODEL]}


def test_keys_rotate_without_a_redeploy(objects: list[dict[str, Any]]) -> None:
    """No object names a key's version or a hash of it (a changed key would change a pod template or a gateway object
    and so need a deploy): the operator reads each key again every REFRESH_INTERVAL and Envoy Gateway pushes a
    changed Secret to Envoy without a restart."""
    assert REFRESH_INTERVAL == "5m"
    for secret in all_of(objects, "ExternalSecret"):
        assert secret["spec"]["refreshInterval"] == REFRESH_INTERVAL
        for data in secret["spec"]["data"]:
            assert set(data["remoteRef"]) == {"key"}, data
    text = json.dumps(objects)
    for marker in ("versionId", "versionStage", "AWSCURRENT", "AWSPENDING"):
        assert marker not in text
    for obj in objects:
        template = obj.get("spec", {}).get("template", {}).get("metadata", {})
        for key in template.get("annotations") or {}:
            assert not re.search(r"checksum|hash|secret|key-version", key), (obj["metadata"]["name"], key)


def test_the_secret_store_reads_secrets_manager_in_the_stacks_region_with_the_operators_own_identity(
    objects: list[dict[str, Any]],
) -> None:
    store = one(objects, "SecretStore", "secrets-manager")
    assert store["metadata"]["namespace"] == "external-secrets"
    assert store["spec"] == {"provider": {"aws": {"service": "SecretsManager", "region": "us-west-2"}}}


# -- the tenant filter: principal -> tenant and the picker's headers --------------------------------------------------


def _filter(objects: list[dict[str, Any]], listener: str) -> dict[str, Any]:
    (lua,) = one(objects, "EnvoyExtensionPolicy", f"inference-tenants-{listener}")["spec"]["lua"]
    return lua


def test_each_listener_maps_only_its_own_tenants(objects: list[dict[str, Any]]) -> None:
    key = _filter(objects, "api-key")
    jwt = _filter(objects, "jwt")
    assert key["inline"] == jwt["inline"] == SCRIPT
    assert key["filterContext"] == {
        "principals": {
            "team-a": {"tenant": "team-a", "objective": "tenant-team-a"},
            "team-c": {"tenant": "team-c", "objective": "tenant-team-c"},
        }
    }
    assert jwt["filterContext"] == {
        "principals": {
            "system:serviceaccount:team-b:chat-client": {"tenant": "team-b", "objective": "tenant-team-b"},
            "svc-partner": {"tenant": "partner", "objective": "tenant-partner"},
        }
    }


@pytest.mark.parametrize(
    ("listener", "principal", "tenant"),
    [("api-key", "team-a", "team-a"), ("jwt", "system:serviceaccount:team-b:chat-client", "team-b")],
)
def test_the_filter_sets_the_tenant_and_the_pickers_flow_headers(
    objects: list[dict[str, Any]], listener: str, principal: str, tenant: str
) -> None:
    lua = _filter(objects, listener)
    out = envoy_lua.run(
        lua["inline"],
        lua["filterContext"],
        [(PRINCIPAL_HEADER, principal), (":path", "/v1/chat/completions")],
    )
    assert out.status is None
    assert (out.get(TENANT_HEADER), out.get(FAIRNESS_HEADER), out.get(OBJECTIVE_HEADER)) == (
        tenant,
        tenant,
        f"tenant-{tenant}",
    )


@pytest.mark.parametrize(
    "headers",
    [
        [],  # no principal: authentication did not run (it always does on these listeners), or a bug
        [(PRINCIPAL_HEADER, "team-b")],  # a name of no tenant on this listener
        [(PRINCIPAL_HEADER, "svc-partner")],  # a JWT principal presented on the API-key listener
        [(PRINCIPAL_HEADER, "team-a"), (PRINCIPAL_HEADER, "team-c")],  # two values read as "team-a,team-c"
        [("X-LLM-EKS-Principal", "TEAM-A")],  # values are case-sensitive
    ],
)
def test_the_filter_refuses_any_other_principal_naming_nothing(
    objects: list[dict[str, Any]], headers: list[tuple[str, str]]
) -> None:
    lua = _filter(objects, "api-key")
    out = envoy_lua.run(lua["inline"], lua["filterContext"], headers)
    assert out.status == 403 and out.body == DENIED_BODY
    assert out.reply_headers == {"content-type": "application/json"}
    assert "team" not in (out.body or "")


def test_a_clients_own_copy_of_a_gateway_header_is_replaced_not_kept(objects: list[dict[str, Any]]) -> None:
    """The headers are stripped before routing anyway (ClientTrafficPolicy); the filter replaces rather than adds,
    so a copy that got through would not survive either."""
    lua = _filter(objects, "api-key")
    out = envoy_lua.run(
        lua["inline"],
        lua["filterContext"],
        [(PRINCIPAL_HEADER, "team-c"), (OBJECTIVE_HEADER, "tenant-team-a"), (FAIRNESS_HEADER.upper(), "team-a")],
    )
    assert out.get(OBJECTIVE_HEADER) == "tenant-team-c" and out.get(FAIRNESS_HEADER) == "team-c"


def test_every_header_the_gateway_sets_or_trusts_is_stripped_from_clients_before_routing(
    objects: list[dict[str, Any]],
) -> None:
    policy = one(objects, "ClientTrafficPolicy", "inference")["spec"]
    removed = policy["headers"]["earlyRequestHeaders"]["removeOnMatch"]
    prefixes = [r["value"] for r in removed if r["type"] == "Prefix"]
    exact = [r["value"] for r in removed if r["type"] == "Exact"]
    assert prefixes == list(STRIPPED_PREFIXES) and exact == list(STRIPPED_NAMES)
    for header in (MODEL_HEADER, PRINCIPAL_HEADER, TENANT_HEADER, FAIRNESS_HEADER, OBJECTIVE_HEADER):
        assert any(header.startswith(p) for p in prefixes), header
    assert policy["headers"]["withUnderscoresAction"] == "RejectRequest"


def test_the_filters_run_before_the_body_buffer_and_the_buffer_is_there(objects: list[dict[str, Any]]) -> None:
    """The AI Gateway inserts its external processor right after the last buffer filter: the tenant filter and the
    per-replica limit go ahead of the buffer, and the buffer exists (requestBuffer), so the processor runs after
    authentication and before authorization."""
    order = one(objects, "EnvoyProxy", "inference")["spec"]["filterOrder"]
    assert order == [
        {"name": "envoy.filters.http.lua", "before": "envoy.filters.http.buffer"},
        {"name": "envoy.filters.http.local_ratelimit", "before": "envoy.filters.http.buffer"},
    ]
    assert one(objects, "BackendTrafficPolicy", "inference")["spec"]["requestBuffer"] == {"limit": str(8 * 1024 * 1024)}


def test_the_access_log_names_the_tenant_and_never_a_credential(objects: list[dict[str, Any]]) -> None:
    (setting,) = one(objects, "EnvoyProxy", "inference")["spec"]["telemetry"]["accessLog"]["settings"]
    fields = setting["format"]["json"]
    assert fields["tenant"] == f"%REQ({TENANT_HEADER})%" and fields["model"] == f"%REQ({MODEL_HEADER})%"
    text = json.dumps(fields).lower()
    assert "authorization" not in text and "principal" not in text


# -- limits ---------------------------------------------------------------------------------------------------------


def test_each_tenant_has_its_limits_per_model_across_every_replica(objects: list[dict[str, Any]]) -> None:
    spec = one(objects, "BackendTrafficPolicy", "inference")["spec"]
    rules = spec["rateLimit"]["global"]["rules"]
    by_tenant: dict[str, list[tuple[int, str, str | None]]] = {}
    for rule in rules:
        (selector,) = rule["clientSelectors"]
        tenant, model = selector["headers"]
        assert (tenant["name"], tenant["type"]) == (TENANT_HEADER, "Exact")
        assert model == {"name": MODEL_HEADER, "type": "Distinct"}
        assert rule["shared"] is True
        cost = rule.get("cost")
        if cost is not None:
            assert cost["request"] == {"from": "Number", "number": 0}
            charged = cost["response"]["metadata"]["key"]
        else:
            charged = None
        by_tenant.setdefault(tenant["value"], []).append((rule["limit"]["requests"], rule["limit"]["unit"], charged))
    assert by_tenant == {
        "team-a": [
            (20, "Second", None),
            (2_000_000, "Minute", "llm_input_token"),
            (200_000_000, "Day", "llm_input_token"),
            (500_000, "Minute", "llm_output_token"),
            (50_000_000, "Day", "llm_output_token"),
        ],
        "team-b": [(2, "Second", None), (400_000, "Day", "llm_output_token")],
    }
    # Overload protection per Envoy replica, ahead of the body buffer.
    assert spec["rateLimit"]["local"] == {"rules": [{"limit": {"requests": 500, "unit": "Second"}}]}


def test_the_pickers_refusals_carry_retry_after(objects: list[dict[str, Any]]) -> None:
    overrides = one(objects, "BackendTrafficPolicy", "inference")["spec"]["responseOverride"]
    by_status = {o["match"]["statusCodes"][0]["value"]: o for o in overrides}
    starting, saturated = by_status[503], by_status[429]
    assert starting["match"]["responseHeaders"] == [
        {"name": "x-llm-d-request-dropped-reason", "value": {"type": "Exact", "value": "rejected-no-endpoints"}}
    ]
    retry = int(starting["response"]["header"]["set"][0]["value"])
    assert retry >= 30
    assert saturated["response"]["header"]["set"] == [{"name": "Retry-After", "value": "10"}]
    for override in overrides:
        assert override["source"] == "Local"
        assert (
            json.loads(override["response"]["body"]["inline"])["error"]["code"]
            == override["match"]["statusCodes"][0]["value"]
        )


# -- one-line errors --------------------------------------------------------------------------------------------------

PATH = "environments.qa.gateway.tenants"


def _tenants_error(**tenants: Any) -> str:
    b = body(tenants={**TENANTS, **tenants})
    with pytest.raises(ConfigError) as info:
        config = parse_environment("qa", b)
        build_workloads(config, plan_workloads(config))
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("tenant", "message"),
    [
        (
            {"credential": {"api_key": {}}, "models": ["chatt"]},
            f"{PATH}.x.models[0]: 'chatt' is not allowed; did you mean 'chat'? must be a workload (chat, small, moe) "
            f"or a name one serves ({CHAT_MODEL}, sql, support-fr, {SMALL_MODEL}, {MOE_MODEL}) [LLMEKS-E132]",
        ),
        (
            {"credential": {"api_key": {"secret": "acme/team-c/llm-key"}}, "models": ["chat"]},
            f"{PATH}.x.credential.api_key.secret: 'acme/team-c/llm-key' is not allowed; tenant team-c holds that key "
            "already: each tenant's key is its own (a shared key would make two tenants one) [LLMEKS-E132]",
        ),
        (
            {"credential": {"jwt": {"issuer": "corp", "principal": "svc-partner"}}, "models": ["chat"]},
            f"{PATH}.x.credential.jwt.principal: 'svc-partner' is not allowed; tenant partner is that principal "
            "already: each tenant's credential is its own [LLMEKS-E132]",
        ),
        (
            {"credential": {"api_key": {}}, "models": ["chat"], "limits": {"output_tokens_per_day": 0}},
            f"{PATH}.x.limits.output_tokens_per_day: 0 is not allowed; must be at least 1 (a budget of zero refuses "
            "every request; leave it out for no limit) [LLMEKS-E132]",
        ),
        (
            {"credential": {"api_key": {}}, "models": ["chat"], "priority": 101},
            f"{PATH}.x.priority: 101 is not allowed; must be -100 to 100 (higher bands are served first; below 0 is "
            "shed first) [LLMEKS-E132]",
        ),
        (
            {"credential": {}, "models": ["chat"]},
            f"{PATH}.x.credential: none is not allowed; name exactly one credential: api_key (a key of its own in "
            "Secrets Manager) or jwt (a principal of a named issuer) [LLMEKS-E132]",
        ),
        (
            {"credential": {"api_key": {}, "jwt": {"issuer": "corp", "principal": "p"}}, "models": ["chat"]},
            f"{PATH}.x.credential: api_key, jwt is not allowed; name exactly one credential: api_key (a key of its "
            "own in Secrets Manager) or jwt (a principal of a named issuer) [LLMEKS-E132]",
        ),
        (
            {"credential": {"jwt": {"issuer": "crop", "principal": "p"}}, "models": ["chat"]},
            f"{PATH}.x.credential.jwt.issuer: 'crop' is not allowed; did you mean 'corp'? must be eks-cluster or a "
            "name in gateway.issuers (eks-cluster, corp) [LLMEKS-E132]",
        ),
        (
            {"credential": {"jwt": {"issuer": "corp", "principal": "a,b"}}, "models": ["chat"]},
            f"{PATH}.x.credential.jwt.principal: 'a,b' is not allowed; must be 1-256 visible ASCII characters "
            "without ',' (the value of the issuer's principal claim) [LLMEKS-E132]",
        ),
        (
            {"credential": {"api_key": {"secret": "arn:aws:secretsmanager:us-west-2:1:secret:k"}}, "models": ["chat"]},
            f"{PATH}.x.credential.api_key.secret: 'arn:aws:secretsmanager:us-west-2:1:secret:k' is not allowed; "
            "must be a Secrets Manager secret NAME (1-512 of letters, digits and /_+=.@-), not an ARN [LLMEKS-E132]",
        ),
    ],
)
def test_a_bad_tenant_is_a_one_line_error_naming_the_field(tenant: dict[str, Any], message: str) -> None:
    assert _tenants_error(x=tenant) == message


def test_a_tenant_without_a_credential_key_names_the_required_field() -> None:
    assert "credential" in _tenants_error(x={"models": ["chat"]})


def test_a_key_checked_by_vllm_behind_tenants_is_refused() -> None:
    b = body()
    b["workloads"]["small"] = {**b["workloads"]["small"], "api_key": True}
    with pytest.raises(ConfigError) as info:
        parse_environment("qa", b)
    assert str(info.value).startswith(
        "environments.qa.workloads.small.api_key: True is not allowed; behind a gateway with tenants the gateway "
        "authenticates every request"
    )


def test_the_staging_default_declares_two_tenants_with_different_models_priorities_and_budgets() -> None:
    context = json.loads((__import__("pathlib").Path(__file__).parents[1] / "cdk.json").read_text())["context"]
    tenants = context["environments"]["staging"]["gateway"]["tenants"]
    assert len(tenants) == 2
    a, b = tenants.values()
    assert set(a["credential"]) != set(b["credential"])
    assert a["models"] != b["models"] and a["priority"] != b["priority"] and a["limits"] != b["limits"]
