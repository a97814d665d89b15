"""Precise prefix-cache routing: vLLM publishes its KV-cache events and the endpoint picker indexes them, instead of
guessing what each pod caches. Here: when a workload gets it, and vLLM's side (`--kv-events-config`).

Why: the picker's approximate producer records the prompt blocks it routed to a pod in an LRU sized to that pod's
GPU KV blocks, and never sees an eviction. With a CPU tier a block the GPU evicted is still a hit (loaded from host
memory, not recomputed), but the approximate index has already forgotten it: it sends the next turn of a
conversation wherever load is lowest. The precise index holds what each pod reports, per tier.

When (`resolve`, setting `prefix_cache_scorer`): auto is precise where the KV cache outlives the GPU (a CPU tier is
on, aggregated or prefill/decode), approximate elsewhere. Prefill/decode alone does not call for it: the approximate
producer already records both pods of a disaggregated request, and its errors there are the same as in aggregated
serving (no tier it cannot see); and the P/D decision itself reads only the approximate producer's data in llm-d
router v0.10.0 (below), so precise scoring changes which pods are picked, not whether to prefill remotely. It costs
a render call per request on a serving pod and one ZMQ subscription per pod.

The planner resolves it (the plan's `prefix_cache`, PlanRequest.prefix_cache_scorer), so `llm-eks plan` prints the
flags the chart renders from the same `Plan.engine`. What the environment decides (a gateway, vLLM's API key, the
engine) comes in as a `Picker` from the workload's config; a request without one (`llm-eks plan --model`) is planned
as if behind a gateway with api_key false, and the plan says so.

The precise scorer needs real token ids, and the picker gets them from vLLM's render endpoint on the workload's own
pods (the Service, port 8000): the tokenizer is the one vLLM serves (same revision, same chat template), the picker
downloads nothing, needs no Hugging Face token and no egress, and a gated model costs nothing more. It is refused
(one line) where the picker cannot reach it: a workload whose vLLM checks an API key (llm-d's token producer sends no
credential and vLLM guards every /v1 path), a workload without a picker (no gateway), engine ray-serve, a Neuron
engine, and a replica of several data-parallel engines (the picker subscribes to one event port per pod).

vLLM 0.33.0 (the wheel, vllm/_version.py 0.33.0):
- `--kv-events-config` JSON (engine/arg_utils.py:790, 1883) into `KVEventsConfig` (config/kv_events.py:10-54):
  enable_kv_cache_events (False), publisher "null" | "zmq" (zmq when enabled), endpoint "tcp://*:5557",
  replay_endpoint (None), buffer_steps 10000, hwm 100000, max_queue_size 100000, topic "".
- The publisher binds a PUB socket on a wildcard endpoint and connects otherwise (distributed/kv_events.py:437-467,
  `_socket_setup`, `_is_bind_endpoint`), offsets the port by the data-parallel rank (:542-580), and serves missed
  batches on a ROUTER replay socket from its last buffer_steps batches (:455-459, 521-540); frames are (topic, 8-byte
  sequence, msgpack payload) (:508-511).
- The scheduler publishes the KV cache manager's events and the connector's `take_events()` in one batch per step
  (v1/core/sched/scheduler.py:2623-2637); MultiConnector forwards every child's (multi_connector.py:631-633).
- **Offloaded blocks are in the events**: the OffloadingConnector emits BlockStored / BlockRemoved with medium "CPU"
  (distributed/kv_transfer/kv_connector/v1/offloading/events.py:58-61, 384-424, 462-468; MEDIUM_* in
  distributed/kv_events.py:51-53). By default each carries only the offloaded chunk's block hash (a placeholder
  without tokens, events.py:352-380); `kv_connector_extra_config.self_describing_kv_events` adds tokens and parents
  (v1/kv_offload/base.py:244-250, 716-722). A chunk is one GPU block unless `block_size`/`blocks_per_chunk` say
  otherwise (offloading/config.py:121-158), so the hash is the GPU block's: the picker resolves it (below).
- The render endpoints `/v1/completions/render` and `/v1/chat/completions/render` (entrypoints/scale_out/render/
  api_router.py:11-76) answer 403 on `vllm serve` unless `--enable-scale-out` (scale_out/factories.py:87-130; the
  flag, entrypoints/common/cli_args.py:216-222, also registers /v1/*/derender and /inference/v1/generate and
  /inference/v1/abort_requests). `--api-key` guards /v1, /v2, /inference and /cohere
  (entrypoints/serve/middleware/authenticate.py:11, 59). Behind the gateway none of these is reachable by a client:
  the AI Gateway answers 404 "unsupported path" for every path it has no processor for (envoyproxy/ai-gateway v1.1.0
  internal/extproc/server.go:204-217; its paths, cmd/extproc/mainlib/main.go:326-353), and the serving port admits
  only the gateway, the picker, Prometheus and the benchmark Job (manifests/network_policies.py).

llm-d router v0.10.0 (llm-d/llm-d-router, commit 71f4f0999f95b96c49a9d0c4afbd18dfdb943c26), the picker's side:
- The picker dials each pod: `tcp://<pod IP>:<socketPort + rank>` (default 5557) and, with `replaySocketPort`, the
  replay socket (pkg/epp/framework/plugins/requestcontrol/dataproducer/preciseprefixcache/extractor.go:66-94;
  pkg/kvevents/pool.go:104-136), subscribing to the topic filter "kv@" (pool.go:138-147). So the flow is picker ->
  pod on 5557 and 5558: the ports the pods' NetworkPolicy opens to the picker.
- The topic is `kv@<pod>@<model>` (pkg/kvevents/engineadapter/vllm_adapter.go:52-56; common.go:39-45, exactly three
  `@`-separated parts): the pod part is replaced by the endpoint's address (pool.go:305-324), the model part keys the
  block hashes (pool.go:453-456, 564-566) and must be the request's model (the served model name; a LoRA event's
  adapter name takes its place).
- A CPU event without tokens is a tier update: the GPU block it names gains a CPU entry (pool.go:383-428, 572-577);
  tiers score gpu 1.0 and cpu 0.8 (pkg/kvcache/backend.go:26-31).
- Block keys are recomputed from the prompt's tokens, so the engine's block size and PYTHONHASHSEED need not match
  (preciseprefixcache/README.md, "Engine compatibility").
- The approximate producer (approx-prefix-cache-producer) caps each pod's LRU at the pod's GPU KV blocks when it
  auto-tunes, its default (pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/plugin.go:303-307,
  types.go:136-160), and records the prefill pod of a disaggregated request as well as the decode pod (plugin.go:
  261-275).
- The P/D decider reads the approximate producer's data key only (scheduling/profilehandler/disagg/
  prefix_based_pd_decider.go:135; the key, datalayer/attribute/prefix/data_types.go:29), which disagg-profile-handler
  requires (disagg_profile_handler.go:312-320), so the framework runs the approximate producer as the key's default
  producer (cmd/epp/runner/runner.go:664) beside the precise one; only the deprecated pd-profile-handler takes a
  producer's name (pd_profile_handler.go:127).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from llm_eks.error_codes import E141
from llm_eks.errors import fail

PRECISE = "precise"
APPROXIMATE = "approximate"
AUTO = "auto"
SETTINGS = (AUTO, PRECISE, APPROXIMATE)
FIELD = "prefix_cache_scorer"

# vLLM's default event endpoint port (KVEventsConfig.endpoint) and llm-d's default socketPort: the same number.
EVENTS_PORT = 5557
# The replay socket, next to it: a picker that starts, fails over or misses a sequence asks for the pod's last
# buffer_steps batches instead of routing blind until new blocks arrive.
REPLAY_PORT = 5558
# llm-d's default topic filter (pkg/kvevents/pool.go DefaultConfig).
TOPIC_PREFIX = "kv@"
# The container env var holding the pod's IP (downward API status.podIP); the kubelet expands $(POD_IP) in args.
POD_IP_ENV = "POD_IP"


def kv_events_config(served_model_name: str) -> str:
    """vLLM's `--kv-events-config`: publish on every interface of the pod (the picker dials in), replay beside it,
    the topic llm-d parses. Queue sizes stay at vLLM's defaults."""
    body = {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": f"tcp://*:{EVENTS_PORT}",
        "replay_endpoint": f"tcp://*:{REPLAY_PORT}",
        "topic": f"{TOPIC_PREFIX}$({POD_IP_ENV})@{served_model_name}",
    }
    return json.dumps(body, separators=(",", ":"))


