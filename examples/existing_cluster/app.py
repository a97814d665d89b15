#!/usr/bin/env python3
"""llm-eks constructs in an app you already have, on an EKS cluster and a VPC that already exist: Karpenter with its
Spot-interruption queue, KEDA, and a GPU node pool, each installed after what it needs.

The cluster, its VPC and its kubectl provider (the Lambda aws_eks_v2 created with the cluster, which applies Helm
releases and manifests to it) are imported by their attributes, so synth looks nothing up and needs no AWS
credentials. The cluster must already run the EKS Pod Identity agent add-on (Karpenter's controller gets its
credentials through it) and have nodes labelled llm-eks.io/node-role=system for the controllers (or pass your own
`system_node_selector`).

With llm-eks installed (docs/getting-started/install.md: the wheel `make dist` builds, or a git URL) and
Node 24 or 22 on PATH:

    npm install aws-cdk@2.1148.1 && npx cdk synth --app "python3 app.py"
"""

from __future__ import annotations

import aws_cdk as cdk
import cdk8s
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from llm_eks.constructs.interruption import InterruptionQueue, InterruptionQueueProps
from llm_eks.constructs.karpenter import Karpenter, KarpenterProps
from llm_eks.constructs.keda import Keda, KedaProps
from llm_eks.infra.app import add_checks
from llm_eks.manifests.node_pools import GpuPoolSpec, NodePoolsChart, NodePoolsProps

CLUSTER_NAME = "team-a"


class ExistingClusterStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, **kwargs: object) -> None:
        super().__init__(scope, id, **kwargs)  # type: ignore[arg-type]
        vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "Vpc",
            vpc_id="vpc-0123456789abcdef0",
            availability_zones=["us-west-2a", "us-west-2b"],
            private_subnet_ids=["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"],
        )
        cluster = eks.Cluster.from_cluster_attributes(
            self,
            "Cluster",
            cluster_name=CLUSTER_NAME,
            vpc=vpc,
            cluster_security_group_id="sg-0123456789abcdef0",
            # The stack that created the cluster outputs its kubectl provider's service token and role.
            kubectl_provider=eks.KubectlProvider.from_kubectl_provider_attributes(
                self,
                "KubectlProvider",
                service_token="arn:aws:lambda:us-west-2:123456789012:function:team-a-kubectl-provider",
                role=iam.Role.from_role_arn(self, "KubectlRole", "arn:aws:iam::123456789012:role/team-a-kubectl"),
            ),
        )
        queue = InterruptionQueue(self, "Interruption", InterruptionQueueProps(cluster_name=CLUSTER_NAME))
        karpenter = Karpenter(self, "Karpenter", KarpenterProps(cluster=cluster, interruption_queue=queue))
        Keda(self, "Keda", KedaProps(cluster=cluster, control_plane_cidrs=("10.0.0.0/16",)))

        pools = NodePoolsChart(
            cdk8s.App(),
            "node-pools",
            NodePoolsProps(
                cluster_name=CLUSTER_NAME,
                node_role_name=karpenter.node_role_name,
                gpu_pools=(
                    GpuPoolSpec(name="gpu-g6e", vendor="nvidia", instance_family="g6e", instance_types=("g6e.xlarge",)),
                ),
                security_group_ids=("sg-0123456789abcdef0",),
            ),
        )
        # After Karpenter's CRDs and controller; deleted before the controller, so Karpenter drains its nodes.
        karpenter.add_dependent(cluster.add_cdk8s_chart("node-pools", pools))


def build(app: cdk.App) -> ExistingClusterStack:
    return ExistingClusterStack(app, "TeamAExisting", env=cdk.Environment(account="123456789012", region="us-west-2"))


if __name__ == "__main__":
    app = cdk.App()
    build(app)
    add_checks(app)  # cdk-nag AwsSolutions and llm-eks's Kubernetes checks, as llm-eks runs them on its own stacks
    app.synth()
