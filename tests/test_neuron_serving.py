"""Serving on AWS Neuron: what the charts render for a Neuron plan (the engine path's container and flags, whole chips,
the checkpoint copied onto the node, the compiled artefacts restored from the compile cache's writer, the drain of
an engine without --shutdown-timeout, the Neuron scheduler for partial-node pods), the cluster's Neuron monitor, and
the vLLM metric names the monitoring and KEDA read, checked against the vLLM release each engine path is built on.

The examples (examples/inf2_model, examples/trn2_model) are synthesized with cdk-nag and the synth-time checks in
tests/test_examples.py; the objects here come from the same builders without CDK (fast)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import cdk8s
import pytest
import yaml

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.error_codes import E121
from llm_eks.errors import ConfigError
from llm_eks.images.lock import ImageLock, LockEntry
from llm_eks.infra.charts import build_charts
from llm_eks.infra.images import environment_images
from llm_eks.infra.workloads import build_workloads
from llm_eks.manifests.checks import catalog_instance_resources, check_objects
from llm_eks.manifests.checks.drain import check_drain
from llm_eks.manifests.checks.objects import pod_templates
from llm_eks.manifests.promql_parse import parse_promql, selector_names
from llm_eks.manifests.vllm.neuron import NEURON_SCHEDULER_NAME
from llm_eks.versions import NEURON_MONITOR_IMAGE, NEURON_NXDI_IMAGE, NEURON_VLLM_IMAGE, VLLM_IMAGE
from tests.checkov_run import failed_checks, run_checkov
from tests.coded import raises_code
from tests.kube_schema import assert_valid
from tests.test_neuron_flags import TABLES, check
from tests.upstream_wheels import VLLM_0_16, VLLM_0_29, Wheel, extracted, missing_reason

SG = ("sg-0123456789abcdef0",)
INF2 = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "accelerator": "inf2.8xlarge",
    "max_model_len": 8192,
    "target_concurrency": 8,
    "replicas": {"min": 1, "max": 3},
    "slo": {"ttft_p99_ms": 2000, "itl_p99_ms": 60},
    "weights": "staged",
}
TRN2 = {
    "model": "meta-llama/Llama-3.3-70B-Instruct",
    "accelerator": "trn2.48xlarge",
    "max_model_len": 8192,
    "replicas": {"min": 1, "max": 1},
    "weights": "staged",
    "acknowledged_warnings": {"llm-eks:plan-no-price": "priced by the Capacity Block"},
}
TRN2_BLOCK = {
    "trn2": {"ids": ["cr-0123456789abcdef0"], "nodes": 2, "reservation_type": "capacity-block", "usd_per_hour": 40.0}
}
# Two chips of an inf2.24xlarge's six: a pod of some but not all of a node's chips.
PARTIAL = {**INF2, "accelerator": "inf2.24xlarge", "target_concurrency": 16}


def _environment(workload: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"weights_bucket": {}, "workload": workload, **extra}


def _charts(body: dict[str, Any]) -> list[Any]:
    config = parse_environment("qa", body)
    workloads = build_workloads(config, plan_workloads(config))
    return build_charts(cdk8s.App(), config, workloads, node_role_name="r", security_group_ids=SG)


def _objects(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every object of every chart (the benchmark's, written for review and applied by hand, too)."""
    return [o for c in _charts(body) for o in c.chart.to_json()]


def _one(objects: list[dict[str, Any]], kind: str, predicate: Any = lambda o: True) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and predicate(o)]
    return found


