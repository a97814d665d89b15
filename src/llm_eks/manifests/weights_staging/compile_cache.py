"""vLLM's torch.compile cache in S3, written by one writer and verified by every reader.

vLLM 0.33 writes its torch.compile artefacts (Inductor's Python source and pickles, which the next vLLM process
loads and runs) under `$VLLM_CACHE_ROOT/torch_compile_cache/<hash>/...` (vllm/compilation/backends.py); the hash
covers the environment, the vLLM config, the traced code and the compiler. llm-eks keeps one signed copy per
workload, GPU family and cache key (a hash of the image and the engine arguments) under
s3://<weights bucket>/compile-cache/<workload>/<family>/<key>/:

    files/<path below torch_compile_cache>   the artefacts, each written once
    manifest.json                            the prefix itself, the cache key, every file's path, size and sha256
    manifest.sig                             an ECDSA P-256 signature of sha256(manifest.json), made by KMS with a key
                                             only the writers' roles may sign with

The manifest names the prefix it was published under (workload, GPU family and key): a reader refuses a signed
manifest found under any other prefix, so one workload's or family's cache cannot be replayed as another's.

Two modes, both run by the vLLM image as `python3 -c <this file> <mode> ...` (the standard library and boto3):

- `publish` (the writer: a Job of its own, with its own ServiceAccount, that serves no client and holds no Hub token)
  first leaves a cache that already has a signature alone (it exits at once, before vLLM is even up); else it waits
  until its own vLLM answers /health on the pod's loopback, where alone it listens (compiling is over by then), and
  no file has changed for --settle seconds, then writes every file, the manifest and last the signature, each with
  `If-None-Match: *`: S3 refuses an overwrite (412), and the bucket policy refuses a write without that header. A
  file already there is accepted only when its sha256 (object metadata) is the file's.
- `restore` (an init container of every serving pod) reads the manifest and its signature, has KMS verify the
  signature and that the manifest names this very prefix and key, then downloads exactly the files the manifest
  lists, checking each one's size and sha256 as it arrives. An object not in the manifest is never read. No
  signature, a bad signature, a manifest of another prefix, a file that does not match:
  the files written so far are removed and vLLM compiles from scratch. It always exits 0: a cold cache costs a
  compile, never a replica. With `--required` (a Neuron engine that must not compile in a serving pod,
  manifests/vllm/neuron.py) it waits for the writer's signed manifest instead and exits 1 without it, so the pod
  stays in Init until the artefacts are there.

The same mechanism carries a Neuron engine's ahead-of-time compiled artefacts (NxD Inference's traced model and
NEFFs, vllm-neuron's compile cache): the writer compiles them and publishes that directory instead
(manifests/vllm/neuron.py names it, and the larger per-file cap and restore deadline).

(No `$` followed by `(` appears in this file: the kubelet would expand it as a variable reference in the command.)
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import stat
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# 2: the manifest names its prefix (format 1 named only the key). Part of the cache key, so a new format is a new
# prefix: a format-1 cache is never read again, nor overwritten.
FORMAT = 2
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
FILES = "files/"
SIGNING_ALGORITHM = "ECDSA_SHA_256"
SHA256_METADATA = "sha256"
POLL_SECONDS = 10.0
HEALTH_LOG_SECONDS = 300.0
HEALTH_TIMEOUT_SECONDS = 5.0
# No file of the cache changed for this long: vLLM has finished writing it.
SETTLE_SECONDS = 60.0
MAX_FILE_BYTES = 2 * 1024**3
# Restore gives up (and removes what it wrote) after this long: the replica starts with a cold cache.
RESTORE_DEADLINE_SECONDS = 300.0
# A download in progress.
PARTIAL_SUFFIX = ".llm-eks-partial"
_CHUNK = 1024 * 1024


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


def error_code(err: BaseException) -> str:
    response = getattr(err, "response", None)
    if not isinstance(response, dict):
        return ""
    return str(response.get("Error", {}).get("Code", "")) or str(
        response.get("ResponseMetadata", {}).get("HTTPStatusCode", "")
    )


def clients(region: str | None) -> tuple[Any, Any]:
    """(s3, kms) boto3 clients."""
    import boto3
    from botocore.config import Config  # type: ignore[import-untyped]

    config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10, read_timeout=60)
    return (
        boto3.client("s3", region_name=region or None, config=config),
        boto3.client("kms", region_name=region or None, config=config),
    )


def relative_path(rel: str) -> str | None:
    """`rel` when it may become a file under the destination (no `..` or `.` segment, no absolute path, backslash
    or NUL); else None."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or "\\" in rel or "\0" in rel or any(p in ("", ".", "..") for p in parts):
        return None
    return rel


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --- the manifest --------------------------------------------------------------------------------------------------


