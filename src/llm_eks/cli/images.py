"""`llm-eks images lock` and `llm-eks images snapshot`: the environments' images pinned to digests, or held on a
Bottlerocket data-volume snapshot.

    llm-eks images lock [--env NAME] [--context-file cdk.json] [--file images.lock.json]
    llm-eks images snapshot --env prod --region us-east-1 --subnet-id subnet-0abc... --instance-profile NAME \
        [--security-group-id sg-...] [--kms-key-id ARN] [--instance-type m7i.large] [--volume-gib 200] \
        [--max-build-minutes 120] [--rebuild]
    llm-eks images snapshot --cleanup --region us-east-1 [--env prod]

`lock` resolves images through each registry's OCI Distribution API (llm_eks.images.registry), anonymously. What
resolved is merged into the lock (entries of images not asked about are kept, so `--env prod` does not forget
dev's); what did not is reported one line per registry that could not be reached, or per image the registry
refused, on stderr, and the exit code is 1. Nothing unverified is ever written, and a run where nothing resolved
leaves the file untouched. `snapshot` builds with llm_eks.images.snapshot and records the result beside the context
file, or reuses the snapshot recorded there once EC2 confirms it is completed, encrypted and this account's;
`snapshot --cleanup` terminates builders a killed run left past their `llm-eks:expires-at`. No aws_cdk, cdk8s or
jsii on any path.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_eks import aws_ids
from llm_eks.catalog.ec2_instance_types import check_instance_type
from llm_eks.cli.parsing import UsageError
from llm_eks.error_codes import E600, E601, E604, E702
from llm_eks.errors import ConfigError, fail
from llm_eks.images.lock import LOCK_FILE, LockEntry, load_lock, write_lock
from llm_eks.images.reference import parse_ref
from llm_eks.images.snapshot import EXPIRES_TAG, MAX_BUILD_MINUTES, MAX_BUILD_MINUTES_RANGE, SNAPSHOT_FILE
from llm_eks.versions import BOTTLEROCKET_AMI_VERSION, KUBERNETES_VERSION

if TYPE_CHECKING:
    # The registry client pulls in urllib, http.client and ssl: imported when the command runs, so `llm-eks plan`
    # (which registers this command's parser) does not pay for them.
    from llm_eks.images.registry import Transport


def add_parser(commands: Any) -> Any:
    """Register `images` with its `lock` action on the CLI's subcommands; return the actions (`images snapshot`
    registers beside it)."""
    images = commands.add_parser(
        "images", help="lock the environments' images to digests, or snapshot them onto a Bottlerocket data volume"
    )
    actions = images.add_subparsers(dest="images_command", metavar="ACTION", required=True)
    lock = actions.add_parser(
        "lock",
        help="resolve every image to its digest through the registries and write the lock file",
        description="Resolve each image the environments run (the workload's and the Helm releases') to the "
        "digest its registry serves now, and merge it into the lock file for review.",
    )
    lock.add_argument("--env", metavar="NAME", help="only this environment's images (default: every environment)")
    lock.add_argument("--context-file", default="cdk.json", metavar="PATH", help="CDK context file (default: cdk.json)")
    lock.add_argument(
        "--file", metavar="PATH", help=f"lock file (default: {LOCK_FILE} next to the context file)", default=None
    )
    lock.set_defaults(func=lock_command)
    return actions


def lock_command(
    args: argparse.Namespace,
    transport: Transport | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Resolve, report and merge into the lock (`transport`: the HTTP client, the real one unless a test gives one)."""
    from llm_eks.config.plans import plan_workloads
    from llm_eks.images.registry import RegistryError, RegistryUnreachable, resolve, urllib_transport
    from llm_eks.infra.images import environment_images

    transport = transport or urllib_transport

    path = Path(args.file) if args.file else Path(args.context_file).parent / LOCK_FILE
    lock = load_lock(path)  # a malformed lock stops here, before any request
    configs = environments_of(args)
    wanted = list(dict.fromkeys(ref for c in configs for ref in environment_images(c, plan_workloads(c))))

    resolved: dict[str, LockEntry] = {}
    unreachable: dict[str, tuple[str, list[str]]] = {}  # host -> (reason, images)
    failures: list[str] = []
    for ref in wanted:
        host = parse_ref(ref).api_host
        if host in unreachable:
            unreachable[host][1].append(ref)
            continue
        try:
            found = resolve(ref, transport)
        except RegistryUnreachable as err:
            unreachable[host] = (err.message, [ref])
            continue
        except RegistryError as err:
            failures.append(f"{ref}: {err}")
            continue
        stamp = now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        resolved[ref] = LockEntry(found.digest, stamp, found.source)
        before = lock.digest(ref)
        # A tag that now points elsewhere was re-pushed: exactly what a reviewer must see.
        print(f"{ref}@{found.digest}" + (f" (was {before})" if before not in (None, found.digest) else ""))

    for reason, refs in unreachable.values():
        failures.append(f"{reason}: {len(refs)} image(s) not locked ({', '.join(refs)}) [{E702.id}]")
    changed = {ref: entry for ref, entry in resolved.items() if lock.digest(ref) != entry.digest}
    if resolved and (changed or not path.exists()):
        # Unchanged entries keep their resolved_at: a re-run only shows what moved.
        write_lock(lock.merged(changed), path)
        print(f"wrote {path}: {len(resolved)} of {len(wanted)} image(s) resolved, {len(changed)} changed")
    elif resolved:
        print(f"{path} unchanged: {len(resolved)} of {len(wanted)} image(s) resolved to the digests it holds")
    for line in failures:
        print(f"llm-eks: error: {' '.join(line.split())}", file=sys.stderr)
    return 1 if failures else 0


