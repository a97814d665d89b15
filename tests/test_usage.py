"""`llm-eks usage` end to end: the CLI, through the kubeconfig and the stand-in API server's RBAC and service proxy,
to a real Prometheus (tests/prometheus_server.py) holding an hour of the AI Gateway's token counters on two Envoy
pods; and its one-line errors."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from llm_eks.cli import main
from tests.gateway_cases import token_labels
from tests.prometheus_server import SPAN, PrometheusServer, Series
from tests.verify_cluster import StubCluster
from tests.verify_run import CONTEXT_FILE, fresh, healthy_clusters
from tests.verify_stub import Faults, StubApiServer, write_kubeconfig

# It starts a server.
pytestmark = pytest.mark.synth

GATEWAY = "inference-gateway"
LLAMA, QWEN = "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B"


def _tokens(tenant: str, model: str, kind: str, hour: float, pod: str = "envoy-a", namespace: str = GATEWAY) -> Series:
    """One Envoy pod's counter of `kind` tokens, rising by `hour` over the hour."""
    return ("gen_ai_client_token_usage_sum", token_labels(tenant, model, kind, pod, namespace), hour, True)


# An hour of the gateway's counters (AI Gateway v1.1.0 attributes): team-a on two pods and two models, team-b on one;
# cached input and another namespace's gateway, which usage must not count.
HOUR: list[Series] = [
    _tokens("team-a", LLAMA, "input", 120_000),
    _tokens("team-a", LLAMA, "input", 60_000, pod="envoy-b"),
    _tokens("team-a", LLAMA, "output", 30_000),
    _tokens("team-a", QWEN, "input", 6_000, pod="envoy-b"),
    _tokens("team-a", QWEN, "output", 1_200),
    _tokens("team-a", LLAMA, "cached_input", 999_000),
    _tokens("team-a", LLAMA, "input", 5_000_000, namespace="other-gateway"),
]


@pytest.fixture(scope="module")
def clusters(prometheus: PrometheusServer) -> dict[str, StubCluster]:
    return healthy_clusters(prometheus, "staging")


@pytest.fixture(scope="module")
def end(prometheus: PrometheusServer, clusters: dict[str, StubCluster]) -> float:
    """The end of the hour the counters rose over (a whole second, in the past)."""
    return prometheus.at(HOUR)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def _run(
    clusters: dict[str, StubCluster],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    *args: str,
    faults: Faults | None = None,
) -> tuple[int, str, str]:
    server = StubApiServer(fresh(clusters, "staging"), faults)
    with server.running():
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url)
        code = main(["usage", "--env", "staging", "--context-file", CONTEXT_FILE, "--kubeconfig", str(kubeconfig),
                     *args])  # fmt: skip
    out, err = capsys.readouterr()
    return code, out, err


