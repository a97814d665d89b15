"""The S3 bucket settings every bucket llm-eks creates shares, so a new bucket cannot miss one: TLS (1.2 or later)
only, no public access, no ACLs (the bucket owner owns every object), versioned."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_s3 as s3
from constructs import Construct


def private_bucket(scope: Construct, id: str, **props: Any) -> s3.Bucket:
    """An `s3.Bucket` with the shared settings and `props` (encryption, lifecycle, removal policy) on top."""
    return s3.Bucket(
        scope,
        id,
        enforce_ssl=True,
        minimum_tls_version=1.2,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        versioned=True,
        **props,
    )
