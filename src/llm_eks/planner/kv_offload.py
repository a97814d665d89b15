"""KV cache offload to host memory (vLLM's CPU tier) and the prefix reuse of multi-turn traffic.

What the CPU tier costs: host memory. vLLM 0.33's native backend (the OffloadingConnector) keeps it in one shared
file under /dev/shm per engine, pre-faulted at start, so the pod's /dev/shm volume and its memory share must both hold
`--kv-offloading-size` GiB on top of what vLLM needs without it (pods.vllm_host_mib). The planner counts it when it
chooses the instance: a node whose pod share cannot hold both is skipped (auto) or refused (a named accelerator).

What it buys: a multi-turn conversation's next prompt starts with everything the previous turn saw (its prompt and
its answer). vLLM's prefix cache reuses those tokens while their blocks survive on the GPU; the CPU tier keeps them
longer. `reuse` estimates, per replica, what fraction of prompt tokens hits the GPU cache, the CPU tier, or is
recomputed, and the TTFT that follows (the latency model re-run on the tokens still prefilled, plus the load from
host memory).

vLLM 0.33.0 facts (the wheel's source, vllm/_version.py 0.33.0, commit g4ba787ec9):
- `--kv-offloading-size` (GiB, float; "When TP > 1, this is the total buffer size summed across all TP ranks") and
  `--kv-offloading-backend` native | lmcache, default native (config/cache.py:383-392; engine/arg_utils.py:1452-1457).
- With a size set, native becomes kv_connector "OffloadingConnector" with kv_connector_extra_config
  cpu_bytes_to_use = size x 2^30 and kv_role kv_both; it overwrites the kv_connector of any --kv-transfer-config
  (config/vllm.py:1150-1190), so a prefill/decode pod needs a MultiConnector config instead (multi_connector.py:
  "Load KV from the first connector that advertises available tokens ... Save to all connectors";
  children under kv_connector_extra_config.connectors, :235-258).
- The buffer is one region for all of an engine's workers, a file /dev/shm/vllm_offload_<engine_id>.mmap whose free
  space vLLM checks before creating it ("Insufficient space in /dev/shm ...", v1/kv_offload/cpu/
  shared_offload_region.py:128-171; distributed/device_communicators/shm_broadcast.py check_shm_free_space), and
  each worker pre-faults its slots (MADV_POPULATE_WRITE). Each data-parallel rank is an engine of its own (engine_id
  suffixed _dp<rank>, v1/engine/core.py:1489-1496): a pod holds the size once per rank it runs.
- Blocks are stored to the CPU tier as they are computed (offloading/scheduler.py `_build_store_jobs` walks every
  scheduled request), evicted LRU by default (cpu/spec.py `eviction_policy` "lru").
- Native over LMCache: in-tree and sized by one flag; OffloadingConnector supports the hybrid KV cache manager
  (SupportsHMA), LMCache's connectors do not, `lmcache` is not a vLLM dependency, and its MP mode needs a second
  server per pod whose capacity vLLM does not set.

Assumptions (marked so in the plan; none measured by llm-eks):
- a conversation of `conversation_turns` turns sends, at turn k, everything before it plus a new message of the same
  length each turn; typical_input_tokens is the mean prompt over the turns;
- the gap between a turn's answer and the next turn is exponential with mean `think_time_s`; a prefix survives on the
  GPU (in the CPU tier) while fewer tokens than the free GPU cache (the tier) were written since: LRU;
- each conversation's turns reach the same replica (the endpoint picker's prefix-aware scoring);
- host-to-device copies run at the GPU's PCIe line rate (H2D_GB_PER_S), an upper bound.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from llm_eks.catalog.accelerators import InstanceType
from llm_eks.error_codes import E208
from llm_eks.errors import fail
from llm_eks.planner.latency import FITTED, estimate

AUTO = "auto"

# The largest --kv-offloading-size a workload may name (GiB): above the host memory of any catalog instance.
MAX_OFFLOAD_GIB = 4096

# auto takes this fraction of what a pod's memory share holds beyond vLLM's own needs, in whole GiB; the rest is
# headroom for the page cache of the checkpoint being loaded and for the tokenizer (an assumption).
AUTO_SHARE = 0.8

# Host-to-device copy rate per GPU, GB/s: the PCIe x16 line rate, Gen5 on Hopper and Blackwell (compute capability
# 9.0 and up), Gen4 before (PCI-SIG's published per-direction rates: 64 and 32 GB/s). An upper bound, not measured.
H2D_GB_PER_S = {True: 64.0, False: 32.0}

# A user's think time between an answer and their next message, seconds (an assumption: set think_time_s).
THINK_TIME_S = 30.0

# The most turns per conversation a workload may name.
MAX_TURNS = 256


def h2d_gb_per_s(inst: InstanceType) -> float:
    """The host-to-device copy rate the planner assumes for one GPU of `inst` (H2D_GB_PER_S)."""
    return H2D_GB_PER_S[inst.compute_capability is not None and inst.compute_capability >= (9, 0)]


def offloading_connector(size_gib: float) -> dict[str, Any]:
    """The connector --kv-offloading-size stands for (config/vllm.py:1167-1190), as a MultiConnector child."""
    return {
        "kv_connector": "OffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"cpu_bytes_to_use": int(size_gib * 2**30)},
    }


def multi_connector_config(transfer: dict[str, Any], size_gib: float) -> str:
    """A `--kv-transfer-config` running the prefill/decode connector `transfer` and the CPU tier together: the pod's
    role stays at the top (vLLM's scheduler reads it), KV transfer first (a decode pod loads the prefill's KV before
    looking in its CPU tier), then the OffloadingConnector."""
    body = {
        "kv_connector": "MultiConnector",
        "kv_role": transfer["kv_role"],
        "kv_connector_extra_config": {"connectors": [transfer, offloading_connector(size_gib)]},
    }
    return json.dumps(body, separators=(",", ":"))


def resolve_size(setting: float | str | None, spare_mib: int, engines: int) -> float | None:
    """The --kv-offloading-size (GiB per engine) of `setting` on a pod with `spare_mib` MiB of its memory share left
    after vLLM's own needs and `engines` engines (data-parallel ranks) on it; None: offload off. auto: AUTO_SHARE of
    the spare memory in whole GiB (0 when less than one GiB per engine is spare: the pod cannot hold a tier)."""
    if setting is None:
        return None
    if setting == AUTO:
        return float(max(0, math.floor(spare_mib * AUTO_SHARE / 1024 / engines)))
    return float(setting)


def host_mib(size_gib: float | None, engines: int) -> int:
    """Host memory (MiB) a pod's CPU tier takes: the size once per engine it runs."""
    return 0 if size_gib is None else math.ceil(size_gib * 1024) * engines


