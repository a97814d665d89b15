"""checkov on what the default app synthesizes: every CloudFormation template and every Kubernetes object we apply.

Zero failed checks; each suppression sits on its own resource (template `Metadata.checkov.skip` or the object's
`checkov.io/skip*` annotation) with a one-line reason. checkov runs from its own venv (`make test` builds
`.venv-checkov` from requirements-checkov.txt), offline (`--skip-download`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ENVIRONMENTS, REPO_ROOT, Synthesized

CHECKOV = REPO_ROOT / ".venv-checkov" / "bin" / "checkov"


@pytest.fixture(scope="module")
def checkov_results(synthesized: Synthesized, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    if not CHECKOV.exists():
        pytest.skip(f"{CHECKOV} is missing: `make test` installs it from requirements-checkov.txt")
    assert synthesized.error is None, synthesized.error
    folder = tmp_path_factory.mktemp("checkov")
    for env in ENVIRONMENTS:
        shutil.copy(synthesized.outdir / f"LlmEks-{env}.template.json", folder)
        for path in sorted((synthesized.outdir / "manifests" / env).glob("*.yaml")):
            if path.name != "helm-releases.yaml":  # a listing of Helm values, not objects
                shutil.copy(path, folder / f"{env}-{path.name}")
    run = subprocess.run(
        [
            *(str(CHECKOV), "-d", str(folder), "--framework", "cloudformation", "kubernetes"),
            *("--skip-download", "--quiet", "--compact", "-o", "json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode in (0, 1), run.stderr[-2000:]
    results = json.loads(run.stdout)
    return results if isinstance(results, list) else [results]


def test_checkov_scans_templates_and_kubernetes_objects(checkov_results: list[dict[str, Any]]) -> None:
    scanned = {r["check_type"]: r["summary"]["resource_count"] for r in checkov_results}
    assert scanned.keys() == {"cloudformation", "kubernetes"}
    assert all(count > 0 for count in scanned.values()), scanned


def test_checkov_has_no_failed_check(checkov_results: list[dict[str, Any]]) -> None:
    failed = sorted(
        f"{f['check_id']} {f['resource']} ({Path(f['file_path']).name}): {f['check_name']}"
        for r in checkov_results
        for f in r["results"]["failed_checks"]
    )
    assert not failed, "\n".join(failed)


def test_every_checkov_suppression_has_a_one_line_reason(checkov_results: list[dict[str, Any]]) -> None:
    skipped = [s for r in checkov_results for s in r["results"]["skipped_checks"]]
    assert skipped, "expected the documented suppressions (custom-resource Lambdas, SQS-managed SSE)"
    for s in skipped:
        reason = s.get("check_result", {}).get("suppress_comment", "")
        assert reason and reason != "No comment provided", (s["check_id"], s["resource"])
        assert "\n" not in reason and len(reason) <= 160, (s["check_id"], reason)
