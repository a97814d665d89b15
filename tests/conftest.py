"""Session fixtures: the default app (every environment in cdk.json) is synthesized ONCE per test session.

With pytest-xdist the first worker synthesizes into a shared folder under a file lock; the others reuse it.
Tests read what a user reads: the templates, the review YAML under manifests/<env>/, the validation report.
"""

from __future__ import annotations

import ast
import fcntl
import functools
import json
import os
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

if TYPE_CHECKING:
    from tests.prometheus_server import PrometheusServer

# Apps the tests build with a plain `cdk.App()` skip aws-cdk-lib's built-in CloudFormation validation (~5 s CPU each,
# and it only warns); cfn-lint checks every template instead, and test_app_checks covers turning it back on.
# Set before the first `import aws_cdk`: the jsii kernel (and every subprocess) reads it from the environment.
os.environ.setdefault("CDK_VALIDATION", "false")

# A skip under `make test` or CI fails the run unless allowed (tests/skip_policy.py); pytester runs that policy in a
# session of its own (tests/test_skip_policy.py).
pytest_plugins = ["pytester", "tests.skip_policy"]

REPO_ROOT = Path(__file__).resolve().parents[1]
# jsii (in this process and every subprocess the tests start) and the CDK CLI run on the first `node` on PATH: the
# Node 24 that `make setup` installs, as `make test` runs them, also when pytest is started by hand.
_PINNED_NODE_BIN = REPO_ROOT / "node_modules" / ".bin"
if (_PINNED_NODE_BIN / "node").exists():
    os.environ["PATH"] = os.pathsep.join([str(_PINNED_NODE_BIN), os.environ.get("PATH", "")])
CDK_JSON = json.loads((REPO_ROOT / "cdk.json").read_text())
ENVIRONMENTS = tuple(CDK_JSON["context"]["environments"])


@dataclass
class Synthesized:
    """The default app's synth output."""

    outdir: Path
    error: str | None

    def template(self, env: str) -> dict[str, Any]:
        return json.loads((self.outdir / f"LlmEks-{env}.template.json").read_text())

    def manifests(self, env: str) -> dict[str, list[dict[str, Any]]]:
        """Review YAML files of one environment: file name -> objects."""
        folder = self.outdir / "manifests" / env
        return {p.name: [d for d in yaml.safe_load_all(p.read_text()) if d] for p in sorted(folder.glob("*.yaml"))}

    def release_values(self, env: str, release: str) -> dict[str, Any]:
        """The Helm values of one release, as helm-releases.yaml lists them (references shown as ${Ref:...})."""
        (found,) = [r["values"] for r in self.manifests(env)["helm-releases.yaml"] if r["release"] == release]
        values: dict[str, Any] = found
        return values

    def objects(self, env: str) -> list[dict[str, Any]]:
        """Every Kubernetes object applied by the app (helm-releases.yaml is a listing, not objects)."""
        return [o for name, objs in self.manifests(env).items() if name != "helm-releases.yaml" for o in objs]


def _synth(outdir: Path, context: dict[str, Any] | None = None) -> str | None:
    """Synthesize the default app (or another cdk.json `context`'s) into `outdir`; the traceback if it fails."""
    from llm_eks.infra.app import add_checks, build_app, new_app, write_review

    app = new_app(context=CDK_JSON["context"] if context is None else context, outdir=str(outdir))
    stacks = build_app(app)
    add_checks(app)
    try:
        assembly = app.synth()
    except Exception:
        return traceback.format_exc()
    write_review(app, stacks, assembly)
    return None


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Synthesized:
    root = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        root = root.parent
    outdir = root / "default-app"
    with open(root / "default-app.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / "default-app.done"
        if not done.exists():
            error = _synth(outdir)
            done.write_text(json.dumps({"error": error}))
        error = json.loads(done.read_text())["error"]
    return Synthesized(outdir, error)


@pytest.fixture(scope="session")
def templates(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    assert synthesized.error is None, synthesized.error
    return {env: synthesized.template(env) for env in ENVIRONMENTS}


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """A real Prometheus server for the session (tests/prometheus_server.py), stopped at its end."""
    from tests.prometheus_server import PrometheusServer

    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"))
    yield server
    server.stop()


# Modules that take 8 s or more (`pytest --durations`), started first so the two xdist workers finish together
# instead of one idling while the other runs a long module last.
LONGEST_FIRST = (
    "test_package.py",
    "test_checkov.py",
    "test_teardown_handler.py",
    "test_quality.py",
    "test_weights_staging.py",
    "test_config_inputs.py",
    "test_karpenter.py",
    "test_gitops.py",
    "test_image_snapshot.py",
    "test_checks.py",
    "test_cloudformation_validation.py",
)


# What makes a test slow: it synthesizes a CDK app (the session's default app, or its own through aws_cdk), starts a
# moto AWS, a linter or a scanner, or another process. Such tests carry the `synth` marker; `make check-fast` runs
# the rest (config, planner, charts, checks, CLI) in seconds.
_SLOW_MODULES = (
    "aws_cdk",
    "moto",
    "cfn_lint",
    "subprocess",
    "tests.checkov_run",
    "tests.cdk_fixtures",
    "tests.moto_s3",
    "tests.promtool",
)
_SLOW_FIXTURES = {"synthesized", "templates", "prometheus"}


@functools.cache
def _imports_slow_module(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        if any(name == slow or name.startswith(slow + ".") for name in names for slow in _SLOW_MODULES):
            return True
    return False


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "synth: synthesizes a CDK app or starts moto, a linter or a subprocess")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) or _imports_slow_module(item.path):
            item.add_marker(pytest.mark.synth)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
