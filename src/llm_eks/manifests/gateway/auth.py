"""Who may call the gateway, as Envoy Gateway objects: per listener a SecurityPolicy that authenticates (API key, or a
JWT of a named issuer, only from `Authorization: Bearer`) and authorizes each tenant for exactly its models once the
body's model is known, the tenant filter (tenant_filter.py), and the key Secrets the External Secrets Operator syncs
from Secrets Manager into its own namespace, with the ReferenceGrant that lets the policy read them.

Order in Envoy (envoyproxy/gateway v1.9.0 internal/xds/translator/httpfilters.go; envoyproxy/ai-gateway v1.1.0
internal/extensionserver/post_translate_modify.go, insertAIGatewayExtProcFilter): api_key_auth or jwt_authn on the
headers, the tenant filter (moved ahead of the body buffer by EnvoyProxy.filterOrder), the buffer, the AI Gateway's
external processor (inserted right after the last buffer filter: reads the body, sets x-ai-eg-model overwriting any
client value, clears the route cache), then rbac: so authorization sees the body's model, and an unauthenticated
request never gets its body read. A request whose model the tenant may not call gets 403 from rbac, naming nothing.

Sources: envoyproxy/gateway v1.9.0 api/v1alpha1/api_key_auth_types.go (credentialRefs: Secrets whose data keys are
client ids; extractFrom; forwardClientIDHeader; sanitize), internal/gatewayapi/securitypolicy.go (a key held by two
clients fails the whole policy: "duplicated API key"), internal/gatewayapi/validate.go (a Secret in another namespace
needs a ReferenceGrant), api/v1alpha1/jwt_types.go (providers, remoteJWKS, claimToHeaders, extractFrom: left
unset it also reads `access_token` from the query string), api/v1alpha1/authorization_types.go (rules of headers and
JWT claims, at most 256 values a header); envoyproxy/envoy source/extensions/filters/http/api_key_auth/api_key_auth.cc
(a `Bearer ` prefix is dropped before the lookup; the client id is set with setCopy); external-secrets/external-secrets
helm-chart-2.9.0 docs/provider/aws-secrets-manager.md (ExternalSecret, refreshInterval, remoteRef).
"""

from __future__ import annotations

from typing import Any

from llm_eks.manifests.gateway.common import meta
from llm_eks.manifests.gateway.props import MODEL_HEADER, PRINCIPAL_HEADER, GatewayProps
from llm_eks.manifests.gateway.tenant_filter import SCRIPT, filter_context
from llm_eks.manifests.gateway.tenants import Tenant
from llm_eks.manifests.source import builds_objects

GATEWAY_API = "gateway.networking.k8s.io"
EG_API = "gateway.envoyproxy.io/v1alpha1"
ESO_API = "external-secrets.io/v1"
SECRET_STORE = "secrets-manager"
# How long a rotated key takes to reach Envoy at most: the operator reads each key this often (Secrets Manager bills
# per 10,000 calls; a few tenants at 5 minutes cost cents a month), and Envoy Gateway pushes a changed Secret at once.
REFRESH_INTERVAL = "5m"


def _target(p: GatewayProps, listener: str) -> list[dict[str, Any]]:
    return [{"group": GATEWAY_API, "kind": "Gateway", "name": p.name, "sectionName": listener}]


def _rules(p: GatewayProps, tenants: list[Tenant]) -> list[dict[str, Any]]:
    """One Allow rule per tenant: its principal and a model it may call; everything else is denied."""
    rules = []
    for t in tenants:
        principal: dict[str, Any] = {"headers": [{"name": MODEL_HEADER, "values": list(t.models)}]}
        if t.jwt_issuer is None:
            principal["headers"].insert(0, {"name": PRINCIPAL_HEADER, "values": [t.principal]})
        else:
            issuer = next(i for i in p.issuers if i.name == t.jwt_issuer)
            principal["jwt"] = {
                "provider": issuer.name,
                "claims": [{"name": issuer.principal_claim, "values": [t.principal]}],
            }
        rules.append({"name": t.name, "action": "Allow", "principal": principal})
    return rules


