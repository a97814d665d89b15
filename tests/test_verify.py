"""`llm-eks verify` end to end: the real kubernetes client against a local stand-in of the API server (and of
Prometheus behind its service proxy, tests/verify_stub.py), holding each default environment's objects as its charts
render them and vLLM 0.33's metrics (tests/verify_cluster.py, tests/verify_metrics.py). Healthy environments exit 0;
each check's breach or drift exits 1 with its row (the errors, exit 2: tests/test_verify_errors.py)."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.manifests.verifier import rbac
from llm_eks.planner.at_load import LoadEstimate, ObservedLoad, estimate_at_load
from tests.conftest import CDK_JSON, ENVIRONMENTS, REPO_ROOT
from tests.kube_schema import assert_valid
from tests.prometheus_server import PrometheusServer
from tests.verify_cluster import StubCluster, rfc3339
from tests.verify_metrics import GAPS, REQUESTS, spread
from tests.verify_run import (
    CONTEXT_FILE,
    big_context_file,
    fresh,
    healthy_clusters,
    preload,
    run_verify,
    shown_text,
)
from tests.verify_stub import CONTEXT, Faults

# It starts a server.
pytestmark = pytest.mark.synth

# The latency fixture: the published measurements the planner is scored against, whose shape a record matches.
LATENCY_FIXTURE = REPO_ROOT / "tests" / "fixtures" / "latency" / "published.json"


@pytest.fixture(scope="module")
def clusters(prometheus: PrometheusServer) -> dict[str, StubCluster]:
    built = healthy_clusters(prometheus, *ENVIRONMENTS, "big")
    # The metrics this module's tests change, loaded into the server at once.
    dev = [c[0] for c in DEV_CASES if c[0] in (kv_smaller, ttft_above_slo, itl_off_estimate)]
    preload(
        built,
        *[("dev", change) for change in (*dev, no_traffic, few_requests)],
        *[("staging", quiet_moe(ratio)) for ratio in (1.0, 4.0)],
    )
    return built


@pytest.fixture
def big_context(tmp_path: Path) -> str:
    return big_context_file(tmp_path)


# -- healthy environments -----------------------------------------------------------------------------------------


def test_the_stub_objects_have_the_real_shapes(clusters: dict[str, StubCluster]) -> None:
    """What the stub serves validates against the Kubernetes and upstream CRD schemas, status included."""
    for cluster in clusters.values():
        assert_valid(cluster.objects)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_a_healthy_environment_prints_the_table_and_exits_0(
    clusters: dict[str, StubCluster], env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = fresh(clusters, env)
    result = run_verify(cluster, tmp_path, capsys)
    assert (result.code, result.err) == (0, ""), result.out
    lines = result.out.splitlines()
    assert lines[0].startswith(f"llm-eks verify {env}: context {CONTEXT}, window 1h, ")
    assert lines[2].split() == ["CHECK", "WORKLOAD", "PLANNED", "OBSERVED", "VERDICT", "DETAIL"]
    for pool in cluster.plan.pools:
        assert result.row("nodepool", pool.name)["verdict"] == "ok"
        # A fallback family's pool launches nothing while the planned family has capacity.
        nodes = "unknown" if pool.name.endswith("-fallback") else "ok"
        assert result.row("gpu-nodes", pool.name)["verdict"] == nodes
    for w in cluster.plan.workloads:
        checks = ["pods", "args", "kv-cache", "ttft", "itl"] + (["route"] if w.route else [])
        for check in checks:
            assert result.row(check, w.name)["verdict"] == "ok", result.row(check, w.name)
        startup = result.row("startup", w.name)["verdict"]
        assert startup == ("unknown" if w.engine == "ray-serve" else "ok")
    assert lines[-1].endswith("verdict ok") or lines[-1].endswith("verdict unknown")
    # Every request was one the ClusterRole allows (the stub enforces it), and each query names current series.
    assert result.server.queries


def test_a_replica_spanning_nodes_is_a_leader_worker_set(
    clusters: dict[str, StubCluster], big_context: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = fresh(clusters, "big")
    result = run_verify(cluster, tmp_path, capsys, context_file=big_context)
    assert result.code == 0, result.out
    (w,) = cluster.plan.workloads
    pods, args = result.row("pods", w.name), result.row("args", w.name)
    assert (pods["planned"], pods["observed"], pods["verdict"]) == (
        "LeaderWorkerSet, 1-2 groups", "1/1 groups Ready (2 pods of 2)", "ok"
    )  # fmt: skip
    assert (args["observed"], args["verdict"]) == ("as planned on 2 pods", "ok")
    # A worker running another argument than its chart's.
    worker = next(p for p in cluster.pods(w) if p["metadata"]["labels"][LWS_INDEX] == "1")
    worker["spec"]["containers"][0]["args"].remove("--headless")
    result = run_verify(cluster, tmp_path, capsys, context_file=big_context)
    assert result.code == 1
    args = result.row("args", w.name)
    assert (args["verdict"], args["detail"]) == ("drift", f"{worker['metadata']['name']}: missing --headless")


LWS_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


def test_the_verify_rbac_covers_every_request_and_nothing_unused(
    clusters: dict[str, StubCluster], big_context: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Across the environments (and the LeaderWorkerSet one) every rule of llm-eks-verify's ClusterRole and Roles is
    used at least once, and verify reads no namespace but its workloads' and monitoring (the stand-in authorizes each
    request against the RBAC the stack and the charts apply, for group llm-eks-verify only)."""
    used: set[tuple[str, str, str]] = set()
    for env in (*ENVIRONMENTS, "big"):
        context = big_context if env == "big" else CONTEXT_FILE
        cluster = fresh(clusters, env)
        result = run_verify(cluster, tmp_path, capsys, context_file=context)
        assert result.code == 0
        namespaces = {w.namespace for w in cluster.plan.workloads} | {"monitoring"}
        for info in result.server.requests:
            resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
            used.add((info.group, resource, info.verb))
            assert info.namespace is None or info.namespace in namespaces, info
    roles = [rbac.cluster_role(), rbac.monitoring_role(), rbac.workload_role("inference")]
    granted = {(g, r, v) for role in roles for rule in role["rules"] for g in rule["apiGroups"]
               for r in rule["resources"] for v in rule["verbs"]}  # fmt: skip
    assert used == granted


