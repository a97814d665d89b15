"""`AwsLoadBalancerController`: the AWS Load Balancer Controller in kube-system, with a Pod Identity role carrying the
upstream IAM policy. Created only for environments that expose vLLM through an internal ALB Ingress.

Why not `aws_eks_v2.Cluster(alb_controller=...)`: in aws-cdk-lib 2.275.0 it (1) authenticates with IRSA (an
`aws_eks_v2.ServiceAccount` without an identity type, plus the cluster's OIDC provider), and this project uses Pod
Identity only; (2) installs with a 15-minute Helm timeout, exactly the kubectl Lambda's limit, the anchors' failure;
(3) pulls the image from a us-west-2 ECR registry by default; and (4) knows controller versions only up to v3.2.2.

The IAM policy is data: policies/aws-load-balancer-controller-v3.5.0.json, written from the upstream
docs/install/iam_policy.json at tag v3.5.0 (same statements and scoping; `Sid`s added). Statements that create or
change load balancers, target groups and security groups are scoped, as upstream scopes them, by the
`elbv2.k8s.aws/cluster` tag the controller puts on what it creates; describe calls and creating a security group
cannot be scoped by resource. Its CRDs (TargetGroupBinding, IngressClassParams, ...) are in the chart's `crds/`: on a
controller bump apply `kubectl apply --server-side -k
"github.com/aws/eks-charts/stable/aws-load-balancer-controller//crds?ref=<chart tag>"` first (Helm never upgrades
`crds/`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from llm_eks.constructs.addons import (
    ChartSource,
    Placement,
    PodIdentityRole,
    check_boundary,
    check_helm_values,
    check_replicas,
    check_statements,
    harden_roles,
    install_chart,
    requests_limits,
    with_helm_values,
)
from llm_eks.constructs.nag import acknowledge, skip_checkov
from llm_eks.errors import named_errors
from llm_eks.versions import AWS_LOAD_BALANCER_CONTROLLER_CHART_VERSION

AWS_LOAD_BALANCER_CONTROLLER_CHART = ChartSource(
    "aws-load-balancer-controller", "https://aws.github.io/eks-charts", AWS_LOAD_BALANCER_CONTROLLER_CHART_VERSION
)
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "aws-load-balancer-controller"
POLICY_FILE = f"aws-load-balancer-controller-v{AWS_LOAD_BALANCER_CONTROLLER_CHART_VERSION}.json"


@functools.cache
def _upstream_statements() -> tuple[dict[str, Any], ...]:
    text = resources.files("llm_eks.constructs.policies").joinpath(POLICY_FILE).read_text()
    return tuple(json.loads(text)["Statement"])


def _resources(statement: Mapping[str, Any]) -> list[str]:
    listed = statement["Resource"]
    return list(listed) if isinstance(listed, list) else [listed]


def controller_policy_statements() -> list[dict[str, Any]]:
    """The upstream controller policy for the pinned version, with `arn:aws:` made partition-aware."""
    partition = f"arn:{cdk.Aws.PARTITION}:"
    return [
        {**s, "Resource": [r.replace("arn:aws:", partition) for r in _resources(s)]} for s in _upstream_statements()
    ]


def wildcard_resources() -> list[str]:
    """The policy's wildcard resources as cdk-nag names them (one IAM5 finding each)."""
    found: list[str] = []
    for statement in _upstream_statements():
        for resource in _resources(statement):
            name = resource.replace("arn:aws:", "arn:<AWS::Partition>:")
            if "*" in name and name not in found:
                found.append(name)
    return found


