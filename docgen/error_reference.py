"""The errors page: every stable error code (llm_eks/error_codes.py), grouped by area, with its meaning, fix and the
page that explains the setting."""

from __future__ import annotations

import re
from pathlib import Path

from docgen.markdown import escape_placeholders
from llm_eks.error_codes import AREAS, ErrorCode, all_codes, area

ROOT = Path(__file__).resolve().parents[1]


def page_title(relative: str) -> str:
    """The first `# ` heading of docs/`relative`."""
    text = (ROOT / "docs" / relative).read_text()
    heading = re.search(r"^# (.+)$", text, re.M)
    if heading is None:
        raise ValueError(f"docs/{relative} has no '# ' heading to name it by")
    return heading.group(1).strip()


def link(relative: str) -> str:
    """A link from the errors page (docs/reference/) to docs/`relative`, named by that page's title."""
    return f"[{page_title(relative)}](../{relative})"


def entry(code: ErrorCode) -> str:
    see = f" See {link(code.see)}." if code.see else ""
    return (
        f"### {code.id}: {code.title} {{#{code.id.lower()}}}\n\n"
        f"**Meaning.** {escape_placeholders(code.meaning)}\n\n"
        f"**Fix.** {escape_placeholders(code.fix)}{see}\n"
    )


def errors_reference() -> str:
    """One section per area, one entry per code, by number."""
    parts = []
    for key, name in AREAS.items():
        codes = [c for c in all_codes() if area(c) == name]
        if not codes:
            continue
        first = f"LLMEKS-E{key}00"
        parts.append(f"## {name} ({first} to LLMEKS-E{key}99)\n")
        parts.extend(entry(c) for c in codes)
    return "\n".join(parts)
