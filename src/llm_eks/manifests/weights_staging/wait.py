"""Wait until s3://<bucket>/<prefix>_llm-eks-staged.json records this staging key: the serving pod's init container.

llm-eks passes this file's text to `python3 -c` in the vLLM image (so the serving pod needs no extra volume); it
uses the standard library and boto3 only, imported when it runs. It reads the marker every poll interval, logs one
line a minute while it waits, and exits 0 once the marker holds the key. Missing marker, another key, access
denied and network errors all mean "not yet": the pod stays in Init and its log says why. (No `$` followed by `(`
appears in this file: the kubelet would expand it as a variable reference in the container command.)
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wait-for-weights", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--poll-seconds", type=float, default=POLL_SECONDS)
    parser.add_argument("--timeout-seconds", type=float, default=None)
    args = parser.parse_args(argv)
    if not args.bucket:
        parser.error("--bucket is empty (is the bucket ConfigMap missing its key?)")
    import boto3

    s3 = boto3.client("s3", region_name=os.environ.get("AWS_REGION") or None)
    ready = wait(
        s3, args.bucket, args.prefix, args.key, poll_seconds=args.poll_seconds, timeout_seconds=args.timeout_seconds
    )
    return 0 if ready else 1


if __name__ == "__main__":
    sys.exit(main())
