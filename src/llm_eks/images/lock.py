"""The image lock file: a reviewed JSON file next to cdk.json mapping each image llm-eks runs to its digest.

    {
      "version": 1,
      "images": {
        "vllm/vllm-openai:v0.33.0": {
          "digest": "sha256:<64 hex>",
          "resolved_at": "2026-11-30T14:00:00Z",
          "source": "https://registry-1.docker.io/v2/vllm/vllm-openai/manifests/v0.33.0"
        }
      }
    }

Keys are the references exactly as llm-eks names them (versions.py, charts.py). The digest is the one the registry
served for that tag (for a multi-arch image, the index digest: every node then pulls the manifest for its own
platform from that index). `resolved_at` and `source` say when and from where it was read, so a reviewer can check
it again. `llm-eks images lock` writes this file; people review and commit it. Synth renders `repo:tag@sha256:...`
(the tag stays beside the digest for humans; the runtime pulls by digest and ignores the tag).

A missing file is an empty lock (every image stays on its tag). A malformed file is one line naming the file, the
entry and what is allowed, before anything is synthesized.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from llm_eks.error_codes import E139, E700
from llm_eks.errors import ConfigError, fail
from llm_eks.images.reference import DIGEST_RULE, is_digest, parse_ref

LOCK_FILE = "images.lock.json"
FORMAT_VERSION = 1
_ENTRY_KEYS = ("digest", "resolved_at", "source")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


@dataclass(frozen=True)
class LockEntry:
    """One image's digest and where it came from."""

    digest: str
    # UTC, second precision: when `llm-eks images lock` read it.
    resolved_at: str
    # The https URL the manifest was read from.
    source: str


@dataclass(frozen=True)
class ImageLock:
    """Image reference -> LockEntry. `name` is the file it came from (for error messages)."""

    name: str = LOCK_FILE
    entries: Mapping[str, LockEntry] = field(default_factory=lambda: MappingProxyType({}))

    def digest(self, ref: str) -> str | None:
        entry = self.entries.get(ref)
        return entry.digest if entry else None

    def pin(self, ref: str) -> str:
        """`repo:tag@sha256:...` when `ref` is locked, else `ref` unchanged."""
        return pin(ref, self.digests())

    def digests(self) -> dict[str, str]:
        return {ref: entry.digest for ref, entry in self.entries.items()}

    def merged(self, resolved: Mapping[str, LockEntry]) -> ImageLock:
        return ImageLock(self.name, MappingProxyType({**self.entries, **resolved}))

    def to_json(self) -> str:
        images = {ref: {key: getattr(e, key) for key in _ENTRY_KEYS} for ref, e in sorted(self.entries.items())}
        return json.dumps({"version": FORMAT_VERSION, "images": images}, indent=2) + "\n"


def pin(ref: str, digests: Mapping[str, str]) -> str:
    """`ref@digest` when `digests` holds `ref`, else `ref`: the tag stays beside the digest."""
    digest = digests.get(ref)
    return f"{ref}@{digest}" if digest else ref


def check_digests(digests: Any, where: str) -> dict[str, str]:
    """A plain `{reference: digest}` mapping (e.g. from CDK context), validated like the lock file's entries."""
    if not isinstance(digests, Mapping):
        raise fail(E700, where, digests, "must be an object mapping image references to sha256 digests")
    for ref, digest in digests.items():
        _check_ref(where, ref)
        if not is_digest(digest):
            raise fail(E700, f"{where}[{ref!r}]", digest, DIGEST_RULE)
    return dict(digests)


def parse_lock(data: Any, name: str = LOCK_FILE) -> ImageLock:
    """Validate the decoded JSON of a lock file; ConfigError (one line, naming `name`) otherwise."""
    if not isinstance(data, Mapping):
        raise fail(E700, name, data, 'must be a JSON object {"version": 1, "images": {...}}')
    unknown = sorted(set(data) - {"version", "images"})
    if unknown:
        raise ConfigError(E700, f"{name}: unknown key {unknown[0]!r}; allowed: images, version")
    if data.get("version") != FORMAT_VERSION:
        raise fail(E700, f"{name}: version", data.get("version"), f"must be {FORMAT_VERSION}")
    images = data.get("images", {})
    if not isinstance(images, Mapping):
        raise fail(E700, f"{name}: images", images, "must be an object mapping image references to entries")
    entries: dict[str, LockEntry] = {}
    for ref, body in images.items():
        where = f"{name}: images[{ref!r}]"
        _check_ref(f"{name}: images", ref)
        if not isinstance(body, Mapping):
            raise fail(E700, where, body, 'must be an object {"digest": ..., "resolved_at": ..., "source": ...}')
        extra = sorted(set(body) - set(_ENTRY_KEYS))
        if extra:
            raise ConfigError(E700, f"{where}: unknown key {extra[0]!r}; allowed: {', '.join(_ENTRY_KEYS)}")
        digest, resolved_at, source = (body.get(key) for key in _ENTRY_KEYS)
        if not is_digest(digest):
            raise fail(E700, f"{where}.digest", digest, DIGEST_RULE)
        if not isinstance(resolved_at, str) or not _TIMESTAMP.match(resolved_at):
            raise fail(E700, f"{where}.resolved_at", resolved_at, "must be a UTC time such as 2026-11-30T14:00:00Z")
        if not isinstance(source, str) or not source.startswith("https://") or any(c.isspace() for c in source):
            raise fail(E700, f"{where}.source", source, "must be the https URL the digest was read from")
        entries[ref] = LockEntry(digest, resolved_at, source)
    return ImageLock(name, MappingProxyType(entries))


def load_lock(path: Path) -> ImageLock:
    """The lock at `path`; an empty lock when the file does not exist."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ImageLock(name)
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(E700, f"{name}: cannot be read ({err.__class__.__name__})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(E700, f"{name}: is not JSON (line {err.lineno}: {err.msg})") from None
    return parse_lock(data, name)


def write_lock(lock: ImageLock, path: Path) -> None:
    """Replace `path` atomically: a reader never sees half a lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(lock.to_json())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_ref(where: str, ref: Any) -> None:
    try:
        parse_ref(ref)
    except ValueError as err:
        raise fail(E139, where, ref, f"keys {err}") from None
