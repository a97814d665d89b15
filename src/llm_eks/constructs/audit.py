"""`ObjectAccessTrail`: a CloudTrail trail that records every object-level request (S3 data events, reads and writes)
on the buckets it is given, into a log bucket of its own.

Why a trail rather than S3 server access logs: a data event names the IAM principal (the Pod Identity role, so the
workload), the VPC endpoint the request came through and the result, is delivered within minutes rather than best
effort, and CloudTrail signs a digest of each hour's files (log file validation), so a deleted or edited record shows.

The trail records data events only (`management_events` NONE): the account's own trail, or the organisation's,
records API calls that change resources, and a second copy of those is billed. It lives in the stack's region
(the buckets' region; a data event is recorded where the bucket is). Log files are encrypted with a KMS key of the
trail's own, whose policy lets CloudTrail use it for this trail only (`aws:SourceArn`, as AWS's "Configure AWS KMS
key policies for CloudTrail" recommends); reading them takes kms:Decrypt, which IAM in the account may grant.

CloudTrail bills each data event. A model loaded in ranged GETs is one event per range, so a cold start of a large
model is tens of thousands of events; turn the trail off (`WeightsBucketConfig.data_events_trail`) only where an
organisation trail already records these buckets.

The log bucket cannot be purged in place: S3 Object Lock (versioned, as every bucket of ours) with a default
retention of `retention_days` on every log and digest file. COMPLIANCE (the default) lets no principal of the account,
root included, delete or overwrite a version before its retention ends; GOVERNANCE lets a principal holding
s3:BypassGovernanceRetention delete one with the bypass header, which is how a non-production environment is still
torn down at once. The stack takes COMPLIANCE for a production environment and GOVERNANCE otherwise. Object Lock on
an existing bucket is an update in place (CloudFormation's AWS::S3::Bucket schema: neither ObjectLockEnabled nor
ObjectLockConfiguration is create-only), and it can never be turned off again.
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudtrail as cloudtrail
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from llm_eks.constructs.buckets import private_bucket
from llm_eks.constructs.nag import acknowledge, skip_checkov
from llm_eks.error_codes import E307
from llm_eks.errors import ConfigError, named_errors

_REMOVAL_POLICIES = (cdk.RemovalPolicy.RETAIN, cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE, cdk.RemovalPolicy.DESTROY)
# S3 Object Lock retention modes (the CloudFormation DefaultRetention Mode enum).
LOCK_MODES = ("COMPLIANCE", "GOVERNANCE")


@dataclass(frozen=True)
class ObjectAccessTrailProps:
    """The buckets to record and how long the records stay."""

    # The buckets whose object-level requests are recorded (at least one; CloudTrail allows up to 250 per selector).
    buckets: tuple[s3.IBucket, ...]
    # A year: long enough for an incident found late, as most audit regimes ask; then the log files expire.
    retention_days: int = 365
    # RETAIN: audit records outlive the stack they describe (delete the log bucket by hand).
    removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN
    # None: `<stack name>-object-access` (trail names are unique per account and region).
    trail_name: str | None = None
    # S3 Object Lock on the log bucket, each file retained `retention_days`: COMPLIANCE, nobody in the account can
    # delete a record before then; GOVERNANCE, a principal with s3:BypassGovernanceRetention can (a non-production
    # environment's teardown). Never None: the records must not be purged from inside the account they audit.
    lock_mode: str = "COMPLIANCE"

    def validate(self) -> None:
        if not self.buckets or len(self.buckets) > 250:
            raise ConfigError(
                E307, f"object_access_trail.buckets: {len(self.buckets)} buckets is not allowed; give 1 to 250"
            )
        days = self.retention_days
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 3650:
            raise ConfigError(
                E307,
                f"object_access_trail.retention_days: {days!r} is not allowed; must be a whole number of days "
                "from 1 to 3650",
            )
        if self.lock_mode not in LOCK_MODES:
            raise ConfigError(
                E307,
                f"object_access_trail.lock_mode: {self.lock_mode!r} is not allowed; must be one of "
                f"{', '.join(LOCK_MODES)}",
            )
        if self.removal_policy not in _REMOVAL_POLICIES:
            raise ConfigError(
                E307,
                f"object_access_trail.removal_policy: {self.removal_policy} is not allowed; must be "
                "RemovalPolicy.RETAIN, RETAIN_ON_UPDATE_OR_DELETE or DESTROY",
            )
        name = self.trail_name
        if name is not None and not _valid_trail_name(name):
            raise ConfigError(
                E307,
                f"object_access_trail.trail_name: {name!r} is not allowed; must be 3-128 of letters, digits, '.', "
                "'_', '-', start and end with a letter or digit",
            )


# Why a bucket this trail records has no server access logs (cdk-nag S1, checkov CKV_AWS_18).
RECORDED_BY_THIS_TRAIL = "Object access is recorded by this stack's CloudTrail trail (S3 data events)."


def record_access_elsewhere(bucket: IConstruct, reason: str) -> None:
    """Acknowledge a bucket's missing server access logs (cdk-nag S1, checkov CKV_AWS_18) with where its object
    access is recorded instead."""
    acknowledge(bucket, "S1", reason)
    skip_checkov(bucket, "CKV_AWS_18", reason)


def _valid_trail_name(name: str) -> bool:
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
    return 3 <= len(name) <= 128 and set(name) <= allowed and name[0].isalnum() and name[-1].isalnum()


class ObjectAccessTrail(Construct):
    """The trail, its log bucket and its key. `trail_arn`, `log_bucket` and `key` are there to grant readers on."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: ObjectAccessTrailProps) -> None:
        props.validate()
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        name = props.trail_name or f"{stack.stack_name}-object-access"[:128]
        if not _valid_trail_name(name):
            raise ConfigError(
                E307, f"object_access_trail.trail_name: {name!r} is not allowed; name the trail explicitly"
            )
        # Built from the name (not the trail's GetAtt), so the key and bucket policies can name it without a cycle.
        self.trail_arn = stack.format_arn(service="cloudtrail", resource="trail", resource_name=name)
        self.key = kms.Key(
            self,
            "Key",
            description=f"Encrypts the object-access trail of {stack.stack_name}",
            enable_key_rotation=True,
            removal_policy=props.removal_policy,
            pending_window=cdk.Duration.days(30),
        )
        this_trail = {"StringEquals": {"aws:SourceArn": self.trail_arn}}
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudTrailEncryptsThisTrailsLogs",
                principals=[iam.ServicePrincipal("cloudtrail.amazonaws.com")],
                actions=["kms:GenerateDataKey*"],
                resources=["*"],
                conditions={
                    **this_trail,
                    "StringLike": {
                        "kms:EncryptionContext:aws:cloudtrail:arn": stack.format_arn(
                            service="cloudtrail", region="*", resource="trail", resource_name="*"
                        )
                    },
                },
            )
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudTrailDescribesTheKey",
                principals=[iam.ServicePrincipal("cloudtrail.amazonaws.com")],
                actions=["kms:DescribeKey"],
                resources=["*"],
                conditions=this_trail,
            )
        )
        self.log_bucket = private_bucket(
            self,
            "Logs",
            # Each log file is SSE-KMS with the trail's key (the trail's KMSKeyId); the default covers nothing else.
            encryption=s3.BucketEncryption.S3_MANAGED,
            # Versioned (private_bucket) and locked: no version of a log file can be deleted or overwritten before
            # it is retention_days old (GOVERNANCE: unless a principal bypasses the lock on purpose).
            object_lock_enabled=True,
            object_lock_default_retention=(
                s3.ObjectLockRetention.compliance(cdk.Duration.days(props.retention_days))
                if props.lock_mode == "COMPLIANCE"
                else s3.ObjectLockRetention.governance(cdk.Duration.days(props.retention_days))
            ),
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="ExpireAuditRecords",
                    expiration=cdk.Duration.days(props.retention_days),
                    noncurrent_version_expiration=cdk.Duration.days(props.retention_days),
                )
            ],
            removal_policy=props.removal_policy,
        )
        # CDK's trail policy admits CloudTrail for any trail of the account; this one only.
        self.log_bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyThisTrailDelivers",
                effect=iam.Effect.DENY,
                principals=[iam.ServicePrincipal("cloudtrail.amazonaws.com")],
                actions=["s3:PutObject"],
                resources=[self.log_bucket.arn_for_objects("*")],
                conditions={"StringNotEquals": {"aws:SourceArn": self.trail_arn}},
            )
        )
        acknowledge(
            self.log_bucket,
            "S1",
            "The audit log bucket: Object Lock keeps every record, CloudTrail's signed digests show tampering.",
        )
        skip_checkov(
            self.log_bucket,
            "CKV_AWS_18",
            "The audit log bucket: Object Lock keeps every record; digests show tampering.",
        )
        skip_checkov(self.log_bucket, "CKV_AWS_145", "Every log file is SSE-KMS with the trail's key (its KMSKeyId).")
        self.trail = cloudtrail.Trail(
            self,
            "Trail",
            trail_name=name,
            bucket=self.log_bucket,
            encryption_key=self.key,
            enable_file_validation=True,
            management_events=cloudtrail.ReadWriteType.NONE,
            include_global_service_events=False,
            is_multi_region_trail=False,
        )
        self.trail.add_s3_event_selector(
            [cloudtrail.S3EventSelector(bucket=b) for b in props.buckets],
            read_write_type=cloudtrail.ReadWriteType.ALL,
            include_management_events=False,
        )
        skip_checkov(
            self.trail, "CKV_AWS_67", "Records data events of buckets in this region; management events stay elsewhere."
        )
        for bucket in props.buckets:
            if isinstance(bucket.node.default_child, cdk.CfnResource):  # a bucket of this app, not an imported one
                record_access_elsewhere(bucket, RECORDED_BY_THIS_TRAIL)
