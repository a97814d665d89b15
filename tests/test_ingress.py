"""The internal ALB (issue 8): HTTPS with a named certificate or HTTP by explicit choice, and only the listed CIDRs
may reach it. The Ingress annotations are the AWS Load Balancer Controller v3.5 ones."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from llm_eks.config import parse_environment
from llm_eks.errors import ConfigError
from llm_eks.infra.workloads import ingress_props
from llm_eks.manifests.vllm import IngressProps, VllmChart, validate_vllm_props
from tests.conftest import Synthesized
from tests.test_vllm_chart import base_props

CERT = "arn:aws:acm:eu-west-1:111122223333:certificate/12345678-1234-1234-1234-123456789012"
SCHEME = "alb.ingress.kubernetes.io/scheme"
LISTEN = "alb.ingress.kubernetes.io/listen-ports"
CERT_KEY = "alb.ingress.kubernetes.io/certificate-arn"
POLICY = "alb.ingress.kubernetes.io/ssl-policy"
CIDRS = "alb.ingress.kubernetes.io/inbound-cidrs"
REDIRECT = "alb.ingress.kubernetes.io/ssl-redirect"


def annotations(ingress: IngressProps) -> dict[str, str]:
    import cdk8s

    objects = VllmChart(cdk8s.App(), "vllm", base_props(ingress=ingress)).to_json()
    (found,) = [o for o in objects if o["kind"] == "Ingress"]
    return found["metadata"]["annotations"]


def test_https_listener_only_with_a_tls_1_2_plus_policy_and_the_listed_cidrs() -> None:
    found = annotations(IngressProps(certificate_arn=CERT, inbound_cidrs=("10.0.0.0/16", "192.168.4.0/24")))
    assert found[SCHEME] == "internal"
    assert found[LISTEN] == '[{"HTTPS": 443}]'
    assert found[CERT_KEY] == CERT
    assert found[POLICY] == "ELBSecurityPolicy-TLS13-1-2-Res-PQ-2025-09"
    assert found[CIDRS] == "10.0.0.0/16,192.168.4.0/24"
    # No port 80 at all: a redirecting HTTP listener would still take the first request in clear.
    assert REDIRECT not in found


def test_plain_http_only_by_explicit_choice() -> None:
    found = annotations(IngressProps(allow_http=True, inbound_cidrs=("10.0.0.0/16",)))
    assert found[LISTEN] == '[{"HTTP": 80}]'
    assert CERT_KEY not in found and POLICY not in found
    assert found[CIDRS] == "10.0.0.0/16"
    assert found[SCHEME] == "internal"


@pytest.mark.parametrize(
    ("ingress", "message"),
    [
        (
            IngressProps(inbound_cidrs=("10.0.0.0/16",)),
            "ingress.certificate_arn: None is not allowed; HTTPS needs an ACM certificate ARN "
            "(or set allow_http to serve plain HTTP) [LLMEKS-E140]",
        ),
        (
            IngressProps(certificate_arn=CERT, allow_http=True, inbound_cidrs=("10.0.0.0/16",)),
            "ingress.allow_http: True is not allowed with certificate_arn; the ALB serves HTTPS only "
            "(an HTTP listener receives the first request, API key included, in clear) [LLMEKS-E140]",
        ),
        (
            IngressProps(
                certificate_arn="arn:aws:iam::111122223333:server-certificate/x", inbound_cidrs=("10.0.0.0/16",)
            ),
            "ingress.certificate_arn: 'arn:aws:iam::111122223333:server-certificate/x' is not allowed; must be an "
            "ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>) [LLMEKS-E140]",
        ),
        (
            IngressProps(certificate_arn=CERT),
            "ingress.inbound_cidrs: [] is not allowed; list the IPv4 CIDRs that may reach the ALB (e.g. the VPC's)"
            " [LLMEKS-E140]",
        ),
        (
            IngressProps(allow_http=True, inbound_cidrs=("0.0.0.0/0",)),
            "ingress.inbound_cidrs[0]: '0.0.0.0/0' is not allowed; must be an IPv4 network such as 10.0.0.0/16, "
            "not 0.0.0.0/0 [LLMEKS-E140]",
        ),
        (
            IngressProps(allow_http=True, inbound_cidrs=("10.0.0.0/16", "10.0.0.5/16")),
            "ingress.inbound_cidrs[1]: '10.0.0.5/16' is not allowed; must be an IPv4 network such as 10.0.0.0/16, "
            "not 0.0.0.0/0 [LLMEKS-E140]",
        ),
        (
            IngressProps(certificate_arn=CERT, inbound_cidrs=("10.0.0.0/16",), ssl_policy="ELBSecurityPolicy-2016-08"),
            "ingress.ssl_policy: 'ELBSecurityPolicy-2016-08' is not allowed; must be an ALB policy with TLS 1.2 or "
            "1.3 as its lowest version (ELBSecurityPolicy-TLS13-1-2-... or -1-3-..., e.g. "
            "ELBSecurityPolicy-TLS13-1-2-Res-PQ-2025-09) [LLMEKS-E140]",
        ),
        (
            IngressProps(
                certificate_arn=CERT, inbound_cidrs=("10.0.0.0/16",), ssl_policy="ELBSecurityPolicy-TLS13-1-0-2021-06"
            ),
            "ingress.ssl_policy: 'ELBSecurityPolicy-TLS13-1-0-2021-06' is not allowed; must be an ALB policy with "
            "TLS 1.2 or 1.3 as its lowest version (ELBSecurityPolicy-TLS13-1-2-... or -1-3-..., e.g. "
            "ELBSecurityPolicy-TLS13-1-2-Res-PQ-2025-09) [LLMEKS-E140]",
        ),
    ],
)
def test_bad_ingress_props_get_one_line_errors(ingress: IngressProps, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate_vllm_props(dataclasses.replace(base_props(), ingress=ingress))
    assert str(err.value) == message


# -- config: workload.alb -----------------------------------------------------------------------------------------

IMPORTED_VPC = {
    "vpc_id": "vpc-0abc12345def67890",
    "availability_zones": ["eu-west-1a", "eu-west-1b"],
    "private_subnet_ids": ["subnet-0abc12345def67890", "subnet-0abc12345def67891"],
    "private_subnet_cidrs": ["172.16.0.0/20", "172.16.16.0/20"],
    "cidr": "172.16.0.0/16",
    "load_balancer_cidrs": ["172.16.250.0/26", "172.16.250.64/26"],
}
CLIENTS = ["192.168.0.0/16"]
IMPORTED = {"account": "111122223333", "region": "eu-west-1"}


def workload(**alb: Any) -> dict[str, Any]:
    return {"workload": {"alb": {"certificate_arn": CERT, "inbound_cidrs": CLIENTS, **alb}}}


def test_the_alb_reaches_the_ingress_https_only_from_the_listed_clients() -> None:
    config = parse_environment("web", workload(inbound_cidrs=["192.168.0.0/16", "172.31.0.0/16"]))
    assert ingress_props(config) == IngressProps(
        certificate_arn=CERT, inbound_cidrs=("192.168.0.0/16", "172.31.0.0/16")
    )


def test_load_balancer_subnets_are_the_top_of_a_new_vpc_or_listed() -> None:
    assert parse_environment("web", workload()).vpc.load_balancer_subnet_cidrs() == (
        "10.0.255.128/26",
        "10.0.255.192/26",
    )
    config = parse_environment("web", {**IMPORTED, "vpc": IMPORTED_VPC, **workload()})
    assert config.vpc.load_balancer_subnet_cidrs() == ("172.16.250.0/26", "172.16.250.64/26")


@pytest.mark.parametrize(
    ("vpc", "message"),
    [
        (
            {k: v for k, v in IMPORTED_VPC.items() if k != "load_balancer_cidrs"},
            "environments.web.vpc.load_balancer_cidrs: [] is not allowed; an existing VPC must list the CIDRs of its "
            "internal ALB subnets (tagged kubernetes.io/role/internal-elb, holding no pods): the serving port admits "
            "the ALB by them [LLMEKS-E112]",
        ),
        (
            {**IMPORTED_VPC, "load_balancer_cidrs": ["172.16.250.0/26"]},
            "environments.web.vpc.load_balancer_cidrs: ['172.16.250.0/26'] is not allowed; an ALB needs subnets in "
            "at least 2 availability zones [LLMEKS-E112]",
        ),
        (
            {**IMPORTED_VPC, "load_balancer_cidrs": ["172.16.250.0/26", "10.9.0.0/26"]},
            "environments.web.vpc.load_balancer_cidrs[1]: '10.9.0.0/26' is not allowed; must be a /16 to /27 inside "
            "the VPC's 172.16.0.0/16 (an ALB needs a /27) [LLMEKS-E112]",
        ),
        (
            {**IMPORTED_VPC, "load_balancer_cidrs": ["172.16.250.0/26", "172.16.250.64/28"]},
            "environments.web.vpc.load_balancer_cidrs[1]: '172.16.250.64/28' is not allowed; must be a /16 to /27 "
            "inside the VPC's 172.16.0.0/16 (an ALB needs a /27) [LLMEKS-E112]",
        ),
        (
            {k: v for k, v in IMPORTED_VPC.items() if k != "private_subnet_cidrs"},
            "environments.web.vpc.private_subnet_cidrs: [] is not allowed; an existing VPC behind a load balancer "
            "must list the CIDRs of its 2 private subnets, where pods hold addresses (the load balancer's "
            "inbound_cidrs may not overlap them) [LLMEKS-E112]",
        ),
    ],
    ids=["imported-missing", "one-zone", "outside-vpc", "too-small", "pod-subnets-missing"],
)
def test_load_balancer_subnet_errors(vpc: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_environment("web", {**IMPORTED, "vpc": vpc, **workload()})
    assert str(info.value) == message


def test_load_balancer_cidrs_need_an_alb_or_a_gateway() -> None:
    with pytest.raises(ConfigError) as info:
        parse_environment("web", {"vpc": {"load_balancer_cidrs": ["10.0.255.0/26", "10.0.255.64/26"]}})
    assert (
        str(info.value)
        == "environments.web.vpc.load_balancer_cidrs: only allowed with workload.alb or a gateway [LLMEKS-E112]"
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"workload": {"alb": {"inbound_cidrs": CLIENTS}}},
            "environments.web.workload.alb.certificate_arn: missing; this field is required [LLMEKS-E104]",
        ),
        (
            {"workload": {"alb": {"certificate_arn": CERT}}},
            "environments.web.workload.alb.inbound_cidrs: missing; this field is required [LLMEKS-E104]",
        ),
        (
            workload(certificate_arn="arn:aws:acm:eu-west-1:111122223333:certificate/abc"),
            "environments.web.workload.alb.certificate_arn: 'arn:aws:acm:eu-west-1:111122223333:certificate/abc' is "
            "not allowed; must be an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>)"
            " [LLMEKS-E131]",
        ),
        (
            {
                "account": "111122223333",
                "region": "us-east-1",
                "vpc": {"availability_zones": ["us-east-1a", "us-east-1b"]},
                **workload(),
            },
            f"environments.web.workload.alb.certificate_arn: '{CERT}' is not allowed; must be a certificate in "
            "us-east-1, the ALB's [LLMEKS-E131]",
        ),
        (
            workload(inbound_cidrs=[]),
            "environments.web.workload.alb.inbound_cidrs: [] is not allowed; name the client ranges the ALB admits "
            "(with the VPC CNI every pod holds a VPC address, so the VPC's CIDR would admit every pod); in-cluster "
            "clients call the Service instead [LLMEKS-E131]",
        ),
        (
            workload(inbound_cidrs=["192.168.0.0/16", "0.0.0.0/0"]),
            "environments.web.workload.alb.inbound_cidrs[1]: '0.0.0.0/0' is not allowed; must not be the whole "
            "internet; list your own ranges [LLMEKS-E131]",
        ),
        (
            workload(inbound_cidrs=["10.0.0.1"]),
            "environments.web.workload.alb.inbound_cidrs[0]: '10.0.0.1' is not allowed; must be an IPv4 network such "
            "as 10.0.0.0/16 [LLMEKS-E131]",
        ),
        (
            workload(inbound_cidrs=["10.0.8.0/24"]),
            "environments.web.workload.alb.inbound_cidrs[0]: '10.0.8.0/24' is not allowed; overlaps the "
            "environment's VPC 10.0.0.0/16, where every pod holds an address: list client ranges outside it "
            "(in-cluster clients call the Service) [LLMEKS-E131]",
        ),
        (
            {**IMPORTED, "vpc": IMPORTED_VPC, **workload(inbound_cidrs=["172.16.8.0/24"])},
            "environments.web.workload.alb.inbound_cidrs[0]: '172.16.8.0/24' is not allowed; overlaps the VPC's "
            "private subnet 172.16.0.0/20, where pods hold addresses: list only client subnets [LLMEKS-E131]",
        ),
        (
            workload(allow_http=True),
            "environments.web.workload.alb: unknown key 'allow_http'; allowed: certificate_arn, inbound_cidrs"
            " [LLMEKS-E103]",
        ),
        (
            # An existing cdk.json with the old keys: one line naming what replaces them.
            {"workload": {"internal_alb": True}},
            "environments.web.workload.internal_alb: no longer exists; the internal ALB is workload.alb: "
            "{certificate_arn, inbound_cidrs} (HTTPS only, from client ranges outside the pods' subnets) [LLMEKS-E106]",
        ),
        (
            {"workload": {"load_balancer": {"allow_http": True}}},
            "environments.web.workload.load_balancer: no longer exists; the internal ALB is workload.alb: "
            "{certificate_arn, inbound_cidrs} (HTTPS only, from client ranges outside the pods' subnets) [LLMEKS-E106]",
        ),
    ],
)
def test_alb_config_errors(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_environment("web", body)
    assert str(err.value) == message


# -- the shipped app ----------------------------------------------------------------------------------------------


def test_shipped_prod_has_no_front_door_until_one_is_configured(synthesized: Synthesized) -> None:
    """Production's front door is closed: no ALB (workload.alb needs a certificate and client ranges of your own),
    no gateway; in-cluster clients call the workload's Service."""
    kinds = {o["kind"] for o in synthesized.objects("prod")}
    assert "Ingress" not in kinds and "Gateway" not in kinds
