"""MkDocs hooks (mkdocs.yml `hooks:`): each page's `<!-- generated: NAME -->` marker becomes the Markdown the code
generates for NAME, so the reference pages cannot drift from the code they describe."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# MkDocs loads this file by path and restores sys.path once it has run: the repository root makes `docgen` and
# `benchmarks` importable while the generators are imported here, at load time.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from docgen.accuracy import (  # noqa: E402
    kv_accuracy_table,
    latency_accuracy_table,
    latency_rules,
    latency_summary,
)
from docgen.cli_reference import cli_reference  # noqa: E402
from docgen.compatibility import compatibility_table  # noqa: E402
from docgen.config_reference import config_reference  # noqa: E402

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)


def generators() -> dict[str, Callable[[], str]]:
    return {
        "configuration": config_reference,
        "cli": cli_reference,
        "compatibility": compatibility_table,
        "kv-accuracy": kv_accuracy_table,
        "latency-accuracy": latency_accuracy_table,
        "latency-rules": latency_rules,
        "latency-summary": latency_summary,
    }


def expand(markdown: str) -> str:
    """`markdown` with every marker replaced; an unknown marker is an error, not a silent gap."""
    known = generators()

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in known:
            raise ValueError(f"<!-- generated: {name} -->: no generator of that name (known: {', '.join(known)})")
        return known[name]().rstrip()

    return MARKER.sub(fill, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return expand(markdown)
