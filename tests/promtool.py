"""Running Prometheus's own rule unit tests: `promtool test rules` on a rules file and a test file written here.

promtool must be on PATH (`make test` and .ci/run see to it); without it the test fails with one line saying how to
install it, never skips: CI must run these. Debian 12 ships promtool 2.42, which compares sample values exactly
(no `fuzzy_compare`) and evaluates a range `[10m]` as closed at both ends, as every Prometheus 2.x does.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

INSTALL = (
    "promtool not found on PATH; install it: apt-get install -y --no-install-recommends prometheus (Debian/Ubuntu), "
    "brew install prometheus (macOS)"
)


def system_tool(name: str, install: str) -> str:
    """The executable `name` on PATH; the test fails with `install` (how to install it) when there is none."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(install, pytrace=False)
    return found


def promtool() -> str:
    """The promtool executable; the test fails with how to install it when there is none."""
    return system_tool("promtool", INSTALL)


class _NoAliases(yaml.SafeDumper):
    """Writes a repeated input series out again instead of as a YAML alias, so each test reads on its own."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_NoAliases, sort_keys=False, width=120)


def run_rule_tests(folder: Path, name: str, groups: list[dict[str, Any]], tests: list[dict[str, Any]]) -> str:
    """Write `groups` as `<name>-rules.yaml` and `tests` as `<name>-test.yaml` under `folder` (evaluation every
    minute), run `promtool test rules` on them and return its output; an AssertionError with that output when a test
    fails."""
    rules = folder / f"{name}-rules.yaml"
    rules.write_text(_dump({"groups": groups}))
    test_file = folder / f"{name}-test.yaml"
    test_file.write_text(_dump({"rule_files": [rules.name], "evaluation_interval": "1m", "tests": tests}))
    done = subprocess.run(
        [promtool(), "test", "rules", test_file.name], cwd=folder, capture_output=True, text=True, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"promtool test rules {test_file}:\n{output}"
    return output
