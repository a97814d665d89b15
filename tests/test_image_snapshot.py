"""`llm-eks images snapshot`: the builder against moto (EC2, SSM), the record, and synth's check of a recorded
snapshot against the images an environment runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from llm_eks.cli.images import snapshot_command
from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.images.lock import ImageLock, LockEntry
from llm_eks.images.snapshot import (
    SNAPSHOT_FILE,
    SnapshotRecord,
    ami_parameter,
    build_snapshot,
    images_digest,
    read_record,
)
from llm_eks.infra.images import gpu_node_images, require_snapshot_images
from llm_eks.versions import PAUSE_IMAGE, RAY_LLM_IMAGE, VLLM_IMAGE

REGION = "us-east-1"
DCGM = "nvcr.io/nvidia/k8s/dcgm-exporter"


class SsmOnline:
    """moto's SSM knows no managed instances and no AWS public parameters: answer describe_instance_information as
    SSM would once the builder's agent checks in (after one poll), the Bottlerocket AMI parameter with `ami`, and
    pass everything else to moto."""

    def __init__(self, ssm: Any, ami: str = "") -> None:
        self._ssm = ssm
        self._ami = ami
        self.polls = 0
        self.commands: list[str] = []
        self.parameters: list[str] = []

    def get_parameter(self, Name: str) -> dict[str, Any]:
        self.parameters.append(Name)
        return {"Parameter": {"Name": Name, "Value": self._ami}}

    def describe_instance_information(self, **kwargs: Any) -> dict[str, Any]:
        self.polls += 1
        status = "Online" if self.polls > 1 else "ConnectionLost"
        return {"InstanceInformationList": [{"InstanceId": kwargs["Filters"][0]["Values"][0], "PingStatus": status}]}

    def send_command(self, **kwargs: Any) -> dict[str, Any]:
        self.commands += kwargs["Parameters"]["commands"]
        return self._ssm.send_command(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ssm, name)


@pytest.fixture(scope="module")
def aws() -> Any:
    """One moto account for the module (moto takes ~3 s to load EC2's catalogs per mock); each test finds its own
    builder by the id the builder logs."""
    with pytest.MonkeyPatch.context() as env:
        for key, value in {
            "AWS_ACCESS_KEY_ID": "t",
            "AWS_SECRET_ACCESS_KEY": "t",
            "AWS_DEFAULT_REGION": REGION,
        }.items():
            env.setenv(key, value)
        with mock_aws():
            session = boto3.Session(region_name=REGION)
            ec2 = session.client("ec2")
            vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
            subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.1.0/24")["Subnet"]["SubnetId"]
            iam = session.client("iam")
            iam.create_role(RoleName="builder", AssumeRolePolicyDocument="{}")
            iam.create_instance_profile(InstanceProfileName="builder")
            iam.add_role_to_instance_profile(InstanceProfileName="builder", RoleName="builder")
            yield session, subnet, "ami-0123456789abcdef0"


def _builder(ec2: Any, lines: list[str]) -> dict[str, Any]:
    """The builder instance a build logged (`builder i-... launched`)."""
    instance_id = next(line.split()[1] for line in lines if line.endswith(" launched"))
    instance: dict[str, Any] = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return instance


def test_the_builder_pulls_snapshots_and_always_terminates(aws: Any) -> None:
    session, subnet, ami = aws
    ec2, ssm = session.client("ec2"), SsmOnline(session.client("ssm"))
    images = (f"{VLLM_IMAGE}", "registry.k8s.io/pause:3.10.1")
    lines: list[str] = []
    snapshot_id = build_snapshot(
        images, ec2=ec2, ssm=ssm, ami_id=ami, subnet_id=subnet, instance_profile="builder", sleep=lambda _: None,
        log=lines.append, tags={"llm-eks:environment": "prod"},
    )  # fmt: skip
    snapshot = ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"][0]
    tags = {t["Key"]: t["Value"] for t in snapshot["Tags"]}
    assert tags == {"llm-eks:images-sha256": images_digest(images), "llm-eks:environment": "prod"}
    # The data volume it was taken from: 200 GiB and encrypted (the builder's volumes are gone with it).
    assert (snapshot["VolumeSize"], snapshot["Encrypted"]) == (200, True)
    # kubelet stopped, containerd's images cleared, then each image pulled with the CRI's label, in order.
    assert ssm.commands[0] == "apiclient exec admin sheltie systemctl stop kubelet"
    assert " images rm " in ssm.commands[1]
    pulls = [c for c in ssm.commands if " images pull " in c]
    assert [c.rsplit(" ", 1)[1] for c in pulls] == list(images)
    assert all("--label io.cri-containerd.image=managed" in c and "-n k8s.io" in c for c in pulls)
    instance = _builder(ec2, lines)
    assert instance["State"]["Name"] == "terminated"
    assert instance["MetadataOptions"]["HttpTokens"] == "required"


def test_a_failed_step_still_terminates_the_builder(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    session, subnet, ami = aws
    ec2, ssm = session.client("ec2"), SsmOnline(session.client("ssm"))
    real = ssm._ssm.get_command_invocation

    def failing(**kwargs: Any) -> dict[str, Any]:
        result = real(**kwargs)
        return {**result, "Status": "Failed", "StandardErrorContent": "ctr: failed to resolve reference"}

    monkeypatch.setattr(ssm._ssm, "get_command_invocation", failing)
    lines: list[str] = []
    with pytest.raises(ConfigError) as info:
        build_snapshot(("docker.io/no/such:1",), ec2=ec2, ssm=ssm, ami_id=ami, subnet_id=subnet,
                       instance_profile="builder", sleep=lambda _: None, log=lines.append)  # fmt: skip
    assert str(info.value) == (
        "images snapshot: 'kubelet' failed on the builder (Failed): ctr: failed to resolve reference"
    )
    assert _builder(ec2, lines)["State"]["Name"] == "terminated"
    failed = images_digest(("docker.io/no/such:1",))
    ours = ec2.describe_snapshots(Filters=[{"Name": "tag:llm-eks:images-sha256", "Values": [failed]}])["Snapshots"]
    assert ours == []


def test_the_command_builds_and_records(
    aws: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session, subnet, ami = aws
    context = tmp_path / "cdk.json"
    context.write_text(json.dumps({"context": {"environments": {"dev": {}}}}))
    args = argparse.Namespace(
        env="dev", context_file=str(context), region=REGION, subnet_id=subnet, instance_profile="builder",
        security_group_id=[], kms_key_id=None, instance_type="m7i.large", volume_gib=200,
    )  # fmt: skip
    ssm = SsmOnline(session.client("ssm"), ami)

    class Session:
        def client(self, name: str) -> Any:
            return ssm if name == "ssm" else session.client(name)

    monkeypatch.setattr("llm_eks.images.snapshot.time.sleep", lambda _: None)
    assert snapshot_command(args, session=Session()) == 0
    record = read_record(tmp_path / SNAPSHOT_FILE)
    config = parse_environment("dev", {})
    assert record is not None and record.snapshot_id.startswith("snap-")
    assert (record.images, record.region, record.bottlerocket) == (
        gpu_node_images(config, plan_workloads(config)),
        REGION,
        "v1.65.0",
    )
    assert json.loads((tmp_path / SNAPSHOT_FILE).read_text())["images_sha256"] == images_digest(record.images)
    # The pinned Bottlerocket release of the node classes, standard variant, as Karpenter resolves the alias.
    assert ssm.parameters == ["/aws/service/bottlerocket/aws-k8s-1.35/x86_64/1.65.0/image_id"] == [ami_parameter()]
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == (
        f'{record.snapshot_id}: set "image_snapshot_id": "{record.snapshot_id}" in environments.dev\'s workload(s)'
    )


def test_gpu_node_images_follow_the_workloads() -> None:
    config = parse_environment(
        "qa", {"workloads": {"a": {"warm_replicas": 1}, "b": {"engine": "ray-serve", "model": "Qwen/Qwen3-8B"}}}
    )
    images = gpu_node_images(config, plan_workloads(config))
    assert images[:3] == (VLLM_IMAGE, PAUSE_IMAGE, images[2]) and images[2].startswith(DCGM)
    assert RAY_LLM_IMAGE in images and len(images) == len(set(images))
    # Locked images are pulled by digest, as the pods will ask for them.
    digest = "sha256:" + "a" * 64
    entry = LockEntry(digest=digest, resolved_at="2026-11-30T00:00:00Z", source="https://registry-1.docker.io/v2/")
    lock = ImageLock("images.lock.json", {VLLM_IMAGE: entry})
    assert gpu_node_images(config, plan_workloads(config), lock)[0] == f"{VLLM_IMAGE}@{digest}"


def test_synth_refuses_a_recorded_snapshot_of_another_image_list() -> None:
    snapshot = "snap-0123456789abcdef0"
    config = parse_environment("prod", {"workload": {"image_snapshot_id": snapshot}})
    plans = plan_workloads(config)
    current = gpu_node_images(config, plans)
    record = SnapshotRecord(snapshot, REGION, "v1.65.0", "1.35", current, "2026-11-30T00:00:00+00:00")
    require_snapshot_images(config, plans, record)  # the same list: fine
    stale = SnapshotRecord(snapshot, REGION, "v1.65.0", "1.35", (RAY_LLM_IMAGE,), "2026-11-30T00:00:00+00:00")
    with pytest.raises(ConfigError) as info:
        require_snapshot_images(config, plans, stale)
    missing = ", ".join(sorted(current))
    assert str(info.value) == (
        f"environments.prod.workload.image_snapshot_id: '{snapshot}' is not allowed; image-snapshot.json says it "
        f"holds another image list (missing {missing}); run `llm-eks images snapshot --env prod` again and use the "
        "new snapshot"
    )
    # A snapshot the record does not know (built elsewhere) is not checked: synth cannot look inside it offline.
    other = parse_environment("prod", {"workload": {"image_snapshot_id": "snap-0fedcba9876543210"}})
    require_snapshot_images(other, plan_workloads(other), stale)


def test_bad_builder_input_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from llm_eks.cli import main

    base = ["images", "snapshot", "--env", "dev", "--region", REGION, "--instance-profile", "builder"]
    assert main([*base, "--subnet-id", "subnet-x"]) == 2
    assert capsys.readouterr().err == (
        "llm-eks: error: --subnet-id: 'subnet-x' is not allowed; must be a subnet id such as subnet-0abc12345def67890\n"
    )
    assert main([*base, "--subnet-id", "subnet-0abc12345def67890", "--volume-gib", "5"]) == 2
    assert capsys.readouterr().err == "llm-eks: error: --volume-gib: 5 is not allowed; must be 20 to 16384\n"
