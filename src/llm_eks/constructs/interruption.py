"""`InterruptionQueue`: the SQS queue Karpenter reads EC2/Health interruption events from, and the rules feeding it.

Built to match Karpenter's own CloudFormation for the version we pin (../shared/reference/): the queue is named
after the cluster, keeps messages 300 s (an interruption older than that is useless), uses SQS-managed SSE and
refuses plain HTTP; five EventBridge rules send the events Karpenter acts on. Helm's `settings.interruptionQueue`
takes the queue NAME (`queue_name` here), never its ARN.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from llm_eks.constructs import nag
from llm_eks.error_codes import E312
from llm_eks.errors import ConfigError, named_errors

# Logical id -> (source, detail-type), exactly as in Karpenter's CloudFormation. A misspelt detail-type is a rule
# that never matches and fails silently, so tests compare these strings with the reference file.
INTERRUPTION_RULES: MappingProxyType[str, tuple[str, str]] = MappingProxyType(
    {
        "ScheduledChangeRule": ("aws.health", "AWS Health Event"),
        "SpotInterruptionRule": ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
        "RebalanceRule": ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
        "InstanceStateChangeRule": ("aws.ec2", "EC2 Instance State-change Notification"),
        "CapacityReservationInterruptionRule": ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
    }
)

# SQS queue names: 1-80 characters, alphanumerics, hyphens and underscores.
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


@dataclass(frozen=True)
class InterruptionQueueProps:
    """The queue is named after the cluster, as Karpenter's CloudFormation does (one queue per cluster)."""

    cluster_name: str
    # 300 s, as upstream: Karpenter polls continuously; a 2-minute Spot warning is stale after 5 minutes.
    message_retention_seconds: int = 300

    def validate(self) -> None:
        # A token (e.g. a generated cluster name) is only known at deploy time; CloudFormation validates it then.
        if not cdk.Token.is_unresolved(self.cluster_name) and not _QUEUE_NAME.match(self.cluster_name):
            raise ConfigError(
                E312,
                f"cluster_name: {self.cluster_name!r} is not allowed as the interruption queue name; "
                "must be 1-80 letters, digits, '-' or '_'",
            )
        seconds = self.message_retention_seconds
        if not 60 <= seconds <= 1_209_600:
            raise ConfigError(
                E312,
                f"message_retention_seconds: {seconds} is not allowed; must be between 60 and 1209600 (SQS limits)",
            )


class InterruptionQueue(Construct):
    """SQS queue + queue policy + the five EventBridge rules Karpenter's interruption handling needs."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: InterruptionQueueProps) -> None:
        props.validate()
        super().__init__(scope, id)
        self.queue = sqs.Queue(
            self,
            "Queue",
            queue_name=props.cluster_name,
            retention_period=cdk.Duration.seconds(props.message_retention_seconds),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            # Deleting the stack must not strand the queue: nothing in it outlives the cluster.
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        nag.skip_checkov(
            self.queue, "CKV_AWS_27", "Encrypted with SQS-managed SSE (SqsManagedSseEnabled), which this check misses."
        )
        # Written out (not queue.add_to_resource_policy / targets.SqsQueue) so the document is the reference's,
        # statement for statement: the service principals may send, and nothing may use the queue over plain HTTP.
        self.policy = sqs.CfnQueuePolicy(
            self,
            "Policy",
            queues=[self.queue.queue_url],
            policy_document={
                "Version": "2012-10-17",
                "Id": "EC2InterruptionPolicy",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                        "Action": "sqs:SendMessage",
                        "Resource": self.queue.queue_arn,
                    },
                    {
                        "Sid": "DenyHTTP",
                        "Effect": "Deny",
                        "Action": "sqs:*",
                        "Resource": self.queue.queue_arn,
                        # A boolean, as in the reference (IAM accepts "false" too).
                        "Condition": {"Bool": {"aws:SecureTransport": False}},
                        "Principal": "*",
                    },
                ],
            },
        )
        self.rules: dict[str, events.CfnRule] = {}
        for rule_id, (source, detail_type) in INTERRUPTION_RULES.items():
            rule = events.CfnRule(
                self,
                rule_id,
                event_pattern={"source": [source], "detail-type": [detail_type]},
                targets=[
                    events.CfnRule.TargetProperty(id="KarpenterInterruptionQueueTarget", arn=self.queue.queue_arn)
                ],
            )
            # EventBridge may only deliver once the queue policy lets it send.
            rule.add_resource_dependency(self.policy)
            self.rules[rule_id] = rule
        nag.acknowledge(
            self.queue, "SQS3", "Karpenter deletes each message it reads; one it cannot use is stale within minutes."
        )

    @property
    def queue_name(self) -> str:
        """The name Helm's `settings.interruptionQueue` wants (a token until deploy time)."""
        return self.queue.queue_name

    @property
    def queue_arn(self) -> str:
        """For IAM: the controller's AllowInterruptionQueueActions statement is scoped to this ARN."""
        return self.queue.queue_arn
