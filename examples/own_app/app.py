#!/usr/bin/env python3
"""Use llm-eks constructs in your own CDK app: an EKS cluster for inference inside a stack you own.

With llm-eks installed (docs/getting-started/install.md: the wheel `make dist` builds, or a git URL) and
Node 24 or 22 on PATH:

    npm install aws-cdk@2.1148.1 && npx cdk synth --app "python3 app.py"
"""

import aws_cdk as cdk

from llm_eks.constructs.cluster import InferenceCluster, InferenceClusterProps
from llm_eks.infra.app import add_checks


class MyPlatformStack(cdk.Stack):
    def __init__(self, scope: cdk.App, id: str) -> None:
        super().__init__(scope, id)
        platform = InferenceCluster(
            self,
            "Inference",
            InferenceClusterProps(cluster_name="team-a-inference", system_instance_type="m7i.large"),
        )
        cdk.CfnOutput(self, "ClusterName", value=platform.cluster.cluster_name)


app = cdk.App()
MyPlatformStack(app, "TeamAInference")
add_checks(app)  # cdk-nag AwsSolutions, as llm-eks runs it on its own stacks
app.synth()
