"""`llm-eks verify`'s pure parts, without a server: the plan it derives for each default environment, the PromQL it
sends (every name a current vLLM 0.33 series, and present in vLLM's own /metrics text), how it reads KV capacity,
compares arguments and parses --window, each check's threshold on both sides, and the RBAC it needs."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.manifests.promql import check_promql, ray_exported, vllm_names
from llm_eks.manifests.verifier import rbac
from llm_eks.manifests.verifier.reads import READS
from llm_eks.verify.args_diff import args_difference, config_difference
from llm_eks.verify.checks_metrics import ITL_MEDIAN_RATIO, KV_TOLERANCE, TTFT_MEDIAN_RATIO, kv_row, latency_rows
from llm_eks.verify.derive import environment_plan
from llm_eks.verify.expected import WorkloadPlan
from llm_eks.verify.observed import KvSample, Latency, WorkloadMetrics
from llm_eks.verify.prometheus import kv_samples, window_seconds, workload_queries
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
    assert staging["ray-qwen"].route is not None and staging["ray-qwen"].route.backend_kind == "Service"
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


def test_latency_p99_at_the_slo_passes_above_it_breaches(plans: dict[str, Any]) -> None:
    w = _dev(plans)
    itl = w.itl_estimate_ms / 1000
    at_slo = Latency(median_s=itl, p99_s=w.slo_itl_p99_ms / 1000, count=100)
    above = Latency(median_s=itl, p99_s=w.slo_itl_p99_ms / 1000 + 0.001, count=100)
    assert latency_rows(w, WorkloadMetrics(itl=at_slo), "1h")[1].verdict == "ok"
    row = latency_rows(w, WorkloadMetrics(itl=above), "1h")[1]
    assert row.verdict == "breach" and row.detail.startswith("p99 above the SLO's 60.0 ms")


def test_latency_median_within_its_ratio_passes_beyond_it_drifts(plans: dict[str, Any]) -> None:
    w = _dev(plans)
    itl, ttft = w.itl_estimate_ms / 1000, w.ttft_estimate_ms / 1000

    def verdicts(itl_median: float, ttft_median: float) -> list[str]:
        m = WorkloadMetrics(itl=Latency(itl_median, 0.05, 10), ttft=Latency(ttft_median, 1.0, 10))
        return [r.verdict for r in latency_rows(w, m, "1h")]

    assert verdicts(itl * ITL_MEDIAN_RATIO * 0.99, ttft * TTFT_MEDIAN_RATIO * 0.99) == ["ok", "ok"]
    assert verdicts(itl * ITL_MEDIAN_RATIO * 1.01, ttft * TTFT_MEDIAN_RATIO * 1.01) == ["drift", "drift"]
    # Below: ITL far below its estimate is the model being wrong; a TTFT far below is a lighter load than planned.
    assert verdicts(itl / ITL_MEDIAN_RATIO * 0.9, ttft / TTFT_MEDIAN_RATIO * 0.9) == ["ok", "drift"]
    (fast, _) = latency_rows(w, WorkloadMetrics(ttft=Latency(ttft / 4, 1.0, 10)), "1h")
    assert fast.detail.startswith("median 0.25x the estimate: faster than planned")
    # No samples is unknown, never ok; a TTFT the plan does not estimate is held against the SLO alone.
    assert [r.verdict for r in latency_rows(w, WorkloadMetrics(), "1h")] == ["unknown", "unknown"]
    from dataclasses import replace

    unplanned = replace(w, ttft_estimate_ms=None)
    (row, _) = latency_rows(unplanned, WorkloadMetrics(ttft=Latency(0.001, 0.5, 3)), "1h")
    assert row.verdict == "ok" and row.planned == "p99 ≤ 1,500 ms, median not planned"


def test_the_cluster_role_grants_exactly_what_verify_reads() -> None:
    role, binding = rbac.rbac_objects()
    assert_valid([role, binding])
    assert [(r["apiGroups"], r["resources"], r["verbs"]) for r in role["rules"]] == [
        ([read.group], [read.resource], list(read.verbs)) for read in READS
    ]
    proxy = [r for r in role["rules"] if r["resources"] == ["services/proxy"]]
    assert proxy == [{"apiGroups": [""], "resources": ["services/proxy"], "verbs": ["get"],
                      "resourceNames": ["thanos-query:10902"]}]  # fmt: skip
    # Read only: nothing that writes, execs, reads logs or secrets.
    verbs = {v for r in role["rules"] for v in r["verbs"]}
    assert verbs <= {"get", "list"}
    resources = {res for r in role["rules"] for res in r["resources"]}
    assert not resources & {"secrets", "configmaps", "pods/log", "pods/exec", "*"}
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "llm-eks-verify"}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"] == "llm-eks-verify"