def _server(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return _one(
        objects, "Deployment", lambda o: o["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "vllm"
    )


def _writer(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return _one(objects, "Job", lambda o: "-cc-" in o["metadata"]["name"])


def _env(container: dict[str, Any]) -> dict[str, str | None]:
    return {e["name"]: e.get("value") for e in container["env"]}


@pytest.fixture(scope="module")
def inf2() -> list[dict[str, Any]]:
    return _objects(_environment(INF2))


@pytest.fixture(scope="module")
def trn2() -> list[dict[str, Any]]:
    return _objects(_environment(TRN2, capacity_reservations=TRN2_BLOCK))


def test_an_inf2_server_runs_nxd_inference_from_its_own_image_on_whole_chips(inf2: list[dict[str, Any]]) -> None:
    pod = _server(inf2)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == NEURON_NXDI_IMAGE
    for side in ("requests", "limits"):
        assert container["resources"][side]["aws.amazon.com/neuron"] == "1"
        assert "nvidia.com/gpu" not in container["resources"][side]
    # One chip of one: no second scheduler.
    assert "schedulerName" not in pod
    # The staged checkpoint, copied onto the node and checked, is what the engine loads.
    assert container["args"][0] == "/cache/model"
    fetch, restore = pod["initContainers"]
    assert fetch["name"] == "fetch-weights" and fetch["args"][-2:] == ["--fetch-to", "/cache/model"]
    assert restore["name"] == "restore-compile-cache"
    assert restore["args"][restore["args"].index("--dest") + 1] == "/cache/neuron/artifacts"
    # NxD Inference compiles a missing artefact itself (its startup probe allows it): the restore stays optional.
    assert "--required" not in restore["args"]
    assert _env(container)["NEURON_COMPILED_ARTIFACTS"] == "/cache/neuron/artifacts"
    assert "VLLM_NEURON_DISABLE_WARMUP_COMPILE" not in _env(container)


def test_vllm_016_has_no_shutdown_timeout_so_the_pre_stop_holds_the_drain(inf2: list[dict[str, Any]]) -> None:
    pod = _server(inf2)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "--shutdown-timeout" not in container["args"]
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    # Endpoint removal (15 s) plus the in-flight drain (90 s), below the grace period, itself at most 110 s.
    assert pre_stop == 105 < pod["terminationGracePeriodSeconds"] <= 110
    assert list(check_drain(list(pod_templates(inf2)))) == []


def test_a_trn2_server_runs_vllm_neuron_and_never_compiles(trn2: list[dict[str, Any]]) -> None:
    pod = _server(trn2)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == NEURON_VLLM_IMAGE
    assert container["resources"]["limits"]["aws.amazon.com/neuron"] == "16"
    assert container["args"][container["args"].index("--shutdown-timeout") + 1] == "90"
    assert container["lifecycle"]["preStop"]["sleep"]["seconds"] == 15
    env = _env(container)
    assert env["VLLM_NEURON_DISABLE_WARMUP_COMPILE"] == env["NEURON_LIBTORCH_DISABLE_GRAPH_CAPTURE_BACKEND"] == "1"
    (_, restore) = pod["initContainers"]
    # It waits in Init for the writer's signed artefacts instead of starting without them.
    assert "--required" in restore["args"]
    assert restore["args"][restore["args"].index("--dest") + 1] == "/cache/vllm/neuron/compile_cache"


@pytest.mark.parametrize("example", ["inf2", "trn2"])
def test_the_compile_cache_writer_compiles_ahead_of_time_and_only_it_publishes(
    example: str, request: pytest.FixtureRequest
) -> None:
    objects = request.getfixturevalue(example)
    server, writer = _server(objects), _writer(objects)
    (serving,) = server["spec"]["template"]["spec"]["containers"]
    (compiling,) = writer["spec"]["template"]["spec"]["containers"]
    # The same server on the same image (the cache key hashes both), on the loopback, without the refusal to compile.
    assert compiling["image"] == serving["image"]
    assert compiling["args"][compiling["args"].index("--host") + 1] == "127.0.0.1"
    assert "VLLM_NEURON_DISABLE_WARMUP_COMPILE" not in _env(compiling)
    script = compiling["command"][2]
    inits = server["spec"]["template"]["spec"]["initContainers"]
    restore = next(c for c in inits if c["name"] == "restore-compile-cache")
    src = restore["args"][restore["args"].index("--dest") + 1]
    assert f"--src {src} " in script and "--max-bytes 17179869184" in script
    # A serving pod never publishes: only restores.
    for container in [*inits, serving]:
        assert "publish" not in [*container.get("command", []), *container.get("args", [])][2:4]
        assert " publish --bucket" not in " ".join(container.get("command", []))
    # The Job's deadline covers the planned compile (minutes) on top of a start.
    assert writer["spec"]["activeDeadlineSeconds"] > 900


def test_every_flag_the_charts_pass_a_neuron_server_is_in_its_vllm_release(
    inf2: list[dict[str, Any]], trn2: list[dict[str, Any]]
) -> None:
    for objects, engine in ((inf2, "nxd-inference"), (trn2, "vllm-neuron")):
        wheel, table = TABLES[engine]
        for template in (_server(objects), _writer(objects)):
            (container,) = template["spec"]["template"]["spec"]["containers"]
            model, *flags = container["args"]
            assert model == "/cache/model"
            check(flags, table, wheel.version)


def test_a_partial_node_pod_takes_contiguous_chips_from_the_neuron_scheduler() -> None:
    objects = _objects(_environment({**PARTIAL, "warm_replicas": 1}))
    pod = _server(objects)["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["aws.amazon.com/neuron"] == "2"
    assert pod["schedulerName"] == NEURON_SCHEDULER_NAME
    # The warm placeholder holds the same chips the same way.
    headroom = _one(objects, "Deployment", lambda o: o["metadata"]["name"].endswith("-headroom"))
    assert headroom["spec"]["template"]["spec"]["schedulerName"] == NEURON_SCHEDULER_NAME
    assert check_objects(objects, instance_resources=catalog_instance_resources) == []


def test_the_cluster_runs_one_neuron_monitor_and_the_dashboard_reads_it(inf2: list[dict[str, Any]]) -> None:
    daemonset = _one(inf2, "DaemonSet", lambda o: o["metadata"]["name"] == "neuron-monitor")
    assert daemonset["metadata"]["namespace"] == "monitoring"
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"llm-eks.io/accelerator": "neuron"}
    assert {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    (container,) = pod["containers"]
    assert container["image"] == NEURON_MONITOR_IMAGE
    assert container["args"][:2] == ["--port", "8000"]
    monitor = _one(inf2, "ServiceMonitor", lambda o: o["metadata"]["name"] == "neuron-monitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["relabelings"][0]["targetLabel"] == "node"
    board = _one(inf2, "ConfigMap", lambda o: o["metadata"]["name"].endswith("-dashboard"))
    text = next(iter(board["data"].values()))
    assert "neuroncore_utilization_ratio" in text and "neuron_runtime_memory_used_bytes" in text
    assert 'kube_pod_info{namespace=\\"inference\\"}' in text
    assert "DCGM_FI_DEV_GPU_UTIL" not in text
    # The monitor is in the image lock's list, and a locked digest is what the DaemonSet runs.
    config = parse_environment("qa", _environment(INF2))
    plans = plan_workloads(config)
    assert NEURON_MONITOR_IMAGE in environment_images(config, plans)
    digest = "sha256:" + "a" * 64
    lock = ImageLock(entries={NEURON_MONITOR_IMAGE: LockEntry(digest, "2026-11-30T14:00:00Z", "https://example")})
    workloads = build_workloads(config, plans, images=lock)
    charts = build_charts(cdk8s.App(), config, workloads, node_role_name="r", security_group_ids=SG)
    objects = [o for c in charts for o in c.chart.to_json()]
    locked = _one(objects, "DaemonSet", lambda o: o["metadata"]["name"] == "neuron-monitor")
    assert locked["spec"]["template"]["spec"]["containers"][0]["image"] == f"{NEURON_MONITOR_IMAGE}@{digest}"


def test_the_benchmark_measures_a_neuron_server_with_the_pinned_vllm_client(inf2: list[dict[str, Any]]) -> None:
    job = _one(inf2, "Job", lambda o: o["metadata"]["name"].startswith("bench-"))
    images = {c["image"] for c in job["spec"]["template"]["spec"]["containers"]}
    assert images == {VLLM_IMAGE}


def _loggers_names(wheel: Wheel) -> set[str]:
    folder = extracted(wheel)
    if folder is None:
        pytest.skip(missing_reason(wheel))
    text = (folder / "vllm" / "v1" / "metrics" / "loggers.py").read_text(encoding="utf-8")
    # Registered as name="vllm:..." or through a variable holding the string (vllm:cache_config_info).
    return set(re.findall(r'"(vllm:[a-z0-9_]+)"', text))


_SUFFIXES = ("_total", "_bucket", "_sum", "_count")


def _promql(objects: list[dict[str, Any]]) -> list[str]:
    """Every PromQL expression of the objects: alert and recording rules, dashboard panels, KEDA triggers."""
    exprs = []
    for o in objects:
        if o["kind"] == "PrometheusRule":
            exprs += [r["expr"] for g in o["spec"]["groups"] for r in g["rules"]]
        elif o["kind"] == "ConfigMap" and o["metadata"].get("labels", {}).get("grafana_dashboard") == "1":
            board = json.loads(next(iter(o["data"].values())))
            exprs += [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
        elif o["kind"] == "ScaledObject":
            exprs += [t["metadata"]["query"] for t in o["spec"]["triggers"] if "query" in t["metadata"]]
    return exprs


def test_the_vllm_metrics_monitoring_and_keda_read_exist_in_each_neuron_release(
    inf2: list[dict[str, Any]], trn2: list[dict[str, Any]]
) -> None:
    """The plugins keep vLLM's own stat loggers, so a Neuron server exports the vllm:* names of the release it is
    built on: every name the rules, the dashboard and the ScaledObject read is registered in that release's
    vllm/v1/metrics/loggers.py (0.29 dropped vllm:prompt_tokens_recomputed, for one)."""
    for objects, wheel in ((inf2, VLLM_0_16), (trn2, VLLM_0_29)):
        registered = _loggers_names(wheel)
        exprs = _promql(objects)
        assert any(o["kind"] == "ScaledObject" for o in objects) and exprs
        used = {n for e in exprs for n in selector_names(parse_promql(e)) if n.startswith("vllm:")}
        assert used, exprs
        for name in sorted(used):
            base = next((name.removesuffix(s) for s in _SUFFIXES if name.endswith(s) and name.removesuffix(s)
                         in registered), name)  # fmt: skip
            assert base in registered, f"{name} is not registered by vLLM {wheel.version}"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"weights": "hf"}, "weights"),
        ({"compile_cache": False}, "weights"),
        ({"engine": "ray-serve"}, "engine"),
    ],
)
def test_a_neuron_workload_needs_vllm_on_staged_weights_with_the_compile_cache(
    change: dict[str, Any], field: str
) -> None:
    with raises_code(E121, match=rf"workload\.{field}: .*AWS Neuron"):
        parse_environment("qa", _environment({**INF2, **change}))


def test_the_drain_check_knows_which_vllm_a_neuron_container_runs(inf2: list[dict[str, Any]]) -> None:
    def findings(container_change: dict[str, Any]) -> list[str]:
        objects = json.loads(json.dumps(inf2))
        (container,) = _server(objects)["spec"]["template"]["spec"]["containers"]
        container.update(container_change)
        return [f.message for f in check_drain(list(pod_templates(objects)))]

    (container,) = _server(inf2)["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert findings({}) == []
    (refused,) = findings({"args": [*args, "--shutdown-timeout", "90"]})
    assert "without it (0.16 and older)" in refused
    (short,) = findings({"lifecycle": {"preStop": {"sleep": {"seconds": 15}}}})
    assert "cancels in-flight requests" in short
    # vLLM 0.29's Neuron container has --shutdown-timeout: the GPU rule applies (preStop + timeout below the grace).
    newer = NEURON_VLLM_IMAGE
    pre_stop_15 = {"lifecycle": {"preStop": {"sleep": {"seconds": 15}}}}
    assert findings({"image": newer, "args": [*args, "--shutdown-timeout", "90"], **pre_stop_15}) == []
    (missing,) = findings({"image": newer, **pre_stop_15})
    assert "--shutdown-timeout" in missing


@pytest.mark.synth
def test_checkov_passes_the_neuron_objects(
    inf2: list[dict[str, Any]], trn2: list[dict[str, Any]], tmp_path: Path
) -> None:
    for name, objects in (("inf2", inf2), ("trn2", trn2)):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump_all(objects))
    results = run_checkov(tmp_path, "kubernetes")
    if results is None:
        pytest.skip("checkov is missing: `make test` installs it from requirements-checkov.txt")
    assert failed_checks(results) == []


def test_the_neuron_objects_are_valid_kubernetes_and_pass_the_synth_checks(
    inf2: list[dict[str, Any]], trn2: list[dict[str, Any]]
) -> None:
    for objects in (inf2, trn2):
        assert_valid(objects)
        assert check_objects(objects, instance_resources=catalog_instance_resources) == []


def _neuron_props() -> Any:
    config = parse_environment("qa", _environment(INF2))
    (workload,) = build_workloads(config, plan_workloads(config))
    return workload.vllm


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"expert_parallel": True}, "expert parallelism and LoRA adapters are not served on Neuron"),
        ({"compile_cache": None}, "needs staged_weights and compile_cache"),
        ({"extra_engine_args": ("--max-num-seqs", "4")}, "the chart sets it from the compiled shape"),
        ({"extra_engine_args": ("--shutdown-timeout", "30")}, "vLLM 0.16 has no such flag"),
        ({"extra_engine_args": ("--override-neuron-config", "{}")}, "not a flag of the vLLM releases"),
    ],
)
def test_the_vllm_chart_refuses_what_a_neuron_server_cannot_take(change: dict[str, Any], message: str) -> None:
    from dataclasses import replace

    from llm_eks.manifests.vllm.props import validate_vllm_props

    props = _neuron_props()
    validate_vllm_props(props)
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_vllm_props(replace(props, **change))
