"""The environment's load balancers across their fields: the internal ALB of `workload.internal_alb` and the
gateway (its NLB or in-cluster Service, its listener, who may reach it, its auth), and the subnets a load balancer
lands in. Each check raises the one-line `environments.<env>.<field>: <value> is not allowed; <what is allowed>`."""

from __future__ import annotations

import ipaddress
import re

from llm_eks import aws_ids
from llm_eks.config.environment import (
    EKS_CLUSTER_ISSUER,
    GATEWAY_AUTH_MODES,
    GATEWAY_EXPOSE,
    EnvironmentConfig,
    VpcConfig,
)
from llm_eks.config.workload_options import LoadBalancerConfig
from llm_eks.errors import ConfigError, fail

# An OIDC issuer or JWKS URL (Istio's RequestAuthentication requires http(s); a token issuer must be https).
_HTTPS_URL = re.compile(r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[\x21-\x7e]*)?$")
_AUDIENCE = re.compile(r"^[\x21-\x7e]{1,253}$")


def validate_load_balancers(c: EnvironmentConfig, env_path: str) -> None:
    """The internal ALB of `workload.internal_alb` and the gateway's NLB: HTTPS with a named certificate, or HTTP by
    explicit choice; inbound CIDRs that never include the internet; subnets of their own."""
    lb, path, vpc_path = c.workload.load_balancer, f"{env_path}.workload.load_balancer", f"{env_path}.vpc"
    if not c.workload.internal_alb:
        if lb != LoadBalancerConfig():
            raise ConfigError(f"{path}: only allowed with internal_alb: true")
        if c.vpc.load_balancer_cidrs and c.gateway is None:
            raise ConfigError(
                f"{vpc_path}.load_balancer_cidrs: only allowed with workload.internal_alb: true or a gateway"
            )
    else:
        _validate_listener(c, lb, path, "ALB", "internal_alb")
    if c.gateway is not None:
        _validate_gateway(c, f"{env_path}.gateway")
    if c.workload.internal_alb or (c.gateway is not None and c.gateway.expose == "nlb"):
        _validate_load_balancer_subnets(c.vpc, vpc_path)


def _validate_gateway(c: EnvironmentConfig, path: str) -> None:
    """The gateway's sources are an explicit list outside the environment's own VPC (where every pod holds an
    address), every routed model answers only to a credential, and requests have a size limit."""
    g = c.gateway
    assert g is not None
    if g.expose not in GATEWAY_EXPOSE:
        raise fail(f"{path}.expose", g.expose, f"must be one of {', '.join(GATEWAY_EXPOSE)}")
    if g.expose == "cluster":
        for name in ("inbound_cidrs", "certificate_arn", "allow_http"):
            if getattr(g, name):
                raise fail(
                    f"{path}.{name}",
                    getattr(g, name),
                    "not allowed with expose cluster: there is no load balancer (in-cluster clients use plain HTTP "
                    "to the gateway's Service, as to any Service)",
                )
    else:
        _validate_listener(c, g, path, "NLB", "gateway")
        _validate_inbound(c, g, path)
    _validate_gateway_auth(c, path)


def _validate_inbound(c: EnvironmentConfig, g: LoadBalancerConfig, path: str) -> None:
    if not g.inbound_cidrs:
        raise fail(
            f"{path}.inbound_cidrs",
            [],
            "name the client ranges the NLB admits (with the VPC CNI every pod holds a VPC address, so the VPC's "
            "CIDR would admit every pod); in-cluster clients call the gateway's own Service instead",
        )
    vpc = ipaddress.IPv4Network(c.vpc.cidr)
    for i, cidr in enumerate(g.inbound_cidrs):
        network = ipaddress.IPv4Network(cidr) if _is_cidr(cidr) else None
        if network is None:
            continue  # _validate_listener names it
        if not c.vpc.imported and network.overlaps(vpc):
            raise fail(
                f"{path}.inbound_cidrs[{i}]",
                cidr,
                f"overlaps the environment's VPC {vpc}, where every pod holds an address: list client ranges "
                "outside it (in-cluster clients call the gateway's own Service)",
            )
        if c.vpc.imported and network.supernet_of(vpc):
            raise fail(
                f"{path}.inbound_cidrs[{i}]",
                cidr,
                f"covers the whole VPC {vpc}, where every pod holds an address: list only the client subnets",
            )


