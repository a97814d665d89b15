"""The Karpenter controller's IAM policy documents, as in Karpenter's CloudFormation for the version we pin.

One managed policy per concern, named and scoped as upstream (../shared/reference/karpenter-cloudformation.yaml,
v1.14.1): one combined document overflows IAM's 6,144-character managed-policy limit. Tests compare every
statement here with the reference file, so a Karpenter upgrade that changes the IAM shows up as a failing test.

The documents are kept as JSON text with `${...}` placeholders and rendered through `Fn::Sub`, exactly like the
reference: several condition KEYS contain the cluster name (`aws:RequestTag/kubernetes.io/cluster/${ClusterName}`)
and CloudFormation cannot resolve an intrinsic function inside a JSON key, only inside a Sub string. `${AWS::...}`
are CloudFormation pseudo parameters; the other placeholders are the variables of `render`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import aws_cdk as cdk

# IAM's limit for a managed policy document, counted without whitespace.
MANAGED_POLICY_MAX_CHARS = 6144

_ARN = "arn:${AWS::Partition}"
_EC2 = f"{_ARN}:ec2:${{AWS::Region}}"
_INSTANCE_PROFILES = f"{_ARN}:iam::${{AWS::AccountId}}:instance-profile/*"
_CLUSTER_ARN = f"{_ARN}:eks:${{AWS::Region}}:${{AWS::AccountId}}:cluster/${{ClusterName}}"
_OWNED_REQUEST = "aws:RequestTag/kubernetes.io/cluster/${ClusterName}"
_OWNED_RESOURCE = "aws:ResourceTag/kubernetes.io/cluster/${ClusterName}"
_TAGGED_RESOURCES = [
    f"{_EC2}:*:fleet/*",
    f"{_EC2}:*:instance/*",
    f"{_EC2}:*:volume/*",
    f"{_EC2}:*:network-interface/*",
    f"{_EC2}:*:launch-template/*",
    f"{_EC2}:*:spot-instances-request/*",
]

NODE_LIFECYCLE: tuple[dict[str, Any], ...] = (
    {
        # Launching needs the AMI, snapshot, security groups, subnets, reservations and placement groups it uses.
        "Sid": "AllowScopedEC2InstanceAccessActions",
        "Effect": "Allow",
        "Resource": [
            f"{_ARN}:ec2:${{AWS::Region}}::image/*",
            f"{_ARN}:ec2:${{AWS::Region}}::snapshot/*",
            f"{_EC2}:*:security-group/*",
            f"{_EC2}:*:subnet/*",
            f"{_EC2}:*:capacity-reservation/*",
            f"{_EC2}:*:placement-group/*",
        ],
        "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
    },
    {
        # Only launch templates this cluster's Karpenter created.
        "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
        "Effect": "Allow",
        "Resource": f"{_EC2}:*:launch-template/*",
        "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
        "Condition": {
            "StringEquals": {_OWNED_RESOURCE: "owned"},
            "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
        },
    },
    {
        # Whatever it creates must be tagged as this cluster's and a node pool's at creation.
        "Sid": "AllowScopedEC2InstanceActionsWithTags",
        "Effect": "Allow",
        "Resource": _TAGGED_RESOURCES,
        "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
        "Condition": {
            "StringEquals": {_OWNED_REQUEST: "owned", "aws:RequestTag/eks:eks-cluster-name": "${ClusterName}"},
            "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
        },
    },
    {
        # Tagging only as part of those create calls.
        "Sid": "AllowScopedResourceCreationTagging",
        "Effect": "Allow",
        "Resource": _TAGGED_RESOURCES,
        "Action": "ec2:CreateTags",
        "Condition": {
            "StringEquals": {
                _OWNED_REQUEST: "owned",
                "aws:RequestTag/eks:eks-cluster-name": "${ClusterName}",
                "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
            },
            "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
        },
    },
    {
        # Later tagging of its own instances, limited to the keys Karpenter adds after launch.
        "Sid": "AllowScopedResourceTagging",
        "Effect": "Allow",
        "Resource": f"{_EC2}:*:instance/*",
        "Action": "ec2:CreateTags",
        "Condition": {
            "StringEquals": {_OWNED_RESOURCE: "owned"},
            "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
            "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": "${ClusterName}"},
            "ForAllValues:StringEquals": {"aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]},
        },
    },
    {
        # Terminating and deleting only what it owns.
        "Sid": "AllowScopedDeletion",
        "Effect": "Allow",
        "Resource": [f"{_EC2}:*:instance/*", f"{_EC2}:*:launch-template/*"],
        "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
        "Condition": {
            "StringEquals": {_OWNED_RESOURCE: "owned"},
            "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
        },
    },
)

IAM_INTEGRATION: tuple[dict[str, Any], ...] = (
    {
        # Only the node role, and only to EC2.
        "Sid": "AllowPassingInstanceRole",
        "Effect": "Allow",
        "Resource": "${NodeRoleArn}",
        "Action": "iam:PassRole",
        "Condition": {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}},
    },
    {
        "Sid": "AllowScopedInstanceProfileCreationActions",
        "Effect": "Allow",
        "Resource": _INSTANCE_PROFILES,
        "Action": ["iam:CreateInstanceProfile"],
        "Condition": {
            "StringEquals": {
                _OWNED_REQUEST: "owned",
                "aws:RequestTag/eks:eks-cluster-name": "${ClusterName}",
                "aws:RequestTag/topology.kubernetes.io/region": "${AWS::Region}",
            },
            "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
        },
    },
    {
        "Sid": "AllowScopedInstanceProfileTagActions",
        "Effect": "Allow",
        "Resource": _INSTANCE_PROFILES,
        "Action": ["iam:TagInstanceProfile"],
        "Condition": {
            "StringEquals": {
                _OWNED_RESOURCE: "owned",
                "aws:ResourceTag/topology.kubernetes.io/region": "${AWS::Region}",
                _OWNED_REQUEST: "owned",
                "aws:RequestTag/eks:eks-cluster-name": "${ClusterName}",
                "aws:RequestTag/topology.kubernetes.io/region": "${AWS::Region}",
            },
            "StringLike": {
                "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
            },
        },
    },
    {
        "Sid": "AllowScopedInstanceProfileActions",
        "Effect": "Allow",
        "Resource": _INSTANCE_PROFILES,
        "Action": ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
        "Condition": {
            "StringEquals": {
                _OWNED_RESOURCE: "owned",
                "aws:ResourceTag/topology.kubernetes.io/region": "${AWS::Region}",
            },
            "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
        },
    },
)

EKS_INTEGRATION: tuple[dict[str, Any], ...] = (
    {
        # Discovers the API server endpoint and CA of this cluster only.
        "Sid": "AllowAPIServerEndpointDiscovery",
        "Effect": "Allow",
        "Resource": _CLUSTER_ARN,
        "Action": "eks:DescribeCluster",
    },
)

INTERRUPTION: tuple[dict[str, Any], ...] = (
    {
        "Sid": "AllowInterruptionQueueActions",
        "Effect": "Allow",
        "Resource": "${InterruptionQueueArn}",
        "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
    },
)

ZONAL_SHIFT: tuple[dict[str, Any], ...] = (
    {
        "Sid": "AllowZonalShiftStatusReadOnly",
        "Effect": "Allow",
        "Resource": "*",
        "Action": ["arc-zonal-shift:GetManagedResource"],
        "Condition": {"StringEquals": {"arc-zonal-shift:ResourceIdentifier": _CLUSTER_ARN}},
    },
)

RESOURCE_DISCOVERY: tuple[dict[str, Any], ...] = (
    {
        "Sid": "AllowRegionalReadActions",
        "Effect": "Allow",
        "Resource": "*",
        "Action": [
            "ec2:DescribeCapacityReservations",
            "ec2:DescribeImages",
            "ec2:DescribeInstances",
            "ec2:DescribeInstanceStatus",
            "ec2:DescribeInstanceTypeOfferings",
            "ec2:DescribeInstanceTypes",
            "ec2:DescribeLaunchTemplates",
            "ec2:DescribePlacementGroups",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeSpotPriceHistory",
            "ec2:DescribeSubnets",
        ],
        "Condition": {"StringEquals": {"aws:RequestedRegion": "${AWS::Region}"}},
    },
    {
        # Public SSM parameters: AMI aliases resolve through /aws/service/...
        "Sid": "AllowSSMReadActions",
        "Effect": "Allow",
        "Resource": f"{_ARN}:ssm:${{AWS::Region}}::parameter/aws/service/*",
        "Action": "ssm:GetParameter",
    },
    {
        "Sid": "AllowPricingReadActions",
        "Effect": "Allow",
        "Resource": "*",
        "Action": "pricing:GetProducts",
    },
    {
        "Sid": "AllowUnscopedInstanceProfileListAction",
        "Effect": "Allow",
        "Resource": "*",
        "Action": "iam:ListInstanceProfiles",
    },
    {
        "Sid": "AllowInstanceProfileReadActions",
        "Effect": "Allow",
        "Resource": _INSTANCE_PROFILES,
        "Action": "iam:GetInstanceProfile",
    },
)

# Managed policy (upstream name without "KarpenterController"/"Policy-<cluster>") -> its statements.
CONTROLLER_POLICIES: Mapping[str, tuple[dict[str, Any], ...]] = MappingProxyType(
    {
        "NodeLifecycle": NODE_LIFECYCLE,
        "IAMIntegration": IAM_INTEGRATION,
        "EKSIntegration": EKS_INTEGRATION,
        "Interruption": INTERRUPTION,
        "ZonalShift": ZONAL_SHIFT,
        "ResourceDiscovery": RESOURCE_DISCOVERY,
    }
)

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9:]+)\}")


def policy_text(statements: tuple[dict[str, Any], ...]) -> str:
    """The document as compact JSON text with its `${...}` placeholders (IAM counts size without whitespace)."""
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)}, separators=(",", ":"))


def variables_of(text: str) -> set[str]:
    """The Sub variables a text uses (pseudo parameters like AWS::Region excluded)."""
    return {name for name in _PLACEHOLDER.findall(text) if "::" not in name}


def _sub(text: str, variables: Mapping[str, str]) -> str:
    """`Fn::Sub` with only the variables the text uses (unused ones make cfn-lint complain)."""
    used = variables_of(text)
    missing = used - variables.keys()
    if missing:
        raise KeyError(f"policy placeholders without a value: {sorted(missing)}")
    if not used:
        return cdk.Fn.sub(text)
    return cdk.Fn.sub(text, {name: variables[name] for name in sorted(used)})


def _keys_have_placeholders(node: Any) -> bool:
    if isinstance(node, dict):
        return any("${" in key or _keys_have_placeholders(value) for key, value in node.items())
    if isinstance(node, list):
        return any(_keys_have_placeholders(item) for item in node)
    return False


def _sub_values(node: Any, variables: Mapping[str, str]) -> Any:
    if isinstance(node, dict):
        return {key: _sub_values(value, variables) for key, value in node.items()}
    if isinstance(node, list):
        return [_sub_values(item, variables) for item in node]
    if isinstance(node, str) and "${" in node:
        return _sub(node, variables)
    return node


def render(statements: tuple[dict[str, Any], ...], variables: Mapping[str, str]) -> Any:
    """The policy document for CloudFormation.

    Variables known at synth time (normally the cluster name) are substituted here; if no placeholder is then left
    in a condition KEY, the document is a JSON object whose string values that still hold placeholders become
    `Fn::Sub`s (readable in the template, checkable by cfn-lint and cdk-nag). Otherwise (a cluster name that is a
    deploy-time token) the whole document is one `Fn::Sub` over its JSON text, as in Karpenter's CloudFormation.
    """
    text = policy_text(statements)
    for name, value in variables.items():
        if not cdk.Token.is_unresolved(value):
            # JSON-escaped, so any name stays valid JSON text.
            text = text.replace("${" + name + "}", json.dumps(value)[1:-1])
    document = json.loads(text)
    if _keys_have_placeholders(document):
        return _sub(text, variables)
    return _sub_values(document, variables)
