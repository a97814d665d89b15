"""The weights bucket's threats, one test each (issue 23 item 7): credentials taken off a node are useless outside
the VPC, every object request is on record with its principal, a snapshot-restored node volume is still encrypted;
and the one-line errors of the configurations that would leave a gap."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3

from llm_eks.config import parse_environment
from llm_eks.constructs.audit import ObjectAccessTrail, ObjectAccessTrailProps
from llm_eks.errors import ConfigError
from llm_eks.infra.review import readable

EXISTING_VPC = {
    "vpc_id": "vpc-0abc12345def67890",
    "cidr": "172.20.0.0/16",
    "availability_zones": ["eu-west-1a", "eu-west-1b"],
    "private_subnet_ids": ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"],
}


def _of_type(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == type_}


def _weights_bucket_id(template: dict[str, Any]) -> str:
    (bucket_id,) = [k for k in _of_type(template, "AWS::S3::Bucket") if k.startswith("WeightsBucket")]
    return bucket_id


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_pod_credentials_cannot_reach_the_weights_from_outside_the_vpc(templates: dict[str, Any], env: str) -> None:
    template = templates[env]
    (endpoint_id, endpoint), *others = _of_type(template, "AWS::EC2::VPCEndpoint").items()
    assert not others
    # A gateway endpoint on the pods' route tables (the private subnets), so their S3 requests come through it.
    assert endpoint["Properties"]["VpcEndpointType"] == "Gateway"
    assert readable(endpoint["Properties"]["ServiceName"]) == "com.amazonaws.${Ref:AWS::Region}.s3"
    tables = {t["Ref"] for t in endpoint["Properties"]["RouteTableIds"]}
    assert tables and all("privateSubnet" in t for t in tables)
    bucket_id = _weights_bucket_id(template)
    (policy,) = [
        p
        for p in _of_type(template, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    (deny,) = [
        s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "DenyObjectAccessOutsideTheVpc"
    ]
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
    assert {"s3:GetObject*", "s3:PutObject*", "s3:ListBucket"} <= set(deny["Action"])
    # The default environments name no admin roles: no one is exempt.
    assert deny["Condition"] == {"StringNotEquals": {"aws:SourceVpce": [{"Ref": endpoint_id}]}}


def test_every_object_request_on_the_weights_is_on_record(templates: dict[str, Any]) -> None:
    template = templates["dev"]
    bucket_id = _weights_bucket_id(template)
    (trail,) = _of_type(template, "AWS::CloudTrail::Trail").values()
    props = trail["Properties"]
    assert props["TrailName"] == "LlmEks-dev-object-access"
    assert props["EventSelectors"] == [
        {
            "DataResources": [
                {"Type": "AWS::S3::Object", "Values": [{"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/"]]}]}
            ],
            "IncludeManagementEvents": False,
            "ReadWriteType": "All",
        }
    ]
    assert props["EnableLogFileValidation"] is True and props["IsLogging"] is True
    assert (props["IsMultiRegionTrail"], props["IncludeGlobalServiceEvents"]) == (False, False)
    # Log files are SSE-KMS with a key only this trail may use.
    key_id = props["KMSKeyId"]["Fn::GetAtt"][0]
    key = template["Resources"][key_id]
    assert key["Properties"]["EnableKeyRotation"] is True
    trail_arn = (
        "arn:${Ref:AWS::Partition}:cloudtrail:${Ref:AWS::Region}:${Ref:AWS::AccountId}:trail/LlmEks-dev-object-access"
    )
    cloudtrail = [
        readable(s)
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Principal") == {"Service": "cloudtrail.amazonaws.com"}
    ]
    assert [s["Action"] for s in cloudtrail] == ["kms:GenerateDataKey*", "kms:DescribeKey"]
    assert all(s["Condition"]["StringEquals"] == {"aws:SourceArn": trail_arn} for s in cloudtrail)
    # The log bucket is delivered to by this trail only, versioned, kept a year, and survives the stack.
    logs_id = props["S3BucketName"]["Ref"]
    logs = template["Resources"][logs_id]
    assert logs["DeletionPolicy"] == "Retain"
    assert logs["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}
    (rule,) = logs["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == 365
    (policy,) = [
        p for p in _of_type(template, "AWS::S3::BucketPolicy").values() if p["Properties"]["Bucket"] == {"Ref": logs_id}
    ]
    (only_this,) = [
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == "OnlyThisTrailDelivers"
    ]
    assert readable(only_this["Condition"]) == {"StringNotEquals": {"aws:SourceArn": trail_arn}}


@pytest.mark.parametrize(("env", "mode"), [("dev", "GOVERNANCE"), ("staging", "GOVERNANCE"), ("prod", "COMPLIANCE")])
def test_the_access_records_cannot_be_purged_in_place(templates: dict[str, Any], env: str, mode: str) -> None:
    """S3 Object Lock on the trail's log bucket, each record retained as long as it is kept (a year): in
    production nobody in the account can delete one before then (COMPLIANCE); elsewhere only a principal holding
    s3:BypassGovernanceRetention can, which is how such an environment is torn down."""
    template = templates[env]
    (trail,) = _of_type(template, "AWS::CloudTrail::Trail").values()
    logs = template["Resources"][trail["Properties"]["S3BucketName"]["Ref"]]["Properties"]
    assert logs["ObjectLockEnabled"] is True
    assert logs["ObjectLockConfiguration"] == {
        "ObjectLockEnabled": "Enabled",
        "Rule": {"DefaultRetention": {"Mode": mode, "Days": 365}},
    }
    assert logs["VersioningConfiguration"] == {"Status": "Enabled"}


def test_a_lock_mode_s3_does_not_have_is_one_line() -> None:
    stack = cdk.Stack(cdk.App(), "Bad")
    bucket = s3.Bucket(stack, "B")
    with pytest.raises(ConfigError) as err:
        ObjectAccessTrail(stack, "T", ObjectAccessTrailProps(buckets=(bucket,), lock_mode="LEGAL_HOLD"))
    assert str(err.value).endswith(
        "object_access_trail.lock_mode: 'LEGAL_HOLD' is not allowed; must be one of COMPLIANCE, GOVERNANCE"
        " [LLMEKS-E307]"
    )


def _checkov_skips(resource: dict[str, Any]) -> dict[str, str]:
    return {s["id"]: s["comment"] for s in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])}


def test_the_weights_bucket_says_where_its_access_is_recorded(templates: dict[str, Any]) -> None:
    """No server access logs on the weights bucket, for the reason that holds: this stack's trail records it."""
    template = templates["dev"]
    bucket = template["Resources"][_weights_bucket_id(template)]
    assert _checkov_skips(bucket) == {
        "CKV_AWS_18": "Object access is recorded by this stack's CloudTrail trail (S3 data events)."
    }


