"""`GatewayProps` and `ModelRoute`: what the inference gateway and each model behind it need, and every check on
that input. Pinned images and the wire names the routing rests on are here too, each with the source that fixes it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from llm_eks import aws_ids
from llm_eks.errors import ConfigError
from llm_eks.manifests.ingress import ALB_SSL_POLICY, TLS12_OR_13_POLICY
from llm_eks.manifests.labels import require_dns1035, require_dns1123
from llm_eks.versions import EPP_IMAGE, IPP_IMAGE

# The header the payload processor's body-field-to-header plugin writes from the request's `model` field (its chart's
# default config), and the HTTPRoutes match on.
MODEL_HEADER = "X-Gateway-Model-Name"
# The environment's gateway namespace: the Gateway, its Envoy pods and the payload processor.
GATEWAY_NAMESPACE = "inference-gateway"
# The GatewayClass istiod creates and controls (when the Gateway API CRDs exist); each Gateway of it gets an Envoy
# Deployment.
GATEWAY_CLASS = "istio"
# Envoy's ext_proc ports: EPP 9002 and IPP 9004 (their charts and pkg/*/server/options.go defaults), gRPC health
# 9003 and 9005, Prometheus metrics 9090 on both.
EPP_PORT, EPP_HEALTH_PORT = 9002, 9003
IPP_PORT, IPP_HEALTH_PORT = 9004, 9005
ROUTER_METRICS_PORT = 9090
# Istio's gateway Envoy: merged Prometheus metrics on 15020 (/stats/prometheus), readiness on 15021.
GATEWAY_METRICS_PORT = 15020
# A served model name, an adapter name: what OpenAI clients put in "model". HTTP header values allow any visible
# ASCII; the Gateway API caps a header match value at 4096 characters.
_MODEL_NAME = re.compile(r"^[\x21-\x7e]{1,4096}$")


@dataclass(frozen=True)
class PoolBackend:
    """A vLLM workload: its pods become an InferencePool whose endpoint picker chooses the replica."""

    # The vLLM pods' selector labels (immutable, as their Deployment or LeaderWorkerSet selects them).
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
class NextVersion:
    """A route's next version: the InferencePool (in its own namespace) its HTTPRoute also sends requests to."""

    # The next version's pool, and its namespace (the route reaches it through a ReferenceGrant there).
    pool: str
    namespace: str
    # Its share of requests (0-100); 0 leaves it out of the route. Istio 1.30.3 configures one endpoint picker per
    # rule (istio/istio#61594, fixed by #61601 after it): the weights still split requests, but one pool's picker
    # answers for both, so the other pool is balanced round robin, and a rule whose picker's pool has no ready pod
    # fails whole. Hence a next version enters the route only once it serves (`llm-eks canary` checks).
    weight: int = 0


@dataclass(frozen=True)
class ModelRoute:
    """One workload behind the gateway: the names clients ask for and where they go."""

    # Base of every object name (the workload's own name, e.g. vllm-llama): the InferencePool, `<name>-epp`, the
    # HTTPRoute.
    name: str
    # The workload's namespace: the route, the pool and its picker live beside the pods they serve.
    namespace: str
    # Every `model` this workload answers: its served model name, then its LoRA adapters.
    model_names: tuple[str, ...]
    backend: PoolBackend | ServiceBackend
    # Where the picker runs: the system nodes (it is small, and must outlive the GPU nodes it routes to).
    node_selector: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({"llm-eks.io/node-role": "system"})
    )
    # The picker's state (prefix-cache index) is per process: upstream's pattern is one active replica, Recreate on
    # update, and `failureMode: FailOpen` on the pool so a picker restart degrades to plain load balancing. Two
    # replicas elect a leader (the only one Ready); the standby keeps its datastore and takes the lease within about
    # 15 s when the leader's pod or node is lost (llm-d-router v0.10.0 cmd/epp/runner/health.go and
    # pkg/epp/server/controller_config.go), instead of the minutes a new pod on a new node takes.
    picker_replicas: int = 2
    # The pinned release; `repo:tag@sha256:...` once locked (llm-eks images lock).
    picker_image: str = EPP_IMAGE
    # The next version this route also sends to (the current version of a canary pair).
    next_version: NextVersion | None = None
    # A next version's own pool: the route (name, namespace) of the version it is the canary of, whose HTTPRoute
    # splits the traffic; it has no HTTPRoute of its own.
    canary_of: tuple[str, str] | None = None

    @property
    def picker(self) -> str:
        return f"{self.name}-epp"

    @property
    def routed(self) -> bool:
        """Whether this workload's own HTTPRoute attaches to the gateway (a next version is reached through its
        current version's)."""
        return self.canary_of is None


