"""Keep vLLM's torch.compile cache in S3: restore it before vLLM starts, save what vLLM compiles while it serves.

vLLM 0.33 writes its torch.compile artefacts under `$VLLM_CACHE_ROOT/torch_compile_cache/<hash>/...`
(vllm/compilation/backends.py, decorators.py); the hash covers the environment, the vLLM config, the traced code and
the compiler, so a cache saved on another node of the same GPU type, with the same image and config, is reused, and
anything else is a different directory vLLM never reads. llm-eks keeps one copy per workload and GPU family under
s3://<weights bucket>/compile-cache/<workload>/<family>/.

Two modes, both run by the vLLM image as `python3 -c <this file> <mode> ...` (no extra volume; the standard library
and boto3 only, boto3 imported when it runs):

- `restore` (the serving pod's init container): downloads every object under the prefix into --dest, keeping the
  relative paths, oldest object first, and skips files already there with the same size. A key holding a `..` or
  `.` segment, or an absolute path, is refused. Whatever goes wrong (no cache yet, access denied, network), it logs
  one line and exits 0: a cold cache costs a compile, never a replica. A restore that fails half way removes the
  files it wrote, so vLLM never sees an index whose artefacts are missing.
- `save` (a native sidecar): waits until vLLM's /health answers 200 (compiling is over by then), uploads every
  regular file under --src that the prefix lacks at the same size, oldest first, skipping files modified in the last
  30 s (they may still be being written) and files above a size cap, then sleeps --interval and does it again
  (later passes pick up kernels compiled for new shapes). The first failed upload ends the pass, so S3 never holds
  a newer file (an index) without the older ones it refers to. It never deletes anything; an error in a pass is
  logged and the next pass retries.

(No `$` followed by `(` appears in this file: the kubelet would expand it as a variable reference in the command.)
"""

from __future__ import annotations

import argparse
import os
import signal
import stat
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POLL_SECONDS = 10.0
HEALTH_LOG_SECONDS = 300.0
HEALTH_TIMEOUT_SECONDS = 5.0
INTERVAL_SECONDS = 600.0
# A file modified this recently may still be being written.
MIN_AGE_SECONDS = 30.0
MAX_FILE_BYTES = 2 * 1024**3
# Restore gives up (and removes what it wrote) after this long: the replica starts with a cold cache.
RESTORE_DEADLINE_SECONDS = 300.0
# A download in progress; save never uploads one.
PARTIAL_SUFFIX = ".llm-eks-partial"


def log(mode: str, message: str) -> None:
    print(f"{mode}-compile-cache: {message}", flush=True)


def human(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def one_line(err: BaseException, limit: int = 300) -> str:
    response = getattr(err, "response", None)
    code = response.get("Error", {}).get("Code", "") if isinstance(response, dict) else ""
    text = " ".join(str(err).split())
    name = type(err).__name__
    text = f"{name} ({code}): {text}" if code and code != name else f"{name}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def s3_client(region: str | None) -> Any:
    import boto3
    from botocore.config import Config  # type: ignore[import-untyped]

    config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10, read_timeout=60)
    return boto3.client("s3", region_name=region or None, config=config)


def list_prefix(s3: Any, bucket: str, prefix: str) -> list[dict[str, Any]]:
    """Every object under the prefix (Key, Size, LastModified)."""
    found: list[dict[str, Any]] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        found.extend(page.get("Contents", []))
    return found


def relative_path(key: str, prefix: str) -> str | None:
    """The object's path below the prefix, or None when it may not become a file under the destination (a `..` or
    `.` segment, an absolute path, a backslash, a NUL)."""
    rel = key[len(prefix) :]
    parts = rel.split("/")
    if not rel or rel.startswith("/") or "\\" in rel or "\0" in rel or any(p in ("", ".", "..") for p in parts):
        return None
    return rel


# --- restore -----------------------------------------------------------------------------------------------------


@dataclass
class RestoreSummary:
    restored: list[str] = field(default_factory=list)
    restored_bytes: int = 0
    present: int = 0
    refused: list[str] = field(default_factory=list)


