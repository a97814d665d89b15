"""Run checkov (its own venv, `make test` installs it from requirements-checkov.txt) and return its JSON results."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable, Mapping
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


def gather(folder: Path, templates: Iterable[Path], manifests: Mapping[str, Path]) -> Path:
    """Copy CloudFormation templates and each environment's review YAML (`<env>-<file>`) into `folder`, the one
    folder checkov scans; helm-releases.yaml is a listing of Helm values, not objects, and stays out."""
    folder.mkdir(parents=True, exist_ok=True)
    for template in templates:
        shutil.copy(template, folder / template.name)
    for env, directory in manifests.items():
        for path in sorted(directory.glob("*.yaml")):
            if path.name != "helm-releases.yaml":
                shutil.copy(path, folder / f"{env}-{path.name}")
    return folder


def failed_checks(results: list[dict[str, Any]]) -> list[str]:
    """`check resource (file): name` for every failed check."""
    return sorted(
        f"{f['check_id']} {f['resource']} ({Path(f['file_path']).name}): {f['check_name']}"
        for r in results
        for f in r["results"]["failed_checks"]
    )


def suppressions_without_a_reason(results: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(check, resource) of every suppression whose reason is missing, or not one line of at most 160 characters."""
    bad = []
    for r in results:
        for s in r["results"].get("skipped_checks", []):
            reason = s.get("check_result", {}).get("suppress_comment", "")
            if not reason or reason == "No comment provided" or "\n" in reason or len(reason) > 160:
                bad.append((s["check_id"], s["resource"]))
    return bad
