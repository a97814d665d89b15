"""`InferenceClusterProps`: what a reviewer checks on the cluster (`cluster.py` builds it), each default the
production-right one with its reason, and the checks that refuse a bad value before anything is built."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs

from llm_eks.catalog.ec2_instance_types import check_instance_type
from llm_eks.constructs.addons import check_boundary, check_statements
from llm_eks.error_codes import E303
from llm_eks.errors import ConfigError
from llm_eks.planner.compute_mode import AUTO_MODE, KARPENTER


@dataclass(frozen=True)
class InferenceClusterProps:
    """What a reviewer checks on the cluster; every default is the production-right one."""

    cluster_name: str
    # Existing VPC (imported by the caller); None creates one from vpc_cidr / availability_zones.
    vpc: ec2.IVpc | None = None
    # /16: GPU nodes plus the VPC CNI's one IP per pod need room to grow.
    vpc_cidr: str = "10.0.0.0/16"
    # Explicit zone names (no lookup); empty: the stack's first two zones.
    availability_zones: tuple[str, ...] = ()
    # Empty: private endpoint only, the safe default. Otherwise public too, but only from these CIDRs.
    public_endpoint_cidrs: tuple[str, ...] = ()
    # Subnets of their own for internal load balancers, one CIDR per AZ (new VPC only). Empty: internal load
    # balancers share the private subnets with the pods, so no NetworkPolicy can tell an ALB from a pod by address.
    load_balancer_subnet_cidrs: tuple[str, ...] = ()
    # 4 vCPU / 16 GiB per node fits Karpenter, KEDA, Prometheus, Grafana and the operators.
    system_instance_type: str = "m7i.xlarge"
    # Three: every controller (two Karpenter, two Prometheus and Alertmanager, the query endpoint) still fits when one
    # node or its zone is gone; Karpenter's one-per-host replicas need at least 2.
    system_min_size: int = 3
    system_desired_size: int = 3
    # Room for a node replacement or a heavier monitoring load without touching GPU capacity.
    system_max_size: int = 5
    # Controller images and logs only; model weights never land on system nodes. Encrypted gp3 root volume.
    system_disk_gib: int = 50
    # Roles given cluster-admin through access entries; none by default (no standing human access).
    admin_role_arns: tuple[str, ...] = ()
    # Roles that may move a route's weights and read what verify reads (`add_rollout_operator`); none by default.
    rollout_role_arns: tuple[str, ...] = ()
    # NAT per AZ: one NAT gateway's AZ failing must not cut every GPU node off image pulls and the HF hub.
    nat_gateways_per_az: bool = True
    # An S3 gateway endpoint on the private subnets (new VPC only): weights and image layers reach S3 without NAT
    # charges, and the weights bucket can refuse requests that do not come through it. Free of charge.
    s3_gateway_endpoint: bool = True
    # Flow logs kept 90 days: long enough to investigate, short enough not to grow cost forever.
    flow_log_retention: logs.RetentionDays = logs.RetentionDays.THREE_MONTHS
    # Tags for the cluster resource itself (stack-wide tags come from the stack).
    tags: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Added to the system node role (e.g. reading an image cache of your own).
    system_node_role_statements: tuple[iam.PolicyStatement, ...] = ()
    # Your organisation's permissions boundary on every role this construct creates (cluster, system nodes, VPC CNI,
    # EBS CSI, the kubectl provider's). None: no boundary.
    permissions_boundary: iam.IManagedPolicy | None = None
    # EKS Auto Mode: AWS runs the nodes (its built-in `system` pool for the controllers), Karpenter, the GPU drivers
    # and device plugins, load balancing and block storage; no node group or add-on of ours. False: a system node
    # group and the managed add-ons, for self-managed Karpenter (which owns every node setting and has no fee).
    auto_mode: bool = False
    # Refuse, at deploy and before the cluster changes, a deploy that would switch a deployed cluster between the
    # two (compute_guard.py says why a switch cannot be an update). Needs cluster_name as text, not a token.
    compute_guard: bool = True

    @property
    def compute(self) -> str:
        return AUTO_MODE if self.auto_mode else KARPENTER

    def validate(self) -> None:
        check_statements("system_node_role_statements", self.system_node_role_statements)
        check_boundary("permissions_boundary", self.permissions_boundary)
        check_instance_type("system_instance_type", self.system_instance_type)
        if self.auto_mode:
            defaults = InferenceClusterProps(cluster_name=self.cluster_name)
            for name in ("system_instance_type", "system_min_size", "system_desired_size", "system_max_size",
                         "system_disk_gib", "system_node_role_statements"):  # fmt: skip
                if getattr(self, name) != getattr(defaults, name):
                    raise ConfigError(
                        E303,
                        f"{name}: {getattr(self, name)!r} is not allowed with auto_mode; the controllers run on EKS "
                        "Auto Mode's built-in system node pool, which takes no settings",
                    )
        if self.vpc is not None and self.load_balancer_subnet_cidrs:
            raise ConfigError(
                E303,
                "load_balancer_subnet_cidrs: not allowed with an existing vpc; create the subnets in that VPC and "
                "tag them kubernetes.io/role/internal-elb",
            )
        if self.system_min_size < 2:
            raise ConfigError(
                E303,
                f"system_min_size: {self.system_min_size} is not allowed; must be at least 2 "
                "(Karpenter's 2 replicas need 2 nodes in 2 AZs)",
            )
        if not self.system_min_size <= self.system_desired_size <= self.system_max_size:
            raise ConfigError(
                E303,
                f"system_desired_size: {self.system_desired_size} is not allowed; must be between "
                f"system_min_size ({self.system_min_size}) and system_max_size ({self.system_max_size})",
            )
        if not 20 <= self.system_disk_gib <= 16384:
            raise ConfigError(
                E303,
                f"system_disk_gib: {self.system_disk_gib} is not allowed; must be 20 (the AMI's own size) to 16384",
            )
        if self.availability_zones and len(self.availability_zones) < 2:
            raise ConfigError(
                E303, f"availability_zones: {list(self.availability_zones)} is not allowed; list at least 2 zones"
            )
