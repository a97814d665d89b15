"""Dependencies point one way: infra -> constructs -> manifests -> catalog. Charts never import aws_cdk.

Constructs may read the manifests' Kubernetes vocabulary (node labels, taints, vendor names) so a DaemonSet lands
exactly where the node pools put GPUs; nothing below infra reads config or the planner.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "src" / "llm_eks"
# What each layer may not import.
FORBIDDEN = {
    "catalog": ("llm_eks.infra", "llm_eks.constructs", "llm_eks.manifests", "aws_cdk", "cdk8s", "constructs"),
    "manifests": ("llm_eks.infra", "llm_eks.constructs", "aws_cdk", "cdk_nag"),
    "constructs": ("llm_eks.infra",),
}


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_point_one_way(layer: str) -> None:
    bad = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for name in sorted(imports(path))
        if name.startswith(FORBIDDEN[layer])
    ]
    assert not bad, bad


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
