"""GeneratedApiKey: the OpenAI endpoint's key as a generated Secrets Manager secret, never a template value."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest

from llm_eks.config import parse_environment
from llm_eks.constructs.api_key import GeneratedApiKey, GeneratedApiKeyProps
from llm_eks.errors import ConfigError
from llm_eks.infra.charts import prerequisites, workload_secrets
from llm_eks.infra.workloads import api_key_secret
from tests.cdk_fixtures import synth_with_nag


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    outdir = tmp_path_factory.mktemp("api-key")
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "Key", env=cdk.Environment(account="123456789012", region="us-west-2"))
    GeneratedApiKey(stack, "ApiKey", GeneratedApiKeyProps(secret_name="llm-eks/dev/api-key"))
    report = synth_with_nag(app)
    return json.loads((outdir / "Key.template.json").read_text()), report


def test_the_template_holds_the_generator_never_the_value(synthesized: tuple[dict[str, Any], dict[str, Any]]) -> None:
    template, _ = synthesized
    (secret,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SecretsManager::Secret"]
    props = secret["Properties"]
    assert props["Name"] == "llm-eks/dev/api-key"
    # Letters and digits only: safe in a shell, an HTTP header and a curl command line.
    assert props["GenerateSecretString"] == {"ExcludePunctuation": True, "IncludeSpace": False, "PasswordLength": 48}
    assert '"SecretString"' not in json.dumps(template)
    # The account's aws/secretsmanager key: no KmsKeyId (IAM alone decides who reads it).
    assert "KmsKeyId" not in props


def test_cdk_nag_clean_with_rotation_acknowledged_on_the_secret(
    synthesized: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    _, report = synthesized
    assert report["pluginReports"], "cdk-nag did not run"
    violations = [v["ruleName"] for r in report["pluginReports"] for v in r["violations"]]
    assert not violations


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            GeneratedApiKeyProps(secret_name="arn:aws:secretsmanager:us-west-2:123456789012:secret:k-AbCdEf"),
            "api_key.secret_name: 'arn:aws:secretsmanager:us-west-2:123456789012:secret:k-AbCdEf' is not allowed; "
            "must be a Secrets Manager secret name, not an ARN [LLMEKS-E308]",
        ),
        (
            GeneratedApiKeyProps(secret_name="llm-eks/dev/api-key", length=16),
            "api_key.length: 16 is not allowed; must be 32 to 4096 characters [LLMEKS-E308]",
        ),
    ],
)
def test_bad_props_fail_with_one_line(props: GeneratedApiKeyProps, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        GeneratedApiKey(cdk.Stack(cdk.App(), "Bad"), "ApiKey", props)
    assert str(err.value) == f"Bad/ApiKey: {message}"


@pytest.mark.parametrize(
    ("workload", "secret", "reads"),
    [
        # On by default: the generated name, read with the Hub token.
        (
            {"hf_token_secret": "llm-eks/dev/hf-token"},
            "llm-eks/dev/api-key",
            ("llm-eks/dev/hf-token", "llm-eks/dev/api-key"),
        ),
        ({"api_key_secret": "team/llm/key"}, "team/llm/key", ("team/llm/key",)),
        # Off: no secret to read, so a public model needs no Secrets Store CSI driver at all.
        ({"api_key": False}, None, ()),
        # Ray Serve LLM has no key check.
        ({"engine": "ray-serve"}, None, ()),
    ],
)
def test_which_secret_the_workload_reads(workload: dict[str, Any], secret: str | None, reads: tuple[str, ...]) -> None:
    from llm_eks.infra.workloads import build_workload
    from tests.environments import plan_environment

    config = parse_environment("dev", {"workload": workload})
    assert api_key_secret(config) == secret
    built = build_workload(config, plan_environment(config))
    assert workload_secrets(built) == reads
    assert ("secrets" in prerequisites(built)) == bool(reads)
    # The vLLM chart gets the same name; a Ray Serve workload has none.
    assert built.api_key_secret == secret
