"""The promotion pipeline: one self-mutating CDK Pipeline (CodePipeline V2) that synthesizes the app from the
repository, then deploys the environments in order (dev, staging, prod by default), each as a `cdk.Stage` holding
its `InferenceStack` under the stack's own name (so an environment deployed by hand before is updated, not
duplicated). Approved stages wait for a person first; every stage ends with `llm-eks verify --wait-ready` run inside
that environment's VPC by its VerifyRunner (the verify step only starts it: verify_stage.sh), so a stage whose
cluster breaches or drifts from its plan stops the promotion there.

The synth step also builds the wheelhouse the runner installs from (`wheelhouse_command`: llm-eks and every pinned
dependency, with their hashes; infra/wheelhouse.py); each verify step takes it with the checkout, runs as a role of
its own (`verify_step_role_name`) that is the one principal its environment's launcher role trusts, with the
ExternalId, and keeps the runner's journal as its output artifact.

Cross-account: the artifact bucket has a KMS key (cross_account_keys, rotated), and each environment's account must
be bootstrapped to trust the pipeline's (`cdk bootstrap --trust <pipeline account>`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from importlib import resources

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_codepipeline as codepipeline
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import pipelines
from constructs import Construct

from llm_eks.config import EnvironmentConfig
from llm_eks.config.pipeline import PipelineConfig
from llm_eks.constructs.buckets import private_bucket
from llm_eks.constructs.nag import acknowledge, iam5_findings, skip_checkov
from llm_eks.constructs.verify_runner import (
    BUILD_IMAGE,
    RUNTIMES,
    WHEELHOUSE,
    VerifyTrust,
    launcher_role_name,
    verify_external_id,
    verify_step_role_name,
)
from llm_eks.infra.stack import InferenceStack
from llm_eks.infra.workloads import Workload
from llm_eks.planner import Plan

# The CDK CLI the pipeline's synth and self-mutation steps use: package.json's pin (a test keeps them equal).
CDK_CLI_VERSION = "2.1148.1"
PIPELINE_STACK_NAME = "LlmEks-pipeline"
# Where the artifact bucket's server access logs go, in their own bucket.
ARTIFACT_LOG_PREFIX = "artifact-bucket/"
LOG_BUCKET_REASON = "The artifact bucket's access-log bucket: logging it too would need yet another bucket."
# checkov CKV_AWS_111 on CDK Pipelines' asset-publishing role (pipelines AssetSingletonRole): the generated policy.
ASSET_ROLE_REASON = (
    "CDK Pipelines' one asset-publishing role: StartBuild/StopBuild/BatchGetBuilds on * for its publishing projects."
)
# The synth step runs the test suite and three synths: CodeBuild's 3 GB SMALL is too little for jsii and pytest -n 2.
SYNTH_COMPUTE = codebuild.ComputeType.MEDIUM
# The verify step's output directory (verify_stage.sh writes the journal into it).
VERIFY_OUTPUT = "verify-output"


def verify_stage_script() -> str:
    """The verify step's script (shipped with the package, so an app that imports llm-eks has it too)."""
    return resources.files("llm_eks.infra").joinpath("verify_stage.sh").read_text()


class EnvironmentStage(cdk.Stage):
    """One environment as a pipeline stage: its InferenceStack in its own account and region."""

    def __init__(
        self,
        scope: Construct,
        config: EnvironmentConfig,
        plans: Sequence[Plan],
        workloads: Sequence[Workload],
        *,
        verifier: VerifyTrust | None,
    ) -> None:
        super().__init__(scope, config.name, env=cdk.Environment(account=config.account, region=config.region))
        self.config = config
        self.stack = InferenceStack(self, config, plans, workloads, stack_name=config.stack_name, verifier=verifier)


