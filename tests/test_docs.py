"""The documentation site: it builds strictly (a broken link, anchor or reference fails), its generated pages come
from the code, and every example on its pages and in the README runs and prints what the page shows."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from docgen import examples
from docgen.compatibility import ungrouped
from docgen.config_reference import SECTIONS, all_field_comments
from docgen.hooks import HTML_ELEMENTS, MARKER, escape_unknown_tags, expand, generators, pages_with_sections
from docgen.markdown import escape_placeholders
from tests.conftest import REPO_ROOT

ALL_BLOCKS = [block for page in examples.pages() for block in examples.blocks(page)]
COMMANDS = [command for block in ALL_BLOCKS if block.lang == "console" for command in examples.commands(block)]


@pytest.mark.synth
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    result = subprocess.run(
        # No --quiet: with it MkDocs drops warnings before strict mode counts them, and a broken link passes.
        [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    config = (tmp_path / "site" / "reference" / "configuration.html").read_text()
    assert "weights_bucket" in config and "generated:" not in config
    assert "llm-eks images snapshot" in (tmp_path / "site" / "reference" / "cli.html").read_text()
    # A placeholder such as <version> reaches the page as text, never as a tag the browser drops.
    swallowed = {
        f"{page.relative_to(tmp_path / 'site')}: <{tag}>"
        for page in (tmp_path / "site").rglob("*.html")
        for tag in _tags(page.read_text())
        if tag not in HTML_ELEMENTS
    }
    assert not swallowed, sorted(swallowed)
    compatibility = (tmp_path / "site" / "reference" / "compatibility.html").read_text()
    assert "vllm/vllm-openai:v&lt;version&gt;" in compatibility and "lws:&lt;tag&gt;" in compatibility


def _tags(html: str) -> set[str]:
    """The names of the tags in a page, as a browser's parser reads them."""
    found: set[str] = set()

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: object) -> None:
            found.add(tag)

    Tags().feed(html)
    return found


def test_a_placeholder_stays_text_and_an_element_stays_html() -> None:
    assert escape_unknown_tags("<p>image:<tag> or <code>&lt;x&gt;</code><br/></p>") == (
        "<p>image:&lt;tag&gt; or <code>&lt;x&gt;</code><br/></p>"
    )
    assert escape_placeholders("v<version> in `a <b>` | c") == "v&lt;version&gt; in `a <b>` | c"


def test_the_generated_sections_are_fresh() -> None:
    """GitHub shows the committed tables: each must be what the code generates now."""
    stale = [str(p.relative_to(REPO_ROOT)) for p in pages_with_sections() if expand(p.read_text()) != p.read_text()]
    assert not stale, f"stale generated sections in {stale}: run `make reference` and commit the pages"
    assert len(pages_with_sections()) == 6


# What the product's pages never name: the project's own work items and the tools its authors searched with.
INTERNAL = re.compile(
    r"\b[Ii]ssues? [0-9]+\b|\b[Ww]ave [0-9]+\b|\bfile ids? [0-9]|\bsearch index\b|"
    r"\.\./shared\b|\bshared/(schemas|reference)"
)


def test_no_page_names_internal_work_items() -> None:
    """README, every page and every generated section speak of the product only (upstream links such as
    vllm-project/vllm#11005 are fine)."""
    texts = {str(p.relative_to(REPO_ROOT)): p.read_text() for p in examples.pages()}
    texts |= {f"generated: {name}": generate() for name, generate in generators().items()}
    found = [f"{where}: {m.group(0)}" for where, text in texts.items() for m in INTERNAL.finditer(text)]
    assert not found, found


def test_the_readme_is_a_front_door() -> None:
    assert len((REPO_ROOT / "README.md").read_text().splitlines()) <= 250


@pytest.mark.parametrize("command", COMMANDS, ids=[f"{c.block.where} {' '.join(c.argv)}" for c in COMMANDS])
def test_console_example_prints_what_the_page_shows(command: examples.Command) -> None:
    actual = examples.run(command)
    assert examples.matches(command.expected, actual), (
        f"{command.block.where}: `llm-eks {' '.join(command.argv)}` now prints:\n" + "\n".join(actual)
    )


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.lang == "pycon"], ids=lambda b: b.where)
def test_interactive_example_runs(block: examples.Block) -> None:
    assert examples.run_doctest(block).attempted > 0