# How clients reach the gateway: through an internal NLB, or only from inside the cluster (its Service is ClusterIP).
EXPOSE = ("nlb", "cluster")
# A token issuer URL: https only (a JWT signed by keys fetched over http proves nothing).
_HTTPS_URL = re.compile(r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[\x21-\x7e]*)?$")


# `GatewayAuth.issuer` for the EKS cluster's own OIDC issuer, filled in when the cluster exists
# (`GatewayProps.with_cluster_issuer`): the stack passes its CloudFormation attribute, `llm-eks manifests` the
# URL the user gives.
CLUSTER_ISSUER = "eks-cluster"


@dataclass(frozen=True)
class GatewayAuth:
    """The gateway authenticates every request with a JWT (Istio's RequestAuthentication and an AuthorizationPolicy
    that requires a verified token): for workloads that check no key of their own, or one credential for all."""

    # The token issuer (`iss`): an https URL, a CDK token (resolved at deploy), or CLUSTER_ISSUER until the cluster
    # is known.
    issuer: str
    # Where istiod fetches the issuer's public keys ("" with CLUSTER_ISSUER: EKS serves them at <issuer>/keys).
    jwks_uri: str
    # A token must carry one of these (`aud`).
    audiences: tuple[str, ...] = ("llm-eks-gateway",)


@dataclass(frozen=True)
class GatewayProps:
    """The environment's one inference endpoint: an Istio Gateway behind an internal NLB, the payload processor that
    lifts `model` into a header, and one route per workload."""

    routes: tuple[ModelRoute, ...]
    # IPv4 CIDRs the NLB's security group admits: client ranges outside the VPC (with the VPC CNI every pod holds a
    # VPC address). Required with an NLB: left out, the AWS Load Balancer Controller admits 0.0.0.0/0.
    inbound_cidrs: tuple[str, ...] = ()
    # The subnets the NLB's ENIs live in (target type ip: they connect to the gateway pods from there).
    load_balancer_cidrs: tuple[str, ...] = ()
    # nlb: an internal NLB in front of Envoy; cluster: no load balancer, in-cluster clients only.
    expose: str = "nlb"
    # None: every backend checks its own credential (vLLM's API key); set: the gateway requires a verified JWT.
    auth: GatewayAuth | None = None
    # Envoy answers 413 above this, before the payload processor or a backend reads the body.
    max_request_bytes: int = 8 * 1024 * 1024
    # TLS on 443, terminated by the NLB with this ACM certificate. Required unless allow_http.
    certificate_arn: str | None = None
    # Plain HTTP on 80: an explicit choice, never the fallback for a missing certificate.
    allow_http: bool = False
    # The NLB's TLS negotiation policy: TLS 1.3 and 1.2 only (the controller's default still accepts TLS 1.0).
    ssl_policy: str = ALB_SSL_POLICY
    namespace: str = GATEWAY_NAMESPACE
    name: str = "inference"
    # Two: its ext_proc filter is fail-closed (failure_mode_allow false), so with it down nothing routes.
    router_replicas: int = 2
    # The payload processor's pinned release; `repo:tag@sha256:...` once locked (llm-eks images lock).
    router_image: str = IPP_IMAGE
    node_selector: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({"llm-eks.io/node-role": "system"})
    )
    monitoring_namespace: str = "monitoring"

    @property
    def listener(self) -> str:
        return "https" if self.certificate_arn is not None else "http"

    @property
    def load_balanced(self) -> bool:
        return self.expose == "nlb"

    @property
    def port(self) -> int:
        return 443 if self.certificate_arn is not None else 80

    def validate(self) -> None:
        validate_gateway(self)

    def with_cluster_issuer(self, issuer: str | None) -> GatewayProps:
        """These props with CLUSTER_ISSUER replaced by the cluster's OIDC issuer URL `issuer` (the EKS user guide,
        "Fetch signing keys": its public keys are at <issuer>/keys); unchanged when the gateway trusts another
        issuer. None where the URL is not known is a one-line error."""
        if self.auth is None or self.auth.issuer != CLUSTER_ISSUER:
            return self
        if issuer is None:
            raise ConfigError(
                "gateway.auth.issuer: 'eks-cluster' needs the cluster's OIDC issuer URL, which only a deployed "
                "cluster knows: pass --oidc-issuer (aws eks describe-cluster --query cluster.identity.oidc.issuer)"
            )
        return replace(self, auth=replace(self.auth, issuer=issuer, jwks_uri=f"{issuer}/keys"))


