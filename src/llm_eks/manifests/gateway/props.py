"""`GatewayProps` and `ModelRoute`: what the inference gateway and each model behind it need, and every check on that
input. The wire names the routing rests on are here too, each with the source that fixes it."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from llm_eks import aws_ids
from llm_eks.error_codes import E131, E133
from llm_eks.errors import ConfigError, fail
from llm_eks.manifests.gateway.platform import EXTERNAL_SECRETS_NAMESPACE
from llm_eks.manifests.gateway.tenants import CLUSTER_ISSUER, Issuer, Tenant, validate_tenants
from llm_eks.manifests.ingress import ALB_SSL_POLICY, TLS12_OR_13_POLICY
from llm_eks.manifests.labels import require_dns1035, require_dns1123
from llm_eks.versions import ENVOY_PROXY_IMAGE, EPP_IMAGE

# The header Envoy AI Gateway's external processor sets from the request body's `model` (overwriting any client
# value) and then clears the route cache, so routes and authorization see the body's model
# (api/v1beta1/shared_types.go AIModelHeaderKey; internal/extproc/processor_impl.go ProcessRequestBody at v1.1.0).
MODEL_HEADER = "x-ai-eg-model"
# Our own identity headers: the authenticated principal (API key client id or JWT claim) and the tenant it maps to.
PRINCIPAL_HEADER = "x-llm-eks-principal"
TENANT_HEADER = "x-llm-eks-tenant"
# llm-d router v0.10.0's flow-control headers (pkg/epp/metadata/consts.go): the fairness id (flow) and the
# InferenceObjective name (priority band).
FAIRNESS_HEADER = "x-llm-d-inference-fairness-id"
OBJECTIVE_HEADER = "x-llm-d-inference-objective"
# The environment's gateway namespace: the Gateway, its Envoy pods (GatewayNamespace mode) and its policies.
GATEWAY_NAMESPACE = "inference-gateway"
# The GatewayClass llm-eks creates for Envoy Gateway's controller.
GATEWAY_CLASS = "llm-eks"
# The endpoint picker's ext_proc, gRPC health and metrics ports (llm-d router pkg/epp/server/options.go defaults).
EPP_PORT, EPP_HEALTH_PORT = 9002, 9003
ROUTER_METRICS_PORT = 9090
# Envoy's Prometheus stats (/stats/prometheus) and the AI Gateway external processor's admin port (/metrics), on
# every Envoy pod (envoyproxy/gateway internal/xds/bootstrap/bootstrap.go EnvoyStatsPort; envoyproxy/ai-gateway
# cmd/extproc/mainlib/main.go adminPort).
ENVOY_METRICS_PORT = 19001
EXTPROC_METRICS_PORT = 1064
# A served model name, an adapter name: what OpenAI clients put in "model". HTTP header values allow any visible
# ASCII; the Gateway API caps a header match value at 4096 characters.
_MODEL_NAME = re.compile(r"^[\x21-\x7e]{1,4096}$")
# An AIGatewayRoute holds at most 15 rules of at most 128 matches (its CRD's MaxItems).
MATCHES_PER_RULE, RULES_PER_ROUTE = 128, 15
# Who makes the NLB of a LoadBalancer Service, by its loadBalancerClass: the AWS Load Balancer Controller, or EKS Auto
# Mode's own load balancing (EKS User Guide, auto-configure-nlb.adoc@1eb6aa42: "loadBalancerClass:
# eks.amazonaws.com/nlb"). Set, the in-tree cloud provider leaves the Service alone.
NLB_CLASS = "service.k8s.aws/nlb"
AUTO_MODE_NLB_CLASS = "eks.amazonaws.com/nlb"
NLB_CLASSES = (NLB_CLASS, AUTO_MODE_NLB_CLASS)


@dataclass(frozen=True)
class PoolBackend:
    """A vLLM workload: its pods become an InferencePool whose endpoint picker chooses the replica."""

    # The InferencePool's pod selector: the vLLM pods' selector labels, or with a next version in the pool only the
    # instance label both versions' pods carry (pool share).
    selector: Mapping[str, str]
    # vLLM's OpenAI port, which also serves /metrics (the picker reads queue and KV-cache use from it).
    port: int = 8000


@dataclass(frozen=True)
class ServiceBackend:
    """A workload with its own router (Ray Serve's proxy): the gateway forwards to its Service."""

    service: str
    # The pods behind the Service (their NetworkPolicy admits the gateway).
    selector: Mapping[str, str]
    port: int = 8000


@dataclass(frozen=True)
class FlowControl:
    """The endpoint picker's flow control for one pool: how long a request may be held (at zero replicas, or while
    the pool is saturated), what the caller is told past it, and what the pool can take."""

    # flowControl.defaultRequestTTL: the hold, under the 300 s the AI Gateway gives the picker's ext_proc calls.
    hold_seconds: int
    # Retry-After of the 503 a caller gets when the hold ends with no replica ready.
    retry_after_seconds: int
    # The route's request timeout: the hold plus a whole generation at the SLO.
    request_timeout_seconds: int
    # The concurrency detector's per-replica ceiling (the plan's concurrent sequences): above it the pool is saturated.
    max_concurrency: int
    # Requests each priority band may queue: what the pool at its largest serves within the TTFT target.
    band_capacity: int
    # The picker's memory for held requests (bodies included), under its container's limit.
    max_bytes: str = "256Mi"


@dataclass(frozen=True)
class NextVersion:
    """A route's next version, served in its pool (pool share): the Deployment (or LeaderWorkerSet) `llm-eks canary`
    scales to set its share of the pool's replicas."""

    name: str
    kind: str = "Deployment"


@dataclass(frozen=True)
class PrecisePrefix:
    """A pool whose picker scores prefix-cache hits from its pods' KV-cache events (gateway/precise_prefix.py)."""

    # The model the picker asks vLLM to render prompts for: the workload's served model name.
    model_name: str
    # Where it renders them: the workload's Service (vLLM's /v1/completions/render, no key).
    render_url: str


@dataclass(frozen=True)
class ModelRoute:
    """One workload behind the gateway: the names clients ask for and where they go."""

    # Base of every object name (the workload's own name, e.g. vllm-llama): the AIGatewayRoute, the InferencePool,
    # `<name>-epp`.
    name: str
    # The workload's namespace: the route, the pool and its picker live beside the pods they serve.
    namespace: str
    # Every `model` this workload answers: its served model name, then its LoRA adapters.
    model_names: tuple[str, ...]
    backend: PoolBackend | ServiceBackend
    # vLLM: the picker's flow control; None for Ray Serve (no picker). Required for a pool.
    flow: FlowControl | None = None
    # Ray Serve: the route's request timeout (a whole generation at the SLO); a pool's comes from `flow`.
    request_timeout_seconds: int = 600
    # Where the picker runs: the system nodes (it is small, and must outlive the GPU nodes it routes to).
    node_selector: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({"llm-eks.io/node-role": "system"})
    )
    # The taints of those nodes it tolerates: none on llm-eks's system node group; CriticalAddonsOnly on EKS Auto
    # Mode's system pool.
    tolerations: tuple[Mapping[str, Any], ...] = ()
    # The AI Gateway fails closed on the picker (failure_mode_allow false, whatever the pool's failureMode): two
    # replicas elect a leader (the only one Ready); the standby keeps its datastore and takes the lease within about
    # 15 s when the leader's pod or node is lost (llm-d-router v0.10.0 cmd/epp/runner/health.go and
    # pkg/epp/server/controller_config.go), so a node drain or loss is a failover, not an outage.
    picker_replicas: int = 2
    # The pinned release; `repo:tag@sha256:...` once locked (llm-eks images lock).
    picker_image: str = EPP_IMAGE
    # The next version whose pods share this route's pool; None: no canary.
    next_version: NextVersion | None = None
    # A next version's own workload: the route (name, namespace) of the version it is the canary of; it has no
    # route or pool of its own.
    canary_of: tuple[str, str] | None = None
    # A disaggregated vLLM workload: the picker's prefill/decode profiles, prefilling on the prefill pool when more
    # than this many prompt tokens miss the decode pod's prefix cache; None: one profile.
    pd_non_cached_tokens: int | None = None
    # A vLLM pool whose pods publish KV-cache events: the picker scores with them (the CPU tier included); None: the
    # approximate scorer.
    precise_prefix: PrecisePrefix | None = None

    @property
    def picker(self) -> str:
        return f"{self.name}-epp"

    @property
    def routed(self) -> bool:
        """Whether this workload has a route of its own (a next version is served through its current version's)."""
        return self.canary_of is None

    @property
    def timeout_seconds(self) -> int:
        return self.flow.request_timeout_seconds if self.flow is not None else self.request_timeout_seconds


