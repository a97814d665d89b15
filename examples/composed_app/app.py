#!/usr/bin/env python3
"""Compose llm-eks constructs in your own CDK app, without llm-eks's config: a cluster, Karpenter, a GPU node pool,
KEDA, the GPU device software and a cdk8s chart of your own, each installed after what it needs.

With llm-eks installed (docs/getting-started/install.md: the wheel `make dist` builds, or a git URL) and
Node 24 or 22 on PATH:

    npm install aws-cdk@2.1148.1 && npx cdk synth --app "python3 app.py"
"""

from __future__ import annotations

import aws_cdk as cdk
import cdk8s
from constructs import Construct

from llm_eks.constructs.cluster import InferenceCluster, InferenceClusterProps
from llm_eks.constructs.gpu_devices import gpu_options_for
from llm_eks.constructs.keda import KedaOptions
from llm_eks.infra.app import add_checks
from llm_eks.manifests.node_pools import GpuPoolSpec, NodePoolsChart, NodePoolsProps


class TeamChart(cdk8s.Chart):
    """Your own Kubernetes objects: here one namespace and a ConfigMap your serving pods would read."""

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id, disable_resource_name_hashes=True)
        cdk8s.ApiObject(self, "namespace", api_version="v1", kind="Namespace", metadata={"name": "team-a"})
        cdk8s.ApiObject(
            self,
            "settings",
            api_version="v1",
            kind="ConfigMap",
            metadata={"name": "team-a-settings", "namespace": "team-a"},
        ).add_json_patch(cdk8s.JsonPatch.add("/data", {"model": "meta-llama/Llama-3.1-8B-Instruct"}))


class TeamInferenceStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, **kwargs: object) -> None:
        super().__init__(scope, id, **kwargs)  # type: ignore[arg-type]
        platform = InferenceCluster(self, "Platform", InferenceClusterProps(cluster_name="team-a-inference"))
        # The interruption queue and the controller, after the system nodes and the Pod Identity agent.
        karpenter = platform.add_karpenter()
        keda = platform.add_keda(KedaOptions(operator_replicas=2))

        charts = cdk8s.App()
        pools = NodePoolsChart(
            charts,
            "node-pools",
            NodePoolsProps(
                cluster_name=karpenter.cluster_name,
                node_role_name=karpenter.node_role_name,
                gpu_pools=(
                    GpuPoolSpec(name="gpu-g6e", vendor="nvidia", instance_family="g6e", instance_types=("g6e.xlarge",)),
                ),
                security_group_ids=(platform.cluster.cluster_security_group_id,),
            ),
        )
        # After Karpenter's CRDs and controller; deleted before the controller, so Karpenter drains its nodes.
        platform.add_chart("node-pools", pools, after=(karpenter,))
        platform.add_gpu_devices(gpu_options_for(pools.props))
        platform.add_chart("team-a", TeamChart(charts, "team-a"), after=(keda,))
        cdk.CfnOutput(self, "ClusterName", value=platform.cluster.cluster_name)


def build(app: cdk.App) -> TeamInferenceStack:
    return TeamInferenceStack(app, "TeamAComposed", env=cdk.Environment(account="123456789012", region="us-west-2"))


if __name__ == "__main__":
    app = cdk.App()
    build(app)
    add_checks(app)  # cdk-nag AwsSolutions and llm-eks's Kubernetes checks, as llm-eks runs them on its own stacks
    app.synth()
