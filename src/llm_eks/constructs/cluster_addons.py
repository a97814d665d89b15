"""The EKS managed add-ons of a self-managed (Karpenter) `InferenceCluster`: vpc-cni and the EBS CSI driver, each with
a Pod Identity role of its own, CoreDNS and kube-proxy, and the node monitoring agent. Each is created in the
cluster construct's own scope (`scope`), so its logical id is what it was when these lived in cluster.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from llm_eks.manifests.node_pools import ACCELERATOR_RESOURCE, NVIDIA

# Managed add-ons every inference cluster needs besides vpc-cni (built on its own: Pod Identity and network policy).
# EKS picks the default add-on version for the cluster's Kubernetes version; bumping KUBERNETES_MINOR moves them too.
CORE_ADDONS = ("coredns", "kube-proxy")
# The EKS node monitoring agent, as a managed add-on at EKS's default version too: it sets the node conditions
# Karpenter's node repair acts on (AcceleratedHardwareReady, NetworkingReady, ...). No IAM: its ClusterRole covers
# nodes, nodes/status (patch, any node: an admission policy of ours, manifests/node_status_guard.py, holds it to
# its own node), events and nodediagnostics only (aws/eks-node-monitoring-agent v1.7.0, charts/
# eks-node-monitoring-agent/templates/clusterrole.yaml), and the agent calls no AWS API beyond IMDS on the host
# network. Its DCGM host engine (DaemonSet dcgm-server, which the agent's GPU checks query on localhost:5555)
# tolerates no taint by default (values.yaml dcgmAgent.tolerations: []): it is told to tolerate the GPU taint.
NODE_MONITORING_ADDON = "eks-node-monitoring-agent"
# The VPC CNI's service account (kube-system/aws-node) and the AWS managed policy for IPv4 clusters.
VPC_CNI_SERVICE_ACCOUNT = "aws-node"
VPC_CNI_POLICY = "AmazonEKS_CNI_Policy"
# The EBS CSI add-on's controller service account (kube-system), the subject of its Pod Identity association.
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"

# The EBS CSI controller's AWS managed policy (tag-scoped to the volumes the driver creates).
EBS_CSI_POLICY = "service-role/AmazonEBSCSIDriverPolicy"


def addon_role(
    scope: Construct, cluster: eks.Cluster, cluster_name: str, id: str, service_account: str, policy: str, what: str
) -> iam.Role:
    """The Pod Identity role of a managed add-on's controller: only `kube-system/<service_account>` of this
    cluster may assume it (the session tags Pod Identity sets), and it carries one AWS managed policy."""
    return iam.Role(
        scope,
        id,
        # Pod Identity needs sts:TagSession besides sts:AssumeRole.
        assumed_by=iam.ServicePrincipal("pods.eks.amazonaws.com")
        .with_conditions(
            {
                "StringEquals": {
                    "aws:RequestTag/eks-cluster-arn": cluster.cluster_arn,
                    "aws:RequestTag/kubernetes-namespace": "kube-system",
                    "aws:RequestTag/kubernetes-service-account": service_account,
                }
            }
        )
        .with_session_tags(),
        description=f"{what} of {cluster_name} (Pod Identity)",
        managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(policy)],
    )


def addon_with_identity(
    scope: Construct,
    cluster: eks.Cluster,
    name: str,
    role: iam.Role,
    service_account: str,
    configuration: Mapping[str, Any],
) -> eks_l1.CfnAddon:
    """Managed add-on `name` whose controller gets `role` through Pod Identity; EKS creates the association
    with the add-on, in the same call."""
    return eks_l1.CfnAddon(
        scope,
        f"Addon-{name}",
        addon_name=name,
        cluster_name=cluster.cluster_name,
        # The add-on owns its configuration; a drifted field is put back on every update.
        resolve_conflicts="OVERWRITE",
        pod_identity_associations=[
            eks_l1.CfnAddon.PodIdentityAssociationProperty(service_account=service_account, role_arn=role.role_arn)
        ],
        # A JSON string: the add-on's configuration schema (string values, as the schema types them).
        configuration_values=json.dumps(configuration, sort_keys=True),
    )


def vpc_cni_addon(scope: Construct, cluster: eks.Cluster, cluster_name: str) -> tuple[iam.Role, eks_l1.CfnAddon]:
    """vpc-cni with its own Pod Identity role (not the node role) and NetworkPolicy enforcement."""
    role = addon_role(
        scope, cluster, cluster_name, "VpcCniRole", VPC_CNI_SERVICE_ACCOUNT, VPC_CNI_POLICY,
        "VPC CNI (kube-system/aws-node)",
    )  # fmt: skip
    # NetworkPolicy enforcement (node agent + EKS's controller); without it policies are accepted and ignored.
    addon = addon_with_identity(
        scope, cluster, "vpc-cni", role, VPC_CNI_SERVICE_ACCOUNT, {"enableNetworkPolicy": "true"}
    )
    # The agent serves aws-node's credentials on every node (it runs on the host network, so it needs no CNI).
    # Not on the whole Cluster construct: manifests added to it later wait for the system nodes, which wait
    # for this add-on (a cycle). The cluster itself is a dependency through the ClusterName reference.
    addon.node.add_dependency(cluster.eks_pod_identity_agent)
    return role, addon


def core_addons(scope: Construct, cluster: eks.Cluster) -> dict[str, eks_l1.CfnAddon]:
    """CoreDNS and kube-proxy (CORE_ADDONS) at EKS's default versions."""
    addons = {}
    for name in CORE_ADDONS:
        addon = eks_l1.CfnAddon(
            scope,
            f"Addon-{name}",
            addon_name=name,
            cluster_name=cluster.cluster_name,
            # The add-on owns its configuration; a drifted field is put back on every update.
            resolve_conflicts="OVERWRITE",
        )
        addon.node.add_dependency(cluster)
        addons[name] = addon
    return addons


