"""Stage one Hugging Face checkpoint into s3://<bucket>/<prefix> for vLLM's Run:ai streamer.

This file is the weights staging Job's program: llm-eks puts it verbatim in the Job's ConfigMap and the vLLM image
runs it (`python3 stage.py ...`). It uses the standard library, huggingface_hub and boto3 only, and imports the last
two when it runs, so llm_eks can import it (the tests do) without either.

What it does:
1. resolves the revision to one commit and lists that commit's files with their sizes and hashes
   (HfApi.model_info(files_metadata=True)), keeping those the allow patterns match and the ignore patterns do not;
2. fails before changing anything when the prefix holds files that an earlier staging of the same repo to the same
   prefix wrote and this commit lacks: the streamer loads every *.safetensors under the prefix, and this script never
   deletes an object (the stack grants the Job add-only access). A new revision belongs under a new prefix;
3. fails before changing anything when this commit would replace a file another staging key's marker still lists
   (a revision that is a branch or tag name moved): the running version streams those files. Pin a commit (its own
   prefix) or stage to a new prefix;
4. writes its in-progress record `staging-markers/<prefix><key>.in-progress` and rewrites it every minute while it
   runs, so the pods waiting for this key know staging is alive;
5. for each file: leaves the object in place when it already has the file's size and hash (S3 metadata `sha256` for
   LFS files, `git-oid` for the small git-stored ones), else downloads the file into the scratch folder, checks its
   size and hash, uploads it (multipart, with that metadata), and deletes the local copy. Only one file is on disk
   at a time, and a rerun (or the Job's next attempt) starts where the last one stopped;
6. writes this key's marker `staging-markers/<prefix><key>.json` once (If-None-Match: S3 refuses to replace it, and
   the bucket llm-eks creates refuses a write there without the header): {key, repo_id, revision, commit, files:
   [{name, size, sha256}]}. One marker per staging key, never overwritten: a new key (a vLLM bump, an image digest
   locked) stages beside the old one, whose pods keep starting at once, and a rollback needs no Hub. The serving
   pods' init container (wait.py) waits for their key's marker.

Markers live outside the weights prefix: vLLM's S3 loader pulls every non-weight object under the model prefix.
The marker of earlier releases, `<prefix>_llm-eks-staged.json`, is never written or changed; wait.py still accepts
it for the key it records.

Exit status 0 when the prefix is complete; 1 with one line on stderr otherwise.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The marker of earlier releases, inside the prefix (wait.py still reads it; nothing writes it any more).
MARKER = "_llm-eks-staged.json"
# Per staging key, outside the weights prefix: `<MARKERS><prefix><key>.json` and `.in-progress`.
MARKERS = "staging-markers/"
IN_PROGRESS = ".in-progress"
# The in-progress record is rewritten this often while staging runs.
HEARTBEAT_SECONDS = 60.0
# S3 user metadata (x-amz-meta-*) on every object this script writes.
META_SHA256 = "sha256"
META_GIT_OID = "git-oid"
META_COMMIT = "commit"
META_REPO = "repo"
META_PREFIX = "prefix"
MIB = 1024 * 1024
GIB = 1024 * MIB
# Multipart parts: at least 64 MiB, and few enough for S3's 10,000-part limit on any file size (9,000 leaves room).
MIN_PART_BYTES = 64 * MIB
MAX_PARTS = 9000
UPLOAD_THREADS = 8
# Room on the scratch volume besides the one file being staged (huggingface_hub's download metadata and locks).
SCRATCH_HEADROOM_BYTES = 1 * GIB
# What S3 answers for a missing object: HEAD has no body, so only the status code.
NOT_FOUND = ("404", "NoSuchKey", "NotFound")


class StageError(Exception):
    """A failure this script explains in one line."""


@dataclass(frozen=True)
class RepoFile:
    """One file of the resolved commit."""

    name: str
    size: int
    # The LFS object's sha256 (the large files); None for a file stored in git itself.
    lfs_sha256: str | None
    # The git blob id: sha1 of the file as git stores it (for an LFS file, of its pointer file).
    git_oid: str


@dataclass
class Summary:
    """What one run did, by file name."""

    commit: str
    uploaded: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)


def log(message: str) -> None:
    print(f"stage: {message}", flush=True)


def human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.1f} {unit}" if unit != "B" else f"{size} B"
        value /= 1024
    return f"{value:.1f} TiB"


def selected(path: str, allow: Sequence[str], ignore: Sequence[str]) -> bool:
    """huggingface_hub's snapshot_download rule: fnmatch, `*` crosses `/`, a pattern ending in `/` means the folder."""

    def match(pattern: str) -> bool:
        return fnmatch.fnmatchcase(path, pattern + "*" if pattern.endswith("/") else pattern)

    return any(match(p) for p in allow) and not any(match(p) for p in ignore)


