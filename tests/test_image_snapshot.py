"""`llm-eks images snapshot`: the builder against moto (EC2, SSM, STS), what it trusts (an Amazon AMI, a recorded
snapshot that is completed, encrypted and ours), its expiry tags and the cleanup of leaked builders, the record,
and synth's check of a recorded snapshot against the images an environment runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.ec2.models import ec2_backends

from llm_eks.cli import main, parser
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
    cleanup_builders,
    images_digest,
    read_record,
    write_record,
)
from llm_eks.infra.images import gpu_node_images, require_snapshot_images
from llm_eks.versions import BOTTLEROCKET_AMI_VERSION, KUBERNETES_VERSION, PAUSE_IMAGE, RAY_LLM_IMAGE, VLLM_IMAGE

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
    builder by the id the builder logs.

    The builder AMI: moto holds no Bottlerocket AMI, so one of the public Amazon Linux 2 AMIs it preloads stands in.
    DescribeImages answers for it as EC2 does for an Amazon-published image (`ImageOwnerAlias` "amazon", an Amazon
    OwnerId), which is all the builder's owner check reads."""
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
            amazon = ec2.describe_images(Owners=["amazon"], Filters=[{"Name": "name", "Values": ["amzn2-ami-hvm-*"]}])
            yield session, subnet, amazon["Images"][0]["ImageId"]


class Session:
    """A boto3 Session on moto whose SSM is `ssm` (an SsmOnline) and whose EC2 is `ec2` when given."""

    def __init__(self, session: Any, ssm: Any, ec2: Any = None) -> None:
        self._session, self._ssm, self._ec2 = session, ssm, ec2

    def client(self, name: str) -> Any:
        if name == "ssm":
            return self._ssm
        if name == "ec2" and self._ec2 is not None:
            return self._ec2
        return self._session.client(name)


def _args(*argv: str) -> Any:
    return parser().parse_args(["images", "snapshot", *argv])


def _builders(ec2: Any, environment: str) -> list[dict[str, Any]]:
    """Every builder instance of `environment`, in any state."""
    filters = [
        {"Name": "tag:llm-eks:purpose", "Values": ["image-snapshot-builder"]},
        {"Name": "tag:llm-eks:environment", "Values": [environment]},
    ]
    return [i for r in ec2.describe_instances(Filters=filters)["Reservations"] for i in r["Instances"]]


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
        images, ec2=ec2, ssm=ssm, ami_id=ami, subnet_id=subnet, instance_profile="builder", environment="prod",
        sleep=lambda _: None, log=lines.append,
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
                       instance_profile="builder", environment="dev", sleep=lambda _: None,
                       log=lines.append)  # fmt: skip
    assert str(info.value) == (
        "images snapshot: 'kubelet' failed on the builder (Failed): ctr: failed to resolve reference [LLMEKS-E703]"
    )
    assert _builder(ec2, lines)["State"]["Name"] == "terminated"
    failed = images_digest(("docker.io/no/such:1",))
    ours = ec2.describe_snapshots(Filters=[{"Name": "tag:llm-eks:images-sha256", "Values": [failed]}])["Snapshots"]
    assert ours == []


def _context(tmp_path: Path) -> Path:
    context = tmp_path / "cdk.json"
    context.write_text(json.dumps({"context": {"environments": {"dev": {}}}}))
    return context


def _build_args(context: Path, subnet: str, *more: str) -> Any:
    return _args(
        "--env", "dev", "--context-file", str(context), "--region", REGION, "--subnet-id", subnet,
        "--instance-profile", "builder", *more,
    )  # fmt: skip


