"""The examples on the documentation pages (and the README), as the tests run them:

- ```console blocks: each `$ llm-eks ...` line is run through the CLI's own entry point and what it prints must
  equal the lines below it, where a line `...` stands for any number of lines. One pipe is understood,
  `| head -N`, as the shell would apply it. Only llm-eks runs: a block starts with `$ llm-eks`, and any other line
  (even one starting with `$`) is output.
- ```pycon blocks: interactive sessions, run by the standard library's doctest.
- ```python blocks: run top to bottom, each page's blocks in one namespace. A block that only includes a file
  (`--8<-- "examples/<name>/app.py"`) names an example app, which tests/test_examples.py synthesizes.

Fences are read with markdown-it-py (CommonMark), the parser behind MkDocs' own toolchain here; the console format
is our own convention, so its few rules are spelled out above rather than borrowed from a doctest dialect that does
not know shell pipes.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
ELLIPSIS = "..."
PROMPT = "$ llm-eks "
_INCLUDE = re.compile(r'^--8<-- "([^"]+)"$')


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language, text and first line (1-based, for error messages)."""

    page: Path
    lang: str
    text: str
    line: int

    @property
    def where(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"


@dataclass(frozen=True)
class Command:
    """One `$ ...` line of a console block and the output the page shows for it."""

    block: Block
    argv: tuple[str, ...]
    head: int | None
    expected: tuple[str, ...]


def pages() -> list[Path]:
    """The README and every page of the site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    tokens = MarkdownIt("commonmark").parse(page.read_text())
    return [
        Block(page, t.info.strip().split()[0] if t.info.strip() else "", t.content, (t.map or (0, 0))[0] + 1)
        for t in tokens
        if t.type == "fence"
    ]


def commands(block: Block) -> list[Command]:
    """The commands of a console block; a line ending in a backslash continues on the next."""
    out: list[Command] = []
    lines = block.text.rstrip("\n").split("\n")
    if not lines[0].startswith(PROMPT):
        raise ValueError(f"{block.where}: console blocks run llm-eks commands only, not {lines[0]!r}")
    i = 0
    while i < len(lines):
        command = lines[i][2:]
        while command.endswith("\\"):
            i += 1
            command = command[:-1] + lines[i].strip()
        i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith(PROMPT):
            expected.append(lines[i].rstrip())
            i += 1
        while expected and not expected[-1]:  # the blank line between two commands
            expected.pop()
        argv, _, pipe = command.partition("|")
        head = None
        if pipe:
            words = shlex.split(pipe)
            if len(words) != 2 or words[0] != "head" or not re.fullmatch(r"-\d+", words[1]):
                raise ValueError(f"{block.where}: only `| head -N` may follow a command, not {pipe.strip()!r}")
            head = int(words[1][1:])
        words = shlex.split(argv)
        out.append(Command(block, tuple(words[1:]), head, tuple(expected)))
    return out


def run(command: Command) -> list[str]:
    """What the command prints (stdout, then stderr), as the page would show it."""
    from llm_eks.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), _cwd(ROOT):
        main(list(command.argv))
    lines = (stdout.getvalue() + stderr.getvalue()).rstrip("\n").split("\n")
    lines = [line.rstrip() for line in lines]
    return lines if command.head is None else lines[: command.head]


def matches(expected: tuple[str, ...], actual: list[str]) -> bool:
    """`expected` equals `actual`, where an expected line `...` stands for any number of lines."""
    if not expected:
        return not actual
    if expected[0] == ELLIPSIS:
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


def run_doctest(block: Block) -> doctest.TestResults:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.text, {}, block.where, str(block.page), block.line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out = io.StringIO()
    runner.run(test, out=out.write)
    if runner.failures:
        raise AssertionError(out.getvalue())
    return runner.summarize(verbose=False)


def included_file(block: Block) -> Path | None:
    """The file a block only includes (`--8<-- "path"`), or None for a block of code."""
    match = _INCLUDE.match(block.text.strip())
    return ROOT / match.group(1) if match else None


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    import os

    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)
