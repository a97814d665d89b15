"""The generated parts of the pages, and the MkDocs hooks (mkdocs.yml `hooks:`) that keep them true.

A page holds what the code generates for NAME between `<!-- generated: NAME -->` and `<!-- end of generated: NAME -->`,
committed, so GitHub shows the tables too; `make reference` (python -m docgen.hooks) rewrites them, a test fails while
one is stale, and the site build regenerates them anyway. After the Markdown is converted, a placeholder that reached
the HTML as an unknown tag (`<prefix>` in a docstring) is escaped back into text: browsers drop unknown tags."""

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
    neuron_latency_accuracy,
    pd_accuracy_table,
    pd_rules_section,
)
from docgen.cli_reference import cli_reference  # noqa: E402
from docgen.cold_start import cold_start_table  # noqa: E402
from docgen.compatibility import compatibility_table  # noqa: E402
from docgen.config_reference import config_reference  # noqa: E402
from docgen.error_reference import errors_reference  # noqa: E402

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)
_SECTION = re.compile(r"^(<!-- generated: ([a-z-]+) -->\n)(.*?)^(<!-- end of generated: \2 -->)$", re.M | re.S)
# The elements a page may hold (HTML's, and the SVG Material draws its icons with); any other tag is a placeholder.
_ELEMENTS = """a abbr address area article aside audio b base bdi bdo blockquote body br button canvas caption cite
code col colgroup data datalist dd del details dfn dialog div dl dt em embed fieldset figcaption figure footer form h1
h2 h3 h4 h5 h6 head header hgroup hr html i iframe img input ins kbd label legend li link main map mark menu meta meter
nav noscript object ol optgroup option output p picture pre progress q rp rt ruby s samp script search section select
slot small source span strong style sub summary sup table tbody td template textarea tfoot th thead time title tr track
u ul var video wbr svg path g circle rect line polyline polygon defs use symbol"""
HTML_ELEMENTS = frozenset(_ELEMENTS.split())
_TAG = re.compile(r"</?([A-Za-z][\w.-]*)(?:\s[^<>]*)?/?>")


def generators() -> dict[str, Callable[[], str]]:
    return {
        "configuration": config_reference,
        "cli": cli_reference,
        "compatibility": compatibility_table,
        "cold-start": cold_start_table,
        "errors": errors_reference,
        "kv-accuracy": kv_accuracy_table,
        "latency-accuracy": latency_accuracy_table,
        "latency-rules": latency_rules,
        "latency-summary": latency_summary,
        "neuron-latency-accuracy": neuron_latency_accuracy,
        "pd-rules": pd_rules_section,
        "pd-accuracy": pd_accuracy_table,
    }


def expand(markdown: str) -> str:
    """`markdown` with every generated section written anew; a marker without its end, or of an unknown name, is an
    error, not a silent gap."""
    known = generators()
    for name in MARKER.findall(markdown):
        if name not in known:
            raise ValueError(f"<!-- generated: {name} -->: no generator of that name (known: {', '.join(known)})")
    if len(_SECTION.findall(markdown)) != len(MARKER.findall(markdown)):
        raise ValueError("a <!-- generated: NAME --> marker without its <!-- end of generated: NAME --> line")
    return _SECTION.sub(lambda m: f"{m.group(1)}\n{known[m.group(2)]().strip()}\n\n{m.group(4)}", markdown)


def pages_with_sections() -> list[Path]:
    return sorted(p for p in (ROOT / "docs").rglob("*.md") if MARKER.search(p.read_text()))


def escape_unknown_tags(html: str) -> str:
    """`html` with every tag that is no HTML element written as text (`<version>` stays visible)."""

    def fix(match: re.Match[str]) -> str:
        if match.group(1).lower() in HTML_ELEMENTS:
            return match.group(0)
        return match.group(0).replace("<", "&lt;").replace(">", "&gt;")

    return _TAG.sub(fix, html)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """The page with its sections generated anew, without the marker lines (the site needs none)."""
    return re.sub(r"^<!-- (end of )?generated: [a-z-]+ -->\n", "", expand(markdown), flags=re.M)


def on_page_content(html: str, **_: Any) -> str:
    return escape_unknown_tags(html)


def main() -> None:
    """Rewrite the generated sections of every page (`make reference`)."""
    for page in pages_with_sections():
        text = page.read_text()
        if (fresh := expand(text)) != text:
            page.write_text(fresh)
            print(f"{page.relative_to(ROOT)}: regenerated")


if __name__ == "__main__":
    main()
