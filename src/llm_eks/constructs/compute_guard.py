"""`ComputeModeGuard`: a deployed cluster keeps its compute mode (self-managed Karpenter or EKS Auto Mode); a deploy
that would switch it fails before CloudFormation touches the cluster (the handler is compute_guard_handler/index.py).

Why refuse rather than switch in place. CloudFormation would do it: AWS::EKS::Cluster's ComputeConfig, StorageConfig
and KubernetesNetworkConfig.ElasticLoadBalancing are not create-only (the resource schema in cfn-lint 1.58.0), so
the cluster updates without replacement. But one llm-eks deploy would then, at once, enable Auto Mode while
Karpenter still runs (CloudFormation deletes removed resources only after every update succeeded), re-point each
NodePool at another node class (`nodeClassRef.group` and `.kind` are immutable: Karpenter 1.14.1's NodePool CRD,
"nodeClassRef.group is immutable"), so the node-pools manifest fails mid-deploy, and move load balancers and EBS
volumes to other controllers. Disabling Auto Mode terminates its instances and deletes its load balancers (EKS User
Guide, auto-disable). AWS's own path is gradual (auto-migrate-karpenter: enable Auto Mode beside Karpenter, move
workloads one by one, uninstall Karpenter last), which a single deploy cannot be. So the supported switch is a new
environment and a traffic move.

The guard runs on create (an existing cluster that this stack now manages is checked too) and whenever its
properties change (the mode), reading the live cluster with eks:DescribeCluster; the EKS cluster resource depends on
it, so nothing of the cluster changes before it passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from llm_eks.constructs import nag
from llm_eks.constructs.handler import python_handler
from llm_eks.error_codes import E304
from llm_eks.errors import fail, named_errors
from llm_eks.planner.compute_mode import COMPUTE_MODES

HANDLER_DIR = Path(__file__).parent / "compute_guard_handler"


@dataclass(frozen=True)
class ComputeModeGuardProps:
    """The cluster (by its fixed name) and the compute mode this deploy wants it to run."""

    cluster_name: str
    # "karpenter" or "auto-mode" (planner/compute_mode.py).
    compute: str
    # One month of handler logs: enough to read a refused deploy, short enough to cost nothing.
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH

    def validate(self) -> None:
        if self.compute not in COMPUTE_MODES:
            raise fail(E304, "compute", self.compute, f"must be one of {', '.join(COMPUTE_MODES)}")
        if cdk.Token.is_unresolved(self.cluster_name) or not self.cluster_name:
            raise fail(
                E304,
                "cluster_name",
                self.cluster_name,
                "must be the cluster's fixed name (the guard reads the deployed cluster by it before it exists here)",
            )


class ComputeModeGuard(Construct):
    """Custom resource that fails a deploy switching the named cluster's compute mode; make the cluster depend on it."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: ComputeModeGuardProps) -> None:
        props.validate()
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        # Outside the VPC: it calls the EKS API only, and must run before the cluster (and its VPC) exist.
        self.function = python_handler(
            self,
            description=f"Refuses a deploy that would switch {props.cluster_name} between Karpenter and Auto Mode",
            source=HANDLER_DIR,
            timeout=cdk.Duration.minutes(1),
            memory_size=128,
            log_retention=props.log_retention,
        )
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                sid="ReadThisCluster",
                actions=["eks:DescribeCluster"],
                resources=[f"arn:{stack.partition}:eks:{stack.region}:{stack.account}:cluster/{props.cluster_name}"],
            )
        )
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=self.function.function_arn,
            resource_type="Custom::ComputeModeGuard",
            properties={"ClusterName": props.cluster_name, "ComputeMode": props.compute},
        )
        nag.acknowledge(
            self.function,
            nag.managed_policy("service-role/AWSLambdaBasicExecutionRole"),
            "Lets the guard Lambda write its own logs, nothing else.",
        )
        nag.skip_custom_resource_lambda_checks(self.function)
        nag.skip_checkov(
            self.function, "CKV_AWS_117", "Outside the VPC on purpose: it runs before the cluster and calls EKS only."
        )