def test_the_command_builds_records_reuses_and_rebuilds(
    aws: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session, subnet, ami = aws
    context = _context(tmp_path)
    ssm = SsmOnline(session.client("ssm"), ami)
    monkeypatch.setattr("llm_eks.images.snapshot.time.sleep", lambda _: None)
    assert snapshot_command(_build_args(context, subnet), session=Session(session, ssm)) == 0
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
    set_line = (
        f'{record.snapshot_id}: set "image_snapshot_id": "{record.snapshot_id}" in environments.dev\'s workload(s)'
    )
    assert capsys.readouterr().out.splitlines()[-1] == set_line
    launched = len(_builders(session.client("ec2"), "dev"))

    # Again, same images, region and release: the recorded snapshot (completed, encrypted, ours) is reused, and
    # nothing is launched, not even the AMI looked up.
    assert snapshot_command(_build_args(context, subnet), session=Session(session, ssm)) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{record.snapshot_id}: reused from image-snapshot.json (same {len(record.images)} image(s), region and "
        "Bottlerocket v1.65.0; completed, encrypted, owned by 123456789012); --rebuild builds a new one",
        set_line,
    ]
    assert len(_builders(session.client("ec2"), "dev")) == launched
    assert len(ssm.parameters) == 1

    # --rebuild: a new builder, a new snapshot, a new record.
    assert snapshot_command(_build_args(context, subnet, "--rebuild"), session=Session(session, ssm)) == 0
    rebuilt = read_record(tmp_path / SNAPSHOT_FILE)
    assert rebuilt is not None and rebuilt.snapshot_id != record.snapshot_id
    assert len(_builders(session.client("ec2"), "dev")) == launched + 1


def _record(tmp_path: Path, snapshot_id: str) -> None:
    """image-snapshot.json as a build of dev's images in REGION would have written it."""
    config = parse_environment("dev", {})
    images = gpu_node_images(config, plan_workloads(config))
    created = "2026-11-30T00:00:00+00:00"
    write_record(
        tmp_path / SNAPSHOT_FILE,
        SnapshotRecord(snapshot_id, REGION, BOTTLEROCKET_AMI_VERSION, KUBERNETES_VERSION, images, created),
    )


def _snapshot(session: Any, *, encrypted: bool, owner: str | None = None, state: str | None = None) -> str:
    """A snapshot in moto. moto keeps each account's snapshots apart and lists none another account shared, and its
    snapshots complete at once: `owner` and `state` set what DescribeSnapshots reports for a snapshot another
    account shared with us, or one still being taken."""
    ec2 = session.client("ec2")
    volume = ec2.create_volume(Size=8, AvailabilityZone=f"{REGION}a", Encrypted=encrypted)["VolumeId"]
    snapshot_id: str = ec2.create_snapshot(VolumeId=volume)["SnapshotId"]
    account = session.client("sts").get_caller_identity()["Account"]
    stored = ec2_backends[account][REGION].snapshots[snapshot_id]
    if owner is not None:
        stored.owner_id = owner
    if state is not None:
        stored.status = state
    return snapshot_id


RULE = (
    "a recorded snapshot is reused only when it is completed, encrypted and owned by this account (123456789012), "
    "and it is"
)


@pytest.mark.parametrize(
    ("snapshot", "why"),
    [
        ({"encrypted": False}, "not encrypted"),
        ({"encrypted": True, "owner": "210987654321"}, "owned by account 210987654321"),
        ({"encrypted": True, "state": "pending"}, "in state 'pending'"),
        (
            {"encrypted": False, "owner": "210987654321", "state": "error"},
            "in state 'error' and not encrypted and owned by account 210987654321",
        ),
        (None, "not found (DescribeSnapshots: InvalidSnapshot.NotFound)"),
    ],
    ids=["not-encrypted", "not-owned", "pending", "all-three", "gone"],
)
def test_a_recorded_snapshot_is_reused_only_when_completed_encrypted_and_ours(
    aws: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], snapshot: dict[str, Any] | None, why: str
) -> None:
    session, subnet, _ = aws
    snapshot_id = "snap-0123456789abcdef0" if snapshot is None else _snapshot(session, **snapshot)
    _record(tmp_path, snapshot_id)
    context = _context(tmp_path)
    before = len(_builders(session.client("ec2"), "dev"))
    argv = ["--env", "dev", "--context-file", str(context), "--region", REGION, "--subnet-id", subnet]
    assert main(["images", "snapshot", *argv, "--instance-profile", "builder"]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == (
        "",
        f"llm-eks: error: image-snapshot.json snapshot_id: '{snapshot_id}' is not allowed; {RULE} {why}; run again "
        "with --rebuild to build a new one [LLMEKS-E703]\n",
    )
    assert len(_builders(session.client("ec2"), "dev")) == before  # no builder launched


def test_the_builder_launches_only_from_an_amazon_ami(
    aws: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, subnet, amazon = aws
    ec2 = session.client("ec2")
    assert ec2.describe_images(ImageIds=[amazon])["Images"][0]["ImageOwnerAlias"] == "amazon"
    # An image any account can publish: registered by this one, it has our OwnerId and no owner alias.
    lookalike = ec2.register_image(Name="bottlerocket-aws-k8s-1.35-x86_64-v1.65.0", RootDeviceName="/dev/xvda")
    rule = "the builder must launch from an AMI owned by Amazon (DescribeImages ImageOwnerAlias 'amazon')"
    before = len(_builders(ec2, "dev"))
    with pytest.raises(ConfigError) as info:
        build_snapshot((VLLM_IMAGE,), ec2=ec2, ssm=SsmOnline(session.client("ssm")), ami_id=lookalike["ImageId"],
                       subnet_id=subnet, instance_profile="builder", environment="dev")  # fmt: skip
    assert str(info.value) == (
        f"images snapshot: builder AMI: '{lookalike['ImageId']}' is not allowed; {rule}; DescribeImages says "
        "OwnerId 123456789012 [LLMEKS-E703]"
    )
    # The command, with the public parameter pointing at it (or at an AMI that does not exist): refused, no launch.
    ssm = SsmOnline(session.client("ssm"), lookalike["ImageId"])
    with pytest.raises(ConfigError, match=r"DescribeImages says OwnerId 123456789012 \[LLMEKS-E703\]$"):
        snapshot_command(_build_args(_context(tmp_path), subnet), session=Session(session, ssm))
    missing = SsmOnline(session.client("ssm"), "ami-0123456789abcdef0")
    with pytest.raises(ConfigError) as info:
        snapshot_command(_build_args(_context(tmp_path), subnet), session=Session(session, missing))
    assert str(info.value) == (
        f"images snapshot: builder AMI: 'ami-0123456789abcdef0' is not allowed; {rule}; DescribeImages answered "
        "InvalidAMIID.NotFound [LLMEKS-E703]"
    )
    assert len(_builders(ec2, "dev")) == before


class SsmWatching(SsmOnline):
    """SsmOnline that, when the first command is sent (the builder is up), reads the builder's and its volumes' tags
    as EC2 reports them."""

    def __init__(self, ssm: Any, ec2: Any) -> None:
        super().__init__(ssm)
        self._ec2 = ec2
        self.tags: dict[str, dict[str, str]] = {}

    def send_command(self, **kwargs: Any) -> dict[str, Any]:
        if not self.tags:
            (instance_id,) = kwargs["InstanceIds"]
            instance = self._ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
            self.tags[instance_id] = {t["Key"]: t["Value"] for t in instance["Tags"]}
            on = [{"Name": "attachment.instance-id", "Values": [instance_id]}]
            for volume in self._ec2.describe_volumes(Filters=on)["Volumes"]:
                device = volume["Attachments"][0]["Device"]
                self.tags[device] = {t["Key"]: t["Value"] for t in volume["Tags"]}
        return super().send_command(**kwargs)


def test_the_builder_and_its_volumes_say_when_they_expire(aws: Any) -> None:
    session, subnet, ami = aws
    ec2 = session.client("ec2")
    ssm = SsmWatching(session.client("ssm"), ec2)
    launch = datetime(2026, 12, 2, 6, 0, 0, tzinfo=UTC)
    lines: list[str] = []
    build_snapshot((VLLM_IMAGE,), ec2=ec2, ssm=ssm, ami_id=ami, subnet_id=subnet, instance_profile="builder",
                   environment="prod", max_build_minutes=90, sleep=lambda _: None, now=lambda: launch,
                   log=lines.append)  # fmt: skip
    instance_id = next(line.split()[1] for line in lines if line.endswith(" launched"))
    expected = {
        "llm-eks:purpose": "image-snapshot-builder",
        "llm-eks:environment": "prod",
        "llm-eks:expires-at": "2026-12-02T07:30:00Z",
    }
    assert ssm.tags == {instance_id: expected, "/dev/xvda": expected, "/dev/xvdb": expected}


def test_a_build_gives_up_at_its_expiry_and_terminates_the_builder(aws: Any) -> None:
    session, subnet, ami = aws
    ec2, ssm = session.client("ec2"), SsmOnline(session.client("ssm"))
    launch = datetime(2026, 12, 2, 6, 0, 0, tzinfo=UTC)
    times = iter([launch])  # the launch, then two hours later at the first poll SSM does not answer

    lines: list[str] = []
    with pytest.raises(ConfigError) as info:
        build_snapshot((VLLM_IMAGE,), ec2=ec2, ssm=ssm, ami_id=ami, subnet_id=subnet, instance_profile="builder",
                       environment="dev", sleep=lambda _: None, now=lambda: next(times, launch + timedelta(hours=2)),
                       log=lines.append)  # fmt: skip
    assert str(info.value) == (
        "images snapshot: gave up waiting for SSM to reach the builder: the build passed --max-build-minutes 120 "
        "(llm-eks:expires-at 2026-12-02T08:00:00Z) [LLMEKS-E703]"
    )
    assert _builder(ec2, lines)["State"]["Name"] == "terminated"


def _launch(ec2: Any, ami: str, subnet: str, tags: dict[str, str]) -> str:
    """An instance with `tags`, as a builder (or something else) leaves it."""
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    reservation = ec2.run_instances(
        ImageId=ami, InstanceType="m7i.large", MinCount=1, MaxCount=1, SubnetId=subnet, TagSpecifications=spec
    )
    instance_id: str = reservation["Instances"][0]["InstanceId"]
    return instance_id


def _state(ec2: Any, instance_id: str) -> str:
    state: str = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["State"]["Name"]
    return state


def test_cleanup_terminates_only_expired_builders(aws: Any, capsys: pytest.CaptureFixture[str]) -> None:
    session, subnet, ami = aws
    ec2 = session.client("ec2")
    builder = {"llm-eks:purpose": "image-snapshot-builder", "llm-eks:environment": "sweep"}
    past, future = "2020-01-01T00:00:00Z", "2099-01-01T00:00:00Z"
    expired = _launch(ec2, ami, subnet, {**builder, "llm-eks:expires-at": past})
    undated = _launch(ec2, ami, subnet, builder)
    garbled = _launch(ec2, ami, subnet, {**builder, "llm-eks:expires-at": "tomorrow"})
    naive = _launch(ec2, ami, subnet, {**builder, "llm-eks:expires-at": "2099-01-01T00:00:00"})
    stopped = _launch(ec2, ami, subnet, {**builder, "llm-eks:expires-at": past})
    ec2.stop_instances(InstanceIds=[stopped])
    live = _launch(ec2, ami, subnet, {**builder, "llm-eks:expires-at": future})
    # Not builders, or another environment's: --env sweep leaves them alone.
    other = _launch(ec2, ami, subnet, {"llm-eks:environment": "sweep", "llm-eks:expires-at": past})
    elsewhere = _launch(ec2, ami, subnet, {**builder, "llm-eks:environment": "keep", "llm-eks:expires-at": past})

    assert main(["images", "snapshot", "--cleanup", "--region", REGION, "--env", "sweep"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert sorted(out.splitlines()) == sorted([
        f"{expired}: terminated (environment sweep, running, expired 2020-01-01T00:00:00Z)",
        f"{undated}: terminated (environment sweep, running, no llm-eks:expires-at tag)",
        f"{garbled}: terminated (environment sweep, running, llm-eks:expires-at 'tomorrow' is not a UTC ISO-8601 "
        "time)",
        f"{naive}: terminated (environment sweep, running, llm-eks:expires-at '2099-01-01T00:00:00' is not a UTC "
        "ISO-8601 time)",
        f"{stopped}: terminated (environment sweep, stopped, expired 2020-01-01T00:00:00Z)",
        f"{live}: kept (environment sweep, running, expires 2099-01-01T00:00:00Z)",
    ])  # fmt: skip
    states = {i: _state(ec2, i) for i in (expired, undated, garbled, naive, stopped, live, other, elsewhere)}
    assert states == {
        expired: "terminated", undated: "terminated", garbled: "terminated", naive: "terminated",
        stopped: "terminated", live: "running", other: "running", elsewhere: "running",
    }  # fmt: skip

    # Without --env: every environment's expired builders (still not the instance that is no builder).
    assert main(["images", "snapshot", "--cleanup", "--region", REGION]) == 0
    out, _ = capsys.readouterr()
    assert sorted(out.splitlines()) == sorted([
        f"{elsewhere}: terminated (environment keep, running, expired 2020-01-01T00:00:00Z)",
        f"{live}: kept (environment sweep, running, expires 2099-01-01T00:00:00Z)",
    ])  # fmt: skip
    assert (_state(ec2, other), _state(ec2, live)) == ("running", "running")
    ec2.terminate_instances(InstanceIds=[live, other])
    assert main(["images", "snapshot", "--cleanup", "--region", REGION, "--env", "sweep"]) == 0
    assert capsys.readouterr().out == f"no image-snapshot builders of environment sweep in {REGION}\n"


def test_cleanup_exits_1_when_a_terminate_call_fails(aws: Any, capsys: pytest.CaptureFixture[str]) -> None:
    session, subnet, ami = aws
    ec2 = session.client("ec2")
    builder = {"llm-eks:purpose": "image-snapshot-builder", "llm-eks:environment": "locked"}
    refused = _launch(ec2, ami, subnet, {**builder, "llm-eks:expires-at": "2020-01-01T00:00:00Z"})
    allowed = _launch(ec2, ami, subnet, {**builder, "llm-eks:expires-at": "2020-01-01T00:00:00Z"})

    class Ec2:
        """EC2 that refuses to terminate `refused`, as an IAM policy denying it would."""

        def terminate_instances(self, InstanceIds: list[str]) -> Any:
            if InstanceIds == [refused]:
                error = {
                    "Code": "UnauthorizedOperation",
                    "Message": "You are not authorized to perform this operation.",
                }
                raise ClientError({"Error": error}, "TerminateInstances")
            return ec2.terminate_instances(InstanceIds=InstanceIds)

        def __getattr__(self, name: str) -> Any:
            return getattr(ec2, name)

    args = _args("--cleanup", "--region", REGION, "--env", "locked")
    assert snapshot_command(args, session=Session(session, None, Ec2())) == 1
    out, err = capsys.readouterr()
    assert out == f"{allowed}: terminated (environment locked, running, expired 2020-01-01T00:00:00Z)\n"
    assert err == (
        f"llm-eks: error: {refused}: not terminated (environment locked, running, expired 2020-01-01T00:00:00Z): An "
        "error occurred (UnauthorizedOperation) when calling the TerminateInstances operation: You are not "
        "authorized to perform this operation.\n"
    )
    assert (_state(ec2, refused), _state(ec2, allowed)) == ("running", "terminated")
    ec2.terminate_instances(InstanceIds=[refused])
    assert cleanup_builders(ec2, environment="locked") == []


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
        "new snapshot [LLMEKS-E704]"
    )
    # A snapshot the record does not know (built elsewhere) is not checked: synth cannot look inside it offline.
    other = parse_environment("prod", {"workload": {"image_snapshot_id": "snap-0fedcba9876543210"}})
    require_snapshot_images(other, plan_workloads(other), stale)


def test_bad_builder_input_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["images", "snapshot", "--env", "dev", "--region", REGION, "--instance-profile", "builder"]
    subnet = ["--subnet-id", "subnet-0abc12345def67890"]
    cases = [
        (
            [*base, "--subnet-id", "subnet-x"],
            "--subnet-id: 'subnet-x' is not allowed; must be a subnet id such as subnet-0abc12345def67890"
            " [LLMEKS-E601]",
        ),
        (
            [*base, *subnet, "--instance-type", "m7i.larg"],
            "--instance-type: 'm7i.larg' is not allowed; not an EC2 instance type (botocore 1.44.8's list); closest: "
            "m7i.large, m7i.xlarge, m7i.8xlarge [LLMEKS-E201]",
        ),
        ([*base, *subnet, "--volume-gib", "5"], "--volume-gib: 5 is not allowed; must be 20 to 16384 [LLMEKS-E601]"),
        (
            [*base, *subnet, "--max-build-minutes", "5"],
            "--max-build-minutes: 5 is not allowed; must be 10 to 720 [LLMEKS-E601]",
        ),
        (
            [*base, *subnet, "--max-build-minutes", "721"],
            "--max-build-minutes: 721 is not allowed; must be 10 to 720 [LLMEKS-E601]",
        ),
        (
            ["images", "snapshot", "--region", REGION],
            "the following arguments are required to build a snapshot: --env, --subnet-id, --instance-profile "
            "(--cleanup needs only --region) [LLMEKS-E600]",
        ),
        (
            ["images", "snapshot", "--env", "dev", "--region", REGION, *subnet],
            "the following arguments are required to build a snapshot: --instance-profile (--cleanup needs only "
            "--region) [LLMEKS-E600]",
        ),
        (
            ["images", "snapshot", "--cleanup", "--region", REGION, *subnet, "--rebuild"],
            "--cleanup builds nothing: leave out --subnet-id, --rebuild [LLMEKS-E600]",
        ),
        (["images", "snapshot", "--cleanup"], "the following arguments are required: --region [LLMEKS-E600]"),
        (
            ["images", "snapshot", "--cleanup", "--region", "Virginia"],
            "--region: 'Virginia' is not allowed; must be an AWS region such as us-east-1 [LLMEKS-E601]",
        ),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        assert capsys.readouterr().err == f"llm-eks: error: {message}\n"
