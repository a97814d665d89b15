"""The promotion pipeline (examples/promotion_pipeline): the stack CodePipeline runs, the order and gates of its
stages, the verify step and the VerifyRunner it starts in each environment, synthesized once from the example's
cdk.json with cdk-nag and llm-eks's checks (synth fails on any finding)."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from llm_eks.constructs.verify_runner import OVERRIDE_KEYS, WRITE_KUBECONFIG
from llm_eks.infra.app import add_checks, build_app, new_app, write_review
from llm_eks.infra.pipeline import CDK_CLI_VERSION, PIPELINE_STACK_NAME, verify_stage_script
from llm_eks.infra.report import describe
from tests.conftest import REPO_ROOT

FOLDER = REPO_ROOT / "examples" / "promotion_pipeline"
CONTEXT = json.loads((FOLDER / "cdk.json").read_text())["context"]
ACCOUNTS = {"dev": "111111111111", "staging": "222222222222", "prod": "333333333333"}
PIPELINE_ACCOUNT = "444444444444"


def _synth(outdir: Path, context: dict[str, Any]) -> tuple[cdk.App, list[Any], Any]:
    cwd = os.getcwd()
    os.chdir(FOLDER)
    try:
        app = new_app(context=context, outdir=str(outdir))
        stacks = build_app(app)
        add_checks(app)
        assembly = app.synth()
        write_review(app, stacks, assembly)
    finally:
        os.chdir(cwd)
    return app, stacks, assembly


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    outdir = tmp_path_factory.mktemp("pipeline")
    _, stacks, _ = _synth(outdir, CONTEXT)
    templates = {
        stack.config.name: json.loads(Path(cdk.Stage.of(stack).synth().directory, stack.template_file).read_text())
        for stack in stacks
    }
    pipeline = json.loads((outdir / f"{PIPELINE_STACK_NAME}.template.json").read_text())
    yield {"outdir": outdir, "stacks": stacks, "templates": templates, "pipeline": pipeline}


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def _one(template: dict[str, Any], kind: str) -> dict[str, Any]:
    (resource,) = _resources(template, kind).values()
    return resource["Properties"]


def _stages(synthesized: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {s["Name"]: s["Actions"] for s in _one(synthesized["pipeline"], "AWS::CodePipeline::Pipeline")["Stages"]}


def _project(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    return template["Resources"][logical_id]["Properties"]


def test_stages_deploy_dev_then_staging_then_prod_after_approval(synthesized: dict[str, Any]) -> None:
    stages = _stages(synthesized)
    assert list(stages) == ["Source", "Build", "UpdatePipeline", "Assets", "dev", "staging", "prod"]
    assert [(a["Name"], a["ActionTypeId"]["Provider"], a["RunOrder"]) for a in stages["prod"]] == [
        ("Promote-prod", "Manual", 1),
        ("LlmEks-prod.Prepare", "CloudFormation", 2),
        ("LlmEks-prod.Deploy", "CloudFormation", 3),
        ("Verify-prod", "CodeBuild", 4),
    ]
    for name in ("dev", "staging"):
        assert [a["Name"] for a in stages[name]] == [
            f"LlmEks-{name}.Prepare",
            f"LlmEks-{name}.Deploy",
            f"Verify-{name}",
        ]


def test_each_stage_deploys_its_stack_under_its_own_name_into_its_account(synthesized: dict[str, Any]) -> None:
    stages = _stages(synthesized)
    for name, account in ACCOUNTS.items():
        deploy = next(a for a in stages[name] if a["Name"].endswith(".Prepare"))
        # The name `cdk deploy LlmEks-<env>` used: an environment deployed by hand is updated, not duplicated.
        assert deploy["Configuration"]["StackName"] == f"LlmEks-{name}"
        role = json.dumps(deploy["Configuration"]["RoleArn"])
        assert f"cdk-hnb659fds-cfn-exec-role-{account}-us-west-2" in role


def test_the_pipeline_is_v2_and_its_artifacts_are_kms_encrypted_with_a_rotated_key(
    synthesized: dict[str, Any],
) -> None:
    pipeline = _one(synthesized["pipeline"], "AWS::CodePipeline::Pipeline")
    assert pipeline["PipelineType"] == "V2"
    assert pipeline["ArtifactStore"]["EncryptionKey"]["Type"] == "KMS"
    assert _one(synthesized["pipeline"], "AWS::KMS::Key")["EnableKeyRotation"] is True
    (bucket,) = [
        b["Properties"]
        for k, b in _resources(synthesized["pipeline"], "AWS::S3::Bucket").items()
        if k.startswith("PipelineArtifactsBucket")
    ]
    (rule,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"


def test_the_source_is_the_connection_and_its_role_may_use_both_connection_prefixes(
    synthesized: dict[str, Any],
) -> None:
    source = CONTEXT["pipeline"]["source"]
    (action,) = _stages(synthesized)["Source"]
    assert action["ActionTypeId"]["Provider"] == "CodeStarSourceConnection"
    config = action["Configuration"]
    assert (config["ConnectionArn"], config["FullRepositoryId"], config["BranchName"]) == (
        source["connection_arn"],
        "acme/llm-platform",
        "main",
    )
    policies = _resources(synthesized["pipeline"], "AWS::IAM::Policy")
    statements = next(p for k, p in policies.items() if "Source" in k)["Properties"]["PolicyDocument"]["Statement"]
    use = [s for s in statements if "UseConnection" in json.dumps(s["Action"])]
    assert sorted(a for s in use for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])) == [
        "codeconnections:UseConnection",
        "codestar-connections:UseConnection",
    ]
    assert all(s["Resource"] == source["connection_arn"] for s in use)


def test_synth_runs_the_tests_then_the_pinned_cli_on_python_311(synthesized: dict[str, Any]) -> None:
    projects = _resources(synthesized["pipeline"], "AWS::CodeBuild::Project")
    synth = next(p["Properties"] for k, p in projects.items() if "BuildSynth" in k)
    spec = json.loads(synth["Source"]["BuildSpec"])
    # Then the wheelhouse the verify runners install from, an output of its own.
    assert spec["phases"]["build"]["commands"] == [
        "./.ci/run", "make synth", ".venv/bin/python -m llm_eks.infra.wheelhouse wheelhouse"
    ]  # fmt: skip
    assert spec["artifacts"]["secondary-artifacts"]["Synth_wheelhouse"] == {
        "base-directory": "wheelhouse", "files": ["**/*"]
    }  # fmt: skip
    assert spec["phases"]["install"]["runtime-versions"] == {"python": "3.11", "nodejs": "24"}
    assert spec["artifacts"]["secondary-artifacts"]["Synth_Output"]["base-directory"] == "cdk.out"
    assert synth["Environment"]["ComputeType"] == "BUILD_GENERAL1_MEDIUM"
    assert synth["Environment"]["PrivilegedMode"] is False
    mutate = next(p["Properties"] for k, p in projects.items() if "SelfMutation" in k)
    assert f"aws-cdk@{CDK_CLI_VERSION}" in mutate["Source"]["BuildSpec"]


def test_every_codebuild_project_runs_on_the_image_with_node_24(synthesized: dict[str, Any]) -> None:
    """The pipeline's steps and each stage's VerifyRunner (verify starts jsii) on standard:8.0, whose runtimes hold
    Node 24; the runner's build selects it, and installs llm-eks from the synth step's wheelhouse: the versions
    `make setup` installed there from constraints.txt, each wheel's hash checked, no package index."""
    templates = [synthesized["pipeline"], *synthesized["templates"].values()]
    projects = [p["Properties"] for t in templates for p in _resources(t, "AWS::CodeBuild::Project").values()]
    assert len(projects) > len(synthesized["templates"])
    assert {p["Environment"]["Image"] for p in projects} == {"aws/codebuild/standard:8.0"}
    for template in synthesized["templates"].values():
        (runner,) = [p for p in _resources(template, "AWS::CodeBuild::Project").values()]
        install = json.loads(runner["Properties"]["Source"]["BuildSpec"])["phases"]["install"]
        assert install["runtime-versions"] == {"python": "3.11", "nodejs": "24"}
        assert "--no-index --require-hashes --find-links wheelhouse" in install["commands"][-1]


