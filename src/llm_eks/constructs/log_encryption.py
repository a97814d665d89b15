"""CloudWatch log groups encrypted with one customer-managed KMS key per stack.

CloudWatch Logs encrypts every log group at rest with a service key anyway; a customer-managed key adds what an
auditor asks for: key rotation, a key policy that names who may decrypt, and CloudTrail records of every use. VPC
flow logs hold the addresses of everything that talks to the cluster, so they get it, and so do the teardown
Lambdas' logs (one key serves all, so the cost is one key a stack).

The key policy follows AWS's "Encrypt log data in CloudWatch Logs using AWS KMS" guide: the regional CloudWatch Logs
service principal may use the key only with an encryption context naming a log group of this account and region.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

_KEY_ID = "LlmEksLogsKey"


def logs_key(scope: Construct) -> kms.Key:
    """The stack's log encryption key, created on first use (every construct of the stack shares it)."""
    stack = cdk.Stack.of(scope)
    existing = stack.node.try_find_child(_KEY_ID)
    if isinstance(existing, kms.Key):
        return existing
    key = kms.Key(
        stack,
        _KEY_ID,
        description=f"CloudWatch Logs encryption for {stack.stack_name}",
        # Yearly rotation, as cdk-nag and CIS expect; old key material keeps decrypting old logs.
        enable_key_rotation=True,
        # The logs it protects are deleted with the stack; 30 days lets an accidental delete be cancelled.
        removal_policy=cdk.RemovalPolicy.DESTROY,
        pending_window=cdk.Duration.days(30),
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchLogsOfThisAccountAndRegion",
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
            resources=["*"],
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": (
                        f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:*"
                    )
                }
            },
        )
    )
    return key


def encrypted_log_group(scope: Construct, id: str, retention: logs.RetentionDays) -> logs.LogGroup:
    """A log group encrypted with the stack's logs key, deleted with the stack."""
    return logs.LogGroup(
        scope, id, retention=retention, encryption_key=logs_key(scope), removal_policy=cdk.RemovalPolicy.DESTROY
    )
