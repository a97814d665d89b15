"""The internal ALB in front of a model's Service: `IngressProps`, their validation and the Ingress annotations of
the AWS Load Balancer Controller (v3.5 annotation names and values: docs/guide/ingress/annotations.md at v3.5.0).

Security: the ALB is always internal; HTTPS with a named ACM certificate, or plain HTTP only by explicit choice
(`allow_http`), never both; its security group admits only `inbound_cidrs` (the controller's default is 0.0.0.0/0).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from llm_eks import aws_ids
from llm_eks.error_codes import E140
from llm_eks.errors import ConfigError

# The only path the ALB forwards (see ingress_rule).
OPENAI_PATH = "/v1"
_HOST = re.compile(r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


# The ALB policy AWS recommends (the console default): TLS 1.3 and 1.2 with the restricted (forward-secret GCM)
# cipher list, plus hybrid post-quantum key exchange for clients that offer it. The controller's default,
# ELBSecurityPolicy-2016-08, still accepts TLS 1.0.
ALB_SSL_POLICY = "ELBSecurityPolicy-TLS13-1-2-Res-PQ-2025-09"
# Policy names carry their lowest TLS version: TLS13-1-2-* and TLS13-1-3-* start at 1.2 and 1.3.
TLS12_OR_13_POLICY = re.compile(r"^ELBSecurityPolicy-TLS13-1-[23]-[A-Za-z0-9-]+$")


@dataclass(frozen=True)
class IngressProps:
    """An internal ALB in front of the Service, through the AWS Load Balancer Controller.

    HTTPS with `certificate_arn`, or plain HTTP only when `allow_http` says so; never both (an HTTP listener that
    redirects still receives the first request, API key included, in clear). `inbound_cidrs` is required: without
    it the controller opens the ALB's security group to 0.0.0.0/0.
    """

    # None: answer any Host header (clients in the VPC call the ALB's own DNS name).
    host: str | None = None
    # Share one ALB between Ingresses (alb.ingress.kubernetes.io/group.name); None: a dedicated ALB.
    group_name: str | None = None
    # HTTPS on 443 with this ACM certificate (same region as the ALB).
    certificate_arn: str | None = None
    # Plain HTTP on 80 instead of HTTPS: an explicit choice, never the fallback for a missing certificate.
    allow_http: bool = False
    # IPv4 CIDRs the ALB's security group admits (e.g. the VPC's CIDR). Required: left out, the controller admits
    # 0.0.0.0/0.
    inbound_cidrs: tuple[str, ...] = ()
    # TLS negotiation policy of the HTTPS listener.
    ssl_policy: str = ALB_SSL_POLICY
    # A non-streamed completion can be silent for minutes; the ALB default (60 s) would cut it.
    idle_timeout_seconds: int = 300


def validate_ingress(i: IngressProps) -> None:
    """One-line ConfigError for the first thing wrong with `i` (field names as `ingress.<field>`)."""
    if i.host is not None and not _HOST.match(i.host):
        raise ConfigError(
            E140, f"ingress.host: {i.host!r} is not allowed; must be a DNS name such as llm.example.internal"
        )
    if i.group_name is not None and not re.match(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$", i.group_name):
        raise ConfigError(
            E140,
            f"ingress.group_name: {i.group_name!r} is not allowed; must be lowercase letters, digits, '-' and '.', "
            "at most 63 characters",
        )
    if i.certificate_arn is not None and not aws_ids.ACM_CERTIFICATE_ARN.match(i.certificate_arn):
        raise ConfigError(
            E140,
            f"ingress.certificate_arn: {i.certificate_arn!r} is not allowed; must be an ACM certificate ARN "
            "(arn:aws:acm:<region>:<account>:certificate/<id>)",
        )
    if not 1 <= i.idle_timeout_seconds <= 4000:
        raise ConfigError(
            E140,
            f"ingress.idle_timeout_seconds: {i.idle_timeout_seconds} is not allowed; must be 1 to 4000 (ALB limit)",
        )
    if i.certificate_arn is None and not i.allow_http:
        raise ConfigError(
            E140,
            "ingress.certificate_arn: None is not allowed; HTTPS needs an ACM certificate ARN "
            "(or set allow_http to serve plain HTTP)",
        )
    if i.certificate_arn is not None and i.allow_http:
        raise ConfigError(
            E140,
            "ingress.allow_http: True is not allowed with certificate_arn; the ALB serves HTTPS only "
            "(an HTTP listener receives the first request, API key included, in clear)",
        )
    if not TLS12_OR_13_POLICY.match(i.ssl_policy):
        raise ConfigError(
            E140,
            f"ingress.ssl_policy: {i.ssl_policy!r} is not allowed; must be an ALB policy with TLS 1.2 or 1.3 as "
            f"its lowest version (ELBSecurityPolicy-TLS13-1-2-... or -1-3-..., e.g. {ALB_SSL_POLICY})",
        )
    if not i.inbound_cidrs:
        raise ConfigError(
            E140,
            "ingress.inbound_cidrs: [] is not allowed; list the IPv4 CIDRs that may reach the ALB (e.g. the VPC's)",
        )
    for n, cidr in enumerate(i.inbound_cidrs):
        if not _is_ipv4_network(cidr) or cidr.endswith("/0"):
            raise ConfigError(
                E140,
                f"ingress.inbound_cidrs[{n}]: {cidr!r} is not allowed; must be an IPv4 network such as 10.0.0.0/16, "
                "not 0.0.0.0/0",
            )


def _is_ipv4_network(cidr: str) -> bool:
    """A CIDR with a prefix length and no host bits set (what the ALB's security group rules take)."""
    if "/" not in cidr:
        return False
    try:
        ipaddress.IPv4Network(cidr)
    except ValueError:
        return False
    return True


def ingress_annotations(i: IngressProps, *, drain_seconds: int) -> dict[str, str]:
    """ALB annotations: internal scheme, ip targets, the listener `i` allows and who may reach it."""
    annotations = {
        "alb.ingress.kubernetes.io/scheme": "internal",
        "alb.ingress.kubernetes.io/target-type": "ip",
        # /health turns 503 while vLLM drains, so the ALB stops routing to a terminating pod too.
        "alb.ingress.kubernetes.io/healthcheck-path": "/health",
        "alb.ingress.kubernetes.io/load-balancer-attributes": f"idle_timeout.timeout_seconds={i.idle_timeout_seconds}",
        # Keep connections to a deregistered pod for as long as it drains, not the ALB's 300 s default.
        "alb.ingress.kubernetes.io/target-group-attributes": f"deregistration_delay.timeout_seconds={drain_seconds}",
    }
    if i.certificate_arn is not None:
        annotations.update(
            {
                # HTTPS only: no port 80 listener, not even one that redirects (ssl-redirect).
                "alb.ingress.kubernetes.io/listen-ports": '[{"HTTPS": 443}]',
                "alb.ingress.kubernetes.io/certificate-arn": i.certificate_arn,
                "alb.ingress.kubernetes.io/ssl-policy": i.ssl_policy,
            }
        )
    else:
        # allow_http (validated): plain HTTP by the environment's explicit choice.
        annotations["alb.ingress.kubernetes.io/listen-ports"] = '[{"HTTP": 80}]'
    # The ALB's security group admits only these (comma-separated, as the controller parses it).
    annotations["alb.ingress.kubernetes.io/inbound-cidrs"] = ",".join(i.inbound_cidrs)
    if i.group_name is not None:
        annotations["alb.ingress.kubernetes.io/group.name"] = i.group_name
    return annotations


def ingress_rule(i: IngressProps, service: str, port_name: str) -> dict[str, Any]:
    """The OpenAI API (`/v1/...`) to the Service's named port, for `i.host` or any Host header.

    Only `/v1`: vLLM checks the API key on `/v1` but not on its other routes (`/invocations` runs the same
    completions, `/tokenize`, `/metrics`), so those stay inside the cluster, behind the NetworkPolicies.
    """
    rule: dict[str, Any] = {
        "http": {
            "paths": [
                {
                    "path": OPENAI_PATH,
                    "pathType": "Prefix",
                    "backend": {"service": {"name": service, "port": {"name": port_name}}},
                }
            ]
        }
    }
    if i.host is not None:
        rule["host"] = i.host
    return rule
