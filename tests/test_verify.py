"""`llm-eks verify` end to end: the real kubernetes client against a local stand-in of the API server (and of
Prometheus behind its service proxy, tests/verify_stub.py), holding each default environment's objects as its charts
render them and vLLM 0.33's metrics (tests/verify_cluster.py, tests/verify_metrics.py). Healthy environments exit 0;
each check's breach or drift exits 1 with its row (the errors, exit 2: tests/test_verify_errors.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from llm_eks.manifests.verifier.rbac import cluster_role
from tests.conftest import ENVIRONMENTS, REPO_ROOT
from tests.kube_schema import assert_valid
from tests.verify_cluster import StubCluster, rfc3339
from tests.verify_metrics import spread
from tests.verify_run import CONTEXT_FILE, big_context_file, fresh, healthy_clusters, run_verify
from tests.verify_stub import CONTEXT

# It starts a server.
pytestmark = pytest.mark.synth

# The latency fixture: the published measurements the planner is scored against, whose shape a record matches.
LATENCY_FIXTURE = REPO_ROOT / "tests" / "fixtures" / "latency" / "published.json"


@pytest.fixture(scope="module")
def clusters() -> dict[str, StubCluster]:
    return healthy_clusters(*ENVIRONMENTS, "big")


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


def test_the_cluster_role_covers_every_request_and_nothing_unused(
    clusters: dict[str, StubCluster], big_context: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Across the environments (and the LeaderWorkerSet one) every rule of llm-eks-verify is used at least once."""
    used: set[tuple[str, str, str]] = set()
    for env in (*ENVIRONMENTS, "big"):
        context = big_context if env == "big" else CONTEXT_FILE
        result = run_verify(fresh(clusters, env), tmp_path, capsys, context_file=context)
        assert result.code == 0
        for info in result.server.requests:
            resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
            used.add((info.group, resource, info.verb))
    granted = {(g, r, v) for rule in cluster_role()["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}  # fmt: skip
    assert used == granted


def test_json_has_the_documented_shape(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_verify(fresh(clusters, "staging"), tmp_path, capsys, "--json", "--window", "30m")
    body = json.loads(result.out)
    assert list(body) == ["environment", "context", "server", "window", "observed_at", "verdict", "counts", "rows"]
    assert (body["environment"], body["context"], body["window"]) == ("staging", CONTEXT, "30m")
    assert body["server"] == result.server.url and body["observed_at"].endswith("Z")
    assert body["verdict"] == "unknown" and body["counts"] == {"ok": 17, "unknown": 1, "drift": 0, "breach": 0}
    for row in body["rows"]:
        assert list(row) == ["check", "workload", "planned", "observed", "verdict", "detail"]
        assert all(isinstance(v, str) for v in row.values())
    assert {r["check"] for r in body["rows"]} == {
        "nodepool", "gpu-nodes", "pods", "args", "kv-cache", "ttft", "itl", "route", "startup"
    }  # fmt: skip
    assert all("[30m]" in q for q in result.server.queries if "[" in q)


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


def test_no_traffic_is_unknown_not_ok_and_exits_0(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = fresh(clusters, "dev")
    for target in cluster.metrics.values():
        target.load.ttft_s, target.load.itl_s = [], []
    result = run_verify(cluster, tmp_path, capsys)
    assert result.code == 0
    (w,) = cluster.plan.workloads
    ttft, itl = result.row("ttft", w.name), result.row("itl", w.name)
    assert (ttft["observed"], ttft["verdict"], ttft["detail"]) == (
        "no samples", "unknown", "no requests in the last 1h (no traffic)"
    )  # fmt: skip
    assert (itl["verdict"], itl["detail"]) == ("unknown", "no token gaps in the last 1h (no traffic)")


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
    (ttft_above_slo, "ttft", "breach", "p99 above the SLO's 1,500 ms; 600 requests in 1h"),
    (itl_off_estimate, "itl", "drift", "x the estimate (allowed 1/1.5-1.5x)"),
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