def vllm_flags(config: str) -> list[str]:
    """The `vllm serve` flags of a pod whose picker routes precisely: its events, and the render endpoints the
    picker tokenizes with."""
    return ["--kv-events-config", config, "--enable-scale-out"]


def validate_setting(setting: Any, path: str) -> None:
    """The workload's `prefix_cache_scorer` alone (ConfigError naming `<path>.prefix_cache_scorer`)."""
    if setting not in SETTINGS:
        raise fail(E141, f"{path}.{FIELD}", setting, f"must be one of {', '.join(SETTINGS)}")


@dataclass(frozen=True)
class Picker:
    """What the environment gives a workload's endpoint picker, which a plan request alone cannot know."""

    # A gateway routes to the workload (its endpoint picker is what scores).
    gateway: bool
    # The workload's vLLM checks an API key (its own, or one the config names).
    api_key: bool
    # "vllm" or "ray-serve" (Ray Serve has no endpoint picker).
    engine: str = "vllm"


@dataclass(frozen=True)
class Scoring:
    """The picker's prefix-cache scorer for one plan: what was asked, what it gets, and what precise lacks."""

    setting: str
    # PRECISE or APPROXIMATE.
    scorer: str
    # What precise routing lacks on this plan (None: nothing it knows of).
    why_not: str | None
    # True when the environment was not given (`llm-eks plan --model`): a gateway and api_key false were assumed.
    assumed: bool

    @property
    def precise(self) -> bool:
        return self.scorer == PRECISE

    def line(self, offload: bool) -> str | None:
        """One line for `llm-eks plan`; None where there is nothing to say (auto or approximate without a CPU tier,
        nothing keeping precise out)."""
        if self.precise:
            where = "; assumes the environment's gateway and api_key false" if self.assumed else ""
            return (
                f"precise: vLLM's KV-cache events (ports {EVENTS_PORT}, {REPLAY_PORT}) feed the gateway's endpoint "
                f"picker, which tokenizes on the workload's pods (--kv-events-config, --enable-scale-out){where}"
            )
        if self.why_not is not None and (offload or self.setting == PRECISE):
            return f"approximate: the precise scorer needs {self.why_not}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting, "scorer": self.scorer, "why_not": self.why_not, "assumed": self.assumed}


