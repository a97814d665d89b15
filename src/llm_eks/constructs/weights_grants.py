"""The IAM statements `WeightsBucket` grants, one function per kind of grantee, and the compile caches' signing key.

Each function adds to one role's policy exactly what its job needs on one key prefix, and returns the object-level
statement (the one whose wildcard is the prefix) for the caller to acknowledge. KMS use is always through S3
(`kms:ViaService`), never a direct call, except the signing key's kms:Sign and kms:Verify.
"""

from __future__ import annotations

import re

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct


def sid(stem: str, prefix: str) -> str:
    """A statement id per prefix (IAM wants them unique in a policy, letters and digits only)."""
    return stem + "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", prefix) if part)


def _through_s3(role: iam.IRole, key: kms.IKey | None, statement_id: str, actions: list[str]) -> None:
    if key is None:
        return
    region = cdk.Stack.of(key).region
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid=statement_id,
            actions=actions,
            resources=[key.key_arn],
            conditions={"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}},
        )
    )


def _list(role: iam.IRole, bucket: s3.IBucket, statement_id: str, prefix: str) -> None:
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid=statement_id,
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [prefix, f"{prefix}*"]}},
        )
    )


def grant_stager(role: iam.IRole, bucket: s3.IBucket, key: kms.IKey | None, prefix: str) -> iam.PolicyStatement:
    """A staging Job: get, put and multipart on `<prefix>*`, list under it, encrypt and decrypt through S3."""
    stage = iam.PolicyStatement(
        sid=sid("StageModelWeights", prefix),
        actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
        resources=[bucket.arn_for_objects(f"{prefix}*")],
    )
    role.add_to_principal_policy(stage)
    _list(role, bucket, sid("ListStagedModelWeights", prefix), prefix)
    # A multipart upload needs both.
    _through_s3(role, key, sid("EncryptStagedModelWeights", prefix), ["kms:GenerateDataKey", "kms:Decrypt"])
    return stage


def grant_object_reader(
    role: iam.IRole, bucket: s3.IBucket, key: kms.IKey | None, prefix: str, names: tuple[str, ...]
) -> None:
    """Exactly the objects `<prefix><name>`: get and decrypt through S3, no list."""
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid=sid("ReadObjects", prefix),
            actions=["s3:GetObject"],
            resources=[bucket.arn_for_objects(f"{prefix}{name}") for name in names],
        )
    )
    _through_s3(role, key, sid("DecryptObjects", prefix), ["kms:Decrypt"])


def grant_cache_writer(
    role: iam.IRole, bucket: s3.IBucket, key: kms.IKey, prefix: str, signing_key: kms.IKey
) -> iam.PolicyStatement:
    """The compile cache's writer: get and put on `<prefix>*` (the bucket policy admits a put there only with
    If-None-Match), list under it, encrypt and decrypt through S3, and kms:Sign on the signing key."""
    write = iam.PolicyStatement(
        sid=sid("AddCompileCache", prefix),
        actions=["s3:GetObject", "s3:PutObject"],
        resources=[bucket.arn_for_objects(f"{prefix}*")],
    )
    role.add_to_principal_policy(write)
    _list(role, bucket, sid("ListCompileCache", prefix), prefix)
    _through_s3(role, key, sid("EncryptCompileCache", prefix), ["kms:GenerateDataKey", "kms:Decrypt"])
    signing_key.grant(role, "kms:Sign")
    return write


def grant_prefix_reader(
    role: iam.IRole, bucket: s3.IBucket, key: kms.IKey | None, prefix: str, stem: str
) -> iam.PolicyStatement:
    """Get on `<prefix>*`, list under it, decrypt through S3; statement ids `<stem>...` per prefix, so one role
    may read several prefixes."""
    read = iam.PolicyStatement(
        sid=sid(f"Read{stem}", prefix),
        actions=["s3:GetObject"],
        resources=[bucket.arn_for_objects(f"{prefix}*")],
    )
    role.add_to_principal_policy(read)
    _list(role, bucket, sid(f"List{stem}", prefix), prefix)
    _through_s3(role, key, sid(f"Decrypt{stem}", prefix), ["kms:Decrypt"])
    return read


def grant_cache_reader(
    role: iam.IRole, bucket: s3.IBucket, key: kms.IKey | None, prefix: str, signing_key: kms.IKey
) -> iam.PolicyStatement:
    """A serving pod's read of the compile cache: get on `<prefix>*`, list under it, decrypt through S3, and
    kms:Verify on the signing key (it checks the writer's signature; it can sign nothing)."""
    read = grant_prefix_reader(role, bucket, key, prefix, "CompileCache")
    signing_key.grant(role, "kms:Verify")
    return read


def cache_signing_key(
    scope: Construct, id: str, removal_policy: cdk.RemovalPolicy, writers: list[iam.IRole]
) -> kms.Key:
    """ECDSA P-256, sign and verify only; its key policy refuses kms:Sign to every principal but `writers` (read at
    synth, so roles added after the key is made count too)."""
    key = kms.Key(
        scope,
        id,
        description=f"Signs the compile-cache manifests of {cdk.Stack.of(scope).stack_name}",
        key_spec=kms.KeySpec.ECC_NIST_P256,
        key_usage=kms.KeyUsage.SIGN_VERIFY,
        # Asymmetric keys cannot rotate (KMS EnableKeyRotation); a new key means the caches re-publish.
        removal_policy=removal_policy,
        pending_window=cdk.Duration.days(30),
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="OnlyTheCacheWritersSign",
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["kms:Sign"],
            resources=["*"],
            conditions={"ArnNotEquals": {"aws:PrincipalArn": cdk.Lazy.list(_RoleArns(writers))}},
        )
    )
    return key


@jsii.implements(cdk.IStableListProducer)
class _RoleArns:
    """The ARNs of roles added until synth (the cache writers), for a policy written before the last one exists."""

    def __init__(self, roles: list[iam.IRole]) -> None:
        self._roles = roles

    def produce(self) -> list[str]:
        return [role.role_arn for role in self._roles]
