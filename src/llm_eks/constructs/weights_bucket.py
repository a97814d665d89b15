"""`WeightsBucket`: an S3 bucket for model weights that the environment owns, encrypted with its own KMS key, and
the Pod Identity grants on it (read-only for serving pods, add-only for a staging Job).

The bucket:
- has no explicit name: S3 names are global and the default environments are env-agnostic (synth cannot know the
  account), so CloudFormation generates one; `bucket_name` is that token, for charts and other constructs;
- is SSE-KMS with a key of its own (yearly rotation) and an S3 Bucket Key: a model streamed in thousands of ranged
  GETs then costs a few KMS calls instead of one per request (and stays clear of KMS request quotas);
- refuses plain HTTP and TLS older than 1.2 (bucket policy), blocks every kind of public access, and disables ACLs
  (bucket owner enforced);
- keeps no versions: weights can always be downloaded again from their source, and versions would double the storage
  on every restage of the same files;
- aborts multipart uploads left behind by a failed staging Job after `abort_incomplete_upload_days`, since S3 bills
  their parts until then and nothing else lists them;
- has no server access logs: object access is auditable in CloudTrail data events, and an access-log bucket would
  itself be unlogged.

Grants go on the service account's shared Pod Identity role (`PodIdentityRole.for_service_account`: EKS allows one
association per service account), each for exactly one key prefix. `add_reader` is `ModelWeightsAccess` on this
bucket and key, so weights in an environment-owned bucket and in an existing one are read with the same statements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from llm_eks.constructs.addons import PodIdentityRole, check_boundary, check_kms_key_arn, check_name, harden_roles
from llm_eks.constructs.karpenter_policies import iam5_findings
from llm_eks.constructs.model_access import (
    ModelWeightsAccess,
    ModelWeightsAccessProps,
    check_bucket_name,
    check_prefix,
)
from llm_eks.constructs.nag import acknowledge, skip_checkov
from llm_eks.errors import ConfigError, errors_at, named_errors

# S3 has no snapshots; the other policies are what CloudFormation offers for a bucket.
_REMOVAL_POLICIES = (cdk.RemovalPolicy.RETAIN, cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE, cdk.RemovalPolicy.DESTROY)
# KMS alias names: `alias/` and 1-250 of letters, digits, '/', '_', '-'; `alias/aws/` is reserved for AWS.
_ALIAS = re.compile(r"^alias/[a-zA-Z0-9/_-]{1,250}$")


@dataclass(frozen=True)
class WeightsBucketOptions:
    """Bucket options; every default is the production-right one."""

    # RETAIN: restaging the weights takes an hour or more, and the bucket may be shared by other stacks or people;
    # delete it by hand. DESTROY deletes bucket and key with the stack, and fails while the bucket still holds
    # objects (no auto_delete_objects: that needs one more custom-resource Lambda).
    removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN
    # A week outlives any staging retry, and stops paying for the parts of uploads that will never complete.
    abort_incomplete_upload_days: int = 7
    # Aliases are unique per account and region, so none by default: two environments in one account would collide.
    key_alias: str | None = None
    # Your organisation's permissions boundary on each role `add_reader`/`add_stager` hands out; None: no boundary.
    permissions_boundary: iam.IManagedPolicy | None = None
    # An existing bucket to grant on instead of creating one (nothing of it is changed, and the options above that
    # shape the bucket do not apply); None: create the bucket and its key.
    existing_bucket_name: str | None = None
    # The existing bucket's customer managed key, when it uses SSE-KMS with one; None: SSE-S3 (no key grant).
    existing_kms_key_arn: str | None = None

    def validate(self) -> None:
        if self.removal_policy not in _REMOVAL_POLICIES:
            raise ConfigError(
                f"weights_bucket.removal_policy: {self.removal_policy} is not allowed; must be RemovalPolicy.RETAIN, "
                "RETAIN_ON_UPDATE_OR_DELETE or DESTROY (S3 has no snapshots)"
            )
        days = self.abort_incomplete_upload_days
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 365:
            raise ConfigError(
                f"weights_bucket.abort_incomplete_upload_days: {days!r} is not allowed; must be a whole number of "
                "days from 1 to 365"
            )
        alias = self.key_alias
        if alias is not None and (not _ALIAS.match(alias) or alias.startswith("alias/aws/")):
            raise ConfigError(
                f"weights_bucket.key_alias: {alias!r} is not allowed; must be 'alias/' and 1-250 of letters, digits, "
                "'/', '_', '-' (not 'alias/aws/', which AWS reserves)"
            )
        check_boundary("weights_bucket.permissions_boundary", self.permissions_boundary)
        if self.existing_bucket_name is not None and not cdk.Token.is_unresolved(self.existing_bucket_name):
            check_bucket_name("weights_bucket.existing_bucket_name", self.existing_bucket_name)
        if self.existing_kms_key_arn is not None:
            if self.existing_bucket_name is None:
                raise ConfigError(
                    "weights_bucket.existing_kms_key_arn: only allowed with existing_bucket_name (a created bucket "
                    "has its own key)"
                )
            check_kms_key_arn("weights_bucket.existing_kms_key_arn", self.existing_kms_key_arn)


@dataclass(frozen=True, kw_only=True)
class WeightsBucketProps(WeightsBucketOptions):
    """`WeightsBucketOptions` on one cluster (whose service accounts get the grants)."""

    cluster: eks.ICluster


class WeightsBucket(Construct):
    """The bucket and its key; `add_reader` and `add_stager` grant one service account one key prefix.

    Charts whose pods read or stage weights must depend on the identity these return (its role, policy and Pod
    Identity association): a pod admitted before the association exists gets no credentials.
    """

    @named_errors
    def __init__(self, scope: Construct, id: str, props: WeightsBucketProps) -> None:
        props.validate()
        super().__init__(scope, id)
        self.props = props
        self._cluster = props.cluster
        self._readers: dict[tuple[str, str], tuple[str, PodIdentityRole]] = {}
        self._stagers: dict[tuple[str, str, str], PodIdentityRole] = {}
        self.key: kms.IKey | None
        self.bucket: s3.IBucket
        if props.existing_bucket_name is not None:
            self.bucket = s3.Bucket.from_bucket_name(self, "Bucket", props.existing_bucket_name)
            self.key = (
                None
                if props.existing_kms_key_arn is None
                else kms.Key.from_key_arn(self, "Key", props.existing_kms_key_arn)
            )
        else:
            self.key, self.bucket = self._create(props)
        self.bucket_name = self.bucket.bucket_name
        self.bucket_arn = self.bucket.bucket_arn

    def _create(self, props: WeightsBucketProps) -> tuple[kms.IKey, s3.IBucket]:
        key = kms.Key(
            self,
            "Key",
            description=f"Encrypts the model weights bucket of {cdk.Stack.of(self).stack_name}",
            alias=props.key_alias,
            # Yearly rotation, as cdk-nag and CIS expect; old key material keeps decrypting old objects.
            enable_key_rotation=True,
            # The key goes (or stays) with the bucket: a retained bucket whose key is deleted is unreadable.
            removal_policy=props.removal_policy,
            # 30 days lets an accidental delete be cancelled.
            pending_window=cdk.Duration.days(30),
        )
        bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=key,
            bucket_key_enabled=True,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=False,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="AbortIncompleteMultipartUploads",
                    abort_incomplete_multipart_upload_after=cdk.Duration.days(props.abort_incomplete_upload_days),
                )
            ],
            removal_policy=props.removal_policy,
        )
        acknowledge(
            bucket,
            "S1",
            "Object access is auditable in CloudTrail data events; an access-log bucket would itself be unlogged.",
        )
        for check_id, reason in {
            "CKV_AWS_18": "Object access is auditable in CloudTrail data events; a log bucket would be unlogged.",
            "CKV_AWS_21": "Weights are re-downloadable from their source; versions would double storage on a restage.",
        }.items():
            skip_checkov(bucket, check_id, reason)
        return key, bucket

    def add_reader(self, namespace: str, service_account: str, prefix: str) -> PodIdentityRole:
        """Read-only access for `namespace/service_account` to the objects under `prefix`: `s3:GetObject` on
        `<prefix>*`, `s3:ListBucket` for keys under the prefix, `kms:Decrypt` only through S3 (`ModelWeightsAccess`).

        One prefix per reader (its statement ids are fixed, and IAM wants them unique in a policy): a pod that reads
        several models gets their common parent prefix. Returns the service account's Pod Identity role.
        """
        with errors_at(self.node.path):
            self._check_grantee("weights_bucket.reader", namespace, service_account, prefix)
            granted = self._readers.get((namespace, service_account))
            if granted is not None:
                if granted[0] == prefix:
                    return granted[1]
                raise ConfigError(
                    f"weights_bucket.reader.prefix: {prefix!r} is not allowed; {namespace}/{service_account} already "
                    f"reads {granted[0]!r} (one prefix per reader: grant a common parent prefix instead)"
                )
        access = ModelWeightsAccess(
            self,
            f"Reader-{namespace}-{service_account}",
            ModelWeightsAccessProps(
                cluster=self._cluster,
                bucket_name=self.bucket_name,
                prefix=prefix,
                service_account=service_account,
                namespace=namespace,
                kms_key_arn=None if self.key is None else self.key.key_arn,
                permissions_boundary=self.props.permissions_boundary,
            ),
        )
        self._readers[(namespace, service_account)] = (prefix, access.identity)
        return access.identity

    def add_stager(self, namespace: str, service_account: str, prefix: str) -> PodIdentityRole:
        """Add-only access for a staging Job's `namespace/service_account` to the objects under `prefix`.

        Grants `s3:GetObject`, `s3:PutObject`, `s3:AbortMultipartUpload` and `s3:ListMultipartUploadParts` on
        `<prefix>*`; `s3:ListBucket` for keys under the prefix (to skip files already staged); `kms:GenerateDataKey`
        and `kms:Decrypt` only through S3 (a multipart upload needs both). No `s3:DeleteObject`: a staging Job only
        adds files, so a bad source or a wrong prefix can never remove weights a running model reads (an overwrite is
        still possible; removing files is a deliberate act by hand). No `s3:ListBucketMultipartUploads`: S3 cannot
        scope it to a prefix (it has no `s3:prefix` key), the uploader tracks its own uploads, and the lifecycle rule
        aborts the ones left behind. Returns the service account's Pod Identity role.
        """
        with errors_at(self.node.path):
            self._check_grantee("weights_bucket.stager", namespace, service_account, prefix)
            for ns, sa, other in self._stagers:
                if (ns, sa) == (namespace, service_account) and other != prefix and _sid("", other) == _sid("", prefix):
                    raise ConfigError(
                        f"weights_bucket.stager.prefix: {prefix!r} is not allowed; its statement ids would repeat "
                        f"those of {other!r} (IAM wants them unique in a policy)"
                    )
        existing = self._stagers.get((namespace, service_account, prefix))
        if existing is not None:
            return existing
        identity = PodIdentityRole.for_service_account(self._cluster, namespace, service_account)
        harden_roles(identity, self.props.permissions_boundary)
        role = identity.role
        stage = iam.PolicyStatement(
            sid=_sid("StageModelWeights", prefix),
            actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
            resources=[self.bucket.arn_for_objects(f"{prefix}*")],
        )
        role.add_to_principal_policy(stage)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid=_sid("ListStagedModelWeights", prefix),
                actions=["s3:ListBucket"],
                resources=[self.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [prefix, f"{prefix}*"]}},
            )
        )
        if self.key is not None:
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid=_sid("EncryptStagedModelWeights", prefix),
                    actions=["kms:GenerateDataKey", "kms:Decrypt"],
                    resources=[self.key.key_arn],
                    # Only as S3 encrypts and decrypts objects for this role, never a direct call.
                    conditions={"StringEquals": {"kms:ViaService": f"s3.{cdk.Stack.of(self).region}.amazonaws.com"}},
                )
            )
        for finding in iam5_findings(self, iam.PolicyDocument(statements=[stage])):
            acknowledge(
                role.node.find_child("DefaultPolicy"),
                finding,
                "Object-level staging of one model's files: the wildcard is the key prefix, nothing wider.",
            )
        self._stagers[(namespace, service_account, prefix)] = identity
        return identity

    @staticmethod
    def _check_grantee(field: str, namespace: str, service_account: str, prefix: str) -> None:
        check_name(f"{field}.namespace", namespace, label=True)
        check_name(f"{field}.service_account", service_account, label=False)
        check_prefix(f"{field}.prefix", prefix)


def _sid(stem: str, prefix: str) -> str:
    """A statement id per prefix (IAM wants them unique in a policy, letters and digits only)."""
    return stem + "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", prefix) if part)