def validate(setting: Any, turns: Any, think_time_s: Any) -> None:
    """kv_offload, conversation_turns and think_time_s alone (ConfigError naming the field)."""
    sized = isinstance(setting, int | float) and not isinstance(setting, bool) and 1 <= setting <= MAX_OFFLOAD_GIB
    if setting is not None and setting != AUTO and not sized:
        raise fail(
            E208,
            "workload.kv_offload",
            setting,
            f'must be null (off), "auto" or a size in GiB from 1 to {MAX_OFFLOAD_GIB} (vLLM --kv-offloading-size)',
        )
    if isinstance(turns, bool) or not isinstance(turns, int) or not 1 <= turns <= MAX_TURNS:
        raise fail(E208, "workload.conversation_turns", turns, f"must be an integer from 1 to {MAX_TURNS}")
    if isinstance(think_time_s, bool) or not isinstance(think_time_s, int | float) or not 0 < think_time_s <= 86_400:
        raise fail(E208, "workload.think_time_s", think_time_s, "must be a positive number of seconds (at most 86400)")


def new_tokens_per_turn(input_tokens: int, output_tokens: int, turns: int) -> float:
    """The new message of each turn when `turns` turns of `output_tokens` answers average `input_tokens` prompts (the
    prompt of turn k holds k messages and k - 1 answers)."""
    return (2 * input_tokens - output_tokens * (turns - 1)) / (turns + 1)


