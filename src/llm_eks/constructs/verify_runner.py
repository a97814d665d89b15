"""`VerifyRunner`: where a promotion pipeline runs `llm-eks verify` against an environment: a CodeBuild project in
the cluster's own VPC (so a private API endpoint is reachable, from the cluster security group's view of port 443),
whose role reads the cluster through an EKS access entry mapped to the read-only `llm-eks-verify` group
(manifests/verifier: the RBAC grants exactly what verify reads), and a launcher role that one role of the pipeline's
account may assume (its verify step's role, `verify_step_role_name`, with an ExternalId) to hand the project the
app's source and start it.

Why not the pipeline's own step: CodeBuild reaches a private EKS endpoint only from inside its VPC, and a pipeline
in another account (or created before this stack's VPC exists) cannot place its step there. The pipeline step
therefore assumes the launcher role, uploads the repository with the synth step's wheelhouse to `source_bucket`,
starts the project and waits (infra/verify_stage.sh). The project installs llm-eks and every pinned dependency from
that wheelhouse (`pip install --no-index --require-hashes`: no package index at verify time), waits for the
environment to settle and verifies it; its exit status is the stage's. It leaves its journal and calibration record
under `journals/<build id>/` of the bucket, which the step keeps as the stage's artifact.

The launcher may start the one project and nothing else of CodeBuild: a StartBuild that sets any of the project's
override fields (buildspec, source, image, environment variables, service role, ...) is denied by a `Null: false`
condition on that field's CodeBuild condition key (present in the request only when the field is set), and the
actions that start or change builds otherwise (batch, retry, project updates) are denied outright. What is left: the
launcher writes the source the project runs, so it decides what runs there; whoever may assume it can run code in
this VPC with the verify group's read access. That is why exactly one role may, and only with the ExternalId.

Network: the project's security group allows HTTPS out and nothing else: to the API endpoint's ENIs in this VPC, and
through the NAT gateway (or the S3 gateway endpoint) to S3 for the source and the journal and to CloudWatch Logs for
its log. verify itself calls no AWS API: the kubeconfig is written from the cluster's endpoint and CA (stack values)
and `aws eks get-token` presigns its token locally, so the runner needs no STS or EKS endpoint (and no interface
endpoints are created for it). A security group cannot name AWS's public endpoints, so the rule is "443 anywhere":
what keeps a package index out is the --no-index install, not the network.

The access entry is STANDARD with Kubernetes group `llm-eks-verify` and no access policy: EKS's own policies
either miss nodes, custom resources and the service proxy (AmazonEKSViewPolicy) or include Secrets
(AmazonEKSAdminViewPolicy) (EKS user guide, access policy permissions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from llm_eks import aws_ids
from llm_eks.constructs.buckets import private_bucket
from llm_eks.constructs.log_encryption import encrypted_log_group
from llm_eks.constructs.nag import acknowledge, iam5_findings, skip_checkov
from llm_eks.error_codes import E313
from llm_eks.errors import ConfigError, fail, named_errors
from llm_eks.manifests.labels import require_dns1123
from llm_eks.manifests.verifier import GROUP

# The CodeBuild image of the verify runner and the promotion pipeline's steps. standard:8.0 (Ubuntu 24.04) has Node 24
# as its default: its runtimes.yml lists nodejs 22 and 24 and python 3.10-3.14 (aws-codebuild-docker-images,
# ubuntu/standard/8.0, Dockerfile NODE_24_VERSION 24.14.0, April 2026). The runtimes: pyproject.toml's oldest Python
# and the Node LTS jsii supports longest (end of life 2028-04-30); the pipeline's synth step (`make setup`) then runs
# jsii on the exact Node that package.json pins.
BUILD_IMAGE = codebuild.LinuxBuildImage.STANDARD_8_0
RUNTIMES = {"python": "3.11", "nodejs": "24"}

SOURCE_KEY = "source.zip"
# The policy CDK gives a CodeBuild project in a VPC (cdk-nag IAM5, checkov CKV_AWS_111): as CodeBuild documents it.
VPC_POLICY_REASON = "CodeBuild's documented VPC policy: it creates and deletes its builds' network interfaces, on *."
# Where the project leaves its journal and calibration record, under the build's id.
JOURNALS = "journals"
JOURNAL_FILE = "verify-journal.jsonl"
RECORD_FILE = "verify-record.json"
# The directory of the source llm-eks is installed from (the synth step's wheelhouse), and its hash-pinned list.
WHEELHOUSE = "wheelhouse"
REQUIREMENTS = f"{WHEELHOUSE}/requirements.txt"
# How long verify waits for the deploy to settle before it verifies.
WAIT_READY = "30m"
# StartBuild request fields that override the project, by CodeBuild's condition keys (AWS CodeBuild user guide, "AWS
# CodeBuild condition keys", and the Service Authorization Reference's CodeBuild keys): a key is in the request
# context only when its field is set, so `Null: false` on it matches a request that sets it (codebuild:source.buildspec
# supports only Null). One Deny statement per key: the keys of one statement's condition are ANDed.
OVERRIDE_KEYS = (
    "codebuild:source.buildspec",
    "codebuild:source.location",
    "codebuild:source.auth.type",
    "codebuild:source.insecureSsl",
    "codebuild:secondarySources",
    "codebuild:artifacts",
    "codebuild:secondaryArtifacts",
    "codebuild:environment.image",
    "codebuild:environment.type",
    "codebuild:environment.computeType",
    "codebuild:environment.certificate",
    "codebuild:environment.privilegedMode",
    "codebuild:environment.environmentVariables",
    "codebuild:environment.registryCredential",
    "codebuild:environment.imagePullCredentialsType",
    "codebuild:serviceRole",
    "codebuild:encryptionKey",
    "codebuild:logsConfig",
    "codebuild:cache",
)
# The actions that start or change a build of the project other than a plain StartBuild: denied outright.
OVERRIDE_ACTIONS = (
    "codebuild:StartBuildBatch",
    "codebuild:RetryBuild",
    "codebuild:RetryBuildBatch",
    "codebuild:UpdateProject",
    "codebuild:UpdateProjectVisibility",
)
# STS's ExternalId: 2-1,224 characters of these.
_EXTERNAL_ID = re.compile(r"^[\w+=,.@:/-]{2,1224}$")


@dataclass(frozen=True)
class VerifyTrust:
    """The one role that may assume the launcher role (its account and name), and the ExternalId it must give."""

    account: str
    role_name: str
    external_id: str

    @classmethod
    def pipeline_step(cls, environment: str, pipeline_account: str) -> VerifyTrust:
        """The promotion pipeline's verify step for `environment` (infra/pipeline.py creates its role)."""
        return cls(
            pipeline_account, verify_step_role_name(environment), verify_external_id(environment, pipeline_account)
        )


