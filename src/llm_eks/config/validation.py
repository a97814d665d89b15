"""Checks across the fields of one environment, after the schema has built it: each raises a one-line
`environments.<env>.<field>: <value> is not allowed; <what is allowed>`. Single-value rules live in `inputs`."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from llm_eks import aws_ids
from llm_eks.aws_regions import REGIONS
from llm_eks.catalog.ec2_instance_types import check_instance_type
from llm_eks.config import inputs
from llm_eks.config.alerting import validate_alerting
from llm_eks.config.canary_checks import validate_canaries
from llm_eks.config.capacity import validate_capacity
from llm_eks.config.compute_checks import validate_compute
from llm_eks.config.environment import (
    ACCEPTED_RISKS,
    ALPHA_FEATURES,
    EndpointConfig,
    EnvironmentConfig,
    SystemNodesConfig,
    VpcConfig,
)
from llm_eks.config.network_checks import validate_load_balancers
from llm_eks.config.workload_checks import validate_workload
from llm_eks.error_codes import E110, E112, E113, E114, E115, E117, E120, E140
from llm_eks.errors import ConfigError, did_you_mean, fail
from llm_eks.versions import KUBERNETES_VERSION


def validate_policy_cidr(body: Mapping[str, Any], c: EnvironmentConfig, path: str) -> None:
    """The NetworkPolicies admit the EKS control plane (webhooks, the external metrics API) and the internal ALB from
    the VPC's CIDR, so an existing VPC must state it: the new-VPC default would silently lock the API server out."""
    if not c.vpc.imported:
        return
    vpc = body.get("vpc")
    if not isinstance(vpc, Mapping) or "cidr" not in vpc:
        raise fail(
            E112,
            f"{path}.vpc.cidr",
            None,
            "an existing VPC needs its CIDR given (NetworkPolicies admit the EKS control plane and the ALB from it)",
        )
    try:
        ipaddress.IPv4Network(c.vpc.cidr)
    except ValueError:
        raise fail(
            E112, f"{path}.vpc.cidr", c.vpc.cidr, "must be the existing VPC's IPv4 CIDR such as 10.0.0.0/16"
        ) from None


def validate_environment(c: EnvironmentConfig, path: str) -> None:
    """Every cross-field check of environment `c` (at `path`); the first failure raises."""
    if c.account is not None and not aws_ids.ACCOUNT.match(c.account):
        raise fail(E110, f"{path}.account", c.account, "must be a 12-digit AWS account id")
    if c.region is not None and c.region not in REGIONS:
        raise fail(
            E110,
            f"{path}.region",
            c.region,
            f"{did_you_mean(c.region, REGIONS)}must be a commercial, GovCloud or China AWS region such as us-east-1 "
            "(listed in llm_eks/aws_regions.py)",
        )
    if (c.account is None) != (c.region is None):
        raise ConfigError(
            E110, f"{path}: account and region must be given together (or neither, for an env-agnostic stack)"
        )
    if c.kubernetes_version != KUBERNETES_VERSION:
        raise fail(
            E110,
            f"{path}.kubernetes_version",
            c.kubernetes_version,
            f"must be {KUBERNETES_VERSION}, the version llm-eks pins its kubectl layer and node AMIs to "
            "(see llm_eks/versions.py)",
        )
    _validate_vpc(c, f"{path}.vpc")
    _validate_accepted_risks(c, f"{path}.accepted_risks")
    _validate_alpha_features(c, f"{path}.alpha_features")
    validate_compute(c, path)
    _validate_endpoint(c.endpoint, f"{path}.endpoint")
    _validate_system_nodes(c.system_nodes, f"{path}.system_nodes")
    listed = [("admin_role_arns", i, arn) for i, arn in enumerate(c.admin_role_arns)]
    listed += [("rollout_role_arns", i, arn) for i, arn in enumerate(c.rollout_role_arns)]
    for n, (name, i, arn) in enumerate(listed):
        if not aws_ids.ROLE_ARN.match(arn):
            raise fail(E110, f"{path}.{name}[{i}]", arn, "must be an IAM role ARN (arn:aws:iam::<account>:role/...)")
        # IAM role names are unique ignoring case, and EKS allows one access entry per principal.
        other = next((field for field, _, earlier in listed[:n] if earlier.lower() == arn.lower()), None)
        if other is not None:
            where = "" if other == name else f" (it is in {other} too)"
            raise fail(
                E110,
                f"{path}.{name}[{i}]",
                arn,
                f"a role may be listed once{where} (EKS allows one access entry per role)",
            )
    inputs.validate_tags(c.tags, f"{path}.tags")
    validate_canaries(c, path)
    for served in c.served:
        # A vLLM workload behind the gateway is woken by the requests its endpoint picker holds.
        held = c.gateway is not None and served.config.engine == "vllm" and served.canary_of is None
        validate_workload(served.config, served.path, held)
    _validate_workloads(c, path)
    validate_load_balancers(c, path)
    _validate_weights_bucket(c, path)
    validate_capacity(c, path)
    validate_alerting(c.alerting, f"{path}.alerting")