@builds_objects
def security_policies(p: GatewayProps) -> list[dict[str, Any]]:
    """One SecurityPolicy per listener."""
    policies = []
    key_tenants = [t for t in p.tenants if t.credential == "api-key"]
    jwt_tenants = [t for t in p.tenants if t.credential == "jwt"]
    if key_tenants:
        policies.append(
            {
                "apiVersion": EG_API,
                "kind": "SecurityPolicy",
                "metadata": meta(f"{p.name}-api-key", p.namespace),
                "spec": {
                    "targetRefs": _target(p, "api-key"),
                    "apiKeyAuth": {
                        "credentialRefs": [
                            {"group": "", "kind": "Secret", "name": t.key_secret, "namespace": p.secrets_namespace}
                            for t in key_tenants
                        ],
                        "extractFrom": [{"headers": ["authorization"]}],
                        "forwardClientIDHeader": PRINCIPAL_HEADER,
                        # The key stays with the gateway, unless every tenant is a workload's own (that workload
                        # checks it again).
                        "sanitize": not p.forward_api_key,
                    },
                    "authorization": {"defaultAction": "Deny", "rules": _rules(p, key_tenants)},
                },
            }
        )
    if jwt_tenants:
        used = {t.jwt_issuer for t in jwt_tenants}
        providers = [
            {
                "name": i.name,
                "issuer": i.issuer,
                "audiences": list(i.audiences),
                "remoteJWKS": {"uri": i.jwks_uri},
                # Only from the Authorization header: the default also reads `access_token` from the query string,
                # which lands in access logs.
                "extractFrom": {"headers": [{"name": "Authorization", "valuePrefix": "Bearer "}]},
                "claimToHeaders": [{"claim": i.principal_claim, "header": PRINCIPAL_HEADER}],
            }
            for i in p.issuers
            if i.name in used
        ]
        policies.append(
            {
                "apiVersion": EG_API,
                "kind": "SecurityPolicy",
                "metadata": meta(f"{p.name}-jwt", p.namespace),
                "spec": {
                    "targetRefs": _target(p, "jwt"),
                    "jwt": {"providers": providers},
                    "authorization": {"defaultAction": "Deny", "rules": _rules(p, jwt_tenants)},
                },
            }
        )
    return policies


@builds_objects
def tenant_filters(p: GatewayProps) -> list[dict[str, Any]]:
    """The tenant filter on each listener, with that listener's tenants only."""
    listeners = [name for name, _ in p.listeners()]
    return [
        {
            "apiVersion": EG_API,
            "kind": "EnvoyExtensionPolicy",
            "metadata": meta(f"{p.name}-tenants-{listener}", p.namespace),
            "spec": {
                "targetRefs": _target(p, listener),
                "lua": [
                    {
                        "type": "Inline",
                        "inline": SCRIPT,
                        "filterContext": filter_context([t for t in p.tenants if t.credential == listener]),
                    }
                ],
            },
        }
        for listener in listeners
    ]


@builds_objects
def key_secrets(p: GatewayProps, region: str | None) -> list[dict[str, Any]]:
    """Each API-key tenant's key, synced by the External Secrets Operator into a Secret whose one data key is the
    tenant's name (the client id Envoy forwards); the SecretStore (the operator's own Pod Identity); and the
    ReferenceGrant letting the gateway's SecurityPolicies read those Secrets. No object carries a key, a key
    version or a hash: a rotated key is read at the next refresh and pushed to Envoy without a restart."""
    tenants = [t for t in p.tenants if t.api_key_secret is not None]
    if not tenants:
        return []
    ns = p.secrets_namespace
    aws: dict[str, Any] = {"service": "SecretsManager"}
    if region is not None:
        aws["region"] = region
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": ESO_API,
            "kind": "SecretStore",
            "metadata": meta(SECRET_STORE, ns),
            # No `auth`: the operator's own credentials (its Pod Identity role reads exactly these secrets).
            "spec": {"provider": {"aws": aws}},
        },
        {
            "apiVersion": f"{GATEWAY_API}/v1beta1",
            "kind": "ReferenceGrant",
            "metadata": meta(f"{p.name}-tenant-keys", ns),
            "spec": {
                "from": [{"group": "gateway.envoyproxy.io", "kind": "SecurityPolicy", "namespace": p.namespace}],
                "to": [{"group": "", "kind": "Secret", "name": t.key_secret} for t in tenants],
            },
        },
    ]
    for t in tenants:
        assert t.api_key_secret is not None
        objects.append(
            {
                "apiVersion": ESO_API,
                "kind": "ExternalSecret",
                "metadata": meta(t.key_secret, ns),
                "spec": {
                    "refreshInterval": REFRESH_INTERVAL,
                    "secretStoreRef": {"kind": "SecretStore", "name": SECRET_STORE},
                    "target": {"name": t.key_secret, "creationPolicy": "Owner", "deletionPolicy": "Delete"},
                    "data": [{"secretKey": t.name, "remoteRef": {"key": t.api_key_secret}}],
                },
            }
        )
    return objects
