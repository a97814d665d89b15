"""Precise prefix-cache routing: a workload whose KV cache outlives the GPU publishes vLLM's KV-cache events, and its
endpoint picker scores on them. vLLM's side against the 0.33.0 wheel's source (the events config, the CPU tier's
events, the render endpoints), the picker's config against llm-d router v0.10.0's field names
(tests/fixtures/epp), the NetworkPolicy that lets the picker dial the pods, and the one-line refusals."""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_eks.cli import main
from llm_eks.errors import ConfigError
from llm_eks.planner import kv_events
from tests.conftest import REPO_ROOT
from tests.gateway_cases import BODY, all_of, charts, flat, one
from tests.test_gateway_picker import SPEC, check_config
from tests.upstream_wheels import VLLM, extracted, missing_reason

SMALL = "Qwen/Qwen3-8B"


def _source(path: str) -> str:
    wheel = extracted(VLLM)
    if wheel is None:
        pytest.skip(missing_reason(VLLM))
    return (wheel / "vllm" / path).read_text(encoding="utf-8")


def _offloaded(**small: Any) -> dict[str, Any]:
    """The gateway environment with a CPU tier on the `small` workload (and `small`'s other fields replaced)."""
    b = copy.deepcopy(BODY)
    # A gated model: its pods read a Hub token.
    b["workloads"]["small"].update({"kv_offload": 8, "hf_token_secret": "acme/hf-token", **small})
    return b


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return flat(charts(_offloaded()))


def _picker_configs(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        cm["metadata"]["name"]: yaml.safe_load(cm["data"]["plugins.yaml"])
        for cm in all_of(objects, "ConfigMap")
        if cm["metadata"]["name"].endswith("-epp")
    }