def environments_of(args: argparse.Namespace) -> list[Any]:
    """The environments of --context-file (all, or --env), validated and read as strictly as `llm-eks plan --env`
    reads them (a key written twice, or 1e400, is a one-line error)."""
    from llm_eks.config import load_environments, select_environments
    from llm_eks.hub.records import MODELS_DIR
    from llm_eks.strict_json import read_context_file

    context = read_context_file(Path(args.context_file), "--context-file")
    # A workload may name a model recorded in the models folder beside cdk.json, as synth reads it.
    return select_environments(load_environments(context, Path(args.context_file).parent / MODELS_DIR), args.env)


def add_snapshot_parser(actions: Any) -> None:
    """Register `images snapshot` under the CLI's `images` command."""
    p = actions.add_parser(
        "snapshot",
        help="build the Bottlerocket data-volume snapshot holding an environment's GPU-node images",
        description="Launch a Bottlerocket builder, pull the environment's GPU-node images, snapshot its data "
        f"volume, terminate it, and record the snapshot in {SNAPSHOT_FILE} beside the context file. A snapshot the "
        "record already holds for the same images, region and Bottlerocket release is reused when it is completed, "
        "encrypted and this account's. With --cleanup: terminate builders past their llm-eks:expires-at instead.",
    )
    p.add_argument(
        "--env", metavar="NAME", help="the environment whose images to hold (with --cleanup: only its builders)"
    )
    p.add_argument("--context-file", default="cdk.json", metavar="PATH", help="CDK context file (default: cdk.json)")
    p.add_argument("--region", required=True, help="the region the GPU nodes run in (a snapshot is regional)")
    p.add_argument("--subnet-id", help="a private subnet with a route to the registries (needed to build)")
    p.add_argument(
        "--instance-profile", help="instance profile NAME with AmazonSSMManagedInstanceCore (needed to build)"
    )
    p.add_argument("--security-group-id", action="append", default=None, help="(repeatable) default: the VPC's default")
    p.add_argument("--kms-key-id", help="KMS key for the data volume (default: the account's EBS default key)")
    p.add_argument("--instance-type", help="builder instance type (default: m7i.large)")
    p.add_argument("--volume-gib", type=int, help="data volume size (default: 200, the node classes' default)")
    low, high = MAX_BUILD_MINUTES_RANGE
    p.add_argument(
        "--max-build-minutes",
        type=int,
        metavar="N",
        help=f"the builder's time limit, tagged on it as {EXPIRES_TAG} ({low} to {high}; default: {MAX_BUILD_MINUTES})",
    )
    p.add_argument(
        "--rebuild",
        action="store_true",
        help=f"build a new snapshot even when {SNAPSHOT_FILE} records one for the same images",
    )
    p.add_argument(
        "--cleanup",
        action="store_true",
        help=f"terminate the builders in --region (of --env, if given) past their {EXPIRES_TAG}, and build nothing",
    )
    p.set_defaults(func=snapshot_command)


# Options that only a build uses: --cleanup refuses them rather than leave the reader guessing what they scope.
_BUILD_ONLY = (
    "subnet_id",
    "instance_profile",
    "security_group_id",
    "kms_key_id",
    "instance_type",
    "volume_gib",
    "max_build_minutes",
    "rebuild",
)