def manifest_bytes(prefix: str, cache_key: str, files: Sequence[tuple[str, int, str]]) -> bytes:
    """The manifest as written and signed: canonical JSON (sorted keys, no spaces), files in path order."""
    body = {
        "format": FORMAT,
        "prefix": prefix,
        "cache_key": cache_key,
        "files": [{"path": p, "size": s, "sha256": h} for p, s, h in sorted(files)],
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def parse_manifest(data: bytes, prefix: str, cache_key: str) -> list[tuple[str, int, str]]:
    """The manifest's (path, size, sha256) entries; Refused for a manifest of another prefix or key (a signed
    manifest replayed where it was not published), ValueError for anything else than what `publish` writes."""
    body = json.loads(data)
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise ValueError(f"not a format-{FORMAT} manifest")
    if body.get("prefix") != prefix or body.get("cache_key") != cache_key:
        raise Refused(
            f"the manifest was published under {body.get('prefix')!r} for key {body.get('cache_key')!r}, "
            f"not this prefix and key"
        )
    entries = []
    for item in body.get("files", []):
        path, size, digest = item.get("path"), item.get("size"), item.get("sha256")
        if relative_path(path) is None or not isinstance(size, int) or size < 0:
            raise ValueError(f"bad entry {item!r}")
        if not isinstance(digest, str) or len(digest) != 64:
            raise ValueError(f"bad sha256 in {item!r}")
        entries.append((path, size, digest))
    return entries


# --- restore -------------------------------------------------------------------------------------------------------


@dataclass
class RestoreSummary:
    restored: list[str] = field(default_factory=list)
    restored_bytes: int = 0


class Refused(Exception):
    """The cache may not be used (unsigned, a bad signature, a file that does not match its manifest)."""


def verify(kms: Any, key_id: str, data: bytes, signature: bytes) -> None:
    """KMS verifies the writer's signature of sha256(data); Refused when it does not hold."""
    digest = hashlib.sha256(data).digest()
    try:
        answer = kms.verify(
            KeyId=key_id,
            Message=digest,
            MessageType="DIGEST",
            Signature=signature,
            SigningAlgorithm=SIGNING_ALGORITHM,
        )
    except Exception as err:
        if error_code(err) == "KMSInvalidSignatureException":
            raise Refused("the manifest's signature does not verify") from None
        raise
    if not answer.get("SignatureValid"):
        raise Refused("the manifest's signature does not verify")


def _get(s3: Any, bucket: str, key: str) -> bytes | None:
    try:
        return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except Exception as err:
        if error_code(err) in ("NoSuchKey", "404"):
            return None
        raise


def restore(
    s3: Any,
    kms: Any,
    bucket: str,
    prefix: str,
    cache_key: str,
    key_id: str,
    dest: Path,
    *,
    deadline_seconds: float = RESTORE_DEADLINE_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> RestoreSummary | None:
    """Download the signed cache into `dest`; None when there is none yet. On any error (Refused among them) the
    files this call wrote are removed and the error re-raised."""
    started = clock()
    manifest = _get(s3, bucket, prefix + MANIFEST)
    signature = _get(s3, bucket, prefix + SIGNATURE)
    if manifest is None:
        return None
    if signature is None:
        raise Refused("the manifest is not signed (yet)")
    verify(kms, key_id, manifest, base64.b64decode(signature))
    entries = parse_manifest(manifest, prefix, cache_key)
    summary = RestoreSummary()
    root = dest.resolve()
    try:
        for rel, size, digest in entries:
            target = root.joinpath(*rel.split("/"))
            if not target.resolve().is_relative_to(root):
                raise Refused(f"{rel}: not a relative path below the cache")
            if clock() - started > deadline_seconds:
                raise TimeoutError(f"restore took longer than {deadline_seconds:.0f} s")
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + PARTIAL_SUFFIX)
            try:
                body = s3.get_object(Bucket=bucket, Key=prefix + FILES + rel)["Body"]
                hasher, written = hashlib.sha256(), 0
                with open(partial, "wb") as f:
                    while chunk := body.read(_CHUNK):
                        hasher.update(chunk)
                        written += len(chunk)
                        if written > size:
                            break
                        f.write(chunk)
                if written != size or hasher.hexdigest() != digest:
                    raise Refused(f"{rel}: {written} bytes with sha256 {hasher.hexdigest()[:12]}... do not match the "
                                  f"manifest's {size} bytes, sha256 {digest[:12]}...")  # fmt: skip
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
            summary.restored.append(str(target))
            summary.restored_bytes += size
    except BaseException:
        for path in summary.restored:
            Path(path).unlink(missing_ok=True)
        raise
    return summary


def run_restore(
    s3: Any, kms: Any, bucket: str, prefix: str, cache_key: str, key_id: str, dest: Path, *, deadline_seconds: float
) -> int:
    """Restore and log one line; always 0."""
    started = time.monotonic()
    where = f"s3://{bucket}/{prefix}"
    try:
        summary = restore(s3, kms, bucket, prefix, cache_key, key_id, dest, deadline_seconds=deadline_seconds)
    except Refused as err:
        log("restore", f"refused {where}, vLLM compiles from scratch (this run's files removed): {err}")
        return 0
    except Exception as err:
        log(
            "restore",
            f"failed after {time.monotonic() - started:.1f} s, vLLM compiles from scratch (this run's files removed): "
            f"{where}: {one_line(err)}",
        )
        return 0
    seconds = time.monotonic() - started
    if summary is None:
        log(
            "restore",
            f"nothing to restore: {where} has no manifest yet (the writer Job publishes it, {seconds:.1f} s)",
        )
        return 0
    log(
        "restore",
        f"restored {len(summary.restored)} verified files ({human(summary.restored_bytes)}) from {where} into {dest} "
        f"in {seconds:.1f} s",
    )
    return 0


# --- publish -------------------------------------------------------------------------------------------------------


def local_files(src: Path) -> list[tuple[str, Path, os.stat_result]]:
    """Regular files under `src` (symlinks neither followed nor saved), as (relative posix path, path, stat)."""
    found = []
    for folder, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder, name)
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                found.append((path.relative_to(src).as_posix(), path, st))
    return found


