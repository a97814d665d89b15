"""Where the tests find other projects' files, all inside the repository so that a clone runs every test:

- tests/fixtures/upstream/: CRDs and Karpenter's CloudFormation, copied byte for byte (SOURCES.md there names the
  repository, path, commit and git blob of each; tests/test_upstream_files.py holds the bytes to it);
- .cache/upstream/: files read from pinned upstream wheels, too large to commit (vLLM's is 336 MB). `make upstream`
  (a prerequisite of `make test`) downloads each wheel with `pip download --no-deps`, checks its sha256 and extracts
  only the files the tests read (tests/upstream_wheels.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = REPO_ROOT / "tests" / "fixtures" / "upstream"
CRDS = UPSTREAM / "crds"
KARPENTER_CLOUDFORMATION = UPSTREAM / "karpenter-cloudformation.yaml"
SOURCES = UPSTREAM / "SOURCES.md"
# Extracted wheel files; git-ignored (.gitignore), refilled by `make upstream`.
WHEEL_FILES = REPO_ROOT / ".cache" / "upstream"


@dataclass(frozen=True)
class Source:
    """One row of SOURCES.md."""

    file: str
    repository: str
    path: str
    release: str
    commit: str
    blob: str
    license: str


def _rows(columns: int) -> list[list[str]]:
    """The cells of SOURCES.md's table rows with `columns` columns (header rows left out)."""
    rows = []
    for line in SOURCES.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == columns and line.startswith("| ") and cells[0] != "file":
            rows.append(cells)
    return rows


def sources() -> dict[str, Source]:
    """SOURCES.md's table of copies: file (relative to tests/fixtures/upstream) -> its row."""
    return {cells[0]: Source(*cells) for cells in _rows(7)}


@dataclass(frozen=True)
class WrittenHere:
    """One row of SOURCES.md's "Written here from documentation": a file of ours, written from the pages named."""

    file: str
    written_from: tuple[str, ...]
    read: str
    blob: str


def written_here() -> dict[str, WrittenHere]:
    """SOURCES.md's table of files written from documentation: file -> its row."""
    return {
        file: WrittenHere(file, tuple(page.strip() for page in pages.split(",")), read, blob)
        for file, pages, read, blob in _rows(4)
    }


def git_blob_id(data: bytes) -> str:
    """What `git hash-object` prints for a file holding `data`."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