# A workload's short name: it names the workload's namespace (inference-<key>), objects and charts.
_WORKLOAD_KEY = re.compile(r"^[a-z][a-z0-9-]{0,19}$")


def _validate_workloads(c: EnvironmentConfig, path: str) -> None:
    """`workloads` names, and what several workloads must agree on (their GPU nodes share one node class)."""
    for key, w in c.workloads.items():
        if not _WORKLOAD_KEY.match(key) or key.endswith("-"):
            raise fail(
                E120,
                f"{path}.workloads",
                key,
                "workload names are 1-20 characters: lowercase letters, digits and '-', starting with a letter and "
                "not ending with '-' (they name the workload's namespace inference-<name>)",
            )
        if w.alb is not None:
            raise ConfigError(
                E140,
                f"{path}.workloads.{key}.alb: only allowed in the one-model `workload`; the workloads of "
                "`workloads` are reached through the environment's gateway or in-cluster through each workload's "
                "Service",
            )
    snapshots = {s.config.image_snapshot_id for s in c.served} - {None}
    if len(snapshots) > 1:
        raise fail(
            E120,
            f"{path}.workloads",
            sorted(snapshots),
            "image_snapshot_id must be the same in every workload that gives one (GPU nodes of every workload "
            "restore the one data-volume snapshot of the node class)",
        )


def _validate_vpc(c: EnvironmentConfig, path: str) -> None:
    v = c.vpc
    if v.imported:
        if not aws_ids.VPC_ID.match(v.vpc_id or ""):
            raise fail(E112, f"{path}.vpc_id", v.vpc_id, "must be a VPC id such as vpc-0abc12345def67890")
        if len(v.availability_zones) < 2:
            raise fail(
                E112,
                f"{path}.availability_zones",
                list(v.availability_zones),
                "an existing VPC needs its availability zones listed (at least 2), so synth needs no lookup",
            )
        if len(v.private_subnet_ids) != len(v.availability_zones):
            raise fail(
                E112,
                f"{path}.private_subnet_ids",
                list(v.private_subnet_ids),
                f"must list one private subnet per availability zone ({len(v.availability_zones)})",
            )
        for i, subnet in enumerate((*v.private_subnet_ids, *v.public_subnet_ids)):
            if not aws_ids.SUBNET_ID.match(subnet):
                raise fail(
                    E112, f"{path}.subnet_ids[{i}]", subnet, "must be a subnet id such as subnet-0abc12345def67890"
                )
        if v.s3_endpoint_id is not None and not aws_ids.VPC_ENDPOINT_ID.match(v.s3_endpoint_id):
            raise fail(
                E112,
                f"{path}.s3_endpoint_id",
                v.s3_endpoint_id,
                "must be a VPC endpoint id such as vpce-0abc12345def67890",
            )
        if v.s3_endpoint_id is None and c.weights_bucket is not None and c.weights_bucket.name is None:
            raise ConfigError(
                E112,
                f"{path}.s3_endpoint_id: required with an existing vpc_id and a weights bucket the stack creates; name "
                "the VPC's S3 endpoint (vpce-...), since the bucket refuses object requests from anywhere else",
            )
        return
    if v.s3_endpoint_id is not None:
        raise ConfigError(
            E112, f"{path}.s3_endpoint_id: only allowed with vpc_id (a new VPC gets an S3 endpoint of its own)"
        )
    if v.private_subnet_ids or v.public_subnet_ids:
        raise ConfigError(E112, f"{path}: subnet ids are only allowed with vpc_id (an existing VPC)")
    try:
        network = ipaddress.IPv4Network(v.cidr)
    except ValueError:
        raise fail(E112, f"{path}.cidr", v.cidr, "must be an IPv4 CIDR such as 10.0.0.0/16") from None
    if not any(network.subnet_of(private) for private in inputs.PRIVATE_RANGES):
        raise fail(
            E112,
            f"{path}.cidr",
            v.cidr,
            "must be inside a private range: 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16 (RFC 1918), or "
            "100.64.0.0/10 (RFC 6598); a public range would shadow those addresses on the internet",
        )
    if not 16 <= network.prefixlen <= 20:
        raise fail(E112, f"{path}.cidr", v.cidr, "prefix length must be /16 to /20 (GPU nodes and pods need addresses)")
    zones = v.availability_zones
    if zones:
        if c.region is None:
            raise ConfigError(
                E112, f"{path}.availability_zones: needs account and region (zone names belong to a region)"
            )
        if len(zones) < 2 or any(not z.startswith(c.region) for z in zones):
            raise fail(E112, f"{path}.availability_zones", list(zones), f"must be 2 or more zones of {c.region}")
        if v.az_count not in (VpcConfig.az_count, len(zones)):
            raise fail(
                E112, f"{path}.az_count", v.az_count, f"must equal the number of availability_zones ({len(zones)})"
            )
    elif c.account is not None and not v.imported:
        raise ConfigError(
            E112,
            f"{path}.availability_zones: required with account and region (CDK would look the zones up in "
            f"{c.account} at synth, and synth runs offline); list 2 or more zones of {c.region}, as "
            f"`aws ec2 describe-availability-zones --region {c.region}` names them",
        )
    elif v.az_count != 2:
        raise fail(
            E112,
            f"{path}.az_count",
            v.az_count,
            "must be 2 unless availability_zones are listed (with account and region): "
            "an env-agnostic stack resolves only 2 zones without a context lookup",
        )


