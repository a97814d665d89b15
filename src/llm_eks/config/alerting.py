"""Where an environment's alerts go (`alerting` in cdk.json): the SNS topic llm-eks creates, receivers whose secret
lives in Secrets Manager, which of them get critical and warning alerts, and the dead-man's switch. The routing
itself is llm_eks.manifests.alerting's."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from llm_eks.error_codes import E134
from llm_eks.errors import fail
from llm_eks.manifests.alerting import CLOUDWATCH, SNS, AlertRoutes, SecretReceiver, validate_routes

# What SNS accepts as an email endpoint, roughly: one @, a dot in the domain, no spaces.
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


@dataclass(frozen=True)
class AlertReceiverConfig:
    """A receiver outside AWS whose credential is a Secrets Manager secret, mounted into Alertmanager as a file."""

    # pagerduty (Events API v2), slack (incoming webhook) or webhook (any URL that takes Alertmanager's JSON).
    type: str
    # Secrets Manager secret NAME whose SecretString is the routing key or URL; never the value itself.
    secret: str
    # slack only: the channel to post to; None: the incoming webhook's own channel.
    channel: str | None = None


@dataclass(frozen=True)
class AlertingConfig:
    """Alertmanager's receivers and routes. The default reaches a topic in every environment: subscribe your on-call
    to it (stack output AlertsTopicArn) or list emails here."""

    # Email addresses subscribed to the alerts topic (each confirms once, by the link SNS mails it).
    email: tuple[str, ...] = ()
    # Receivers outside AWS by name (below): pagers, chat, webhooks, whose secrets stay in Secrets Manager.
    receivers: Mapping[str, AlertReceiverConfig] = field(default_factory=lambda: MappingProxyType({}))
    # Who is paged: "sns" (the alerts topic) and/or receivers above; never empty.
    critical: tuple[str, ...] = (SNS,)
    # Who gets warnings (and any alert without a severity); never empty.
    warning: tuple[str, ...] = (SNS,)
    # The heartbeat of the whole pipeline: "cloudwatch" (an SNS topic a CloudWatch alarm watches, alarming on the
    # alerts topic when it falls silent) or a webhook receiver of a service that alarms on silence.
    deadmans_switch: str = CLOUDWATCH

    def routes(self) -> AlertRoutes:
        """The routing the observability construct renders."""
        return AlertRoutes(
            receivers={name: SecretReceiver(r.type, r.secret, r.channel) for name, r in self.receivers.items()},
            critical=self.critical,
            warning=self.warning,
            deadmans_switch=self.deadmans_switch,
        )


def validate_alerting(a: AlertingConfig, path: str) -> None:
    """One-line ConfigError naming the field: receivers, routes, the dead-man's switch and the emails."""
    validate_routes(path, a.routes())
    for i, email in enumerate(a.email):
        if not _EMAIL.match(email):
            raise fail(E134, f"{path}.email[{i}]", email, "must be an email address such as oncall@example.com")
        if email in a.email[:i]:
            raise fail(E134, f"{path}.email[{i}]", email, "must not repeat an address")
    if a.email and SNS not in (*a.critical, *a.warning):
        raise fail(
            E134,
            f"{path}.email",
            list(a.email),
            "needs 'sns' among critical or warning receivers (the emails subscribe to the alerts topic)",
        )
