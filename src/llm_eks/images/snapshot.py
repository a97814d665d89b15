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

The record (image-snapshot.json: snapshot id, region, Bottlerocket release, images) lets synth refuse a snapshot
that holds another image list than the environment runs (llm_eks.infra.images.require_snapshot_images), offline.
The EC2 and SSM clients are passed in: boto3 is the `aws` extra (`pip install 'llm-eks[aws]'`), and only the
command that builds a snapshot needs it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from llm_eks.errors import ConfigError
from llm_eks.versions import BOTTLEROCKET_AMI_VERSION, KUBERNETES_VERSION

SNAPSHOT_FILE = "image-snapshot.json"
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


def build_snapshot(
    images: Sequence[str],
    *,
    ec2: Any,
    ssm: Any,
    ami_id: str,
    subnet_id: str,
    instance_profile: str,
    security_group_ids: Sequence[str] = (),
    kms_key_id: str | None = None,
    instance_type: str = "m7i.large",
    volume_gib: int = 200,
    tags: dict[str, str] | None = None,
    sleep: Callable[[float], None] | None = None,
    log: Callable[[str], None] = print,
) -> str:
    """Launch a builder, pull `images` into its data volume, snapshot it; return the snapshot id. The builder is
    terminated whatever happens. `sleep`: between polls (default time.sleep)."""
    sleep = sleep or time.sleep
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
    own_tags = {"llm-eks:purpose": "image-snapshot-builder", **(tags or {})}
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
    try:
        ec2.get_waiter("instance_running").wait(InstanceIds=[instance_id])
        _wait(lambda: _ssm_online(ssm, instance_id), "SSM to reach the builder", sleep)
        _run(ssm, instance_id, "apiclient exec admin sheltie systemctl stop kubelet", sleep)
        _run(ssm, instance_id, f"{_CTR} images rm $({_CTR} images ls -q) || true", sleep)
        for image in images:
            log(f"pulling {image}")
            _run(
                ssm,
                instance_id,
                f"{_CTR} images pull --label io.cri-containerd.image=managed --platform amd64 {image}",
                sleep,
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
                        *({"Key": k, "Value": v} for k, v in (tags or {}).items()),
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


def _run(ssm: Any, instance_id: str, command: str, sleep: Callable[[float], None]) -> None:
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
            raise ConfigError(f"images snapshot: {command.split()[-1]!r} failed on the builder ({status}): {output}")
        return bool(status == "Success")

    _wait(done, f"`{command[:60]}` on the builder", sleep)


def _wait(ready: Callable[[], bool], what: str, sleep: Callable[[float], None]) -> None:
    waited = 0.0
    while not ready():
        if waited >= _STEP_TIMEOUT_S:
            raise ConfigError(f"images snapshot: gave up waiting {_STEP_TIMEOUT_S} s for {what}")
        sleep(5)
        waited += 5


def _data_volume(ec2: Any, instance_id: str) -> str:
    instance = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    for mapping in instance["BlockDeviceMappings"]:
        if mapping["DeviceName"] == _DATA_DEVICE:
            volume: str = mapping["Ebs"]["VolumeId"]
            return volume
    raise ConfigError(f"images snapshot: the builder {instance_id} has no {_DATA_DEVICE}")


def read_record(path: Path) -> SnapshotRecord | None:
    """The recorded snapshot, or None when there is no record; a malformed one is a one-line error."""
    if not path.is_file():
        return None
    try:
        body = json.loads(path.read_text())
        body.pop("images_sha256", None)  # derived, written for reviewers
        return SnapshotRecord(**{**body, "images": tuple(body["images"])})
    except (ValueError, TypeError, KeyError) as err:
        raise ConfigError(f"{path.name}: not a snapshot record written by `llm-eks images snapshot` ({err})") from None


def write_record(path: Path, record: SnapshotRecord) -> None:
    body = {**asdict(record), "images": list(record.images), "images_sha256": record.images_sha256}
    path.write_text(json.dumps(body, indent=2) + "\n")
