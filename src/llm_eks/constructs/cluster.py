"""`InferenceCluster`: the VPC, the EKS control plane, the system node group and the managed add-ons
(cluster_addons.py), or on EKS Auto Mode (`auto_mode`) the cluster with Auto Mode's compute, storage and load
balancing and its built-in system pool (cluster_auto_mode.py); its props and their checks are in cluster_props.py.
Either way a `ComputeModeGuard` refuses a deploy that would switch a deployed cluster's mode.

GPU capacity is not here: Karpenter (self-managed, or Auto Mode's) launches it. This construct only provides what every
controller needs: a private network tagged for discovery, a cluster with every log type and envelope encryption, and a
small managed node group that the controllers are pinned to (Karpenter must never run on nodes it manages).

No pod on the system nodes can act as the node: their launch template keeps pods off IMDS (IMDSv2, hop limit 1),
their role has no CNI permissions, and aws-node gets those through the vpc-cni add-on's Pod Identity association.
"""

from __future__ import annotations

import importlib
import ipaddress
import json
from collections.abc import Sequence
from typing import Any, TypeVar

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct, IConstruct

from llm_eks.constructs import cluster_addons, cluster_auto_mode
from llm_eks.constructs.addons import Placement, harden_roles
from llm_eks.constructs.auto_mode import SYSTEM_POOL_PLACEMENT
from llm_eks.constructs.cluster_addons import (
    EBS_CSI_POLICY,
    NODE_MONITORING_ADDON,
    VPC_CNI_POLICY,
)
from llm_eks.constructs.cluster_props import InferenceClusterProps as InferenceClusterProps  # re-exported
from llm_eks.constructs.composition import ClusterComposition
from llm_eks.constructs.compute_guard import ComputeModeGuard, ComputeModeGuardProps
from llm_eks.constructs.log_encryption import encrypted_log_group
from llm_eks.constructs.nag import acknowledge, managed_policy, skip_custom_resource_lambda_checks
from llm_eks.error_codes import E303
from llm_eks.errors import ConfigError, named_errors
from llm_eks.manifests.gateway.routes import ROLLOUT_GROUP
from llm_eks.manifests.labels import SYSTEM_NODE_LABEL
from llm_eks.manifests.node_pools import DISCOVERY_TAG
from llm_eks.manifests.node_status_guard import node_status_guard
from llm_eks.manifests.verifier import GROUP as VERIFY_GROUP
from llm_eks.versions import KUBERNETES_MINOR, KUBERNETES_VERSION

# The AWS Load Balancer Controller puts internal load balancers in the subnets tagged with this key.
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"

# Root device of the AL2023 EKS AMI (awslabs/amazon-eks-ami templates/al2023/template.json: /dev/xvda).
AL2023_ROOT_DEVICE = "/dev/xvda"
# What system nodes need to join and pull images. No AmazonEKS_CNI_Policy: aws-node gets it through Pod Identity.
SYSTEM_NODE_MANAGED_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")


def kubectl_layer(scope: Construct, id: str) -> lambda_.ILayerVersion:
    """The kubectl/helm Lambda layer matching KUBERNETES_MINOR (the package is pinned in pyproject.toml)."""
    module = importlib.import_module(f"aws_cdk.lambda_layer_kubectl_v{KUBERNETES_MINOR}")
    layer: lambda_.ILayerVersion = getattr(module, f"KubectlV{KUBERNETES_MINOR}Layer")(scope, id)
    return layer


_T = TypeVar("_T")


def _created(value: _T | None, what: str) -> _T:
    """`value`, which aws_eks_v2 types as optional but always creates for a cluster built as this one is (with
    kubectl_provider_options); a TypeError naming it if a new aws_eks_v2 release stops doing so."""
    if value is None:
        raise TypeError(f"aws_eks_v2 did not create the cluster's {what}")
    return value


def _logical_id(stack: cdk.Stack, construct: IConstruct | None) -> str:
    """The logical id in `stack` of a CloudFormation element that aws_eks_v2 creates (found by path: an IConstruct)."""
    if not isinstance(construct, cdk.CfnElement):
        raise TypeError(f"expected a CloudFormation element, got {construct!r}")
    return stack.get_logical_id(construct)