@dataclass
class PublishSummary:
    uploaded: int = 0
    uploaded_bytes: int = 0
    present: int = 0
    skipped: list[str] = field(default_factory=list)
    already_signed: bool = False


def _put_once(s3: Any, bucket: str, key: str, body: bytes | Any, digest: str) -> bool:
    """Write `key` unless it exists (If-None-Match); True when written, False when it was there with this sha256.
    RuntimeError when it is there with another content: an add-only cache never changes a file."""
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*", Metadata={SHA256_METADATA: digest})
        return True
    except Exception as err:
        if error_code(err) not in ("PreconditionFailed", "412"):
            raise
    there = s3.head_object(Bucket=bucket, Key=key).get("Metadata", {}).get(SHA256_METADATA)
    if there != digest:
        raise RuntimeError(f"{key} is already there with sha256 {there!r}, not {digest}: the cache is add-only")
    return False


def is_signed(s3: Any, bucket: str, prefix: str) -> bool:
    """Whether the cache under `prefix` has its signature already (its writer finished)."""
    return _get(s3, bucket, prefix + SIGNATURE) is not None


def publish(
    s3: Any,
    kms: Any,
    bucket: str,
    prefix: str,
    cache_key: str,
    key_id: str,
    src: Path,
    *,
    max_bytes: int = MAX_FILE_BYTES,
) -> PublishSummary:
    """Write the files under `src`, then the manifest, then its signature, each once."""
    summary = PublishSummary()
    if is_signed(s3, bucket, prefix):
        summary.already_signed = True
        return summary
    entries = []
    for rel, path, st in local_files(src):
        if relative_path(rel) is None or rel.endswith(PARTIAL_SUFFIX) or st.st_size > max_bytes:
            summary.skipped.append(rel)
            continue
        digest = sha256_file(path)
        with open(path, "rb") as f:
            if _put_once(s3, bucket, prefix + FILES + rel, f, digest):
                summary.uploaded += 1
                summary.uploaded_bytes += st.st_size
            else:
                summary.present += 1
        entries.append((rel, st.st_size, digest))
    if not entries:
        raise RuntimeError(f"no compile cache under {src}: nothing to publish")
    manifest = manifest_bytes(prefix, cache_key, entries)
    _put_once(s3, bucket, prefix + MANIFEST, manifest, hashlib.sha256(manifest).hexdigest())
    signed = kms.sign(
        KeyId=key_id,
        Message=hashlib.sha256(manifest).digest(),
        MessageType="DIGEST",
        SigningAlgorithm=SIGNING_ALGORITHM,
    )["Signature"]
    signature = base64.b64encode(signed)
    _put_once(s3, bucket, prefix + SIGNATURE, signature, hashlib.sha256(signature).hexdigest())
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