def test_the_cli_version_is_package_jsons_pin() -> None:
    pinned = json.loads((REPO_ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    assert pinned == CDK_CLI_VERSION


def test_each_verify_step_runs_as_its_own_role_with_the_wheelhouse_and_keeps_the_journal(
    synthesized: dict[str, Any],
) -> None:
    stages = _stages(synthesized)
    resources = synthesized["pipeline"]["Resources"]
    policies = _resources(synthesized["pipeline"], "AWS::IAM::Policy")
    for name, account in ACCOUNTS.items():
        verify = stages[name][-1]
        variables = {v["name"]: v["value"] for v in json.loads(verify["Configuration"]["EnvironmentVariables"])}
        assert set(variables) == {
            "VERIFY_PROJECT",
            "VERIFY_SOURCE_BUCKET",
            "VERIFY_LAUNCHER_ROLE_ARN",
            "VERIFY_LOG_GROUP",
        }
        assert all(v.startswith("#{") and v.endswith("}") for v in variables.values())  # the stack's outputs
        # The checkout and the synth step's wheelhouse in; the runner's journal out.
        assert [a["Name"] for a in verify["InputArtifacts"]] == ["acme_llm_platform_Source", "Synth_wheelhouse"]
        assert [a["Name"] for a in verify["OutputArtifacts"]] == [f"Verify_{name}_Output"]
        project = _project(synthesized["pipeline"], verify["Configuration"]["ProjectName"]["Ref"])
        spec = json.loads(project["Source"]["BuildSpec"])
        assert spec["artifacts"] == {"base-directory": "verify-output", "files": "**/*"}
        assert {
            "Name": "VERIFY_EXTERNAL_ID",
            "Type": "PLAINTEXT",
            "Value": f"llm-eks-verify-{name}-{PIPELINE_ACCOUNT}",
        } in (project["Environment"]["EnvironmentVariables"])
        assert {"Name": "LLM_EKS_ENV", "Type": "PLAINTEXT", "Value": name} in project["Environment"][
            "EnvironmentVariables"
        ]
        (command,) = spec["phases"]["build"]["commands"]
        assert command == "bash -c " + shlex.quote(verify_stage_script())
        # Its role, by the fixed name the environment's launcher role trusts, may assume only that launcher.
        role_id = project["ServiceRole"]["Fn::GetAtt"][0]
        assert resources[role_id]["Properties"]["RoleName"] == f"llm-eks-{name}-verify-step"
        assume = [
            statement
            for p in policies.values()
            if {"Ref": role_id} in p["Properties"]["Roles"]
            for statement in p["Properties"]["PolicyDocument"]["Statement"]
            if statement["Action"] == "sts:AssumeRole"
        ]
        (statement,) = assume
        assert f':iam::{account}:role/llm-eks-{name}-verify-launcher"' in json.dumps(statement["Resource"])


def test_each_environment_has_a_verify_runner_in_its_vpc_reading_through_the_verify_group(
    synthesized: dict[str, Any],
) -> None:
    for name, template in synthesized["templates"].items():
        project = next(
            p["Properties"]
            for p in _resources(template, "AWS::CodeBuild::Project").values()
            if "llm-eks verify" in p["Properties"]["Description"]
        )
        assert project["VpcConfig"]["Subnets"] and project["VpcConfig"]["SecurityGroupIds"]
        assert project["Environment"]["PrivilegedMode"] is False
        spec = json.loads(project["Source"]["BuildSpec"])
        # Installed from the wheelhouse alone, every file's hash checked; verify waits for the deploy to settle.
        assert spec["phases"]["install"]["commands"][-1] == (
            ".venv/bin/pip install --quiet --no-index --require-hashes --find-links wheelhouse -r "
            "wheelhouse/requirements.txt"
        )
        assert spec["phases"]["build"]["commands"][-1] == (
            '.venv/bin/llm-eks verify --env "$LLM_EKS_ENV" --kubeconfig kubeconfig --wait-ready 30m --journal '
            "verify-journal.jsonl --record verify-record.json"
        )
        variables = {v["Name"]: v["Value"] for v in project["Environment"]["EnvironmentVariables"]}
        assert variables["LLM_EKS_ENV"] == name
        entries = [
            e["Properties"]
            for e in _resources(template, "AWS::EKS::AccessEntry").values()
            if e["Properties"].get("KubernetesGroups")
        ]
        (entry,) = entries
        assert entry["KubernetesGroups"] == ["llm-eks-verify"]
        assert entry["Type"] == "STANDARD"
        assert "AccessPolicies" not in entry  # no EKS access policy: the group's RBAC is all it reads
        # The launcher trusts one role ARN of the pipeline's account, with its ExternalId; no account root.
        launcher = next(
            r["Properties"]
            for r in _resources(template, "AWS::IAM::Role").values()
            if r["Properties"].get("RoleName") == f"llm-eks-{name}-verify-launcher"
        )
        (trust,) = launcher["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Principal"] == {
            "AWS": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                      f":iam::{PIPELINE_ACCOUNT}:role/llm-eks-{name}-verify-step"]]}
        }  # fmt: skip
        assert trust["Condition"] == {"StringEquals": {"sts:ExternalId": f"llm-eks-verify-{name}-{PIPELINE_ACCOUNT}"}}
        assert ":root" not in json.dumps(launcher)
        assert set(template["Outputs"]) >= {
            "VerifyProject",
            "VerifySourceBucket",
            "VerifyLauncherRoleArn",
            "VerifyLogGroup",
        }


