"""EKS Auto Mode's AWS side beyond the cluster itself: the node IAM role of llm-eks's NodeClasses and its access entry
(`AutoModeNodes`), where the controllers run (`SYSTEM_POOL_PLACEMENT`), and the cluster objects Auto Mode reads
(`network_policy_config`, `ingress_class`).

Read in the EKS User Guide (awsdocs/amazon-eks-user-guide, 2026-12-04):
- auto-learn-iam.adoc@c88259ae: the node role's suggested policies are AmazonEKSWorkerNodeMinimalPolicy and
  AmazonEC2ContainerRegistryPullOnly (terraform-aws-eks v21.19.0, bef29c4d, gives its Auto Mode node role exactly
  these two);
- create-node-class.adoc@0026c9df: "If you create a custom node class, you need to create an EKS Access Entry to
  permit the nodes to join the cluster", of type `EC2` with the access policy AmazonEKSAutoNodePolicy (cluster
  scope); EKS creates the entry of the cluster's own compute-config node role itself, so a custom NodeClass gets a
  role of its own (one principal takes one access entry: terraform-aws-modules/terraform-aws-eks#3241);
- set-builtin-node-pools.adoc@01c16ed8 and critical-workload.adoc@390223ef: the built-in `system` pool (on-demand,
  amd64 and arm64, C/M/R generation 5+) carries the `CriticalAddonsOnly` taint; a workload lands there with
  `nodeSelector karpenter.sh/nodepool: system` and a toleration of that taint;
- auto-net-pol.adoc@c88259ae: NetworkPolicies are enforced once ConfigMap kube-system/amazon-vpc-cni sets
  `enable-network-policy-controller: "true"` (and the node's NodeClass sets `networkPolicy`);
- auto-configure-alb.adoc@c88259ae: an IngressClass with `spec.controller: eks.amazonaws.com/alb` hands Ingresses
  to Auto Mode's load balancing; Ingress annotations keep working except group.name, waf-acl-id and web-acl-id.

Delete order: the node pools' manifest waits for `AutoModeNodes` on create (`add_dependent`), so on delete the
NodePools and NodeClasses go first, while the role and its access entry still exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct, IDependable

from llm_eks.constructs import nag
from llm_eks.constructs.addons import Placement, check_boundary, check_statements, harden_roles
from llm_eks.errors import named_errors
from llm_eks.manifests.node_pools.auto_mode import SYSTEM_POOL_SELECTOR, SYSTEM_POOL_TOLERATIONS

# What nodes need to join and pull images, and nothing else (auto-learn-iam).
NODE_MANAGED_POLICIES = ("AmazonEKSWorkerNodeMinimalPolicy", "AmazonEC2ContainerRegistryPullOnly")
NODE_ACCESS_POLICY = "AmazonEKSAutoNodePolicy"
# The built-in pool the controllers run on (manifests/node_pools/auto_mode.py: its label, taint and architectures).
SYSTEM_POOL_PLACEMENT = Placement(node_selector=dict(SYSTEM_POOL_SELECTOR), tolerations=SYSTEM_POOL_TOLERATIONS)
# Auto Mode's load-balancing controller, which an IngressClass names to hand it the Ingresses of that class.
ALB_CONTROLLER = "eks.amazonaws.com/alb"
# The EBS provisioner of Auto Mode's block storage (create-storage-class.adoc: no StorageClass is created for you).
EBS_PROVISIONER = "ebs.csi.eks.amazonaws.com"


def node_role(scope: Construct, id: str, description: str) -> iam.Role:
    """A role for nodes Auto Mode launches: trusted by EC2, with the two minimal managed policies."""
    role = iam.Role(
        scope,
        id,
        # ec2.${AWS::URLSuffix}: right in the aws-cn partition too.
        assumed_by=iam.ServicePrincipal(f"ec2.{cdk.Aws.URL_SUFFIX}"),
        description=description,
        managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(n) for n in NODE_MANAGED_POLICIES],
    )
    for name in NODE_MANAGED_POLICIES:
        nag.acknowledge(role, nag.managed_policy(name), "The minimal node policies EKS Auto Mode documents for nodes.")
    return role


def network_policy_config() -> dict[str, Any]:
    """ConfigMap kube-system/amazon-vpc-cni that turns on Auto Mode's NetworkPolicy controller (auto-net-pol)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "amazon-vpc-cni",
            "namespace": "kube-system",
            "labels": {"app.kubernetes.io/part-of": "llm-eks"},
        },
        "data": {"enable-network-policy-controller": "true"},
    }


def ingress_class(name: str = "alb") -> dict[str, Any]:
    """The IngressClass that hands Ingresses of class `name` to Auto Mode's ALB controller (its default name, `alb`,
    is what the AWS Load Balancer Controller's chart creates: llm-eks's Ingresses name it either way)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "llm-eks"}},
        "spec": {"controller": ALB_CONTROLLER},
    }


@dataclass(frozen=True)
class AutoModeNodesOptions:
    """The node role of llm-eks's NodeClasses; every default is the production-right one."""

    # Added to the node role (e.g. reading an image cache of your own); none by default.
    node_role_statements: tuple[iam.PolicyStatement, ...] = ()
    # Your organisation's permissions boundary on the node role; None: no boundary.
    permissions_boundary: iam.IManagedPolicy | None = None
    # Created before the role's access entry, e.g. the cluster's Auto Mode tagging policy.
    depends_on: tuple[IDependable, ...] = field(default=())

    def validate(self) -> None:
        check_statements("node_role_statements", self.node_role_statements)
        check_boundary("permissions_boundary", self.permissions_boundary)


@dataclass(frozen=True, kw_only=True)
class AutoModeNodesProps(AutoModeNodesOptions):
    """`AutoModeNodesOptions` on one EKS Auto Mode cluster."""

    cluster: eks.ICluster


class AutoModeNodes(Construct):
    """The IAM role EKS Auto Mode gives the nodes of llm-eks's NodeClasses (their `spec.role`) and its access entry
    (type EC2, AmazonEKSAutoNodePolicy), without which those nodes never join."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: AutoModeNodesProps) -> None:
        props.validate()
        super().__init__(scope, id)
        self.props = props
        self.node_role = node_role(self, "NodeRole", "Nodes EKS Auto Mode launches from llm-eks's NodeClasses")
        self.node_access_entry = eks.AccessEntry(
            self,
            "NodeAccessEntry",
            cluster=props.cluster,
            principal=self.node_role.role_arn,
            access_entry_type=eks.AccessEntryType.EC2,
            access_policies=[
                eks.AccessPolicy.from_access_policy_name(
                    NODE_ACCESS_POLICY, access_scope_type=eks.AccessScopeType.CLUSTER
                )
            ],
        )
        if props.depends_on:
            self.node_access_entry.node.add_dependency(*props.depends_on)
        harden_roles(self, props.permissions_boundary, [(self.node_role, props.node_role_statements)])

    @property
    def node_role_name(self) -> str:
        """For NodeClass `spec.role`: Auto Mode takes the role's NAME."""
        return self.node_role.role_name

    def add_dependent(self, *dependents: IConstruct) -> None:
        """Make node pools / NodeClasses (e.g. the KubernetesManifest of a cdk8s chart) wait for the role and its
        access entry on create, and be deleted before them."""
        for dependent in dependents:
            dependent.node.add_dependency(self.node_role, self.node_access_entry)