# How clients reach the gateway: through an internal NLB, or only from inside the cluster (its Service is ClusterIP).
EXPOSE = ("nlb", "cluster")
_HTTPS_URL = re.compile(r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[\x21-\x7e]*)?$")


@dataclass(frozen=True)
class GatewayProps:
    """The environment's one inference endpoint: Envoy Gateway's Envoy pods (with Envoy AI Gateway's external
    processor) behind an internal NLB, the tenants that may call it, and one route per workload."""

    routes: tuple[ModelRoute, ...]
    tenants: tuple[Tenant, ...]
    issuers: tuple[Issuer, ...] = ()
    # IPv4 CIDRs the NLB's security group admits: client ranges outside the pods' addresses. Required with an NLB.
    inbound_cidrs: tuple[str, ...] = ()
    # The subnets the NLB's ENIs live in (target type ip: they connect to the Envoy pods from there).
    load_balancer_cidrs: tuple[str, ...] = ()
    # nlb: an internal NLB in front of Envoy; cluster: no load balancer, in-cluster clients only.
    expose: str = "nlb"
    # Envoy answers 413 above this, before the external processor reads the body.
    max_request_bytes: int = 8 * 1024 * 1024
    # TLS on the NLB with this ACM certificate. Required unless allow_http.
    certificate_arn: str | None = None
    # Plain HTTP: an explicit choice, never the fallback for a missing certificate.
    allow_http: bool = False
    # The NLB's TLS negotiation policy: TLS 1.3 and 1.2 only (the controller's default still accepts TLS 1.0).
    ssl_policy: str = ALB_SSL_POLICY
    # True only where every tenant is a workload's own (no tenants declared): the key then reaches the backend too,
    # which checks it again (vLLM's --api-key). With declared tenants the gateway takes the key off the request.
    forward_api_key: bool = False
    namespace: str = GATEWAY_NAMESPACE
    name: str = "inference"
    # Two Envoy pods in two zones with a PDB: the endpoint outlives a node drain and a zone.
    envoy_replicas: int = 2
    # The data plane's pinned Envoy; `repo:tag@sha256:...` once locked.
    envoy_image: str = ENVOY_PROXY_IMAGE
    # Where the Envoy pods run: the system nodes (on-demand, apart from the GPU capacity they route to), and the
    # taints of those nodes they tolerate (none on llm-eks's node group; CriticalAddonsOnly on Auto Mode's pool).
    node_selector: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({"llm-eks.io/node-role": "system"})
    )
    tolerations: tuple[Mapping[str, Any], ...] = ()
    # Who makes the NLB: the AWS Load Balancer Controller (service.k8s.aws/nlb), or on EKS Auto Mode its own load
    # balancing (eks.amazonaws.com/nlb).
    load_balancer_class: str = NLB_CLASS
    monitoring_namespace: str = "monitoring"
    # Where the External Secrets Operator writes the tenants' key Secrets.
    secrets_namespace: str = EXTERNAL_SECRETS_NAMESPACE

    @property
    def tls(self) -> bool:
        return self.certificate_arn is not None

    @property
    def load_balanced(self) -> bool:
        return self.expose == "nlb"

    @property
    def needs_load_balancer_controller(self) -> bool:
        """Whether the NLB is the AWS Load Balancer Controller's (EKS Auto Mode's load balancing needs no add-on)."""
        return self.load_balanced and self.load_balancer_class == NLB_CLASS

    def listeners(self) -> tuple[tuple[str, int], ...]:
        """(name, port) of each listener: one per credential kind in use (an API key and a JWT both arrive as
        `Authorization: Bearer`, so one listener cannot take either)."""
        kinds = {t.credential for t in self.tenants}
        ports = {"api-key": 443 if self.tls else 80, "jwt": 8443 if self.tls else 8080}
        return tuple((kind, ports[kind]) for kind in ("api-key", "jwt") if kind in kinds)

    def validate(self) -> None:
        validate_gateway(self)

    def with_cluster_issuer(self, issuer: str | None) -> GatewayProps:
        """These props with CLUSTER_ISSUER replaced by the cluster's OIDC issuer URL `issuer` (the EKS user guide,
        "Fetch signing keys": its public keys are at <issuer>/keys); unchanged when no issuer is the cluster's. None
        where the URL is not known is a one-line error."""
        if not any(i.issuer == CLUSTER_ISSUER for i in self.issuers):
            return self
        if issuer is None:
            raise ConfigError(
                E131,
                "gateway.issuers: 'eks-cluster' needs the cluster's OIDC issuer URL, which only a deployed cluster "
                "knows: pass --oidc-issuer (aws eks describe-cluster --query cluster.identity.oidc.issuer)",
            )
        return replace(
            self,
            issuers=tuple(
                replace(i, issuer=issuer, jwks_uri=f"{issuer}/keys") if i.issuer == CLUSTER_ISSUER else i
                for i in self.issuers
            ),
        )