def wait_ready(
    url: str,
    src: Path,
    *,
    settle_seconds: float = SETTLE_SECONDS,
    poll_seconds: float = POLL_SECONDS,
    log_seconds: float = HEALTH_LOG_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    now: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Return once `url` answers 200 and no file under `src` changed in the last `settle_seconds`."""
    started = clock()
    last_log: float | None = None
    while True:
        problem = healthy(url)
        if problem is None:
            newest = max((st.st_mtime for _, _, st in local_files(src)), default=0.0) if src.is_dir() else 0.0
            if now() - newest >= settle_seconds:
                return
            problem = f"the cache changed {now() - newest:.0f} s ago"
        moment = clock()
        if last_log is None or moment - last_log >= log_seconds:
            log("publish", f"waiting for {url} and a settled cache ({moment - started:.0f} s): {problem}")
            last_log = moment
        sleep(poll_seconds)


def run_restore_required(
    s3: Any,
    kms: Any,
    bucket: str,
    prefix: str,
    cache_key: str,
    key_id: str,
    dest: Path,
    *,
    deadline_seconds: float,
    poll_seconds: float = POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Restore for an engine that must not compile (a Neuron one that refuses to): wait for the writer's signed
    manifest, polling, and exit 1 when there is none by the deadline or it is refused (this run's files removed): the
    init container fails and the kubelet runs it again, so the pod waits in Init instead of serving without it."""
    started = clock()
    where = f"s3://{bucket}/{prefix}"
    last_log: float | None = None
    while True:
        remaining = deadline_seconds - (clock() - started)
        try:
            summary = restore(s3, kms, bucket, prefix, cache_key, key_id, dest, deadline_seconds=remaining, clock=clock)
        except Exception as err:
            log("restore", f"failed, and this engine must not compile: {where}: {one_line(err)}")
            return 1
        now = clock()
        if summary is not None:
            log(
                "restore",
                f"restored {len(summary.restored)} verified files ({human(summary.restored_bytes)}) from {where} into "
                f"{dest} in {now - started:.1f} s",
            )
            return 0
        if now - started >= deadline_seconds:
            log(
                "restore", f"gave up after {now - started:.0f} s: {where} has no manifest (the writer Job publishes it)"
            )
            return 1
        if last_log is None or now - last_log >= HEALTH_LOG_SECONDS / 5:
            log("restore", f"waiting for the writer Job to publish {where} ({now - started:.0f} s)")
            last_log = now
        sleep(poll_seconds)


# --- command line ------------------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="compile-cache", description=__doc__.splitlines()[0] if __doc__ else None)
    modes = p.add_subparsers(dest="mode", required=True)
    restore_p = modes.add_parser("restore", help="verify and download the cache into --dest (always exits 0)")
    publish_p = modes.add_parser("publish", help="once vLLM serves, write the cache, its manifest and signature")
    for m in (restore_p, publish_p):
        m.add_argument("--bucket", required=True)
        m.add_argument("--prefix", required=True, help="the cache key's prefix, ending in '/'")
        m.add_argument("--cache-key", required=True)
        m.add_argument("--signing-key", required=True, help="the KMS key (ARN) the manifest is signed with")
        m.add_argument("--region", default=None, help="default: AWS_REGION, else what boto3 finds")
    restore_p.add_argument("--dest", required=True, type=Path)
    restore_p.add_argument("--deadline-seconds", type=float, default=RESTORE_DEADLINE_SECONDS)
    restore_p.add_argument(
        "--required",
        action="store_true",
        help="wait for the signed cache; exit 1 without it (an engine that must not compile)",
    )
    publish_p.add_argument("--src", required=True, type=Path)
    publish_p.add_argument("--health", required=True, help="vLLM's health URL, e.g. http://127.0.0.1:8000/health")
    publish_p.add_argument("--settle", type=float, default=SETTLE_SECONDS, help="seconds with no change first")
    publish_p.add_argument("--max-bytes", type=int, default=MAX_FILE_BYTES, help="leave larger files out")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    region = args.region or os.environ.get("AWS_REGION") or None
    if not args.bucket or not args.prefix.endswith("/") or not args.signing_key:
        log(args.mode, f"skipped: bucket {args.bucket!r}, prefix {args.prefix!r} and a signing key are required")
        return 0 if args.mode == "restore" and not args.required else 1
    if args.mode == "restore":
        try:
            s3, kms = clients(region)
        except Exception as err:
            log("restore", f"failed, vLLM compiles from scratch: {one_line(err)}")
            return 1 if args.required else 0
        if args.required:
            return run_restore_required(
                s3, kms, args.bucket, args.prefix, args.cache_key, args.signing_key, args.dest,
                deadline_seconds=args.deadline_seconds,
            )  # fmt: skip
        return run_restore(
            s3, kms, args.bucket, args.prefix, args.cache_key, args.signing_key, args.dest,
            deadline_seconds=args.deadline_seconds,
        )  # fmt: skip
    s3, kms = clients(region)
    where = f"s3://{args.bucket}/{args.prefix}"
    if is_signed(s3, args.bucket, args.prefix):
        log("publish", f"{where} is already published and signed: nothing to do")
        return 0
    wait_ready(args.health, args.src, settle_seconds=args.settle)
    started = time.monotonic()
    summary = publish(
        s3, kms, args.bucket, args.prefix, args.cache_key, args.signing_key, args.src, max_bytes=args.max_bytes
    )
    if summary.already_signed:
        log("publish", f"{where} is already published and signed: nothing to do")
    else:
        log(
            "publish",
            f"published {summary.uploaded} files ({human(summary.uploaded_bytes)}) to {where} in "
            f"{time.monotonic() - started:.1f} s, {summary.present} already there, {len(summary.skipped)} left out; "
            "manifest signed",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
