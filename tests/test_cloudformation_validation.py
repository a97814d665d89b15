"""aws-cdk-lib's built-in CloudFormation validation: off in our apps (cfn-lint gates every template in the tests),
back on with one context key or CDK_VALIDATION=true, and then its findings are in the validation report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sqs as sqs

from llm_eks.infra.app import CFN_VALIDATION_CONTEXT, add_checks, cloudformation_validation_requested, new_app


def _report_of_a_bad_queue(outdir: Path, context: dict[str, Any]) -> dict[str, Any]:
    """Synthesize one queue whose retention CloudFormation rejects (60 s is its minimum) and return the report."""
    app = new_app(context=context, outdir=str(outdir))
    sqs.CfnQueue(cdk.Stack(app, "Bad"), "Queue", message_retention_period=10)
    add_checks(app)
    with pytest.raises(RuntimeError, match="ValidationFailed"):  # cdk-nag's SQS findings fail it either way
        app.synth()
    report: dict[str, Any] = json.loads((outdir / "validation-report.json").read_text())
    return report


def _cloudformation_rules(report: dict[str, Any]) -> list[str]:
    name = cdk.CloudFormationValidatePlugin.PLUGIN_NAME
    return [v["ruleName"] for p in report["pluginReports"] if p["pluginName"] == name for v in p["violations"]]


def test_off_by_default(tmp_path: Path) -> None:
    report = _report_of_a_bad_queue(tmp_path, {})
    assert _cloudformation_rules(report) == []
    assert {p["pluginName"] for p in report["pluginReports"]} >= {"AwsSolutions"}


def test_the_context_key_turns_it_back_on(tmp_path: Path) -> None:
    report = _report_of_a_bad_queue(tmp_path, {CFN_VALIDATION_CONTEXT: "true"})
    assert _cloudformation_rules(report) == ["F3034"]  # "10 is less than the minimum of 60"


@pytest.mark.parametrize(
    ("context", "environment", "expected"),
    [
        ({}, None, False),
        ({CFN_VALIDATION_CONTEXT: True}, None, True),
        ({CFN_VALIDATION_CONTEXT: "true"}, None, True),
        ({CFN_VALIDATION_CONTEXT: "false"}, None, False),
        ({}, "true", True),
        ({}, "false", False),
    ],
)
def test_requested_by_context_or_environment(
    monkeypatch: pytest.MonkeyPatch, context: dict[str, Any], environment: str | None, expected: bool
) -> None:
    if environment is None:
        monkeypatch.delenv("CDK_VALIDATION", raising=False)
    else:
        monkeypatch.setenv("CDK_VALIDATION", environment)
    assert cloudformation_validation_requested(cdk.App(context=context)) is expected