def validate_gateway(p: GatewayProps) -> None:
    """One-line ConfigError for the first thing wrong with `p` (field names as `gateway.<field>`)."""
    require_dns1123("gateway.namespace", p.namespace)
    require_dns1035("gateway.name", p.name)
    if p.expose not in EXPOSE:
        raise ConfigError(f"gateway.expose: {p.expose!r} is not allowed; must be one of {', '.join(EXPOSE)}")
    if p.load_balanced:
        _validate_load_balancer(p)
    else:
        for name in ("inbound_cidrs", "load_balancer_cidrs", "certificate_arn"):
            if getattr(p, name):
                raise ConfigError(f"gateway.{name}: not allowed with expose cluster (there is no load balancer)")
    if not 1024 <= p.max_request_bytes <= 256 * 1024 * 1024:
        raise ConfigError(
            f"gateway.max_request_bytes: {p.max_request_bytes} is not allowed; must be 1024 to 268435456 (256 MiB)"
        )
    if p.auth is not None and p.auth.issuer != CLUSTER_ISSUER:
        for name in ("issuer", "jwks_uri"):
            value = getattr(p.auth, name)
            if not _is_token(value) and not _HTTPS_URL.match(value):
                raise ConfigError(f"gateway.auth.{name}: {value!r} is not allowed; must be an https URL")
        if not p.auth.audiences:
            raise ConfigError("gateway.auth.audiences: () is not allowed; a token must carry one of them")
    if not 1 <= p.router_replicas <= 10:
        raise ConfigError(f"gateway.router_replicas: {p.router_replicas} is not allowed; must be between 1 and 10")
    if not p.routes:
        raise ConfigError("gateway.routes: () is not allowed; name at least one workload to route to")
    owner: dict[str, str] = {}
    for r in p.routes:
        path = f"gateway.routes[{r.name}]"
        require_dns1035(f"{path}.name", r.name)
        require_dns1123(f"{path}.namespace", r.namespace)
        if len(r.picker) > 63:
            raise ConfigError(
                f"{path}.name: {r.name!r} is not allowed; at most 59 characters (its picker is <name>-epp)"
            )
        if not r.model_names:
            raise ConfigError(f"{path}.model_names: () is not allowed; name the served model")
        if not 1 <= r.picker_replicas <= 3:
            raise ConfigError(f"{path}.picker_replicas: {r.picker_replicas} is not allowed; must be 1, 2 or 3")
        if not r.routed:
            _validate_canary_pair(p, r, path)
            continue
        for model in r.model_names:
            if not _MODEL_NAME.match(model):
                raise ConfigError(
                    f"{path}.model_names: {model!r} is not allowed; must be 1-4096 visible ASCII characters, no spaces"
                )
            if model in owner:
                raise ConfigError(
                    f"{path}.model_names: {model!r} is not allowed; {owner[model]} already serves it (each model "
                    "name routes to exactly one workload)"
                )
            owner[model] = path
    names = [r.name for r in p.routes]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"gateway.routes: name {name!r} is not allowed twice; each workload's route is its own")


