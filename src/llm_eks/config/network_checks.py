"""The environment's load balancers across their fields: the internal ALB of `workload.alb` and the gateway (its
NLB or in-cluster Service, its listener, who may reach it, its tenants), and the subnets a load balancer lands in.
Each check raises the one-line `environments.<env>.<field>: <value> is not allowed; <what is allowed>`."""

from __future__ import annotations

import ipaddress

from llm_eks import aws_ids
from llm_eks.config.environment import GATEWAY_EXPOSE, EnvironmentConfig, VpcConfig
from llm_eks.config.tenant_checks import validate_tenants
from llm_eks.error_codes import E112, E131
from llm_eks.errors import ConfigError, fail


def validate_load_balancers(c: EnvironmentConfig, env_path: str) -> None:
    """The internal ALB of `workload.alb` and the gateway's NLB: HTTPS (the gateway's NLB may serve plain HTTP by
    explicit choice, outside production), inbound CIDRs that never include the internet or a pod's address, and
    subnets of their own."""
    vpc_path = f"{env_path}.vpc"
    alb = c.workload.alb
    nlb = c.gateway is not None and c.gateway.expose == "nlb"
    if alb is None and not nlb and c.vpc.load_balancer_cidrs and c.gateway is None:
        raise ConfigError(E112, f"{vpc_path}.load_balancer_cidrs: only allowed with workload.alb or a gateway")
    if alb is not None:
        path = f"{env_path}.workload.alb"
        _validate_certificate(c, alb.certificate_arn, path, "ALB")
        _validate_inbound(c, alb.inbound_cidrs, path, "ALB")
    if c.gateway is not None:
        _validate_gateway(c, f"{env_path}.gateway")
    if alb is not None or nlb:
        _validate_load_balancer_subnets(c.vpc, vpc_path)
        _validate_pod_subnets(c, vpc_path)


def _validate_gateway(c: EnvironmentConfig, path: str) -> None:
    """The gateway's sources are an explicit list outside the pods' addresses, its listener HTTPS (or HTTP by explicit
    choice, outside production), its tenants each with a credential of its own, and requests have a size limit."""
    g = c.gateway
    assert g is not None
    if g.expose not in GATEWAY_EXPOSE:
        raise fail(E131, f"{path}.expose", g.expose, f"must be one of {', '.join(GATEWAY_EXPOSE)}")
    if g.expose == "cluster":
        for name in ("inbound_cidrs", "certificate_arn", "allow_http"):
            if getattr(g, name):
                raise fail(
                    E131,
                    f"{path}.{name}",
                    getattr(g, name),
                    "not allowed with expose cluster: there is no load balancer (in-cluster clients use plain HTTP "
                    "to the gateway's Service, as to any Service)",
                )
    else:
        if g.certificate_arn is not None:
            _validate_certificate(c, g.certificate_arn, path, "NLB")
            if g.allow_http:
                raise fail(
                    E131,
                    f"{path}.allow_http",
                    True,
                    "with certificate_arn the NLB serves HTTPS only (an HTTP listener, even one that redirects, "
                    "receives the first request and its API key in clear)",
                )
        elif not g.allow_http:
            raise fail(
                E131,
                f"{path}.certificate_arn",
                None,
                "gateway needs an ACM certificate ARN for HTTPS, or allow_http: true to serve plain HTTP",
            )
        elif c.production:
            raise fail(
                E131,
                f"{path}.allow_http",
                True,
                "a production environment's front door serves HTTPS only: name an ACM certificate in certificate_arn",
            )
        _validate_inbound(c, g.inbound_cidrs, path, "NLB")
    if not 1024 <= g.max_request_bytes <= 256 * 1024 * 1024:
        raise fail(E131, f"{path}.max_request_bytes", g.max_request_bytes, "must be 1024 to 268435456 (256 MiB)")
    validate_tenants(c, path)


def _validate_certificate(c: EnvironmentConfig, arn: str, path: str, kind: str) -> None:
    match = aws_ids.ACM_CERTIFICATE_ARN.match(arn)
    if not match:
        raise fail(
            E131,
            f"{path}.certificate_arn",
            arn,
            "must be an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>)",
        )
    if c.region is not None and match.group(1) != c.region:
        raise fail(E131, f"{path}.certificate_arn", arn, f"must be a certificate in {c.region}, the {kind}'s")