def _vllm_container(objects: list[dict[str, Any]], deployment: str) -> dict[str, Any]:
    pod = one(objects, "Deployment", deployment)["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "vllm"]
    assert isinstance(container, dict)
    return container


# -- vLLM's side ------------------------------------------------------------------------------------------------


def kv_events_fields() -> dict[str, str] | None:
    """KVEventsConfig's fields in the vLLM 0.33.0 wheel (config/kv_events.py): name -> annotation source; None
    where the wheel is not extracted (`make upstream`)."""
    if extracted(VLLM) is None:
        return None
    tree = ast.parse(_source("config/kv_events.py"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "KVEventsConfig"]
    return {
        n.target.id: ast.unparse(n.annotation)
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }


def test_the_events_config_sets_only_fields_vllm_reads_with_their_types() -> None:
    fields = kv_events_fields()
    if fields is None:
        pytest.skip(missing_reason(VLLM))
    config = json.loads(kv_events.kv_events_config("Qwen/Qwen3-8B"))
    assert set(config) <= set(fields)
    assert fields["enable_kv_cache_events"] == "bool" and config["enable_kv_cache_events"] is True
    assert fields["publisher"] == "Literal['null', 'zmq']" and config["publisher"] == "zmq"
    for name in ("endpoint", "topic"):
        assert fields[name] == "str" and isinstance(config[name], str)
    assert fields["replay_endpoint"] == "str | None"
    # A wildcard endpoint binds (the picker dials in); a host would make vLLM connect out.
    assert re.search(r'"\*" in endpoint', _source("distributed/kv_events.py"))
    assert config["endpoint"] == "tcp://*:5557" and config["replay_endpoint"] == "tcp://*:5558"
    # llm-d parses kv@<pod>@<model>: three parts; the kubelet expands $(POD_IP) from the container's env.
    assert config["topic"] == "kv@$(POD_IP)@Qwen/Qwen3-8B" and len(config["topic"].split("@")) == 3


def test_offloaded_blocks_reach_the_published_events() -> None:
    """The scheduler publishes the connector's events with its own; the OffloadingConnector's carry medium CPU."""
    scheduler = _source("v1/core/sched/scheduler.py")
    assert "connector_events = self.connector.take_events()" in scheduler
    assert "self.kv_event_publisher.publish(batch)" in scheduler
    offloading = _source("distributed/kv_transfer/kv_connector/v1/offloading/events.py")
    assert "Medium.CPU: MEDIUM_CPU," in offloading
    assert 'MEDIUM_CPU = "CPU"' in _source("distributed/kv_events.py")


def test_the_render_endpoints_need_scale_out_and_sit_behind_the_api_key() -> None:
    assert '"/v1/completions/render"' in _source("entrypoints/scale_out/render/api_router.py")
    factories = _source("entrypoints/scale_out/factories.py")
    assert 'enabled = dedicated_mode or getattr(args, "enable_scale_out", False)' in factories
    assert kv_events.vllm_flags("{}")[-1] == "--enable-scale-out"
    guarded = _source("entrypoints/serve/middleware/authenticate.py")
    assert 'GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere")' in guarded


def test_the_offloaded_pods_publish_events_and_the_others_do_not(objects: list[dict[str, Any]]) -> None:
    small = _vllm_container(objects, "vllm-small")
    args = small["args"]
    events = json.loads(args[args.index("--kv-events-config") + 1])
    assert events["topic"] == f"kv@$(POD_IP)@{SMALL}"
    assert "--enable-scale-out" in args
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in small["env"]
    chat = _vllm_container(objects, "vllm-chat")
    assert "--kv-events-config" not in chat["args"] and "--enable-scale-out" not in chat["args"]
    assert all(e["name"] != "POD_IP" for e in chat["env"])


# -- the picker's side ------------------------------------------------------------------------------------------


def test_the_offloaded_pool_scores_precisely_on_its_own_vllm(objects: list[dict[str, Any]]) -> None:
    configs = _picker_configs(objects)
    small = configs["vllm-small-epp"]
    plugins = {p["type"]: p.get("parameters") for p in small["plugins"]}
    assert plugins["prefix-cache-scorer"] == {"prefixMatchInfoProducerName": "precise-prefix-cache-producer"}
    assert plugins["token-producer"] == {
        "modelName": SMALL,
        "vllm": {"url": "http://vllm-small.inference-small.svc.cluster.local:8000"},
    }
    assert plugins["precise-prefix-cache-producer"] == {
        "kvEventsConfig": {
            "topicFilter": "kv@",
            "discoverPods": True,
            "podDiscoveryConfig": {"socketPort": 5557, "replaySocketPort": 5558},
        }
    }
    assert small["dataLayer"]["sources"] == [
        {"pluginRef": "metrics-data-source", "extractors": [{"pluginRef": "core-metrics-extractor"}]},
        {"pluginRef": "endpoint-notification-source", "extractors": [{"pluginRef": "precise-prefix-cache-producer"}]},
    ]
    # Same scorer, same weight in the profile: only what feeds it changed.
    (profile,) = small["schedulingProfiles"]
    assert {"pluginRef": "prefix-cache-scorer", "weight": 3} in profile["plugins"]
    # The pool without a CPU tier keeps the approximate producer (the scorer's default).
    chat = configs["vllm-chat-epp"]
    assert {"type": "prefix-cache-scorer"} in chat["plugins"] and "dataLayer" not in chat
    assert all(p["type"] != "precise-prefix-cache-producer" for p in chat["plugins"])


def _nested_problems(config: dict[str, Any]) -> list[str]:
    """Nested parameter keys the pinned picker would refuse (fixture `nested_parameters`: Go json tags)."""
    problems = []
    nested = SPEC["nested_parameters"]

    def walk(prefix: str, value: Any) -> None:
        if not isinstance(value, dict):
            return
        for key, child in value.items():
            path = f"{prefix}.{key}"
            if prefix in nested and key not in nested[prefix]:
                problems.append(f"unknown parameter {path}")
            walk(path, child)

    for plugin in config["plugins"]:
        for key, child in (plugin.get("parameters") or {}).items():
            walk(f"{plugin['type']}.{key}", child)
    return problems


def test_the_precise_config_uses_only_fields_the_pinned_picker_reads(objects: list[dict[str, Any]]) -> None:
    for config in _picker_configs(objects).values():
        assert check_config(config) == []
        assert _nested_problems(config) == []
    # Every nested object the config renders is listed, so the walk checks it.
    small = _picker_configs(objects)["vllm-small-epp"]
    assert _nested_problems(small) == []
    producer = next(p for p in small["plugins"] if p["type"] == "precise-prefix-cache-producer")
    producer["parameters"]["kvEventsConfig"]["podDiscoveryConfig"]["replayPort"] = 5558
    assert _nested_problems(small) == [
        "unknown parameter precise-prefix-cache-producer.kvEventsConfig.podDiscoveryConfig.replayPort"
    ]


def test_only_the_picker_reaches_the_event_sockets(objects: list[dict[str, Any]]) -> None:
    policy = one(objects, "NetworkPolicy", "vllm-small-kv-events")
    spec = policy["spec"]
    assert policy["metadata"]["namespace"] == "inference-small"
    assert (
        spec["podSelector"]["matchLabels"]
        == one(objects, "InferencePool", "vllm-small")["spec"]["selector"]["matchLabels"]
    )
    (rule,) = spec["ingress"]
    assert rule["from"] == [
        {
            "podSelector": {
                "matchLabels": {
                    "app.kubernetes.io/name": "endpoint-picker",
                    "app.kubernetes.io/instance": "vllm-small-epp",
                }
            }
        }
    ]
    assert rule["ports"] == [{"protocol": "TCP", "port": 5557}, {"protocol": "TCP", "port": 5558}]
    # No other policy opens them, and the pool without events gets none.
    opened = [
        p["metadata"]["name"]
        for p in all_of(objects, "NetworkPolicy")
        for r in p["spec"].get("ingress", [])
        for port in r.get("ports", [])
        if port["port"] in (5557, 5558)
    ]
    assert opened == ["vllm-small-kv-events", "vllm-small-kv-events"]


# -- when, and the refusals --------------------------------------------------------------------------------------


def _resolve(setting: str = "auto", **overrides: Any) -> str:
    inputs: dict[str, Any] = {
        "offload": True,
        "picker": True,
        "api_key": False,
        "engine": "vllm",
        "neuron": False,
        "engines_per_replica": 1,
        "served_model_name": SMALL,
    }
    given = {**inputs, **overrides}
    picker = kv_events.Picker(given.pop("picker"), given.pop("api_key"), given.pop("engine"))
    return kv_events.resolve(setting, "qa.workloads.small", picker=picker, **given).scorer


def test_auto_is_precise_only_where_the_cache_outlives_the_gpu_and_the_picker_can_tokenize() -> None:
    assert _resolve() == "precise"
    assert _resolve(offload=False) == "approximate"
    assert _resolve(api_key=True) == "approximate"
    assert _resolve(picker=False) == "approximate"
    assert _resolve(engines_per_replica=8) == "approximate"
    assert _resolve("precise", offload=False) == "precise"
    assert _resolve("approximate") == "approximate"


@pytest.mark.parametrize(
    ("overrides", "needs"),
    [
        ({"api_key": True}, "api_key false: the picker tokenizes on the workload's own vLLM"),
        ({"picker": False}, "the gateway (its endpoint picker is what scores)"),
        ({"engine": "ray-serve"}, "engine vllm (Ray Serve has no endpoint picker)"),
        ({"neuron": True}, "a GPU engine"),
        ({"engines_per_replica": 8}, "one engine per pod (this plan runs 8 data-parallel engines"),
        ({"served_model_name": "acme/m@v2"}, "a served model name without '@'"),
    ],
)
def test_precise_where_it_cannot_work_is_one_line(overrides: dict[str, Any], needs: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _resolve("precise", **overrides)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("qa.workloads.small.prefix_cache_scorer: 'precise' is not allowed; ")
    assert f"the precise scorer needs {needs}" in message
    assert message.endswith("; use auto or approximate [LLMEKS-E141]")


def test_a_gated_model_needs_no_token_in_the_picker(objects: list[dict[str, Any]]) -> None:
    """The picker renders prompts on the pool's own vLLM, which holds the model (and its Hub token): the picker
    mounts only its config, runs one container and needs no Hub."""
    vllm = _vllm_container(objects, "vllm-small")
    assert any(e["name"] == "HF_TOKEN_PATH" for e in vllm["env"])
    picker = one(objects, "Deployment", "vllm-small-epp")["spec"]["template"]["spec"]
    assert [c["name"] for c in picker["containers"]] == ["epp"]
    assert picker["volumes"] == [{"name": "config", "configMap": {"name": "vllm-small-epp"}}]
    assert all(not e["name"].startswith("HF_") for e in picker["containers"][0]["env"])


def test_synth_refuses_precise_where_vllm_checks_the_workloads_own_key() -> None:
    """Without declared tenants the gateway passes each workload's own key on, and vLLM checks it."""
    b = _offloaded(prefix_cache_scorer="precise", api_key=True)
    for key in ("tenants", "issuers"):
        b["gateway"].pop(key)
    with pytest.raises(ConfigError) as caught:
        charts(b)
    assert str(caught.value).startswith(
        "environments.qa.workloads.small.prefix_cache_scorer: 'precise' is not allowed; the precise scorer needs "
        "api_key false"
    )
    # auto there keeps the approximate scorer: no events, no render endpoints.
    b["workloads"]["small"]["prefix_cache_scorer"] = "auto"
    small = _vllm_container(flat(charts(b)), "vllm-small")
    assert "--kv-events-config" not in small["args"]


def test_an_unknown_setting_is_refused_with_the_config() -> None:
    with pytest.raises(ConfigError) as caught:
        charts(_offloaded(prefix_cache_scorer="exact"))
    assert str(caught.value) == (
        "environments.qa.workloads.small.prefix_cache_scorer: 'exact' is not allowed; must be one of auto, precise, "
        "approximate [LLMEKS-E141]"
    )


# -- what `llm-eks plan` says -------------------------------------------------------------------------------------

CHAT_EXAMPLE = REPO_ROOT / "examples" / "multi_turn_chat" / "cdk.json"
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


def plan_rows(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, str]:
    """`llm-eks plan` run with `argv`: its table's rows by label."""
    assert main(["plan", *argv]) == 0
    out = capsys.readouterr().out
    rows = (re.match(r"^([A-Z][\w /]*?)  +(\S.*)$", line) for line in out.splitlines())
    return {row.group(1): row.group(2) for row in rows if row is not None}


def _chat_env(tmp_path: Path, **workload: Any) -> str:
    """The multi-turn chat example's cdk.json with its workload's fields replaced (None: removed)."""
    body = json.loads(CHAT_EXAMPLE.read_text())
    env = body["context"]["environments"]["chat"]
    for key, value in workload.items():
        if key == "gateway":
            env.pop("gateway")
        elif value is None:
            env["workload"].pop(key)
        else:
            env["workload"][key] = value
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(body))
    return str(path)


def test_plan_model_shows_the_precise_flags_and_what_it_assumed(capsys: pytest.CaptureFixture[str]) -> None:
    rows = plan_rows(capsys, "--model", LLAMA_8B, "--max-model-len", "8192", "--kv-offload", "16")
    assert rows["Prefix scorer"].endswith("; assumes the environment's gateway and api_key false")
    args = rows["Engine args"].split(" ")
    i = args.index("--kv-events-config")
    assert args[i : i + 3] == ["--kv-events-config", kv_events.kv_events_config(LLAMA_8B), "--enable-scale-out"]
    # approximate: no events, nothing to say.
    rows = plan_rows(capsys, "--model", LLAMA_8B, "--max-model-len", "8192", "--kv-offload", "16",
                      "--prefix-cache-scorer", "approximate")  # fmt: skip
    assert "Prefix scorer" not in rows and "--kv-events-config" not in rows["Engine args"]


def test_plan_says_in_one_line_why_a_plan_keeps_the_approximate_scorer(capsys: pytest.CaptureFixture[str]) -> None:
    rows = plan_rows(capsys, "--model", "deepseek-ai/DeepSeek-V3", "--accelerator", "p5en.48xlarge",
                      "--max-model-len", "32768", "--data-parallel-size", "8", "--tensor-parallel-size", "1",
                      "--kv-offload", "auto")  # fmt: skip
    assert rows["Prefix scorer"] == (
        "approximate: the precise scorer needs one engine per pod (this plan runs 8 data-parallel engines, one event "
        "port each)"
    )
    assert "--kv-events-config" not in rows["Engine args"]


def test_plan_refuses_precise_on_neuron_and_an_unknown_scorer_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--model", LLAMA_8B, "--accelerator", "inf2.8xlarge", "--max-model-len", "8192"]
    assert main([*argv, "--prefix-cache-scorer", "precise"]) == 2
    assert capsys.readouterr().err == (
        "llm-eks: error: workload.prefix_cache_scorer: 'precise' is not allowed; the precise scorer needs a GPU engine "
        "(the Neuron engines are older vLLM releases, checked for neither events nor render); use auto or "
        "approximate [LLMEKS-E141]\n"
    )
    assert main(["plan", "--model", LLAMA_8B, "--prefix-cache-scorer", "exact"]) == 2
    assert capsys.readouterr().err == (
        "llm-eks: error: workload.prefix_cache_scorer: 'exact' is not allowed; must be one of auto, precise, "
        "approximate [LLMEKS-E141]\n"
    )


def test_plan_env_reads_the_gateway_and_the_api_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rows = plan_rows(capsys, "--env", "chat", "--context-file", str(CHAT_EXAMPLE))
    assert "assumes" not in rows["Prefix scorer"] and "--kv-events-config" in rows["Engine args"]
    # Its vLLM checking a key: auto keeps the approximate scorer and says why; precise is refused at its path.
    keyed = _chat_env(tmp_path, api_key=None, prefix_cache_scorer="auto")
    rows = plan_rows(capsys, "--env", "chat", "--context-file", keyed)
    assert rows["Prefix scorer"].startswith("approximate: the precise scorer needs api_key false: ")
    assert "--kv-events-config" not in rows["Engine args"]
    assert main(["plan", "--env", "chat", "--context-file", _chat_env(tmp_path, api_key=None)]) == 2
    assert capsys.readouterr().err.startswith(
        "llm-eks: error: environments.chat.workload.prefix_cache_scorer: 'precise' is not allowed; the precise scorer "
        "needs api_key false"
    )
    # No gateway.
    rows = plan_rows(capsys, "--env", "chat", "--context-file", _chat_env(tmp_path, gateway=None,
                                                                          prefix_cache_scorer="auto"))  # fmt: skip
    assert (
        rows["Prefix scorer"]
        == "approximate: the precise scorer needs the gateway (its endpoint picker is what scores)"
    )
    # The option overrides the environment's setting.
    rows = plan_rows(capsys, "--env", "chat", "--context-file", str(CHAT_EXAMPLE), "--prefix-cache-scorer",
                      "approximate")  # fmt: skip
    assert "Prefix scorer" not in rows and "--kv-events-config" not in rows["Engine args"]


def test_plan_json_carries_the_scorer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--env", "chat", "--context-file", str(CHAT_EXAMPLE), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["prefix_cache"] == {"setting": "precise", "scorer": "precise", "why_not": None, "assumed": False}
    assert "--enable-scale-out" in body["engine_args"]
