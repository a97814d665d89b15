"""The promotion pipeline's configuration: cdk.json context `pipeline` (absent: no pipeline, every environment is
its own stack as before). Read as strictly as `environments`; every error is one line naming the field."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_eks import aws_ids
from llm_eks.aws_regions import REGIONS
from llm_eks.config.environment import EnvironmentConfig
from llm_eks.config.schema import build
from llm_eks.error_codes import E111
from llm_eks.errors import ConfigError, did_you_mean, fail

# cdk.json context key.
PIPELINE_CONTEXT = "pipeline"
# A CodeConnections connection (the service was renamed from CodeStar Connections in 2024; both prefixes are live).
_CONNECTION_ARN = re.compile(
    r"^arn:aws[a-z-]*:(codeconnections|codestar-connections):[a-z0-9-]+:\d{12}:connection/[0-9a-f-]{36}$"
)
_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_BRANCH = re.compile(r"^[A-Za-z0-9._/-]{1,255}$")


@dataclass(frozen=True)
class PipelineSourceConfig:
    """Where the pipeline reads the app from: a repository through an AWS CodeConnections connection."""

    # The connection's ARN; it is created (and authorized with the provider) in the console, never by a template.
    connection_arn: str
    # owner/name of the repository that holds this app (its cdk.json).
    repository: str
    # Pushes to this branch run the pipeline.
    branch: str = "main"


@dataclass(frozen=True)
class PipelineConfig:
    """One self-mutating CodePipeline that deploys the environments in order, verifying each against its plan."""

    # The account and region the pipeline runs in (a tooling account, or the dev account). CDK Pipelines needs both
    # for actions in other environments.
    account: str
    region: str
    source: PipelineSourceConfig
    # The environments in promotion order; empty: every environment of cdk.json, in its order.
    stages: tuple[str, ...] = ()
    # Environments that wait for a person's approval before they deploy; None: the last stage (prod).
    approval: tuple[str, ...] | None = None
    # Run `llm-eks verify --env NAME` after each stage deploys; a breach or drift fails the stage.
    verify: bool = True
    # What the synth step runs in a checkout of the repository: this repository's CI (tests gate every stage), then
    # the synth with the CDK CLI pinned in package.json. Its output must be cdk.out.
    synth_commands: tuple[str, ...] = ("./.ci/run", "make synth")
    # Then (with verify) the wheelhouse the verify runners install llm-eks from, with every pinned dependency and its
    # hash, into ./wheelhouse: built where the tests just ran, so verify runs what they tested, with no package
    # index at verify time (llm_eks.infra.wheelhouse).
    wheelhouse_command: str = ".venv/bin/python -m llm_eks.infra.wheelhouse wheelhouse"

    def stage_names(self, environments: Sequence[str]) -> tuple[str, ...]:
        return self.stages or tuple(environments)

    def approved(self, environments: Sequence[str]) -> tuple[str, ...]:
        stages = self.stage_names(environments)
        return stages[-1:] if self.approval is None else self.approval


def parse_pipeline(body: Any, environments: Mapping[str, EnvironmentConfig]) -> PipelineConfig | None:
    """cdk.json's `pipeline` object (None: no pipeline), checked against the environments it promotes."""
    if body is None:
        return None
    path = PIPELINE_CONTEXT
    p = build(PipelineConfig, body, path)
    if not aws_ids.ACCOUNT.match(p.account):
        raise fail(E111, f"{path}.account", p.account, "must be a 12-digit AWS account id")
    if p.region not in REGIONS:
        raise fail(
            E111,
            f"{path}.region",
            p.region,
            f"{did_you_mean(p.region, REGIONS)}must be an AWS region such as us-east-1",
        )
    s = p.source
    if not _CONNECTION_ARN.match(s.connection_arn):
        raise fail(
            E111,
            f"{path}.source.connection_arn",
            s.connection_arn,
            "must be a CodeConnections connection ARN (arn:aws:codeconnections:<region>:<account>:connection/<id>)",
        )
    if not _REPOSITORY.match(s.repository):
        raise fail(E111, f"{path}.source.repository", s.repository, "must be owner/name")
    if not _BRANCH.match(s.branch) or ".." in s.branch:
        raise fail(E111, f"{path}.source.branch", s.branch, "must be a branch name")
    if not p.synth_commands or any(not c.strip() for c in p.synth_commands):
        raise fail(E111, f"{path}.synth_commands", list(p.synth_commands), "must be non-empty shell commands")
    if not p.wheelhouse_command.strip():
        raise fail(E111, f"{path}.wheelhouse_command", p.wheelhouse_command, "must be a shell command")
    names = list(environments)
    stages = p.stage_names(names)
    for i, name in enumerate(stages):
        if name not in environments:
            raise fail(
                E111,
                f"{path}.stages[{i}]",
                name,
                f"{did_you_mean(name, names)}must name an environment: {', '.join(names)}",
            )
    if len(set(stages)) != len(stages):
        raise fail(E111, f"{path}.stages", list(stages), "must name each environment once")
    for i, name in enumerate(p.approved(names)):
        if name not in stages:
            raise fail(E111, f"{path}.approval[{i}]", name, f"must be one of the stages: {', '.join(stages)}")
    for name in stages:
        config = environments[name]
        if config.account is None or config.region is None:
            raise ConfigError(
                E111,
                f"environments.{name}: account and region are required when the pipeline deploys it (a stage "
                "deploys into an explicit environment; bootstrap that account with --trust "
                f"{p.account})",
            )
    return p
