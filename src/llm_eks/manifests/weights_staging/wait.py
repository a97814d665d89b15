"""Wait until this staging key's marker is in the weights bucket: the serving pod's init container.

llm-eks passes this file's text to `python3 -c` in the vLLM image (so the serving pod needs no extra volume); it
uses the standard library and boto3 only, imported when it runs. Every poll interval it reads the key's own marker,
`s3://<bucket>/staging-markers/<prefix><key>.json`, which the staging Job writes once and nobody overwrites (the
marker of earlier releases, `<prefix>_llm-eks-staged.json`, counts too when it records this key). It logs one line
a minute while it waits and exits 0 once the marker is there.

It waits as long as staging is alive: the staging Job rewrites `staging-markers/<prefix><key>.in-progress` every
minute. Without a marker and without a fresh in-progress record for `--timeout-seconds`, it gives up with one line
saying so and exits 1; the kubelet restarts it with back-off (the pod shows Init:CrashLoopBackOff with that line in
its log) and an alert on GPU pods pending pages. Access denied and network errors are "not yet" too, and the line
says which. (No `$` followed by `(` appears in this file: the kubelet would expand it as a variable reference in the
container command.)

With `--fetch-to DIR` (a LoRA adapter, or a whole checkpoint for a Neuron engine, which loads a local directory) it
then copies the files the marker lists into DIR, each checked against the size and sha256 the staging Job recorded,
and exits 1 if any differs: what the engine loads is byte for byte the commit that was staged, and a file the marker
does not list is never fetched.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

# The marker of earlier releases, inside the prefix; the per-key ones outside it (stage.py writes them).
MARKER = "_llm-eks-staged.json"
MARKERS = "staging-markers/"
IN_PROGRESS = ".in-progress"
POLL_SECONDS = 10.0
LOG_SECONDS = 60.0
# A staging that has not refreshed its in-progress record for this long is gone (it refreshes every minute).
STALE_SECONDS = 300.0
# Without a marker or a live staging for this long, give up: a staging Job's pod is on a CPU node within minutes.
TIMEOUT_SECONDS = 600.0


def log(message: str) -> None:
    print(f"wait-for-weights: {message}", flush=True)


def _code(err: Exception) -> str:
    response = getattr(err, "response", None)
    return response.get("Error", {}).get("Code", "") if isinstance(response, dict) else ""


def _why(err: Exception) -> str:
    code = _code(err)
    if code in ("AccessDenied", "403"):
        return "access denied: the marker is missing and the role may not list it, or may not read it"
    return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"


def _missing(err: Exception) -> bool:
    return _code(err) in ("NoSuchKey", "404", "NotFound")


def read_marker(s3: Any, bucket: str, prefix: str, key: str) -> dict[str, Any] | None:
    """This key's marker (its own, or an earlier release's in-prefix one that records this key); None when there is
    none yet. Errors other than a missing object propagate."""
    for marker in (f"{MARKERS}{prefix}{key}.json", prefix + MARKER):
        try:
            content = json.loads(s3.get_object(Bucket=bucket, Key=marker)["Body"].read())
        except Exception as err:
            if _missing(err):
                continue
            raise
        if isinstance(content, dict) and content.get("key") == key:
            return content
    return None


def staging_age(s3: Any, bucket: str, prefix: str, key: str, now: float) -> float | None:
    """Seconds since the staging of `key` last refreshed its in-progress record; None when it has none."""
    try:
        head = s3.head_object(Bucket=bucket, Key=f"{MARKERS}{prefix}{key}{IN_PROGRESS}")
    except Exception as err:
        if _missing(err):
            return None
        raise
    modified = head.get("LastModified")
    if not isinstance(modified, datetime.datetime):
        return None
    return max(now - modified.timestamp(), 0.0)


def wait(
    s3: Any,
    bucket: str,
    prefix: str,
    key: str,
    *,
    poll_seconds: float = POLL_SECONDS,
    log_seconds: float = LOG_SECONDS,
    timeout_seconds: float = TIMEOUT_SECONDS,
    stale_seconds: float = STALE_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Poll until the key's marker is there (True); False once neither it nor a live staging has been seen for
    `timeout_seconds`."""
    where = f"s3://{bucket}/{MARKERS}{prefix}{key}.json"
    started = last_alive = clock()
    last_log: float | None = None
    while True:
        now = clock()
        try:
            ready = read_marker(s3, bucket, prefix, key) is not None
            age = None if ready else staging_age(s3, bucket, prefix, key, wall())
            problem = "no marker yet" if age is None else f"staging is running (alive {age:.0f} s ago)"
            if age is not None and age <= stale_seconds:
                last_alive = now
            elif age is not None:
                problem = f"the staging stopped refreshing its record {age:.0f} s ago"
        except Exception as err:
            ready, problem = False, _why(err)
        if ready:
            log(f"{where} is there: weights ready after {now - started:.0f} s")
            return True
        if last_log is None or now - last_log >= log_seconds:
            log(f"waiting for {where} ({now - started:.0f} s): {problem}")
            last_log = now
        if now - last_alive >= timeout_seconds:
            log(
                f"gave up after {now - started:.0f} s: no marker and no staging in progress for key {key} under "
                f"s3://{bucket}/{prefix} ({problem}); the staging Job has not run (cdk deploy creates it) or failed: "
                f"kubectl get jobs -A -l llm-eks.io/staging-key={key}, then its logs"
            )
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
    content = read_marker(s3, bucket, prefix, key)
    if content is None:
        return [f"no marker records staging key {key!r}"]
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
    parser.add_argument("--timeout-seconds", type=float, default=TIMEOUT_SECONDS)
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
