"""`llm-eks models add`: record a Hugging Face model's config and exact checkpoint size into the app, for review.

    llm-eks models add Qwen/Qwen3-8B [--revision REV] [--dir models]

Writes models/<org>/<name>.json (format: llm_eks.hub.records), which `cdk synth` and `llm-eks plan` read
offline when a workload names that id. Gated models need HF_TOKEN (a read token of an account that accepted the
licence); HF_ENDPOINT points at a mirror. A refusal or an unreachable Hub is one line on stderr and exit code 1;
bad arguments exit 2. No aws_cdk, cdk8s or jsii on this path.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_eks.error_codes import E504, E601
from llm_eks.errors import ConfigError, fail
from llm_eks.hub.records import MODELS_DIR, load_record, model_file, model_spec, write_record

if TYPE_CHECKING:
    # The Hub client pulls in urllib, http.client and ssl: imported when the command runs, so `llm-eks plan`
    # (which registers this command's parser) does not pay for them.
    from llm_eks.hub.client import Transport


def add_parser(commands: Any) -> None:
    """Register `models add` on the CLI's subcommands."""
    models = commands.add_parser("models", help="record Hugging Face models into the app for offline sizing")
    actions = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    add = actions.add_parser(
        "add",
        help="fetch a model's config.json and exact weight size from the Hub into models/<org>/<name>.json",
        description="Read the model's config.json, its safetensors index (exact weight bytes) and any separate "
        "quantization config from the Hugging Face Hub, pinned to the commit the revision points at, and write "
        "them to one reviewable file that synth and `llm-eks plan` read offline. HF_TOKEN: token for gated models; "
        "HF_ENDPOINT: another Hub (a mirror).",
    )
    add.add_argument("model", metavar="HUB_ID", help="Hugging Face model id, org/name")
    add.add_argument("--revision", default="main", help="branch, tag or commit (default: main)")
    add.add_argument(
        "--dir", default=MODELS_DIR, metavar="DIR", help=f"models folder of the app (default: {MODELS_DIR})"
    )
    add.set_defaults(func=add_command)


def add_command(
    args: argparse.Namespace,
    transport: Transport | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Fetch, write, and say what was written (`transport`: the HTTP client, the real one unless a test gives one)."""
    from llm_eks.hub.client import HubError, fetch_record, urllib_transport
    from llm_eks.validation import is_hf_repo_id

    if not is_hf_repo_id(args.model):
        raise fail(
            E601,
            "models add",
            args.model,
            "must be a Hugging Face model id: org/name of letters, digits, '-', '_' and '.', at most 96 characters",
        )
    if not args.revision or any(c.isspace() for c in args.revision):
        raise fail(E601, "--revision", args.revision, "must be a branch, tag or commit")
    path = model_file(Path(args.dir), args.model)
    before = _previous_commit(path, args.model)
    try:
        record = fetch_record(
            args.model,
            args.revision,
            now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            transport=transport or urllib_transport,
            token=os.environ.get("HF_TOKEN"),
        )
    except HubError as err:
        print(f"llm-eks: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    try:
        write_record(record, path)
    except OSError as err:
        raise fail(E504, "--dir", args.dir, f"{path} cannot be written ({err.__class__.__name__})") from None
    was = f" (was {before})" if before not in (None, record.commit) else ""
    print(f"wrote {path}: {record.id}@{record.commit}{was}, {record.total_size / 1e9:.2f} GB of weights")
    try:
        spec = model_spec(record, str(path))
        print(f"planner reads it as {spec.parameters / 1e9:.2f}B parameters, {spec.layers} layers")
    except ConfigError as err:
        # Recorded anyway: the file is the checkpoint's data, and a newer planner may describe it.
        print(f"note: the planner cannot size it yet: {' '.join(str(err).split())}")
    return 0


def _previous_commit(path: Path, model_id: str) -> str | None:
    """The commit the file held before this run (shown when it changes); a broken old file is simply replaced."""
    if not path.is_file():
        return None
    try:
        return load_record(path, model_id).commit
    except ConfigError:
        return None