def restore(
    s3: Any,
    bucket: str,
    prefix: str,
    dest: Path,
    *,
    deadline_seconds: float = RESTORE_DEADLINE_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> RestoreSummary:
    """Download the prefix into `dest`. On any error, removes the files this call wrote and re-raises."""
    started = clock()
    summary = RestoreSummary()
    objects = sorted(list_prefix(s3, bucket, prefix), key=lambda o: (o["LastModified"], o["Key"]))
    root = dest.resolve()
    try:
        for obj in objects:
            key = obj["Key"]
            if key.endswith("/") and obj.get("Size", 0) == 0:
                continue  # a "folder" placeholder
            rel = relative_path(key, prefix)
            target = root.joinpath(*rel.split("/")) if rel is not None else None
            if target is None or not target.resolve().is_relative_to(root):
                summary.refused.append(key)
                log("restore", f"refused s3://{bucket}/{key}: not a relative path below the prefix")
                continue
            if target.is_file() and target.stat().st_size == obj["Size"]:
                summary.present += 1
                continue
            if clock() - started > deadline_seconds:
                raise TimeoutError(f"restore took longer than {deadline_seconds:.0f} s")
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + PARTIAL_SUFFIX)
            try:
                with open(partial, "wb") as f:
                    s3.download_fileobj(bucket, key, f)
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
            summary.restored.append(str(target))
            summary.restored_bytes += obj["Size"]
    except BaseException:
        for path in summary.restored:
            Path(path).unlink(missing_ok=True)
        raise
    return summary


def run_restore(s3: Any, bucket: str, prefix: str, dest: Path, *, deadline_seconds: float) -> int:
    """Restore and log one line; always 0."""
    started = time.monotonic()
    where = f"s3://{bucket}/{prefix}"
    try:
        summary = restore(s3, bucket, prefix, dest, deadline_seconds=deadline_seconds)
    except Exception as err:
        log(
            "restore",
            f"failed after {time.monotonic() - started:.1f} s, vLLM compiles from scratch (this run's files removed): "
            f"{where}: {one_line(err)}",
        )
        return 0
    seconds = time.monotonic() - started
    restored = len(summary.restored)
    if restored == 0 and summary.present == 0 and not summary.refused:
        log("restore", f"nothing to restore: {where} is empty (vLLM compiles, the sidecar saves) ({seconds:.1f} s)")
        return 0
    log(
        "restore",
        f"restored {restored} files ({human(summary.restored_bytes)}) from {where} into {dest} in {seconds:.1f} s; "
        f"{summary.present} already present, {len(summary.refused)} refused",
    )
    return 0


# --- save --------------------------------------------------------------------------------------------------------


@dataclass
class PassSummary:
    uploaded: list[str] = field(default_factory=list)
    uploaded_bytes: int = 0
    present: int = 0
    fresh: int = 0
    too_large: list[str] = field(default_factory=list)
    error: str | None = None


def local_files(src: Path) -> list[tuple[str, Path, os.stat_result]]:
    """Regular files under `src` (symlinks neither followed nor saved), as (relative posix path, path, stat)."""
    found = []
    for folder, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(PARTIAL_SUFFIX):
                continue
            path = Path(folder, name)
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                found.append((path.relative_to(src).as_posix(), path, st))
    return found


def run_pass(
    s3: Any,
    bucket: str,
    prefix: str,
    src: Path,
    *,
    now: float,
    min_age_seconds: float = MIN_AGE_SECONDS,
    max_bytes: int = MAX_FILE_BYTES,
) -> PassSummary:
    """Upload, oldest first, the files under `src` older than `min_age_seconds` at `now` (wall clock) that the prefix
    lacks at the same size. The first failed upload ends the pass (recorded in `error`); nothing is deleted."""
    summary = PassSummary()
    if not src.is_dir():
        return summary
    remote = {o["Key"]: o["Size"] for o in list_prefix(s3, bucket, prefix)}
    for rel, path, st in sorted(local_files(src), key=lambda f: (f[2].st_mtime, f[0])):
        key = prefix + rel
        if remote.get(key) == st.st_size:
            summary.present += 1
        elif now - st.st_mtime < min_age_seconds:
            summary.fresh += 1
        elif st.st_size > max_bytes:
            summary.too_large.append(rel)
        else:
            try:
                s3.upload_file(str(path), bucket, key)
            except Exception as err:
                summary.error = f"{rel}: {one_line(err)}"
                break
            summary.uploaded.append(rel)
            summary.uploaded_bytes += st.st_size
    return summary


def healthy(url: str, timeout: float = HEALTH_TIMEOUT_SECONDS) -> str | None:
    """None when GET `url` answers 200; else what it answered."""
    # No proxy, whatever the environment says: the URL is the pod's own loopback.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            status = response.status
    except urllib.error.HTTPError as err:
        return f"HTTP {err.code}"
    except (OSError, ValueError) as err:
        return one_line(err, 200)
    return None if status == 200 else f"HTTP {status}"