def test_an_organisation_trail_can_stand_in_for_the_stacks_own() -> None:
    """Without the stack's trail, the bucket's reason for no access logs is the environment's own statement."""
    from llm_eks.infra.app import build_app, new_app

    config = parse_environment("x", {"weights_bucket": {"data_events_trail": False}})
    assert config.weights_bucket is not None and config.weights_bucket.data_events_trail is False
    app = new_app(context={"environments": {"x": {"weights_bucket": {"data_events_trail": False}}}})
    (stack,) = build_app(app)
    template = app.synth().get_stack_by_name(stack.stack_name).template
    assert not _of_type(template, "AWS::CloudTrail::Trail")
    bucket = template["Resources"][_weights_bucket_id(template)]
    assert _checkov_skips(bucket) == {
        "CKV_AWS_18": "weights_bucket.data_events_trail is off: the environment says an organisation trail records "
        "its data events."
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"account": "123456789012", "region": "eu-west-1", "vpc": EXISTING_VPC, "weights_bucket": {}},
            "environments.x.vpc.s3_endpoint_id: required with an existing vpc_id and a weights bucket the stack "
            "creates; name the VPC's S3 endpoint (vpce-...), since the bucket refuses object requests from anywhere "
            "else [LLMEKS-E112]",
        ),
        (
            {
                "account": "123456789012",
                "region": "eu-west-1",
                "vpc": {**EXISTING_VPC, "s3_endpoint_id": "s3-endpoint"},
                "weights_bucket": {},
            },
            "environments.x.vpc.s3_endpoint_id: 's3-endpoint' is not allowed; must be a VPC endpoint id such as "
            "vpce-0abc12345def67890 [LLMEKS-E112]",
        ),
        (
            {"vpc": {"s3_endpoint_id": "vpce-0abc12345def67890"}},
            "environments.x.vpc.s3_endpoint_id: only allowed with vpc_id (a new VPC gets an S3 endpoint of its own)"
            " [LLMEKS-E112]",
        ),
    ],
)
def test_a_bucket_that_could_not_refuse_outside_requests_is_a_one_line_error(
    body: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_environment("x", body)
    assert str(info.value) == message


def test_an_existing_vpc_names_its_endpoint_and_an_existing_bucket_needs_none() -> None:
    vpc = {**EXISTING_VPC, "s3_endpoint_id": "vpce-0abc12345def67890"}
    config = parse_environment(
        "x", {"account": "123456789012", "region": "eu-west-1", "vpc": vpc, "weights_bucket": {}}
    )
    assert config.vpc.s3_endpoint_id == "vpce-0abc12345def67890"
    # Someone else's bucket keeps its own policy: no endpoint needed.
    parse_environment(
        "x", {"account": "123456789012", "region": "eu-west-1", "vpc": EXISTING_VPC, "weights_bucket": {"name": "ours"}}
    )


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"buckets": ()}, "object_access_trail.buckets: 0 buckets is not allowed; give 1 to 250 [LLMEKS-E307]"),
        (
            {"retention_days": 0},
            "object_access_trail.retention_days: 0 is not allowed; must be a whole number of days from 1 to 3650"
            " [LLMEKS-E307]",
        ),
        (
            {"trail_name": "-audit"},
            "object_access_trail.trail_name: '-audit' is not allowed; must be 3-128 of letters, digits, '.', '_', "
            "'-', start and end with a letter or digit [LLMEKS-E307]",
        ),
    ],
)
def test_trail_props_are_checked_when_built(props: dict[str, Any], message: str) -> None:
    stack = cdk.Stack(cdk.App(), "T")
    bucket = s3.Bucket.from_bucket_name(stack, "B", "some-bucket")
    with pytest.raises(ConfigError) as info:
        ObjectAccessTrail(stack, "Audit", ObjectAccessTrailProps(**{"buckets": (bucket,), **props}))
    assert str(info.value).endswith(message)
