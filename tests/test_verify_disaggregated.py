"""`llm-eks verify` on a disaggregated workload (the example `disaggregated`), through the CLI against the stand-in
API server and a real Prometheus: each pool is read by its own scrape job, the prefill pool's prefill time is held
to the plan's prefill phase (the TTFT's evidence rule and drift ratio), and the decode pool's ITL to the plan's decode
step."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from llm_eks.config import parse_environment
from llm_eks.verify.prometheus import workload_queries
from tests.prometheus_server import PrometheusServer
from tests.test_disaggregated_serving import EXAMPLE, NAME, PREFILL
from tests.verify_cluster import StubCluster, healthy_cluster
from tests.verify_metrics import REQUESTS, prefill_load, series
from tests.verify_run import Run, fresh, run_verify

ENV = "rag"
CONTEXT_FILE = str(EXAMPLE / "cdk.json")


def _prefill_at(factor: float, requests: int = REQUESTS) -> Callable[[StubCluster], None]:
    """A change to the prefill pool's servers: prompts prefilled in `factor` x the plan's prefill phase."""

    def change(cluster: StubCluster) -> None:
        w = cluster.workload(NAME)
        for target in cluster.metrics.values():
            if target.job == PREFILL:
                target.load = prefill_load(w, factor, requests)

    return change


def _prefill_kv_short(cluster: StubCluster) -> None:
    """The prefill pool's servers size 20 % less KV cache than the plan (the decode pool's as planned)."""
    w = cluster.workload(NAME)
    for target in cluster.metrics.values():
        if target.job == PREFILL:
            target.load = replace(prefill_load(w), kv_tokens=int(w.kv_cache_tokens * 0.8))


CHANGES = {"slow": _prefill_at(3.0), "idle": _prefill_at(1.0, requests=0), "prefill-kv-short": _prefill_kv_short}


@pytest.fixture(scope="module")
def clusters(prometheus: PrometheusServer) -> dict[str, StubCluster]:
    """The healthy example, and its variants (loaded into Prometheus together: one restart)."""
    envs = json.loads(Path(CONTEXT_FILE).read_text())["context"]["environments"]
    healthy = healthy_cluster(parse_environment(ENV, envs[ENV]), prometheus=prometheus)
    out = {"healthy": healthy}
    for name, change in CHANGES.items():
        out[name] = fresh({ENV: healthy}, ENV)
        change(out[name])
    prometheus.load(series(c) for c in out.values())
    return out


def _not_ready(pod: dict[str, Any]) -> None:
    for c in pod["status"]["conditions"]:
        if c["type"] == "Ready":
            c["status"] = "False"


def _run(cluster: StubCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    return run_verify(cluster, tmp_path, capsys, context_file=CONTEXT_FILE)


def test_the_plan_carries_the_prefill_pool_and_each_phase(clusters: dict[str, StubCluster]) -> None:
    w = clusters["healthy"].workload(NAME)
    assert w.phases is not None
    assert (w.metrics_job, w.phases.prefill_job) == (NAME, PREFILL)
    assert w.phases.prefill_ms > 0 and w.phases.decode_itl_ms > 0 and w.phases.transfer_ms > 0
    q = workload_queries(w, "1h")
    assert q["prefill_median"] == (
        "histogram_quantile(0.5, sum by (le) (rate(vllm:request_prefill_time_seconds_bucket"
        f'{{namespace="inference", job="{PREFILL}", model_name="meta-llama/Llama-3.3-70B-Instruct"}}[1h])))'
    )
    assert f'job="{PREFILL}"' in q["prefill_count"] and f'job="{NAME}"' in q["itl_median"]


def test_a_prefill_as_planned_is_ok(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(clusters["healthy"], tmp_path, capsys)
    w = clusters["healthy"].workload(NAME)
    assert w.phases is not None
    prefill = run.row("prefill", NAME)
    assert prefill["verdict"] == "ok", prefill
    assert f"on {PREFILL} in 1h" in prefill["detail"]
    assert f"x the plan's prefill phase (~{w.phases.prefill_ms:.0f} ms per prompt)" in prefill["detail"]
    assert prefill["detail"].startswith("median ")
    itl = run.row("itl", NAME)
    assert itl["verdict"] == "ok", itl
    assert f"the plan's decode step (~{w.phases.decode_itl_ms:.1f} ms" in itl["detail"]
    # The decode pool's TTFT times its own leg: the SLO holds it, no whole-path estimate does.
    ttft = run.row("ttft", NAME)
    assert ttft["verdict"] == "ok", ttft
    # Each pool's pods run their own role's arguments (the decode port and KV consumer; the KV producer).
    assert run.row("args", NAME)["verdict"] == "ok"
    assert run.code == 0, run.out
    decode = sum(1 for t in clusters["healthy"].metrics.values() if t.job == NAME)
    assert ttft["detail"] == f"{REQUESTS * decode:,} requests on the decode pool ({NAME}) in 1h"


def test_a_prefill_three_times_the_plan_is_drift(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(clusters["slow"], tmp_path, capsys)
    prefill = run.row("prefill", NAME)
    assert prefill["verdict"] == "drift", prefill
    assert "(allowed at most 2x)" in prefill["detail"]
    ratio = float(prefill["detail"].removeprefix("median ").split("x")[0])
    assert 2.5 < ratio < 3.5
    assert run.code == 1


def test_no_prefill_observations_is_insufficient(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(clusters["idle"], tmp_path, capsys)
    prefill = run.row("prefill", NAME)
    assert (prefill["verdict"], prefill["observed"]) == ("insufficient", "insufficient data")
    assert prefill["detail"] == f"0 requests on {PREFILL} in 1h: a median needs 10, a p99 500"


def test_each_pool_s_pods_are_counted_against_its_own_replicas(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = clusters["healthy"]
    w = cluster.workload(NAME)
    assert w.phases is not None
    decode = int(cluster.find("Deployment", NAME)["spec"]["replicas"])
    prefill = int(cluster.find("Deployment", PREFILL)["spec"]["replicas"])
    assert decode != prefill, "the example's pools must differ in size for this test to tell them apart"
    run = _run(cluster, tmp_path, capsys)
    rows = {name: run.row("pods", name) for name in (NAME, PREFILL)}
    assert rows[NAME]["observed"] == f"{decode}/{decode} Ready", rows[NAME]
    assert rows[NAME]["planned"] == f"Deployment, {w.replicas_min}-{w.replicas_max} replicas"
    assert rows[PREFILL]["observed"] == f"{prefill}/{prefill} Ready", rows[PREFILL]
    low, high = w.phases.prefill_replicas_min, w.phases.prefill_replicas_max
    assert rows[PREFILL]["planned"] == f"Deployment, {low}-{high} replicas (prefill pool)"
    assert {r["verdict"] for r in rows.values()} == {"ok"}


def test_a_prefill_pod_not_ready_is_the_prefill_pool_s_drift(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = fresh({ENV: clusters["healthy"]}, ENV)
    (first, *_) = [p for p in cluster.all("Pod") if p["metadata"]["name"].startswith(f"{PREFILL}-")]
    _not_ready(first)
    run = _run(cluster, tmp_path, capsys)
    assert run.row("pods", NAME)["verdict"] == "ok"
    prefill = run.row("pods", PREFILL)
    assert prefill["verdict"] == "drift", prefill
    assert prefill["detail"].startswith(first["metadata"]["name"])


def test_each_pool_s_kv_cache_is_held_to_the_plan(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = clusters["healthy"]
    prefill = int(cluster.find("Deployment", PREFILL)["spec"]["replicas"])
    run = _run(cluster, tmp_path, capsys)
    row = run.row("kv-cache", PREFILL)
    assert row["verdict"] == "ok", row
    assert row["observed"].endswith(f"({prefill} servers)" if prefill > 1 else "(1 server)")
    assert f'job="{PREFILL}"' in workload_queries(cluster.workload(NAME), "1h")["prefill_kv"]


def test_a_prefill_pool_short_of_kv_cache_is_its_drift(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(clusters["prefill-kv-short"], tmp_path, capsys)
    assert run.row("kv-cache", NAME)["verdict"] == "ok"
    row = run.row("kv-cache", PREFILL)
    assert row["verdict"] == "drift", row
    assert row["detail"].startswith(f"{PREFILL}-") and "-20.0%" in row["detail"], row
    assert run.code == 1


# --- Pools whose replicas span nodes (the example's `wide-ep` environment: each pool a LeaderWorkerSet) -------------

WIDE = "wide-ep"
WIDE_NAME = "vllm-deepseek-v3"
WIDE_PREFILL = f"{WIDE_NAME}-prefill"


@pytest.fixture(scope="module")
def wide(prometheus: PrometheusServer) -> StubCluster:
    envs = json.loads(Path(CONTEXT_FILE).read_text())["context"]["environments"]
    # Its pods' rows only: its metrics are never loaded (Prometheus holds the example's `rag` series).
    return healthy_cluster(parse_environment(WIDE, envs[WIDE]), prometheus=prometheus)


def test_each_pool_s_groups_are_read_from_its_own_leader_worker_set(
    wide: StubCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = wide.workload(WIDE_NAME)
    assert w.owner_kind == "LeaderWorkerSet" and w.phases is not None
    # Every pod's `vllm serve` arguments are its pool's and its place in the group's.
    assert set(w.args) == {"leader", "worker", "prefill-leader", "prefill-worker"}
    assert "--headless" in w.args["prefill-worker"] and "--headless" not in w.args["prefill-leader"]
    run = _run(wide, tmp_path, capsys)
    rows = {name: run.row("pods", name) for name in (WIDE_NAME, WIDE_PREFILL)}
    assert rows[WIDE_NAME]["planned"] == f"LeaderWorkerSet, {w.replicas_min}-{w.replicas_max} groups"
    assert rows[WIDE_NAME]["observed"] == "1/1 groups Ready (2 pods of 2)", rows[WIDE_NAME]
    low, high = w.phases.prefill_replicas_min, w.phases.prefill_replicas_max
    assert rows[WIDE_PREFILL]["planned"] == f"LeaderWorkerSet, {low}-{high} groups (prefill pool)"
    assert rows[WIDE_PREFILL]["observed"] == "2/2 groups Ready (4 pods of 4)", rows[WIDE_PREFILL]
    assert {r["verdict"] for r in rows.values()} == {"ok"}
    args = run.row("args", WIDE_NAME)
    assert (args["verdict"], args["observed"]) == ("ok", "as planned on 6 pods"), args


def test_a_prefill_worker_lost_is_the_prefill_pool_s_drift(
    wide: StubCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A prefill group's worker not Ready (its node lost: LeaderWorkerSet then recreates the whole group): the prefill
    pool drifts, the decode pool stays ok."""
    cluster = fresh({WIDE: wide}, WIDE)
    (worker,) = [p for p in cluster.all("Pod") if p["metadata"]["name"] == f"{WIDE_PREFILL}-0-1"]
    _not_ready(worker)
    run = _run(cluster, tmp_path, capsys)
    assert run.row("pods", WIDE_NAME)["verdict"] == "ok"
    prefill = run.row("pods", WIDE_PREFILL)
    assert prefill["verdict"] == "drift", prefill
    assert prefill["detail"].startswith(f"{WIDE_PREFILL}-0-1")
