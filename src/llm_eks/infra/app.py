"""Build the CDK app from cdk.json context: one InferenceStack per environment (all, or `-c env=NAME`)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from llm_eks.config import EnvironmentConfig, load_environments, parse_environment, select_environments
from llm_eks.config.canary_capacity import canary_overlaps
from llm_eks.config.pipeline import PIPELINE_CONTEXT, PipelineConfig, parse_pipeline
from llm_eks.config.plans import plan_workloads
from llm_eks.constructs.verify_runner import VerifyTrust
from llm_eks.errors import ConfigError
from llm_eks.hub.records import MODELS_DIR, MODELS_DIR_CONTEXT
from llm_eks.images.charts import IMAGE_DIGESTS_CONTEXT
from llm_eks.images.snapshot import SNAPSHOT_FILE, read_record
from llm_eks.infra.checks import LlmEksChecks
from llm_eks.infra.images import LOCK_FILE_CONTEXT, app_lock, require_snapshot_images
from llm_eks.infra.pipeline import EnvironmentStage, PromotionPipelineStack
from llm_eks.infra.review import write_stack_review
from llm_eks.infra.stack import InferenceStack
from llm_eks.infra.workloads import build_workloads
from llm_eks.strict_json import loads, read_context_file


def read_context(app: cdk.App) -> dict[str, Any]:
    """The `environments` context (from cdk.json through the CLI, or from cdk.json directly in tests)."""
    environments = app.node.try_get_context("environments")
    if isinstance(environments, str):  # `-c environments=...` arrives as JSON text
        environments = loads(environments, "-c environments", root="environments")
    return {"environments": environments}


def check_context_file(path: Path) -> None:
    """Re-read the cdk.json the CDK CLI read (it hands the app only the merged context, where an environment given
    twice has already lost its first body, 1e400 has become null, and an environment whose body is null has gone):
    each is a one-line error here, as `llm-eks plan --env` reports it."""
    if not path.is_file():
        return
    environments = read_context_file(path, "cdk.json").get("environments")
    if isinstance(environments, Mapping):
        for name, body in environments.items():
            if body is None:  # the CLI drops it; parse_environment says what is wrong with it
                parse_environment(name, body)


def read_pipeline(app: cdk.App, environments: Mapping[str, EnvironmentConfig]) -> PipelineConfig | None:
    """The `pipeline` context (cdk.json, or `-c pipeline=<JSON>`), checked against the environments."""
    body = app.node.try_get_context(PIPELINE_CONTEXT)
    if isinstance(body, str):
        body = loads(body, "-c pipeline", root=PIPELINE_CONTEXT)
    return parse_pipeline(body, environments)


def build_app(app: cdk.App, *, quiet: bool = True) -> list[InferenceStack]:
    """Validate and plan every selected environment first, then build the stacks; errors are one-liners.

    With a `pipeline` in context and no `-c env`, the app is the promotion pipeline: its stack, and one stage per
    environment it deploys (infra/pipeline.py). `-c env=NAME` builds that environment's stage alone: the template
    the pipeline deploys, to diff or deploy by hand."""
    # Models recorded by `llm-eks models add`: the models folder where the CDK CLI runs the app (beside cdk.json).
    given = app.node.try_get_context(MODELS_DIR_CONTEXT)
    models_dir = Path(given if isinstance(given, str) and given else MODELS_DIR)
    environments = load_environments(read_context(app), models_dir)
    pipeline = read_pipeline(app, environments)
    selected = app.node.try_get_context("env")
    if pipeline is not None and selected is None:
        configs = [environments[name] for name in pipeline.stage_names(list(environments))]
    else:
        configs = select_environments(environments, selected)
    staged = set(pipeline.stage_names(list(environments))) if pipeline is not None else set()
    lock = app_lock(app.node.try_get_context(LOCK_FILE_CONTEXT))
    # The snapshot `llm-eks images snapshot` recorded beside cdk.json, if any: a named snapshot must hold the images.
    snapshot = read_record(Path(SNAPSHOT_FILE))
    # Helm releases read the locked digests from context (constructs/addons.install_chart); set before any stack.
    app.node.set_context(IMAGE_DIGESTS_CONTEXT, lock.digests())
    planned = []
    for config in configs:
        plans = plan_workloads(config)
        require_snapshot_images(config, plans, snapshot, lock)
        planned.append((config, plans, build_workloads(config, plans, region=config.region, images=lock)))
    if not quiet:
        for config, plans, _ in planned:
            for served, env_plan in zip(config.served, plans, strict=True):
                name = config.name if served.key is None else f"{config.name}/{served.key}"
                print(f"llm-eks {name}: {env_plan.summary_line()}", file=sys.stderr)
            for overlap in canary_overlaps(config, plans):
                print(f"llm-eks {config.name}/{overlap.key}: {overlap.line()}", file=sys.stderr)
    # A pipeline's environments are its stages; with `-c env` one stage alone (no pipeline stack): the same
    # construct paths, so the template the pipeline deploys (`cdk diff -c env=NAME NAME/LlmEks-NAME`).
    stacks: list[InferenceStack] = []
    stages: list[EnvironmentStage] = []
    for config, plans, workloads in planned:
        if pipeline is not None and config.name in staged:
            verifier = VerifyTrust.pipeline_step(config.name, pipeline.account) if pipeline.verify else None
            stages.append(EnvironmentStage(app, config, plans, workloads, verifier=verifier))
            stacks.append(stages[-1].stack)
        else:
            stacks.append(InferenceStack(app, config, plans, workloads))
    if pipeline is not None and selected is None:
        PromotionPipelineStack(app, pipeline, stages)
    return stacks


# Context key (cdk.json or `-c`) that turns aws-cdk-lib's built-in CloudFormation validation back on.
CFN_VALIDATION_CONTEXT = "llm-eks:cloudformation-validation"


def new_app(*, context: dict[str, Any] | None = None, outdir: str | None = None) -> cdk.App:
    """A `cdk.App` without aws-cdk-lib's built-in CloudFormation validation (its WebAssembly engine costs ~5 s wall
    and ~14 s CPU per synth here, and by default only warns); `add_checks` registers it again on request."""
    return cdk.App(context=context, outdir=outdir, builtin_cloud_formation_validation=False)


def cloudformation_validation_requested(app: cdk.App) -> bool:
    """`-c llm-eks:cloudformation-validation=true` (or true in cdk.json), or `CDK_VALIDATION=true` in the
    environment."""
    value = app.node.try_get_context(CFN_VALIDATION_CONTEXT)
    return str(value).lower() == "true" or os.environ.get("CDK_VALIDATION", "").lower() == "true"


def add_checks(app: cdk.App) -> None:
    """Synth fails on any unacknowledged cdk-nag AwsSolutions finding, and on any Kubernetes object that would not
    schedule, overrun its GPU limit, drain past the Spot notice, or read a vLLM metric that no longer exists.
    aws-cdk-lib's CloudFormation validation runs too when `cloudformation_validation_requested`."""
    plugins: list[cdk.IPolicyValidationPlugin] = [AwsSolutionsChecks(app), LlmEksChecks()]
    if cloudformation_validation_requested(app):
        plugins.append(cdk.CloudFormationValidatePlugin())
    cdk.Validations.of(app).add_plugins(*plugins)


