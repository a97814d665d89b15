"""`llm-eks verify`'s pure parts, without a server: the plan it derives for each default environment, the PromQL it
sends (every name a current vLLM 0.33 series, and present in vLLM's own /metrics text), how it reads KV capacity,
compares arguments and parses --window, each check's threshold on both sides, and the RBAC it needs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.manifests.promql import check_promql, ray_exported, vllm_names
from llm_eks.manifests.verifier import rbac
from llm_eks.manifests.verifier.reads import READS
from llm_eks.planner.at_load import LoadEstimate, ObservedLoad
from llm_eks.planner.drift import MEDIAN_MIN_SAMPLES, P99_MIN_SAMPLES, min_samples
from llm_eks.verify.args_diff import args_difference, config_difference
from llm_eks.verify.checks_metrics import ITL_MEDIAN_RATIO, KV_TOLERANCE, TTFT_MEDIAN_RATIO, kv_row, latency_rows
from llm_eks.verify.derive import environment_plan
from llm_eks.verify.expected import WorkloadPlan
from llm_eks.verify.observed import KvSample, Latency, WorkloadMetrics
from llm_eks.verify.prometheus import kv_samples, window_seconds, workload_queries
from llm_eks.verify.rows import Row
from tests.conftest import CDK_JSON, ENVIRONMENTS
from tests.kube_schema import assert_valid
from tests.verify_metrics import ServerLoad, exposition


def _plan(env: str) -> Any:
    config = parse_environment(env, CDK_JSON["context"]["environments"][env])
    return environment_plan(config, plan_workloads(config))


@pytest.fixture(scope="module")
def plans() -> dict[str, Any]:
    return {env: _plan(env) for env in ENVIRONMENTS}


def test_the_plan_names_what_the_charts_create(plans: dict[str, Any]) -> None:
    dev = plans["dev"]
    (w,) = dev.workloads
    assert (w.name, w.namespace, w.owner_kind) == ("vllm-llama-3-1-8b-instruct", "inference", "Deployment")
    assert w.pod_selector == {"app.kubernetes.io/instance": w.name}, "its KEDA-scaled and its on-demand floor pods"
    assert w.args["server"][:7] == (w.args["server"][0], "--host", "0.0.0.0", "--port", "8000",
                                    "--served-model-name", "meta-llama/Llama-3.1-8B-Instruct")  # fmt: skip
    staging = {w.name: w for w in plans["staging"].workloads}
    assert staging["ray-qwen"].owner_kind == "RayService" and staging["ray-qwen"].llm_config is not None
    assert staging["ray-qwen"].route is not None and staging["ray-qwen"].route.backend_kind == "Backend"
    assert staging["vllm-llama"].route is not None and staging["vllm-llama"].route.backend_kind == "InferencePool"
    for plan in plans.values():
        for pool in plan.pools:
            assert set(pool.planned_types) <= set(pool.instance_types)


def test_every_query_names_current_vllm_series(plans: dict[str, Any]) -> None:
    """The names pass the same check as every PromQL llm-eks writes (llm_eks.manifests.promql), in vLLM's names
    and, for Ray Serve, in Ray's."""
    for plan in plans.values():
        for w in plan.workloads:
            for name, expr in workload_queries(w, "1h").items():
                assert check_promql(expr) == [], (w.name, name, expr)


def test_the_names_verify_queries_are_in_vllms_own_metrics_text(plans: dict[str, Any]) -> None:
    """vLLM 0.33's /metrics text (written as its logger registers the metrics), read with prometheus_client's
    parser, holds every series verify selects: the suffixes (_bucket, _count, _total) included."""
    load = ServerLoad(kv_tokens=32768, ttft_s=[0.2], itl_s=[0.03], running=1, prompt_tokens=10, output_tokens=5)
    text = exposition("m", load)
    exposed = {s.name for family in text_string_to_metric_families(text) for s in family.samples}
    for plan in plans.values():
        for w in plan.workloads:
            for expr in workload_queries(w, "1h").values():
                for name in vllm_names(expr) or [n for n in exposed if ray_exported(n) in expr]:
                    assert name in exposed, (name, expr)


