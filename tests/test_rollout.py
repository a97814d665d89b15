"""`llm-eks canary` and `llm-eks rollback` against the stand-in API server: the next version's share of the pool set
step by step through its scale subresource (pool share: the smallest step is one pod, each rounding said), each step
verified, a failing step set back to 0, and the one-line errors."""

from __future__ import annotations

import copy
import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import pytest

from docgen import examples
from llm_eks.cli import main
from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.verify.derive import load_specs
from tests.conftest import REPO_ROOT
from tests.prometheus_server import PrometheusServer
from tests.test_canary import BODY as CANARY_BODY
from tests.test_canary import _objects
from tests.verify_cluster import StubCluster, healthy_cluster
from tests.verify_load_results import bench_log, bench_result
from tests.verify_metrics import series
from tests.verify_stub import CONTEXT, Faults, StubApiServer, write_kubeconfig

SCALE = "/apis/apps/v1/namespaces/inference-chat/deployments/vllm-chat-canary/scale"
CURRENT = ("inference-chat", "vllm-chat")
CANARY = ("inference-chat", "vllm-chat-canary")
# Three current replicas and up to three of the next version: shares of 25 % (one pod), 40 % (two) and 50 % (three).
BODY = copy.deepcopy(CANARY_BODY)
BODY["workloads"]["chat"]["replicas"] = {"min": 3, "max": 3}
BODY["workloads"]["chat"]["canary"]["replicas"] = {"min": 1, "max": 3}
ROUNDED = (
    "chat: step 5% is 25% here: the smallest step is one pod of the pool (1 of the next version beside 3 of the "
    "current one)"
)


def _body(weight: int) -> dict[str, Any]:
    body = copy.deepcopy(BODY)
    body["workloads"]["chat"]["canary"]["weight"] = weight
    return body


@pytest.fixture(scope="module")
def clusters(prometheus: PrometheusServer) -> dict[int, StubCluster]:
    """The environment deployed with its next version at share 0 and at 25 (one pod beside three)."""
    built = {w: healthy_cluster(parse_environment("qa", _body(w)), prometheus=prometheus) for w in (0, 25)}
    quiet = _copy(built[0])
    _no_traffic_to_the_next_version(quiet)
    prometheus.load([*(series(c) for c in built.values()), series(quiet)])
    return built


def _copy(c: StubCluster) -> StubCluster:
    copied = StubCluster(c.environment, c.plan, copy.deepcopy(c.objects), c.now, copy.deepcopy(c.metrics), c.prometheus)
    copied.standby = copy.deepcopy(c.standby)
    return copied


def _no_traffic_to_the_next_version(cluster: StubCluster) -> None:
    for (namespace, pod), target in cluster.metrics.items():
        if namespace == CANARY[0] and pod.startswith(f"{CANARY[1]}-"):
            target.load.ttft_s, target.load.itl_s = [], []


def _replicas(cluster: StubCluster) -> int:
    """The next version's replicas now."""
    return int(cluster.find("Deployment", CANARY[1], CANARY[0])["spec"]["replicas"])


@dataclass
class Result:
    code: int
    out: str
    err: str
    server: StubApiServer
    slept: list[float]
    cluster: StubCluster
    # The --journal file's lines.
    journal: list[dict[str, Any]]

    def replicas(self) -> list[int]:
        """The next version's replicas each scale patch set, in order."""
        assert {path for path, _ in self.server.patches} <= {SCALE}
        return [body["spec"]["replicas"] for _, body in self.server.patches]


Run: TypeAlias = Callable[..., Result]