class PromotionPipelineStack(cdk.Stack):
    """The pipeline (in `config.account`/`config.region`) and the order, approvals and verification of its stages."""

    def __init__(self, scope: Construct, config: PipelineConfig, stages: Sequence[EnvironmentStage]) -> None:
        super().__init__(
            scope,
            PIPELINE_STACK_NAME,
            env=cdk.Environment(account=config.account, region=config.region),
            description="llm-eks promotion pipeline: " + " -> ".join(s.config.name for s in stages),
        )
        s = config.source
        self.source = pipelines.CodePipelineSource.connection(
            s.repository, s.branch, connection_arn=s.connection_arn, trigger_on_push=True
        )
        commands = [*config.synth_commands, *([config.wheelhouse_command] if config.verify else [])]
        synth = pipelines.ShellStep("Synth", input=self.source, commands=commands, primary_output_directory="cdk.out")
        # What the verify runners install llm-eks from (no package index at verify time).
        self.wheelhouse = synth.add_output_directory(WHEELHOUSE) if config.verify else None
        self.pipeline = pipelines.CodePipeline(
            self,
            "Pipeline",
            pipeline_name="llm-eks",
            pipeline_type=codepipeline.PipelineType.V2,
            synth=synth,
            # Every step (the self-mutation runs the CDK CLI on Node too) on the image with Node 24.
            code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(build_image=BUILD_IMAGE)
            ),
            synth_code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(build_image=BUILD_IMAGE, compute_type=SYNTH_COMPUTE),
                partial_build_spec=codebuild.BuildSpec.from_object(
                    {"phases": {"install": {"runtime-versions": RUNTIMES}}}
                ),
            ),
            # Stages in other accounts read the artifacts: the bucket needs a KMS key, rotated yearly.
            cross_account_keys=True,
            enable_key_rotation=True,
            cli_version=CDK_CLI_VERSION,
            # No Docker: synth needs none (charts are JSON, no image or bundled asset is built).
            docker_enabled_for_synth=False,
        )
        approved = set(config.approved([st.config.name for st in stages]))
        self.verify_steps: dict[str, pipelines.CodeBuildStep] = {}
        for stage in stages:
            name = stage.config.name
            pre: list[pipelines.Step] = []
            if name in approved:
                pre.append(
                    pipelines.ManualApprovalStep(
                        f"Promote-{name}",
                        comment=(
                            f"Promote to {name}: review the {stage.config.stack_name} change set and the last "
                            "stage's verify log first"
                        ),
                    )
                )
            post: list[pipelines.Step] = []
            if config.verify:
                post.append(self._verify_step(stage))
            self.pipeline.add_stage(stage, pre=pre, post=post)
        self.pipeline.build_pipeline()
        self._grant_codeconnections(config)
        self.artifact_access_logs = self._harden_artifact_bucket()
        self._acknowledge()

    def _verify_step(self, stage: EnvironmentStage) -> pipelines.CodeBuildStep:
        runner = stage.stack.verify_runner
        if runner is None or self.wheelhouse is None:
            raise TypeError(f"stage {stage.config.name} has no VerifyRunner")
        config = stage.config
        launcher = f"arn:{cdk.Aws.PARTITION}:iam::{config.account}:role/{launcher_role_name(config.name)}"
        # The one principal the environment's launcher role trusts (by this fixed name, from its own account).
        role = iam.Role(
            self,
            f"VerifyRole-{config.name}",
            role_name=verify_step_role_name(config.name),
            assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"),
            description=f"The promotion pipeline's verify step for {config.name}: assumes its launcher role",
        )
        step = pipelines.CodeBuildStep(
            f"Verify-{config.name}",
            input=self.source,
            additional_inputs={WHEELHOUSE: self.wheelhouse},
            env={"LLM_EKS_ENV": config.name, "VERIFY_EXTERNAL_ID": verify_external_id(config.name, self.account)},
            env_from_cfn_outputs=runner.outputs,
            commands=[f"bash -c {shlex.quote(verify_stage_script())}"],
            role=role,
            role_policy_statements=[iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[launcher])],
            # The runner's journal and the build's id and status: the stage's artifact.
            primary_output_directory=VERIFY_OUTPUT,
            # The wait for the build (verify_stage.sh polls at most 50 minutes: the runner's 45 and its queue) and
            # the upload.
            timeout=cdk.Duration.minutes(60),
        )
        self.verify_steps[config.name] = step
        return step

    def _grant_codeconnections(self, config: PipelineConfig) -> None:
        """CDK grants only codestar-connections:UseConnection; a connection whose ARN has the codeconnections
        prefix (every connection the console made since July 2024) needs the new action name too (AWS
        CodeConnections rename guide: the prefix in the policy must match the resource's)."""
        source_stage = self.pipeline.pipeline.node.find_child("Source")
        action = source_stage.node.find_child(config.source.repository.replace("/", "_"))
        role = action.node.find_child("CodePipelineActionRole")
        if not isinstance(role, iam.Role):
            raise TypeError(f"the source action's role is a {type(role).__name__}")
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["codeconnections:UseConnection"], resources=[config.source.connection_arn])
        )

    def _harden_artifact_bucket(self) -> s3.Bucket:
        """CDK Pipelines creates its artifact bucket without versioning or server access logs: turn both on (each an
        update of the bucket in place). An overwritten or deleted artifact keeps its old version for 30 days, and
        every request on it is logged into a bucket of its own, kept a year."""
        bucket = self.pipeline.pipeline.artifact_bucket
        resource = bucket.node.default_child
        if not isinstance(bucket, s3.Bucket) or not isinstance(resource, s3.CfnBucket):
            raise TypeError(f"the pipeline's artifact bucket is a {type(bucket).__name__}, not an s3.Bucket")
        logs = private_bucket(
            self,
            "ArtifactAccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            lifecycle_rules=[
                s3.LifecycleRule(expiration=cdk.Duration.days(365), noncurrent_version_expiration=cdk.Duration.days(30))
            ],
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        # S3 delivers the records as its logging service, for this bucket of this account only (S3 user guide,
        # "Permissions for log delivery"; what aws-s3's Bucket writes for server_access_logs_bucket).
        logs.add_to_resource_policy(
            iam.PolicyStatement(
                sid="S3ServerAccessLogsOfTheArtifactBucket",
                principals=[iam.ServicePrincipal("logging.s3.amazonaws.com")],
                actions=["s3:PutObject"],
                resources=[logs.arn_for_objects(f"{ARTIFACT_LOG_PREFIX}*")],
                conditions={
                    "ArnLike": {"aws:SourceArn": bucket.bucket_arn},
                    "StringEquals": {"aws:SourceAccount": self.account},
                },
            )
        )
        resource.versioning_configuration = s3.CfnBucket.VersioningConfigurationProperty(status="Enabled")
        bucket.add_lifecycle_rule(id="ExpireOldVersions", noncurrent_version_expiration=cdk.Duration.days(30))
        resource.logging_configuration = s3.CfnBucket.LoggingConfigurationProperty(
            destination_bucket_name=logs.bucket_name, log_file_prefix=ARTIFACT_LOG_PREFIX
        )
        acknowledge(logs, "S1", LOG_BUCKET_REASON)
        skip_checkov(logs, "CKV_AWS_18", LOG_BUCKET_REASON)
        return logs

    def _acknowledge(self) -> None:
        """The wildcards of CDK Pipelines' generated policies, each by name on its policy, with why; a policy this
        table does not know keeps its findings (synth fails on them)."""
        for policy in self.node.find_all():
            if isinstance(policy, iam.CfnPolicy):
                reason = next((r for part, r in _GENERATED_POLICIES if part in policy.node.path), None)
                if reason is not None:
                    for finding in iam5_findings(policy, policy.policy_document):
                        acknowledge(policy, finding, reason)
        # CDK Pipelines' asset role: one build-control statement on "*" for all its publishing projects.
        for policy in self.node.find_all():
            if isinstance(policy, iam.CfnPolicy) and "/Assets/" in policy.node.path:
                skip_checkov(policy, "CKV_AWS_111", ASSET_ROLE_REASON)


# Which generated policy is which (by construct path), and why its wildcards are what the role needs.
_GENERATED_POLICIES = (
    ("/Pipeline/Pipeline/Role/", "CodePipeline's role: its artifact bucket's objects and key, its action roles."),
    ("/Source/", "The source action writes the checkout to the artifact bucket with the artifact key."),
    ("/Build/Synth/", "The synth project: its own logs and report groups, the artifact objects and key."),
    ("/Verify-", "The verify step: its own logs and report groups, the checkout's artifact objects and key."),
    (
        "/VerifyRole-",
        "The verify step's role: its own logs and report groups, the checkout's, wheelhouse's and journal's artifact "
        "objects and key.",
    ),
    ("/UpdatePipeline/SelfMutation/", "Self-mutation: cdk bootstrap roles only (by tag), stacks and artifacts."),
    ("/Assets/", "CDK Pipelines' asset publishing: one role for its publishing projects, bootstrap roles only."),
)