def test_kv_capacity_reads_the_group_aware_label_and_falls_back_to_blocks() -> None:
    def samples(load: ServerLoad) -> list[tuple[dict[str, str], float]]:
        text = exposition("m", load)
        (info,) = [f for f in text_string_to_metric_families(text) if f.name == "vllm:cache_config_info"]
        return [({**s.labels, "pod": "p0"}, s.value) for s in info.samples]

    load = ServerLoad(kv_tokens=33088, ttft_s=[], itl_s=[], running=0, prompt_tokens=0, output_tokens=0)
    assert kv_samples(samples(load)) == (KvSample("p0", 33088, "kv_cache_size_tokens"),)
    load.group_aware = False
    assert kv_samples(samples(load)) == (KvSample("p0", 33088, "num_gpu_blocks x block_size"),)


def test_args_differences_are_named_flag_by_flag() -> None:
    planned = ["m", "--port", "8000", "--max-num-seqs", "16", "--enforce-eager"]
    assert args_difference(planned, ["m", "--max-num-seqs", "16", "--enforce-eager", "--port", "8000"]) is None
    assert args_difference(planned, ["m", "--port", "8000", "--max-num-seqs", "32", "--kv-cache-dtype", "fp8"]) == (
        "--max-num-seqs 32 (planned 16); extra --kv-cache-dtype fp8; missing --enforce-eager"
    )
    assert args_difference(["a"], ["b"]) == "(model) b (planned a)"
    assert config_difference({"engine_kwargs": {"max_num_seqs": 32}}, {"engine_kwargs": {"max_num_seqs": 64}}) == (
        "engine_kwargs.max_num_seqs 64 (planned 32)"
    )


@pytest.mark.parametrize(("window", "seconds"), [("1h", 3600), ("30m", 1800), ("2h30m", 9000), ("1d", 86400)])
def test_window_is_a_prometheus_duration(window: str, seconds: float) -> None:
    assert window_seconds(window) == seconds


@pytest.mark.parametrize("window", ["5x", "30s", "", "1h]) or vector(1", "-1h"])
def test_a_window_that_is_not_one_is_refused(window: str) -> None:
    with pytest.raises(ConfigError) as err:
        window_seconds(window)
    assert str(err.value) == (
        f"--window: {window!r} is not allowed; a Prometheus duration such as 1h, 30m or 2h30m (at least 1m)"
        " [LLMEKS-E503]"
    )


def _dev(plans: dict[str, Any]) -> WorkloadPlan:
    return plans["dev"].workloads[0]  # type: ignore[no-any-return]


def test_kv_tolerance_on_both_sides(plans: dict[str, Any]) -> None:
    w = _dev(plans)
    inside = int(w.kv_cache_tokens * (1 - KV_TOLERANCE) + 1)
    outside = int(w.kv_cache_tokens * (1 - KV_TOLERANCE) - 16)
    assert kv_row(w, WorkloadMetrics(kv=(KvSample("p", inside, "kv_cache_size_tokens"),))).verdict == "ok"
    row = kv_row(w, WorkloadMetrics(kv=(KvSample("p", outside, "kv_cache_size_tokens"),)))
    assert (row.verdict, row.detail.split(":")[0]) == ("drift", "p")
    assert kv_row(w, WorkloadMetrics()).verdict == "unknown"


def _at(w: WorkloadPlan, factor: float = 1.0) -> LoadEstimate:
    """An estimate at some observed load: the plan's figures times `factor` (its p99s twice its medians)."""
    assert w.ttft_estimate_ms is not None
    ttft, itl = w.ttft_estimate_ms * factor, w.itl_estimate_ms * factor
    return LoadEstimate(ObservedLoad(4.2, 900.3, 299.8), 4, 900, 300, ttft, 2 * ttft, itl, 2 * itl, itl, 100.0)


