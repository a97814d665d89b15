"""The upstream files vendored as test data (tests/fixtures/upstream) are the bytes SOURCES.md says they are, each with
its source and licence, and no test reads anything outside the repository."""

from __future__ import annotations

import re

from tests.upstream import REPO_ROOT, UPSTREAM, git_blob_id, sources, written_here

# Ours, not copies: the table itself and the collected NOTICE texts.
_NOT_COPIES = {"SOURCES.md", "NOTICE"}


def test_every_vendored_file_is_the_blob_its_row_names() -> None:
    rows = {name: row.blob for name, row in sources().items()}
    rows |= {name: row.blob for name, row in written_here().items()}
    files = {p.relative_to(UPSTREAM).as_posix() for p in UPSTREAM.rglob("*") if p.is_file()} - _NOT_COPIES
    assert set(rows) == files, {"rows without a file": set(rows) - files, "files without a row": files - set(rows)}
    changed = {name: blob for name, blob in rows.items() if git_blob_id((UPSTREAM / name).read_bytes()) != blob}
    assert not changed, f"not the bytes SOURCES.md records (git hash-object differs): {changed}"


def test_every_row_names_a_commit_a_release_and_the_licence_shipped_beside_it() -> None:
    for row in sources().values():
        assert re.fullmatch(r"[0-9a-f]{40}", row.commit) and re.fullmatch(r"[0-9a-f]{40}", row.blob), row
        assert re.fullmatch(r"v?\d+\.\d+\.\d+", row.release), row
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", row.repository), row
        assert row.license == "Apache-2.0", row
    licence = (UPSTREAM / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    notice = (UPSTREAM / "NOTICE").read_text()
    # The two repositories among them that carry a NOTICE file (section 4(d) of the licence).
    assert "Copyright Amazon.com, Inc. or its affiliates." in notice and "Copyright 2015 CoreOS, Inc" in notice


def test_every_file_written_here_names_the_pages_it_was_written_from() -> None:
    """A file written from documentation (no upstream file exists) says so in its first line, and its row cites each
    page as repository@commit:path, with the date it was read."""
    rows = written_here()
    assert rows, "SOURCES.md lists the files written from documentation"
    for row in rows.values():
        assert row.file not in sources(), f"{row.file} is a copy and a file written here at once"
        for page in row.written_from:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}:[\w./-]+", page), page
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row.read), row
        first = (UPSTREAM / row.file).read_text().splitlines()[0]
        assert "NOT an upstream file" in first, (row.file, first)


def test_the_helper_computes_what_git_hash_object_prints() -> None:
    # `printf 'hello\n' | git hash-object --stdin`
    assert git_blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    assert git_blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def test_no_test_reads_outside_the_repository() -> None:
    """A clone has nothing beside it: no test reads a sibling folder of the repository (../shared or the like)."""
    outside = re.compile(r"""(['"]\.\./shared|parents?(\[\d\])?\)?\s*/\s*['"]shared['"]|(REPO_ROOT|ROOT)\.parent\b)""")
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
        for path in sorted((REPO_ROOT / "tests").glob("*.py"))
        if path.name != "test_upstream_files.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if outside.search(line) and not line.lstrip().startswith("#")
    ]
    assert not offenders, offenders
