"""`AlertTopics`: where an environment's alerts leave the cluster. An SNS topic for the alerts Alertmanager routes to
`sns` (subscribe your on-call to it: email, HTTPS, a pager's SNS integration), a heartbeat topic Alertmanager
publishes the always-firing Watchdog to once a minute, a CloudWatch alarm that fires on the alerts topic when the
heartbeat falls silent (the dead-man's switch: both Prometheus replicas down, both Alertmanagers down, broken
credentials, blocked egress all look the same from outside), and an EventBridge rule that forwards the stack's own
failed deploys and stuck rollbacks (CloudFormation "Stack Status Change" events, docs.aws.amazon.com
AWSCloudFormation/latest/UserGuide/event-detail-stack-status-change.html) to the alerts topic.

Both topics are encrypted with a key of their own whose policy lets CloudWatch (the alarm's actions) and
EventBridge (the rule's target) publish to encrypted topics; both refuse plain HTTP. The Alertmanager pods publish
through their EKS Pod Identity role, `grant_publish`.

The heartbeat alarm reads SNS's `NumberOfMessagesPublished` for the heartbeat topic (AWS/SNS, dimension
TopicName), summed over 5 minutes: no datapoint or a zero in two periods in a row (missing data breaches) is an
alarm about 10 minutes after the last Watchdog notification.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from llm_eks.constructs import nag
from llm_eks.error_codes import E134
from llm_eks.errors import ConfigError, fail, named_errors

# SNS topic names: 1-256 letters, digits, '-' and '_'.
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9_-]{1,240}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# A stack that failed or is stuck: an update rolling back (or unable to), a create rolled back, a delete that failed.
FAILED_STACK_STATUSES = (
    "UPDATE_ROLLBACK_IN_PROGRESS",
    "UPDATE_ROLLBACK_FAILED",
    "ROLLBACK_IN_PROGRESS",
    "ROLLBACK_FAILED",
    "DELETE_FAILED",
)
# The heartbeat alarm: two 5-minute periods without a Watchdog notification (one a minute while all is well).
HEARTBEAT_PERIOD = cdk.Duration.minutes(5)
HEARTBEAT_PERIODS = 2


@dataclass(frozen=True)
class AlertTopicsProps:
    """The topics of one environment, named `<name_prefix>-alerts` and `<name_prefix>-heartbeat`."""

    name_prefix: str
    # Subscribed to the alerts topic by email (each confirms once).
    email: tuple[str, ...] = ()
    # The heartbeat topic and its alarm (the "cloudwatch" dead-man's switch); False: a webhook receiver plays it.
    heartbeat: bool = True
    # Forward the stack's failed deploys and stuck rollbacks to the alerts topic.
    stack_failures: bool = True

    def validate(self) -> None:
        if not cdk.Token.is_unresolved(self.name_prefix) and not _TOPIC_NAME.match(self.name_prefix):
            raise fail(E134, "alert_topics.name_prefix", self.name_prefix, "must be letters, digits, '-' and '_'")
        for i, email in enumerate(self.email):
            if not _EMAIL.match(email):
                raise ConfigError(E134, f"alert_topics.email[{i}]: {email!r} is not allowed; must be an email address")


class AlertTopics(Construct):
    """The alerts topic, the heartbeat topic and its alarm, the stack-failure rule, and their key."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: AlertTopicsProps) -> None:
        props.validate()
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        self.key = kms.Key(
            self,
            "Key",
            description=f"SNS encryption of {props.name_prefix}'s alert topics",
            enable_key_rotation=True,
            # Alerts in flight are not worth keeping once the topics are gone; 7 days lets a delete be cancelled.
            removal_policy=cdk.RemovalPolicy.DESTROY,
            pending_window=cdk.Duration.days(7),
        )
        # The services that publish to encrypted topics on this stack's behalf (SNS's key-policy guidance for
        # "compatible AWS services"): only for this account's resources.
        for sid, service in (("CloudWatchAlarms", "cloudwatch.amazonaws.com"), ("EventBridge", "events.amazonaws.com")):
            self.key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid=sid,
                    principals=[iam.ServicePrincipal(service)],
                    actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                    resources=["*"],
                    conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
                )
            )
        self.alerts = self._topic("Alerts", f"{props.name_prefix}-alerts", "llm-eks alerts")
        for email in props.email:
            self.alerts.add_subscription(subscriptions.EmailSubscription(email))
        self.heartbeat: sns.Topic | None = None
        self.heartbeat_alarm: cloudwatch.Alarm | None = None
        if props.heartbeat:
            self.heartbeat = self._topic("Heartbeat", f"{props.name_prefix}-heartbeat", "llm-eks alerting heartbeat")
            self.heartbeat_alarm = cloudwatch.Alarm(
                self,
                "HeartbeatAlarm",
                alarm_name=f"{props.name_prefix}-alerting-heartbeat",
                alarm_description=(
                    "Alertmanager's Watchdog heartbeat stopped: no alert can reach anyone (Prometheus, Alertmanager, "
                    "their credentials or their egress is down). kubectl -n monitoring get pods; then the "
                    "Alertmanager logs."
                ),
                metric=cloudwatch.Metric(
                    namespace="AWS/SNS",
                    metric_name="NumberOfMessagesPublished",
                    dimensions_map={"TopicName": self.heartbeat.topic_name},
                    statistic="Sum",
                    period=HEARTBEAT_PERIOD,
                ),
                threshold=1,
                comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                evaluation_periods=HEARTBEAT_PERIODS,
                datapoints_to_alarm=HEARTBEAT_PERIODS,
                treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
            )
            action = cloudwatch_actions.SnsAction(self.alerts)
            self.heartbeat_alarm.add_alarm_action(action)
            self.heartbeat_alarm.add_ok_action(action)
        self.stack_failures: events.Rule | None = None
        if props.stack_failures:
            self.stack_failures = events.Rule(
                self,
                "StackFailures",
                description=f"{stack.stack_name} failed to deploy, or its rollback is stuck",
                event_pattern=events.EventPattern(
                    source=["aws.cloudformation"],
                    detail_type=["CloudFormation Stack Status Change"],
                    detail={
                        "stack-id": [stack.stack_id],
                        "status-details": {"status": list(FAILED_STACK_STATUSES)},
                    },
                ),
                targets=[events_targets.SnsTopic(self.alerts)],
            )

    def _topic(self, id: str, name: str, display_name: str) -> sns.Topic:
        return sns.Topic(
            self,
            id,
            topic_name=name,
            display_name=display_name,
            master_key=self.key,
            # A topic policy statement denying publishes and subscriptions over plain HTTP (cdk-nag SNS3).
            enforce_ssl=True,
        )

    @property
    def topics(self) -> tuple[sns.Topic, ...]:
        return (self.alerts,) if self.heartbeat is None else (self.alerts, self.heartbeat)

    def grant_publish(self, role: iam.Role) -> None:
        """Publish to both topics (and use their key to): what Alertmanager's sns receivers do."""
        for topic in self.topics:
            topic.grant_publish(role)
        nag.acknowledge(
            role.node.find_child("DefaultPolicy"),
            "IAM5[Action::kms:GenerateDataKey*]",
            "Publishing to a topic encrypted with a customer key needs its data keys: on the topics' own key only.",
        )
