"""The comment lines written above a statement: the one-line reasons the config dataclasses and versions.py give
for each default. Read with the standard library's tokenizer and `ast`, which know where comments and statements
are; nothing here guesses at Python syntax."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path


def _comment_lines(source: str) -> dict[int, str]:
    """Line number -> the text of a comment that is alone on its line."""
    out: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and token.line.strip().startswith("#"):
            out[token.start[0]] = token.string.lstrip("#").strip()
    return out


def _above(line: int, comments: dict[int, str]) -> str:
    """The block of comment lines ending right above `line`, joined into one paragraph. A section heading
    (`# --- Title ...`) ends the block: it speaks of the section, not of the statement under it."""
    block: list[str] = []
    line -= 1
    while line in comments and not comments[line].startswith("---"):
        block.insert(0, comments[line])
        line -= 1
    return " ".join(part for part in block if part)


def field_comments(path: Path) -> dict[tuple[str, str], str]:
    """(class, field) -> the comment above the field, for every annotated field of every class in `path` ("" where
    the field has none)."""
    source = path.read_text()
    comments = _comment_lines(source)
    out: dict[tuple[str, str], str] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                out[(node.name, item.target.id)] = _above(item.lineno, comments)
    return out


def assignment_comments(path: Path) -> list[tuple[str, str]]:
    """(name, comment above it) for every module-level NAME = ... of `path`, in source order."""
    source = path.read_text()
    comments = _comment_lines(source)
    out: list[tuple[str, str]] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out.append((node.targets[0].id, _above(node.lineno, comments)))
    return out
