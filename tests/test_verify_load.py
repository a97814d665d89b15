"""`llm-eks verify --load`, offline: the benchmark Job it creates through the stand-in API server (valid against the
Kubernetes schema, its arguments parsed by vLLM 0.33's `vllm bench serve` flags, the plan's concurrency and typical
request), and the verdicts it reaches on `vllm bench serve` results in vLLM 0.33's saved shape."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, cast

import pytest

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.verify.checks_load import LoadSpec
from llm_eks.verify.derive import load_specs
from llm_eks.verify.report import Report, table
from llm_eks.verify.rows import Row, Verdict
from tests.conftest import CDK_JSON
from tests.kube_schema import assert_valid
from tests.prometheus_server import PrometheusServer
from tests.upstream_wheels import VLLM, extracted, missing_reason
from tests.verify_cluster import StubCluster, rendered_objects
from tests.verify_load_results import bench_log, bench_result
from tests.verify_run import Run, fresh, healthy_clusters, run_verify, shown_text
from tests.verify_stub import Faults
from tests.vllm_bench_flags import BENCH_FLAGS, parse

pytestmark = pytest.mark.synth

WORKLOAD = "vllm-llama-3-1-8b-instruct"
JOB = "bench-llama-3-1-8b-instruct-load"
LOAD = frozenset({"llm-eks-verify", "llm-eks-load"})


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in's Jobs finish at the second look: no need to wait between looks."""
    monkeypatch.setattr("llm_eks.verify.load.POLL_SECONDS", 0.0)


@pytest.fixture(scope="module")
def clusters(prometheus: PrometheusServer) -> dict[str, StubCluster]:
    return healthy_clusters(prometheus, "dev")


@pytest.fixture(scope="module")
def spec() -> LoadSpec:
    """dev's load run with its one Ready replica, as verify renders it."""
    config = parse_environment("dev", CDK_JSON["context"]["environments"]["dev"])
    (found,) = load_specs(config, plan_workloads(config), {WORKLOAD: 1})
    return found


def run_load(
    clusters: dict[str, StubCluster],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    log: str,
    **faults: Any,
) -> Run:
    given = Faults(groups=faults.pop("groups", LOAD), logs={JOB: log}, **faults)
    return run_verify(fresh(clusters, "dev"), tmp_path, capsys, "--load", faults=given)


def test_the_load_job_is_the_environments_benchmark_at_the_plans_load(
    clusters: dict[str, StubCluster], spec: LoadSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_load(clusters, tmp_path, capsys, bench_log(bench_result(spec)))
    assert result.code == 0, result.out + result.err
    (job,) = result.server.created
    assert_valid([job])
    assert (job["kind"], job["metadata"]["name"], job["metadata"]["namespace"]) == ("Job", JOB, "inference")
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # The chart's own Job: its script, image and identity; its ServiceAccount is applied with the workload.
    assert container["command"][:2] == ["/bin/sh", "-c"] and "vllm bench serve" in container["command"][2]
    assert pod["serviceAccountName"] == "bench-llama-3-1-8b-instruct"
    config = parse_environment("dev", CDK_JSON["context"]["environments"]["dev"])
    applied = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in rendered_objects(config)}
    assert ("ServiceAccount", "inference", "bench-llama-3-1-8b-instruct") in applied
    # Its arguments, as vLLM 0.33's `vllm bench serve` parses them: the plan's load on the one Ready replica.
    args = parse(container["args"])
    (plan,) = plan_workloads(config)
    assert (args.random_input_len, args.random_output_len) == (1024, 256) == (
        plan.request.typical_input_tokens, plan.request.typical_output_tokens
    )  # fmt: skip
    assert args.max_concurrency == plan.target_concurrency == 16
    assert (args.dataset_name, args.ignore_eos, args.backend, args.endpoint) == (
        "random", True, "openai", "/v1/completions"
    )  # fmt: skip
    assert args.num_prompts == 500  # a p99 needs 500 requests
    # Poisson arrivals at the rate that keeps 16 requests in flight: 16 / (TTFT + 256 x TPOT) as planned.
    request_s = (plan.ttft_estimate_ms + 256 * plan.tpot_estimate_ms) / 1000
    assert args.request_rate == pytest.approx(16 / request_s, rel=1e-2)
    assert job["spec"]["ttlSecondsAfterFinished"] == 600 and job["spec"]["backoffLimit"] == 0
    # The Job is gone when verify ends.
    assert result.server.deleted == [f"/apis/batch/v1/namespaces/inference/jobs/{JOB}"]
    # Its rows, and the verification over the minutes the load ran.
    assert result.out.splitlines()[0].split(", window ")[1].startswith(f"{math.ceil(347.2 / 60)}m, ")
    for check in ("load", "load-ttft", "load-itl", "load-throughput"):
        assert result.row(check, WORKLOAD)["verdict"] == "ok", result.row(check, WORKLOAD)
    assert result.row("load", WORKLOAD)["observed"] == "500 completed, 0 failed in 347 s"
    assert result.row("load-itl", WORKLOAD)["detail"] == (
        "median 1.05x the estimate at this load; 500 requests measured by vllm bench serve"
    )
    # docs/how-to/verify.md shows its progress lines and its four rows (in a table of their own).
    shown = shown_text()
    assert "\n".join(ln for ln in result.err.splitlines() if ln.startswith("load: ")) in shown
    cut = [result.row(check, WORKLOAD) for check in ("load", "load-ttft", "load-itl", "load-throughput")]
    rows = [
        Row(r["check"], r["workload"], r["planned"], r["observed"], cast(Verdict, r["verdict"]), r["detail"])
        for r in cut
    ]
    (load_table,) = [t for t in shown if t.startswith("CHECK ")]
    assert load_table == "\n".join(table(Report("dev", "", "", "", "", tuple(rows))).splitlines()[2:-2])


