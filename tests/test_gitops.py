"""`llm-eks manifests`: the same charts as the CDK stack, synthesized with cdk8s alone for GitOps."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT, Synthesized
from tests.kube_schema import assert_valid

SG = "sg-0123456789abcdef0"
# dev's weights bucket is created by the stack: GitOps is given its name (the stack output WeightsBucketName).
BUCKET = "llmeks-dev-weightsbucket-0123456789ab"


@pytest.fixture(scope="module")
def gitops_dev(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gitops")
    code = (
        "import sys\n"
        "from llm_eks.cli import main\n"
        f"code = main(['manifests', '--env', 'dev', '--node-role-name', 'KarpenterNodeRole-dev', "
        f"'--security-group-id', {SG!r}, '--weights-bucket', {BUCKET!r}, '--out', {str(out)!r}])\n"
        "assert not [m for m in sys.modules if m.startswith(('aws_cdk', 'cdk_nag'))], 'aws_cdk imported'\n"
        "sys.exit(code)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return out


def objects(folder: Path) -> dict[str, list[dict]]:
    return {p.name: [d for d in yaml.safe_load_all(p.read_text()) if d] for p in sorted(folder.glob("*.yaml"))}


def test_files_in_apply_order_with_their_needs(gitops_dev: Path) -> None:
    names = sorted(p.name for p in gitops_dev.glob("*.yaml"))
    assert names == [
        "00-addon-namespaces.yaml",
        "01-node-pools.yaml",
        "02-vllm.yaml",
        "03-autoscaling.yaml",
        "04-monitoring.yaml",
        "05-benchmark.manual.yaml",
    ]
    assert (gitops_dev / "02-vllm.yaml").read_text().splitlines()[0] == "# needs: node-pools, secrets, weights, staging"
    assert (gitops_dev / "03-autoscaling.yaml").read_text().splitlines()[0] == "# needs: vllm, keda"


def test_staged_weights_read_the_given_bucket(gitops_dev: Path) -> None:
    vllm = objects(gitops_dev)["02-vllm.yaml"]
    (config_map,) = [o for o in vllm if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "llm-eks-weights"]
    assert config_map["data"] == {"bucket": BUCKET}


def test_staged_weights_without_the_bucket_name_are_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from llm_eks.cli import main

    args = ["manifests", "--env", "dev", "--node-role-name", "r", "--security-group-id", SG, "--out", str(tmp_path)]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        "llm-eks: error: --weights-bucket: None is not allowed; environments.dev.workload has weights 'staged' in a "
        "bucket the stack creates: pass its name (stack output WeightsBucketName) [LLMEKS-E601]\n"
    )


def test_objects_are_valid_and_carry_the_given_identity(gitops_dev: Path) -> None:
    everything = [o for objs in objects(gitops_dev).values() for o in objs]
    assert_valid(everything)
    (gpu_class,) = [o for o in everything if o["kind"] == "EC2NodeClass" and o["metadata"]["name"] == "gpu-nvidia"]
    assert gpu_class["spec"]["role"] == "KarpenterNodeRole-dev"
    assert gpu_class["spec"]["securityGroupSelectorTerms"] == [{"id": SG}]


def test_image_snapshot_reaches_the_gpu_node_class(tmp_path: Path) -> None:
    from llm_eks.config import parse_environment
    from llm_eks.infra.gitops import write_manifests
    from tests.environments import plan_environment

    config = parse_environment("snap", {"workload": {"image_snapshot_id": "snap-0123456789abcdef0"}})
    written = write_manifests(
        config, [plan_environment(config)], tmp_path, node_role_name="r", security_group_ids=(SG,)
    )
    (pools,) = [p for p in written if p.name == "01-node-pools.yaml"]
    (gpu_class,) = [o for o in yaml.safe_load_all(pools.read_text()) if o and o["metadata"]["name"] == "gpu-nvidia"]
    volumes = {m["deviceName"]: m["ebs"] for m in gpu_class["spec"]["blockDeviceMappings"]}
    assert volumes["/dev/xvdb"]["snapshotID"] == "snap-0123456789abcdef0"


def test_same_objects_as_the_cdk_stack(gitops_dev: Path, synthesized: Synthesized) -> None:
    """GitOps and `cdk deploy` apply the same objects: same kinds and names, file by file."""
    assert synthesized.error is None, synthesized.error

    def index(files: dict[str, list[dict]]) -> dict[str, set[tuple[str, str]]]:
        return {
            re.sub(r"^\d+-", "", name).split(".")[0]: {(o["kind"], o["metadata"]["name"]) for o in objs}
            for name, objs in files.items()
            # cluster-objects.yaml: what the stack's own constructs apply (a GitOps user deploys the stack too).
            if name not in ("helm-releases.yaml", "cluster-objects.yaml")
        }

    assert index(objects(gitops_dev)) == index(synthesized.manifests("dev"))
    # The add-ons' namespaces and policies are the very objects the stack applies before its Helm releases.
    assert objects(gitops_dev)["00-addon-namespaces.yaml"] == synthesized.manifests("dev")["addon-namespaces.yaml"]


def test_bad_environment_is_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "llm_eks.cli",
            "manifests",
            "--env",
            "qa",
            "--node-role-name",
            "r",
            "--security-group-id",
            SG,
            "--out",
            str(tmp_path),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr == (
        "llm-eks: error: env: 'qa' is not allowed; defined environments: dev, staging, prod [LLMEKS-E102]\n"
    )


def test_api_key_objects_for_gitops(gitops_dev: Path) -> None:
    """GitOps gets the same key wiring: the class naming llm-eks/dev/api-key (create that secret, or name yours in
    workload.api_key_secret, and give the ServiceAccount's Pod Identity role read access) and the Job mounting it."""
    files = objects(gitops_dev)
    (spc,) = [o for o in files["02-vllm.yaml"] if o["metadata"]["name"] == "vllm-llama-3-1-8b-instruct-api-key"]
    assert yaml.safe_load(spc["spec"]["parameters"]["objects"])[0]["objectName"] == "llm-eks/dev/api-key"
    # The Job by hand; its ServiceAccount is applied with the workload (so `llm-eks verify --load` finds it too).
    (job,) = files["05-benchmark.manual.yaml"]
    account = job["spec"]["template"]["spec"]["serviceAccountName"]
    assert [o["kind"] for o in files["02-vllm.yaml"] if o["metadata"]["name"] == account] == ["ServiceAccount"]
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes["api-key"]["csi"]["volumeAttributes"]["secretProviderClass"] == spc["metadata"]["name"]


def test_the_gateways_key_region_is_given_or_the_environments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--region` names where the tenants' keys are (the SecretStore's region) when the environment names none; a bad
    one is a one-line error before anything is built."""
    from llm_eks.cli import main

    base = ["manifests", "--env", "staging", "--node-role-name", "r", "--security-group-id", SG]
    base += ["--weights-bucket", BUCKET, "--oidc-issuer", "https://oidc.eks.us-east-1.amazonaws.com/id/EXAMPLE"]
    assert main([*base, "--region", "the-moon", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "llm-eks: error: --region: 'the-moon' is not allowed; must be an AWS region such as us-west-2 [LLMEKS-E601]\n"
    )
    assert main([*base, "--out", str(tmp_path)]) == 2
    assert "region: None is not allowed with API-key tenants" in capsys.readouterr().err
    assert main([*base, "--region", "eu-west-1", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    gateway = next(tmp_path.glob("*-gateway.yaml"))
    (store,) = [o for o in yaml.safe_load_all(gateway.read_text()) if o and o["kind"] == "SecretStore"]
    assert store["spec"]["provider"]["aws"]["region"] == "eu-west-1"
