"""Run checkov (its own venv, `make test` installs it from requirements-checkov.txt) and return its JSON results."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import REPO_ROOT

CHECKOV = REPO_ROOT / ".venv-checkov" / "bin" / "checkov"


def run_checkov(target: Path, *frameworks: str) -> list[dict[str, Any]] | None:
    """checkov's results for a file or a folder under `frameworks`; None when checkov is not installed."""
    if not CHECKOV.exists():
        return None
    run = subprocess.run(
        [
            *(str(CHECKOV), "-d" if target.is_dir() else "-f", str(target), "--framework", *frameworks),
            *("--skip-download", "--compact", "-o", "json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode in (0, 1), run.stderr[-2000:]
    results = json.loads(run.stdout)
    return results if isinstance(results, list) else [results]