def resolve(
    setting: Any,
    path: str,
    *,
    offload: bool,
    picker: Picker | None,
    neuron: bool,
    engines_per_replica: int,
    served_model_name: str,
) -> Scoring:
    """The scorer one plan gets (module docstring); `precise` where it cannot work is a ConfigError naming
    `<path>.prefix_cache_scorer`. `picker` None: the environment is not known, and a gateway with api_key false is
    assumed (the plan says so)."""
    validate_setting(setting, path)
    known = picker if picker is not None else Picker(gateway=True, api_key=False)
    why_not = _why_not(known, neuron, engines_per_replica, served_model_name)
    if setting == PRECISE and why_not is not None:
        raise fail(E141, f"{path}.{FIELD}", setting, f"the precise scorer needs {why_not}; use auto or approximate")
    precise = setting == PRECISE or (setting == AUTO and offload and why_not is None)
    return Scoring(setting, PRECISE if precise else APPROXIMATE, why_not, assumed=picker is None)


def _why_not(picker: Picker, neuron: bool, engines_per_replica: int, served_model_name: str) -> str | None:
    """What precise routing lacks on this workload, or None."""
    if picker.engine != "vllm":
        return "engine vllm (Ray Serve has no endpoint picker)"
    if not picker.gateway:
        return "the gateway (its endpoint picker is what scores)"
    if neuron:
        return "a GPU engine (the Neuron engines are older vLLM releases, checked for neither events nor render)"
    if picker.api_key:
        return (
            "api_key false: the picker tokenizes on the workload's own vLLM (/v1/completions/render), sends no "
            "key, and vLLM checks one on every /v1 path (the gateway still authenticates every caller)"
        )
    if engines_per_replica > 1:
        return f"one engine per pod (this plan runs {engines_per_replica} data-parallel engines, one event port each)"
    if "@" in served_model_name:
        return "a served model name without '@' (the event topic is kv@<pod>@<model>)"
    return None
