#!/usr/bin/env python3
"""Every escape hatch of llm-eks's constructs in one stack: your own Karpenter node role and interruption queue,
extra IAM statements and a permissions boundary on the roles llm-eks creates, and extra Helm values on add-ons.

With llm-eks installed (docs/getting-started/install.md: the wheel `make dist` builds, or a git URL) and
Node 24 or 22 on PATH:

    npm install aws-cdk@2.1148.1 && npx cdk synth --app "python3 app.py"
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from llm_eks.constructs.cluster import InferenceCluster, InferenceClusterProps
from llm_eks.constructs.karpenter import KarpenterOptions
from llm_eks.constructs.keda import KedaOptions
from llm_eks.constructs.observability import ObservabilityOptions
from llm_eks.infra.app import add_checks

ACCOUNT, REGION = "123456789012", "us-west-2"
# Roles created in this account must carry the organisation's boundary.
BOUNDARY_NAME = "team-a-boundary"
# Made by the platform team: the node role already has the worker node policies; the queue already gets the
# interruption events (its EventBridge rules and queue policy are theirs too).
NODE_ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/team-a-karpenter-node"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:team-a-interruptions"
# Nodes boot from volumes encrypted with this key: the controller needs a grant to launch them.
EBS_KEY_ARN = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"


class EscapeHatchStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, **kwargs: object) -> None:
        super().__init__(scope, id, **kwargs)  # type: ignore[arg-type]
        boundary = iam.ManagedPolicy.from_managed_policy_name(self, "Boundary", BOUNDARY_NAME)
        platform = InferenceCluster(
            self,
            "Platform",
            InferenceClusterProps(
                cluster_name="team-a-hatches",
                permissions_boundary=boundary,
                system_node_role_statements=(
                    iam.PolicyStatement(
                        actions=["s3:GetObject"], resources=["arn:aws:s3:::team-a-node-bootstrap/config.toml"]
                    ),
                ),
            ),
        )
        platform.add_karpenter(
            KarpenterOptions(
                node_role=iam.Role.from_role_arn(self, "NodeRole", NODE_ROLE_ARN, mutable=False),
                interruption_queue=sqs.Queue.from_queue_arn(self, "Queue", QUEUE_ARN),
                permissions_boundary=boundary,
                controller_statements=(
                    iam.PolicyStatement(
                        sid="EncryptedNodeVolumes",
                        actions=["kms:CreateGrant"],
                        resources=[EBS_KEY_ARN],
                        conditions={"Bool": {"kms:GrantIsForAWSResource": True}},
                    ),
                ),
                helm_values={"logLevel": "debug", "controller": {"resources": {"limits": {"memory": "2Gi"}}}},
            )
        )
        platform.add_keda(KedaOptions(helm_values={"prometheus": {"operator": {"enabled": True}}}))
        platform.add_observability(
            ObservabilityOptions(
                helm_values={"grafana": {"defaultDashboardsTimezone": "utc"}}, permissions_boundary=boundary
            )
        )


def build(app: cdk.App) -> EscapeHatchStack:
    return EscapeHatchStack(app, "TeamAEscapeHatches", env=cdk.Environment(account=ACCOUNT, region=REGION))


if __name__ == "__main__":
    app = cdk.App()
    build(app)
    add_checks(app)
    app.synth()