class InferenceCluster(ClusterComposition, Construct):
    """VPC + EKS (aws_eks_v2) + access entries, with a system node group and managed add-ons (self-managed Karpenter)
    or EKS Auto Mode's compute, storage and load balancing (`auto_mode`).

    Karpenter, the add-ons and your charts are added with the `add_*` methods (see `composition`), which order
    each after what it needs.
    """

    @named_errors
    def __init__(self, scope: Construct, id: str, props: InferenceClusterProps) -> None:
        props.validate()
        super().__init__(scope, id)
        self.props = props
        self.cluster_name = props.cluster_name
        # Internal load balancers' own subnets (see _load_balancer_subnets); none in an existing VPC.
        self.load_balancer_subnets: list[ec2.Subnet] = []
        # The S3 gateway endpoint of the VPC this construct creates (s3_gateway_endpoint); None in an existing VPC.
        self.s3_endpoint: ec2.GatewayVpcEndpoint | None = None
        self.vpc = props.vpc or self._new_vpc(props)
        self._tag_subnets(props)

        # Envelope encryption of Kubernetes Secrets; rotation yearly, as cdk-nag and CIS expect.
        self.secrets_key = kms.Key(
            self,
            "SecretsKey",
            description=f"EKS secrets envelope encryption for {props.cluster_name}",
            enable_key_rotation=True,
            # The key only protects this cluster's etcd; deleting the stack schedules it for deletion too.
            removal_policy=cdk.RemovalPolicy.DESTROY,
            pending_window=cdk.Duration.days(30),
        )
        endpoint = (
            eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*props.public_endpoint_cidrs)
            if props.public_endpoint_cidrs
            else eks.EndpointAccess.PRIVATE
        )
        self.auto_mode = props.auto_mode
        capacity: dict[str, Any]
        if props.auto_mode:
            # Only the built-in system pool, on a role of ours with the minimal node policies (cluster_auto_mode.py).
            self.system_node_role, compute = cluster_auto_mode.auto_mode_capacity(self, props.cluster_name)
            capacity = {"default_capacity_type": eks.DefaultCapacityType.AUTOMODE, "compute": compute}
        else:
            # Node-group mode: EKS Auto Mode would compete with Karpenter for the same pods.
            capacity = {"default_capacity_type": eks.DefaultCapacityType.NODEGROUP, "default_capacity": 0}
        self.cluster = eks.Cluster(
            self,
            "Cluster",
            cluster_name=props.cluster_name,
            version=eks.KubernetesVersion.of(KUBERNETES_VERSION),
            vpc=self.vpc,
            vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
            endpoint_access=endpoint,
            **capacity,
            # Managed add-ons below (or on Auto Mode, its own) replace the copies EKS would otherwise install unmanaged.
            bootstrap_self_managed_addons=False,
            # Cluster admins come from config as access entries; the deploying role gets no standing access.
            bootstrap_cluster_creator_admin_permissions=False,
            cluster_logging=[
                eks.ClusterLoggingTypes.API,
                eks.ClusterLoggingTypes.AUDIT,
                eks.ClusterLoggingTypes.AUTHENTICATOR,
                eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
                eks.ClusterLoggingTypes.SCHEDULER,
            ],
            secrets_encryption_key=self.secrets_key,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=kubectl_layer(self, "KubectlLayer"),
                # Helm installs of the operators need more than the 1 GiB default to unpack their charts.
                memory=cdk.Size.gibibytes(2),
            ),
            tags=dict(props.tags),
        )
        self.compute_guard: ComputeModeGuard | None = None
        if props.compute_guard:
            self.compute_guard = ComputeModeGuard(
                self, "ComputeModeGuard", ComputeModeGuardProps(cluster_name=props.cluster_name, compute=props.compute)
            )
            # Nothing of the cluster changes before the guard has passed.
            cluster_auto_mode.cfn_cluster(self.cluster).node.add_dependency(self.compute_guard.resource)
        self.vpc_cni: eks_l1.CfnAddon | None = None
        self.system_nodegroup: eks.Nodegroup | None = None
        self.addons: dict[str, IConstruct] = {}
        self.node_status_guard: eks.KubernetesManifest | None = None
        if props.auto_mode:
            # Auto Mode launches nodes with the NodeClasses' tags; controllers wait for the NetworkPolicy controller.
            self.auto_mode_tagging = cluster_auto_mode.tagging_policy(self, self.cluster)
            self.system_capacity: IConstruct = cluster_auto_mode.network_policy_controller(
                self.cluster, self.auto_mode_tagging
            )
        else:
            self.vpc_cni = vpc_cni = self._vpc_cni_addon()
            self.system_nodegroup = self._system_nodegroup(props, vpc_cni)
            self.system_capacity = self.system_nodegroup
            self.addons = self._managed_addons(vpc_cni)
        for i, arn in enumerate(props.admin_role_arns):
            self.add_cluster_admin(f"Admin{i}", arn)
        for i, arn in enumerate(props.rollout_role_arns):
            self.add_rollout_operator(f"Rollout{i}", arn)
        harden_roles(self, props.permissions_boundary, [(self.system_node_role, props.system_node_role_statements)])
        self._acknowledge_findings()

    # -- helpers --------------------------------------------------------------------------------------------

    def add_cluster_admin(self, id: str, role_arn: str) -> None:
        """Grant a role cluster-admin through an EKS access entry (no aws-auth ConfigMap)."""
        self.cluster.grant_access(
            id,
            role_arn,
            [
                eks.AccessPolicy.from_access_policy_name(
                    "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER
                )
            ],
        )

    def add_rollout_operator(self, id: str, role_arn: str) -> eks_l1.CfnAccessEntry:
        """Map a role to the Kubernetes groups of `llm-eks canary`/`rollback` (each canary route's Role: get and
        patch on that HTTPRoute) and of `llm-eks verify` (its read-only ClusterRole), with no EKS access policy."""
        return eks_l1.CfnAccessEntry(
            self,
            id,
            cluster_name=self.cluster.cluster_name,
            principal_arn=role_arn,
            kubernetes_groups=[VERIFY_GROUP, ROLLOUT_GROUP],
            type="STANDARD",
        )

    @property
    def system_node_selector(self) -> dict[str, str]:
        """nodeSelector that pins a controller to the system node group (on Auto Mode, to the system pool)."""
        return dict(self.system_placement.node_selector)

    @property
    def system_placement(self) -> Placement:
        """Where the controllers run: the system node group, or Auto Mode's built-in system pool and its taint."""
        return SYSTEM_POOL_PLACEMENT if self.auto_mode else Placement()

    def _new_vpc(self, props: InferenceClusterProps) -> ec2.Vpc:
        zones = list(props.availability_zones) or None
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(props.vpc_cidr),
            availability_zones=zones,
            max_azs=None if zones else 2,
            nat_gateways=(len(zones) if zones else 2) if props.nat_gateways_per_az else 1,
            subnet_configuration=[
                # Public subnets hold only NAT gateways and internet-facing load balancers, which take Elastic IPs (or
                # addresses of their own); nothing launched there gets a public IP by default.
                ec2.SubnetConfiguration(
                    name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24, map_public_ip_on_launch=False
                ),
                # /19 per AZ: 8k addresses for nodes and pods (VPC CNI gives every pod a VPC IP).
                ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=19),
            ],
        )
        self._load_balancer_subnets(vpc, props)
        if props.s3_gateway_endpoint:
            # Full endpoint policy: image pulls read ECR's own S3 buckets through it too; buckets restrict themselves.
            self.s3_endpoint = vpc.add_gateway_endpoint(
                "S3Endpoint",
                service=ec2.GatewayVpcEndpointAwsService.S3,
                subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
            )
        vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(
                encrypted_log_group(self, "FlowLogGroup", props.flow_log_retention)
            ),
            traffic_type=ec2.FlowLogTrafficType.REJECT,
        )
        return vpc

    def _load_balancer_subnets(self, vpc: ec2.Vpc, props: InferenceClusterProps) -> None:
        """One private subnet per AZ for internal load balancers only: no node (Karpenter discovers none of them, the
        node group is given the pod subnets) and so no pod ever holds one of their addresses."""
        cidrs = props.load_balancer_subnet_cidrs
        if not cidrs:
            return
        zones = vpc.availability_zones
        if len(cidrs) != len(zones):
            raise ConfigError(
                E303,
                f"load_balancer_subnet_cidrs: {list(cidrs)} is not allowed; list one CIDR per availability zone "
                f"({len(zones)})",
            )
        taken = [(s.node.path, s.ipv4_cidr_block) for s in (*vpc.public_subnets, *vpc.private_subnets)]
        for i, (cidr, zone) in enumerate(zip(cidrs, zones, strict=True)):
            for path, other in taken:
                if ipaddress.IPv4Network(cidr).overlaps(ipaddress.IPv4Network(other)):
                    raise ConfigError(
                        E303,
                        f"load_balancer_subnet_cidrs[{i}]: {cidr!r} is not allowed; it overlaps {other} "
                        f"({path}): pick a range of the VPC no subnet uses",
                    )
            # No route to the internet: an internal ALB only answers clients inside the VPC and its peers.
            subnet = ec2.PrivateSubnet(
                self, f"LoadBalancerSubnet{i + 1}", availability_zone=zone, cidr_block=cidr, vpc_id=vpc.vpc_id
            )
            cdk.Tags.of(subnet).add(INTERNAL_ELB_TAG, "1")
            self.load_balancer_subnets.append(subnet)

    def _tag_subnets(self, props: InferenceClusterProps) -> None:
        """Load balancer role tags and Karpenter discovery on the subnets we own (imported ones are selected by id)."""
        if props.vpc is not None:
            return
        for subnet in self.vpc.private_subnets:
            if props.load_balancer_subnet_cidrs:
                # Internal load balancers go to their own subnets (see _load_balancer_subnets). aws_eks_v2 tags every
                # private subnet for them; a removal outranks that tag (RemoveTag's priority is the higher).
                cdk.Tags.of(subnet).remove(INTERNAL_ELB_TAG)
            else:
                cdk.Tags.of(subnet).add(INTERNAL_ELB_TAG, "1")
            cdk.Tags.of(subnet).add(DISCOVERY_TAG, props.cluster_name)
        for subnet in self.vpc.public_subnets:
            cdk.Tags.of(subnet).add("kubernetes.io/role/elb", "1")

    def _system_nodegroup(self, props: InferenceClusterProps, vpc_cni: eks_l1.CfnAddon) -> eks.Nodegroup:
        self.system_node_role = iam.Role(
            self,
            "SystemNodeRole",
            # ec2.${AWS::URLSuffix}: right in the aws-cn partition too.
            assumed_by=iam.ServicePrincipal(f"ec2.{cdk.Aws.URL_SUFFIX}"),
            description=f"System node group of {props.cluster_name} (no CNI permissions: aws-node uses Pod Identity)",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(n) for n in SYSTEM_NODE_MANAGED_POLICIES],
        )
        self.system_launch_template = ec2.LaunchTemplate(
            self,
            "SystemNodeLaunchTemplate",
            # IMDSv2 only, and hop limit 1: a pod's packets cross one more hop than the host's, so only host-network
            # processes (kubelet, aws-node, kube-proxy) reach IMDS and no pod can take the node role's credentials.
            require_imdsv2=True,
            http_endpoint=True,
            http_put_response_hop_limit=1,
            # With a launch template EKS takes the root volume from here (the node group's disk_size is not allowed).
            block_devices=[
                ec2.BlockDevice(
                    device_name=AL2023_ROOT_DEVICE,
                    volume=ec2.BlockDeviceVolume.ebs(
                        props.system_disk_gib,
                        volume_type=ec2.EbsDeviceVolumeType.GP3,
                        # The account's EBS key (aws/ebs unless the account sets a default CMK).
                        encrypted=True,
                        delete_on_termination=True,
                    ),
                )
            ],
        )
        template_id = self.system_launch_template.launch_template_id
        assert template_id is not None  # always set for a template created in this stack
        nodegroup = self.cluster.add_nodegroup_capacity(
            "SystemNodes",
            # No fixed name: NodeRole, DiskSize and the launch template are create-only, so changing any of them (or
            # the instance type) replaces the group, which CloudFormation refuses for a custom-named resource.
            # Controllers find these nodes by their label, never by the group's name.
            instance_types=[ec2.InstanceType(props.system_instance_type)],
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
            # Controllers must not vanish on a Spot reclaim: on-demand only.
            capacity_type=eks.CapacityType.ON_DEMAND,
            min_size=props.system_min_size,
            desired_size=props.system_desired_size,
            max_size=props.system_max_size,
            launch_template_spec=eks.LaunchTemplateSpec(
                id=template_id,
                version=self.system_launch_template.latest_version_number,
            ),
            # Our own role: the one aws_eks_v2 creates always carries AmazonEKS_CNI_Policy.
            node_role=self.system_node_role,
            labels={SYSTEM_NODE_LABEL[0]: SYSTEM_NODE_LABEL[1]},
            subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            # Replace unhealthy controller nodes automatically instead of paging someone.
            enable_node_auto_repair=True,
            # One node at a time during AMI updates keeps one Karpenter replica running.
            max_unavailable=1,
        )
        # The first aws-node pods must be admitted after the add-on's Pod Identity association exists, or they
        # start without credentials (and the node role no longer has the CNI policy to fall back on).
        nodegroup.node.add_dependency(vpc_cni)
        return nodegroup

    def _vpc_cni_addon(self) -> eks_l1.CfnAddon:
        """vpc-cni with its own Pod Identity role (not the node role) and NetworkPolicy enforcement."""
        self.vpc_cni_role, addon = cluster_addons.vpc_cni_addon(self, self.cluster, self.cluster_name)
        return addon

    def _managed_addons(self, vpc_cni: eks_l1.CfnAddon) -> dict[str, IConstruct]:
        addons: dict[str, IConstruct] = {"vpc-cni": vpc_cni}
        addons.update(cluster_addons.core_addons(self, self.cluster))
        addons[NODE_MONITORING_ADDON] = cluster_addons.node_monitoring_addon(self, self.cluster, self.system_capacity)
        # Its ServiceAccount may patch any node's status (the add-on's ClusterRole): hold it to its own node's.
        self.node_status_guard = self.cluster.add_manifest("NodeStatusGuard", *node_status_guard())
        # Created through the cluster so aws_eks_v2's own Pod Identity service accounts reuse the same add-on.
        addons["eks-pod-identity-agent"] = _created(self.cluster.eks_pod_identity_agent, "Pod Identity agent add-on")
        self.ebs_csi_role, addons["aws-ebs-csi-driver"] = cluster_addons.ebs_csi_addon(
            self, self.cluster, self.cluster_name, self.system_node_selector, self.system_capacity
        )
        # CoreDNS pods need a node to run on before the add-on reports ACTIVE.
        addons["coredns"].node.add_dependency(self.system_capacity)
        return addons

    def _acknowledge_add_on_roles(self) -> None:
        """The managed policies of the system nodes' and the add-ons' roles (self-managed Karpenter mode)."""
        for policy in SYSTEM_NODE_MANAGED_POLICIES:
            acknowledge(
                self.system_node_role,
                managed_policy(policy),
                "AWS maintains the node policies that managed node groups need to join and pull images.",
            )
        acknowledge(
            self.vpc_cni_role,
            managed_policy(VPC_CNI_POLICY),
            "AWS keeps the CNI policy in step with the VPC CNI; only kube-system/aws-node can assume this role.",
        )
        acknowledge(
            self.ebs_csi_role,
            managed_policy(EBS_CSI_POLICY),
            "AWS keeps the EBS CSI policy in step with the driver; it is tag-scoped to CSI-created volumes.",
        )

    def private_subnet_ids(self) -> Sequence[str]:
        return [s.subnet_id for s in self.vpc.private_subnets]

    def _acknowledge_findings(self) -> None:
        acknowledge(
            self.cluster.role,
            managed_policy("AmazonEKSClusterPolicy"),
            "EKS requires this AWS managed policy on the cluster service role.",
        )
        if self.auto_mode:
            cluster_auto_mode.acknowledge_cluster_role(self.cluster)
        else:
            self._acknowledge_add_on_roles()
        provider = _created(self.cluster.kubectl_provider, "kubectl provider")
        for policy in (
            "service-role/AWSLambdaBasicExecutionRole",
            "service-role/AWSLambdaVPCAccessExecutionRole",
            "AmazonEC2ContainerRegistryReadOnly",
        ):
            acknowledge(
                provider, managed_policy(policy), "aws_eks_v2's kubectl provider Lambdas need these to run in the VPC."
            )
        handler = provider.node.find_child("Handler")
        for function in (handler, provider.node.find_child("Provider").node.find_child("framework-onEvent")):
            skip_custom_resource_lambda_checks(function)
        stack = cdk.Stack.of(self)
        ecr_public = json.dumps(
            {
                "Fn::If": [
                    _logical_id(stack, handler.node.find_child("HasEcrPublic")),
                    {
                        "Fn::Join": [
                            "",
                            [
                                "arn:",
                                {"Ref": "AWS::Partition"},
                                ":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly",
                            ],
                        ]
                    },
                    {"Ref": "AWS::NoValue"},
                ]
            },
            separators=(",", ":"),
        )
        acknowledge(
            provider,
            f"IAM4[Policy::{ecr_public}]",
            "aws_eks_v2 adds public ECR read only when a chart is pulled from public.ecr.aws (Karpenter's).",
        )
        handler_id = _logical_id(stack, handler.node.default_child)
        acknowledge(
            provider,
            f"IAM5[Resource::<{handler_id}.Arn>:*]",
            "The provider framework invokes any version of its own kubectl handler, nothing else.",
        )
        acknowledge(
            provider,
            "L1",
            "aws_eks_v2 pins the kubectl handler's runtime to the one its kubectl/helm layer is built for.",
        )