@dataclass(frozen=True)
class VerifyRunnerProps:
    """The environment to verify, and the one role that may start its verification."""

    cluster: eks.Cluster
    # The cdk.json environment name: `llm-eks verify --env <environment>`, and the launcher role's name.
    environment: str
    # Who may start it (the pipeline's verify step: VerifyTrust.pipeline_step).
    trusted: VerifyTrust
    # The subnets the project runs in: the cluster's private subnets (reaching the endpoint and, through the NAT
    # gateway, S3 and CloudWatch Logs).
    subnets: ec2.SubnetSelection = field(
        default_factory=lambda: ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
    )
    # The install from the wheelhouse takes a minute, --wait-ready up to 30 (WAIT_READY), verify seconds: 45 minutes.
    timeout_minutes: int = 45
    # A month of runs to look back on.
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH

    def validate(self) -> None:
        require_dns1123("verify_runner.environment", self.environment)
        if not 5 <= self.timeout_minutes <= 480:
            raise fail(
                E313,
                "verify_runner.timeout_minutes",
                self.timeout_minutes,
                "must be 5 to 480 minutes (verify takes a few)",
            )
        t = self.trusted
        if not aws_ids.ACCOUNT.match(t.account):
            raise fail(E313, "verify_runner.trusted.account", t.account, "must be a 12-digit AWS account id")
        if not aws_ids.ROLE_NAME.match(t.role_name):
            raise fail(
                E313, "verify_runner.trusted.role_name", t.role_name, "must be an IAM role name (1-64 characters)"
            )
        if not _EXTERNAL_ID.match(t.external_id):
            raise fail(
                E313,
                "verify_runner.trusted.external_id",
                t.external_id,
                "must be 2 to 1,224 letters, digits and + = , . @ : / - _ (STS's ExternalId)",
            )