def _validate_inbound(c: EnvironmentConfig, inbound: tuple[str, ...], path: str, kind: str) -> None:
    """Client ranges, listed: never the internet, never the addresses pods hold (the new VPC's CIDR, or the existing
    VPC's private subnets)."""
    if not inbound:
        raise fail(
            E131,
            f"{path}.inbound_cidrs",
            [],
            f"name the client ranges the {kind} admits (with the VPC CNI every pod holds a VPC address, so the "
            "VPC's CIDR would admit every pod); in-cluster clients call the Service instead",
        )
    vpc = ipaddress.IPv4Network(c.vpc.cidr) if _is_cidr(c.vpc.cidr) else None
    pod_subnets = [ipaddress.IPv4Network(s) for s in c.vpc.private_subnet_cidrs if _is_cidr(s)]
    for i, cidr in enumerate(inbound):
        if not _is_cidr(cidr):
            raise fail(E131, f"{path}.inbound_cidrs[{i}]", cidr, "must be an IPv4 network such as 10.0.0.0/16")
        network = ipaddress.IPv4Network(cidr)
        if network.prefixlen == 0:
            raise fail(E131, f"{path}.inbound_cidrs[{i}]", cidr, "must not be the whole internet; list your own ranges")
        if not c.vpc.imported and vpc is not None and network.overlaps(vpc):
            raise fail(
                E131,
                f"{path}.inbound_cidrs[{i}]",
                cidr,
                f"overlaps the environment's VPC {vpc}, where every pod holds an address: list client ranges "
                "outside it (in-cluster clients call the Service)",
            )
        for subnet in pod_subnets:
            if network.overlaps(subnet):
                raise fail(
                    E131,
                    f"{path}.inbound_cidrs[{i}]",
                    cidr,
                    f"overlaps the VPC's private subnet {subnet}, where pods hold addresses: list only client subnets",
                )


def _validate_pod_subnets(c: EnvironmentConfig, path: str) -> None:
    """An existing VPC behind a load balancer states where its pods are, so inbound ranges can be checked against
    them."""
    v = c.vpc
    if not v.imported:
        if v.private_subnet_cidrs:
            raise fail(
                E112,
                f"{path}.private_subnet_cidrs",
                list(v.private_subnet_cidrs),
                "only with vpc_id (a new VPC's subnets are carved from cidr)",
            )
        return
    if len(v.private_subnet_cidrs) != len(v.private_subnet_ids):
        raise fail(
            E112,
            f"{path}.private_subnet_cidrs",
            list(v.private_subnet_cidrs),
            f"an existing VPC behind a load balancer must list the CIDRs of its {len(v.private_subnet_ids)} private "
            "subnets, where pods hold addresses (the load balancer's inbound_cidrs may not overlap them)",
        )
    vpc = ipaddress.IPv4Network(v.cidr)
    for i, cidr in enumerate(v.private_subnet_cidrs):
        if not _is_cidr(cidr) or not ipaddress.IPv4Network(cidr).subnet_of(vpc):
            raise fail(
                E112, f"{path}.private_subnet_cidrs[{i}]", cidr, f"must be an IPv4 network inside the VPC's {v.cidr}"
            )


def _is_cidr(text: str) -> bool:
    try:
        ipaddress.IPv4Network(text)
    except ValueError:
        return False
    return "/" in text


def _validate_load_balancer_subnets(v: VpcConfig, path: str) -> None:
    """The internal ALB's own subnets: inside the VPC, one per AZ, big enough for an ALB."""
    field = f"{path}.load_balancer_cidrs"
    if v.imported and not v.load_balancer_cidrs:
        raise fail(
            E112,
            field,
            [],
            "an existing VPC must list the CIDRs of its internal ALB subnets (tagged kubernetes.io/role/internal-elb, "
            "holding no pods): the serving port admits the ALB by them",
        )
    if v.load_balancer_cidrs and len(v.load_balancer_cidrs) < 2:
        raise fail(E112, field, list(v.load_balancer_cidrs), "an ALB needs subnets in at least 2 availability zones")
    vpc = ipaddress.IPv4Network(v.cidr)
    for i, cidr in enumerate(v.load_balancer_cidrs):
        try:
            network = ipaddress.IPv4Network(cidr)
        except ValueError:
            raise fail(E112, f"{field}[{i}]", cidr, "must be an IPv4 network such as 10.0.255.0/26") from None
        if not network.subnet_of(vpc) or not 16 <= network.prefixlen <= 27:
            raise fail(
                E112, f"{field}[{i}]", cidr, f"must be a /16 to /27 inside the VPC's {v.cidr} (an ALB needs a /27)"
            )