def wait_healthy(
    url: str,
    *,
    poll_seconds: float = POLL_SECONDS,
    log_seconds: float = HEALTH_LOG_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Return once `url` answers 200, logging a line every `log_seconds` while it does not."""
    started = clock()
    last_log: float | None = None
    while True:
        problem = healthy(url)
        if problem is None:
            return
        now = clock()
        if last_log is None or now - last_log >= log_seconds:
            log("save", f"waiting for {url} to answer 200 ({now - started:.0f} s): {problem}")
            last_log = now
        sleep(poll_seconds)


def save_loop(
    s3: Any,
    bucket: str,
    prefix: str,
    src: Path,
    health_url: str,
    *,
    interval_seconds: float = INTERVAL_SECONDS,
    poll_seconds: float = POLL_SECONDS,
    min_age_seconds: float = MIN_AGE_SECONDS,
    max_bytes: int = MAX_FILE_BYTES,
    passes: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    now: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> list[PassSummary]:
    """Wait for health, run a pass, sleep; `passes` times (None: forever). Returns the passes' summaries."""
    where = f"s3://{bucket}/{prefix}"
    done: list[PassSummary] = []
    while passes is None or len(done) < passes:
        wait_healthy(health_url, poll_seconds=poll_seconds, clock=clock, sleep=sleep)
        started = clock()
        try:
            summary = run_pass(s3, bucket, prefix, src, now=now(), min_age_seconds=min_age_seconds, max_bytes=max_bytes)
        except Exception as err:
            summary = PassSummary(error=one_line(err))
        done.append(summary)
        line = (
            f"pass {len(done)}: uploaded {len(summary.uploaded)} files ({human(summary.uploaded_bytes)}) from {src} "
            f"to {where} in {clock() - started:.1f} s; {summary.present} already there, {summary.fresh} too new, "
            f"{len(summary.too_large)} above {human(max_bytes)}"
        )
        if summary.too_large:
            line += f" (first: {summary.too_large[0]})"
        if summary.error is not None:
            line += f"; failed, next pass retries: {summary.error}"
        log("save", line)
        if passes is not None and len(done) >= passes:
            break
        sleep(interval_seconds)
    return done


# --- command line ------------------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="compile-cache", description=__doc__.splitlines()[0] if __doc__ else None)
    modes = p.add_subparsers(dest="mode", required=True)
    restore_p = modes.add_parser("restore", help="download the cache into --dest (always exits 0)")
    save_p = modes.add_parser("save", help="upload new cache files every --interval seconds, forever")
    for m in (restore_p, save_p):
        m.add_argument("--bucket", required=True)
        m.add_argument("--prefix", required=True, help="key prefix ending in '/'")
        m.add_argument("--region", default=None, help="default: AWS_REGION, else what boto3 finds")
    restore_p.add_argument("--dest", required=True, type=Path)
    restore_p.add_argument("--deadline-seconds", type=float, default=RESTORE_DEADLINE_SECONDS)
    save_p.add_argument("--src", required=True, type=Path)
    save_p.add_argument("--health", required=True, help="vLLM's health URL, e.g. http://localhost:8000/health")
    save_p.add_argument("--interval", type=float, default=INTERVAL_SECONDS, help="seconds between passes")
    save_p.add_argument("--min-age", type=float, default=MIN_AGE_SECONDS, help="skip files modified more recently")
    save_p.add_argument("--max-bytes", type=int, default=MAX_FILE_BYTES, help="skip larger files")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    region = args.region or os.environ.get("AWS_REGION") or None
    if args.mode == "restore":
        if not args.bucket or not args.prefix.endswith("/"):
            log("restore", f"skipped: bucket {args.bucket!r} and prefix {args.prefix!r} (ending in '/') are required")
            return 0
        try:
            s3 = s3_client(region)
        except Exception as err:
            log("restore", f"failed, vLLM compiles from scratch: {one_line(err)}")
            return 0
        return run_restore(s3, args.bucket, args.prefix, args.dest, deadline_seconds=args.deadline_seconds)
    if not args.bucket or not args.prefix.endswith("/"):
        # A sidecar that exits is restarted with a backoff: sleep instead, and say why once.
        log("save", f"disabled: bucket {args.bucket!r} and prefix {args.prefix!r} (ending in '/') are required")
        while True:
            time.sleep(3600)
    # The kubelet stops the sidecar after vLLM: exit quietly (an interrupted upload leaves no object).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    save_loop(
        s3_client(region),
        args.bucket,
        args.prefix,
        args.src,
        args.health,
        interval_seconds=args.interval,
        min_age_seconds=args.min_age,
        max_bytes=args.max_bytes,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
