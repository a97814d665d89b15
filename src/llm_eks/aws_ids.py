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
SNAPSHOT_ID = re.compile(r"^snap-[0-9a-f]{8}([0-9a-f]{9})?$")
# Secrets Manager secret names (the name, not the ARN).
SECRET_NAME = re.compile(r"^[A-Za-z0-9/_+=.@-]{1,512}$")