def test_json_has_the_documented_shape(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_verify(fresh(clusters, "staging"), tmp_path, capsys, "--json", "--window", "30m")
    body = json.loads(result.out)
    assert list(body) == ["environment", "context", "server", "window", "observed_at", "verdict", "counts", "rows"]
    assert (body["environment"], body["context"], body["window"]) == ("staging", CONTEXT, "30m")
    assert body["server"] == result.server.url and body["observed_at"].endswith("Z")
    assert body["verdict"] == "unknown"
    assert body["counts"] == {"ok": 17, "unknown": 1, "insufficient": 0, "drift": 0, "breach": 0}
    for row in body["rows"]:
        assert list(row) == ["check", "workload", "planned", "observed", "verdict", "detail"]
        assert all(isinstance(v, str) for v in row.values())
    assert {r["check"] for r in body["rows"]} == {
        "nodepool", "gpu-nodes", "pods", "args", "kv-cache", "ttft", "itl", "route", "startup"
    }  # fmt: skip
    assert all("[30m]" in q for q in result.server.queries if "[" in q)


def test_journal_keeps_the_verification_and_the_exit_status(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = tmp_path / "verify.jsonl"
    result = run_verify(fresh(clusters, "dev"), tmp_path, capsys, "--journal", str(journal), "--json")
    verification, end = (json.loads(line) for line in journal.read_text().splitlines())
    report = json.loads(result.out)
    assert (verification["command"], verification["event"], verification["environment"]) == (
        "verify", "verification", "dev"
    )  # fmt: skip
    assert {k: verification[k] for k in ("window", "verdict", "counts", "rows")} == {
        k: report[k] for k in ("window", "verdict", "counts", "rows")
    }
    assert (end["event"], end["exit_status"]) == ("exit", result.code) == ("exit", 0)


def test_record_writes_calibration_points_in_the_fixture_shape(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = fresh(clusters, "staging")
    record = tmp_path / "observed.json"
    result = run_verify(cluster, tmp_path, capsys, "--record", str(record))
    assert result.code == 0
    points = json.loads(record.read_text())
    published = json.loads(LATENCY_FIXTURE.read_text())
    fixture_keys = set.intersection(*(set(entry) for entry in published))
    assert [p["model"] for p in points] == [w.model for w in cluster.plan.workloads]
    for point, w in zip(points, cluster.plan.workloads, strict=True):
        assert set(point) >= fixture_keys, fixture_keys - set(point)
        assert set(point["llm_eks"]) == {"instance_type", "weight_format", "arrivals", "model"}
        for key in ("ttft_ms", "itl_ms", "source", "flags"):
            assert isinstance(point[key], type(published[0][key])), key
        assert {"kv_cache_tokens", "startup_s", "instance_type"} <= set(point)
        assert point["source"]["kind"] == "llm-eks-verify" and point["source"]["cluster"] == CONTEXT
        assert set(point["source"]) == {"kind", "environment", "cluster", "observed_at", "window"}
        assert (point["regime"], point["concurrency_kind"], point["dp"], point["ep"]) == (
            "observed", "observed mean running", 1, 1
        )  # fmt: skip
        assert point["gpus"] == w.gpus_per_replica and point["instance_type"] == w.instance_type
        assert point["kv_cache_tokens"] == w.kv_cache_tokens
        assert set(point["ttft_ms"]) == {"median", "p99"} and set(point["itl_ms"]) == {"median", "p99"}
        assert point["tpot_ms"] == {} and point["concurrency"] == w.target_concurrency / 2
        assert (point["mean_input_tokens"], point["mean_output_tokens"]) == (1024, 256)
        assert point["vllm_version"] == ("0.33.0" if w.engine == "vllm" else None)
        assert (point["startup_s"] is None) == (w.engine == "ray-serve")
        assert "--max-model-len " + str(point["flags"]).split("--max-model-len ")[1][:4] in str(point["flags"])


def no_traffic(c: StubCluster) -> None:
    for target in c.metrics.values():
        target.load.ttft_s, target.load.itl_s = [], []


def test_no_traffic_is_insufficient_not_ok_and_exits_0(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = fresh(clusters, "dev")
    no_traffic(cluster)
    result = run_verify(cluster, tmp_path, capsys)
    assert result.code == 0
    (w,) = cluster.plan.workloads
    ttft, itl = result.row("ttft", w.name), result.row("itl", w.name)
    assert (ttft["observed"], ttft["verdict"], ttft["detail"]) == (
        "insufficient data", "insufficient", "0 requests in 1h: a median needs 10, a p99 500"
    )  # fmt: skip
    assert (itl["verdict"], itl["detail"]) == ("insufficient", "0 token gaps in 1h: a median needs 10, a p99 500")
    assert result.out.splitlines()[-1] == "8 checks: 6 ok, 2 insufficient; verdict insufficient"


def few_requests(c: StubCluster) -> None:
    """120 requests and 1,200 token gaps in the hour, at the plan's medians: enough for a median, not a p99."""
    for target in c.metrics.values():
        target.load.ttft_s, target.load.itl_s = target.load.ttft_s[::30], target.load.itl_s[::30]


def test_a_percentile_on_too_few_samples_is_insufficient_data_never_ok(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = fresh(clusters, "dev")
    few_requests(cluster)
    result = run_verify(cluster, tmp_path, capsys)
    assert result.code == 0
    (w,) = cluster.plan.workloads
    ttft, itl = result.row("ttft", w.name), result.row("itl", w.name)
    # 120 requests judge the TTFT's median, not its p99: the row is not ok.
    assert ttft["verdict"] == "insufficient" and ttft["observed"].endswith(", p99 not judged")
    assert ttft["detail"].endswith("; 120 requests in 1h; a p99 needs 500 requests")
    # 1,200 token gaps are enough for the ITL's p99.
    assert itl["verdict"] == "ok" and itl["detail"].endswith("; 1,200 token gaps in 1h")


# -- waiting for a deploy to settle ------------------------------------------------------------------------------


def _rolling(c: StubCluster) -> None:
    """A rollout in progress: the Deployment's new pod is still loading its model."""
    (p,) = c.pods(_dev_workload(c))
    p["status"]["conditions"][-1]["status"] = "False"
    p["status"]["containerStatuses"][0].update(ready=False, state={"waiting": {"reason": "ContainerCreating"}})
    deployment = c.find("Deployment", _dev_workload(c).name)
    deployment["status"]["readyReplicas"] = 0


def test_wait_ready_waits_for_the_rollout_then_verifies(
    clusters: dict[str, StubCluster],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pod becomes Ready while verify waits: it verifies then, and the journal has each look."""
    monkeypatch.setattr("llm_eks.verify.wait.POLL_SECONDS", 0.0)
    cluster = fresh(clusters, "dev")
    healthy = copy.deepcopy(cluster.objects)
    _rolling(cluster)
    lists = []

    def settle_after_two_looks(c: StubCluster, info: Any) -> None:
        if info.resource == "pods" and info.verb == "list":
            lists.append(info)
            if len(lists) == 2:  # the second look's owner was read before this
                c.objects[:] = healthy

    journal = tmp_path / "verify.jsonl"
    faults = Faults(before=settle_after_two_looks)
    result = run_verify(cluster, tmp_path, capsys, "--wait-ready", "30m", "--journal", str(journal), faults=faults)
    assert result.code == 0, result.out + result.err
    looks = [json.loads(line) for line in journal.read_text().splitlines() if '"wait-ready"' in line]
    assert [look["ready"] for look in looks] == [False, False, True]
    pod = next(p["metadata"]["name"] for p in cluster.pods(_dev_workload(cluster)))
    assert looks[0]["starting"] == [
        "vllm-llama-3-1-8b-instruct: 0/1 replicas Ready, 1/1 updated", f"{pod}: vllm ContainerCreating"
    ]  # fmt: skip
    assert result.err.splitlines()[0] == f"llm-eks verify dev: waiting: {'; '.join(looks[0]['starting'])}"


def test_wait_ready_fails_naming_what_is_still_starting(
    clusters: dict[str, StubCluster],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = iter(range(0, 10_000, 600))  # ten minutes pass between two looks
    monkeypatch.setattr("llm_eks.verify.wait.monotonic", lambda: float(next(clock)))
    monkeypatch.setattr("llm_eks.verify.wait.sleep", lambda seconds: None)
    cluster = fresh(clusters, "dev")
    _rolling(cluster)
    result = run_verify(cluster, tmp_path, capsys, "--wait-ready", "30m")
    assert (result.code, result.out) == (1, "")
    pod = next(p["metadata"]["name"] for p in cluster.pods(_dev_workload(cluster)))
    assert result.err.splitlines()[-1] == (
        "llm-eks verify dev: still starting after 1,800 s: vllm-llama-3-1-8b-instruct: 0/1 replicas Ready, 1/1 "
        f"updated; {pod}: vllm ContainerCreating"
    )
    assert result.err.splitlines()[-1] in shown_text()  # docs/how-to/verify.md shows it
    assert result.server.queries == []  # no verification without a settled environment


# -- latency at the load it ran at -------------------------------------------------------------------------------


@functools.cache
def _qwen_at_one_sequence() -> tuple[LoadEstimate, float]:
    """The planner's estimate for staging's Qwen3-30B-A3B (an MoE, on Ray Serve) at one sequence, and its planned ITL
    at target_concurrency."""
    config = parse_environment("staging", CDK_JSON["context"]["environments"]["staging"])
    plans = {s.key: p for s, p in zip(config.served, plan_workloads(config), strict=True)}
    return estimate_at_load(plans["qwen"], ObservedLoad(1, 1024, 256)), plans["qwen"].itl_estimate_ms


def quiet_moe(itl_ratio: float) -> Callable[[StubCluster], None]:
    """One sequence at a time on each Qwen server, its first tokens as estimated at that load and its token gaps at
    `itl_ratio` times that estimate."""

    def change(c: StubCluster) -> None:
        at_one, _ = _qwen_at_one_sequence()
        for (namespace, _), target in c.metrics.items():
            if namespace == "inference-qwen":
                target.load.running = 1.0
                target.load.ttft_s = spread(at_one.ttft_ms / 1000, REQUESTS)
                target.load.itl_s = spread(at_one.itl_ms / 1000 * itl_ratio, GAPS)

    change.__name__ = f"quiet_moe_{itl_ratio:g}"
    return change


def test_a_quiet_moe_at_one_sequence_is_ok(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An MoE decoding one sequence reads a fraction of its experts: its token gaps are far below the estimate at
    target_concurrency, and as estimated at the load it ran."""
    at_one, planned_itl = _qwen_at_one_sequence()
    assert at_one.itl_ms / planned_itl < 1 / 1.5  # against the planned figure this would read as drift
    cluster = fresh(clusters, "staging")
    quiet_moe(1.0)(cluster)
    result = run_verify(cluster, tmp_path, capsys)
    assert result.code == 0, result.out
    itl, ttft = result.row("itl", "ray-qwen"), result.row("ttft", "ray-qwen")
    assert (itl["verdict"], ttft["verdict"]) == ("ok", "ok"), (itl, ttft)
    # The planned figure stays as context; the median is judged at the observed load.
    assert itl["planned"] == f"p99 ≤ 50.0 ms, median ~{planned_itl:.1f} ms at 32 running"
    assert "estimated at the observed 1 running, 1,024 → 256 tokens; 36,000 token gaps in 1h" in itl["detail"]


def test_a_real_drift_at_one_sequence_is_still_caught(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Token gaps 4 times the estimate at one sequence: inside the planned figure at 32 sequences (so a comparison with
    it would pass) and the SLO, and drift at the load it ran."""
    at_one, planned_itl = _qwen_at_one_sequence()
    assert 1 / 1.5 < 4 * at_one.itl_ms / planned_itl < 1.5
    cluster = fresh(clusters, "staging")
    quiet_moe(4.0)(cluster)
    result = run_verify(cluster, tmp_path, capsys)
    assert result.code == 1
    itl = result.row("itl", "ray-qwen")
    assert itl["verdict"] == "drift", itl
    assert "estimated at the observed 1 running, 1,024 → 256 tokens (allowed 1/1.5-1.5x)" in itl["detail"]


# -- each check, breached -----------------------------------------------------------------------------------------


def _dev_workload(c: StubCluster) -> Any:
    return c.plan.workloads[0]


def no_node_pool(c: StubCluster) -> None:
    c.remove("NodePool", "gpu-g5")


def node_pool_limit(c: StubCluster) -> None:
    c.find("NodePool", "gpu-g5")["spec"]["limits"]["nvidia.com/gpu"] = 8


def foreign_node(c: StubCluster) -> None:
    c.all("Node")[0]["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "g5.48xlarge"


def no_gpus(c: StubCluster) -> None:
    c.all("Node")[0]["status"]["allocatable"]["nvidia.com/gpu"] = "0"


def no_deployment(c: StubCluster) -> None:
    c.remove("Deployment", _dev_workload(c).name)


def crash_looping(c: StubCluster) -> None:
    (p,) = c.pods(_dev_workload(c))
    p["status"]["conditions"][-1]["status"] = "False"
    p["status"]["containerStatuses"][0].update(ready=False, state={"waiting": {"reason": "CrashLoopBackOff"}})


def other_args(c: StubCluster) -> None:
    (p,) = c.pods(_dev_workload(c))
    args = p["spec"]["containers"][0]["args"]
    args[args.index("--max-num-seqs") + 1] = "32"


def other_image(c: StubCluster) -> None:
    (p,) = c.pods(_dev_workload(c))
    p["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.32.0"


def kv_smaller(c: StubCluster) -> None:
    for target in c.metrics.values():
        target.load.kv_tokens = int(target.load.kv_tokens * 0.8)


def ttft_above_slo(c: StubCluster) -> None:
    w = _dev_workload(c)
    for target in c.metrics.values():
        target.load.ttft_s = spread(w.ttft_estimate_ms / 1000, 600, tail=3.0, tail_share=0.05)


def itl_off_estimate(c: StubCluster) -> None:
    w = _dev_workload(c)
    for target in c.metrics.values():
        target.load.itl_s = spread(w.itl_estimate_ms / 1000 * 0.3, 6000)


def slow_start(c: StubCluster) -> None:
    (p,) = c.pods(_dev_workload(c))
    created = p["metadata"]["creationTimestamp"]
    from llm_eks.verify.observed import timestamp

    at = timestamp(created)
    assert at is not None
    ready = rfc3339(at + timedelta(seconds=3 * _dev_workload(c).start_warm_s))
    for cond in p["status"]["conditions"]:
        if cond["type"] in ("Ready", "ContainersReady"):
            cond["lastTransitionTime"] = ready


DEV_CASES: list[tuple[Callable[[StubCluster], None], str, str, str]] = [
    (no_node_pool, "nodepool", "breach", "no karpenter.sh/v1 NodePool gpu-g5"),
    (node_pool_limit, "nodepool", "drift", "limit 8 nvidia.com/gpu, planned 3"),
    (foreign_node, "gpu-nodes", "breach", "g5.48xlarge is not a size the pool allows (g5.xlarge, g5.2xlarge)"),
    (no_gpus, "gpu-nodes", "drift", "advertises 0 of its 1 nvidia.com/gpu (is the device plugin running?)"),
    (no_deployment, "pods", "breach", "no Deployment inference/vllm-llama-3-1-8b-instruct"),
    (crash_looping, "pods", "breach", "nothing serves: vllm-llama-3-1-8b-instruct-"),
    (other_args, "args", "drift", "--max-num-seqs 32 (planned 16)"),
    (other_image, "args", "drift", "image vllm/vllm-openai:v0.32.0 (planned vllm/vllm-openai:v0.33.0)"),
    (kv_smaller, "kv-cache", "drift", "-20.0% (kv_cache_size_tokens), tolerance ±10%"),
    (
        ttft_above_slo,
        "ttft",
        "breach",
        "p99 above the SLO's 1,500 ms (~1,253 ms estimated at this load); 600 requests in 1h",
    ),
    (
        itl_off_estimate,
        "itl",
        "drift",
        "x ~39.5 ms estimated at the observed 8 running, 1,024 → 256 tokens (allowed 1/1.5-1.5x)",
    ),
    (slow_start, "startup", "drift", "beyond +50%"),
]


@pytest.mark.parametrize(("breach", "check", "verdict", "detail"), DEV_CASES, ids=[c[0].__name__ for c in DEV_CASES])
def test_each_check_breached_exits_1_with_its_row(
    clusters: dict[str, StubCluster],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    breach: Callable[[StubCluster], None],
    check: str,
    verdict: str,
    detail: str,
) -> None:
    cluster = fresh(clusters, "dev")
    breach(cluster)
    result = run_verify(cluster, tmp_path, capsys)
    assert result.code == 1, result.out
    subject = "gpu-g5" if check in ("nodepool", "gpu-nodes") else _dev_workload(cluster).name
    row = result.row(check, subject)
    assert row["verdict"] == verdict and detail in row["detail"], row
    assert result.out.splitlines()[-1].endswith(f"verdict {'breach' if 'breach' in result.out else 'drift'}")


def route_not_accepted(c: StubCluster) -> None:
    route = c.find("HTTPRoute", "vllm-llama")
    accepted = route["status"]["parents"][0]["conditions"][0]
    accepted.update(status="False", reason="NotAllowedByListeners", message="no listener admits the namespace")


def route_missing_model(c: StubCluster) -> None:
    route = c.find("HTTPRoute", "vllm-llama")
    route["spec"]["rules"][0]["matches"][0]["headers"][0]["value"] = "meta-llama/Llama-3.1-70B-Instruct"


def no_route(c: StubCluster) -> None:
    c.remove("HTTPRoute", "ray-qwen")


def ray_not_ready(c: StubCluster) -> None:
    c.find("RayService", "ray-qwen")["status"]["conditions"][0].update(
        status="False", reason="ZeroServeEndpoints", message="no Serve endpoint is ready"
    )


def ray_engine_kwargs(c: StubCluster) -> None:
    import yaml

    service = c.find("RayService", "ray-qwen")
    config = yaml.safe_load(service["spec"]["serveConfigV2"])
    config["applications"][0]["args"]["llm_configs"][0]["engine_kwargs"]["max_num_seqs"] = 64
    service["spec"]["serveConfigV2"] = yaml.safe_dump(config)


STAGING_CASES: list[tuple[Callable[[StubCluster], None], str, str, str, str]] = [
    (
        route_not_accepted,
        "route",
        "vllm-llama",
        "breach",
        "inference-gateway/inference: no listener admits the namespace",
    ),
    (route_missing_model, "route", "vllm-llama", "breach", "does not route meta-llama/Llama-3.1-8B-Instruct"),
    (no_route, "route", "ray-qwen", "breach", "no HTTPRoute inference-qwen/ray-qwen"),
    (ray_not_ready, "pods", "ray-qwen", "breach", "the RayService does not serve: no Serve endpoint is ready"),
    (ray_engine_kwargs, "args", "ray-qwen", "drift", "engine_kwargs.max_num_seqs 64 (planned 32)"),
]


@pytest.mark.parametrize(
    ("breach", "check", "workload", "verdict", "detail"), STAGING_CASES, ids=[c[0].__name__ for c in STAGING_CASES]
)
def test_gateway_and_ray_checks_breached_exit_1_with_their_row(
    clusters: dict[str, StubCluster],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    breach: Callable[[StubCluster], None],
    check: str,
    workload: str,
    verdict: str,
    detail: str,
) -> None:
    cluster = fresh(clusters, "staging")
    breach(cluster)
    result = run_verify(cluster, tmp_path, capsys)
    assert result.code == 1, result.out
    row = result.row(check, workload)
    assert row["verdict"] == verdict and detail in row["detail"], row


def _report_blocks() -> list[list[str]]:
    return [_masked(text) for text in shown_text() if text.startswith("llm-eks verify dev: context ")]


def _masked(report: str) -> list[str]:
    """A report without what changes run by run: the time of the run in its first line."""
    lines = report.rstrip("\n").splitlines()
    return [re.sub(r", \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", ", <time>", lines[0]), *(ln.rstrip() for ln in lines[1:])]


def test_the_verify_page_shows_what_verify_prints(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/how-to/verify.md's three reports (the healthy dev, then --max-num-seqs raised and a smaller KV cache, then
    no request in the window) are what verify prints against the stand-in, every figure of the plan in them
    included."""
    healthy = run_verify(fresh(clusters, "dev"), tmp_path, capsys)
    drifted = fresh(clusters, "dev")
    other_args(drifted)
    kv_smaller(drifted)
    drift = run_verify(drifted, tmp_path, capsys)
    idle = fresh(clusters, "dev")
    no_traffic(idle)
    quiet = run_verify(idle, tmp_path, capsys)
    assert (healthy.code, drift.code, quiet.code) == (0, 1, 0)
    assert _report_blocks() == [_masked(healthy.out), _masked(drift.out), _masked(quiet.out)]
