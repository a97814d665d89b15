"""Where alerts go: Alertmanager's routing tree and receivers, rendered as kube-prometheus-stack's
`alertmanager.config` value, and the SecretProviderClass that mounts the receivers' secrets as files.

Pure Python (no cdk8s, no aws_cdk): the config layer validates the same receivers with `validate_routes`, the
observability construct renders them, the tests run `amtool` on the result.

Routing (every alert reaches someone; the chart's own default sends everything, the Watchdog included, to `null`):
- `Watchdog` (kube-prometheus-stack's always-firing alert, `severity: none`) goes to the dead-man's switch once a
  minute: the alerting pipeline's heartbeat (an SNS topic a CloudWatch alarm watches, or a webhook to a service that
  alarms on silence);
- `InfoInhibitor` and anything of severity `info` or `none` go nowhere (they exist to inhibit or to be browsed);
- `critical` and `warning` go to the receivers listed for them; an alert without a severity (or an unknown one)
  goes to the warning receivers, so a new rule without labels still reaches people.
The chart's own inhibit rules (critical silences warning/info of the same alert and namespace) and templates stay:
Helm deep-merges this value over the chart's, and only `route` and `receivers` are set here.

Receivers:
- `sns`: the environment's alerts topic (llm-eks creates it). Alertmanager v0.33.1 publishes with the AWS SDK's
  default credential chain when `sigv4` names only a region (prometheus/alertmanager@v0.33.1 notify/sns/sns.go,
  createSNSClient: static keys only with `access_key`, an extra AssumeRole only with `role_arn`), i.e. with the
  Alertmanager pods' EKS Pod Identity role. `attributes` are templated (createMessageAttributes), so subscribers can
  filter by severity with an SNS filter policy; `subject` is templated too and cut to SNS's 100 characters here.
- `pagerduty`, `slack`, `webhook`: the secret (routing key, webhook URL) stays in Secrets Manager and reaches
  Alertmanager as a file through the Secrets Store CSI driver; the config names only the file
  (config/notifiers.go `PagerdutyConfig.RoutingKeyFile`, `SlackConfig.APIURLFile`, notify/webhook/config.go
  `WebhookConfig.URLFile`, each read at notification time: notify/webhook/webhook.go, notify/pagerduty/pagerduty.go),
  so a secret never sits in the CloudFormation template, the Helm release or the config Secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_eks import aws_ids
from llm_eks.error_codes import E134
from llm_eks.errors import ConfigError, did_you_mean, fail
from llm_eks.manifests.source import with_source

# The receiver of the topic llm-eks creates; the dead-man's switch default: an SNS heartbeat a CloudWatch alarm
# watches.
SNS = "sns"
CLOUDWATCH = "cloudwatch"
PAGERDUTY = "pagerduty"
SLACK = "slack"
WEBHOOK = "webhook"
RECEIVER_KINDS = (PAGERDUTY, SLACK, WEBHOOK)
# Alertmanager receivers: one per route.
CRITICAL = "critical"
WARNING = "warning"
DEADMANS_SWITCH = "deadmans-switch"
NULL = "null"
# Where the receivers' secrets are mounted in the Alertmanager pods (one file per receiver, named after it).
SECRETS_DIR = "/etc/llm-eks/alerting"
SECRETS_VOLUME = "alerting-secrets"
# Watchdog fires for ever while the pipeline works; the heartbeat is one notification a minute.
HEARTBEAT_INTERVAL = "1m"
# Receiver names: they become file names and Alertmanager receiver keys.
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
# Slack channels: #name or @user, as Slack's API takes them.
_CHANNEL = re.compile(r"^[#@][\w.-]{1,80}$")
# SNS refuses a subject of 100 characters or more (Publish API); Alertmanager sends what the template gives.
_SNS_SUBJECT = (
    '{{ printf "[%s] %s %s" (.Status | toUpper) .GroupLabels.alertname .GroupLabels.namespace '
    '| reReplaceAll "^(.{0,99}).*$" "$1" }}'
)


@dataclass(frozen=True)
class SecretReceiver:
    """A receiver whose credential is a Secrets Manager secret (its SecretString is the whole value)."""

    # pagerduty (an Events API v2 routing key), slack (an incoming-webhook URL) or webhook (a URL).
    kind: str
    # The secret's NAME; its value is mounted as a file, never copied into a template.
    secret: str
    # slack only: the channel to post to (#name); None: the webhook's own channel.
    channel: str | None = None


@dataclass(frozen=True)
class AlertRoutes:
    """Who gets which alerts: receiver names (`sns`, or a key of `receivers`) per severity, and the dead-man's
    switch (`cloudwatch`, or a webhook receiver)."""

    receivers: Mapping[str, SecretReceiver]
    critical: tuple[str, ...] = (SNS,)
    warning: tuple[str, ...] = (SNS,)
    deadmans_switch: str = CLOUDWATCH

    @property
    def uses_sns(self) -> bool:
        return SNS in (*self.critical, *self.warning)

    @property
    def heartbeat_topic(self) -> bool:
        """The dead-man's switch is the SNS heartbeat topic a CloudWatch alarm watches."""
        return self.deadmans_switch == CLOUDWATCH


