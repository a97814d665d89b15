"""The review YAML a person reads: scripts, dashboards, config files and user data as block literals, and the objects
it shows are the objects the template applies."""

from __future__ import annotations

import yaml

from llm_eks.infra.review import dump_all
from tests.conftest import ENVIRONMENTS, Synthesized
from tests.review_yaml import quoted_multiline_scalars


def test_no_string_with_a_line_break_is_written_quoted(synthesized: Synthesized) -> None:
    assert synthesized.error is None, synthesized.error
    quoted = [
        f"{env}/{path.name}:{scalar.line}"
        for env in ENVIRONMENTS
        for path in sorted((synthesized.outdir / "manifests" / env).glob("*.yaml"))
        for scalar in quoted_multiline_scalars(path.read_text())
    ]
    assert quoted == []


def test_user_data_and_scripts_read_line_for_line(synthesized: Synthesized) -> None:
    pools = (synthesized.outdir / "manifests" / "dev" / "01-node-pools.yaml").read_text()
    assert "  userData: |\n    # Parallel image pull and unpack (SOCI snapshotter)" in pools
    assert '    [settings.container-runtime]\n    snapshotter = "soci"\n' in pools
    vllm = (synthesized.outdir / "manifests" / "dev" / "02-vllm.yaml").read_text()
    assert "\n          def log(mode: str, message: str) -> None:\n" in vllm  # the compile-cache program


def test_block_literals_hold_the_same_strings() -> None:
    """What PyYAML writes as a block literal loads back as the very same string (so the same object)."""
    values = [
        "#!/bin/sh\necho one\n",  # a final line break: `|`
        "no final line break\nsecond",  # `|-`
        "two final line breaks\n\n",  # `|+`
        "  indented first line\nsecond\n",  # an indentation indicator
        '{\n  "panels": []\n}',
        "a quote ' and \" and a colon: here\n# and a comment\n",
    ]
    text = dump_all([{"data": {str(i): v for i, v in enumerate(values)}}])
    assert yaml.safe_load(text) == {"data": {str(i): v for i, v in enumerate(values)}}
    assert quoted_multiline_scalars(text) == []
    assert "&id" not in dump_all([{"a": values, "b": values}])  # no anchors for a shared list


def test_a_string_a_block_literal_cannot_hold_stays_exact() -> None:
    """A line ending in a space, or a tab, cannot be written as a block literal by PyYAML: it quotes the string
    instead, so the value never changes (and the measurement counts it)."""
    values = ["trailing space \nnext\n", "tab\tinside\nnext\n"]
    text = dump_all([{"v": values}])
    assert yaml.safe_load(text) == {"v": values}
    assert len(quoted_multiline_scalars(text)) == 2