def repo_files(siblings: Iterable[Any], allow: Sequence[str], ignore: Sequence[str]) -> list[RepoFile]:
    """The files to stage, from model_info(files_metadata=True).siblings, sorted by name."""
    files = []
    for s in siblings:
        if not selected(s.rfilename, allow, ignore):
            continue
        if s.size is None or s.blob_id is None:
            raise StageError(f"the Hub listed {s.rfilename} without its size or blob id")
        files.append(RepoFile(s.rfilename, int(s.size), s.lfs.sha256 if s.lfs is not None else None, s.blob_id))
    return sorted(files, key=lambda f: f.name)


def part_size(size: int) -> int:
    """A multipart part size (whole MiB) that keeps `size` within MAX_PARTS parts."""
    needed = -(-size // MAX_PARTS)
    return max(MIN_PART_BYTES, -(-needed // MIB) * MIB)


def file_digests(path: Path) -> tuple[str, str]:
    """(sha256, git blob sha1) of a local file, read once."""
    sha256 = hashlib.sha256()
    git = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
    with path.open("rb") as f:
        while chunk := f.read(8 * MIB):
            sha256.update(chunk)
            git.update(chunk)
    return sha256.hexdigest(), git.hexdigest()


def verify(path: Path, f: RepoFile) -> str:
    """The downloaded file's sha256, after checking its size and the hash the Hub listed."""
    size = path.stat().st_size
    if size != f.size:
        raise StageError(f"{f.name}: downloaded {size} bytes, the Hub lists {f.size}")
    sha256, git_oid = file_digests(path)
    if f.lfs_sha256 is not None and sha256 != f.lfs_sha256:
        raise StageError(f"{f.name}: downloaded sha256 {sha256}, the Hub lists {f.lfs_sha256}")
    if f.lfs_sha256 is None and git_oid != f.git_oid:
        raise StageError(f"{f.name}: downloaded git blob id {git_oid}, the Hub lists {f.git_oid}")
    return sha256


def error_code(err: Exception) -> str:
    """The S3 error code of a botocore ClientError (without importing botocore); "" for any other error."""
    response = getattr(err, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def head(s3: Any, bucket: str, key: str) -> dict[str, Any] | None:
    """The object's HEAD response, or None when there is none."""
    try:
        response: dict[str, Any] = s3.head_object(Bucket=bucket, Key=key)
    except Exception as err:
        if error_code(err) in NOT_FOUND:
            return None
        raise
    return response


def staged_sha256(s3: Any, bucket: str, key: str, f: RepoFile) -> str | None:
    """The sha256 recorded on the object when it already holds exactly this file; None when it must be (re)staged."""
    response = head(s3, bucket, key)
    if response is None or response.get("ContentLength") != f.size:
        return None
    meta = response.get("Metadata", {})
    same = meta.get(META_SHA256) == f.lfs_sha256 if f.lfs_sha256 is not None else meta.get(META_GIT_OID) == f.git_oid
    sha256 = meta.get(META_SHA256)
    return sha256 if same and isinstance(sha256, str) else None


def upload(s3: Any, bucket: str, key: str, path: Path, metadata: dict[str, str], size: int) -> None:
    from boto3.s3.transfer import TransferConfig

    config = TransferConfig(
        multipart_threshold=MIN_PART_BYTES,
        multipart_chunksize=part_size(size),
        max_concurrency=UPLOAD_THREADS,
    )
    s3.upload_file(str(path), bucket, key, ExtraArgs={"Metadata": metadata}, Config=config)


def read_marker(s3: Any, bucket: str, key: str) -> dict[str, Any] | None:
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception as err:
        if error_code(err) in NOT_FOUND:
            return None
        raise
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def marker_key(prefix: str, key: str) -> str:
    """The marker of staging key `key` of `prefix`: written once when the prefix holds that key's files."""
    return f"{MARKERS}{prefix}{key}.json"


def in_progress_key(prefix: str, key: str) -> str:
    """The record a running staging of `key` rewrites every HEARTBEAT_SECONDS."""
    return f"{MARKERS}{prefix}{key}{IN_PROGRESS}"


def live_markers(s3: Any, bucket: str, prefix: str, key: str) -> dict[str, dict[str, Any]]:
    """The markers of the prefix's other staging keys: key -> marker."""
    out: dict[str, dict[str, Any]] = {}
    root = f"{MARKERS}{prefix}"
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=root):
        for obj in page.get("Contents", []):
            name = obj["Key"][len(root) :]
            if "/" in name or not name.endswith(".json") or name == f"{key}.json":
                continue
            marker = read_marker(s3, bucket, obj["Key"])
            if marker:
                out[name.removesuffix(".json")] = marker
    return out


def replaced_files(s3: Any, request: Request, files: list[RepoFile]) -> list[str]:
    """Files this commit would upload over an object another live marker lists: what the running version streams."""
    listed = {
        entry.get("name"): other
        for other, marker in live_markers(s3, request.bucket, request.prefix, request.key).items()
        for entry in marker.get("files") or []
        if isinstance(entry, dict)
    }
    return [
        f"{f.name} (staging key {listed[f.name]})"
        for f in files
        if f.name in listed
        and head(s3, request.bucket, request.prefix + f.name) is not None
        and staged_sha256(s3, request.bucket, request.prefix + f.name, f) is None
    ]


class Heartbeat:
    """Rewrites the in-progress record every HEARTBEAT_SECONDS in a thread while staging runs."""

    def __init__(self, s3: Any, request: Request, interval: float = HEARTBEAT_SECONDS) -> None:
        import threading

        self._s3, self._request, self._interval = s3, request, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stage-heartbeat", daemon=True)
        self.started = time.time()

    def beat(self) -> None:
        r = self._request
        body = {"key": r.key, "repo_id": r.repo_id, "revision": r.revision, "started": self.started, "at": time.time()}
        self._s3.put_object(Bucket=r.bucket, Key=in_progress_key(r.prefix, r.key), Body=json.dumps(body).encode())

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.beat()
            except Exception as err:  # a missed beat is retried next interval; the staging itself goes on
                log(f"could not refresh the in-progress record: {one_line(err)}")

    def __enter__(self) -> Heartbeat:
        self.beat()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def write_marker(s3: Any, request: Request, body: dict[str, Any]) -> None:
    """This key's marker, once: S3 answers 412 when it exists (another attempt wrote it: it must hold this key)."""
    marker = marker_key(request.prefix, request.key)
    try:
        s3.put_object(
            Bucket=request.bucket,
            Key=marker,
            Body=json.dumps(body, indent=1).encode(),
            ContentType="application/json",
            IfNoneMatch="*",
        )
    except Exception as err:
        if error_code(err) not in ("PreconditionFailed", "412"):
            raise
        existing = read_marker(s3, request.bucket, marker) or {}
        if existing.get("key") != request.key:
            raise StageError(f"s3://{request.bucket}/{marker} exists and records {existing.get('key')!r}") from None


def stale_objects(s3: Any, bucket: str, prefix: str, keep: set[str], repo_id: str) -> list[str]:
    """Objects under `prefix` that an earlier staging of this repo to this prefix wrote and the current file list
    lacks. Anything else (another repo's files, a staging to a longer prefix inside this one, objects written by
    hand) is not this script's business."""
    stale = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            key = obj["Key"]
            if key in keep or key == prefix + MARKER:
                continue
            response = head(s3, bucket, key)
            meta = response.get("Metadata", {}) if response is not None else {}
            if meta.get(META_REPO) == repo_id and meta.get(META_PREFIX) == prefix:
                stale.append(key)
    return stale


@dataclass(frozen=True)
class Request:
    """What to stage, and where."""

    bucket: str
    prefix: str
    repo_id: str
    revision: str
    key: str
    allow_patterns: tuple[str, ...]
    ignore_patterns: tuple[str, ...]
    scratch: Path
    # The scratch volume's size: a file that cannot fit fails the run before anything is downloaded.
    scratch_bytes: int | None = None
    # The Hub's address; None: huggingface_hub's default (HF_ENDPOINT, else huggingface.co).
    endpoint: str | None = None


def resolve(request: Request) -> tuple[str, list[RepoFile]]:
    """The commit the revision points at now, and the files to stage from it."""
    from huggingface_hub import HfApi

    info = HfApi(endpoint=request.endpoint).model_info(request.repo_id, revision=request.revision, files_metadata=True)
    if not info.sha:
        raise StageError(f"the Hub returned no commit for {request.repo_id}@{request.revision}")
    files = repo_files(info.siblings or [], request.allow_patterns, request.ignore_patterns)
    if not any(f.name.endswith(".safetensors") for f in files):
        raise StageError(
            f"{request.repo_id}@{request.revision} has no .safetensors file the patterns select; "
            "the Run:ai streamer loads safetensors only"
        )
    return info.sha, files


def check_scratch(request: Request, files: list[RepoFile]) -> None:
    largest = max(files, key=lambda f: f.size)
    if request.scratch_bytes is not None and largest.size + SCRATCH_HEADROOM_BYTES > request.scratch_bytes:
        raise StageError(
            f"{largest.name} is {human(largest.size)} and the scratch volume holds {human(request.scratch_bytes)}; "
            f"raise scratch_size to at least {-(-(largest.size + SCRATCH_HEADROOM_BYTES) // GIB)}Gi"
        )


def stage(s3: Any, request: Request) -> Summary:
    """Make s3://bucket/prefix hold the revision's selected files and this key's marker; return what it did."""
    commit, files = resolve(request)
    total = sum(f.size for f in files)
    log(f"{request.repo_id}@{request.revision} is commit {commit}: {len(files)} files, {human(total)}")
    check_scratch(request, files)
    stale = stale_objects(s3, request.bucket, request.prefix, {request.prefix + f.name for f in files}, request.repo_id)
    if stale:
        names = ", ".join(key[len(request.prefix) :] for key in stale[:3]) + (", ..." if len(stale) > 3 else "")
        raise StageError(
            f"s3://{request.bucket}/{request.prefix} holds {len(stale)} files of an earlier staging that commit "
            f"{commit} lacks ({names}) and the streamer would load them too: stage to a new prefix, or delete them"
        )
    replaced = replaced_files(s3, request, files)
    if replaced:
        names = ", ".join(replaced[:3]) + (", ..." if len(replaced) > 3 else "")
        raise StageError(
            f"commit {commit} changes {len(replaced)} files that another staging key still lists under "
            f"s3://{request.bucket}/{request.prefix} ({names}), which its pods stream: pin a commit with "
            "`llm-eks models add` (its own prefix), or stage to a new prefix"
        )
    with Heartbeat(s3, request):
        summary = _upload(s3, request, commit, files)
    return summary


def _upload(s3: Any, request: Request, commit: str, files: list[RepoFile]) -> Summary:
    """Each file staged (or found staged), then this key's marker."""
    from huggingface_hub import hf_hub_download

    summary = Summary(commit)
    entries = []
    downloads = request.scratch / "download"
    for f in files:
        key = request.prefix + f.name
        sha256 = staged_sha256(s3, request.bucket, key, f)
        if sha256 is not None:
            summary.present.append(f.name)
        else:
            log(f"downloading {f.name} ({human(f.size)})")
            started = time.monotonic()
            path = Path(
                hf_hub_download(
                    request.repo_id, f.name, revision=commit, local_dir=downloads, endpoint=request.endpoint
                )
            )
            try:
                sha256 = verify(path, f)
            except StageError:
                # huggingface_hub would hand the same bad file back on the next attempt.
                path.unlink()
                raise
            metadata = {
                META_SHA256: sha256,
                META_GIT_OID: f.git_oid,
                META_COMMIT: commit,
                META_REPO: request.repo_id,
                META_PREFIX: request.prefix,
            }
            upload(s3, request.bucket, key, path, metadata, f.size)
            path.unlink()
            log(f"uploaded {f.name} ({human(f.size)}) in {time.monotonic() - started:.1f} s")
            summary.uploaded.append(f.name)
        entries.append({"name": f.name, "size": f.size, "sha256": sha256})
    body = {
        "key": request.key,
        "repo_id": request.repo_id,
        "revision": request.revision,
        "commit": commit,
        "files": entries,
    }
    write_marker(s3, request, body)
    log(
        f"staged s3://{request.bucket}/{request.prefix}: {len(summary.uploaded)} uploaded, "
        f"{len(summary.present)} already present; marker {marker_key(request.prefix, request.key)} written"
    )
    return summary


def parse_args(argv: Sequence[str] | None) -> Request:
    parser = argparse.ArgumentParser(prog="stage.py", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", required=True, help="key prefix ending in '/'")
    parser.add_argument("--repo-id", required=True)
    parser.add_argument("--revision", required=True)
    parser.add_argument("--key", required=True, help="the staging key the marker records")
    parser.add_argument("--allow", action="append", required=True, help="a file pattern to stage (repeatable)")
    parser.add_argument("--ignore", action="append", default=[], help="a file pattern to skip (repeatable)")
    parser.add_argument("--scratch", required=True, type=Path, help="folder for the one file being staged")
    parser.add_argument("--scratch-bytes", type=int, default=None)
    args = parser.parse_args(argv)
    if not args.bucket:
        parser.error("--bucket is empty (is the bucket ConfigMap missing its key?)")
    if not args.prefix.endswith("/"):
        parser.error(f"--prefix {args.prefix!r} must end in '/'")
    return Request(
        bucket=args.bucket,
        prefix=args.prefix,
        repo_id=args.repo_id,
        revision=args.revision,
        key=args.key,
        allow_patterns=tuple(args.allow),
        ignore_patterns=tuple(args.ignore),
        scratch=args.scratch,
        scratch_bytes=args.scratch_bytes,
        endpoint=os.environ.get("HF_ENDPOINT") or None,
    )


def one_line(err: BaseException, limit: int = 500) -> str:
    """The error as one line (huggingface_hub's messages span several), at most `limit` characters."""
    text = " ".join(str(err).split())
    text = text if isinstance(err, StageError) else f"{type(err).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main(argv: Sequence[str] | None = None) -> int:
    request = parse_args(argv)
    try:
        import boto3

        s3 = boto3.client("s3", region_name=os.environ.get("AWS_REGION") or None)
        stage(s3, request)
    except Exception as err:
        print(f"stage: failed: {one_line(err)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