def test_latency_p99_at_the_slo_passes_above_it_breaches(plans: dict[str, Any]) -> None:
    w = _dev(plans)
    itl = w.itl_estimate_ms / 1000
    at_slo = Latency(median_s=itl, p99_s=w.slo_itl_p99_ms / 1000, count=P99_MIN_SAMPLES)
    above = Latency(median_s=itl, p99_s=w.slo_itl_p99_ms / 1000 + 0.001, count=P99_MIN_SAMPLES)
    assert latency_rows(w, WorkloadMetrics(itl=at_slo), "1h", _at(w))[1].verdict == "ok"
    row = latency_rows(w, WorkloadMetrics(itl=above), "1h", _at(w))[1]
    # The planner's p99 at the observed load says whether the plan meets the SLO at that load at all.
    p99_estimate = f"~{2 * w.itl_estimate_ms:.1f} ms estimated at this load"
    assert row.verdict == "breach" and row.detail.startswith(f"p99 above the SLO's 60.0 ms ({p99_estimate}); 500 ")
    assert latency_rows(w, WorkloadMetrics(itl=above), "1h", None)[1].detail.startswith("p99 above the SLO's 60.0 ms;")
    # A median above the SLO is a breach on a median's sample alone: most token gaps miss it.
    slow = Latency(median_s=w.slo_itl_p99_ms / 1000 * 1.2, p99_s=None, count=MEDIAN_MIN_SAMPLES)
    row = latency_rows(w, WorkloadMetrics(itl=slow), "1h", _at(w))[1]
    assert (row.verdict, row.observed) == ("breach", "median 72.0 ms, p99 not judged")


def test_a_percentile_needs_its_sample(plans: dict[str, Any]) -> None:
    """5 / (1 - q) observations, so five lie above it: 10 for the median, 500 for the p99. Fewer is insufficient."""
    assert (MEDIAN_MIN_SAMPLES, P99_MIN_SAMPLES, min_samples(0.9)) == (10, 500, 50)
    with pytest.raises(ValueError, match=r"quantile must be between 0 and 1 \(exclusive\), not 1\.0"):
        min_samples(1.0)
    w = _dev(plans)
    itl = w.itl_estimate_ms / 1000

    def row(n: int) -> Row:
        return latency_rows(w, WorkloadMetrics(itl=Latency(itl, 0.05, n)), "10m", _at(w))[1]

    assert (row(9).verdict, row(9).observed) == ("insufficient", "insufficient data")
    assert row(9).detail == "9 token gaps in 10m: a median needs 10, a p99 500"
    assert (row(10).verdict, row(499).verdict, row(500).verdict) == ("insufficient", "insufficient", "ok")
    assert row(499).detail.endswith("; 499 token gaps in 10m; a p99 needs 500 token gaps")
    # No samples at all (no traffic): insufficient, never ok.
    assert [r.verdict for r in latency_rows(w, WorkloadMetrics(), "1h", None)] == ["insufficient", "insufficient"]


def test_latency_median_is_judged_at_the_observed_load_within_its_ratio(plans: dict[str, Any]) -> None:
    w = _dev(plans)
    assert w.ttft_estimate_ms is not None
    # At the observed load the planner estimates half of the planned figures.
    at_load = _at(w, 0.5)
    itl, ttft = at_load.itl_ms / 1000, at_load.ttft_ms / 1000

    def verdicts(itl_median: float, ttft_median: float) -> list[str]:
        n = P99_MIN_SAMPLES
        m = WorkloadMetrics(itl=Latency(itl_median, 0.05, n), ttft=Latency(ttft_median, 1.0, n))
        return [r.verdict for r in latency_rows(w, m, "1h", at_load)]

    assert verdicts(itl * ITL_MEDIAN_RATIO * 0.99, ttft * TTFT_MEDIAN_RATIO * 0.99) == ["ok", "ok"]
    assert verdicts(itl * ITL_MEDIAN_RATIO * 1.01, ttft * TTFT_MEDIAN_RATIO * 1.01) == ["drift", "drift"]
    # Below: ITL far below its estimate is the model being wrong; a TTFT far below is only noted.
    assert verdicts(itl / ITL_MEDIAN_RATIO * 0.9, ttft / TTFT_MEDIAN_RATIO * 0.9) == ["ok", "drift"]
    m = WorkloadMetrics(ttft=Latency(ttft / 4, 1.0, P99_MIN_SAMPLES))
    (fast, _) = latency_rows(w, m, "1h", at_load)
    assert fast.detail.startswith(
        f"median 0.25x ~{at_load.ttft_ms:.0f} ms estimated at the observed 4 running, 900 → 300 tokens: faster than "
        "estimated; 500 requests in 1h"
    )
    # The planned figure stays in the row as context.
    assert fast.planned == f"p99 ≤ 1,500 ms, median ~{w.ttft_estimate_ms:.0f} ms at 16 running"
    # Without an observed load the planned estimate is the basis, and the row says so.
    (row, _) = latency_rows(w, m, "1h", None)
    assert "the planned estimate (no observed load)" in row.detail
    # A TTFT the plan does not estimate is held against the SLO alone.
    unplanned = replace(w, ttft_estimate_ms=None)
    (row, _) = latency_rows(unplanned, WorkloadMetrics(ttft=Latency(0.001, 0.5, 600)), "1h", None)
    assert row.verdict == "ok" and row.planned == "p99 ≤ 1,500 ms, median not planned"