def max_turns(input_tokens: int, output_tokens: int) -> int:
    """The most turns whose prompts can average `input_tokens` with answers of `output_tokens` (a message >= 1)."""
    return max(1, (2 * input_tokens + output_tokens - 1) // (output_tokens + 1))


@dataclass(frozen=True)
class Reuse:
    """Where a replica's prompt tokens come from under multi-turn traffic, and the TTFT that follows."""

    conversation_turns: int
    think_time_s: float
    # Of all prompt tokens: the share an earlier turn already computed (1 - new message / mean prompt).
    reusable: float
    # Of all prompt tokens: found in the GPU prefix cache, loaded from the CPU tier, prefilled.
    gpu_hit: float
    cpu_hit: float
    prefilled: float
    # Tokens the GPU cache and the CPU tier hold beyond the running sequences, and the KV tokens written per second.
    gpu_idle_tokens: int
    cpu_tokens: int
    tokens_written_per_s: float
    # Median TTFT without any reuse (the plan's), with the GPU prefix cache alone, and with the CPU tier too.
    ttft_no_reuse_ms: float
    ttft_gpu_ms: float
    ttft_ms: float
    # Of ttft_ms: copying the CPU hits to the GPU at h2d_gb_per_s (an upper bound).
    load_ms: float
    h2d_gb_per_s: float
    assumptions: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def reuse(plan: Any) -> Reuse | None:
    """The prefix reuse estimate of `plan` (a result.Plan on a GPU, whose `fit` is a sizing.Fit; typed Any because
    both modules import this one); None for single-turn traffic."""
    r = plan.request
    turns = r.conversation_turns
    if turns == 1:
        return None
    inputs, outputs, batch = r.typical_input_tokens, r.typical_output_tokens, r.target_concurrency
    fresh = new_tokens_per_turn(inputs, outputs, turns)
    reusable = 1 - fresh / inputs
    # A request holds its prompt and, on average, half its answer while it runs; the rest of the cache is idle
    # blocks that still hold earlier prefixes.
    gpu_idle = max(0, plan.kv_cache_tokens - batch * (inputs + outputs // 2))
    per_token = max(1, plan.kv_bytes_per_token_per_gpu * plan.gpus_per_replica // plan.data_parallel_size)
    cpu_tokens = 0 if plan.kv_offload_gib is None else int(plan.kv_offload_gib * 2**30 * plan.data_parallel_size)
    cpu_tokens //= per_token
    request_s = (plan.ttft_estimate_ms + outputs * plan.tpot_estimate_ms) / 1e3
    # Each turn writes its new message and its answer (a recomputed prefix refills blocks: not counted).
    written = batch / request_s * (fresh + outputs)
    think = r.think_time_s

    def survives(tokens: int) -> float:
        return 1 - math.exp(-tokens / (written * think)) if tokens else 0.0

    on_gpu = survives(gpu_idle)
    in_cpu = max(on_gpu, survives(cpu_tokens))
    gpu_hit, cpu_hit = reusable * on_gpu, reusable * (in_cpu - on_gpu)
    rate = h2d_gb_per_s(plan.instance)
    load_ms = cpu_hit * inputs * plan.kv_bytes_per_token_per_gpu / (rate * 1e9) * 1e3

    def ttft(hit: float) -> float:
        computed = max(1, round(inputs * (1 - hit)))
        return estimate(dataclasses.replace(plan.fit.step, input_tokens=computed), FITTED).ttft_ms

    assumptions = (
        f"{turns} turns per conversation, each prompt all earlier turns plus a new {fresh:.0f}-token message "
        f"(typical_input_tokens {inputs} is the mean prompt): {reusable:.0%} of prompt tokens an earlier turn computed",
        f"think time between an answer and the next message exponential, mean {think:g} s (an assumption); a prefix "
        "survives while fewer tokens than the idle GPU cache (the CPU tier) were written since: LRU",
        "each conversation's turns reach the same replica (prefix-aware routing); round-robin divides the hits by the "
        "replica count",
        f"CPU hits copied to the GPU at {rate:g} GB/s per GPU, the PCIe x16 line rate (an upper bound, not measured)",
    )
    return Reuse(
        conversation_turns=turns,
        think_time_s=think,
        reusable=round(reusable, 3),
        gpu_hit=round(gpu_hit, 3),
        cpu_hit=round(cpu_hit, 3),
        prefilled=round(1 - gpu_hit - cpu_hit, 3),
        gpu_idle_tokens=gpu_idle,
        cpu_tokens=cpu_tokens,
        tokens_written_per_s=round(written, 1),
        ttft_no_reuse_ms=plan.ttft_estimate_ms,
        ttft_gpu_ms=round(ttft(gpu_hit), 1),
        ttft_ms=round(ttft(gpu_hit + cpu_hit) + load_ms, 1),
        load_ms=round(load_ms, 1),
        h2d_gb_per_s=rate,
        assumptions=assumptions,
    )
