"""The interruption queue and its rules, compared with Karpenter's CloudFormation (tests/fixtures/upstream/)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from llm_eks.errors import ConfigError
from tests.cfn_reference import karpenter_reference

CLUSTER = "llm-test"


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return karpenter_reference()


@pytest.fixture(scope="module")
def synthesized() -> dict[str, Any]:
    import aws_cdk as cdk

    from llm_eks.constructs.interruption import InterruptionQueue, InterruptionQueueProps

    app = cdk.App()
    stack = cdk.Stack(app, "Interruption")
    queue = InterruptionQueue(stack, "Interruption", InterruptionQueueProps(cluster_name=CLUSTER))
    resolved = {"name": stack.resolve(queue.queue_name), "arn": stack.resolve(queue.queue_arn)}
    template = app.synth().get_stack_by_name("Interruption").template
    return {"template": template, "resolved": resolved}


def _of_type(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == type_}


def _swap(node: Any, old: str, new: str) -> Any:
    """The reference with its logical id `old` replaced by ours."""
    if isinstance(node, dict):
        return {k: _swap(v, old, new) for k, v in node.items()}
    if isinstance(node, list):
        return [_swap(v, old, new) for v in node]
    return new if node == old else node


def _queue_id(template: dict[str, Any]) -> str:
    (queue_id,) = _of_type(template, "AWS::SQS::Queue")
    return queue_id


def test_queue_is_named_after_the_cluster_keeps_300s_and_uses_sqs_sse(synthesized: dict[str, Any]) -> None:
    Template.from_json(synthesized["template"]).has_resource(
        "AWS::SQS::Queue",
        {
            "Properties": {
                "QueueName": CLUSTER,
                "MessageRetentionPeriod": 300,
                "SqsManagedSseEnabled": True,
                "KmsMasterKeyId": Match.absent(),
            },
            "DeletionPolicy": "Delete",
        },
    )


def test_queue_matches_the_reference_queue(synthesized: dict[str, Any], reference: dict[str, Any]) -> None:
    ours = synthesized["template"]["Resources"][_queue_id(synthesized["template"])]["Properties"]
    upstream = reference["KarpenterInterruptionQueue"]["Properties"]
    assert upstream["QueueName"] == {"Fn::Sub": "${ClusterName}"}
    assert ours == {**upstream, "QueueName": CLUSTER}


def test_queue_policy_lets_events_and_sqs_send_and_denies_plain_http(
    synthesized: dict[str, Any], reference: dict[str, Any]
) -> None:
    template = synthesized["template"]
    queue_id = _queue_id(template)
    (policy,) = _of_type(template, "AWS::SQS::QueuePolicy").values()
    props = policy["Properties"]
    assert props["Queues"] == [{"Ref": queue_id}]
    arn = {"Fn::GetAtt": [queue_id, "Arn"]}
    assert props["PolicyDocument"]["Statement"] == [
        {
            "Effect": "Allow",
            "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
            "Action": "sqs:SendMessage",
            "Resource": arn,
        },
        {
            "Sid": "DenyHTTP",
            "Effect": "Deny",
            "Action": "sqs:*",
            "Resource": arn,
            "Condition": {"Bool": {"aws:SecureTransport": False}},
            "Principal": "*",
        },
    ]
    # Statement for statement the reference's, with its queue reference swapped for ours.
    # Ours adds only "Version": "2012-10-17" (IAM's current grammar; the reference leaves it to the default).
    upstream = _swap(
        reference["KarpenterInterruptionQueuePolicy"]["Properties"], "KarpenterInterruptionQueue", queue_id
    )
    ours = copy.deepcopy(props)
    assert ours["PolicyDocument"].pop("Version") == "2012-10-17"
    assert ours == upstream


def test_exactly_the_five_reference_rules_target_the_queue(
    synthesized: dict[str, Any], reference: dict[str, Any]
) -> None:
    """Same source/detail-type strings as upstream: a typo in detail-type is a rule that never matches."""
    template = synthesized["template"]
    queue_id = _queue_id(template)
    upstream = {k: r for k, r in reference.items() if r["Type"] == "AWS::Events::Rule"}
    ours = _of_type(template, "AWS::Events::Rule")
    assert len(upstream) == len(ours) == 5
    by_name = {}
    for logical_id, rule in ours.items():
        (name,) = [n for n in upstream if logical_id.startswith(f"Interruption{n}")]
        by_name[name] = rule
    assert set(by_name) == set(upstream)
    for name, rule in by_name.items():
        props = rule["Properties"]
        assert props == _swap(upstream[name]["Properties"], "KarpenterInterruptionQueue", queue_id), name


def test_the_five_detail_types_are_the_documented_ones(synthesized: dict[str, Any]) -> None:
    patterns = {
        (r["Properties"]["EventPattern"]["source"][0], r["Properties"]["EventPattern"]["detail-type"][0])
        for r in _of_type(synthesized["template"], "AWS::Events::Rule").values()
    }
    assert patterns == {
        ("aws.health", "AWS Health Event"),
        ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
        ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
        ("aws.ec2", "EC2 Instance State-change Notification"),
        ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
    }


def test_exposes_the_queue_name_for_helm_and_the_arn_for_iam(synthesized: dict[str, Any]) -> None:
    queue_id = _queue_id(synthesized["template"])
    assert synthesized["resolved"] == {
        "name": {"Fn::GetAtt": [queue_id, "QueueName"]},
        "arn": {"Fn::GetAtt": [queue_id, "Arn"]},
    }


def test_a_cluster_name_token_becomes_the_queue_name() -> None:
    import aws_cdk as cdk

    from llm_eks.constructs.interruption import InterruptionQueue, InterruptionQueueProps

    stack = cdk.Stack()
    name = cdk.CfnParameter(stack, "ClusterName").value_as_string
    InterruptionQueue(stack, "Interruption", InterruptionQueueProps(cluster_name=name))
    Template.from_stack(stack).has_resource_properties("AWS::SQS::Queue", {"QueueName": {"Ref": "ClusterName"}})


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"cluster_name": "bad name"},
            "cluster_name: 'bad name' is not allowed as the interruption queue name; must be 1-80 letters, digits, "
            "'-' or '_' [LLMEKS-E312]",
        ),
        (
            {"cluster_name": "x" * 81},
            f"cluster_name: '{'x' * 81}' is not allowed as the interruption queue name; must be 1-80 letters, "
            "digits, '-' or '_' [LLMEKS-E312]",
        ),
        (
            {"cluster_name": CLUSTER, "message_retention_seconds": 30},
            "message_retention_seconds: 30 is not allowed; must be between 60 and 1209600 (SQS limits) [LLMEKS-E312]",
        ),
    ],
    ids=["space", "too-long", "retention"],
)
def test_bad_props_are_one_line_errors(props: dict[str, Any], message: str) -> None:
    from llm_eks.constructs.interruption import InterruptionQueueProps

    with pytest.raises(ConfigError) as error:
        InterruptionQueueProps(**props).validate()
    assert str(error.value) == message
