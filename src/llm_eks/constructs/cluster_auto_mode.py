"""What `InferenceCluster` builds on EKS Auto Mode instead of a system node group and managed add-ons.

aws-cdk-lib 2.275.0's aws_eks_v2 (aws-eks-v2/lib/cluster.js in its jsii assembly, read 2026-12-04): with
`default_capacity_type=AUTOMODE` it writes `ComputeConfig {Enabled: true, NodePools, NodeRoleArn}`, `StorageConfig.
BlockStorage.Enabled` and `KubernetesNetworkConfig.ElasticLoadBalancing.Enabled`, all three true together as EKS
requires, gives the cluster role AmazonEKSComputePolicy, AmazonEKSBlockStoragePolicy, AmazonEKSLoadBalancingPolicy
and AmazonEKSNetworkingPolicy and adds `sts:TagSession` to its trust policy; `compute.node_pools` takes only
`system` and `general-purpose`; without `compute.node_role` it generates a role with AmazonEKSWorkerNodePolicy and
AmazonEC2ContainerRegistryReadOnly (broader than AWS's minimum), so llm-eks passes its own.

Only the built-in `system` pool is enabled: the controllers run there (constructs/auto_mode.py, SYSTEM_POOL_PLACEMENT),
and GPU, Neuron and CPU capacity comes from llm-eks's own NodeClasses and NodePools. Auto Mode itself runs what the
Karpenter mode installs as add-ons (EKS User Guide, automode.adoc: "compute autoscaling, pod and service networking,
application load balancing, cluster DNS, block storage, and GPU support" as core components; "You do not have to
install the EKS Pod Identity Agent"; node repair and the node monitoring agent built in), so none of vpc-cni, CoreDNS,
kube-proxy, the Pod Identity agent, the EBS CSI driver or the node monitoring agent is installed.

Custom tags: "By default, the managed policies related to EKS Auto Mode do not permit applying user defined tags to
Auto Mode provisioned AWS resources" (EKS User Guide, auto-cluster-iam-role, "Custom AWS tags for EKS Auto
resources"). llm-eks's NodeClasses tag their instances (the node class, and the environment's tags), so the cluster
role gets AWS's documented statement for launching them: CreateFleet, RunInstances and CreateLaunchTemplate with
tags, only when the request carries this cluster's `eks:eks-cluster-name` (the role session's own tag) and a node
class and node pool tag (the same statement as the AWS managed policy AWSElasticBeanstalkEKSTagging's `Compute`, and
terraform-aws-eks v21.19.0's `enable_auto_mode_custom_tags`).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from llm_eks.constructs import nag
from llm_eks.constructs.auto_mode import network_policy_config, node_role
from llm_eks.manifests.node_pools.auto_mode import SYSTEM_POOL

# The managed policies aws_eks_v2 adds to the cluster role on Auto Mode.
CLUSTER_AUTO_MODE_POLICIES = (
    "AmazonEKSComputePolicy",
    "AmazonEKSBlockStoragePolicy",
    "AmazonEKSLoadBalancingPolicy",
    "AmazonEKSNetworkingPolicy",
)


def auto_mode_capacity(scope: Construct, cluster_name: str) -> tuple[iam.Role, eks.ComputeConfig]:
    """The built-in system pool's node role and the cluster's compute config (only that pool)."""
    role = node_role(scope, "SystemNodeRole", f"EKS Auto Mode's built-in system pool of {cluster_name}")
    return role, eks.ComputeConfig(node_pools=[SYSTEM_POOL], node_role=role)


def tagging_policy(scope: Construct, cluster: eks.Cluster) -> iam.Policy:
    """The cluster role's permission to launch Auto Mode nodes with the NodeClasses' own tags (module docstring)."""
    policy = iam.Policy(
        scope,
        "AutoModeTagging",
        statements=[
            iam.PolicyStatement(
                sid="LaunchWithNodeClassTags",
                actions=["ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate"],
                # These actions are authorized on "*" with request-tag conditions; EC2 checks each tag on create.
                resources=["*"],
                conditions={
                    "StringEquals": {"aws:RequestTag/eks:eks-cluster-name": "${aws:PrincipalTag/eks:eks-cluster-name}"},
                    "StringLike": {
                        "aws:RequestTag/eks:kubernetes-node-class-name": "*",
                        "aws:RequestTag/eks:kubernetes-node-pool-name": "*",
                    },
                },
            )
        ],
        roles=[cluster.role],
    )
    nag.acknowledge(
        policy,
        "IAM5[Resource::*]",
        "EC2 authorizes these launches on '*'; only requests tagged with this cluster's name and a node class pass.",
    )
    return policy


def network_policy_controller(cluster: eks.Cluster, after: IConstruct) -> eks.KubernetesManifest:
    """Auto Mode's NetworkPolicy controller switched on (ConfigMap kube-system/amazon-vpc-cni), applied first: every
    controller waits for it (the cluster's `system_capacity`), so no pod starts before policies are enforced."""
    manifest = cluster.add_manifest("NetworkPolicyController", network_policy_config())
    # kubectl apply replaces the ConfigMap whoever wrote it first.
    manifest.node.add_dependency(after)
    return manifest


def acknowledge_cluster_role(cluster: eks.Cluster) -> None:
    for policy in CLUSTER_AUTO_MODE_POLICIES:
        nag.acknowledge(
            cluster.role,
            nag.managed_policy(policy),
            "EKS Auto Mode requires this AWS managed policy on the cluster role (aws_eks_v2 attaches it).",
        )


def cfn_cluster(cluster: eks.Cluster) -> cdk.CfnResource:
    """The AWS::EKS::Cluster resource aws_eks_v2 creates."""
    resource = cluster.node.find_child("Resource")
    if not isinstance(resource, cdk.CfnResource):
        raise TypeError(f"aws_eks_v2's cluster resource is a {type(resource).__name__}")
    return resource
