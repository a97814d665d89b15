"""AWS regions a stack may target: the commercial (aws), China (aws-cn) and GovCloud (aws-us-gov) partitions.

Data, not a lookup: botocore is only a dev dependency, and synth must not call AWS. Copied on 2026-11-30 from
botocore 1.44.8's `botocore/data/partitions.json` (the `regions` of those three partitions, without the `*-global`
pseudo-regions); tests/test_config_inputs.py compares this list with the installed botocore's, so a botocore
upgrade that adds a region fails a test until the region is added here.
"""

from __future__ import annotations

COMMERCIAL = (
    "af-south-1",
    "ap-east-1",
    "ap-east-2",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-south-1",
    "ap-south-2",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ap-southeast-5",
    "ap-southeast-6",
    "ap-southeast-7",
    "ca-central-1",
    "ca-west-1",
    "eu-central-1",
    "eu-central-2",
    "eu-north-1",
    "eu-south-1",
    "eu-south-2",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "il-central-1",
    "me-central-1",
    "me-south-1",
    "me-west-1",
    "mx-central-1",
    "sa-east-1",
    "sa-west-1",
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
)
CHINA = ("cn-north-1", "cn-northwest-1")
GOVCLOUD = ("us-gov-east-1", "us-gov-west-1")

REGIONS: frozenset[str] = frozenset((*COMMERCIAL, *CHINA, *GOVCLOUD))
