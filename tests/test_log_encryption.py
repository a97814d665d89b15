"""Every CloudWatch log group the stacks create is encrypted with the stack's customer-managed logs key."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ENVIRONMENTS


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_log_group_uses_the_one_logs_key(templates: dict[str, dict[str, Any]], env: str) -> None:
    template = templates[env]
    keys = [k for k in _of_type(template, "AWS::KMS::Key") if k.startswith("LlmEksLogsKey")]
    assert len(keys) == 1, keys
    groups = _of_type(template, "AWS::Logs::LogGroup")
    # VPC flow logs and the teardown handler's and its Provider framework's logs.
    assert len(groups) >= 3, list(groups)
    for name, group in groups.items():
        assert group["Properties"].get("KmsKeyId") == {"Fn::GetAtt": [keys[0], "Arn"]}, name


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_logs_key_rotates_and_only_this_accounts_log_groups_may_use_it(
    templates: dict[str, dict[str, Any]], env: str
) -> None:
    key = next(r for k, r in _of_type(templates[env], "AWS::KMS::Key").items() if k.startswith("LlmEksLogsKey"))
    assert key["Properties"]["EnableKeyRotation"] is True
    statement = next(
        s for s in key["Properties"]["KeyPolicy"]["Statement"] if s.get("Sid") == "CloudWatchLogsOfThisAccountAndRegion"
    )
    assert statement["Principal"] == {
        "Service": {"Fn::Join": ["", ["logs.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]}
    }
    assert "kms:Decrypt*" in statement["Action"]
    context = statement["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
    assert context == {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":logs:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":log-group:*",
            ],
        ]
    }