def validate_routes(path: str, routes: AlertRoutes) -> None:
    """One-line ConfigError naming `path.<field>` for the first problem: unknown receiver kinds, names or secret
    names, a severity nobody receives, a dead-man's switch that is not a webhook."""
    for name, receiver in routes.receivers.items():
        where = f"{path}.receivers.{name}"
        if name in (SNS, CLOUDWATCH) or not _NAME.match(name):
            raise fail(
                E134,
                f"{path}.receivers",
                name,
                "receiver names are 1-31 lowercase letters, digits and '-', starting with a letter, and not 'sns' or "
                "'cloudwatch' (llm-eks's own)",
            )
        if receiver.kind not in RECEIVER_KINDS:
            raise fail(
                E134,
                f"{where}.type",
                receiver.kind,
                f"{did_you_mean(receiver.kind, RECEIVER_KINDS)}must be one of {', '.join(RECEIVER_KINDS)}",
            )
        if not aws_ids.SECRET_NAME.match(receiver.secret) or receiver.secret.startswith("arn:"):
            raise fail(
                E134,
                f"{where}.secret",
                receiver.secret,
                "must be the NAME of a Secrets Manager secret holding the routing key or URL (never the value, "
                "never an ARN)",
            )
        if receiver.channel is not None:
            if receiver.kind != SLACK:
                raise ConfigError(E134, f"{where}.channel: only allowed with type slack")
            if not _CHANNEL.match(receiver.channel):
                raise fail(E134, f"{where}.channel", receiver.channel, "must be a Slack channel such as #llm-alerts")
    known = (SNS, *routes.receivers)
    for severity in (CRITICAL, WARNING):
        names = getattr(routes, severity)
        if not names:
            raise fail(
                E134,
                f"{path}.{severity}",
                [],
                f"must name at least one receiver ({', '.join(known)}): {severity} alerts must reach someone",
            )
        for i, name in enumerate(names):
            if name not in known:
                raise fail(
                    E134,
                    f"{path}.{severity}[{i}]",
                    name,
                    f"{did_you_mean(name, known)}must be 'sns' or a receiver of {path}.receivers "
                    f"({', '.join(routes.receivers) or 'none defined'})",
                )
            if name in names[:i]:
                raise fail(E134, f"{path}.{severity}[{i}]", name, "must not repeat a receiver")
    switch = routes.deadmans_switch
    if switch != CLOUDWATCH:
        switch_receiver = routes.receivers.get(switch)
        if switch_receiver is None or switch_receiver.kind != WEBHOOK:
            webhooks = [n for n, r in routes.receivers.items() if r.kind == WEBHOOK]
            raise fail(
                E134,
                f"{path}.deadmans_switch",
                switch,
                "must be 'cloudwatch' (an SNS heartbeat topic watched by a CloudWatch alarm) or a receiver of type "
                f"webhook that alarms when the heartbeat stops ({', '.join(webhooks) or 'none defined'})",
            )


def secret_file(name: str) -> str:
    """Where receiver `name`'s secret is mounted in the Alertmanager pods."""
    return f"{SECRETS_DIR}/{name}"


def _integration(
    name: str, routes: AlertRoutes, alerts_topic_arn: str | None, region: str, *, resolved: bool = True
) -> tuple[str, dict[str, Any]]:
    """(the Alertmanager `*_configs` key, one integration) of receiver `name`."""
    if name == SNS:
        if alerts_topic_arn is None:
            raise ValueError("an sns receiver needs the alerts topic's ARN")  # a bug in the caller
        return "sns_configs", {
            "topic_arn": alerts_topic_arn,
            # Region only: the SDK's default chain finds the Pod Identity credentials (module docstring).
            "sigv4": {"region": region},
            "subject": _SNS_SUBJECT,
            "attributes": {"severity": "{{ .CommonLabels.severity }}"},
            "send_resolved": resolved,
        }
    receiver = routes.receivers[name]
    if receiver.kind == PAGERDUTY:
        return "pagerduty_configs", {"routing_key_file": secret_file(name), "send_resolved": resolved}
    if receiver.kind == SLACK:
        slack: dict[str, Any] = {"api_url_file": secret_file(name), "send_resolved": resolved}
        if receiver.channel is not None:
            slack["channel"] = receiver.channel
        return "slack_configs", slack
    return "webhook_configs", {"url_file": secret_file(name), "send_resolved": resolved}