@dataclass(frozen=True)
class AwsLoadBalancerControllerOptions:
    """Controller options; every default is the production-right one."""

    # Upstream default: one leader and one warm standby, so a node drain never stops Ingress reconciliation.
    replicas: int = 2
    placement: Placement = field(default_factory=Placement)
    # Two small pods, no hook Jobs: one Helm wait.
    timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(5))
    # Merged over ours (addons.with_helm_values): whatever the chart offers that these options do not.
    helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # Added to the controller role's policy, e.g. a KMS grant for a WAF or certificate setup of your own.
    role_statements: tuple[iam.PolicyStatement, ...] = ()
    # Your organisation's permissions boundary on the controller role; None: no boundary.
    permissions_boundary: iam.IManagedPolicy | None = None

    def validate(self) -> None:
        check_replicas("load_balancer.replicas", self.replicas)
        check_helm_values("load_balancer.helm_values", self.helm_values)
        check_statements("load_balancer.role_statements", self.role_statements)
        check_boundary("load_balancer.permissions_boundary", self.permissions_boundary)


@dataclass(frozen=True, kw_only=True)
class AwsLoadBalancerControllerProps(AwsLoadBalancerControllerOptions):
    """`AwsLoadBalancerControllerOptions` on one cluster (`InferenceCluster.add_load_balancer_controller` fills the
    cluster in)."""

    cluster: eks.ICluster


class AwsLoadBalancerController(Construct):
    """Pod Identity role + association for kube-system/aws-load-balancer-controller, then the pinned chart."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: AwsLoadBalancerControllerProps) -> None:
        props.validate()
        super().__init__(scope, id)
        cluster = props.cluster
        self.identity = PodIdentityRole.for_service_account(cluster, NAMESPACE, SERVICE_ACCOUNT)
        self.role = self.identity.role
        for statement in controller_policy_statements():
            self.role.add_to_principal_policy(iam.PolicyStatement.from_json(statement))
        # The role lives in the cluster's shared Pod Identity holder, so the boundary goes on it, not on this scope.
        harden_roles(self.identity, props.permissions_boundary, [(self.role, props.role_statements)])
        policy = self.role.node.find_child("DefaultPolicy")
        for resource in wildcard_resources():
            acknowledge(
                policy,
                f"IAM5[Resource::{resource}]",
                "Upstream controller policy: load balancers it creates have no ARN at synth; changes are scoped by "
                "the elbv2.k8s.aws/cluster tag as upstream scopes them.",
            )
        skip_checkov(
            policy,
            "CKV_AWS_111",
            "Upstream v3.5.0 policy: creates have no ARN to scope; writes are scoped by the elbv2.k8s.aws/cluster tag.",
        )
        self.chart = install_chart(
            self,
            "Chart",
            cluster=cluster,
            source=AWS_LOAD_BALANCER_CONTROLLER_CHART,
            release="aws-load-balancer-controller",
            namespace=NAMESPACE,
            values=with_helm_values(
                controller_values(props, cluster=cluster, region=cdk.Stack.of(self).region), props.helm_values
            ),
            timeout=props.timeout,
            create_namespace=False,
        )
        # Credentials must be assumable before the controller's first reconcile.
        self.chart.node.add_dependency(self.identity)


def controller_values(props: AwsLoadBalancerControllerOptions, *, cluster: eks.ICluster, region: str) -> dict[str, Any]:
    """Helm values for aws-load-balancer-controller."""
    return {
        "clusterName": cluster.cluster_name,
        # Given explicitly: pods may not reach IMDS (hop limit 1) to discover them.
        "region": region,
        "vpcId": cluster.vpc.vpc_id,
        # The chart creates the account; Pod Identity needs no annotation on it.
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
        "replicaCount": props.replicas,
        **props.placement.values(),
        "resources": requests_limits("100m", "128Mi", memory_limit="512Mi"),
        "podDisruptionBudget": {"maxUnavailable": 1} if props.replicas > 1 else {},
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {
                    "matchLabels": {
                        "app.kubernetes.io/name": "aws-load-balancer-controller",
                        "app.kubernetes.io/instance": "aws-load-balancer-controller",
                    }
                },
            }
        ],
        # Only Ingress (the internal ALB) is ours; the Service webhook (failurePolicy Fail) would make this
        # controller a hard dependency of every LoadBalancer Service created in the cluster.
        "enableServiceMutatorWebhook": False,
        # An Ingress that forgets its scheme annotation stays private.
        "defaultLoadBalancerScheme": "internal",
    }
