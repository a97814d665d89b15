"""The rooms of the package and the one way their imports point, as import-linter contracts ([tool.importlinter] in
pyproject.toml): cli -> infra -> config | constructs -> manifests -> planner | hub -> catalog | images -> base.

The planner, config, catalog, Hub and images modules load no aws_cdk, cdk8s or jsii (so `llm-eks plan` answers
without them), and charts never import aws_cdk (a GitOps user synthesizes them with cdk8s alone). import-linter
follows imports through every module, so an indirect path breaks the contract too.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "src" / "llm_eks"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(src: Path, *, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    """Run the contracts of pyproject.toml in `cwd` over the package found under `src`."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_contract_is_kept() -> None:
    result = lint_imports(REPO_ROOT / "src")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "Contracts: 4 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # A chart that reaches for the AWS CDK.
        ("manifests/vllm/chart.py", "import aws_cdk", "llm_eks.manifests is not allowed to import aws_cdk"),
        # The planner loading cdk8s, even through a construct.
        (
            "planner/latency/model.py",
            "import llm_eks.constructs.keda",
            "llm_eks.planner is not allowed to import llm_eks.constructs",
        ),
        ("planner/latency/model.py", "import cdk8s", "llm_eks.planner is not allowed to import cdk8s"),
        # A construct that reads our config objects (constructs stay usable without them).
        ("constructs/keda.py", "import llm_eks.config", "llm_eks.constructs is not allowed to import llm_eks.config"),
        # verify's checks reaching the charts (only verify.derive may load cdk8s).
        ("verify/checks.py", "import llm_eks.verify.derive", "llm_eks.verify.checks is not allowed to import cdk8s"),
    ],
)
def test_a_wrong_import_breaks_a_contract(tmp_path: Path, module: str, line: str, broken: str) -> None:
    """The same contracts over a copy of the package with one import that runs against them."""
    copy = tmp_path / "src" / "llm_eks"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    result = lint_imports(tmp_path / "src", cwd=tmp_path)
    assert result.returncode == 1, result.stdout[-2000:]
    assert broken in result.stdout.split("Broken contracts")[1]


def test_charts_synthesize_without_aws_cdk() -> None:
    """A GitOps user with cdk8s alone: importing every module under manifests/ (subpackages too) loads no aws_cdk,
    directly or through anything it imports. The one place this is checked in a fresh interpreter."""
    modules = sorted(
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in (PACKAGE / "manifests").rglob("*.py")
    )
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'cdk_nag'))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "llm_eks.manifests.checks" in modules and "llm_eks.manifests.node_pools" in modules
    assert result.returncode == 0, result.stderr


def test_the_planner_and_cli_plan_run_without_cdk() -> None:
    """`llm-eks plan` in a fresh interpreter: no aws_cdk, cdk8s or jsii is loaded on its way to a plan."""
    code = (
        "import sys; from llm_eks.cli import main\n"
        "assert main(['plan', '--model', 'meta-llama/Llama-3.1-8B-Instruct', '--json']) == 0\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'aws_cdk', 'cdk8s', 'jsii', 'constructs'})\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
