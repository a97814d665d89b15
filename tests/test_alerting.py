"""Alerts reach people: Alertmanager's routing (run by amtool, Alertmanager's own tool), the topics, the heartbeat
alarm, the Alertmanager pods' identity, and the `alerting` config's one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llm_eks.config import parse_environment
from llm_eks.errors import ConfigError
from llm_eks.manifests.alerting import (
    SECRETS_DIR,
    AlertRoutes,
    SecretReceiver,
    alertmanager_config,
    receiver_secret_class,
)
from tests.amtool import EVERY_RECEIVER_KIND, check_config, routes_to, routing_only, write_config
from tests.conftest import ENVIRONMENTS, Synthesized

TOPIC = "arn:aws:sns:us-west-2:123456789012:llm-eks-prod-alerts"
HEARTBEAT = "arn:aws:sns:us-west-2:123456789012:llm-eks-prod-heartbeat"
# Labels -> the receiver it must reach, whatever the receivers behind each route.
ROUTING = (
    ({"alertname": "Watchdog", "severity": "none"}, "deadmans-switch"),
    ({"alertname": "InfoInhibitor", "severity": "none"}, "null"),
    ({"alertname": "VllmNoReadyReplica", "severity": "critical", "namespace": "inference"}, "critical"),
    ({"alertname": "KedaScalerErrors", "severity": "warning", "namespace": "inference"}, "warning"),
    ({"alertname": "CPUThrottlingHigh", "severity": "info", "namespace": "kube-system"}, "null"),
    ({"alertname": "SomethingNew", "namespace": "inference"}, "warning"),
)


def _shipped_config(synthesized: Synthesized, env: str) -> dict[str, Any]:
    config: dict[str, Any] = synthesized.release_values(env, "kube-prometheus-stack")["alertmanager"]["config"]
    return config


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_shipped_environment_routes_every_severity_and_the_watchdog(
    synthesized: Synthesized, env: str, tmp_path: Path
) -> None:
    config = _shipped_config(synthesized, env)
    path = write_config(tmp_path, env, config)
    check_config(path)
    for labels, receiver in ROUTING:
        routes_to(path, labels, receiver)
    receivers = {r["name"]: r for r in config["receivers"]}
    # Nothing people need goes to the null receiver: critical and warning publish to the alerts topic, the Watchdog
    # to the heartbeat topic.
    for name in ("critical", "warning"):
        (sns,) = receivers[name]["sns_configs"]
        assert sns["topic_arn"].startswith("${Ref:ObservabilityAlertTopicsAlerts")
        assert sns["sigv4"] == {"region": "${Ref:AWS::Region}"}
        assert set(sns["sigv4"]) == {"region"}, "no static keys, no role to assume: the pods' Pod Identity role"
    (heartbeat,) = receivers["deadmans-switch"]["sns_configs"]
    assert heartbeat["topic_arn"].startswith("${Ref:ObservabilityAlertTopicsHeartbeat")
    assert receivers["null"] == {"name": "null"}


def test_every_receiver_kind_routes_and_reads_its_secret_from_a_file(tmp_path: Path) -> None:
    routes = EVERY_RECEIVER_KIND
    config = alertmanager_config(routes, alerts_topic_arn=TOPIC, heartbeat_topic_arn=None, region="us-west-2")
    path = write_config(tmp_path, "every-kind", routing_only(config))
    for labels, receiver in ROUTING:
        routes_to(path, labels, receiver)
    receivers = {r["name"]: r for r in config["receivers"]}
    assert receivers["critical"]["pagerduty_configs"] == [
        {"routing_key_file": f"{SECRETS_DIR}/pager", "send_resolved": True}
    ]
    assert receivers["critical"]["sns_configs"][0]["topic_arn"] == TOPIC
    assert receivers["warning"] == {
        "name": "warning",
        "slack_configs": [{"api_url_file": f"{SECRETS_DIR}/chat", "send_resolved": True, "channel": "#llm-alerts"}],
    }
    assert receivers["deadmans-switch"] == {
        "name": "deadmans-switch",
        "webhook_configs": [{"url_file": f"{SECRETS_DIR}/snitch", "send_resolved": False}],
    }
    # Each secret is mounted under the name its receiver reads, by name from Secrets Manager.
    spc = receiver_secret_class(routes, "alertmanager-receivers", "monitoring", "us-west-2")
    assert spc is not None
    objects = spc["spec"]["parameters"]["objects"]
    for alias, secret in (("pager", "llm-eks/prod/pagerduty"), ("chat", "llm-eks/prod/slack")):
        assert f'- objectName: "{secret}"\n  objectType: "secretsmanager"\n  objectAlias: "{alias}"\n' in objects
    assert spc["spec"]["parameters"]["usePodIdentity"] == "true"


def test_the_sns_config_alertmanager_runs_is_accepted_by_amtool(tmp_path: Path) -> None:
    routes = AlertRoutes(
        receivers={"pager": SecretReceiver("pagerduty", "llm-eks/prod/pagerduty")}, critical=("pager",)
    )
    config = alertmanager_config(routes, alerts_topic_arn=TOPIC, heartbeat_topic_arn=HEARTBEAT, region="us-west-2")
    check_config(write_config(tmp_path, "sns-and-pager", config))


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_topics_heartbeat_alarm_and_stack_failures(templates: dict[str, dict[str, Any]], env: str) -> None:
    resources = templates[env]["Resources"]

    def of_type(kind: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in resources.items() if r["Type"] == kind}

    topics = {r["Properties"]["TopicName"]: (k, r) for k, r in of_type("AWS::SNS::Topic").items()}
    assert set(topics) == {f"llm-eks-{env}-alerts", f"llm-eks-{env}-heartbeat"}
    alerts, heartbeat = topics[f"llm-eks-{env}-alerts"][0], topics[f"llm-eks-{env}-heartbeat"][0]
    for _, topic in topics.values():
        assert "Fn::GetAtt" in topic["Properties"]["KmsMasterKeyId"], "encrypted with the topics' own key"
    # Both topics refuse plain HTTP.
    for policy in of_type("AWS::SNS::TopicPolicy").values():
        denies = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        assert denies and denies[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    (alarm,) = of_type("AWS::CloudWatch::Alarm").values()
    p = alarm["Properties"]
    assert (p["Namespace"], p["MetricName"], p["Statistic"], p["Period"]) == (
        "AWS/SNS",
        "NumberOfMessagesPublished",
        "Sum",
        300,
    )
    assert p["Dimensions"] == [{"Name": "TopicName", "Value": {"Fn::GetAtt": [heartbeat, "TopicName"]}}]
    assert (p["ComparisonOperator"], p["Threshold"], p["EvaluationPeriods"], p["TreatMissingData"]) == (
        "LessThanThreshold",
        1,
        2,
        "breaching",
    )
    assert p["AlarmActions"] == p["OKActions"] == [{"Ref": alerts}]
    (rule,) = [r for r in of_type("AWS::Events::Rule").values() if "aws.cloudformation" in str(r)]
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["detail-type"] == ["CloudFormation Stack Status Change"]
    assert pattern["detail"]["stack-id"] == [{"Ref": "AWS::StackId"}]
    assert "UPDATE_ROLLBACK_FAILED" in pattern["detail"]["status-details"]["status"]
    assert rule["Properties"]["Targets"][0]["Arn"] == {"Ref": alerts}
    assert "AlertsTopicArn" in templates[env]["Outputs"]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_alertmanager_publishes_with_its_own_pod_identity_role(templates: dict[str, dict[str, Any]], env: str) -> None:
    resources = templates[env]["Resources"]
    (association,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation"
        and r["Properties"]["ServiceAccount"] == "kube-prometheus-stack-alertmanager"
    ]
    assert association["Namespace"] == "monitoring"
    role = association["RoleArn"]["Fn::GetAtt"][0]
    statements = [
        s
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    publish = [s for s in statements if s["Action"] == "sns:Publish"]
    assert len(publish) == 2, "the alerts and the heartbeat topic, nothing else"
    actions = {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert actions == {"sns:Publish", "kms:Decrypt", "kms:GenerateDataKey*"}


def _env(alerting: dict[str, Any]) -> dict[str, Any]:
    return {"alerting": alerting}


@pytest.mark.parametrize(
    ("alerting", "message"),
    [
        (
            {"critical": ["pager"]},
            "environments.e.alerting.critical[0]: 'pager' is not allowed; must be 'sns' or a receiver of "
            "environments.e.alerting.receivers (none defined) [LLMEKS-E134]",
        ),
        (
            {"critical": []},
            "environments.e.alerting.critical: [] is not allowed; must name at least one receiver (sns): critical "
            "alerts must reach someone [LLMEKS-E134]",
        ),
        (
            {"receivers": {"pager": {"type": "pagerdutty", "secret": "s"}}},
            "environments.e.alerting.receivers.pager.type: 'pagerdutty' is not allowed; did you mean 'pagerduty'? "
            "must be one of pagerduty, slack, webhook [LLMEKS-E134]",
        ),
        (
            {"receivers": {"pager": {"type": "pagerduty", "secret": "arn:aws:secretsmanager:us-east-1:1:secret:x"}}},
            "environments.e.alerting.receivers.pager.secret: 'arn:aws:secretsmanager:us-east-1:1:secret:x' is not "
            "allowed; must be the NAME of a Secrets Manager secret holding the routing key or URL (never the value, "
            "never an ARN) [LLMEKS-E134]",
        ),
        (
            {"receivers": {"pager": {"type": "pagerduty", "secret": "s"}}, "deadmans_switch": "pager"},
            "environments.e.alerting.deadmans_switch: 'pager' is not allowed; must be 'cloudwatch' (an SNS heartbeat "
            "topic watched by a CloudWatch alarm) or a receiver of type webhook that alarms when the heartbeat stops "
            "(none defined) [LLMEKS-E134]",
        ),
        (
            {"receivers": {"chat": {"type": "webhook", "secret": "s", "channel": "#x"}}},
            "environments.e.alerting.receivers.chat.channel: only allowed with type slack [LLMEKS-E134]",
        ),
        (
            {"receivers": {"sns": {"type": "webhook", "secret": "s"}}},
            "environments.e.alerting.receivers: 'sns' is not allowed; receiver names are 1-31 lowercase letters, "
            "digits and '-', starting with a letter, and not 'sns' or 'cloudwatch' (llm-eks's own) [LLMEKS-E134]",
        ),
        (
            {"email": ["oncall"]},
            "environments.e.alerting.email[0]: 'oncall' is not allowed; must be an email address such as "
            "oncall@example.com [LLMEKS-E134]",
        ),
        (
            {
                "email": ["a@example.com"],
                "critical": ["pager"],
                "warning": ["pager"],
                "receivers": {"pager": {"type": "pagerduty", "secret": "s"}},
            },
            "environments.e.alerting.email: ['a@example.com'] is not allowed; needs 'sns' among critical or warning "
            "receivers (the emails subscribe to the alerts topic) [LLMEKS-E134]",
        ),
    ],
)
def test_alerting_errors_are_one_line(alerting: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_environment("e", _env(alerting))
    assert str(err.value) == message


def test_alerting_defaults_reach_the_topic_and_the_heartbeat() -> None:
    a = parse_environment("e", {}).alerting
    routes = a.routes()
    assert (routes.critical, routes.warning, routes.deadmans_switch) == (("sns",), ("sns",), "cloudwatch")
    assert routes.uses_sns and routes.heartbeat_topic