@pytest.mark.synth
@pytest.mark.parametrize("page", sorted({b.page for b in ALL_BLOCKS if b.lang == "python"}), ids=lambda p: p.name)
def test_python_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each page's Python blocks, top to bottom in one namespace, in an empty folder (nothing lands in the repo)."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs_example"}
    for block in (b for b in ALL_BLOCKS if b.page == page and b.lang == "python"):
        included = examples.included_file(block)
        if included is not None:
            assert included.is_file(), f"{block.where}: {included} does not exist"
            continue
        exec(compile(block.text, block.where, "exec"), namespace)


def test_included_code_is_an_example_the_tests_synthesize() -> None:
    from tests.test_examples import (
        AUTO_MODE_EXAMPLE,
        CONFIG_EXAMPLES,
        CONSTRUCT_EXAMPLES,
        EXTEND_EXAMPLE,
        PIPELINE_EXAMPLE,
    )

    # own_app runs against the installed wheel (tests/test_package.py); the pipeline in tests/test_pipeline.py, EKS
    # Auto Mode's in tests/test_auto_mode_stack.py, the cdk8s-plus extension in tests/test_extend_chart.py.
    tested = {*CONFIG_EXAMPLES, *CONSTRUCT_EXAMPLES, PIPELINE_EXAMPLE, AUTO_MODE_EXAMPLE, EXTEND_EXAMPLE, "own_app"}
    for block in ALL_BLOCKS:
        if (included := examples.included_file(block)) is not None:
            assert included.relative_to(REPO_ROOT / "examples").parts[0] in tested, block.where


def test_the_ellipsis_matches_any_lines() -> None:
    assert examples.matches(("a", "...", "d"), ["a", "b", "c", "d"])
    assert examples.matches(("a", "...", "d"), ["a", "d"])
    assert not examples.matches(("a", "...", "d"), ["a", "b"])
    assert not examples.matches(("a",), ["a", "b"])


def test_console_blocks_refuse_what_they_cannot_run(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```console\n$ rm -rf /tmp/x\n```\n")
    (block,) = examples.blocks(page)
    with pytest.raises(ValueError, match="console blocks run llm-eks commands only"):
        examples.commands(block)
    page.write_text("```console\n$ llm-eks plan --env dev | grep KV\n```\n")
    (block,) = examples.blocks(page)
    with pytest.raises(ValueError, match=r"only `\| head -N` may follow a command"):
        examples.commands(block)


def test_every_marker_on_the_pages_has_a_generator() -> None:
    known = generators()
    for page in examples.pages():
        for name in MARKER.findall(page.read_text()):
            assert name in known, f"{page.name}: <!-- generated: {name} -->"
    with pytest.raises(ValueError, match="no generator of that name"):
        expand("<!-- generated: nothing -->")


def test_every_config_key_says_why_it_defaults_as_it_does() -> None:
    """The standard the configuration reference rests on: each field of the typed config carries a one-line reason
    (a comment above it), which the generated page shows."""
    reasons = all_field_comments()
    missing = [
        f"{cls.__name__}.{f.name}"
        for _, cls in SECTIONS
        for f in dataclasses.fields(cls)
        if not f.metadata.get("derived")
        and f.name != "name"
        and not any(reasons.get((c.__name__, f.name)) for c in cls.__mro__)
    ]
    assert not missing, missing


def test_the_keys_of_the_configure_guide_exist() -> None:
    """The hand-written table of docs/getting-started/configure.md names keys of the typed config only."""
    from llm_eks.config.environment import EnvironmentConfig, WorkloadConfig

    fields = {
        "": {f.name for f in dataclasses.fields(EnvironmentConfig)},
        "workload.": {f.name for f in dataclasses.fields(WorkloadConfig)},
    }
    text = (REPO_ROOT / "docs" / "getting-started" / "configure.md").read_text()
    rows = [line.split("|")[1] for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) > 30
    for cell in rows:
        names = re.findall(r"`([a-z_.]+)`", cell)
        scope = "workload." if names[0].startswith("workload.") else ""
        for name in names:
            assert name.removeprefix(scope) in fields[scope], f"configure.md names `{name}`, which config lacks"


def test_every_pinned_version_is_in_the_compatibility_table() -> None:
    assert ungrouped() == []