def validate_gateway(p: GatewayProps) -> None:
    """One-line ConfigError for the first thing wrong with `p` (field names as `gateway.<field>`)."""
    require_dns1123("gateway.namespace", p.namespace)
    require_dns1035("gateway.name", p.name)
    if p.expose not in EXPOSE:
        raise ConfigError(E131, f"gateway.expose: {p.expose!r} is not allowed; must be one of {', '.join(EXPOSE)}")
    if p.load_balancer_class not in NLB_CLASSES:
        raise fail(
            E131, "gateway.load_balancer_class", p.load_balancer_class, f"must be one of {', '.join(NLB_CLASSES)}"
        )
    if p.load_balanced:
        _validate_load_balancer(p)
    else:
        for name in ("inbound_cidrs", "load_balancer_cidrs", "certificate_arn"):
            if getattr(p, name):
                raise ConfigError(E131, f"gateway.{name}: not allowed with expose cluster (there is no load balancer)")
    if not 1024 <= p.max_request_bytes <= 256 * 1024 * 1024:
        raise ConfigError(
            E131,
            f"gateway.max_request_bytes: {p.max_request_bytes} is not allowed; must be 1024 to 268435456 (256 MiB)",
        )
    for issuer in p.issuers:
        if issuer.issuer != CLUSTER_ISSUER:
            for name in ("issuer", "jwks_uri"):
                value = getattr(issuer, name)
                if not _is_token(value) and not _HTTPS_URL.match(value):
                    raise fail(E131, f"gateway.issuers[{issuer.name}].{name}", value, "must be an https URL")
        if not issuer.audiences:
            raise fail(
                E131, f"gateway.issuers[{issuer.name}].audiences", (), "a token must carry one of them: name one"
            )
    if not 1 <= p.envoy_replicas <= 10:
        raise fail(E131, "gateway.envoy_replicas", p.envoy_replicas, "must be between 1 and 10")
    if not p.routes:
        raise ConfigError(E131, "gateway.routes: () is not allowed; name at least one workload to route to")
    owner: dict[str, str] = {}
    for r in p.routes:
        _validate_route(p, r, owner)
    names = [r.name for r in p.routes]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(
                E131, f"gateway.routes: name {name!r} is not allowed twice; each workload's route is its own"
            )
    validate_tenants(p.tenants, p.issuers, set(owner))