def _validate_endpoint(e: EndpointConfig, path: str) -> None:
    if e.access not in ("private", "public"):
        raise fail(
            E113, f"{path}.access", e.access, "must be 'private' or 'public' (public is limited to public_cidrs)"
        )
    if e.access == "private" and e.public_cidrs:
        raise ConfigError(E113, f"{path}.public_cidrs: only allowed with access 'public'")
    if e.access == "public" and not e.public_cidrs:
        raise fail(E113, f"{path}.public_cidrs", [], "access 'public' needs at least one CIDR to allow")
    for i, cidr in enumerate(e.public_cidrs):
        try:
            network = ipaddress.IPv4Network(cidr)
        except ValueError:
            raise fail(
                E113, f"{path}.public_cidrs[{i}]", cidr, "must be an IPv4 CIDR such as 198.51.100.0/24"
            ) from None
        if network.prefixlen == 0:
            raise fail(E113, f"{path}.public_cidrs[{i}]", cidr, "must not be the whole internet; list your own ranges")
    inputs.validate_public_cidrs(e.public_cidrs, f"{path}.public_cidrs")


def _validate_system_nodes(s: SystemNodesConfig, path: str) -> None:
    check_instance_type(f"{path}.instance_type", s.instance_type)
    if s.instance_type.split(".")[0][0] in ("g", "p") or s.instance_type.startswith(("inf", "trn")):
        raise fail(
            E114,
            f"{path}.instance_type",
            s.instance_type,
            "must be a CPU instance type (GPU capacity is Karpenter's)",
        )
    if s.min_size < 2:
        raise fail(
            E114,
            f"{path}.min_size",
            s.min_size,
            "must be at least 2 (Karpenter's 2 replicas need 2 nodes in 2 AZs)",
        )
    if not s.min_size <= s.desired_size <= s.max_size:
        raise fail(
            E114,
            f"{path}.desired_size",
            s.desired_size,
            f"must be between min_size ({s.min_size}) and max_size ({s.max_size})",
        )
    if not 20 <= s.disk_gib <= 1000:
        raise fail(E114, f"{path}.disk_gib", s.disk_gib, "must be 20 to 1000")


def _validate_weights_bucket(c: EnvironmentConfig, env_path: str) -> None:
    """An existing bucket's name and key; workloads with weights "staged" need the bucket."""
    b = c.weights_bucket
    if b is not None:
        path = f"{env_path}.weights_bucket"
        if b.name is not None:
            problem = aws_ids.s3_uri_problem(f"s3://{b.name}/")
            if problem is not None:
                raise fail(
                    E115, f"{path}.name", b.name, "must be an S3 bucket name (3-63 lowercase letters, digits, '.', '-')"
                )
        if b.kms_key_arn is not None:
            if b.name is None:
                raise ConfigError(
                    E115, f"{path}.kms_key_arn: only allowed with name (the bucket llm-eks creates has its own key)"
                )
            if not aws_ids.KMS_KEY_ARN.match(b.kms_key_arn):
                raise fail(
                    E115, f"{path}.kms_key_arn", b.kms_key_arn, "must be a KMS key ARN (arn:aws:kms:<region>:...)"
                )
    for s in c.served:
        if s.config.weights != "staged":
            continue
        if b is None:
            raise fail(
                E115,
                f"{s.path}.weights",
                "staged",
                f"needs {env_path}.weights_bucket ({{}} to let the stack create one, or the name of yours)",
            )


def _validate_accepted_risks(c: EnvironmentConfig, path: str) -> None:
    if c.accepted_risks and not c.production:
        raise ConfigError(E117, f"{path}: only allowed with production true (nothing else refuses these risks)")
    for risk, reason in c.accepted_risks.items():
        if risk not in ACCEPTED_RISKS:
            raise fail(
                E117, path, risk, f"{did_you_mean(risk, ACCEPTED_RISKS)}must be a risk id: {', '.join(ACCEPTED_RISKS)}"
            )
        inputs.require_reason(f"{path}.{risk}", reason)


def _validate_alpha_features(c: EnvironmentConfig, path: str) -> None:
    for feature, reason in c.alpha_features.items():
        if feature not in ALPHA_FEATURES:
            raise fail(
                E117,
                path,
                feature,
                f"{did_you_mean(feature, ALPHA_FEATURES)}must be an Alpha feature id: {', '.join(ALPHA_FEATURES)}",
            )
        inputs.require_reason(f"{path}.{feature}", reason)
