"""The wheel a user installs: it holds every module, imports outside the repo, and runs the own_app example app."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

SRC = REPO_ROOT / "src"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the wheel from the repo and unpack it (no deps: they are the venv's) into a folder outside it."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO_ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = dist.glob("llm_eks-*.whl")
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    # Build artefacts must not be left in the repo.
    shutil.rmtree(REPO_ROOT / "build", ignore_errors=True)
    return target


def run_outside(installed: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(installed), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_wheel_holds_every_module(installed: Path) -> None:
    in_src = {p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py")}
    in_wheel = {p.relative_to(installed).as_posix() for p in installed.rglob("*.py")}
    assert in_src <= in_wheel, sorted(in_src - in_wheel)


def test_every_module_imports_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    modules = sorted(
        ".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        for p in SRC.rglob("*.py")
        # Lambda code runs in Lambda, with boto3 only; importing `llm_eks.cli.__main__` runs the CLI.
        if "handler" not in p.parent.name and p.name != "__main__.py"
    )
    code = (
        "import importlib, sys, llm_eks\n"
        f"assert llm_eks.__file__.startswith({str(installed)!r}), llm_eks.__file__\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print('ok')"
    )
    result = run_outside(installed, tmp_path, "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_readme_example_app_synthesizes_against_the_installed_package(installed: Path, tmp_path: Path) -> None:
    shutil.copy(REPO_ROOT / "examples" / "own_app" / "app.py", tmp_path / "app.py")
    outdir = tmp_path / "cdk.out"
    result = run_outside(installed, tmp_path, "app.py", CDK_OUTDIR=str(outdir))
    assert result.returncode == 0, result.stderr[-3000:]
    template = json.loads((outdir / "TeamAInference.template.json").read_text())
    clusters = [r for r in template["Resources"].values() if r["Type"] == "AWS::EKS::Cluster"]
    assert clusters[0]["Properties"]["Name"] == "team-a-inference"