def _option(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def snapshot_command(
    args: argparse.Namespace, *, session: Any = None, now: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> int:
    """Clean up, reuse, or build then record. `session`: a boto3 Session (tests pass one bound to moto); `now`: the
    clock the builder's expiry is taken from."""
    if not aws_ids.REGION.match(args.region):
        raise fail(E601, "--region", args.region, "must be an AWS region such as us-east-1")
    if args.cleanup:
        given = [_option(dest) for dest in _BUILD_ONLY if getattr(args, dest, None) not in (None, False)]
        if given:
            raise UsageError(E600, f"--cleanup builds nothing: leave out {', '.join(given)}")
        return _cleanup(args, _session(args, session), now)
    missing = [_option(dest) for dest in ("env", "subnet_id", "instance_profile") if getattr(args, dest) is None]
    if missing:
        raise UsageError(
            E600,
            f"the following arguments are required to build a snapshot: {', '.join(missing)} "
            "(--cleanup needs only --region)",
        )
    return _build(args, _session(args, session), now)


def _session(args: argparse.Namespace, session: Any) -> Any:
    if session is not None:
        return session
    try:
        import boto3
    except ImportError:
        raise ConfigError(E604, "images snapshot: needs boto3 (llm-eks's aws extra); pip install boto3") from None
    return boto3.Session(region_name=args.region)


def _cleanup(args: argparse.Namespace, session: Any, now: Callable[[], datetime]) -> int:
    from llm_eks.images.snapshot import cleanup_builders

    swept = cleanup_builders(session.client("ec2"), environment=args.env, now=now())
    if not swept:
        scope = f" of environment {args.env}" if args.env else ""
        print(f"no image-snapshot builders{scope} in {args.region}")
    for one in swept:
        if one.failed:
            print(f"llm-eks: error: {one.line}", file=sys.stderr)
        else:
            print(one.line)
    return 1 if any(one.failed for one in swept) else 0


def _build(args: argparse.Namespace, session: Any, now: Callable[[], datetime]) -> int:
    from llm_eks.config.plans import plan_workloads
    from llm_eks.images.snapshot import (
        SnapshotRecord,
        ami_parameter,
        build_snapshot,
        read_record,
        record_matches,
        require_reusable,
        write_record,
    )
    from llm_eks.infra.images import gpu_node_images

    if not aws_ids.SUBNET_ID.match(args.subnet_id):
        raise fail(E601, "--subnet-id", args.subnet_id, "must be a subnet id such as subnet-0abc12345def67890")
    security_groups = tuple(args.security_group_id or ())
    for sg in security_groups:
        if not aws_ids.SECURITY_GROUP_ID.match(sg):
            raise fail(E601, "--security-group-id", sg, "must be a security group id such as sg-0123456789abcdef0")
    instance_type = args.instance_type or "m7i.large"
    check_instance_type("--instance-type", instance_type)
    volume_gib = 200 if args.volume_gib is None else args.volume_gib
    if not 20 <= volume_gib <= 16384:
        raise fail(E601, "--volume-gib", volume_gib, "must be 20 to 16384")
    minutes = MAX_BUILD_MINUTES if args.max_build_minutes is None else args.max_build_minutes
    low, high = MAX_BUILD_MINUTES_RANGE
    if not low <= minutes <= high:
        raise fail(E601, "--max-build-minutes", minutes, f"must be {low} to {high}")
    context_file = Path(args.context_file)
    (config,) = environments_of(args)
    plans = plan_workloads(config)
    lock = load_lock(context_file.parent / LOCK_FILE)
    images = gpu_node_images(config, plans, lock)
    record_path = context_file.parent / SNAPSHOT_FILE
    recorded = read_record(record_path)  # a malformed record stops here, before any AWS call
    ec2 = session.client("ec2")
    if recorded is not None and not args.rebuild and record_matches(recorded, images, args.region):
        account = session.client("sts").get_caller_identity()["Account"]
        require_reusable(ec2, recorded.snapshot_id, account)
        print(
            f"{recorded.snapshot_id}: reused from {SNAPSHOT_FILE} (same {len(images)} image(s), region and "
            f"Bottlerocket {BOTTLEROCKET_AMI_VERSION}; completed, encrypted, owned by {account}); --rebuild builds "
            "a new one"
        )
        print(_set_line(recorded.snapshot_id, config.name))
        return 0
    ssm = session.client("ssm")
    ami_id = ssm.get_parameter(Name=ami_parameter())["Parameter"]["Value"]
    snapshot_id = build_snapshot(
        images,
        ec2=ec2,
        ssm=ssm,
        ami_id=ami_id,
        subnet_id=args.subnet_id,
        instance_profile=args.instance_profile,
        environment=config.name,
        security_group_ids=security_groups,
        kms_key_id=args.kms_key_id,
        instance_type=instance_type,
        volume_gib=volume_gib,
        max_build_minutes=minutes,
        now=now,
    )
    record = SnapshotRecord(
        snapshot_id=snapshot_id,
        region=args.region,
        bottlerocket=BOTTLEROCKET_AMI_VERSION,
        kubernetes=KUBERNETES_VERSION,
        images=images,
        created=now().astimezone(UTC).isoformat(timespec="seconds"),
    )
    write_record(record_path, record)
    print(_set_line(snapshot_id, config.name))
    return 0


def _set_line(snapshot_id: str, env: str) -> str:
    return f'{snapshot_id}: set "image_snapshot_id": "{snapshot_id}" in environments.{env}\'s workload(s)'
