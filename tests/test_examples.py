"""The example apps a user copies (examples/): the two config-driven ones synthesized here from their own cdk.json,
as `cdk synth` in their folder would, with cdk-nag and llm-eks's checks; the construct examples in
test_composition.py, the pipeline in test_pipeline.py, EKS Auto Mode's in test_auto_mode_stack.py. Every example
folder is synthesized by one of them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_eks.infra.app import add_checks, build_app, new_app
from llm_eks.versions import NEURON_NXDI_IMAGE, NEURON_VLLM_IMAGE
from tests.conftest import REPO_ROOT
from tests.test_kv_events import kv_events_fields, plan_rows
from tests.test_vllm_flags import _check, engine_flags

EXAMPLES = REPO_ROOT / "examples"
CONFIG_EXAMPLES = ("single_model", "multi_model", "inf2_model", "trn2_model", "multi_turn_chat")
# Synthesized together in test_composition.py.
CONSTRUCT_EXAMPLES = ("composed_app", "escape_hatches", "existing_cluster")
# Synthesized in test_pipeline.py.
PIPELINE_EXAMPLE = "promotion_pipeline"
# Synthesized in test_auto_mode_stack.py, beside its own environment on self-managed Karpenter.
AUTO_MODE_EXAMPLE = "auto_mode"
# A plain cdk8s app extending the vLLM chart with cdk8s-plus: synthesized and checked in test_extend_chart.py.
EXTEND_EXAMPLE = "extend_vllm_chart"
# Synthesized in test_disaggregated_serving.py (with every check), whose tests read its prefill and decode pools.
PD_EXAMPLE = "disaggregated"


def test_every_example_is_synthesized_by_a_test() -> None:
    folders = {p.parent.name for p in EXAMPLES.glob("*/app.py")}
    assert folders == {
        *CONFIG_EXAMPLES,
        *CONSTRUCT_EXAMPLES,
        PIPELINE_EXAMPLE,
        AUTO_MODE_EXAMPLE,
        PD_EXAMPLE,
        "own_app",
        EXTEND_EXAMPLE,
    }
    assert f'"{PD_EXAMPLE}"' in (REPO_ROOT / "tests" / "test_disaggregated_serving.py").read_text()
    assert f'"{EXTEND_EXAMPLE}"' in (REPO_ROOT / "tests" / "test_extend_chart.py").read_text()
    assert f'"{PIPELINE_EXAMPLE}"' in (REPO_ROOT / "tests" / "test_pipeline.py").read_text()
    assert f'"{AUTO_MODE_EXAMPLE}"' in (REPO_ROOT / "tests" / "test_auto_mode_stack.py").read_text()
    # own_app (the construct guide's first example): test_package runs it against the installed wheel.
    assert "own_app" in (REPO_ROOT / "tests" / "test_package.py").read_text()


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Each config example's app from its folder's cdk.json, and the Kubernetes objects its stack applies; synth fails
    on any cdk-nag or llm-eks finding."""
    out = {}
    for name in CONFIG_EXAMPLES:
        context = json.loads((EXAMPLES / name / "cdk.json").read_text())["context"]
        out[name] = synth_example(name, context, Path(tmp_path_factory.mktemp(name)))
    return out


def synth_example(name: str, context: dict[str, Any], outdir: Path) -> list[dict[str, Any]]:
    """Example `name`'s app with `context`, as `cdk synth` in its folder (with cdk-nag and llm-eks's checks): the
    Kubernetes objects its stack applies."""
    cwd = os.getcwd()
    os.chdir(EXAMPLES / name)  # recorded models are read beside cdk.json, as the CDK CLI runs the app there
    try:
        app = new_app(context=context, outdir=str(outdir))
        (stack,) = build_app(app)
        add_checks(app)
        app.synth()
    finally:
        os.chdir(cwd)
    assert (outdir / stack.template_file).is_file()
    # Synth looked nothing up in an account (`cdk synth` would stop on it without credentials).
    assert "missing" not in json.loads((outdir / "manifest.json").read_text())
    return [o for _, objects in stack.review_objects() for o in objects]