@pytest.fixture
def run(
    clusters: dict[int, StubCluster],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Run:
    """`run(weight, *argv, roles=True, change=None, faults=None, sleep=None)`: the CLI against a copy of the cluster
    deployed at `weight` (changed by `change` first), the caller holding verify's ClusterRole and, with `roles`, the
    rollout Roles; canary writes its journal, and `sleep` (default: note the seconds) stands in for time.sleep."""

    def go(
        weight: int,
        *args: str,
        roles: bool = True,
        change: Callable[[StubCluster], None] | None = None,
        faults: Faults | None = None,
        sleep: Callable[[float], None] | None = None,
        groups: tuple[str, ...] = (),
        insecure: bool = False,
    ) -> Result:
        cluster = _copy(clusters[weight])
        if change is not None:
            change(cluster)
        context_file = tmp_path / "cdk.json"
        context_file.write_text(json.dumps({"context": {"environments": {"qa": _body(weight)}}}))
        slept: list[float] = []
        monkeypatch.setattr("llm_eks.cli.canary.time.sleep", sleep or slept.append)
        given = faults or Faults()
        given.groups = frozenset({"llm-eks-verify", *(["llm-eks-rollout"] if roles else []), *groups})
        server = StubApiServer(cluster, given)
        journal = tmp_path / "journal.jsonl"
        journal.unlink(missing_ok=True)
        with server.running():
            kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url, insecure=insecure)
            common = ["--env", "qa", "--context-file", str(context_file), "--kubeconfig", str(kubeconfig)]
            extra = ["--journal", str(journal)] if args[0] == "canary" else []
            code = main([args[0], *common, *extra, *args[1:]])
        out, err = capsys.readouterr()
        lines = [json.loads(line) for line in journal.read_text().splitlines()] if journal.exists() else []
        return Result(code, out, err, server, slept, cluster, lines)

    return go


def test_canary_walks_every_step_and_verifies_each(run: Run) -> None:
    r = run(0, "canary", "--workload", "chat")
    assert (r.code, r.err) == (0, ""), r.out
    # canary.steps 5, 25, 50 beside three current replicas: 5 % and 25 % are one pod (25 %), 50 % three pods.
    assert r.replicas() == [1, 3]
    assert r.slept == [600.0] * 2  # canary.hold_minutes 10 at each step
    lines = r.out.splitlines()
    assert lines[0] == ROUNDED
    assert lines[1] == "chat: next version at 25%; holding 10 min"
    assert lines[2].startswith("chat: 25% held: the next version's ")
    assert lines[-1].startswith("chat: the next version holds its last share of the pool. Promote it in cdk.json")
    # Each step's verification read Prometheus over the hold.
    assert any("[10m]" in q for q in r.server.queries)


def test_a_share_set_is_what_a_deploy_at_that_weight_applies(run: Run) -> None:
    r = run(0, "canary", "--workload", "chat", "--steps", "40")
    assert r.code == 0
    (rendered,) = [o for o in _objects(_body(40)) if o["kind"] == "Deployment" and o["metadata"]["name"] == CANARY[1]]
    assert _replicas(r.cluster) == rendered["spec"]["replicas"] == 2


def _canary_pod(cluster: StubCluster) -> dict[str, Any]:
    """The next version's pod a scale to one replica brings (and a scale to zero returns to standby, at its end)."""
    (*_, pod) = [o for o in cluster.standby if o["metadata"]["name"].startswith(CANARY[1])]
    return pod


def _other_args(cluster: StubCluster) -> None:
    """The next version's pods run other arguments than its chart renders."""
    for pod in cluster.standby:
        args = pod["spec"]["containers"][0]["args"]
        args[args.index("--max-num-seqs") + 1] = "32"


def test_a_step_that_fails_its_checks_goes_back_to_zero(run: Run) -> None:
    r = run(0, "canary", "--workload", "chat", change=_other_args)
    assert (r.code, r.err) == (1, "")
    assert r.replicas() == [1, 0]
    assert _replicas(r.cluster) == 0
    assert r.slept == [600.0]
    pod = _canary_pod(r.cluster)["metadata"]["name"]
    assert r.out.splitlines()[2:] == [
        "chat: step 25% failed; the next version is back at 0%",
        f"  args vllm-chat-canary: drift: differ on 1 of 1 pod ({pod}: --max-num-seqs 32 (planned 16))",
    ]