def test_the_rbac_grants_exactly_what_verify_reads_where_it_reads_it() -> None:
    cluster, cluster_binding, monitoring, monitoring_binding = rbac.rbac_objects()
    workload, workload_binding = rbac.workload_rbac("inference-chat")
    assert_valid([cluster, cluster_binding, monitoring, monitoring_binding, workload, workload_binding])

    def rules(role: dict[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
        return [(r["apiGroups"][0], r["resources"][0], tuple(r["verbs"])) for r in role["rules"]]

    # Cluster-wide: only what is cluster-scoped.
    assert (cluster["kind"], rules(cluster)) == (
        "ClusterRole", [("", "nodes", ("list",)), ("karpenter.sh", "nodepools", ("get",))]
    )  # fmt: skip
    # In monitoring: the query endpoint's service proxy by its exact name, nothing else.
    assert (monitoring["kind"], monitoring["metadata"]["namespace"]) == ("Role", "monitoring")
    assert monitoring["rules"] == [{"apiGroups": [""], "resources": ["services/proxy"], "verbs": ["get"],
                                    "resourceNames": ["thanos-query:10902"]}]  # fmt: skip
    # In a workload's namespace: its pods, owners, route and pool.
    assert (workload["kind"], workload["metadata"]["namespace"]) == ("Role", "inference-chat")
    assert rules(workload) == [
        ("", "pods", ("list",)),
        ("apps", "deployments", ("get",)),
        ("leaderworkerset.x-k8s.io", "leaderworkersets", ("get",)),
        ("ray.io", "rayservices", ("get",)),
        ("gateway.networking.k8s.io", "httproutes", ("get",)),
        ("inference.networking.k8s.io", "inferencepools", ("get",)),
    ]
    # Together, every read verify makes, each once.
    granted = sorted(rules(cluster) + rules(monitoring) + rules(workload))
    assert granted == sorted((read.group, read.resource, read.verbs) for read in READS)
    # Read only: nothing that writes, execs, reads logs or secrets.
    for role in (cluster, monitoring, workload):
        assert {v for r in role["rules"] for v in r["verbs"]} <= {"get", "list"}
        resources = {res for r in role["rules"] for res in r["resources"]}
        assert not resources & {"secrets", "configmaps", "pods/log", "pods/exec", "*"}
    group = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "llm-eks-verify"}]
    for binding, role in ((cluster_binding, cluster), (monitoring_binding, monitoring), (workload_binding, workload)):
        assert binding["subjects"] == group
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) == (role["kind"], "llm-eks-verify")
        assert binding["metadata"].get("namespace") == role["metadata"].get("namespace")


def test_the_load_role_creates_jobs_and_reads_and_deletes_only_its_own() -> None:
    role, binding = rbac.load_rbac("inference-chat", ["bench-chat-load"])
    assert_valid([role, binding])
    assert role["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]},
        {
            "apiGroups": ["batch"],
            "resources": ["jobs"],
            "resourceNames": ["bench-chat-load"],
            "verbs": ["get", "delete"],
        },
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    ]
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "llm-eks-load"}]