def _receiver(
    receiver_name: str, names: Sequence[str], routes: AlertRoutes, topic: str | None, region: str, resolved: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": receiver_name}
    for name in names:
        key, integration = _integration(name, routes, topic, region, resolved=resolved)
        out.setdefault(key, []).append(integration)
    return out


def alertmanager_config(
    routes: AlertRoutes, *, alerts_topic_arn: str | None, heartbeat_topic_arn: str | None, region: str
) -> dict[str, Any]:
    """kube-prometheus-stack's `alertmanager.config`: the routing tree and its receivers (module docstring). Topic
    ARNs and the region may be CloudFormation tokens: they are resolved where the Helm values are."""
    if routes.heartbeat_topic:
        if heartbeat_topic_arn is None:
            raise ValueError("a cloudwatch dead-man's switch needs the heartbeat topic's ARN")  # a bug in the caller
        switch: dict[str, Any] = {
            "name": DEADMANS_SWITCH,
            "sns_configs": [
                {
                    "topic_arn": heartbeat_topic_arn,
                    "sigv4": {"region": region},
                    "subject": "Watchdog",
                    "send_resolved": False,
                }
            ],
        }
    else:
        switch = {
            "name": DEADMANS_SWITCH,
            "webhook_configs": [{"url_file": secret_file(routes.deadmans_switch), "send_resolved": False}],
        }
    return {
        "route": {
            # Catch-all: an alert with a missing or unknown severity still reaches people.
            "receiver": WARNING,
            "group_by": ["namespace", "alertname"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "12h",
            "routes": [
                {
                    "matchers": ['alertname = "Watchdog"'],
                    "receiver": DEADMANS_SWITCH,
                    "group_wait": "0s",
                    "group_interval": HEARTBEAT_INTERVAL,
                    "repeat_interval": HEARTBEAT_INTERVAL,
                },
                {"matchers": ['alertname = "InfoInhibitor"'], "receiver": NULL},
                {"matchers": ['severity =~ "info|none"'], "receiver": NULL},
                # A page repeats every 4 hours while it fires, a warning twice a day.
                {"matchers": ['severity = "critical"'], "receiver": CRITICAL, "repeat_interval": "4h"},
                {"matchers": ['severity = "warning"'], "receiver": WARNING},
            ],
        },
        "receivers": [
            {"name": NULL},
            switch,
            _receiver(CRITICAL, routes.critical, routes, alerts_topic_arn, region, True),
            _receiver(WARNING, routes.warning, routes, alerts_topic_arn, region, True),
        ],
    }


def used_secret_receivers(routes: AlertRoutes) -> dict[str, SecretReceiver]:
    """The receivers whose secrets Alertmanager reads (routed to, or the dead-man's switch), by name."""
    used = {*routes.critical, *routes.warning, routes.deadmans_switch}
    return {name: r for name, r in routes.receivers.items() if name in used}


def receiver_secret_class(
    routes: AlertRoutes, name: str, namespace: str, region: str | None = None
) -> dict[str, Any] | None:
    """SecretProviderClass `name` mounting every used receiver's secret as the file `<receiver name>` (AWS provider,
    the pod's Pod Identity); None when no receiver has a secret."""
    used = used_secret_receivers(routes)
    if not used:
        return None
    objects = "".join(
        f'- objectName: "{r.secret}"\n  objectType: "secretsmanager"\n  objectAlias: "{receiver}"\n'
        for receiver, r in sorted(used.items())
    )
    parameters = {"objects": objects, "usePodIdentity": "true"}
    if region is not None:
        parameters["region"] = region
    return with_source(
        {
            "apiVersion": "secrets-store.csi.x-k8s.io/v1",
            "kind": "SecretProviderClass",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "llm-eks"}},
            "spec": {"provider": "aws", "parameters": parameters},
        },
        __name__,
    )


def secret_volume(secret_provider_class: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the pod volume, the container mount) of the receivers' secrets, read-only."""
    volume = {
        "name": SECRETS_VOLUME,
        "csi": {
            "driver": "secrets-store.csi.k8s.io",
            "readOnly": True,
            "volumeAttributes": {"secretProviderClass": secret_provider_class},
        },
    }
    return volume, {"name": SECRETS_VOLUME, "mountPath": SECRETS_DIR, "readOnly": True}