def write_review(app: cdk.App, stacks: list[InferenceStack], assembly: cdk.cx_api.CloudAssembly) -> None:
    """cdk.out/manifests/<env>/: every Kubernetes object and Helm release, as YAML a reviewer can read."""
    for stack in stacks:
        # A pipeline stage's stacks are in the stage's own (nested) assembly; synth returns the one already built.
        stage = cdk.Stage.of(stack)
        directory = stage.synth().directory if stage is not None else assembly.directory
        template = json.loads(Path(directory, stack.template_file).read_text())
        write_stack_review(
            stack.review_objects(),
            template,
            Path(assembly.directory, "manifests", stack.config.name),
            addon_namespaces=stack.addon_namespace_objects(),
        )


def synth_or_exit(app: cdk.App) -> cdk.cx_api.CloudAssembly:
    """`app.synth()`, but a failed validation plugin ends with one line pointing at its report (already printed
    above by CDK) instead of a jsii traceback."""
    try:
        return app.synth()
    except RuntimeError as err:
        if "ValidationFailed" not in str(err):
            raise
        report = Path(app.outdir, "validation-report.json")
        print(f"llm-eks: error: validation failed; the findings are listed above and in {report}", file=sys.stderr)
        sys.exit(1)


def main() -> None:
    try:
        # The CDK CLI runs the app in the folder of the cdk.json it read.
        check_context_file(Path("cdk.json"))
        app = new_app()
        stacks = build_app(app, quiet=False)
        add_checks(app)
    except ConfigError as err:
        print(f"llm-eks: error: {err}", file=sys.stderr)
        sys.exit(2)
    write_review(app, stacks, synth_or_exit(app))
