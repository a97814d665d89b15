"""Scoped cdk-nag acknowledgements: each names the exact finding, the construct it is on, and one line of why."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct


def acknowledge(scope: IConstruct, finding: str, reason: str) -> None:
    """Acknowledge one AwsSolutions finding on `scope` (and only there), e.g. `IAM4[Policy::...]`."""
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"AwsSolutions::AwsSolutions-{finding}", reason=reason))


def managed_policy(name: str) -> str:
    """The IAM4 finding text for an AWS managed policy name such as `service-role/AmazonEBSCSIDriverPolicy`."""
    return f"IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{name}]"