CASES = [
    # 1.52x dev's estimate at 16 running (43.7 ms) is above its 60 ms SLO: a breach before it is a drift.
    (
        "itl-slow",
        {"itl": 1.52},
        "load-itl",
        "breach",
        "the median is above the SLO's p99 60.0 ms: most requests miss it",
    ),
    ("itl-fast", {"itl": 0.5}, "load-itl", "drift", "median 0.50x the estimate at this load (allowed 1/1.5-1.5x)"),
    ("ttft-drift", {"ttft": 2.5}, "load-ttft", "drift", "median 2.50x the estimate at this load (allowed at most 2x)"),
    ("slow-tail", {"p99_ttft_ms": 1900.0}, "load-ttft", "breach", "p99 above the SLO's 1,500 ms"),
    ("errors", {"failed": 12}, "load", "breach", "12 of 500 requests failed (errors, 429s, timeouts)"),
    ("too-few", {"completed": 120}, "load-ttft", "insufficient", "a p99 needs 500 requests"),
    ("throughput", {"throughput": 0.5}, "load-throughput", "drift", "0.50x the estimate at this load"),
]


@pytest.mark.parametrize(("case", "change", "check", "verdict", "detail"), CASES, ids=[c[0] for c in CASES])
def test_the_verdicts_on_recorded_results(
    clusters: dict[str, StubCluster],
    spec: LoadSpec,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
    change: dict[str, Any],
    check: str,
    verdict: str,
    detail: str,
) -> None:
    result = run_load(clusters, tmp_path, capsys, bench_log(bench_result(spec, **change)))
    row = result.row(check, WORKLOAD)
    assert row["verdict"] == verdict and detail in row["detail"], row
    assert result.code == (0 if verdict == "insufficient" else 1)


def test_a_failed_job_is_a_breach_with_its_last_log_line(
    clusters: dict[str, StubCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = "Starting initial single prompt test run...\nValueError: Initial test run failed - Please make sure...\n"
    result = run_load(clusters, tmp_path, capsys, log, failing_jobs=frozenset({JOB}))
    assert result.code == 1
    row = result.row("load", WORKLOAD)
    assert (row["observed"], row["verdict"]) == ("Job failed", "breach")
    assert row["detail"] == f"inference/{JOB}: ValueError: Initial test run failed - Please make sure..."


def test_without_the_load_group_the_job_is_a_one_line_403(
    clusters: dict[str, StubCluster], spec: LoadSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_load(clusters, tmp_path, capsys, "", groups=frozenset({"llm-eks-verify"}))
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        'llm-eks: error: kubernetes API: 403 Forbidden on POST /apis/batch/v1/namespaces/inference/jobs: jobs "" is '
        'forbidden: User "verifier" cannot create resource "jobs" in API group "batch"; --load needs the '
        "llm-eks-load group's Role (docs/how-to/verify.md) [LLMEKS-E501]\n"
    )
    assert result.server.created == []


def test_a_load_job_still_running_is_an_error_and_is_left_alone(
    clusters: dict[str, StubCluster], spec: LoadSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = fresh(clusters, "dev")
    cluster.objects.append({**spec.job, "metadata": {**spec.job["metadata"]}, "status": {"active": 1}})
    result = run_verify(cluster, tmp_path, capsys, "--load", faults=Faults(groups=LOAD))
    assert result.code == 2
    assert result.err == (
        f"llm-eks: error: load: Job inference/{JOB} is still running (another load run?); wait for it or delete it: "
        f"kubectl -n inference delete job {JOB} [LLMEKS-E505]\n"
    )
    assert result.server.deleted == []


@pytest.mark.parametrize("flag", sorted(BENCH_FLAGS))
def test_the_pinned_bench_flags_are_where_the_source_says(flag: str) -> None:
    wheel = extracted(VLLM)
    if wheel is None:
        pytest.skip(missing_reason(VLLM))
    source = wheel / "vllm"
    assert "__version__ = version = '0.33.0'" in (source / "_version.py").read_text()
    pinned = BENCH_FLAGS[flag]
    lines = (source / pinned.file).read_text(encoding="utf-8").splitlines()
    call = "\n".join(lines[pinned.line - 1 : pinned.line + 8])
    assert "add_argument(" in lines[pinned.line - 1] and f'"{flag}"' in "\n".join(
        lines[pinned.line - 1 : pinned.line + 1]
    )
    for key, value in pinned.kwargs:
        if key == "type":
            assert re.search(rf"type={value.__name__}\b", call), (flag, call)
        elif key == "action":
            assert f'action="{value}"' in call, (flag, call)
        elif key == "nargs":
            assert f'nargs="{value}"' in call, (flag, call)


def test_make_upstream_extracts_every_file_the_bench_pins_name() -> None:
    assert {f"vllm/{pinned.file}" for pinned in BENCH_FLAGS.values()} <= set(VLLM.members)
