"""The checks on a gateway's tenants and issuers, each a one-line `environments.<env>.gateway.<field>: <value> is not
allowed; <what is allowed>`: a credential per tenant and no credential shared, known models only, budgets above
zero, priorities in range, and issuers that are https URLs."""

from __future__ import annotations

import re

from llm_eks import aws_ids
from llm_eks.config.environment import EnvironmentConfig, ServedWorkload
from llm_eks.config.tenants import EKS_CLUSTER_ISSUER, PRIORITY_RANGE, TenantConfig, TenantLimitsConfig
from llm_eks.error_codes import E132
from llm_eks.errors import ConfigError, did_you_mean, fail

# Tenant names go into object names (tenant-<name>, the key Secret) and Prometheus labels.
TENANT_NAME = re.compile(r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$")
ISSUER_NAME = TENANT_NAME
_HTTPS_URL = re.compile(r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[\x21-\x7e]*)?$")
_AUDIENCE = re.compile(r"^[\x21-\x7e]{1,253}$")
# A top-level string claim (Envoy Gateway's claimToHeaders reads a dot as nesting).
_CLAIM = re.compile(r"^[A-Za-z0-9_:-]{1,64}$")
# A principal is a header value: visible ASCII, no comma (Envoy joins repeated values with commas).
_PRINCIPAL = re.compile(r"^[\x21-\x2b\x2d-\x7e]{1,256}$")
# Envoy Gateway's authorization header match takes at most 256 values.
MAX_MODELS = 256


def served_names(s: ServedWorkload) -> tuple[str, ...]:
    """Every `model` a workload answers, as config knows it: its model (the served name the planner gives it) and
    its LoRA adapters."""
    return (s.config.model, *s.config.lora_adapters)


def routed(c: EnvironmentConfig) -> list[ServedWorkload]:
    """The workloads the gateway routes to by name (a next version answers through its current version's route)."""
    return [s for s in c.served if s.canary_of is None]


def tenant_models(c: EnvironmentConfig, tenant: TenantConfig) -> tuple[str, ...]:
    """The exact names a tenant may call: each workload it names expanded to every name that workload serves."""
    by_key = {s.key: served_names(s) for s in routed(c) if s.key is not None}
    names: list[str] = []
    for model in tenant.models:
        names += by_key.get(model, (model,))
    return tuple(dict.fromkeys(names))


def validate_tenants(c: EnvironmentConfig, path: str) -> None:
    """Tenants and issuers of `c.gateway` (at `path` = environments.<env>.gateway)."""
    g = c.gateway
    assert g is not None
    _validate_issuers(c, path)
    keys: dict[str, str] = {}
    principals: dict[str, str] = {}
    for name, tenant in g.tenants.items():
        where = f"{path}.tenants.{name}"
        if not isinstance(name, str) or not TENANT_NAME.match(name):
            raise fail(
                E132,
                f"{path}.tenants",
                name,
                "tenant names are 1-32 characters: lowercase letters, digits and '-', starting with a letter and not "
                "ending with '-' (they name its key Secret and its InferenceObjectives)",
            )
        _validate_credential(c, name, tenant, where, keys, principals)
        _validate_models(c, tenant, f"{where}.models")
        low, high = PRIORITY_RANGE
        if not low <= tenant.priority <= high:
            raise fail(
                E132,
                f"{where}.priority",
                tenant.priority,
                f"must be {low} to {high} (higher bands are served first; below 0 is shed first)",
            )
        _validate_limits(tenant.limits, f"{where}.limits")
    if g.tenants:
        for s in c.served:
            if s.config.engine == "vllm" and s.config.api_key:
                raise fail(
                    E132,
                    f"{s.path}.api_key",
                    True,
                    "behind a gateway with tenants the gateway authenticates every request and takes the tenant's key "
                    "off it, so a key vLLM checked would refuse them all: set api_key false (the workload is then "
                    "reached through the gateway only, and by its benchmark Job)",
                )


def _validate_issuers(c: EnvironmentConfig, path: str) -> None:
    g = c.gateway
    assert g is not None
    for name, issuer in g.issuers.items():
        where = f"{path}.issuers.{name}"
        if name == EKS_CLUSTER_ISSUER:
            raise fail(
                E132,
                f"{path}.issuers",
                name,
                f"{EKS_CLUSTER_ISSUER} is the cluster's own issuer; set its audiences in gateway.eks_cluster_issuer",
            )
        if not ISSUER_NAME.match(name):
            raise fail(E132, f"{path}.issuers", name, "issuer names are 1-32 lowercase letters, digits and '-'")
        for field_name in ("issuer", "jwks_uri"):
            value = getattr(issuer, field_name)
            if not _HTTPS_URL.match(value):
                raise fail(E132, f"{where}.{field_name}", value, "must be an https URL (https://host/path)")
        _validate_audiences(issuer.audiences, f"{where}.audiences")
        if not _CLAIM.match(issuer.principal_claim):
            raise fail(
                E132,
                f"{where}.principal_claim",
                issuer.principal_claim,
                "must be a top-level claim name: letters, digits, '_', ':' and '-' (no '.', which would nest)",
            )
    _validate_audiences(g.eks_cluster_issuer.audiences, f"{path}.eks_cluster_issuer.audiences")


def _validate_audiences(audiences: tuple[str, ...], where: str) -> None:
    if not audiences or any(not _AUDIENCE.match(a) for a in audiences):
        raise fail(
            E132,
            where,
            list(audiences),
            "must name 1 or more audiences of 1-253 visible ASCII characters (a token must carry one)",
        )


def _validate_credential(
    c: EnvironmentConfig,
    name: str,
    tenant: TenantConfig,
    where: str,
    keys: dict[str, str],
    principals: dict[str, str],
) -> None:
    """Exactly one credential, and none another tenant holds."""
    g = c.gateway
    assert g is not None
    credential = tenant.credential
    kinds = [kind for kind in ("api_key", "jwt") if getattr(credential, kind) is not None]
    if len(kinds) != 1:
        raise ConfigError(
            E132,
            f"{where}.credential: {', '.join(kinds) or 'none'} is not allowed; name exactly one credential: api_key "
            "(a key of its own in Secrets Manager) or jwt (a principal of a named issuer)",
        )
    if credential.api_key is not None:
        secret = credential.api_key.secret
        if secret is not None and (secret.startswith("arn:") or not aws_ids.SECRET_NAME.match(secret)):
            raise fail(
                E132,
                f"{where}.credential.api_key.secret",
                secret,
                "must be a Secrets Manager secret NAME (1-512 of letters, digits and /_+=.@-), not an ARN",
            )
        key = secret or tenant_key_secret(c, name)
        if key in keys:
            raise fail(
                E132,
                f"{where}.credential.api_key.secret",
                key,
                f"tenant {keys[key]} holds that key already: each tenant's key is its own (a shared key would make two "
                "tenants one)",
            )
        keys[key] = name
        return
    jwt = credential.jwt
    assert jwt is not None
    if jwt.issuer != EKS_CLUSTER_ISSUER and jwt.issuer not in g.issuers:
        known = [EKS_CLUSTER_ISSUER, *g.issuers]
        raise fail(
            E132,
            f"{where}.credential.jwt.issuer",
            jwt.issuer,
            f"{did_you_mean(jwt.issuer, known)}must be {EKS_CLUSTER_ISSUER} or a name in gateway.issuers "
            f"({', '.join(known)})",
        )
    if not _PRINCIPAL.match(jwt.principal):
        raise fail(
            E132,
            f"{where}.credential.jwt.principal",
            jwt.principal,
            "must be 1-256 visible ASCII characters without ',' (the value of the issuer's principal claim)",
        )
    if jwt.principal in principals:
        raise fail(
            E132,
            f"{where}.credential.jwt.principal",
            jwt.principal,
            f"tenant {principals[jwt.principal]} is that principal already: each tenant's credential is its own",
        )
    principals[jwt.principal] = name


def tenant_key_secret(c: EnvironmentConfig, tenant: str) -> str:
    """The Secrets Manager secret the stack generates for a tenant's API key."""
    return f"llm-eks/{c.name}/tenants/{tenant}/api-key"


def _validate_models(c: EnvironmentConfig, tenant: TenantConfig, where: str) -> None:
    if not tenant.models:
        raise fail(E132, where, [], "name at least one model it may call (a workload, or a name a workload serves)")
    keys = [s.key for s in routed(c) if s.key is not None]
    names = [n for s in routed(c) for n in served_names(s)]
    for i, model in enumerate(tenant.models):
        if model in tenant.models[:i]:
            raise fail(E132, f"{where}[{i}]", model, "is listed twice")
        if model not in keys and model not in names:
            known = [*keys, *names]
            raise fail(
                E132,
                f"{where}[{i}]",
                model,
                f"{did_you_mean(model, known)}must be a workload ({', '.join(keys) or 'none'}) or a name one serves "
                f"({', '.join(names)})",
            )
    if len(tenant_models(c, tenant)) > MAX_MODELS:
        raise fail(E132, where, list(tenant.models), f"must come to at most {MAX_MODELS} names (Envoy Gateway's limit)")


def _validate_limits(limits: TenantLimitsConfig, where: str) -> None:
    for field_name in (
        "requests_per_second",
        "input_tokens_per_minute",
        "input_tokens_per_day",
        "output_tokens_per_minute",
        "output_tokens_per_day",
    ):
        value = getattr(limits, field_name)
        if value is not None and value < 1:
            raise fail(
                E132,
                f"{where}.{field_name}",
                value,
                "must be at least 1 (a budget of zero refuses every request; leave it out for no limit)",
            )
