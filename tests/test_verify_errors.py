"""`llm-eks verify`'s errors: each failure to read the cluster is one line on stderr and exit 2, never a
traceback; and importing the command loads neither the CDK nor the kubernetes client."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from llm_eks.cli import main
from tests.prometheus_server import PrometheusServer
from tests.verify_cluster import StubCluster
from tests.verify_run import CONTEXT_FILE, fresh, healthy_clusters
from tests.verify_stub import CONTEXT, Faults, StubApiServer, write_kubeconfig

# It starts a server and a Python process.
pytestmark = pytest.mark.synth


@pytest.fixture(scope="module")
def clusters(prometheus: PrometheusServer) -> dict[str, StubCluster]:
    return healthy_clusters(prometheus, "dev")


def _error(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    assert main(["verify", "--env", "dev", "--context-file", CONTEXT_FILE, *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.endswith("\n") and err.count("\n") == 1 and "Traceback" not in err
    return err.rstrip("\n")


def test_no_kubeconfig(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = str(tmp_path / "nope")
    assert _error(capsys, ["--kubeconfig", missing]) == (
        f"llm-eks: error: --kubeconfig: {missing!r} is not allowed; no such file: name a kubeconfig (aws eks "
        "update-kubeconfig writes one) [LLMEKS-E500]"
    )
    monkeypatch.setenv("KUBECONFIG", missing)
    assert _error(capsys, []).startswith(f"llm-eks: error: KUBECONFIG: {missing!r} is not allowed; no such file")


def test_an_unreadable_kubeconfig(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.write_text("{clusters: [")
    assert _error(capsys, ["--kubeconfig", str(broken)]) == (
        f"llm-eks: error: --kubeconfig: {str(broken)!r} is not allowed; cannot be read as a kubeconfig: expected "
        "the node content, but found '<stream end>' at line 1, column 13 [LLMEKS-E500]"
    )
    listed = tmp_path / "listed"
    listed.write_text("- a\n- b\n")
    assert _error(capsys, ["--kubeconfig", str(listed)]) == (
        f"llm-eks: error: --kubeconfig: {str(listed)!r} is not allowed; cannot be read as a kubeconfig: {listed} is "
        "not a Config mapping with contexts [LLMEKS-E500]"
    )


def test_an_unknown_context(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:1")
    assert _error(capsys, ["--kubeconfig", str(kubeconfig), "--context", "prod-admin"]) == (
        f"llm-eks: error: --context: 'prod-admin' is not allowed; must be a context of {kubeconfig}: {CONTEXT}"
        " [LLMEKS-E500]"
    )


def test_an_unreachable_api_server(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}")
    assert _error(capsys, ["--kubeconfig", str(kubeconfig)]) == (
        f"llm-eks: error: kubernetes API: http://127.0.0.1:{port} (context {CONTEXT}) is unreachable: Failed to "
        "establish a new connection: [Errno 111] Connection refused [LLMEKS-E501]"
    )


def test_refused_credentials(
    clusters: dict[str, StubCluster], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    server = StubApiServer(fresh(clusters, "dev"))
    with server.running():
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url, token="expired")
        assert _error(capsys, ["--kubeconfig", str(kubeconfig)]) == (
            f"llm-eks: error: kubernetes API: {server.url} refused the credentials of context {CONTEXT} "
            "(401 Unauthorized) [LLMEKS-E501]"
        )


def test_prometheus_unreachable_through_the_proxy(
    clusters: dict[str, StubCluster], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    server = StubApiServer(fresh(clusters, "dev"), Faults(prometheus_unreachable=True))
    with server.running():
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url)
        assert _error(capsys, ["--kubeconfig", str(kubeconfig)]) == (
            "llm-eks: error: prometheus: unreachable through the API server's service proxy "
            "(monitoring/thanos-query:10902): error trying to reach service: dial tcp 10.0.3.17:10902: i/o timeout"
            " [LLMEKS-E502]"
        )


def test_an_error_is_the_journals_exit_line(
    clusters: dict[str, StubCluster], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    journal = tmp_path / "verify.jsonl"
    server = StubApiServer(fresh(clusters, "dev"), Faults(prometheus_unreachable=True))
    with server.running():
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url)
        message = _error(capsys, ["--kubeconfig", str(kubeconfig), "--journal", str(journal)])
    (end,) = (json.loads(line) for line in journal.read_text().splitlines())
    assert (end["event"], end["exit_status"]) == ("exit", 2)
    assert message == f"llm-eks: error: {end['message']}"
    unwritable = str(tmp_path / "missing" / "verify.jsonl")
    assert _error(capsys, ["--journal", unwritable]) == (
        f"llm-eks: error: --journal: {unwritable!r} is not allowed; cannot be written (No such file or directory)"
        " [LLMEKS-E504]"
    )


def test_a_verifier_without_the_proxy_grant(
    clusters: dict[str, StubCluster], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = frozenset({("Role", "monitoring", "llm-eks-verify")})
    server = StubApiServer(fresh(clusters, "dev"), Faults(missing=missing))
    with server.running():
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url)
        assert _error(capsys, ["--kubeconfig", str(kubeconfig)]) == (
            "llm-eks: error: prometheus: 403 Forbidden through the service proxy (monitoring/thanos-query:10902)"
            ': services/proxy "thanos-query:10902" is forbidden: User "verifier" cannot get resource '
            '"services/proxy" in API group ""; verify needs the llm-eks-verify group\'s ClusterRole and Roles '
            "(docs/how-to/verify.md) [LLMEKS-E502]"
        )


def test_unknown_environment_and_bad_options(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["verify", "--env", "qa", "--context-file", CONTEXT_FILE]) == 2
    assert capsys.readouterr().err == (
        "llm-eks: error: env: 'qa' is not allowed; defined environments: dev, staging, prod [LLMEKS-E102]\n"
    )
    assert _error(capsys, ["--window", "1h30"]) == (
        "llm-eks: error: --window: '1h30' is not allowed; a Prometheus duration such as 1h, 30m or 2h30m (at least 1m)"
        " [LLMEKS-E503]"
    )


def test_record_to_a_folder_that_does_not_exist(
    clusters: dict[str, StubCluster], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record = str(tmp_path / "missing" / "points.json")
    server = StubApiServer(fresh(clusters, "dev"))
    with server.running():
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url)
        assert _error(capsys, ["--kubeconfig", str(kubeconfig), "--record", record]) == (
            f"llm-eks: error: --record: {record!r} is not allowed; cannot be written (No such file or directory)"
            " [LLMEKS-E504]"
        )


def test_importing_verify_loads_no_cdk_and_no_kubernetes_client() -> None:
    code = "import sys, llm_eks.verify, llm_eks.cli; print(sorted(m for m in ('aws_cdk', 'cdk8s', 'jsii', " \
           "'kubernetes') if m in sys.modules))"  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
