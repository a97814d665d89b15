"""The complexity gate: ruff's McCabe check (C901) at the project's own setting fails a function above 20 and passes
one at 20, so `make test` (ruff check over src, tests, examples, benchmarks and docgen) keeps every function below."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

RUFF = Path(sys.executable).with_name("ruff")


def _function(branches: int) -> str:
    """A function of cyclomatic complexity 1 + `branches` (one `if` each)."""
    lines = ["def f(x: int) -> int:"]
    lines += [f"    if x == {i}:\n        return {i}" for i in range(branches)]
    return "\n".join([*lines, "    return -1", ""])


def _check(tmp_path: Path, complexity: int) -> subprocess.CompletedProcess[str]:
    source = tmp_path / f"c{complexity}.py"
    source.write_text(_function(complexity - 1))
    return subprocess.run(
        [str(RUFF), "check", "--config", str(REPO_ROOT / "pyproject.toml"), "--select", "C901", str(source)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_function_above_20_fails_the_gate_and_one_at_20_passes(tmp_path: Path) -> None:
    above = _check(tmp_path, 21)
    assert above.returncode == 1
    assert "C901 `f` is too complex (21 > 20)" in above.stdout
    at = _check(tmp_path, 20)
    assert at.returncode == 0, at.stdout