def _validate_route(p: GatewayProps, r: ModelRoute, owner: dict[str, str]) -> None:
    path = f"gateway.routes[{r.name}]"
    require_dns1035(f"{path}.name", r.name)
    require_dns1123(f"{path}.namespace", r.namespace)
    if len(r.picker) > 63:
        raise ConfigError(
            E131, f"{path}.name: {r.name!r} is not allowed; at most 59 characters (its picker is <name>-epp)"
        )
    if not r.model_names:
        raise ConfigError(E131, f"{path}.model_names: () is not allowed; name the served model")
    if not 1 <= r.picker_replicas <= 3:
        raise ConfigError(E131, f"{path}.picker_replicas: {r.picker_replicas} is not allowed; must be 1, 2 or 3")
    if isinstance(r.backend, PoolBackend) and r.routed and r.flow is None:
        raise ConfigError(
            E131, f"{path}.flow: None is not allowed; a pool's picker holds and sheds by its flow control"
        )
    if r.flow is not None:
        _validate_flow(r.flow, f"{path}.flow")
    elif not 1 <= r.request_timeout_seconds <= 3600:
        raise fail(E131, f"{path}.request_timeout_seconds", r.request_timeout_seconds, "must be 1 to 3600")
    if not r.routed:
        _validate_canary_pair(p, r, path)
        return
    if len(r.model_names) > MATCHES_PER_RULE * RULES_PER_ROUTE:
        raise fail(
            E131,
            f"{path}.model_names",
            len(r.model_names),
            f"is too many names for one AIGatewayRoute: at most {MATCHES_PER_RULE * RULES_PER_ROUTE}",
        )
    for model in r.model_names:
        if not _MODEL_NAME.match(model):
            raise ConfigError(
                E131,
                f"{path}.model_names: {model!r} is not allowed; must be 1-4096 visible ASCII characters, no spaces",
            )
        if model in owner:
            raise ConfigError(
                E131,
                f"{path}.model_names: {model!r} is not allowed; {owner[model]} already serves it (each model name "
                "routes to exactly one workload)",
            )
        owner[model] = path


