"""Tenants as the gateway's objects see them: one credential each (an API key Secret synced from Secrets Manager, or a
JWT principal of a named issuer), the exact model names it may call, its priority band and its limits; and the JWT
issuers. Every check on them raises a one-line ConfigError naming `gateway.tenants[<name>].<field>`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from llm_eks import aws_ids
from llm_eks.error_codes import E132
from llm_eks.errors import ConfigError, fail

TENANT_NAME = re.compile(r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$")
PRINCIPAL = re.compile(r"^[\x21-\x2b\x2d-\x7e]{1,256}$")
# `Issuer.issuer` for the EKS cluster's own OIDC issuer until the cluster is known (GatewayProps.with_cluster_issuer).
CLUSTER_ISSUER = "eks-cluster"
PRIORITIES = range(-100, 101)
LIMIT_FIELDS = (
    "requests_per_second",
    "input_tokens_per_minute",
    "input_tokens_per_day",
    "output_tokens_per_minute",
    "output_tokens_per_day",
)


@dataclass(frozen=True)
class TenantLimits:
    """Per (tenant, model), across every gateway replica; None: no limit of that kind."""

    requests_per_second: int | None = None
    input_tokens_per_minute: int | None = None
    input_tokens_per_day: int | None = None
    output_tokens_per_minute: int | None = None
    output_tokens_per_day: int | None = None


@dataclass(frozen=True)
class Issuer:
    """A JWT issuer: its `iss`, where its keys are, the audiences a token must carry, and the claim that names the
    principal."""

    name: str
    # An https URL, a CDK token resolved at deploy, or CLUSTER_ISSUER until the cluster is known.
    issuer: str
    # "" with CLUSTER_ISSUER: EKS serves the keys at <issuer>/keys.
    jwks_uri: str
    audiences: tuple[str, ...] = ("llm-eks-gateway",)
    principal_claim: str = "sub"


@dataclass(frozen=True)
class Tenant:
    """One caller of the gateway."""

    name: str
    # The exact `model` names it may call.
    models: tuple[str, ...]
    # The Secrets Manager secret (by name) holding its API key; None for a JWT tenant.
    api_key_secret: str | None = None
    # The issuer (its name in GatewayProps.issuers) and principal of a JWT tenant.
    jwt_issuer: str | None = None
    jwt_principal: str | None = None
    # Its band at the endpoint pickers: higher first, below 0 shed first.
    priority: int = 0
    limits: TenantLimits = field(default_factory=TenantLimits)

    @property
    def credential(self) -> str:
        return "api-key" if self.api_key_secret is not None else "jwt"

    @property
    def principal(self) -> str:
        """What the gateway's identity header holds for this tenant: the API key's client id (its name) or the JWT
        principal."""
        return self.name if self.jwt_principal is None else self.jwt_principal

    @property
    def objective(self) -> str:
        """The InferenceObjective its requests name (one per pool it may call)."""
        return f"tenant-{self.name}"

    @property
    def key_secret(self) -> str:
        """The Kubernetes Secret its API key is synced into."""
        return f"tenant-{self.name}-api-key"


def validate_tenants(tenants: tuple[Tenant, ...], issuers: tuple[Issuer, ...], names: set[str]) -> None:
    """Each tenant has exactly one credential and holds it alone, names only models some route serves (`names`),
    a priority in range and limits above zero; each JWT tenant's issuer exists."""
    if not tenants:
        raise ConfigError(
            E132, "gateway.tenants: () is not allowed; at least one tenant must be able to call the gateway"
        )
    by_issuer = {i.name: i for i in issuers}
    seen: dict[str, str] = {}
    for t in tenants:
        path = f"gateway.tenants[{t.name}]"
        if not TENANT_NAME.match(t.name):
            raise fail(
                E132, f"{path}.name", t.name, "must be 1-32 lowercase letters, digits and '-', starting with a letter"
            )
        if (t.api_key_secret is None) == (t.jwt_principal is None) or (t.jwt_principal is None) != (
            t.jwt_issuer is None
        ):
            raise ConfigError(
                E132, f"{path}: name exactly one credential: an API key secret, or a JWT issuer and principal"
            )
        if t.api_key_secret is not None and (
            t.api_key_secret.startswith("arn:") or not aws_ids.SECRET_NAME.match(t.api_key_secret)
        ):
            raise fail(E132, f"{path}.api_key_secret", t.api_key_secret, "must be a Secrets Manager secret name")
        if t.jwt_issuer is not None and t.jwt_issuer not in by_issuer:
            raise fail(
                E132, f"{path}.jwt_issuer", t.jwt_issuer, f"must be one of {', '.join(by_issuer) or 'no issuer'}"
            )
        if t.jwt_principal is not None and not PRINCIPAL.match(t.jwt_principal):
            raise fail(
                E132, f"{path}.jwt_principal", t.jwt_principal, "must be 1-256 visible ASCII characters without ','"
            )
        credential = t.api_key_secret or f"jwt:{t.jwt_principal}"
        if credential in seen or t.name in seen.values():
            raise fail(
                E132, f"{path}", t.name, f"shares its name or credential with tenant {seen.get(credential, t.name)}"
            )
        seen[credential] = t.name
        if not t.models:
            raise fail(E132, f"{path}.models", (), "name at least one model")
        for model in t.models:
            if model not in names:
                raise fail(E132, f"{path}.models", model, "must be a name one of the gateway's routes serves")
        if t.priority not in PRIORITIES:
            raise fail(E132, f"{path}.priority", t.priority, "must be -100 to 100")
        for name in LIMIT_FIELDS:
            value = getattr(t.limits, name)
            if value is not None and value < 1:
                raise fail(E132, f"{path}.limits.{name}", value, "must be at least 1 (None: no limit)")
