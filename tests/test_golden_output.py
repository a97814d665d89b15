"""The default app's templates and review YAML equal the golden files (tests/golden_output.py says how to update)."""

from __future__ import annotations

import difflib

from tests.conftest import ENVIRONMENTS, Synthesized
from tests.golden_output import GOLDEN, collect


def test_synth_output_equals_the_golden_files(synthesized: Synthesized) -> None:
    assert synthesized.error is None, synthesized.error
    actual = collect(synthesized.outdir, ENVIRONMENTS)
    expected = {str(p.relative_to(GOLDEN)): p.read_text() for p in GOLDEN.rglob("*") if p.is_file()}
    assert sorted(actual) == sorted(expected), "files differ; `make golden` rewrites them"
    changed = [name for name in sorted(actual) if actual[name] != expected[name]]
    diff = "".join(
        line
        for name in changed[:3]
        for line in difflib.unified_diff(
            expected[name].splitlines(True), actual[name].splitlines(True), f"golden/{name}", f"synth/{name}", n=2
        )
    )
    assert not changed, f"{len(changed)} file(s) changed: {changed}; `make golden` rewrites them\n{diff[:6000]}"
