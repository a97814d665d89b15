"""The EBS snapshot of a Bottlerocket data volume that already holds an environment's GPU-node images: built with
boto3, and recorded beside cdk.json (`llm-eks images snapshot` runs it; `image_snapshot_id` then makes every new GPU
node restore it instead of pulling ~12 GB).

The steps are AWS's for Bottlerocket (aws-samples/bottlerocket-images-cache, snapshot.sh), in boto3: launch a
builder of the Bottlerocket release and Kubernetes variant the node classes pin (its SSM public parameter, as
Karpenter resolves the alias), with the admin host container on; wait until SSM reaches it; stop kubelet, clear
containerd's images, pull each image into containerd's `k8s.io` namespace with the CRI's `managed` label; stop the
builder and snapshot its data volume (/dev/xvdb, encrypted); terminate the builder whatever happened. The builder
needs an instance profile with AmazonSSMManagedInstanceCore (and ECR read for ECR images), a subnet with a route to
the registries, and no inbound rule: SSM is outbound only.

What it trusts: the builder launches only from an AMI Amazon owns (require_amazon_image), and a recorded snapshot
is reused only when it is completed, encrypted and owned by the caller's account (require_reusable). Every builder
is tagged with when it must be gone (`llm-eks:expires-at`, launch time + the build's time limit) and its
environment, so a builder a killed run leaked is found and terminated by cleanup_builders
(`llm-eks images snapshot --cleanup`).

The record (image-snapshot.json: snapshot id, region, Bottlerocket release, images) lets synth refuse a snapshot
that holds another image list than the environment runs (llm_eks.infra.images.require_snapshot_images), offline.
The EC2, SSM and STS clients are passed in: boto3 is the `aws` extra (`pip install boto3`), and only the
command that builds a snapshot needs it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from llm_eks.error_codes import E601, E703
from llm_eks.errors import ConfigError, fail
from llm_eks.versions import BOTTLEROCKET_AMI_VERSION, KUBERNETES_VERSION

SNAPSHOT_FILE = "image-snapshot.json"
# The builder's tags: what it is (cleanup looks for it by this), whose it is, and when it must be gone.
PURPOSE_TAG = "llm-eks:purpose"
BUILDER_PURPOSE = "image-snapshot-builder"
ENVIRONMENT_TAG = "llm-eks:environment"
EXPIRES_TAG = "llm-eks:expires-at"
# A build's time limit in minutes (--max-build-minutes): the default, and what is allowed. Ten minutes is about the
# least a launch, SSM check-in and one pull need; twelve hours is far past any image list we pull.
MAX_BUILD_MINUTES = 120
MAX_BUILD_MINUTES_RANGE = (10, 720)
# The states a leaked builder can be found in (a terminated one is gone already; shutting-down is on its way).
CLEANUP_STATES = ("pending", "running", "stopping", "stopped")
# containerd as the kubelet sees it, through the admin container (bottlerocket-images-cache's CTR_CMD).
_CTR = "apiclient exec admin sheltie ctr -a /run/containerd/containerd.sock -n k8s.io"
# Builder volumes: a small OS volume, and the data volume at gp3's fastest (the pulls are the build's time).
_OS_VOLUME_GIB = 10
_DATA_DEVICE = "/dev/xvdb"
# One image pull of ~12 GB at containerd's default pace is a few minutes; an hour means something is wrong.
_STEP_TIMEOUT_S = 3600


@dataclass(frozen=True)
class SnapshotRecord:
    """What image-snapshot.json holds: which snapshot, built where, from which Bottlerocket, with which images."""

    snapshot_id: str
    region: str
    bottlerocket: str
    kubernetes: str
    images: tuple[str, ...]
    created: str

    @property
    def images_sha256(self) -> str:
        return images_digest(self.images)


def images_digest(images: Sequence[str]) -> str:
    """A stable digest of an image list (order-free), tagged on the snapshot."""
    return hashlib.sha256("\n".join(sorted(images)).encode()).hexdigest()


def ami_parameter(kubernetes: str = KUBERNETES_VERSION, bottlerocket: str = BOTTLEROCKET_AMI_VERSION) -> str:
    """The public SSM parameter of the pinned Bottlerocket release (the path Karpenter resolves the alias with,
    pkg/providers/amifamily/bottlerocket.go, without the tag's `v`). The standard variant: its containerd and data
    volume layout are the NVIDIA variant's, and it runs on a cheap builder."""
    return f"/aws/service/bottlerocket/aws-k8s-{kubernetes}/x86_64/{bottlerocket.lstrip('v')}/image_id"


def utc_stamp(moment: datetime) -> str:
    """`2026-12-02T06:53:52Z`: the form of `llm-eks:expires-at` (UTC, ISO-8601, whole seconds)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def require_amazon_image(ec2: Any, ami_id: str) -> None:
    """Refuse, in one line, to launch a builder from an AMI that Amazon does not own.

    The AMI id comes from a public SSM parameter; describing the image before the launch makes sure the id names an
    image Amazon owns, not one any account could have published. The rule: DescribeImages must return the image
    with `ImageOwnerAlias` `amazon`. The EC2 API Reference documents that field on the Image data type as "The
    owner alias (amazon | aws-backup-vault | aws-marketplace)"
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Image.html), and DescribeImages' `Owners`
    parameter takes `amazon` for the same owners
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeImages.html). An image an account
    registers or copies carries that account's OwnerId.
    UNVERIFIED: that no account can give its own image the alias `amazon` (the Snapshot data type says its
    OwnerAlias comes "from an Amazon-maintained list"; the Image data type does not say), and that the Bottlerocket
    AMIs behind /aws/service/bottlerocket/... carry `ImageOwnerAlias` `amazon` (not checked against a live
    DescribeImages answer; inferred from Terraform configurations that find them with `owners = ["amazon"]`).
    """
    client_error, _ = _botocore_errors()
    rule = "the builder must launch from an AMI owned by Amazon (DescribeImages ImageOwnerAlias 'amazon')"
    try:
        found = ec2.describe_images(ImageIds=[ami_id])["Images"]
    except client_error as err:
        code = _error_code(err) or "an error"
        raise fail(E703, "images snapshot: builder AMI", ami_id, f"{rule}; DescribeImages answered {code}") from None
    image = next((i for i in found if i.get("ImageId") == ami_id), None)
    if image is None:
        raise fail(E703, "images snapshot: builder AMI", ami_id, f"{rule}; DescribeImages does not return it")
    alias = image.get("ImageOwnerAlias")
    if alias != "amazon":
        owner = f"OwnerId {image.get('OwnerId', 'unknown')}" + (f", ImageOwnerAlias {alias!r}" if alias else "")
        raise fail(E703, "images snapshot: builder AMI", ami_id, f"{rule}; DescribeImages says {owner}")


def require_reusable(ec2: Any, snapshot_id: str, account_id: str) -> None:
    """Refuse, in one line, to reuse a recorded snapshot unless DescribeSnapshots says it is `completed`,
    `Encrypted` and owned (`OwnerId`) by `account_id`, the caller's account (STS GetCallerIdentity). The line names
    each of the three that failed. A snapshot another account shares with us, or a public one, has that account's
    OwnerId: its contents are theirs to change, so it is never reused in place of our own build."""
    client_error, _ = _botocore_errors()
    try:
        found = ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"]
    except client_error as err:
        if _error_code(err) != "InvalidSnapshot.NotFound":
            raise
        found = []
    snapshot = next((s for s in found if s.get("SnapshotId") == snapshot_id), None)
    if snapshot is None:
        problems = ["not found (DescribeSnapshots: InvalidSnapshot.NotFound)"]
    else:
        problems = []
        if snapshot.get("State") != "completed":
            problems.append(f"in state {snapshot.get('State')!r}")
        if snapshot.get("Encrypted") is not True:
            problems.append("not encrypted")
        if snapshot.get("OwnerId") != account_id:
            problems.append(f"owned by account {snapshot.get('OwnerId')}")
    if problems:
        raise fail(
            E703,
            f"{SNAPSHOT_FILE} snapshot_id",
            snapshot_id,
            "a recorded snapshot is reused only when it is completed, encrypted and owned by this account "
            f"({account_id}), and it is {' and '.join(problems)}; run again with --rebuild to build a new one",
        )


def _botocore_errors() -> tuple[type[Exception], type[Exception]]:
    """botocore's ClientError (the service said no) and BotoCoreError (no answer, no credentials), imported when an
    AWS call is made: reading the record (synth does) must not need boto3."""
    from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

    return ClientError, BotoCoreError


def _error_code(err: Exception) -> str:
    """The AWS error code of a ClientError (`InvalidSnapshot.NotFound`); "" when there is none."""
    response = getattr(err, "response", None)
    error = response.get("Error") if isinstance(response, dict) else None
    return str(error.get("Code", "")) if isinstance(error, dict) else ""


def record_matches(record: SnapshotRecord, images: Sequence[str], region: str) -> bool:
    """Whether `record` is a snapshot of this image list (order-free), in `region`, built from the pinned
    Bottlerocket release and Kubernetes version: the one a build would make now."""
    return (
        record.region == region
        and record.bottlerocket == BOTTLEROCKET_AMI_VERSION
        and record.kubernetes == KUBERNETES_VERSION
        and record.images_sha256 == images_digest(images)
    )


def build_snapshot(
    images: Sequence[str],
    *,
    ec2: Any,
    ssm: Any,
    ami_id: str,
    subnet_id: str,
    instance_profile: str,
    environment: str,
    security_group_ids: Sequence[str] = (),
    kms_key_id: str | None = None,
    instance_type: str = "m7i.large",
    volume_gib: int = 200,
    max_build_minutes: int = MAX_BUILD_MINUTES,
    tags: dict[str, str] | None = None,
    sleep: Callable[[float], None] | None = None,
    now: Callable[[], datetime] | None = None,
    log: Callable[[str], None] = print,
) -> str:
    """Check the AMI is Amazon's, launch a builder, pull `images` into its data volume, snapshot it; return the
    snapshot id. The builder and its volumes are tagged `llm-eks:environment` (`environment`) and
    `llm-eks:expires-at` (launch time + `max_build_minutes`, UTC); the SSM polls give up at that time (boto3's
    waiters for running, stopped and the snapshot keep their own limits), and the builder is terminated whatever
    happens. `sleep`: between polls (default time.sleep); `now`: the clock (default UTC now)."""
    sleep = sleep or time.sleep
    clock = now or (lambda: datetime.now(UTC))
    low, high = MAX_BUILD_MINUTES_RANGE
    if not low <= max_build_minutes <= high:
        raise fail(E601, "--max-build-minutes", max_build_minutes, f"must be {low} to {high}")
    require_amazon_image(ec2, ami_id)
    data_ebs: dict[str, Any] = {
        "VolumeSize": volume_gib,
        "VolumeType": "gp3",
        "Iops": 4000,
        "Throughput": 1000,
        "Encrypted": True,
        "DeleteOnTermination": True,
    }
    if kms_key_id is not None:
        data_ebs["KmsKeyId"] = kms_key_id
    deadline = clock() + timedelta(minutes=max_build_minutes)
    # Read just before the launch call: the tag is never later than the instance's LaunchTime + the limit.
    own_tags = {
        **(tags or {}),
        PURPOSE_TAG: BUILDER_PURPOSE,
        ENVIRONMENT_TAG: environment,
        EXPIRES_TAG: utc_stamp(deadline),
    }
    network: dict[str, Any] = {"DeviceIndex": 0, "SubnetId": subnet_id, "AssociatePublicIpAddress": False}
    if security_group_ids:
        network["Groups"] = list(security_group_ids)
    reservation = ec2.run_instances(
        ImageId=ami_id,
        InstanceType=instance_type,
        MinCount=1,
        MaxCount=1,
        IamInstanceProfile={"Name": instance_profile},
        # The admin host container runs `sheltie`, through which SSM commands reach containerd.
        UserData="[settings.host-containers.admin]\nenabled = true\n",
        NetworkInterfaces=[network],
        MetadataOptions={"HttpTokens": "required", "HttpPutResponseHopLimit": 1},
        BlockDeviceMappings=[
            {
                "DeviceName": "/dev/xvda",
                "Ebs": {"VolumeSize": _OS_VOLUME_GIB, "VolumeType": "gp3", "Encrypted": True},
            },
            {"DeviceName": _DATA_DEVICE, "Ebs": data_ebs},
        ],
        TagSpecifications=[
            {"ResourceType": kind, "Tags": [{"Key": k, "Value": v} for k, v in own_tags.items()]}
            for kind in ("instance", "volume")
        ],
    )
    instance_id = reservation["Instances"][0]["InstanceId"]
    log(f"builder {instance_id} launched")
    waits = _Waits(sleep, clock, deadline, max_build_minutes)
    try:
        ec2.get_waiter("instance_running").wait(InstanceIds=[instance_id])
        waits.until(lambda: _ssm_online(ssm, instance_id), "SSM to reach the builder")
        _run(ssm, instance_id, "apiclient exec admin sheltie systemctl stop kubelet", waits)
        _run(ssm, instance_id, f"{_CTR} images rm $({_CTR} images ls -q) || true", waits)
        for image in images:
            log(f"pulling {image}")
            _run(
                ssm,
                instance_id,
                f"{_CTR} images pull --label io.cri-containerd.image=managed --platform amd64 {image}",
                waits,
            )
        ec2.stop_instances(InstanceIds=[instance_id])
        ec2.get_waiter("instance_stopped").wait(InstanceIds=[instance_id])
        volume_id = _data_volume(ec2, instance_id)
        snapshot = ec2.create_snapshot(
            VolumeId=volume_id,
            Description=f"llm-eks Bottlerocket data volume with {len(images)} image(s)",
            TagSpecifications=[
                {
                    "ResourceType": "snapshot",
                    "Tags": [
                        {"Key": "llm-eks:images-sha256", "Value": images_digest(images)},
                        {"Key": ENVIRONMENT_TAG, "Value": environment},
                        *({"Key": k, "Value": v} for k, v in (tags or {}).items() if k != ENVIRONMENT_TAG),
                    ],
                }
            ],
        )
        snapshot_id: str = snapshot["SnapshotId"]
        ec2.get_waiter("snapshot_completed").wait(SnapshotIds=[snapshot_id])
        log(f"snapshot {snapshot_id} completed")
        return snapshot_id
    finally:
        ec2.terminate_instances(InstanceIds=[instance_id])
        log(f"builder {instance_id} terminated")


def _ssm_online(ssm: Any, instance_id: str) -> bool:
    found = ssm.describe_instance_information(Filters=[{"Key": "InstanceIds", "Values": [instance_id]}])
    return any(i.get("PingStatus") == "Online" for i in found.get("InstanceInformationList", []))


def _run(ssm: Any, instance_id: str, command: str, waits: _Waits) -> None:
    """One shell command on the builder through SSM Run Command; a failure raises with its output."""
    sent = ssm.send_command(
        InstanceIds=[instance_id], DocumentName="AWS-RunShellScript", Parameters={"commands": [command]}
    )
    command_id = sent["Command"]["CommandId"]

    def done() -> bool:
        result = ssm.get_command_invocation(CommandId=command_id, InstanceId=instance_id)
        status = result["Status"]
        if status in ("Failed", "Cancelled", "TimedOut"):
            output = (result.get("StandardErrorContent") or result.get("StandardOutputContent") or "").strip()
            raise ConfigError(
                E703, f"images snapshot: {command.split()[-1]!r} failed on the builder ({status}): {output}"
            )
        return bool(status == "Success")

    waits.until(done, f"`{command[:60]}` on the builder")


@dataclass(frozen=True)
class _Waits:
    """Polling: every 5 s, for at most an hour per step, and never past the build's deadline (its
    `llm-eks:expires-at`, after which cleanup may terminate the builder anyway)."""

    sleep: Callable[[float], None]
    clock: Callable[[], datetime]
    deadline: datetime
    max_build_minutes: int

    def until(self, ready: Callable[[], bool], what: str) -> None:
        waited = 0.0
        while not ready():
            if self.clock() >= self.deadline:
                raise ConfigError(
                    E703,
                    f"images snapshot: gave up waiting for {what}: the build passed --max-build-minutes "
                    f"{self.max_build_minutes} ({EXPIRES_TAG} {utc_stamp(self.deadline)})",
                )
            if waited >= _STEP_TIMEOUT_S:
                raise ConfigError(E703, f"images snapshot: gave up waiting {_STEP_TIMEOUT_S} s for {what}")
            self.sleep(5)
            waited += 5


def _data_volume(ec2: Any, instance_id: str) -> str:
    instance = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    for mapping in instance["BlockDeviceMappings"]:
        if mapping["DeviceName"] == _DATA_DEVICE:
            volume: str = mapping["Ebs"]["VolumeId"]
            return volume
    raise ConfigError(E703, f"images snapshot: the builder {instance_id} has no {_DATA_DEVICE}")


@dataclass(frozen=True)
class Swept:
    """What cleanup did with one builder: the line to print, and whether its terminate call failed."""

    instance_id: str
    line: str
    failed: bool = False


def cleanup_builders(ec2: Any, *, environment: str | None = None, now: datetime | None = None) -> list[Swept]:
    """Terminate the image-snapshot builders that outlived their build: every instance tagged
    `llm-eks:purpose=image-snapshot-builder` (and `llm-eks:environment=<environment>` when given) in state pending,
    running, stopping or stopped whose `llm-eks:expires-at` is not after `now` (default: UTC now), or is missing or
    not an ISO-8601 time with its UTC offset (a builder we cannot date is one we cannot keep). Builders still within
    their time are kept and listed. One terminate call per instance, so one refusal does not keep the others alive."""
    aws_errors = _botocore_errors()
    moment = now or datetime.now(UTC)
    filters = [
        {"Name": f"tag:{PURPOSE_TAG}", "Values": [BUILDER_PURPOSE]},
        {"Name": "instance-state-name", "Values": list(CLEANUP_STATES)},
    ]
    if environment is not None:
        filters.append({"Name": f"tag:{ENVIRONMENT_TAG}", "Values": [environment]})
    swept: list[Swept] = []
    for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
        for reservation in page["Reservations"]:
            for instance in reservation["Instances"]:
                instance_id = instance["InstanceId"]
                tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
                where = f"environment {tags.get(ENVIRONMENT_TAG, '(none)')}, {instance['State']['Name']}"
                expires, why = _expiry(tags.get(EXPIRES_TAG))
                if expires is not None and expires > moment:
                    swept.append(Swept(instance_id, f"{instance_id}: kept ({where}, expires {utc_stamp(expires)})"))
                    continue
                try:
                    ec2.terminate_instances(InstanceIds=[instance_id])
                except aws_errors as err:
                    line = f"{instance_id}: not terminated ({where}, {why}): {' '.join(str(err).split())}"
                    swept.append(Swept(instance_id, line, failed=True))
                    continue
                swept.append(Swept(instance_id, f"{instance_id}: terminated ({where}, {why})"))
    return swept


def _expiry(value: str | None) -> tuple[datetime | None, str]:
    """The `llm-eks:expires-at` time (None when there is none to trust) and how to say why it is due."""
    if value is None:
        return None, f"no {EXPIRES_TAG} tag"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None or moment.utcoffset() is None:  # no offset: whose clock? not one to keep a builder by
        return None, f"{EXPIRES_TAG} {value!r} is not a UTC ISO-8601 time"
    return moment, f"expired {utc_stamp(moment)}"


def read_record(path: Path) -> SnapshotRecord | None:
    """The recorded snapshot, or None when there is no record; a malformed one is a one-line error."""
    if not path.is_file():
        return None
    try:
        body = json.loads(path.read_text())
        body.pop("images_sha256", None)  # derived, written for reviewers
        return SnapshotRecord(**{**body, "images": tuple(body["images"])})
    except (ValueError, TypeError, KeyError) as err:
        raise ConfigError(
            E703, f"{path.name}: not a snapshot record written by `llm-eks images snapshot` ({err})"
        ) from None


def write_record(path: Path, record: SnapshotRecord) -> None:
    body = {**asdict(record), "images": list(record.images), "images_sha256": record.images_sha256}
    path.write_text(json.dumps(body, indent=2) + "\n")