def node_monitoring_addon(scope: Construct, cluster: eks.Cluster, system_capacity: IConstruct) -> eks_l1.CfnAddon:
    """eks-node-monitoring-agent (NODE_MONITORING_ADDON): the agent on every node (it tolerates every taint),
    its DCGM host engine on the NVIDIA GPU nodes."""
    gpu_taint = {"key": ACCELERATOR_RESOURCE[NVIDIA], "operator": "Exists", "effect": "NoSchedule"}
    addon = eks_l1.CfnAddon(
        scope,
        f"Addon-{NODE_MONITORING_ADDON}",
        addon_name=NODE_MONITORING_ADDON,
        cluster_name=cluster.cluster_name,
        resolve_conflicts="OVERWRITE",
        # The add-on schema (charts/configuration.schema.json at v1.7.0) takes dcgmAgent.tolerations.
        configuration_values=json.dumps({"dcgmAgent": {"tolerations": [gpu_taint]}}, sort_keys=True),
    )
    # Its pods need a node before the add-on reports ACTIVE.
    addon.node.add_dependency(cluster, system_capacity)
    return addon


def ebs_csi_addon(
    scope: Construct,
    cluster: eks.Cluster,
    cluster_name: str,
    system_node_selector: Mapping[str, str],
    system_capacity: IConstruct,
) -> tuple[iam.Role, eks_l1.CfnAddon]:
    """EBS CSI driver with its controller on Pod Identity (Prometheus and Grafana volumes use it)."""
    role = addon_role(
        scope, cluster, cluster_name, "EbsCsiRole", EBS_CSI_SERVICE_ACCOUNT, EBS_CSI_POLICY, "EBS CSI controller"
    )
    # Controller on the system nodes; the node DaemonSet must reach GPU nodes (their taints) too.
    addon = addon_with_identity(
        scope,
        cluster,
        "aws-ebs-csi-driver",
        role,
        EBS_CSI_SERVICE_ACCOUNT,
        {"controller": {"nodeSelector": dict(system_node_selector)}, "node": {"tolerateAllTaints": True}},
    )
    addon.node.add_dependency(cluster.eks_pod_identity_agent, system_capacity)
    return role, addon
