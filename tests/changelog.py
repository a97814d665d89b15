"""CHANGELOG.md read as data: its releases, and the entries that announce a change with a marker (the convention its
"Markers" section describes): `- **<marker>** `<subject>`<text>`, under a release's heading."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from tests.conftest import REPO_ROOT

CHANGELOG = REPO_ROOT / "CHANGELOG.md"
UNRELEASED = "Unreleased"
MARKERS = ("restarts pods", "replaces nodes", "recreates", "removes", "replaces", "cdk.json")
_RELEASE = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}))?\s*$")
_ENTRY = re.compile(r"^- \*\*(?P<marker>[^*]+)\*\* `(?P<subject>[^`]+)`(?P<rest>.*)$")


@dataclass(frozen=True)
class Entry:
    """One announced change: the release it is in, its marker, its subject and the whole item's text."""

    release: str
    marker: str
    subject: str
    text: str


def releases(path: Path = CHANGELOG) -> list[tuple[str, str | None]]:
    """(version, date) of every `## [version] - date` heading, newest first; Unreleased has no date."""
    return [
        (m["version"], m["date"]) for line in path.read_text().splitlines() if (m := _RELEASE.match(line)) is not None
    ]


def newest_release(path: Path = CHANGELOG) -> str:
    """The newest released version (the first dated heading)."""
    return next(version for version, date in releases(path) if date is not None)


def _items(path: Path) -> list[tuple[str, str]]:
    """(release, list item text with its continuation lines joined) for every `- ` item under a release heading."""
    items: list[tuple[str, str]] = []
    release: str | None = None
    for line in path.read_text().splitlines():
        if m := _RELEASE.match(line):
            release = m["version"]
        elif release is not None and line.startswith("- "):
            items.append((release, line))
        elif release is not None and items and items[-1][0] == release and line.startswith("  ") and line.strip():
            items[-1] = (release, f"{items[-1][1]} {line.strip()}")
    return items


def entries(path: Path = CHANGELOG) -> list[Entry]:
    """Every item under a release that starts with a bold marker. An unknown marker is an error: a misspelt one
    would otherwise announce nothing."""
    found = []
    for release, item in _items(path):
        if (m := _ENTRY.match(item)) is None:
            continue
        if m["marker"] not in MARKERS:
            raise ValueError(
                f"CHANGELOG.md [{release}]: unknown marker **{m['marker']}**; one of: {', '.join(MARKERS)}"
            )
        found.append(Entry(release, m["marker"], m["subject"], item))
    return found


def entries_since(baseline_version: str | None, path: Path = CHANGELOG) -> list[Entry]:
    """The entries of every release newer than `baseline_version` (all of them when None), Unreleased included."""
    return [
        e
        for e in entries(path)
        if baseline_version is None or e.release == UNRELEASED or Version(e.release) > Version(baseline_version)
    ]
