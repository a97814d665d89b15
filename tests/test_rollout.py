"""`llm-eks canary` and `llm-eks rollback` against the stand-in API server: the route's weights patched step by step
with what the gateway chart renders, each step verified, a failing step set back to 0, and the one-line errors."""

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
from tests.test_canary import BODY, _objects
from tests.verify_cluster import StubCluster, healthy_cluster
from tests.verify_load_results import bench_log, bench_result
from tests.verify_metrics import series
from tests.verify_stub import CONTEXT, Faults, StubApiServer, write_kubeconfig

ROUTE = "/apis/gateway.networking.k8s.io/v1/namespaces/inference-chat/httproutes/vllm-chat"
CURRENT = ("inference-chat", "vllm-chat")
CANARY = ("inference-chat-canary", "vllm-chat-canary")


def _body(weight: int) -> dict[str, Any]:
    body = copy.deepcopy(BODY)
    body["workloads"]["chat"]["canary"]["weight"] = weight
    return body


@pytest.fixture(scope="module")
def clusters(prometheus: PrometheusServer) -> dict[int, StubCluster]:
    """The environment deployed with its next version at weight 0 and at 10."""
    built = {w: healthy_cluster(parse_environment("qa", _body(w)), prometheus=prometheus) for w in (0, 10)}
    quiet = _copy(built[0])
    _no_traffic_to_the_next_version(quiet)
    prometheus.load([*(series(c) for c in built.values()), series(quiet)])
    return built


def _copy(c: StubCluster) -> StubCluster:
    return StubCluster(c.environment, c.plan, copy.deepcopy(c.objects), c.now, copy.deepcopy(c.metrics), c.prometheus)


def _no_traffic_to_the_next_version(cluster: StubCluster) -> None:
    for (namespace, _), target in cluster.metrics.items():
        if namespace == CANARY[0]:
            target.load.ttft_s, target.load.itl_s = [], []


def _route(cluster: StubCluster) -> dict[str, Any]:
    (found,) = [o for o in cluster.objects if o["kind"] == "HTTPRoute" and o["metadata"]["name"] == "vllm-chat"]
    return found


def _weights(route: dict[str, Any]) -> dict[tuple[str, str], int]:
    (rule,) = route["spec"]["rules"]
    return {(ref.get("namespace", "inference-chat"), ref["name"]): ref.get("weight", 1) for ref in rule["backendRefs"]}


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

    def weights(self) -> list[dict[tuple[str, str], int]]:
        """The backends' weights of each patch sent, in order."""
        return [_weights({"spec": body["spec"]}) for _, body in self.server.patches]


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
    assert (r.code, r.err) == (0, "")
    assert [path for path, _ in r.server.patches] == [ROUTE] * 4
    steps = r.weights()
    assert steps[:3] == [{CURRENT: 100 - w, CANARY: w} for w in (5, 25, 50)]
    assert steps[-1] == {CANARY: 1}  # at 100 the current pool leaves the rule (the API server's default weight 1)
    assert r.slept == [600.0] * 4  # canary.hold_minutes 10 at each step
    lines = r.out.splitlines()
    assert lines[0] == "chat: next version at 5%; holding 10 min"
    assert lines[1] == "chat: 5% held: the next version's 7 checks ok over 10m"
    assert lines[-1].startswith("chat: the next version serves every request. Promote it in cdk.json")
    # Each step's verification read Prometheus over the hold.
    assert any("[10m]" in q for q in r.server.queries)


def test_a_patched_route_is_what_a_deploy_at_that_weight_applies(run: Run) -> None:
    r = run(0, "canary", "--workload", "chat", "--steps", "25")
    assert r.code == 0
    (rendered,) = [o for o in _objects(_body(25)) if o["kind"] == "HTTPRoute"]
    assert _route(r.cluster)["spec"] == rendered["spec"]


def _canary_pod(cluster: StubCluster) -> dict[str, Any]:
    (pod,) = [o for o in cluster.objects if o["kind"] == "Pod" and o["metadata"]["name"].startswith(CANARY[1])]
    return pod


def _other_args(cluster: StubCluster) -> None:
    args = _canary_pod(cluster)["spec"]["containers"][0]["args"]
    args[args.index("--max-num-seqs") + 1] = "32"


