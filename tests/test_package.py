"""The wheel a user installs, installed as a user would: into a fresh virtual environment outside the repository, with
its dependencies at constraints.txt's exact pins; then `llm-eks --version`, every module's import, the single-model
example synthesized through the CDK CLI from a folder outside the repository, and the own-app example."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.changelog import newest_release
from tests.conftest import REPO_ROOT
from tests.doc_commands import wheel_file_name

SRC = REPO_ROOT / "src"
CDK = REPO_ROOT / "node_modules" / ".bin" / "cdk"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `make dist` builds (the pinned setuptools, no isolation), built here into a folder of its own."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO_ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    # Build artefacts must not be left in the repo.
    shutil.rmtree(REPO_ROOT / "build", ignore_errors=True)
    (built,) = dist.glob("llm_eks-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment (no pip of its own: this pip installs into it) holding the wheel and its
    dependencies at constraints.txt's pins, from pip's cache when it has them."""
    root = tmp_path_factory.mktemp("user") / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(root / "bin" / "python"),
            "install",
            "--quiet",
            "--no-compile",
            "--disable-pip-version-check",
            "-c",
            str(REPO_ROOT / "constraints.txt"),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return root


def run_in(venv: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A command with the environment's bin first on PATH (as `source .venv/bin/activate` puts it), then the pinned
    Node and CDK CLI; nothing of the repository on the Python path."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environ["PATH"] = os.pathsep.join([str(venv / "bin"), str(CDK.parent), environ["PATH"]])
    return subprocess.run(
        list(args),
        cwd=cwd,
        env={**environ, "VIRTUAL_ENV": str(venv), **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_wheel_is_named_as_the_install_page_names_it(wheel: Path) -> None:
    """The install page's `pip install` of the wheel is checked against this name (tests/doc_commands.py)."""
    assert wheel.name == wheel_file_name()


def test_the_wheel_holds_every_file_under_src(wheel: Path) -> None:
    """Modules, the Lambda handlers' code, catalog configs, policy documents and the pipeline's script: every file the
    library may read at run time."""
    tracked = subprocess.run(
        ["git", "ls-files", "src/llm_eks"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(p.removeprefix("src/") for p in tracked if p.removeprefix("src/") not in in_wheel)
    assert missing == []
    assert any(name.endswith("/licenses/LICENSE") for name in in_wheel)


def test_llm_eks_version_prints_the_changelogs_newest_release(venv: Path, tmp_path: Path) -> None:
    result = run_in(venv, tmp_path, "llm-eks", "--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"llm-eks {newest_release()}\n", "")
    assert shutil.which("llm-eks", path=str(venv / "bin")) == str(venv / "bin" / "llm-eks")


def test_every_module_imports_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    modules = sorted(
        ".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        for p in SRC.rglob("*.py")
        # Lambda code runs in Lambda, with boto3 only; importing `llm_eks.cli.__main__` runs the CLI.
        if "handler" not in p.parent.name and p.name != "__main__.py"
    )
    code = (
        "import importlib, sys, llm_eks\n"
        f"assert llm_eks.__file__.startswith({str(venv)!r}), llm_eks.__file__\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print('ok')"
    )
    result = run_in(venv, tmp_path, "python", "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    assert result.stderr == ""


def test_the_single_model_example_synthesizes_outside_the_repo(venv: Path, tmp_path: Path) -> None:
    """As its docstring says: the wheel installed, the CDK CLI, `cdk synth` in a folder holding app.py and cdk.json."""
    for name in ("app.py", "cdk.json"):
        shutil.copy(REPO_ROOT / "examples" / "single_model" / name, tmp_path / name)
    result = run_in(venv, tmp_path, str(CDK), "synth", "--quiet", "--no-notices", CDK_DISABLE_VERSION_CHECK="1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "end-of-life" not in result.stderr and "!!!!!!!!" not in result.stderr, result.stderr
    template = json.loads((tmp_path / "cdk.out" / "LlmEks-team-a.template.json").read_text())
    (cluster,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::EKS::Cluster"]
    assert cluster["Properties"]["Name"] == "llm-eks-team-a"
    handlers = [p.read_text() for p in (tmp_path / "cdk.out").glob("asset.*/index.py")]
    assert (SRC / "llm_eks" / "constructs" / "teardown_handler" / "index.py").read_text() in handlers
    objects = [
        o
        for path in sorted((tmp_path / "cdk.out" / "manifests" / "team-a").glob("*.yaml"))
        if path.name != "helm-releases.yaml"  # a listing of the Helm releases, not objects
        for o in yaml.safe_load_all(path.read_text())
        if o
    ]
    assert ("Deployment", "vllm-qwen3-8b") in {(o["kind"], o["metadata"]["name"]) for o in objects}


def test_the_own_app_example_synthesizes_against_the_installed_package(venv: Path, tmp_path: Path) -> None:
    shutil.copy(REPO_ROOT / "examples" / "own_app" / "app.py", tmp_path / "app.py")
    outdir = tmp_path / "cdk.out"
    result = run_in(venv, tmp_path, "python", "app.py", CDK_OUTDIR=str(outdir))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "end-of-life" not in result.stderr
    template = json.loads((outdir / "TeamAInference.template.json").read_text())
    clusters = [r for r in template["Resources"].values() if r["Type"] == "AWS::EKS::Cluster"]
    assert clusters[0]["Properties"]["Name"] == "team-a-inference"
