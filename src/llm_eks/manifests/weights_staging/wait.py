"""Wait until s3://<bucket>/<prefix>_llm-eks-staged.json records this staging key: the serving pod's init container.

llm-eks passes this file's text to `python3 -c` in the vLLM image (so the serving pod needs no extra volume); it
uses the standard library and boto3 only, imported when it runs. It reads the marker every poll interval, logs one
line a minute while it waits, and exits 0 once the marker holds the key. Missing marker, another key, access
denied and network errors all mean "not yet": the pod stays in Init and its log says why. (No `$` followed by `(`
appears in this file: the kubelet would expand it as a variable reference in the container command.)

With `--fetch-to DIR` (a LoRA adapter, or a whole checkpoint for a Neuron engine, which loads a local directory) it
then copies the files the marker lists into DIR, each checked against the size and sha256 the staging Job recorded,
and exits 1 if any differs: what the engine loads is byte for byte the commit that was staged, and a file the marker
does not list is never fetched.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

MARKER = "_llm-eks-staged.json"
POLL_SECONDS = 10.0
LOG_SECONDS = 60.0


def log(message: str) -> None:
    print(f"wait-for-weights: {message}", flush=True)


def marker_problem(s3: Any, bucket: str, marker: str, key: str) -> str | None:
    """Why the marker does not (yet) say the weights of `key` are staged; None when it does."""
    try:
        body = s3.get_object(Bucket=bucket, Key=marker)["Body"].read()
    except Exception as err:
        response = getattr(err, "response", None)
        code = response.get("Error", {}).get("Code", "") if isinstance(response, dict) else ""
        if code in ("NoSuchKey", "404", "NotFound"):
            return "no marker yet (the staging Job has not finished)"
        if code in ("AccessDenied", "403"):
            return "access denied: the marker is missing and the role may not list the bucket, or may not read it"
        return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
    try:
        content = json.loads(body)
        staged, in_progress = content.get("key"), content.get("in_progress")
    except (ValueError, AttributeError):
        return "the marker is not a JSON object"
    if staged == key:
        return None
    if in_progress is not None:
        return f"staging key {in_progress!r} is in progress; waiting for {key!r}"
    return f"the marker records staging key {staged!r}, not {key!r} (a staging Job is due or running)"


def wait(
    s3: Any,
    bucket: str,
    prefix: str,
    key: str,
    *,
    poll_seconds: float = POLL_SECONDS,
    log_seconds: float = LOG_SECONDS,
    timeout_seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Poll until the marker holds `key` (True), or until `timeout_seconds` pass (False; None: never)."""
    marker = prefix + MARKER
    started = clock()
    last_log: float | None = None
    while True:
        problem = marker_problem(s3, bucket, marker, key)
        now = clock()
        if problem is None:
            log(f"s3://{bucket}/{marker} records key {key}: weights ready after {now - started:.0f} s")
            return True
        if last_log is None or now - last_log >= log_seconds:
            log(f"waiting for s3://{bucket}/{marker} ({now - started:.0f} s): {problem}")
            last_log = now
        if timeout_seconds is not None and now - started >= timeout_seconds:
            log(f"gave up after {now - started:.0f} s: {problem}")
            return False
        sleep(poll_seconds)


def _safe_name(name: object) -> bool:
    """A file name relative to the prefix that stays inside the destination."""
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name:
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


def _sha256_of(path: str) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(s3: Any, bucket: str, prefix: str, key: str, dest: str) -> list[str]:
    """Copy every file the marker of `key` lists into `dest`, verified; return the problems (empty: all good)."""
    content = json.loads(s3.get_object(Bucket=bucket, Key=prefix + MARKER)["Body"].read())
    if content.get("key") != key:
        return [f"the marker records staging key {content.get('key')!r}, not {key!r}"]
    files = content.get("files")
    if not isinstance(files, list) or not files:
        return ["the marker lists no files"]
    problems: list[str] = []
    for entry in files:
        name, size, sha256 = (
            (entry.get(k) for k in ("name", "size", "sha256")) if isinstance(entry, dict) else (None,) * 3
        )
        if (
            not isinstance(name, str)
            or not _safe_name(name)
            or not isinstance(size, int)
            or not isinstance(sha256, str)
        ):
            problems.append(f"the marker lists a file that is not a relative name with size and sha256: {entry!r}")
            continue
        path = os.path.join(dest, name)
        if os.path.isfile(path) and os.path.getsize(path) == size and _sha256_of(path) == sha256:
            continue  # fetched by an earlier run of this container
        os.makedirs(os.path.dirname(path), exist_ok=True)
        partial = path + ".partial"
        s3.download_file(bucket, prefix + name, partial)
        got_size, got_sha256 = os.path.getsize(partial), _sha256_of(partial)
        if (got_size, got_sha256) != (size, sha256):
            os.remove(partial)
            problems.append(f"{name}: {got_size} bytes, sha256 {got_sha256}; the marker records {size}, {sha256}")
            continue
        os.replace(partial, path)
        log(f"fetched {name} ({size} bytes, sha256 verified)")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wait-for-weights", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--poll-seconds", type=float, default=POLL_SECONDS)
    parser.add_argument("--timeout-seconds", type=float, default=None)
    parser.add_argument("--fetch-to", default=None, help="copy the staged files here, verified, once ready")
    args = parser.parse_args(argv)
    if not args.bucket:
        parser.error("--bucket is empty (is the bucket ConfigMap missing its key?)")
    import boto3

    s3 = boto3.client("s3", region_name=os.environ.get("AWS_REGION") or None)
    ready = wait(
        s3, args.bucket, args.prefix, args.key, poll_seconds=args.poll_seconds, timeout_seconds=args.timeout_seconds
    )
    if not ready:
        return 1
    if args.fetch_to is not None:
        problems = fetch(s3, args.bucket, args.prefix, args.key, args.fetch_to)
        for problem in problems:
            log(f"refused: {problem}")
        if problems:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
