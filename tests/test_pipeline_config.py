"""The promotion pipeline's configuration (cdk.json `pipeline`): each mistake is one line naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llm_eks.config import load_environments
from llm_eks.config.pipeline import parse_pipeline
from llm_eks.errors import ConfigError
from tests.conftest import REPO_ROOT

FOLDER = REPO_ROOT / "examples" / "promotion_pipeline"
CONTEXT = json.loads((FOLDER / "cdk.json").read_text())["context"]


def _environments(**overrides: Any) -> dict[str, Any]:
    return load_environments({"environments": {**CONTEXT["environments"], **overrides}}, FOLDER / "models")


def _error(body: Any, **overrides: Any) -> str:
    with pytest.raises(ConfigError) as err:
        parse_pipeline(body, _environments(**overrides))
    return str(err.value)


def _body(**changes: Any) -> dict[str, Any]:
    return {**CONTEXT["pipeline"], **changes}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            _body(account="4444"),
            "pipeline.account: '4444' is not allowed; must be a 12-digit AWS account id [LLMEKS-E111]",
        ),
        (
            _body(stages=["dev", "stagin"]),
            "pipeline.stages[1]: 'stagin' is not allowed; did you mean 'staging'? must name an environment: dev, "
            "staging, prod [LLMEKS-E111]",
        ),
        (
            _body(stages=["dev", "dev"]),
            "pipeline.stages: ['dev', 'dev'] is not allowed; must name each environment once [LLMEKS-E111]",
        ),
        (
            _body(stages=["dev", "staging"], approval=["prod"]),
            "pipeline.approval[0]: 'prod' is not allowed; must be one of the stages: dev, staging [LLMEKS-E111]",
        ),
        (
            _body(source={**CONTEXT["pipeline"]["source"], "connection_arn": "arn:aws:codecommit:x"}),
            "pipeline.source.connection_arn: 'arn:aws:codecommit:x' is not allowed; must be a CodeConnections "
            "connection ARN (arn:aws:codeconnections:<region>:<account>:connection/<id>) [LLMEKS-E111]",
        ),
        (
            _body(source={**CONTEXT["pipeline"]["source"], "repository": "llm-platform"}),
            "pipeline.source.repository: 'llm-platform' is not allowed; must be owner/name [LLMEKS-E111]",
        ),
        (
            _body(synth_commands=[]),
            "pipeline.synth_commands: [] is not allowed; must be non-empty shell commands [LLMEKS-E111]",
        ),
        (
            _body(stage=["dev"]),
            "pipeline: unknown key 'stage'; did you mean 'stages'? allowed: account, approval, region, source, "
            "stages, synth_commands, verify, wheelhouse_command [LLMEKS-E103]",
        ),
        (
            _body(wheelhouse_command=" "),
            "pipeline.wheelhouse_command: ' ' is not allowed; must be a shell command [LLMEKS-E111]",
        ),
    ],
)
def test_pipeline_config_errors(body: dict[str, Any], message: str) -> None:
    assert _error(body) == message


def test_a_stage_needs_an_account() -> None:
    dev = {k: v for k, v in CONTEXT["environments"]["dev"].items() if k not in ("account", "region", "vpc")}
    assert _error(_body(), dev=dev) == (
        "environments.dev: account and region are required when the pipeline deploys it (a stage deploys into an "
        "explicit environment; bootstrap that account with --trust 444444444444) [LLMEKS-E111]"
    )


def test_an_environment_with_an_account_names_its_zones() -> None:
    dev = {k: v for k, v in CONTEXT["environments"]["dev"].items() if k != "vpc"}
    with pytest.raises(ConfigError) as err:
        _environments(dev=dev)
    assert str(err.value) == (
        "environments.dev.vpc.availability_zones: required with account and region (CDK would look the zones up in "
        "111111111111 at synth, and synth runs offline); list 2 or more zones of us-west-2, as "
        "`aws ec2 describe-availability-zones --region us-west-2` names them [LLMEKS-E112]"
    )


def test_no_pipeline_is_none() -> None:
    assert parse_pipeline(None, _environments()) is None