def test_each_step_is_a_journal_line_and_the_last_one_the_exit_status(run: Run) -> None:
    r = run(0, "canary", "--workload", "chat")
    assert [(line["event"], line.get("weight"), line.get("outcome")) for line in r.journal] == [
        ("step", 25, "held"), ("step", 50, "held"), ("exit", 50, None)
    ]  # fmt: skip
    step = r.journal[0]
    assert (step["command"], step["environment"], step["workload"], step["window"], step["weight_after"]) == (
        "canary", "qa", "chat", "10m", 25
    )  # fmt: skip
    assert {row["workload"] for row in step["rows"]} >= {"vllm-chat", "vllm-chat-canary"}
    assert r.journal[-1]["exit_status"] == 0 and r.journal[-1]["at"].endswith("Z")


def test_a_canary_with_no_traffic_fails_when_its_hold_ends(run: Run) -> None:
    """No request reached the next version over the hold: nothing to judge it on, so the step fails (after holding
    its full time) and the weight goes back to 0."""
    r = run(0, "canary", "--workload", "chat", change=_no_traffic_to_the_next_version)
    assert (r.code, r.err) == (1, ""), r.out
    assert r.replicas() == [1, 0]
    assert r.slept == [600.0]
    assert r.out.splitlines()[2:] == [
        "chat: step 25% held 10 min without enough evidence on the next version (run with --load to send it traffic, "
        "or hold longer: canary.hold_minutes); the next version is back at 0%",
        "  ttft vllm-chat-canary: insufficient: insufficient data (0 requests in 10m: a median needs 10, a p99 500)",
        "  itl vllm-chat-canary: insufficient: insufficient data (0 token gaps in 10m: a median needs 10, a p99 500)",
    ]
    step, end = r.journal
    assert (step["outcome"], step["weight"], step["weight_after"], step["verdict"]) == (
        "insufficient data", 25, 0, "insufficient"
    )  # fmt: skip
    assert (end["event"], end["exit_status"], end["weight"]) == ("exit", 1, 0)


def test_an_error_mid_step_sets_the_weight_back_to_zero_and_says_so(run: Run) -> None:
    """Prometheus cannot be reached when the first step is verified: the weight goes back to 0 before the command
    exits 2 with the error."""
    r = run(0, "canary", "--workload", "chat", faults=Faults(prometheus_unreachable=True))
    assert r.code == 2
    assert r.replicas() == [1, 0]
    assert _replicas(r.cluster) == 0
    error = (
        "prometheus: unreachable through the API server's service proxy (monitoring/thanos-query:10902): error "
        "trying to reach service: dial tcp 10.0.3.17:10902: i/o timeout"
    )
    assert r.out.splitlines()[2] == f"chat: {error} at step 25%; the next version is back at 0%"
    assert r.err == f"llm-eks: error: {error} [LLMEKS-E502]\n"
    step, end = r.journal
    assert (step["outcome"], step["weight_after"], step["message"]) == ("error", 0, f"{error} at step 25%")
    assert (end["exit_status"], end["weight"], end["message"]) == (2, 0, f"{error} [LLMEKS-E502]")