def test_a_step_that_fails_its_checks_goes_back_to_zero(run: Run) -> None:
    r = run(0, "canary", "--workload", "chat", change=_other_args)
    assert (r.code, r.err) == (1, "")
    assert [w.get(CANARY, 0) for w in r.weights()] == [5, 0]
    assert _weights(_route(r.cluster)) == {CURRENT: 1}
    assert r.slept == [600.0]
    pod = _canary_pod(r.cluster)["metadata"]["name"]
    assert r.out.splitlines()[1:] == [
        "chat: step 5% failed; the next version is back at 0%",
        f"  args vllm-chat-canary: drift: differ on 1 of 1 pod ({pod}: --max-num-seqs 32 (planned 16))",
    ]


def test_each_step_is_a_journal_line_and_the_last_one_the_exit_status(run: Run) -> None:
    r = run(0, "canary", "--workload", "chat")
    assert [(line["event"], line.get("weight"), line.get("outcome")) for line in r.journal] == [
        ("step", 5, "held"), ("step", 25, "held"), ("step", 50, "held"), ("step", 100, "held"), ("exit", 100, None)
    ]  # fmt: skip
    step = r.journal[0]
    assert (step["command"], step["environment"], step["workload"], step["window"], step["weight_after"]) == (
        "canary", "qa", "chat", "10m", 5
    )  # fmt: skip
    assert {row["workload"] for row in step["rows"]} >= {"vllm-chat", "vllm-chat-canary"}
    assert r.journal[-1]["exit_status"] == 0 and r.journal[-1]["at"].endswith("Z")


def test_a_canary_with_no_traffic_fails_when_its_hold_ends(run: Run) -> None:
    """No request reached the next version over the hold: nothing to judge it on, so the step fails (after holding
    its full time) and the weight goes back to 0."""
    r = run(0, "canary", "--workload", "chat", change=_no_traffic_to_the_next_version)
    assert (r.code, r.err) == (1, "")
    assert [w.get(CANARY, 0) for w in r.weights()] == [5, 0]
    assert r.slept == [600.0]
    assert r.out.splitlines()[1:] == [
        "chat: step 5% held 10 min without enough evidence on the next version (run with --load to send it traffic, "
        "or hold longer: canary.hold_minutes); the next version is back at 0%",
        "  ttft vllm-chat-canary: insufficient: insufficient data (0 requests in 10m: a median needs 10, a p99 500)",
        "  itl vllm-chat-canary: insufficient: insufficient data (0 token gaps in 10m: a median needs 10, a p99 500)",
    ]
    step, end = r.journal
    assert (step["outcome"], step["weight"], step["weight_after"], step["verdict"]) == (
        "insufficient data", 5, 0, "insufficient"
    )  # fmt: skip
    assert (end["event"], end["exit_status"], end["weight"]) == ("exit", 1, 0)