def _validate_gateway_auth(c: EnvironmentConfig, path: str) -> None:
    g = c.gateway
    assert g is not None
    if not 1024 <= g.max_request_bytes <= 256 * 1024 * 1024:
        raise fail(f"{path}.max_request_bytes", g.max_request_bytes, "must be 1024 to 268435456 (256 MiB)")
    auth, auth_path = g.auth, f"{path}.auth"
    if auth.mode not in GATEWAY_AUTH_MODES:
        raise fail(f"{auth_path}.mode", auth.mode, f"must be one of {', '.join(GATEWAY_AUTH_MODES)}")
    if auth.mode == "api-key":
        for name in ("issuer", "jwks_uri"):
            if getattr(auth, name) is not None:
                raise fail(f"{auth_path}.{name}", getattr(auth, name), "only allowed with mode jwt")
        for s in c.served:
            if s.config.engine == "ray-serve":
                raise fail(
                    f"{auth_path}.mode",
                    auth.mode,
                    f"{s.path} runs Ray Serve, which checks no API key, so through the gateway it would answer "
                    "anyone: use mode jwt (the gateway authenticates every request), or serve that model with vLLM",
                )
            if not s.config.api_key:
                raise fail(
                    f"{s.path}.api_key",
                    False,
                    "with gateway.auth mode api-key each routed workload checks its own key: keep api_key true, "
                    "or use gateway.auth mode jwt",
                )
        return
    if auth.issuer is None:
        raise fail(
            f"{auth_path}.issuer",
            None,
            f"mode jwt needs the token issuer: {EKS_CLUSTER_ISSUER} (this cluster's service-account tokens) or the "
            "https URL of your OIDC provider",
        )
    if auth.issuer == EKS_CLUSTER_ISSUER:
        if auth.jwks_uri is not None:
            raise fail(
                f"{auth_path}.jwks_uri", auth.jwks_uri, f"not allowed with issuer {EKS_CLUSTER_ISSUER} (EKS serves it)"
            )
    else:
        for name in ("issuer", "jwks_uri"):
            value = getattr(auth, name)
            if not isinstance(value, str) or not _HTTPS_URL.match(value):
                raise fail(f"{auth_path}.{name}", value, "must be an https URL (https://host/path)")
    if not auth.audiences or any(not isinstance(a, str) or not _AUDIENCE.match(a) for a in auth.audiences):
        raise fail(
            f"{auth_path}.audiences",
            list(auth.audiences),
            "must name 1 or more audiences of 1-253 visible ASCII characters (a token must carry one)",
        )
    for s in c.served:
        if s.config.engine == "vllm" and s.config.api_key:
            raise fail(
                f"{s.path}.api_key",
                True,
                "behind a gateway with auth mode jwt the token takes the Authorization header and the gateway "
                "authenticates every request: set api_key false (in-cluster callers of the workload's own Service "
                "are then admitted by NetworkPolicy alone), or use gateway.auth mode api-key",
            )


def _is_cidr(text: str) -> bool:
    try:
        ipaddress.IPv4Network(text)
    except ValueError:
        return False
    return "/" in text


def _validate_listener(c: EnvironmentConfig, lb: LoadBalancerConfig, path: str, kind: str, owner: str) -> None:
    """One internal load balancer's listener (`kind`: ALB or NLB) and who may reach it."""
    if lb.certificate_arn is not None:
        match = aws_ids.ACM_CERTIFICATE_ARN.match(lb.certificate_arn)
        if not match:
            raise fail(
                f"{path}.certificate_arn",
                lb.certificate_arn,
                "must be an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>)",
            )
        if c.region is not None and match.group(1) != c.region:
            raise fail(
                f"{path}.certificate_arn", lb.certificate_arn, f"must be a certificate in {c.region}, the {kind}'s"
            )
        if lb.allow_http:
            raise fail(
                f"{path}.allow_http",
                True,
                f"with certificate_arn the {kind} serves HTTPS only (an HTTP listener, even one that redirects, "
                "receives the first request and its API key in clear)",
            )
    elif not lb.allow_http:
        raise fail(
            f"{path}.certificate_arn",
            None,
            f"{owner} needs an ACM certificate ARN for HTTPS, or allow_http: true to serve plain HTTP",
        )
    if c.vpc.imported and not lb.inbound_cidrs:
        raise fail(
            f"{path}.inbound_cidrs",
            [],
            f"an existing VPC's CIDR is not known at synth: list the IPv4 CIDRs that may reach the {kind}",
        )
    for i, cidr in enumerate(lb.inbound_cidrs):
        try:
            network = ipaddress.IPv4Network(cidr) if "/" in cidr else None
        except ValueError:
            network = None
        if network is None:
            raise fail(f"{path}.inbound_cidrs[{i}]", cidr, "must be an IPv4 network such as 10.0.0.0/16")
        if network.prefixlen == 0:
            raise fail(f"{path}.inbound_cidrs[{i}]", cidr, "must not be the whole internet; list your own ranges")


def _validate_load_balancer_subnets(v: VpcConfig, path: str) -> None:
    """The internal ALB's own subnets: inside the VPC, one per AZ, big enough for an ALB."""
    field = f"{path}.load_balancer_cidrs"
    if v.imported and not v.load_balancer_cidrs:
        raise fail(
            field,
            [],
            "an existing VPC must list the CIDRs of its internal ALB subnets (tagged kubernetes.io/role/internal-elb, "
            "holding no pods): the serving port admits the ALB by them",
        )
    if v.load_balancer_cidrs and len(v.load_balancer_cidrs) < 2:
        raise fail(field, list(v.load_balancer_cidrs), "an ALB needs subnets in at least 2 availability zones")
    vpc = ipaddress.IPv4Network(v.cidr)
    for i, cidr in enumerate(v.load_balancer_cidrs):
        try:
            network = ipaddress.IPv4Network(cidr)
        except ValueError:
            raise fail(f"{field}[{i}]", cidr, "must be an IPv4 network such as 10.0.255.0/26") from None
        if not network.subnet_of(vpc) or not 16 <= network.prefixlen <= 27:
            raise fail(f"{field}[{i}]", cidr, f"must be a /16 to /27 inside the VPC's {v.cidr} (an ALB needs a /27)")