def test_the_single_model_example_is_one_vllm_deployment(synthesized: dict[str, list[dict[str, Any]]]) -> None:
    objects = synthesized["single_model"]
    deployments = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["namespace"] == "inference"]
    assert [d["metadata"]["name"] for d in deployments] == ["vllm-qwen3-8b"]
    assert not [o for o in objects if o["kind"] in ("Gateway", "HTTPRoute")]


CHAT = "vllm-llama-3-1-8b-instruct"


def _object(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _chat_vllm(objects: list[dict[str, Any]]) -> dict[str, Any]:
    pod = _object(objects, "Deployment", CHAT)["spec"]["template"]["spec"]
    (vllm,) = [c for c in pod["containers"] if c["name"] == "vllm"]
    assert isinstance(vllm, dict)
    return vllm


def test_the_multi_turn_chat_example_gives_vllm_a_cpu_tier_in_dev_shm(
    synthesized: dict[str, list[dict[str, Any]]],
) -> None:
    """kv_offload auto on g6e.4xlarge: 84 GiB of the pod's 116264 MiB share (vLLM's 8192 MiB kept), in /dev/shm."""
    objects = synthesized["multi_turn_chat"]
    pod = _object(objects, "Deployment", CHAT)["spec"]["template"]["spec"]
    vllm = _chat_vllm(objects)
    args = vllm["args"]
    i = args.index("--kv-offloading-size")
    assert args[i : i + 4] == ["--kv-offloading-size", "84", "--kv-offloading-backend", "native"]
    assert vllm["resources"]["requests"]["memory"] == vllm["resources"]["limits"]["memory"] == "116264Mi"
    (shm,) = [v for v in pod["volumes"] if v["name"] == "shm"]
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": f"{2048 + 84 * 1024}Mi"}


def test_the_multi_turn_chat_pods_publish_kv_events_vllm_parses(
    synthesized: dict[str, list[dict[str, Any]]],
) -> None:
    """prefix_cache_scorer precise: vLLM 0.33's --kv-events-config (fields of its KVEventsConfig) and the render
    endpoints (--enable-scale-out); every flag of the pod is vLLM's, with a value where vLLM's takes one."""
    vllm = _chat_vllm(synthesized["multi_turn_chat"])
    args = vllm["args"]
    _check(engine_flags(args))
    i = args.index("--kv-events-config")
    assert args[i + 2] == "--enable-scale-out"
    events = json.loads(args[i + 1])
    assert events == {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": "tcp://*:5557",
        "replay_endpoint": "tcp://*:5558",
        "topic": "kv@$(POD_IP)@meta-llama/Llama-3.1-8B-Instruct",
    }
    fields = kv_events_fields()
    if fields is not None:
        assert set(events) <= set(fields)
    # The kubelet expands $(POD_IP) in the topic from the pod's own address.
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in vllm["env"]


def test_the_multi_turn_chat_picker_scores_on_the_pods_kv_events(
    synthesized: dict[str, list[dict[str, Any]]],
) -> None:
    objects = synthesized["multi_turn_chat"]
    config = yaml.safe_load(_object(objects, "ConfigMap", f"{CHAT}-epp")["data"]["plugins.yaml"])
    plugins = {p["type"]: p.get("parameters") for p in config["plugins"]}
    assert plugins["prefix-cache-scorer"] == {"prefixMatchInfoProducerName": "precise-prefix-cache-producer"}
    assert plugins["precise-prefix-cache-producer"] == {
        "kvEventsConfig": {
            "topicFilter": "kv@",
            "discoverPods": True,
            "podDiscoveryConfig": {"socketPort": 5557, "replaySocketPort": 5558},
        }
    }
    # Prompts are tokenized on the workload's own vLLM, through its Service.
    assert plugins["token-producer"] == {
        "modelName": "meta-llama/Llama-3.1-8B-Instruct",
        "vllm": {"url": f"http://{CHAT}.inference.svc.cluster.local:8000"},
    }
    assert {
        "pluginRef": "endpoint-notification-source",
        "extractors": [{"pluginRef": "precise-prefix-cache-producer"}],
    } in config["dataLayer"]["sources"]
    # Only the picker's pods reach the event and replay sockets of the serving pods.
    policy = _object(objects, "NetworkPolicy", f"{CHAT}-kv-events")["spec"]
    assert policy["podSelector"] == {"matchLabels": {"app.kubernetes.io/instance": CHAT}}
    (rule,) = policy["ingress"]
    assert rule == {
        "from": [
            {
                "podSelector": {
                    "matchLabels": {
                        "app.kubernetes.io/name": "endpoint-picker",
                        "app.kubernetes.io/instance": f"{CHAT}-epp",
                    }
                }
            }
        ],
        "ports": [{"protocol": "TCP", "port": 5557}, {"protocol": "TCP", "port": 5558}],
    }


def test_the_multi_turn_chat_plan_prints_the_flags_its_pods_run(
    synthesized: dict[str, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    """`llm-eks plan --env chat` prints the engine args the chart renders (the same Plan.engine): the KV-events
    flags included, the served model name the chart puts first."""
    rows = plan_rows(capsys, "--env", "chat", "--context-file", str(EXAMPLES / "multi_turn_chat" / "cdk.json"))
    printed = rows["Engine args"].split(" ")
    assert rows["Prefix scorer"].startswith("precise: vLLM's KV-cache events (ports 5557, 5558)")
    name = printed.index("--served-model-name")
    rendered = engine_flags(_chat_vllm(synthesized["multi_turn_chat"])["args"])
    assert printed[name : name + 2] + printed[:name] + printed[name + 2 :] == rendered


def test_the_multi_model_example_routes_both_models_through_one_gateway(
    synthesized: dict[str, list[dict[str, Any]]],
) -> None:
    objects = synthesized["multi_model"]
    (gateway,) = [o for o in objects if o["kind"] == "Gateway"]
    assert [listener["port"] for listener in gateway["spec"]["listeners"]] == [443]
    routes = {o["metadata"]["namespace"]: o for o in objects if o["kind"] == "AIGatewayRoute"}
    assert set(routes) == {"inference-chat", "inference-fast"}
    pools = {o["metadata"]["namespace"] for o in objects if o["kind"] == "InferencePool"}
    assert pools == {"inference-chat", "inference-fast"}
    names = {
        h["value"]
        for r in routes.values()
        for rule in r["spec"]["rules"]
        for m in rule["matches"]
        for h in m.get("headers", [])
    }
    assert names == {"Qwen/Qwen3-32B", "Qwen/Qwen3-8B"}


@pytest.mark.parametrize(
    ("name", "image", "resources"),
    [
        ("inf2_model", NEURON_NXDI_IMAGE, {"aws.amazon.com/neuron": "1"}),
        ("trn2_model", NEURON_VLLM_IMAGE, {"aws.amazon.com/neuron": "16"}),
    ],
)
def test_the_neuron_examples_serve_from_the_neuron_image_with_the_monitor(
    synthesized: dict[str, list[dict[str, Any]]], name: str, image: str, resources: dict[str, str]
) -> None:
    """Each synthesized (cdk-nag and the synth-time checks included) above; its server is the engine path's container
    on whole Neuron chips, its compile cache's writer compiles ahead of time, and the cluster's Neuron monitor runs."""
    objects = synthesized[name]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["namespace"] == "inference"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == image
    assert {k: v for k, v in container["resources"]["limits"].items() if k != "memory"} == resources
    writers = [o for o in objects if o["kind"] == "Job" and "-cc-" in o["metadata"]["name"]]
    assert len(writers) == 1
    monitor = [o for o in objects if o["metadata"]["name"] == "neuron-monitor"]
    assert sorted(o["kind"] for o in monitor) == ["DaemonSet", "Service", "ServiceMonitor"]