def _validate_flow(f: FlowControl, path: str) -> None:
    # The AI Gateway gives each picker ext_proc message 300 s (extensionserver/inferencepool.go): a longer hold
    # would be cut by Envoy, not answered by the picker.
    if not 1 <= f.hold_seconds < 300:
        raise fail(
            E131, f"{path}.hold_seconds", f.hold_seconds, "must be 1 to 299 (the AI Gateway's 300 s picker timeout)"
        )
    if f.request_timeout_seconds <= f.hold_seconds:
        raise fail(
            E131,
            f"{path}.request_timeout_seconds",
            f.request_timeout_seconds,
            f"must exceed the hold ({f.hold_seconds} s): a held request would time out before it is served",
        )
    for name in ("retry_after_seconds", "max_concurrency", "band_capacity"):
        if getattr(f, name) < 1:
            raise fail(E131, f"{path}.{name}", getattr(f, name), "must be at least 1")
    if f.band_capacity > 5000:
        raise fail(
            E131, f"{path}.band_capacity", f.band_capacity, "must be at most 5000 (the picker's default per band)"
        )


def _validate_canary_pair(p: GatewayProps, r: ModelRoute, path: str) -> None:
    """A next version answers exactly its current version's names, in that version's namespace (its pool)."""
    assert r.canary_of is not None
    current = next((c for c in p.routes if (c.name, c.namespace) == r.canary_of), None)
    if current is None or current.next_version is None or current.next_version.name != r.name:
        raise ConfigError(
            E133, f"{path}.canary_of: {r.canary_of!r} is not allowed; name the route whose next version it is"
        )
    if r.namespace != current.namespace:
        raise fail(
            E133,
            f"{path}.namespace",
            r.namespace,
            f"must be its current version's {current.namespace}: its pods join that version's InferencePool",
        )
    if r.model_names != current.model_names:
        raise ConfigError(
            E133,
            f"{path}.model_names: {list(r.model_names)} is not allowed; a next version answers exactly the names of "
            f"the version it replaces: {list(current.model_names)}",
        )
    if not isinstance(r.backend, PoolBackend) or not isinstance(current.backend, PoolBackend):
        raise ConfigError(E133, f"{path}.backend: a next version and its current version are InferencePools (vLLM)")


def _validate_load_balancer(p: GatewayProps) -> None:
    """The NLB's listener (HTTPS with a certificate, or HTTP by explicit choice) and who may reach it."""
    if p.certificate_arn is not None:
        if not aws_ids.ACM_CERTIFICATE_ARN.match(p.certificate_arn):
            raise ConfigError(
                E131,
                f"gateway.certificate_arn: {p.certificate_arn!r} is not allowed; must be an ACM certificate ARN "
                "(arn:aws:acm:<region>:<account>:certificate/<id>)",
            )
        if p.allow_http:
            raise ConfigError(
                E131, "gateway.allow_http: True is not allowed with certificate_arn; the endpoint serves HTTPS only"
            )
    elif not p.allow_http:
        raise ConfigError(
            E131,
            "gateway.certificate_arn: None is not allowed without allow_http; name an ACM certificate for HTTPS, "
            "or set allow_http to serve plain HTTP",
        )
    if not TLS12_OR_13_POLICY.match(p.ssl_policy):
        raise ConfigError(
            E131,
            f"gateway.ssl_policy: {p.ssl_policy!r} is not allowed; must be an ELBSecurityPolicy-TLS13-1-2-* or "
            "-TLS13-1-3-* policy (TLS 1.2 and newer)",
        )
    for field_name, blocks in (("inbound_cidrs", p.inbound_cidrs), ("load_balancer_cidrs", p.load_balancer_cidrs)):
        if not blocks:
            raise ConfigError(E131, f"gateway.{field_name}: () is not allowed; name at least one IPv4 CIDR")
        for block in blocks:
            try:
                net = ipaddress.IPv4Network(block)
            except ValueError:
                raise ConfigError(
                    E131, f"gateway.{field_name}: {block!r} is not allowed; must be an IPv4 CIDR such as 10.0.0.0/16"
                ) from None
            if net.prefixlen == 0:
                raise ConfigError(
                    E131,
                    f"gateway.{field_name}: {block!r} is not allowed; must not be the whole internet, list your own "
                    "ranges",
                )


def _is_token(value: str) -> bool:
    """A CDK token (resolved at deploy time) as cdk8s sees it: `${Token[...]}`."""
    return value.startswith("${Token[")
