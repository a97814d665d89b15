"""`WeightsBucket`: an S3 bucket for model weights that the environment owns, encrypted with its own KMS key, and
the Pod Identity grants on it (read-only for serving pods, add-only for a staging Job).

The bucket:
- has no explicit name: S3 names are global and the default environments are env-agnostic (synth cannot know the
  account), so CloudFormation generates one; `bucket_name` is that token, for charts and other constructs;
- is SSE-KMS with a key of its own (yearly rotation) and an S3 Bucket Key: a model streamed in thousands of ranged
  GETs then costs a few KMS calls instead of one per request (and stays clear of KMS request quotas);
- refuses plain HTTP and TLS older than 1.2 (bucket policy), blocks every kind of public access, and disables ACLs
  (bucket owner enforced);
- keeps versions, and lets a replaced or deleted object's old version expire after `noncurrent_version_days`: an
  overwrite (by the staging Job, or by hand) can be undone for that long, and nothing else writes twice;
- refuses, for every principal, a write under `compile-cache/` without `If-None-Match` (the S3 condition keys
  `s3:if-none-match` and `s3:ObjectCreationOperation`): each object there is written once, never replaced; so is
  each staging key's marker under `staging-markers/` (one per key: a new key never replaces the running one's);
- aborts multipart uploads left behind by a failed staging Job after `abort_incomplete_upload_days`, since S3 bills
  their parts until then and nothing else lists them;
- with `vpc_endpoint_ids`, refuses object requests and listings from anywhere but those S3 endpoints (and the
  roles exempted by name), so credentials taken from a pod cannot read or write weights from outside the VPC;
- has no server access logs: the stack records its object access with S3 data events in a CloudTrail trail of its
  own (`ObjectAccessTrail`, constructs/audit.py), which names the principal and the endpoint of each request, and
  which acknowledges the missing access logs on the bucket; a bucket no trail records keeps the findings.

The compile caches it holds are signed with an asymmetric KMS key of their own (ECC_NIST_P256, SIGN_VERIFY),
created with the first cache writer: its key policy refuses kms:Sign to every principal but the writers' roles, so
a serving pod that reads the cache can verify a manifest and never forge one.

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

from llm_eks import aws_ids
from llm_eks.constructs.addons import PodIdentityRole, check_boundary, check_kms_key_arn, check_name, harden_roles
from llm_eks.constructs.buckets import private_bucket
from llm_eks.constructs.model_access import (
    ModelWeightsAccess,
    ModelWeightsAccessProps,
    check_bucket_name,
    check_prefix,
)
from llm_eks.constructs.nag import acknowledge, iam5_findings
from llm_eks.constructs.weights_grants import (
    cache_signing_key,
    grant_cache_reader,
    grant_cache_writer,
    grant_object_reader,
    grant_prefix_reader,
    grant_stager,
    sid,
)
from llm_eks.error_codes import E305
from llm_eks.errors import ConfigError, errors_at, named_errors
from llm_eks.manifests.weights_staging import COMPILE_CACHE_ROOT, MARKERS

# S3 has no snapshots; the other policies are what CloudFormation offers for a bucket.
_REMOVAL_POLICIES = (cdk.RemovalPolicy.RETAIN, cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE, cdk.RemovalPolicy.DESTROY)
# What the endpoint rule covers: reading, writing, deleting and listing objects and their versions and uploads.
OBJECT_ACTIONS = [
    "s3:GetObject*",
    "s3:PutObject*",
    "s3:DeleteObject*",
    "s3:RestoreObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
    "s3:ListBucket",
    "s3:ListBucketVersions",
    "s3:ListBucketMultipartUploads",
]
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
    # A month to notice and undo an overwrite or a delete, then the old version stops costing storage.
    noncurrent_version_days: int = 30
    # Aliases are unique per account and region, so none by default: two environments in one account would collide.
    key_alias: str | None = None
    # Your organisation's permissions boundary on each role `add_reader`/`add_stager` hands out; None: no boundary.
    permissions_boundary: iam.IManagedPolicy | None = None
    # An existing bucket to grant on instead of creating one (nothing of it is changed, and the options above that
    # shape the bucket do not apply); None: create the bucket and its key.
    existing_bucket_name: str | None = None
    # The existing bucket's customer managed key, when it uses SSE-KMS with one; None: SSE-S3 (no key grant).
    existing_kms_key_arn: str | None = None
    # Object requests and listings only through these S3 VPC endpoints (`aws:SourceVpce`), so a pod's credentials
    # copied off a node are useless elsewhere. Empty: wherever IAM allows (the stack passes its VPC's endpoint).
    vpc_endpoint_ids: tuple[str, ...] = ()
    # Roles exempt from the endpoint rule: people and pipelines that work on the bucket from outside the VPC (the
    # stack passes the environment's admin roles, who can reach it through any pod anyway).
    outside_vpc_role_arns: tuple[str, ...] = ()

    def validate(self) -> None:
        if self.removal_policy not in _REMOVAL_POLICIES:
            raise ConfigError(
                E305,
                f"weights_bucket.removal_policy: {self.removal_policy} is not allowed; must be RemovalPolicy.RETAIN, "
                "RETAIN_ON_UPDATE_OR_DELETE or DESTROY (S3 has no snapshots)",
            )
        days = self.abort_incomplete_upload_days
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 365:
            raise ConfigError(
                E305,
                f"weights_bucket.abort_incomplete_upload_days: {days!r} is not allowed; must be a whole number of "
                "days from 1 to 365",
            )
        days = self.noncurrent_version_days
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 3650:
            raise ConfigError(
                E305,
                f"weights_bucket.noncurrent_version_days: {days!r} is not allowed; must be a whole number of days "
                "from 1 to 3650",
            )
        alias = self.key_alias
        if alias is not None and (not _ALIAS.match(alias) or alias.startswith("alias/aws/")):
            raise ConfigError(
                E305,
                f"weights_bucket.key_alias: {alias!r} is not allowed; must be 'alias/' and 1-250 of letters, digits, "
                "'/', '_', '-' (not 'alias/aws/', which AWS reserves)",
            )
        check_boundary("weights_bucket.permissions_boundary", self.permissions_boundary)
        if self.existing_bucket_name is not None and not cdk.Token.is_unresolved(self.existing_bucket_name):
            check_bucket_name("weights_bucket.existing_bucket_name", self.existing_bucket_name)
        if self.existing_kms_key_arn is not None:
            if self.existing_bucket_name is None:
                raise ConfigError(
                    E305,
                    "weights_bucket.existing_kms_key_arn: only allowed with existing_bucket_name (a created bucket "
                    "has its own key)",
                )
            check_kms_key_arn("weights_bucket.existing_kms_key_arn", self.existing_kms_key_arn)
        if self.existing_bucket_name is not None and (self.vpc_endpoint_ids or self.outside_vpc_role_arns):
            raise ConfigError(
                E305,
                "weights_bucket.vpc_endpoint_ids: only allowed for a bucket this construct creates (an existing "
                "bucket's policy is its owner's)",
            )
        for i, endpoint in enumerate(self.vpc_endpoint_ids):
            if not cdk.Token.is_unresolved(endpoint) and not aws_ids.VPC_ENDPOINT_ID.match(endpoint):
                raise ConfigError(
                    E305,
                    f"weights_bucket.vpc_endpoint_ids[{i}]: {endpoint!r} is not allowed; must be a VPC endpoint id "
                    "(vpce- and 8 or 17 hex digits)",
                )
        if self.outside_vpc_role_arns and not self.vpc_endpoint_ids:
            raise ConfigError(
                E305,
                "weights_bucket.outside_vpc_role_arns: only allowed with vpc_endpoint_ids (nothing to be exempt from)",
            )
        for i, arn in enumerate(self.outside_vpc_role_arns):
            if not cdk.Token.is_unresolved(arn) and not aws_ids.ROLE_ARN.match(arn):
                raise ConfigError(
                    E305, f"weights_bucket.outside_vpc_role_arns[{i}]: {arn!r} is not allowed; must be an IAM role ARN"
                )


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
        self._cache_writers: list[iam.IRole] = []
        self._cache_prefixes: set[str] = set()
        self._signing_key: kms.Key | None = None
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
        bucket = private_bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=key,
            bucket_key_enabled=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="AbortIncompleteMultipartUploads",
                    abort_incomplete_multipart_upload_after=cdk.Duration.days(props.abort_incomplete_upload_days),
                ),
                s3.LifecycleRule(
                    id="ExpireOldVersions",
                    noncurrent_version_expiration=cdk.Duration.days(props.noncurrent_version_days),
                    expired_object_delete_marker=True,
                ),
            ],
            removal_policy=props.removal_policy,
        )
        # Add-only: under compile-cache/ an object is created once (If-None-Match), never replaced, by anyone; so is a
        # staging key's marker (its in-progress record, `.in-progress`, is rewritten while staging runs).
        for statement, objects in (
            ("DenyOverwritesOfTheCompileCache", f"{COMPILE_CACHE_ROOT}/*"),
            ("DenyOverwritesOfStagingMarkers", f"{MARKERS}*.json"),
        ):
            bucket.add_to_resource_policy(
                iam.PolicyStatement(
                    sid=statement,
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=["s3:PutObject"],
                    resources=[bucket.arn_for_objects(objects)],
                    conditions={"Null": {"s3:if-none-match": "true"}, "Bool": {"s3:ObjectCreationOperation": "true"}},
                )
            )
        if props.vpc_endpoint_ids:
            self._deny_outside_endpoints(bucket, props)
        # No server access logs: ObjectAccessTrail records its object access and acknowledges them (cdk-nag S1,
        # checkov CKV_AWS_18) on each bucket it records; a bucket recorded nowhere keeps both findings.
        return key, bucket

    @staticmethod
    def _deny_outside_endpoints(bucket: s3.Bucket, props: WeightsBucketProps) -> None:
        """Refuse object requests and listings that do not come through the named endpoints, except from the
        exempt roles. Bucket-level actions (CloudFormation's create, policy and lifecycle calls) are untouched."""
        conditions: dict[str, dict[str, object]] = {"StringNotEquals": {"aws:SourceVpce": list(props.vpc_endpoint_ids)}}
        if props.outside_vpc_role_arns:
            conditions["ArnNotEquals"] = {"aws:PrincipalArn": list(props.outside_vpc_role_arns)}
        bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="DenyObjectAccessOutsideTheVpc",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=OBJECT_ACTIONS,
                resources=[bucket.bucket_arn, bucket.arn_for_objects("*")],
                conditions=conditions,
            )
        )

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
                    E305,
                    f"weights_bucket.reader.prefix: {prefix!r} is not allowed; {namespace}/{service_account} already "
                    f"reads {granted[0]!r} (one prefix per reader: grant a common parent prefix instead)",
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
        adds files, so a bad source or a wrong prefix can never remove weights a running model reads (an overwrite
        leaves the old version for `noncurrent_version_days`). No `s3:ListBucketMultipartUploads`: S3 cannot scope it
        to a prefix (it has no `s3:prefix` key), the uploader tracks its own uploads, and the lifecycle rule aborts
        the ones left behind. Returns the service account's Pod Identity role.
        """
        with errors_at(self.node.path):
            self._check_grantee("weights_bucket.stager", namespace, service_account, prefix)
            for ns, sa, other in self._stagers:
                if (ns, sa) == (namespace, service_account) and other != prefix and sid("", other) == sid("", prefix):
                    raise ConfigError(
                        E305,
                        f"weights_bucket.stager.prefix: {prefix!r} is not allowed; its statement ids would repeat "
                        f"those of {other!r} (IAM wants them unique in a policy)",
                    )
        existing = self._stagers.get((namespace, service_account, prefix))
        if existing is not None:
            return existing
        identity = self._identity(namespace, service_account)
        stage = grant_stager(identity.role, self.bucket, self.key, prefix)
        self._acknowledge_prefix(identity, stage, "Object-level staging of one model's files")
        # Its markers and in-progress records, one per staging key, beside the other keys' (which it reads).
        markers = grant_stager(identity.role, self.bucket, self.key, f"{MARKERS}{prefix}")
        self._acknowledge_prefix(identity, markers, "The staging markers of one model's prefix")
        self._stagers[(namespace, service_account, prefix)] = identity
        return identity

    def add_marker_reader(self, namespace: str, service_account: str, prefix: str, key: str) -> PodIdentityRole:
        """What a pod waiting for staging key `key` of `prefix` reads: its marker and in-progress record
        (`staging-markers/<prefix><key>*`: s3:GetObject, s3:ListBucket so a missing one is a 404, kms:Decrypt
        through S3), no other key's. Returns the service account's Pod Identity role."""
        with errors_at(self.node.path):
            self._check_grantee("weights_bucket.marker_reader", namespace, service_account, prefix)
            if not re.fullmatch(r"[0-9a-f]{6,64}", key):
                raise ConfigError(
                    E305, f"weights_bucket.marker_reader.key: {key!r} is not allowed; must be a staging key"
                )
        identity = self._identity(namespace, service_account)
        read = grant_prefix_reader(identity.role, self.bucket, self.key, f"{MARKERS}{prefix}{key}", "StagingMarker")
        self._acknowledge_prefix(identity, read, "Reads of one staging key's marker")
        return identity

    def add_object_reader(
        self, namespace: str, service_account: str, prefix: str, names: tuple[str, ...]
    ) -> PodIdentityRole:
        """Read access for `namespace/service_account` to exactly the objects `<prefix><name>` (a benchmark's
        tokenizer files): `s3:GetObject` on those keys and `kms:Decrypt` through S3, no list, nothing else of the
        prefix. Returns the service account's Pod Identity role."""
        with errors_at(self.node.path):
            self._check_grantee("weights_bucket.object_reader", namespace, service_account, prefix)
            if not names or any(not re.fullmatch(r"[A-Za-z0-9._-]+", n) for n in names):
                raise ConfigError(
                    E305,
                    f"weights_bucket.object_reader.names: {list(names)!r} is not allowed; name 1 or more file names "
                    "of letters, digits and . _ -",
                )
        identity = self._identity(namespace, service_account)
        grant_object_reader(identity.role, self.bucket, self.key, prefix, names)
        return identity

    def add_adapter_reader(self, namespace: str, service_account: str, prefix: str) -> PodIdentityRole:
        """Read access for a serving pod to one staged LoRA adapter's prefix, beside the weights it reads
        (`add_reader`): s3:GetObject on `<prefix>*`, s3:ListBucket under it, kms:Decrypt through S3. Returns the
        service account's Pod Identity role."""
        with errors_at(self.node.path):
            self._check_grantee("weights_bucket.adapter_reader", namespace, service_account, prefix)
        identity = self._identity(namespace, service_account)
        read = grant_prefix_reader(identity.role, self.bucket, self.key, prefix, "Adapter")
        self._acknowledge_prefix(identity, read, "Object-level reads of one staged LoRA adapter")
        return identity

    @property
    def signing_key(self) -> kms.Key:
        """The compile caches' signing key (created on first use): ECDSA P-256, sign and verify only, and only the
        cache writers' roles may sign."""
        if self._signing_key is None:
            self._signing_key = cache_signing_key(
                self, "CacheSigningKey", self.props.removal_policy, self._cache_writers
            )
        return self._signing_key

    def add_cache_writer(self, namespace: str, service_account: str, prefix: str) -> PodIdentityRole:
        """The compile cache's writer (`namespace/service_account`, a Job that serves nothing): add-only on
        `<prefix>*` (s3:GetObject, s3:PutObject, which the bucket policy admits only with If-None-Match under
        compile-cache/), s3:ListBucket on the prefix, kms:GenerateDataKey and kms:Decrypt through S3, and kms:Sign on
        the signing key, which no one else may use to sign. Returns the service account's Pod Identity role."""
        with errors_at(self.node.path):
            self._check_grantee("weights_bucket.cache_writer", namespace, service_account, prefix)
            if not prefix.startswith(f"{COMPILE_CACHE_ROOT}/") or self.key is None:
                raise ConfigError(
                    E305,
                    f"weights_bucket.cache_writer.prefix: {prefix!r} is not allowed; a compile cache lives under "
                    f"{COMPILE_CACHE_ROOT}/ in a bucket this stack creates (whose policy makes it add-only)",
                )
        identity = self._identity(namespace, service_account)
        self._cache_writers.append(identity.role)
        self._cache_prefixes.add(prefix)
        write = grant_cache_writer(identity.role, self.bucket, self.key, prefix, self.signing_key)
        self._acknowledge_prefix(identity, write, "Object-level writes of one workload's compile cache")
        return identity

    def add_cache_reader(self, namespace: str, service_account: str, prefix: str) -> PodIdentityRole:
        """A serving pod's read of the compile cache: s3:GetObject on `<prefix>*`, s3:ListBucket on the prefix,
        kms:Decrypt through S3, and kms:Verify on the signing key (it checks the writer's signature; it can sign
        nothing). Returns the service account's Pod Identity role."""
        with errors_at(self.node.path):
            self._check_grantee("weights_bucket.cache_reader", namespace, service_account, prefix)
            if prefix not in self._cache_prefixes:
                raise ConfigError(
                    E305,
                    f"weights_bucket.cache_reader.prefix: {prefix!r} is not allowed; add its cache writer first "
                    "(add_cache_writer): without one nothing signs the manifests a reader verifies",
                )
        identity = self._identity(namespace, service_account)
        read = grant_cache_reader(identity.role, self.bucket, self.key, prefix, self.signing_key)
        self._acknowledge_prefix(identity, read, "Object-level reads of one workload's compile cache")
        return identity

    def _identity(self, namespace: str, service_account: str) -> PodIdentityRole:
        identity = PodIdentityRole.for_service_account(self._cluster, namespace, service_account)
        harden_roles(identity, self.props.permissions_boundary)
        return identity

    def _acknowledge_prefix(self, identity: PodIdentityRole, statement: iam.PolicyStatement, what: str) -> None:
        for finding in iam5_findings(self, iam.PolicyDocument(statements=[statement])):
            acknowledge(
                identity.role.node.find_child("DefaultPolicy"),
                finding,
                f"{what}: the wildcard is the key prefix, nothing wider.",
            )

    @staticmethod
    def _check_grantee(field: str, namespace: str, service_account: str, prefix: str) -> None:
        check_name(f"{field}.namespace", namespace, label=True)
        check_name(f"{field}.service_account", service_account, label=False)
        check_prefix(f"{field}.prefix", prefix)