def test_the_hour_per_tenant_and_model_as_csv(
    clusters: dict[str, StubCluster], end: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both pods summed; team-b, declared but silent, a row of zeros; cached input and the other gateway left out."""
    start, stop = _iso(end - SPAN), _iso(end)
    code, out, err = _run(clusters, tmp_path, capsys, "--from", start, "--to", stop, "--csv")
    assert (code, err) == (0, "")
    assert list(csv.reader(io.StringIO(out))) == [
        ["from", "to", "tenant", "model", "input_tokens", "output_tokens"],
        [start, stop, "team-a", QWEN, "6000", "1200"],
        [start, stop, "team-a", LLAMA, "180000", "30000"],
        [start, stop, "team-b", "", "0", "0"],
    ]


def test_half_the_hour_as_json(
    clusters: dict[str, StubCluster], end: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The counters rose steadily: the last half hour holds half the tokens."""
    code, out, _ = _run(clusters, tmp_path, capsys, "--from", _iso(end - SPAN / 2), "--to", _iso(end), "--json")
    assert code == 0
    body = json.loads(out)
    assert (body["environment"], body["from"], body["to"]) == ("staging", _iso(end - SPAN / 2), _iso(end))
    assert body["rows"] == [
        {"tenant": "team-a", "model": QWEN, "input_tokens": 3_000, "output_tokens": 600},
        {"tenant": "team-a", "model": LLAMA, "input_tokens": 90_000, "output_tokens": 15_000},
        {"tenant": "team-b", "model": None, "input_tokens": 0, "output_tokens": 0},
    ]


def test_the_table(
    clusters: dict[str, StubCluster], end: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(clusters, tmp_path, capsys, "--from", _iso(end - SPAN), "--to", _iso(end))
    assert code == 0
    assert out.splitlines() == [
        f"usage of staging from {_iso(end - SPAN)} to {_iso(end)}",
        "",
        "TENANT  MODEL                             INPUT_TOKENS  OUTPUT_TOKENS",
        f"team-a  {QWEN:<32}          6000           1200",
        f"team-a  {LLAMA:<32}        180000          30000",
        "team-b  -                                            0              0",
    ]


def _error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["usage", "--context-file", CONTEXT_FILE, *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    return err.rstrip("\n")


@pytest.mark.parametrize(
    ("window", "message"),
    [
        (
            ["--from", "last month"],
            "--from: 'last month' is not allowed; an ISO 8601 time such as 2026-11-01 or 2026-11-01T09:00:00Z (UTC "
            "unless it names an offset) [LLMEKS-E507]",
        ),
        (
            ["--from", "2026-11-01T10:00:00Z", "--to", "2026-11-01T10:00:30Z"],
            "--from: '2026-11-01T10:00:00Z' is not allowed; must be at least a minute before --to "
            "(2026-11-01T10:00:30Z) [LLMEKS-E507]",
        ),
        (
            ["--from", "2026-11-02", "--to", "2026-11-01"],
            "--from: '2026-11-02' is not allowed; must be at least a minute before --to (2026-11-01T00:00:00Z) "
            "[LLMEKS-E507]",
        ),
    ],
)
def test_a_bad_window(capsys: pytest.CaptureFixture[str], window: list[str], message: str) -> None:
    assert _error(capsys, "--env", "staging", *window) == f"llm-eks: error: {message}"


def test_a_window_ending_in_the_future(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, "--env", "staging", "--from", "2026-11-01", "--to", "2999-01-01T00:00:00+02:00")
    assert err.startswith("llm-eks: error: --to: '2999-01-01T00:00:00+02:00' is not allowed; must not be after now (")
    assert err.endswith("): the tokens are not counted yet [LLMEKS-E507]")


def test_an_environment_without_a_gateway(capsys: pytest.CaptureFixture[str]) -> None:
    assert _error(capsys, "--env", "dev", "--from", "2026-11-01") == (
        "llm-eks: error: --env: 'dev' is not allowed; it has no gateway, and tokens are counted per tenant at the "
        "gateway: name an environment with gateway.tenants [LLMEKS-E508]"
    )


def test_csv_and_json_together(capsys: pytest.CaptureFixture[str]) -> None:
    assert _error(capsys, "--env", "staging", "--from", "2026-11-01", "--csv", "--json") == (
        "llm-eks: error: argument --json: not allowed with argument --csv [LLMEKS-E600]"
    )


def test_prometheus_unreachable(
    clusters: dict[str, StubCluster], end: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    faults = Faults(prometheus_unreachable=True)
    code, out, err = _run(clusters, tmp_path, capsys, "--from", _iso(end - SPAN), "--to", _iso(end), faults=faults)
    assert (code, out) == (2, "")
    assert err == (
        "llm-eks: error: prometheus: unreachable through the API server's service proxy "
        "(monitoring/thanos-query:10902): error trying to reach service: dial tcp 10.0.3.17:10902: i/o timeout"
        " [LLMEKS-E502]\n"
    )