@pytest.mark.parametrize(("signum", "name"), [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")])
def test_a_signal_mid_step_sets_the_weight_back_to_zero_and_says_so(
    run: Run, signum: signal.Signals, name: str
) -> None:
    """SIGTERM (a pipeline cancelled) or SIGINT (Ctrl-C) during the second step's hold: the weight goes back to 0,
    and the command exits 128 + the signal's number."""
    holds: list[float] = []

    def sleep(seconds: float) -> None:
        holds.append(seconds)
        if len(holds) == 2:
            os.kill(os.getpid(), signum)

    r = run(0, "canary", "--workload", "chat", sleep=sleep)
    assert (r.code, r.err) == (128 + signum, "")
    assert r.replicas() == [1, 3, 0]
    assert r.out.splitlines()[-1] == f"chat: interrupted by {name} at step 50%; the next version is back at 0%"
    assert [(line["event"], line.get("outcome"), line.get("weight_after")) for line in r.journal] == [
        ("step", "held", 25), ("step", "interrupted", 0), ("exit", None, None)
    ]  # fmt: skip
    assert r.journal[-1]["exit_status"] == 128 + signum and r.journal[-1]["weight"] == 0
    # The handlers the command installed are gone with it.
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_canary_with_load_sends_the_next_version_the_benchmark_during_each_hold(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --load each step runs the next version's benchmark Job against it (its own Service: the plan's
    concurrency on its one Ready replica), holds for the rest of hold_minutes, and judges the run's rows with the
    rest."""
    monkeypatch.setattr("llm_eks.verify.load.POLL_SECONDS", 0.0)
    config = parse_environment("qa", _body(0))
    (spec,) = load_specs(config, plan_workloads(config), {CANARY[1]: 1}, only={CANARY[1]})
    log = bench_log(bench_result(spec))
    faults = Faults(logs={spec.job_name: log})
    # One step: the bench log stands for one replica's run (16 at a time).
    r = run(0, "canary", "--workload", "chat", "--steps", "25", "--load", faults=faults, groups=("llm-eks-load",))
    assert (r.code, r.err) == (0, ""), r.out
    jobs = r.server.created
    assert [(j["metadata"]["namespace"], j["metadata"]["name"]) for j in jobs] == [(CANARY[0], spec.job_name)]
    args = jobs[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--base-url") + 1] == f"http://{CANARY[1]}.{CANARY[0]}.svc.cluster.local:8000"
    assert args[args.index("--max-concurrency") + 1] == "16"
    # The run took 347 s of the 600 s hold: the step holds the rest (the looks at the Job wait no time here).
    assert [s for s in r.slept if s] == [pytest.approx(600 - 347.2)]
    assert r.out.splitlines()[:3] == [
        "chat: next version at 25%; sending it the load, holding at least 10 min",
        f"load: {CANARY[0]}/{spec.job_name}: 500 requests of 1,024 → 256 tokens, 16 at a time",
        f"load: {CANARY[0]}/{spec.job_name} complete",
    ]
    step = r.journal[0]
    assert {row["check"] for row in step["rows"] if row["workload"] == CANARY[1]} >= {"load", "load-itl"}
    assert len(r.server.deleted) == 1


def _not_ready(cluster: StubCluster) -> None:
    (deployment,) = [o for o in cluster.objects if o["kind"] == "Deployment" and o["metadata"]["name"] == CURRENT[1]]
    deployment["status"]["readyReplicas"] = 0


def test_no_share_moves_while_the_pool_does_not_serve(run: Run) -> None:
    r = run(0, "canary", "--workload", "chat", change=_not_ready)
    assert r.code == 1 and r.server.patches == []
    assert r.out.strip().endswith(
        "inference-chat/vllm-chat has no ready replica: the pool must serve before a share moves"
    )


def test_canary_resumes_above_the_share_the_pool_has(run: Run) -> None:
    r = run(25, "canary", "--workload", "chat")
    assert r.code == 0
    assert r.replicas() == [3]


def test_rollback_sends_every_request_to_the_current_version_at_once(run: Run) -> None:
    r = run(25, "rollback", "--workload", "chat")
    assert (r.code, r.err) == (0, "")
    assert r.replicas() == [0] and _replicas(r.cluster) == 0
    # Instant: nothing waited for (a terminating pod leaves the pool at once).
    assert r.slept == []
    assert r.out.strip() == (
        "chat: the next version is at 0% (was 25%); the current version serves every request. Set canary.weight 0 "
        "in cdk.json so a deploy keeps it there"
    )


def test_without_the_rollout_role_the_patch_is_a_one_line_403(run: Run) -> None:
    r = run(25, "rollback", "--workload", "chat", roles=False)
    assert (r.code, r.out) == (2, "")
    assert r.err.startswith(
        f'llm-eks: error: kubernetes API: 403 Forbidden on PATCH {SCALE}: deployments/scale "vllm-chat-canary" is '
        'forbidden: User "verifier" cannot patch resource "deployments/scale" in API group "apps"'
    )
    assert _replicas(r.cluster) == 1


@pytest.mark.parametrize("command", ["canary", "rollback"])
def test_an_insecure_context_is_refused_unless_allowed(run: Run, command: str) -> None:
    r = run(25, command, "--workload", "chat", insecure=True)
    assert (r.code, r.out) == (2, "") and r.server.patches == [] and r.server.requests == []
    assert r.err == (
        f"llm-eks: error: --context: {CONTEXT!r} is not allowed; sets insecure-skip-tls-verify: a command that "
        "changes the cluster sends no credentials to an API server it cannot authenticate; give the cluster its "
        "certificate-authority-data, or pass --allow-insecure-tls [LLMEKS-E500]\n"
    )
    if command == "rollback":
        allowed = run(25, command, "--workload", "chat", "--allow-insecure-tls", insecure=True)
        assert allowed.code == 0 and _replicas(allowed.cluster) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("canary", "--workload", "chats"),
            "--workload: 'chats' is not allowed; must be a workload of environments.qa.workloads with a canary: chat"
            " [LLMEKS-E506]",
        ),
        (
            ("canary", "--workload", "chat", "--steps", "50,25"),
            "--steps: '50,25' is not allowed; must rise strictly from at least 1 to at most 99 (100 is the promotion, "
            "a deploy) [LLMEKS-E601]",
        ),
        (
            ("canary", "--workload", "chat", "--steps", "half"),
            "--steps: 'half' is not allowed; must be shares separated by commas, e.g. 5,25,50 [LLMEKS-E601]",
        ),
    ],
)
def test_bad_input_is_one_line(run: Run, args: tuple[str, ...], message: str) -> None:
    r = run(0, *args)
    assert (r.code, r.out, r.err) == (2, "", f"llm-eks: error: {message}\n")
    assert r.server.patches == []


def test_the_promote_page_shows_what_canary_prints(run: Run) -> None:
    """docs/how-to/promote.md's canary runs (a healthy next version, one no request reached, one running other
    arguments, an error and a SIGTERM mid-walk) are what the command prints against the stand-in, and its journal
    lines (the step's ok rows left out, times aside) what the no-traffic run writes."""
    page = REPO_ROOT / "docs" / "how-to" / "promote.md"
    texts = [b.text.rstrip("\n") for b in examples.blocks(page) if b.lang == "text"]
    shown = [t for t in texts if t.startswith("chat: ")]
    healthy = run(0, "canary", "--workload", "chat")
    quiet = run(0, "canary", "--workload", "chat", change=_no_traffic_to_the_next_version)
    failing = run(0, "canary", "--workload", "chat", change=_other_args)
    error = run(0, "canary", "--workload", "chat", faults=Faults(prometheus_unreachable=True))
    holds: list[float] = []

    def sleep(seconds: float) -> None:
        holds.append(seconds)
        if len(holds) == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    stopped = run(0, "canary", "--workload", "chat", sleep=sleep)
    assert shown == [r.out.rstrip("\n") for r in (healthy, quiet, failing, error, stopped)]
    (journal,) = [t for t in texts if t.startswith('{"command": "canary"')]

    def timeless(line: dict[str, Any]) -> dict[str, Any]:
        rows = [row for row in line.get("rows", []) if row["verdict"] != "ok"]
        return {k: v for k, v in line.items() if k != "at"} | ({"rows": rows} if "rows" in line else {})

    assert [timeless(json.loads(line)) for line in journal.splitlines()] == [timeless(line) for line in quiet.journal]