def test_an_error_mid_step_sets_the_weight_back_to_zero_and_says_so(run: Run) -> None:
    """Prometheus cannot be reached when the first step is verified: the weight goes back to 0 before the command
    exits 2 with the error."""
    r = run(0, "canary", "--workload", "chat", faults=Faults(prometheus_unreachable=True))
    assert r.code == 2
    assert [w.get(CANARY, 0) for w in r.weights()] == [5, 0]
    assert _weights(_route(r.cluster)) == {CURRENT: 1}
    error = (
        "prometheus: unreachable through the API server's service proxy (monitoring/thanos-query:10902): error "
        "trying to reach service: dial tcp 10.0.3.17:10902: i/o timeout"
    )
    assert r.out.splitlines()[1] == f"chat: {error} at step 5%; the next version is back at 0%"
    assert r.err == f"llm-eks: error: {error}\n"
    step, end = r.journal
    assert (step["outcome"], step["weight_after"], step["message"]) == ("error", 0, f"{error} at step 5%")
    assert (end["exit_status"], end["weight"], end["message"]) == (2, 0, error)


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
    assert [w.get(CANARY, 0) for w in r.weights()] == [5, 25, 0]
    assert r.out.splitlines()[-1] == f"chat: interrupted by {name} at step 25%; the next version is back at 0%"
    assert [(line["event"], line.get("outcome"), line.get("weight_after")) for line in r.journal] == [
        ("step", "held", 5), ("step", "interrupted", 0), ("exit", None, None)
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
    r = run(0, "canary", "--workload", "chat", "--load", faults=faults, groups=("llm-eks-load",))
    assert (r.code, r.err) == (0, "")
    jobs = r.server.created
    assert [(j["metadata"]["namespace"], j["metadata"]["name"]) for j in jobs] == [(CANARY[0], spec.job_name)] * 4
    args = jobs[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--base-url") + 1] == f"http://{CANARY[1]}.{CANARY[0]}.svc.cluster.local:8000"
    assert args[args.index("--max-concurrency") + 1] == "16"
    # The run took 347 s of the 600 s hold: the step holds the rest (the looks at the Job wait no time here).
    assert [s for s in r.slept if s] == [pytest.approx(600 - 347.2)] * 4
    assert r.out.splitlines()[:3] == [
        "chat: next version at 5%; sending it the load, holding at least 10 min",
        f"load: {CANARY[0]}/{spec.job_name}: 500 requests of 1,024 → 256 tokens, 16 at a time",
        f"load: {CANARY[0]}/{spec.job_name} complete",
    ]
    step = r.journal[0]
    assert {row["check"] for row in step["rows"] if row["workload"] == CANARY[1]} >= {"load", "load-itl"}
    assert len(r.server.deleted) == 4


def _not_ready(cluster: StubCluster) -> None:
    (deployment,) = [o for o in cluster.objects if o["kind"] == "Deployment" and o["metadata"]["name"] == CANARY[1]]
    deployment["status"]["readyReplicas"] = 0


def test_a_next_version_without_a_ready_replica_gets_no_traffic(run: Run) -> None:
    r = run(0, "canary", "--workload", "chat", change=_not_ready)
    assert r.code == 1 and r.server.patches == []
    assert r.out.strip() == (
        "inference-chat-canary/vllm-chat-canary has no ready replica: the route sends it nothing until it serves "
        "(Istio 1.30.3 fails a rule whose picker's pool has no ready pod, istio/istio#61594)"
    )


def test_canary_resumes_above_the_weight_the_route_has(run: Run) -> None:
    r = run(10, "canary", "--workload", "chat")
    assert r.code == 0
    assert r.weights() == [{CURRENT: 75, CANARY: 25}, {CURRENT: 50, CANARY: 50}, {CANARY: 1}]


def test_rollback_sends_every_request_to_the_current_version(run: Run) -> None:
    r = run(10, "rollback", "--workload", "chat")
    assert (r.code, r.err) == (0, "")
    assert _weights(_route(r.cluster)) == {CURRENT: 1}
    assert r.out.strip() == (
        "chat: the next version is at 0% (was 10%); the current version serves every request. Set canary.weight 0 "
        "in cdk.json so a deploy keeps it there"
    )


def test_without_the_rollout_role_the_patch_is_a_one_line_403(run: Run) -> None:
    r = run(10, "rollback", "--workload", "chat", roles=False)
    assert (r.code, r.out) == (2, "")
    assert r.err == (
        f'llm-eks: error: kubernetes API: 403 Forbidden on PATCH {ROUTE}: httproutes "vllm-chat" is forbidden: User '
        '"verifier" cannot patch resource "httproutes" in API group "gateway.networking.k8s.io"; moving a route\'s '
        "weights needs the llm-eks-rollout group's Role (docs/how-to/promote.md)\n"
    )
    assert _weights(_route(r.cluster))[CANARY] == 10


@pytest.mark.parametrize("command", ["canary", "rollback"])
def test_an_insecure_context_is_refused_unless_allowed(run: Run, command: str) -> None:
    r = run(10, command, "--workload", "chat", insecure=True)
    assert (r.code, r.out) == (2, "") and r.server.patches == [] and r.server.requests == []
    assert r.err == (
        f"llm-eks: error: --context: {CONTEXT!r} is not allowed; sets insecure-skip-tls-verify: a command that "
        "changes the cluster sends no credentials to an API server it cannot authenticate; give the cluster its "
        "certificate-authority-data, or pass --allow-insecure-tls\n"
    )
    if command == "rollback":
        allowed = run(10, command, "--workload", "chat", "--allow-insecure-tls", insecure=True)
        assert allowed.code == 0 and _weights(_route(allowed.cluster)) == {CURRENT: 1}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("canary", "--workload", "chats"),
            "--workload: 'chats' is not allowed; must be a workload of environments.qa.workloads with a canary: chat",
        ),
        (
            ("canary", "--workload", "chat", "--steps", "50,25"),
            "--steps: '50,25' is not allowed; must rise strictly from at least 1 to at most 100",
        ),
        (
            ("canary", "--workload", "chat", "--steps", "half"),
            "--steps: 'half' is not allowed; must be weights separated by commas, e.g. 5,25,50,100",
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