def launcher_role_name(environment: str) -> str:
    """The launcher role's fixed name, so the pipeline (in its own stack) can name it in its step's policy."""
    return f"llm-eks-{environment}-verify-launcher"


def verify_step_role_name(environment: str) -> str:
    """The pipeline's verify step's role for `environment` (in the pipeline's account): the one the launcher trusts."""
    return f"llm-eks-{environment}-verify-step"


def verify_external_id(environment: str, pipeline_account: str) -> str:
    """The ExternalId the verify step gives and the launcher requires. Not a secret: a second condition beside the
    one principal, so a role that is told the launcher's ARN cannot use it without being the step that was meant to."""
    return f"llm-eks-verify-{environment}-{pipeline_account}"


# Writes the kubeconfig from the project's environment (JSON is YAML): the cluster's endpoint and CA, and `aws eks
# get-token` as the user, which presigns its token locally (no AWS API call).
_KUBECONFIG = (
    '{"apiVersion": "v1", "kind": "Config", '
    '"clusters": [{"name": "cluster", "cluster": {"server": e["CLUSTER_ENDPOINT"], '
    '"certificate-authority-data": e["CLUSTER_CA"]}}], '
    '"users": [{"name": "verifier", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", '
    '"command": "aws", "args": ["eks", "get-token", "--cluster-name", e["CLUSTER_NAME"], "--output", "json"]}}}], '
    '"contexts": [{"name": "verify", "context": {"cluster": "cluster", "user": "verifier"}}], '
    '"current-context": "verify"}'
)
_WRITE = f'import json, os; e = os.environ; json.dump({_KUBECONFIG}, open("kubeconfig", "w"))'
WRITE_KUBECONFIG = f"python3 -c '{_WRITE}'"


def build_spec() -> dict[str, Any]:
    """The project's buildspec: install from the wheelhouse (no index, every file's hash checked), write the
    kubeconfig, wait for the environment to settle and verify it, and leave the journal and record for the step."""
    return {
        "version": "0.2",
        "env": {"shell": "bash"},
        "phases": {
            "install": {
                # verify starts jsii: the Node 24 LTS beside pyproject.toml's oldest Python (BUILD_IMAGE has both).
                "runtime-versions": RUNTIMES,
                "commands": [
                    "python3 -m venv .venv",
                    ".venv/bin/pip install --quiet --no-index --require-hashes --find-links "
                    f"{WHEELHOUSE} -r {REQUIREMENTS}",
                ],
            },
            "build": {
                "commands": [
                    WRITE_KUBECONFIG,
                    '.venv/bin/llm-eks verify --env "$LLM_EKS_ENV" --kubeconfig kubeconfig '
                    f"--wait-ready {WAIT_READY} --journal {JOURNAL_FILE} --record {RECORD_FILE}",
                ]
            },
            "post_build": {
                # Whatever the build did: the step reads the journal back and keeps it.
                "commands": [
                    f'for f in {JOURNAL_FILE} {RECORD_FILE}; do if [ -f "$f" ]; then aws s3 cp --quiet "$f" '
                    f'"s3://$VERIFY_BUCKET/{JOURNALS}/$CODEBUILD_BUILD_ID/$f"; fi; done'
                ]
            },
        },
    }


