"""Text from the code (comments, help strings, docstrings) written into Markdown that GitHub and MkDocs both render:
a table cell keeps its pipes, and a placeholder such as `<version>` outside a code span stays text instead of
becoming an HTML tag that both renderers drop."""

from __future__ import annotations

import html
import re

_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def escape_placeholders(text: str) -> str:
    """`text` with `<`, `>` and `&` escaped outside its code spans (inside them Markdown shows them as written)."""
    out, last = [], 0
    for match in _CODE_SPAN.finditer(text):
        out += [html.escape(text[last : match.start()], quote=False), match.group(0)]
        last = match.end()
    return "".join([*out, html.escape(text[last:], quote=False)])


def cell(text: str) -> str:
    """One table cell: on one line, its pipes escaped, its placeholders kept."""
    return escape_placeholders(" ".join(text.split())).replace("|", "\\|")
