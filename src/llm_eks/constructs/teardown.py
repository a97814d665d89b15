"""`KarpenterTeardown`: on stack delete, remove the instances, launch templates and instance profiles Karpenter
created for the cluster, before the VPC (and the node role) are deleted.

The first layer of a clean `cdk destroy` is dependency order: node pools are deleted while the controller still
runs, so Karpenter itself drains and terminates their nodes (see `Karpenter.add_dependent`). This is the second
layer, for whatever that leaves behind (a controller that crashed, a finalizer removed by hand, a node pool
deleted outside CloudFormation). The handler is in teardown_handler/index.py: a plain boto3 Lambda packaged from
the directory (no Docker, no bundling) behind the CDK Provider framework, which reports a raised error to
CloudFormation as FAILED with its message, so a teardown that cannot finish fails the delete instead of hanging it.

Where it runs in a delete: after everything that depends on it (the Karpenter controller chart, node pools),
before everything it depends on (the EKS cluster resource, the node role and its access entry, the VPC).
`Karpenter` wires all of these; when used on its own, wire them with `run_after_deleting`/`run_before_deleting`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct, IDependable

from llm_eks.constructs import nag
from llm_eks.constructs.handler import python_handler
from llm_eks.constructs.log_encryption import encrypted_log_group
from llm_eks.constructs.nag import iam5_findings
from llm_eks.error_codes import E312
from llm_eks.errors import ConfigError, named_errors

HANDLER_DIR = Path(__file__).parent / "teardown_handler"
# The Provider framework's own onEvent Lambda has 15 minutes; ours must answer before that one is killed.
_MAX_TIMEOUT_MINUTES = 14
# EKS cluster names: 1-100 characters, starting with a letter or digit.
_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")


@dataclass(frozen=True)
class KarpenterTeardownProps:
    """Which cluster's leftovers to remove, and how long the delete may wait for instances to terminate."""

    cluster_name: str
    # 10 minutes: a GPU instance usually terminates within 2-5; the handler stops waiting 60 s before this.
    timeout_minutes: int = 10
    # One month of handler logs: enough to read what a failed delete did, short enough to cost nothing.
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH

    def validate(self) -> None:
        if not cdk.Token.is_unresolved(self.cluster_name) and not _CLUSTER_NAME.match(self.cluster_name):
            raise ConfigError(
                E312,
                f"cluster_name: {self.cluster_name!r} is not allowed; must be an EKS cluster name "
                "(1-100 letters, digits, '-' or '_', starting with a letter or digit)",
            )
        if not 2 <= self.timeout_minutes <= _MAX_TIMEOUT_MINUTES:
            raise ConfigError(
                E312,
                f"timeout_minutes: {self.timeout_minutes} is not allowed; must be between 2 and "
                f"{_MAX_TIMEOUT_MINUTES} (the Provider framework's Lambda stops at 15)",
            )


class KarpenterTeardown(Construct):
    """Custom resource that does nothing on Create/Update and cleans up Karpenter's leftovers on Delete."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: KarpenterTeardownProps) -> None:
        props.validate()
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        name = props.cluster_name

        # Not in the VPC on purpose: a VPC-attached Lambda leaves ENIs that would themselves block the VPC delete.
        self.function = python_handler(
            self,
            description=f"Deletes Karpenter's leftover instances, launch templates and instance profiles of {name}",
            source=HANDLER_DIR,
            timeout=cdk.Duration.minutes(props.timeout_minutes),
            memory_size=256,
            log_retention=props.log_retention,
        )
        statements = self._statements(name, stack)
        for statement in statements:
            self.function.add_to_role_policy(statement)

        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.function,
            log_group=encrypted_log_group(self, "ProviderLogs", props.log_retention),
        )
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=self.provider.service_token,
            resource_type="Custom::KarpenterTeardown",
            properties={"ClusterName": name, "Region": stack.region},
        )

        basic_execution = nag.managed_policy("service-role/AWSLambdaBasicExecutionRole")
        nag.acknowledge(self.function, basic_execution, "Lets the teardown Lambda write its own logs, nothing else.")
        for finding in iam5_findings(self, iam.PolicyDocument(statements=statements).to_json()):
            nag.acknowledge(
                self.function, finding, "Describe/List allow no scoping; deletes need this cluster's eks tag."
            )
        framework = self.provider.node.find_child("framework-onEvent")
        for function in (self.function, framework):
            nag.skip_custom_resource_lambda_checks(function)
            nag.skip_checkov(
                function, "CKV_AWS_117", "Outside the VPC on purpose: its ENIs would block the VPC's own delete."
            )
        nag.acknowledge(framework, basic_execution, "Lets the Provider framework Lambda write its own logs.")
        for finding in iam5_findings(
            self, {"Statement": [{"Effect": "Allow", "Resource": f"{self.function.function_arn}:*"}]}
        ):
            nag.acknowledge(framework, finding, "The Provider framework may invoke only our handler (any version).")

    @staticmethod
    def _statements(cluster_name: str, stack: cdk.Stack) -> list[iam.PolicyStatement]:
        """Least privilege. Conditions use `eks:eks-cluster-name` (a tag VALUE), not `kubernetes.io/cluster/<name>`
        (a tag KEY), so they hold when the cluster name is a deploy-time token."""
        partition, region, account = stack.partition, stack.region, stack.account
        owned = {"StringEquals": {"aws:ResourceTag/eks:eks-cluster-name": cluster_name}}
        profiles = f"arn:{partition}:iam::{account}:instance-profile/karpenter/{region}/{cluster_name}/*"
        return [
            iam.PolicyStatement(
                sid="DescribeKarpenterResources",
                # EC2 Describe* calls have no resource-level permissions; read-only and limited to this region.
                actions=["ec2:DescribeInstances", "ec2:DescribeLaunchTemplates"],
                resources=["*"],
                conditions={"StringEquals": {"aws:RequestedRegion": region}},
            ),
            iam.PolicyStatement(
                sid="TerminateKarpenterInstances",
                actions=["ec2:TerminateInstances"],
                resources=[f"arn:{partition}:ec2:{region}:{account}:instance/*"],
                conditions={**owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
            ),
            iam.PolicyStatement(
                sid="DeleteKarpenterLaunchTemplates",
                actions=["ec2:DeleteLaunchTemplate"],
                resources=[f"arn:{partition}:ec2:{region}:{account}:launch-template/*"],
                conditions=owned,
            ),
            iam.PolicyStatement(
                sid="ListInstanceProfiles",
                # ListInstanceProfiles cannot be scoped (Karpenter's own policy has the same unscoped statement).
                actions=["iam:ListInstanceProfiles"],
                resources=["*"],
            ),
            iam.PolicyStatement(
                sid="ReadKarpenterInstanceProfiles",
                actions=["iam:GetInstanceProfile"],
                resources=[profiles],
            ),
            iam.PolicyStatement(
                sid="DeleteKarpenterInstanceProfiles",
                actions=["iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
                resources=[profiles],
                conditions=owned,
            ),
        ]

    def run_before_deleting(self, *dependencies: IDependable) -> None:
        """On delete, run this teardown before these are deleted (e.g. the VPC, the node role). On create they
        come first, which is harmless: Create does nothing."""
        self.resource.node.add_dependency(*dependencies)

    def run_after_deleting(self, *dependents: IConstruct) -> None:
        """On delete, run this teardown only after these are gone (e.g. the Karpenter charts, the node pools)."""
        for dependent in dependents:
            dependent.node.add_dependency(self.resource)