def test_the_launcher_may_start_the_one_project_and_override_nothing(synthesized: dict[str, Any]) -> None:
    template = synthesized["templates"]["staging"]
    launcher_id = next(
        k for k, r in _resources(template, "AWS::IAM::Role").items()
        if r["Properties"].get("RoleName") == "llm-eks-staging-verify-launcher"
    )  # fmt: skip
    statements = [
        s
        for p in _resources(template, "AWS::IAM::Policy").values()
        if {"Ref": launcher_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    (project_id,) = [
        k for k, p in _resources(template, "AWS::CodeBuild::Project").items()
        if "llm-eks verify" in p["Properties"]["Description"]
    ]  # fmt: skip
    project = {"Fn::GetAtt": [project_id, "Arn"]}
    allowed = [s for s in statements if s["Effect"] == "Allow"]
    assert [s["Action"] for s in allowed if "codebuild" in json.dumps(s["Action"])] == [
        ["codebuild:StartBuild", "codebuild:BatchGetBuilds", "codebuild:StopBuild"]
    ]
    denied = [s for s in statements if s["Effect"] == "Deny"]
    assert all(s["Resource"] == project for s in denied)
    overrides = {key for s in denied if "Condition" in s for key in s["Condition"]["Null"]}
    assert overrides == set(OVERRIDE_KEYS)
    assert all(
        s["Condition"] == {"Null": {next(iter(s["Condition"]["Null"])): "false"}} for s in denied if "Condition" in s
    )
    assert {"codebuild:source.buildspec", "codebuild:environment.environmentVariables", "codebuild:environment.image",
            "codebuild:serviceRole", "codebuild:source.location"} <= overrides  # fmt: skip
    (actions,) = [s["Action"] for s in denied if "Condition" not in s]
    assert set(actions) == {"codebuild:StartBuildBatch", "codebuild:RetryBuild", "codebuild:RetryBuildBatch",
                            "codebuild:UpdateProject", "codebuild:UpdateProjectVisibility"}  # fmt: skip


def test_the_runner_reads_no_aws_api_and_sends_only_https(synthesized: dict[str, Any]) -> None:
    template = synthesized["templates"]["staging"]
    (group,) = [
        g["Properties"]
        for g in _resources(template, "AWS::EC2::SecurityGroup").values()
        if "verify runner" in g["Properties"]["GroupDescription"]
    ]
    (egress,) = group["SecurityGroupEgress"]
    assert (egress["IpProtocol"], egress["FromPort"], egress["ToPort"], egress["CidrIp"]) == (
        "tcp",
        443,
        443,
        "0.0.0.0/0",
    )
    project = next(
        p["Properties"]
        for p in _resources(template, "AWS::CodeBuild::Project").values()
        if "llm-eks verify" in p["Properties"]["Description"]
    )
    role_id = project["ServiceRole"]["Fn::GetAtt"][0]
    actions = {
        action
        for p in _resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        for action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    # No eks:DescribeCluster (the kubeconfig comes from the stack's values), nothing of STS.
    assert not {a for a in actions if a.startswith(("eks:", "sts:"))}
    variables = {v["Name"] for v in project["Environment"]["EnvironmentVariables"]}
    assert variables == {"CLUSTER_NAME", "CLUSTER_ENDPOINT", "CLUSTER_CA", "LLM_EKS_ENV", "VERIFY_BUCKET"}


def test_the_runner_writes_the_kubeconfig_from_the_stacks_values(tmp_path: Path) -> None:
    """The buildspec's command, run: a kubeconfig of the cluster's endpoint and CA, `aws eks get-token` its user."""
    import subprocess

    from llm_eks.verify.kube import kubeconfig_contexts

    env = {**os.environ, "CLUSTER_ENDPOINT": "https://ABC.gr7.us-west-2.eks.amazonaws.com", "CLUSTER_CA": "Q0E=",
           "CLUSTER_NAME": "llm-eks-staging"}  # fmt: skip
    subprocess.run(["bash", "-c", WRITE_KUBECONFIG], cwd=tmp_path, env=env, check=True)
    config = json.loads((tmp_path / "kubeconfig").read_text())
    assert kubeconfig_contexts("--kubeconfig", str(tmp_path / "kubeconfig")) == (["verify"], "verify")
    (cluster,) = config["clusters"]
    assert cluster["cluster"] == {"server": env["CLUSTER_ENDPOINT"], "certificate-authority-data": "Q0E="}
    (user,) = config["users"]
    assert user["user"]["exec"]["args"] == ["eks", "get-token", "--cluster-name", "llm-eks-staging", "--output", "json"]


def test_the_runner_may_reach_the_api_endpoint(synthesized: dict[str, Any]) -> None:
    template = synthesized["templates"]["staging"]
    ingress = [
        i["Properties"]
        for i in _resources(template, "AWS::EC2::SecurityGroupIngress").values()
        if i["Properties"].get("Description") == "llm-eks verify runner"
    ]
    # The endpoint's ENIs carry the cluster's security groups: the control plane's and the EKS-created one.
    assert sorted(json.dumps(rule["GroupId"]) for rule in ingress) == [
        '{"Fn::GetAtt": ["PlatformCluster6842C9C4", "ClusterSecurityGroupId"]}',
        '{"Fn::GetAtt": ["PlatformClusterControlPlaneSecurityGroup7AB1E4B9", "GroupId"]}',
    ]
    for rule in ingress:
        assert (rule["FromPort"], rule["ToPort"], rule["IpProtocol"]) == (443, 443, "tcp")
        assert "VerifierSecurityGroup" in json.dumps(rule["SourceSecurityGroupId"])


def test_one_environment_with_c_env_is_the_stack_the_pipeline_deploys(
    synthesized: dict[str, Any], tmp_path: Path
) -> None:
    _, (stack,), _ = _synth(tmp_path, {**CONTEXT, "env": "staging"})
    assert not (tmp_path / f"{PIPELINE_STACK_NAME}.template.json").exists()
    direct = json.loads((tmp_path / "assembly-staging" / stack.template_file).read_text())
    assert direct == synthesized["templates"]["staging"]


def test_review_yaml_and_the_synth_report_cover_every_stage(synthesized: dict[str, Any]) -> None:
    outdir = synthesized["outdir"]
    for name in ACCOUNTS:
        assert (outdir / "manifests" / name / "02-vllm.yaml").is_file()
    lines = describe(outdir)
    assert [line.split(":")[0] for line in lines if not line.startswith(" ")] == ["dev", "pipeline", "prod", "staging"]


def test_the_synth_has_no_context_lookup(synthesized: dict[str, Any]) -> None:
    manifest = json.loads((synthesized["outdir"] / "manifest.json").read_text())
    assert "missing" not in manifest
    for name in ACCOUNTS:
        nested = json.loads((synthesized["outdir"] / f"assembly-{name}" / "manifest.json").read_text())
        assert "missing" not in nested


def test_checkov_passes_the_pipeline_example(
    synthesized: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """checkov over everything the example deploys: the pipeline stack, each stage's stack (with its VerifyRunner)
    and each stage's Kubernetes objects. No failed check; each suppression with its one-line reason: the asset
    role's and the verify project's generated policies, the artifact bucket's own access-log bucket."""
    from tests.checkov_run import CHECKOV, failed_checks, gather, run_checkov, suppressions_without_a_reason

    if not CHECKOV.exists():
        pytest.skip(f"{CHECKOV} is missing: `make test` installs it from requirements-checkov.txt")
    outdir: Path = synthesized["outdir"]
    folder = gather(
        tmp_path_factory.mktemp("checkov-pipeline"),
        [outdir / f"{PIPELINE_STACK_NAME}.template.json", *sorted(outdir.glob("assembly-*/*.template.json"))],
        {env: outdir / "manifests" / env for env in ACCOUNTS},
    )
    results = run_checkov(folder, "cloudformation", "kubernetes")
    assert results is not None
    scanned = {r["check_type"]: r["summary"]["resource_count"] for r in results}
    assert scanned.keys() == {"cloudformation", "kubernetes"} and all(scanned.values()), scanned
    assert failed_checks(results) == []
    assert suppressions_without_a_reason(results) == []
    skipped = {(s["check_id"], s["resource"].split(".")[-1]) for r in results for s in r["results"]["skipped_checks"]}
    assert ("CKV_AWS_111", "PipelineAssetsFileRoleDefaultPolicy14DB8755") in skipped
    assert ("CKV_AWS_111", "VerifierProjectPolicyDocument23BA19DE") in skipped


def test_the_artifact_bucket_is_versioned_and_logged(synthesized: dict[str, Any]) -> None:
    pipeline = synthesized["pipeline"]
    buckets = _resources(pipeline, "AWS::S3::Bucket")
    (artifacts_id,) = [k for k in buckets if k.startswith("PipelineArtifactsBucket")]
    (logs_id,) = [k for k in buckets if k.startswith("ArtifactAccessLogs")]
    artifacts = buckets[artifacts_id]["Properties"]
    assert artifacts["VersioningConfiguration"] == {"Status": "Enabled"}
    assert artifacts["LoggingConfiguration"] == {
        "DestinationBucketName": {"Ref": logs_id},
        "LogFilePrefix": "artifact-bucket/",
    }
    assert {"Id": "ExpireOldVersions", "NoncurrentVersionExpiration": {"NoncurrentDays": 30}, "Status": "Enabled"} in (
        artifacts["LifecycleConfiguration"]["Rules"]
    )
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in _resources(pipeline, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": logs_id}
    ]
    (delivery,) = [s for s in policy if s.get("Principal") == {"Service": "logging.s3.amazonaws.com"}]
    assert delivery["Action"] == "s3:PutObject"
    assert delivery["Condition"]["ArnLike"] == {"aws:SourceArn": {"Fn::GetAtt": [artifacts_id, "Arn"]}}
