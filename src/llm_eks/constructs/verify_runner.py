"""`VerifyRunner`: where a promotion pipeline runs `llm-eks verify` against an environment: a CodeBuild project in
the cluster's own VPC (so a private API endpoint is reachable, from the cluster security group's view of port 443),
whose role reads the cluster through an EKS access entry mapped to the read-only `llm-eks-verify` group
(manifests/verifier: the RBAC grants exactly what verify reads), and a launcher role the pipeline's account may
assume to hand it the app's source and start it.

Why not the pipeline's own step: CodeBuild reaches a private EKS endpoint only from inside its VPC, and a pipeline
in another account (or created before this stack's VPC exists) cannot place its step there. The pipeline step
therefore assumes the launcher role, uploads the repository to `source_bucket`, starts the project and waits
(infra/verify_stage.sh); the project installs llm-eks from that source and runs verify, and its exit status is the
stage's.

The access entry is STANDARD with Kubernetes group `llm-eks-verify` and no access policy: EKS's own policies
either miss nodes, custom resources and the service proxy (AmazonEKSViewPolicy) or include Secrets
(AmazonEKSAdminViewPolicy) (EKS user guide, access policy permissions).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class VerifyRunnerProps:
    """The environment to verify, and who may start its verification."""

    cluster: eks.Cluster
    # The cdk.json environment name: `llm-eks verify --env <environment>`, and the launcher role's name.
    environment: str
    # The account whose principals may assume the launcher role (the pipeline's).
    trusted_account: str
    # The subnets the project runs in: the cluster's private subnets (reaching the endpoint and, through NAT,
    # PyPI for the install).
    subnets: ec2.SubnetSelection = field(
        default_factory=lambda: ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
    )
    # Verify reads for a few seconds; the install takes about a minute. 20 minutes is a generous ceiling.
    timeout_minutes: int = 20
    # A month of runs to look back on.
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH

    def validate(self) -> None:
        require_dns1123("verify_runner.environment", self.environment)
        if not 5 <= self.timeout_minutes <= 480:
            raise fail(
                "verify_runner.timeout_minutes", self.timeout_minutes, "must be 5 to 480 minutes (verify takes a few)"
            )
        if not aws_ids.ACCOUNT.match(self.trusted_account):
            raise fail("verify_runner.trusted_account", self.trusted_account, "must be a 12-digit AWS account id")


def launcher_role_name(environment: str) -> str:
    """The launcher role's fixed name, so the pipeline (in its own stack) can name it in its step's policy."""
    return f"llm-eks-{environment}-verify-launcher"


class VerifyRunner(Construct):
    """The project, its roles and its source bucket; the stack outputs their names for the pipeline."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: VerifyRunnerProps) -> None:
        props.validate()
        super().__init__(scope, id)
        cluster = props.cluster
        if cluster.vpc is None:
            raise ConfigError("verify_runner.cluster: the cluster must have its VPC (the project runs inside it)")
        self.source_bucket = private_bucket(
            self,
            "Source",
            encryption=s3.BucketEncryption.S3_MANAGED,
            # A copy of the repository per run: nothing to keep once the run is over.
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
            description=f"llm-eks verify runner of {props.environment}: the EKS endpoint, PyPI and AWS APIs",
            allow_all_outbound=True,
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
                "LLM_EKS_ENV": codebuild.BuildEnvironmentVariable(value=props.environment),
            },
            build_spec=codebuild.BuildSpec.from_object(
                {
                    "version": "0.2",
                    "phases": {
                        "install": {
                            # verify starts jsii: the Node 24 LTS beside pyproject.toml's oldest Python.
                            "runtime-versions": RUNTIMES,
                            "commands": [
                                "python3 -m venv .venv",
                                # The exact pins of constraints.txt where the checkout has one (this repository).
                                ".venv/bin/pip install --quiet"
                                " $([ -f constraints.txt ] && echo -c constraints.txt) -e .",
                            ],
                        },
                        "build": {
                            "commands": [
                                'aws eks update-kubeconfig --name "$CLUSTER_NAME"',
                                '.venv/bin/llm-eks verify --env "$LLM_EKS_ENV" --record verify-record.json',
                            ]
                        },
                    },
                }
            ),
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
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["eks:DescribeCluster"], resources=[cluster.cluster_arn])
        )
        eks_l1.CfnAccessEntry(
            self,
            "AccessEntry",
            cluster_name=cluster.cluster_name,
            principal_arn=role.role_arn,
            kubernetes_groups=[GROUP],
            type="STANDARD",
        )
        self.launcher = iam.Role(
            self,
            "Launcher",
            role_name=launcher_role_name(props.environment),
            assumed_by=iam.AccountPrincipal(props.trusted_account),
            description=f"The promotion pipeline starts llm-eks verify for {props.environment} through this role",
            max_session_duration=cdk.Duration.hours(1),
        )
        # PutObject on the one key: the pipeline uploads the source there and starts the build at that version.
        self.launcher.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[self.source_bucket.arn_for_objects(SOURCE_KEY)])
        )
        self.launcher.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["codebuild:StartBuild", "codebuild:BatchGetBuilds", "codebuild:StopBuild"],
                resources=[self.project.project_arn],
            )
        )
        self.launcher.add_to_principal_policy(
            iam.PolicyStatement(actions=["logs:GetLogEvents"], resources=[f"{log_group.log_group_arn}:*"])
        )
        self._acknowledge(role)
        # Stack outputs (the pipeline's verify step reads them through env_from_cfn_outputs).
        stack = cdk.Stack.of(self)
        self.outputs: dict[str, cdk.CfnOutput] = {
            "VERIFY_PROJECT": cdk.CfnOutput(stack, "VerifyProject", value=self.project.project_name),
            "VERIFY_SOURCE_BUCKET": cdk.CfnOutput(stack, "VerifySourceBucket", value=self.source_bucket.bucket_name),
            "VERIFY_LAUNCHER_ROLE_ARN": cdk.CfnOutput(stack, "VerifyLauncherRoleArn", value=self.launcher.role_arn),
            "VERIFY_LOG_GROUP": cdk.CfnOutput(stack, "VerifyLogGroup", value=log_group.log_group_name),
        }

    def _acknowledge(self, project_role: iam.IRole) -> None:
        """Each wildcard the project's and the launcher's policies hold, by name, with why."""
        policies: list[tuple[IConstruct, str]] = [
            (
                project_role,
                "CodeBuild's grants to its own project: its log streams and report groups (named per build), the "
                "source bucket's objects, and the VPC network interfaces it attaches in this VPC's subnets",
            ),
            (self.launcher, "The verify runner's own log streams, named by CodeBuild per build."),
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
