"""One moto S3 per test module: starting moto and loading boto3's S3 model cost about 0.6 s, so a module starts it
once and each test gets the same bucket emptied (objects and unfinished multipart uploads)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import moto
import pytest

REGION = "eu-west-1"
_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": REGION,
    "AWS_DEFAULT_REGION": REGION,
}


def module_s3(bucket: str) -> Callable[[], Iterator[Any]]:
    """A module-scoped fixture: fake credentials, moto's S3 and `bucket`, yielding an S3 client."""

    @pytest.fixture(scope="module")
    def fixture() -> Iterator[Any]:
        import boto3

        with pytest.MonkeyPatch.context() as mp:
            for name, value in _ENV.items():
                mp.setenv(name, value)
            mp.delenv("AWS_PROFILE", raising=False)
            with moto.mock_aws():
                client = boto3.client("s3", region_name=REGION)
                client.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
                yield client

    return fixture


def emptied(client: Any, bucket: str) -> Any:
    """`client` after removing every object and unfinished multipart upload of `bucket`."""
    for upload in client.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
        client.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            client.delete_object(Bucket=bucket, Key=obj["Key"])
    return client