def _validate_canary_pair(p: GatewayProps, r: ModelRoute, path: str) -> None:
    """A next version answers exactly its current version's names, and that route sends to this pool."""
    assert r.canary_of is not None
    current = next((c for c in p.routes if (c.name, c.namespace) == r.canary_of), None)
    if current is None or current.next_version is None:
        raise ConfigError(f"{path}.canary_of: {r.canary_of!r} is not allowed; name the route whose next version it is")
    if (current.next_version.pool, current.next_version.namespace) != (r.name, r.namespace):
        raise ConfigError(
            f"{path}.canary_of: {r.canary_of!r} is not allowed; that route's next version is "
            f"{current.next_version.namespace}/{current.next_version.pool}"
        )
    if r.model_names != current.model_names:
        raise ConfigError(
            f"{path}.model_names: {list(r.model_names)} is not allowed; a next version answers exactly the names of "
            f"the version it replaces: {list(current.model_names)}"
        )
    if not isinstance(r.backend, PoolBackend) or not isinstance(current.backend, PoolBackend):
        raise ConfigError(f"{path}.backend: a next version and its current version are InferencePools (vLLM)")
    if not 0 <= current.next_version.weight <= 100:
        raise ConfigError(
            f"{path}.weight: {current.next_version.weight} is not allowed; must be 0 to 100 (the next version's share)"
        )


def _validate_load_balancer(p: GatewayProps) -> None:
    """The NLB's listener (HTTPS with a certificate, or HTTP by explicit choice) and who may reach it."""
    if p.certificate_arn is not None:
        if not aws_ids.ACM_CERTIFICATE_ARN.match(p.certificate_arn):
            raise ConfigError(
                f"gateway.certificate_arn: {p.certificate_arn!r} is not allowed; must be an ACM certificate ARN "
                "(arn:aws:acm:<region>:<account>:certificate/<id>)"
            )
        if p.allow_http:
            raise ConfigError(
                "gateway.allow_http: True is not allowed with certificate_arn; the endpoint serves HTTPS only"
            )
    elif not p.allow_http:
        raise ConfigError(
            "gateway.certificate_arn: None is not allowed without allow_http; name an ACM certificate for HTTPS, "
            "or set allow_http to serve plain HTTP"
        )
    if not TLS12_OR_13_POLICY.match(p.ssl_policy):
        raise ConfigError(
            f"gateway.ssl_policy: {p.ssl_policy!r} is not allowed; must be an ELBSecurityPolicy-TLS13-1-2-* or "
            "-TLS13-1-3-* policy (TLS 1.2 and newer)"
        )
    for field_name, blocks in (("inbound_cidrs", p.inbound_cidrs), ("load_balancer_cidrs", p.load_balancer_cidrs)):
        if not blocks:
            raise ConfigError(f"gateway.{field_name}: () is not allowed; name at least one IPv4 CIDR")
        for block in blocks:
            try:
                net = ipaddress.IPv4Network(block)
            except ValueError:
                raise ConfigError(
                    f"gateway.{field_name}: {block!r} is not allowed; must be an IPv4 CIDR such as 10.0.0.0/16"
                ) from None
            if net.prefixlen == 0:
                raise ConfigError(
                    f"gateway.{field_name}: {block!r} is not allowed; must not be the whole internet, list your own "
                    "ranges"
                )


def _is_token(value: str) -> bool:
    """A CDK token (resolved at deploy time) as cdk8s sees it: `${Token[...]}`."""
    return value.startswith("${Token[")
