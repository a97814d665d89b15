"""Shapes of AWS identifiers, checked at synth so a typo fails with a named field instead of at deploy time.

Config, constructs and charts all validate the same identifiers; they share these patterns.
"""

import re

ACCOUNT = re.compile(r"^\d{12}$")
REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[0-9a-f-]+$")
# arn:aws:acm:<region>:<account>:certificate/<UUID> (the form ACM's API documents). Group 1: the region.
ACM_CERTIFICATE_ARN = re.compile(
    r"^arn:aws[a-z-]*:acm:([a-z0-9-]+):\d{12}:certificate/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
)
# EC2 ids: 8 hex digits (older resources) or 17.
VPC_ID = re.compile(r"^vpc-[0-9a-f]{8}([0-9a-f]{9})?$")
SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8}([0-9a-f]{9})?$")
SECURITY_GROUP_ID = re.compile(r"^sg-[0-9a-f]{8}([0-9a-f]{9})?$")
# As the Karpenter 1.14.1 EC2NodeClass CRD's placementGroupSelector.id pattern.
PLACEMENT_GROUP_ID = re.compile(r"^pg-[0-9a-z]+$")
SNAPSHOT_ID = re.compile(r"^snap-[0-9a-f]{8}([0-9a-f]{9})?$")
VPC_ENDPOINT_ID = re.compile(r"^vpce-[0-9a-f]{8}([0-9a-f]{9})?$")
# Secrets Manager secret names (the name, not the ARN).
SECRET_NAME = re.compile(r"^[A-Za-z0-9/_+=.@-]{1,512}$")
# IAM role NAME (not its ARN): 1-64 letters, digits and + = , . @ _ - (IAM's rule for role names).
ROLE_NAME = re.compile(r"^[A-Za-z0-9+=,.@_-]{1,64}$")

# S3 general purpose bucket naming rules (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
# Object key prefixes: only S3's "safe characters" (docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html):
# the rest need URL encoding or break some tools, and a weights prefix never needs them.
_KEY = re.compile(r"^[A-Za-z0-9!_.*'()/-]*$")


def s3_uri_problem(uri: str) -> str | None:
    """Why `uri` is not an `s3://bucket[/prefix]` that S3 accepts and tools read unescaped; None when it is."""
    if not uri.startswith("s3://"):
        return "must start with s3://"
    bucket, _, key = uri[len("s3://") :].partition("/")
    if (
        not _BUCKET.match(bucket)
        or ".." in bucket
        or re.fullmatch(r"\d+\.\d+\.\d+\.\d+", bucket)
        or bucket.startswith(_BUCKET_PREFIXES)
        or bucket.endswith(_BUCKET_SUFFIXES)
    ):
        return (
            "the bucket name must be 3-63 lowercase letters, digits, '.' and '-', start and end with a letter or "
            "digit, have no '..', not look like an IP address, not start with xn--, sthree- or amzn-s3-demo-, "
            "and not end with -s3alias, --ol-s3, .mrap, --x-s3 or --table-s3"
        )
    if not _KEY.match(key) or "//" in key or any(part in (".", "..") for part in key.split("/")):
        return (
            "the key prefix may hold only S3's safe characters (letters, digits and ! - _ . * ' ( ) /), "
            "with no empty, '.' or '..' path segments"
        )
    if len(key.encode()) > 1024:
        return "the key prefix must be at most 1024 bytes (S3's key length limit)"
    return None


# EC2 capacity reservations as Karpenter 1.14.1 selects them (EC2NodeClass spec.capacityReservationSelectorTerms):
# an id's pattern, at most 30 terms and 20 tags in a term; and its karpenter.k8s.aws/capacity-reservation-type
# values, an On-Demand Capacity Reservation or a Capacity Block for ML (EC2 models both as capacity reservations).
CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")
MAX_RESERVATION_TERMS = 30
MAX_RESERVATION_TAGS = 20
CAPACITY_BLOCK = "capacity-block"
RESERVATION_TYPES = ("default", CAPACITY_BLOCK)


# EC2NodeClass.spec.tags keys Karpenter reserves for itself (Karpenter v1.14 CRD validation rules); config rejects
# them with the environment's path before the node-pools chart would.
KARPENTER_RESERVED_TAG_PREFIXES = ("kubernetes.io/cluster",)
KARPENTER_RESERVED_TAGS = (
    "eks:eks-cluster-name",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
)
