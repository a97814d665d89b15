"""`ModelWeightsAccess`: read-only Pod Identity access for the vLLM service account to model weights kept in an
existing S3 bucket (per environment, from config), for vLLM's Run:ai model streamer.

Grants exactly: `s3:GetObject` on `<bucket>/<prefix>*`, `s3:ListBucket` on the bucket only for keys under the prefix,
and `kms:Decrypt` through S3 only when the bucket is encrypted with a customer managed key whose ARN is given. The
role is the service account's shared Pod Identity role (EKS allows one association per service account), so the same
pod can also read its Hugging Face token (`SecretsStoreCsi.add_secret_reader`).

`bucket_name` and `kms_key_arn` may also be unresolved CDK tokens (a bucket and key of this app, e.g.
`WeightsBucket.add_reader`): CloudFormation resolves them, so only literal values are checked here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from llm_eks.constructs.addons import PodIdentityRole, check_boundary, check_kms_key_arn, check_name, harden_roles
from llm_eks.constructs.nag import acknowledge, iam5_findings
from llm_eks.error_codes import E305
from llm_eks.errors import ConfigError, named_errors

# S3 general purpose bucket naming rules: 3-63 of lowercase letters, digits, '.', '-'; starts and ends alphanumeric.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def check_bucket_name(field_name: str, name: str) -> None:
    """An S3 general purpose bucket name."""
    if not _BUCKET.match(name) or ".." in name:
        raise ConfigError(
            E305,
            f"{field_name}: {name!r} is not allowed; must be an S3 bucket name (3-63 lowercase letters, digits, "
            "'.', '-')",
        )


def check_prefix(field_name: str, prefix: str) -> None:
    """An S3 key prefix that grants exactly one folder: ends in '/', no leading '/', no '*'."""
    if not prefix or prefix.startswith("/") or not prefix.endswith("/") or "*" in prefix:
        raise ConfigError(
            E305,
            f"{field_name}: {prefix!r} is not allowed; must be a key prefix without a leading '/' "
            "or '*', ending in '/' (so it cannot match a sibling prefix)",
        )


@dataclass(frozen=True)
class ModelWeightsAccessOptions:
    """Where the weights are and who reads them."""

    bucket_name: str
    # Key prefix of this model's files, ending in '/', e.g. 'models/meta-llama/Llama-3.1-8B-Instruct/'.
    prefix: str
    service_account: str
    # The workload namespace of the cross-helper contract.
    namespace: str = "inference"
    # Only for SSE-KMS with a customer managed key; SSE-S3 and aws/s3 need no key grant.
    kms_key_arn: str | None = None
    # Your organisation's permissions boundary on the service account's role; None: no boundary.
    permissions_boundary: iam.IManagedPolicy | None = None

    def validate(self) -> None:
        if not cdk.Token.is_unresolved(self.bucket_name):
            check_bucket_name("model_weights.bucket_name", self.bucket_name)
        check_prefix("model_weights.prefix", self.prefix)
        check_name("model_weights.namespace", self.namespace, label=True)
        check_name("model_weights.service_account", self.service_account, label=False)
        if self.kms_key_arn is None or not cdk.Token.is_unresolved(self.kms_key_arn):
            check_kms_key_arn("model_weights.kms_key_arn", self.kms_key_arn)
        check_boundary("model_weights.permissions_boundary", self.permissions_boundary)


@dataclass(frozen=True, kw_only=True)
class ModelWeightsAccessProps(ModelWeightsAccessOptions):
    """`ModelWeightsAccessOptions` on one cluster (`InferenceCluster.add_model_weights_access` fills it in)."""

    cluster: eks.ICluster


class ModelWeightsAccess(Construct):
    """Adds read-only weight access to the service account's Pod Identity role (created on first use)."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: ModelWeightsAccessProps) -> None:
        props.validate()
        super().__init__(scope, id)
        bucket = s3.Bucket.from_bucket_name(self, "Bucket", props.bucket_name)
        self.identity = PodIdentityRole.for_service_account(props.cluster, props.namespace, props.service_account)
        self.role = self.identity.role
        harden_roles(self.identity, props.permissions_boundary)
        objects = bucket.arn_for_objects(f"{props.prefix}*")
        read = iam.PolicyStatement(sid="ReadModelWeights", actions=["s3:GetObject"], resources=[objects])
        self.role.add_to_principal_policy(read)
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ListModelWeights",
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [props.prefix, f"{props.prefix}*"]}},
            )
        )
        if props.kms_key_arn is not None:
            self.role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="DecryptModelWeights",
                    actions=["kms:Decrypt"],
                    resources=[props.kms_key_arn],
                    # Only as S3 decrypts objects for this role, never a direct Decrypt call.
                    conditions={"StringEquals": {"kms:ViaService": f"s3.{cdk.Stack.of(self).region}.amazonaws.com"}},
                )
            )
        # The finding as cdk-nag spells it: `arn:<AWS::Partition>:s3:::<bucket>/<prefix>*`, a token bucket name as
        # `<LogicalId>`.
        for finding in iam5_findings(self, iam.PolicyDocument(statements=[read])):
            acknowledge(
                self.role.node.find_child("DefaultPolicy"),
                finding,
                "Object-level read of one model's files: the wildcard is the key prefix, nothing wider.",
            )