class VerifyRunner(Construct):
    """The project, its roles and its source bucket; the stack outputs their names for the pipeline."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: VerifyRunnerProps) -> None:
        props.validate()
        super().__init__(scope, id)
        cluster = props.cluster
        if cluster.vpc is None:
            raise ConfigError(E313, "verify_runner.cluster: the cluster must have its VPC (the project runs inside it)")
        self.source_bucket = private_bucket(
            self,
            "Source",
            encryption=s3.BucketEncryption.S3_MANAGED,
            # A copy of the repository per run and its journal: nothing to keep once the run is over.
            lifecycle_rules=[
                s3.LifecycleRule(expiration=cdk.Duration.days(7), noncurrent_version_expiration=cdk.Duration.days(1))
            ],
            # Deleting the stack leaves it (with at most a week of source copies) rather than failing on its objects.
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        acknowledge(self.source_bucket, "S1", "Holds only the source of the last verify runs, expired after a week.")
        skip_checkov(self.source_bucket, "CKV_AWS_18", "Holds only the source of the last verify runs (a week).")
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=cluster.vpc,
            description=f"llm-eks verify runner of {props.environment}: HTTPS out only",
            allow_all_outbound=False,
        )
        self.security_group.add_egress_rule(
            ec2.Peer.any_ipv4(),
            ec2.Port.tcp(443),
            "HTTPS: the EKS API endpoint's ENIs in this VPC; S3 and CloudWatch Logs through the NAT or S3 gateway",
        )
        # The endpoint's ENIs carry the cluster's security groups. Rules of our own ids (allow_from names them by the
        # runner's path), so the stack a pipeline stage deploys is the stack `cdk deploy` deploys.
        for i, group in enumerate(cluster.connections.security_groups):
            ec2.CfnSecurityGroupIngress(
                self,
                f"EndpointAccess{i}",
                group_id=group.security_group_id,
                source_security_group_id=self.security_group.security_group_id,
                ip_protocol="tcp",
                from_port=443,
                to_port=443,
                description="llm-eks verify runner",
            )
        log_group = encrypted_log_group(self, "Logs", props.log_retention)
        self.project = codebuild.Project(
            self,
            "Project",
            description=f"llm-eks verify --env {props.environment}: the deployed environment against its plan",
            source=codebuild.Source.s3(bucket=self.source_bucket, path=SOURCE_KEY),
            environment=codebuild.BuildEnvironment(
                build_image=BUILD_IMAGE,
                compute_type=codebuild.ComputeType.SMALL,
                privileged=False,
            ),
            environment_variables={
                "CLUSTER_NAME": codebuild.BuildEnvironmentVariable(value=cluster.cluster_name),
                "CLUSTER_ENDPOINT": codebuild.BuildEnvironmentVariable(value=cluster.cluster_endpoint),
                "CLUSTER_CA": codebuild.BuildEnvironmentVariable(value=cluster.cluster_certificate_authority_data),
                "LLM_EKS_ENV": codebuild.BuildEnvironmentVariable(value=props.environment),
                "VERIFY_BUCKET": codebuild.BuildEnvironmentVariable(value=self.source_bucket.bucket_name),
            },
            build_spec=codebuild.BuildSpec.from_object(build_spec()),
            vpc=cluster.vpc,
            subnet_selection=props.subnets,
            security_groups=[self.security_group],
            timeout=cdk.Duration.minutes(props.timeout_minutes),
            logging=codebuild.LoggingOptions(cloud_watch=codebuild.CloudWatchLoggingOptions(log_group=log_group)),
            # CodeBuild's own key for S3 (no artifacts are produced); cdk-nag asks for a KMS key on every project.
            encryption_key=kms.Alias.from_alias_name(self, "S3Key", "alias/aws/s3"),
        )
        role = self.project.role
        if role is None:
            raise TypeError("codebuild.Project created no role")
        # Its journal and record, under the build's id; no other AWS API (verify reads the cluster only).
        journals = self.source_bucket.arn_for_objects(f"{JOURNALS}/*")
        role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:PutObject"], resources=[journals]))
        eks_l1.CfnAccessEntry(
            self,
            "AccessEntry",
            cluster_name=cluster.cluster_name,
            principal_arn=role.role_arn,
            kubernetes_groups=[GROUP],
            type="STANDARD",
        )
        stack = cdk.Stack.of(self)
        t = props.trusted
        trusted = f"arn:{stack.partition}:iam::{t.account}:role/{t.role_name}"
        self.launcher = iam.Role(
            self,
            "Launcher",
            role_name=launcher_role_name(props.environment),
            # One role of the pipeline's account, with the ExternalId: not its account's root, not any role there.
            assumed_by=iam.ArnPrincipal(trusted).with_conditions({"StringEquals": {"sts:ExternalId": t.external_id}}),
            description=f"The promotion pipeline starts llm-eks verify for {props.environment} through this role",
            max_session_duration=cdk.Duration.hours(1),
        )
        self._launcher_policy(log_group, journals)
        self._acknowledge(role)
        # Stack outputs (the pipeline's verify step reads them through env_from_cfn_outputs).
        self.outputs: dict[str, cdk.CfnOutput] = {
            "VERIFY_PROJECT": cdk.CfnOutput(stack, "VerifyProject", value=self.project.project_name),
            "VERIFY_SOURCE_BUCKET": cdk.CfnOutput(stack, "VerifySourceBucket", value=self.source_bucket.bucket_name),
            "VERIFY_LAUNCHER_ROLE_ARN": cdk.CfnOutput(stack, "VerifyLauncherRoleArn", value=self.launcher.role_arn),
            "VERIFY_LOG_GROUP": cdk.CfnOutput(stack, "VerifyLogGroup", value=log_group.log_group_name),
        }

    def _launcher_policy(self, log_group: logs.ILogGroup, journals: str) -> None:
        """Upload the source (the one key) and read the journals back; start, watch and stop the one project, with no
        override; read its log."""
        grants = [
            (["s3:PutObject"], self.source_bucket.arn_for_objects(SOURCE_KEY)),
            (["s3:GetObject"], journals),
            (["codebuild:StartBuild", "codebuild:BatchGetBuilds", "codebuild:StopBuild"], self.project.project_arn),
            (["logs:GetLogEvents"], f"{log_group.log_group_arn}:*"),
        ]
        for actions, resource in grants:
            self.launcher.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=[resource]))
        for key in OVERRIDE_KEYS:
            self.launcher.add_to_principal_policy(
                iam.PolicyStatement(
                    effect=iam.Effect.DENY,
                    actions=["codebuild:StartBuild"],
                    resources=[self.project.project_arn],
                    conditions={"Null": {key: "false"}},
                )
            )
        self.launcher.add_to_principal_policy(
            iam.PolicyStatement(
                effect=iam.Effect.DENY, actions=list(OVERRIDE_ACTIONS), resources=[self.project.project_arn]
            )
        )

    def _acknowledge(self, project_role: iam.IRole) -> None:
        """Each wildcard the project's and the launcher's policies hold, by name, with why."""
        policies: list[tuple[IConstruct, str]] = [
            (
                project_role,
                "CodeBuild's grants to its own project: its log streams and report groups (named per build), the "
                "source bucket's objects, the journals it writes per build, and the VPC network interfaces it "
                "attaches in this VPC's subnets",
            ),
            (
                self.launcher,
                "The verify runner's own log streams (named by CodeBuild per build) and the journals of its builds.",
            ),
        ]
        vpc_policy = self.project.node.try_find_child("PolicyDocument")
        if vpc_policy is not None:
            policies.append((vpc_policy, VPC_POLICY_REASON))
            skip_checkov(vpc_policy, "CKV_AWS_111", VPC_POLICY_REASON)
        for scope, reason in policies:
            for policy in scope.node.find_all():
                if isinstance(policy, iam.CfnPolicy):
                    for finding in iam5_findings(policy, policy.policy_document):
                        acknowledge(policy, finding, reason)
