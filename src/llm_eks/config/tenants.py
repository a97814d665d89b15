"""Who may call the environment's gateway: tenants, each with one credential, the models it may call, a priority and
its limits; and the JWT issuers a tenant's credential may name. Leaves of `GatewayConfig` (environment.py); the checks
across them are in tenant_checks.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

# `issuer: "eks-cluster"`: the cluster's own OIDC issuer, whose tokens are Kubernetes service-account tokens (EKS
# serves its signing keys at <issuer>/keys: EKS user guide, "Fetch signing keys"). Needs no entry in `issuers`.
EKS_CLUSTER_ISSUER = "eks-cluster"
# A tenant's priority band at the endpoint picker: higher is served first; below 0 is sheddable.
PRIORITY_RANGE = (-100, 100)


@dataclass(frozen=True)
class TenantLimitsConfig:
    """A tenant's limits, each per model it calls, across every gateway replica (the global rate-limit service).
    Left out: no limit of that kind. Tokens are counted from each response's `usage` (streaming included) and charged
    when the response ends, so requests in flight can overshoot a budget by their own tokens."""

    # Requests per second.
    requests_per_second: int | None = None
    # Prompt tokens per minute and per day (calendar windows: the minute, the UTC day).
    input_tokens_per_minute: int | None = None
    input_tokens_per_day: int | None = None
    # Generated tokens per minute and per day.
    output_tokens_per_minute: int | None = None
    output_tokens_per_day: int | None = None


@dataclass(frozen=True)
class ApiKeyCredentialConfig:
    """An API key of the tenant's own, sent as `Authorization: Bearer <key>` (OpenAI clients do)."""

    # A Secrets Manager secret NAME whose SecretString is the key; None: the stack generates
    # llm-eks/<env>/tenants/<tenant>/api-key. Each tenant's secret is its own: two tenants may not share one.
    secret: str | None = None


@dataclass(frozen=True)
class JwtCredentialConfig:
    """A JWT principal: tokens of `issuer` whose principal claim (the issuer's `principal_claim`, `sub` by default)
    is `principal`."""

    # eks-cluster (this cluster's service-account tokens: `principal` is system:serviceaccount:<ns>:<name>) or a
    # name in gateway.issuers.
    issuer: str
    principal: str


@dataclass(frozen=True)
class TenantCredentialConfig:
    """Exactly one of the two."""

    # An API key of the tenant's own; None when the tenant authenticates with a JWT instead.
    api_key: ApiKeyCredentialConfig | None = None
    # A JWT principal of a named issuer; None when the tenant has an API key instead.
    jwt: JwtCredentialConfig | None = None


@dataclass(frozen=True)
class TenantConfig:
    """One caller of the gateway: what it authenticates with, what it may call, how it is served and limited."""

    # Required: a tenant without a credential would be anyone.
    credential: TenantCredentialConfig
    # The models it may call: a workload's name in `workloads` (every name it serves: its model and LoRA adapters)
    # or one exact name a workload serves. Anything else answers 403, naming nothing.
    models: tuple[str, ...]
    # Its requests' priority band at each vLLM workload's endpoint picker (-100 to 100): higher bands are served
    # first when a model is saturated; below 0 is shed first. 0: the default band.
    priority: int = 0
    # Left out: no limits beyond the gateway's own overload protection.
    limits: TenantLimitsConfig = field(default_factory=TenantLimitsConfig)


@dataclass(frozen=True)
class IssuerConfig:
    """An OIDC provider whose tokens a JWT tenant may carry."""

    # Its `iss`, an https URL.
    issuer: str
    # Where its signing keys are (the JWKS its discovery document names), an https URL.
    jwks_uri: str
    # A token must carry one of these (`aud`).
    audiences: tuple[str, ...] = ("llm-eks-gateway",)
    # The claim whose value is a tenant's `principal` (a string claim: sub, azp, client_id, ...).
    principal_claim: str = "sub"


@dataclass(frozen=True)
class ClusterIssuerConfig:
    """The cluster's own service-account tokens (`issuer: "eks-cluster"`), when a tenant names it."""

    # A token must carry one of these: `kubectl create token <sa> --audience llm-eks-gateway`, or a projected
    # service-account token volume with that audience.
    audiences: tuple[str, ...] = ("llm-eks-gateway",)


def no_tenants() -> Mapping[str, TenantConfig]:
    return MappingProxyType({})


def no_issuers() -> Mapping[str, IssuerConfig]:
    return MappingProxyType({})
