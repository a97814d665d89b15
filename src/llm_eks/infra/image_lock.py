"""`llm-eks images lock`: resolve every image the environments run to its digest and write images.lock.json.

    llm-eks images lock [--env NAME] [--context-file cdk.json] [--file images.lock.json]

Images are resolved through each registry's OCI Distribution API (llm_eks.images.registry), anonymously. What
resolved is merged into the lock (entries of images not asked about are kept, so `--env prod` does not forget
dev's); what did not is reported one line per registry that could not be reached, or per image the registry
refused, on stderr, and the exit code is 1. Nothing unverified is ever written, and a run where nothing resolved
leaves the file untouched. No aws_cdk, cdk8s or jsii on this path.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_eks.images.lock import LOCK_FILE, LockEntry, load_lock, write_lock
from llm_eks.images.reference import parse_ref

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
    from llm_eks.images.registry import RegistryError, RegistryUnreachable, resolve, urllib_transport
    from llm_eks.infra.environment_plans import plan_workloads
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
            unreachable[host] = (str(err), [ref])
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
        failures.append(f"{reason}: {len(refs)} image(s) not locked ({', '.join(refs)})")
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
    from llm_eks.infra.config import load_environments, select_environments
    from llm_eks.infra.context_file import read_context_file
    from llm_eks.infra.model_files import MODELS_DIR

    context = read_context_file(Path(args.context_file), "--context-file")
    # A workload may name a model recorded in the models folder beside cdk.json, as synth reads it.
    return select_environments(load_environments(context, Path(args.context_file).parent / MODELS_DIR), args.env)
