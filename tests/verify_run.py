"""Running `llm-eks verify` against the stand-in API server in tests: the healthy clusters, a copy to break, one run
through the CLI's entry point with its output cut into the table's columns."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from docgen import examples
from llm_eks.cli import main
from llm_eks.config import parse_environment
from tests.conftest import CDK_JSON, REPO_ROOT
from tests.prometheus_server import PrometheusServer
from tests.verify_cluster import StubCluster, healthy_cluster
from tests.verify_metrics import series
from tests.verify_stub import Faults, StubApiServer, write_kubeconfig

CONTEXT_FILE = str(REPO_ROOT / "cdk.json")
VERIFY_PAGE = REPO_ROOT / "docs" / "how-to" / "verify.md"
# Qwen3-235B in FP8 spans two g6e.12xlarge nodes: a LeaderWorkerSet (as tests/test_multi_node.py).
# Its SLO is loosened to what two PCIe-connected nodes can do (the plan's ITL estimate is above the default 50 ms).
BIG = {"workload": {"model": "Qwen/Qwen3-235B-A22B-FP8", "accelerator": "g6e.12xlarge", "max_model_len": 8192,
                    "replicas": {"min": 1, "max": 2}, "slo": {"ttft_p99_ms": 5000, "itl_p99_ms": 200}}}  # fmt: skip


def healthy_clusters(prometheus: PrometheusServer, *names: str) -> dict[str, StubCluster]:
    """The healthy stand-in of each named environment (the default ones of cdk.json, and "big": BIG), their series
    loaded into `prometheus`."""
    envs = {**CDK_JSON["context"]["environments"], "big": BIG}
    clusters = {env: healthy_cluster(parse_environment(env, envs[env]), prometheus=prometheus) for env in names}
    prometheus.load(series(c) for c in clusters.values())
    return clusters


def preload(clusters: dict[str, StubCluster], *changes: tuple[str, Callable[[StubCluster], None]]) -> None:
    """Load into the clusters' Prometheus the series of each (environment, change to its metrics) a module's tests
    make, so its server restarts once rather than once per test."""
    variants = []
    for env, change in changes:
        cluster = fresh(clusters, env)
        change(cluster)
        variants.append(series(cluster))
    server = next(iter(clusters.values())).prometheus
    assert server is not None
    server.load(variants)


def fresh(clusters: dict[str, StubCluster], env: str) -> StubCluster:
    """A copy of the healthy cluster a test may break."""
    c = clusters[env]
    return dataclasses.replace(c, objects=copy.deepcopy(c.objects), metrics=copy.deepcopy(c.metrics))


@dataclasses.dataclass
class Run:
    code: int
    out: str
    err: str
    server: StubApiServer

    def row(self, check: str, workload: str) -> dict[str, str]:
        """The table row of `check` for `workload`, cut into its columns where the header's start."""
        lines = self.out.splitlines()
        header = next(ln for ln in lines if ln.startswith("CHECK "))
        (line,) = [ln for ln in lines if ln.split()[:2] == [check, workload]]
        names = ["check", "workload", "planned", "observed", "verdict", "detail"]
        starts = [header.index(n.upper()) for n in names]
        ends = [*starts[1:], None]
        return {n: line[a:b].strip() for n, a, b in zip(names, starts, ends, strict=True)}


def run_verify(
    cluster: StubCluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    *extra: str,
    faults: Faults | None = None,
    context_file: str = CONTEXT_FILE,
) -> Run:
    server = StubApiServer(cluster, faults)
    with server.running():
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url)
        args = ["verify", "--env", cluster.environment, "--context-file", context_file, "--kubeconfig", str(kubeconfig)]
        code = main([*args, *extra])
    out, err = capsys.readouterr()
    return Run(code, out, err, server)


def big_context_file(folder: Path) -> str:
    """A context file holding the one environment "big" (BIG)."""
    path = folder / "big" / "cdk.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"context": {"environments": {"big": BIG}}}))
    return str(path)


def shown_text(page: Path = VERIFY_PAGE) -> list[str]:
    """The text blocks of a docs page (what it shows a command print), without their last newline."""
    return [b.text.rstrip("\n") for b in examples.blocks(page) if b.lang == "text"]
