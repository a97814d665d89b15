"""AWS's documented sample events, sent through the SYNTHESIZED rules into a queue (moto EventBridge + SQS).

Exactly the five interruption events arrive; unrelated events from the same sources do not. The samples follow
the examples in the AWS documentation (placeholders filled in):
- Spot interruption warning: EC2 User Guide, "Spot Instance interruption notices";
- rebalance recommendation: EC2 User Guide, "EC2 instance rebalance recommendations";
- instance state-change: EC2 User Guide, "State change events for Amazon EC2 instances";
- scheduled change: AWS Health User Guide, "AWS Health events Amazon EventBridge schema";
- capacity-reservation interruption: EC2 User Guide, "Monitor interruptible Capacity Reservations";
- unrelated: EBS volume notification (source aws.ec2) and an AWS Health abuse event (source aws.health).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

REGION = "us-west-2"
INSTANCE = "i-1234567890abcdef0"
INSTANCE_ARN = f"arn:aws:ec2:{REGION}:123456789012:instance/{INSTANCE}"

INTERRUPTION_EVENTS: list[dict[str, Any]] = [
    {
        "Source": "aws.ec2",
        "DetailType": "EC2 Spot Instance Interruption Warning",
        "Resources": [INSTANCE_ARN],
        "Detail": {"instance-id": INSTANCE, "instance-action": "terminate"},
    },
    {
        "Source": "aws.ec2",
        "DetailType": "EC2 Instance Rebalance Recommendation",
        "Resources": [INSTANCE_ARN],
        "Detail": {"instance-id": INSTANCE},
    },
    {
        "Source": "aws.ec2",
        "DetailType": "EC2 Instance State-change Notification",
        "Resources": [INSTANCE_ARN],
        "Detail": {"instance-id": INSTANCE, "state": "shutting-down"},
    },
    {
        "Source": "aws.health",
        "DetailType": "AWS Health Event",
        "Resources": [INSTANCE],
        "Detail": {
            "eventArn": f"arn:aws:health:{REGION}::event/EC2/AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED/"
            "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED_ABC123-DEF456",
            "service": "EC2",
            "eventTypeCode": "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
            "eventTypeCategory": "scheduledChange",
            "eventScopeCode": "ACCOUNT_SPECIFIC",
            "startTime": "Mon, 07 Dec 2026 10:00:00 GMT",
            "endTime": "Mon, 07 Dec 2026 12:00:00 GMT",
            "eventRegion": REGION,
            "eventDescription": [{"language": "en_US", "latestDescription": "EC2 has detected degradation..."}],
            "affectedEntities": [{"entityValue": INSTANCE}],
        },
    },
    {
        "Source": "aws.ec2",
        "DetailType": "EC2 Capacity Reservation Instance Interruption Warning",
        "Resources": [INSTANCE_ARN],
        "Detail": {
            "instance-id": INSTANCE,
            "instance-action": "terminate",
            "instance-termination-time": "2026-12-07T10:02:00Z",
            "azId": "usw2-az1",
        },
    },
]

UNRELATED_EVENTS: list[dict[str, Any]] = [
    {
        "Source": "aws.ec2",
        "DetailType": "EBS Volume Notification",
        "Resources": [f"arn:aws:ec2:{REGION}:123456789012:volume/vol-01234567"],
        "Detail": {"result": "available", "cause": "", "event": "createVolume", "request-id": "01234567-0123"},
    },
    {
        "Source": "aws.health",
        "DetailType": "AWS Health Abuse Event",
        "Resources": [],
        "Detail": {"service": "ABUSE", "eventTypeCode": "AWS_ABUSE_DOS_REPORT", "eventTypeCategory": "issue"},
    },
]


@pytest.fixture(scope="module")
def patterns() -> dict[str, str]:
    """Logical id -> EventPattern JSON of every AWS::Events::Rule in the synthesized template."""
    import aws_cdk as cdk

    from llm_eks.constructs.interruption import InterruptionQueue, InterruptionQueueProps

    app = cdk.App()
    stack = cdk.Stack(app, "Interruption")
    InterruptionQueue(stack, "Interruption", InterruptionQueueProps(cluster_name="llm-test"))
    template = app.synth().get_stack_by_name("Interruption").template
    rules = {k: r["Properties"] for k, r in template["Resources"].items() if r["Type"] == "AWS::Events::Rule"}
    assert len(rules) == 5
    return {k: json.dumps(props["EventPattern"]) for k, props in rules.items()}


@pytest.fixture
def delivered(patterns: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        events = boto3.client("events", region_name=REGION)
        url = sqs.create_queue(QueueName="llm-test")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        for name, pattern in patterns.items():
            events.put_rule(Name=name, EventPattern=pattern)
            events.put_targets(Rule=name, Targets=[{"Id": "KarpenterInterruptionQueueTarget", "Arn": arn}])

        def send(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
            result = events.put_events(
                Entries=[{**e, "Detail": json.dumps(e["Detail"]), "EventBusName": "default"} for e in entries]
            )
            assert result["FailedEntryCount"] == 0
            received = []
            while True:
                batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
                if not batch:
                    return received
                received.extend(json.loads(m["Body"]) for m in batch)
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)],
                )

        yield send


def test_exactly_the_five_interruption_events_arrive(delivered: Any) -> None:
    received = delivered(INTERRUPTION_EVENTS + UNRELATED_EVENTS)

    assert sorted((m["source"], m["detail-type"]) for m in received) == sorted(
        (e["Source"], e["DetailType"]) for e in INTERRUPTION_EVENTS
    )
    # Delivered whole: Karpenter reads the instance id from the detail.
    for message in received:
        assert INSTANCE in json.dumps(message["detail"])


@pytest.mark.parametrize("sample", UNRELATED_EVENTS, ids=lambda e: e["DetailType"])
def test_unrelated_events_from_the_same_sources_do_not_arrive(delivered: Any, sample: dict[str, Any]) -> None:
    assert delivered([sample]) == []
