"""Prefill/decode disaggregation: whether separate prefill and decode pools serve a request for less than one
aggregated pool at the same targets, with how many replicas of each, and the NIXL KV-transfer configuration vLLM 0.33
would run them with.

Both modes use the plan's instance type and split (a prefill and a decode replica are each one aggregated replica):
- aggregated: the plan itself (its TTFT and time per output token include the prompts' chunks mixed into decode
  steps, latency/model.py);
- disaggregated: decode replicas run only decode steps, as many as the aggregated plan needs to hold
  target_concurrency sequences (cost.replicas_for_target), so the inter-token latency is a pure decode step of their
  share of the batch; prefill replicas take the prompts, arriving at target_concurrency / (output tokens x decode
  step) per second, each replica processing max_num_batched_tokens-token steps. The TTFT of a request is
  serving overhead + its wait for a prefill replica (M/D/1 mean wait, Pollaczek-Khinchine:
  rho S / (2 (1 - rho)) at utilisation rho and service time S per prompt) + its own prefill + the KV transfer + the
  decode engine's wait for its step and the step itself (model.TTFT_WAIT_STEPS, async scheduling).
- KV transfer: the whole prompt's KV (the model's KV bytes per token, every layer, x the prompt) crosses from the
  prefill to the decode pod once. Rates are published figures, never measured here (TRANSFER_RATES).
- Data-parallel replicas (DP x EP, on one node or spanning nodes): each data-parallel rank is an engine of its own
  (its scheduler, batch and KV cache), so both pools are counted in engines: the decode batch is target_concurrency
  over every decode engine, the prefill queue has one server per prefill engine. A request's KV lives on the one
  engine that prefilled it (its TP GPUs, on one node: TP stays inside a node), and moves to one decode engine over
  those GPUs' share of their node's network, whichever node of the replica that engine runs on: a replica spanning
  nodes adds engines, not bandwidth per request. Multi-head latent attention keeps the whole latent on every TP rank
  and each decode rank reads its own copy (one read per rank at equal TP, kv_connector/v1/nixl/pull_worker.py:
  316-320), so an MLA request moves TP x its KV bytes. The expert collectives of a step stay at the planned decode
  batch's (latency/model.py), a prefill step's growing per prompt token as in the aggregated model.

$ per million output tokens is cost.COST_FORMULA for each mode ((prefill + decode) replicas in the disaggregated
one). The TTFT target is max_ttft_ms, or without one the aggregated plan's own TTFT (disaggregation must not answer
later than one pool does). `auto` recommends disaggregation only where it meets the targets and costs less per
million output tokens, or meets targets the aggregated plan misses.

vLLM 0.33.0 facts used (the wheel's source, vllm/_version.py 0.33.0, commit g4ba787ec9):
- `--kv-transfer-config` is a JSON KVTransferConfig (config/kv_transfer.py:56-148): kv_connector, kv_role
  (kv_producer | kv_consumer | kv_both, required with a connector), kv_connector_extra_config.
- "NixlConnector" is registered (distributed/kv_transfer/kv_connector/factory.py:177-181) and is the pull connector
  (kv_connector/v1/nixl/connector.py:432); kv_role kv_both is deprecated for it: kv_producer on prefill, kv_consumer
  on decode (connector.py:95-102).
- extra config `backends` defaults to ["UCX"] (nixl/base_worker.py:624-626); ["LIBFABRIC"] selects NIXL's
  libfabric plugin, the one that drives EFA (UCX on EFA falls back to TCP: ray-project/ray#62339).
- The NIXL handshake listens on env VLLM_NIXL_SIDE_CHANNEL_PORT (default 5600) + the data-parallel index, on
  VLLM_NIXL_SIDE_CHANNEL_HOST (default localhost) (envs.py:232-233, 1720-1727; nixl/base_scheduler.py:76-80). The
  index is the engine's global data-parallel rank (v1/engine/core.py:1545), so a worker pod's engines listen on
  5600 + their ranks on that pod's own address. One listener per engine, in its scheduler, serves the agent metadata
  of every (PP rank, TP rank) of the engine (base_scheduler.py:296-383), which the engine core collected from all of
  its workers, on whatever node they run (v1/engine/core.py:910-930); the KV itself then moves between the GPU
  workers' own NIXL agents, rank to rank (pull_worker.py _read_blocks), so every pod of one pool reaches every pod
  of the other.
- Prefill and decode TP may differ: the decode side reads a P rank's heads split or several P ranks' together
  (tp_ratio of either sign, nixl/base_worker.py:2399-2436). Pipeline parallelism may not: a kv_consumer with
  pipeline_parallel_size > 1 raises NotImplementedError (base_worker.py:869-890), and NixlConnector's pull reader
  keys a producer's agents and memory by TP rank alone (base_worker.py:2440-2447, 2683; pull_worker.py:456), so
  the stages of a pipeline-parallel prefill pool, each holding its own layers' KV, are not told apart (only
  NixlPushConnector routes PP stages, and the routing sidecar drives the pull protocol). A pipeline-parallel
  layout (TP x PP, which every TP x PP replica spanning nodes is: TP stays inside a node, planner/parallelism.py)
  is served aggregated: PP_REFUSAL.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_eks.catalog.accelerators import InstanceType
from llm_eks.error_codes import E138
from llm_eks.errors import ConfigError, fail
from llm_eks.planner.cost import cost_per_million_output_tokens, replicas_for_target
from llm_eks.planner.kv_offload import multi_connector_config
from llm_eks.planner.latency import FITTED, step_time
from llm_eks.planner.latency.model import TTFT_WAIT_STEPS
from llm_eks.planner.request import DISAGGREGATION_MODES, PlanRequest
from llm_eks.planner.result import layout_text
from llm_eks.planner.sizing import Context, Fit

if TYPE_CHECKING:
    from llm_eks.planner.result import Plan

__all__ = ["DISAGGREGATION_MODES", "Decision", "decide", "kv_transfer_config", "transfer_rate"]

AGGREGATED = "aggregated"
DISAGGREGATED = "disaggregated"

# The side-channel port of the NIXL handshake (vLLM 0.33 envs.py VLLM_NIXL_SIDE_CHANNEL_PORT default).
NIXL_SIDE_CHANNEL_PORT = 5600

# Why a pipeline-parallel layout is not split into prefill and decode pools (module docstring, vLLM 0.33).
PP_REFUSAL = (
    "vLLM 0.33's NixlConnector serves no pipeline-parallel pool: a decode engine with PP > 1 refuses to start "
    "(kv_consumer) and its reader tells a PP > 1 prefill's stages apart by TP rank only"
)


@dataclass(frozen=True)
class TransferRate:
    """A published KV-transfer rate (GB/s) and where it comes from; none is measured by llm-eks."""

    transport: str
    gb_per_s: float
    source: str
    # True: an upper bound (a line rate), not a transfer measurement.
    upper_bound: bool


# NIXL over TCP (UCX): nixlbench UCX VRAM->VRAM on 2x H100 (SageMaker HyperPod EKS, UCX 1.19.0, NIXL 0.7.1),
# 0.324 GB/s (ai-dynamo/nixl#1021); Ray measured ~0.3 GB/s for NIXL's UCX falling back to TCP on EFA hardware
# (ray-project/ray#62339). No published NIXL LIBFABRIC-over-EFA transfer rate was found: over EFA the pod's share of
# the instance's published network bandwidth (catalog network_gbps, AWS) is used, an upper bound.
TCP_RATE = TransferRate(
    "tcp", 0.324, "nixlbench UCX over TCP, 2x H100 (ai-dynamo/nixl#1021); ~0.3 GB/s (ray-project/ray#62339)", False
)


def transfer_rate(inst: InstanceType, gpus_per_engine: int) -> TransferRate:
    """The KV-transfer rate between a prefill and a decode engine of `gpus_per_engine` GPUs on `inst` (a replica, or
    one data-parallel rank of one): NIXL's libfabric backend over EFA (the engine's GPUs' share of their node's
    network bandwidth, an upper bound), else TCP."""
    if not inst.efa:
        return TCP_RATE
    share = min(gpus_per_engine, inst.accelerators) / inst.accelerators
    rate = inst.network_gbps / 8 * share
    return TransferRate(
        "efa",
        round(rate, 3),
        f"upper bound: {inst.instance_type}'s published {inst.network_gbps:g} Gbps x the engine's share of its "
        "GPUs; no NIXL-over-EFA transfer measurement was found",
        True,
    )


def kv_transfer_config(role: str, efa: bool, offload_gib: float | None = None) -> str:
    """vLLM 0.33's `--kv-transfer-config` for a prefill ("prefill": kv_producer) or decode ("decode": kv_consumer)
    pod: NixlConnector, over NIXL's libfabric backend on EFA, its default UCX (TCP) elsewhere. With a CPU KV tier
    (`offload_gib` per engine) a MultiConnector of both, passed instead of --kv-offloading-size, which would replace
    the NIXL connector (planner/kv_offload.py)."""
    body = {
        "kv_connector": "NixlConnector",
        "kv_role": "kv_producer" if role == "prefill" else "kv_consumer",
        "kv_connector_extra_config": {"backends": ["LIBFABRIC" if efa else "UCX"]},
    }
    if offload_gib is not None:
        return multi_connector_config(body, offload_gib)
    return json.dumps(body, separators=(",", ":"))


@dataclass(frozen=True)
class Pool:
    """One pool of identical vLLM replicas."""

    role: str  # aggregated | prefill | decode
    instance_type: str
    split: str
    gpus_per_replica: int
    replicas: int
    usd_per_hour: float | None
    # Nodes one replica spans (> 1: a LeaderWorkerSet group per replica).
    nodes_per_replica: int = 1


@dataclass(frozen=True)
class Mode:
    """One way to serve the request, at its target: latency estimates, cost, whether it meets the targets."""

    name: str
    pools: tuple[Pool, ...]
    ttft_ms: float
    # Time per output token (aggregated: with the prompts' chunks mixed in; disaggregated: a pure decode step).
    tpot_ms: float
    usd_per_million_output_tokens: float | None
    meets_targets: bool

    @property
    def replicas(self) -> int:
        return sum(p.replicas for p in self.pools)


@dataclass(frozen=True)
class PrefillPhase:
    """The disaggregated TTFT's parts (ms) and the prefill pool's load."""

    kv_bytes_per_request: int
    transfer: TransferRate
    transfer_ms: float
    prefill_ms: float
    queue_ms: float
    decode_wait_ms: float
    prefill_utilization: float


@dataclass(frozen=True)
class Decision:
    """The planner's prefill/decode decision for a plan."""

    setting: str  # auto | on | off (the request's)
    recommended: str  # aggregated | disaggregated
    why: str
    aggregated: Mode
    # None: disaggregation not modelled for this plan (the reason is `why`).
    disaggregated: Mode | None = None
    phase: PrefillPhase | None = None
    # The plan's CPU KV tier per engine (GiB): each pool's connector config carries it; None: off.
    kv_offload_gib: float | None = None

    @property
    def ratio(self) -> str | None:
        """prefill:decode replicas, e.g. "2:3"."""
        if self.disaggregated is None:
            return None
        prefill, decode = self.disaggregated.pools
        return f"{prefill.replicas}:{decode.replicas}"

    @property
    def kv_over_efa(self) -> bool:
        """Served disaggregated with the KV cache moving over EFA (NIXL's libfabric backend): each pod needs EFA."""
        return self.recommended == DISAGGREGATED and self.phase is not None and self.phase.transfer.transport == "efa"

    def kv_transfer_configs(self) -> dict[str, str] | None:
        """The `--kv-transfer-config` of each pool's pods (prefill, decode); None when not disaggregated."""
        if self.recommended != DISAGGREGATED or self.phase is None:
            return None
        return {role: kv_transfer_config(role, self.kv_over_efa, self.kv_offload_gib) for role in ("prefill", "decode")}

    def to_dict(self) -> dict[str, Any]:
        body = dataclasses.asdict(self)
        body["ratio"] = self.ratio
        body["kv_transfer_config"] = self.kv_transfer_configs()
        # What the charts render: a vLLM workload behind the gateway is served as the plan recommends, each pool a
        # Deployment or, where a replica spans nodes, a LeaderWorkerSet (a workload without a gateway is refused,
        # never silently aggregated).
        body["deployed"] = self.recommended
        return body


def decide(plan: Plan) -> Decision:
    """The prefill/decode decision for `plan` (see the module docstring); ConfigError when the request forces
    disaggregation (`on`, or prefill_replicas) at a TTFT target it cannot meet."""
    r = plan.request
    aggregated = _aggregated(plan)
    setting = r.disaggregation
    fit = plan.fit
    if not isinstance(fit, Fit):
        # Neuron's engine paths run their own vLLM lines, compiled ahead of time: no NIXL pools are modelled there.
        if setting == "on" or r.prefill_replicas is not None:
            raise fail(
                E138,
                "workload.disaggregation",
                setting,
                f"the planner models prefill/decode pools on NVIDIA GPUs only; {plan.instance_type} runs Neuron's "
                "engine path: use auto or off",
            )
        return Decision(setting, AGGREGATED, "not modelled on Neuron instance types", aggregated)
    if plan.pipeline_parallel_size > 1:
        if setting == "on" or r.prefill_replicas is not None:
            raise fail(
                E138,
                "workload.disaggregation",
                setting,
                f"this plan needs {_split(plan)} on {plan.nodes_per_replica} node(s): {PP_REFUSAL}; use auto or off",
            )
        return Decision(setting, AGGREGATED, f"{_split(plan)}: {PP_REFUSAL}", aggregated)
    ctx = plan.context
    ttft_target = r.max_ttft_ms if r.max_ttft_ms is not None else aggregated.ttft_ms
    disaggregated, phase = _disaggregated(ctx, plan, fit, ttft_target)
    offload = plan.kv_offload_gib
    if setting == "off":
        return Decision(setting, AGGREGATED, "disaggregation off", aggregated, disaggregated, phase, offload)
    if setting == "on":
        return Decision(setting, DISAGGREGATED, "disaggregation on", aggregated, disaggregated, phase, offload)
    why = _choose(aggregated, disaggregated, phase, ttft_target, r.max_itl_ms)
    return Decision(setting, *why, aggregated, disaggregated, phase, offload)


def _choose(
    aggregated: Mode, disaggregated: Mode, phase: PrefillPhase, ttft_target: float, max_itl_ms: float | None
) -> tuple[str, str]:
    """auto: (the recommended mode, why in one line)."""
    agg_cost, pd_cost = aggregated.usd_per_million_output_tokens, disaggregated.usd_per_million_output_tokens
    costs = f"${_money(pd_cost)} vs ${_money(agg_cost)} aggregated per 1M output tokens"
    if not disaggregated.meets_targets:
        misses = []
        if disaggregated.ttft_ms > ttft_target:
            misses.append(
                f"TTFT {disaggregated.ttft_ms:.0f} ms > {ttft_target:.0f} ms (the KV transfer alone "
                f"{phase.transfer_ms:.0f} ms over {phase.transfer.transport.upper()})"
            )
        if max_itl_ms is not None and disaggregated.tpot_ms > max_itl_ms:
            misses.append(f"time per output token {disaggregated.tpot_ms:g} ms > max_itl_ms {max_itl_ms:g}")
        return AGGREGATED, "prefill/decode misses the targets: " + "; ".join(misses)
    if not aggregated.meets_targets:
        return DISAGGREGATED, f"aggregated misses the targets, prefill/decode meets them ({costs})"
    if pd_cost is None or agg_cost is None:
        return AGGREGATED, "no on-demand price to compare the modes by"
    if pd_cost < agg_cost:
        return DISAGGREGATED, f"cheaper at the same targets: {costs}"
    return AGGREGATED, f"prefill/decode costs more: {costs}"


def _split(plan: Plan) -> str:
    return layout_text(
        plan.tensor_parallel_size, plan.pipeline_parallel_size, plan.data_parallel_size, plan.expert_parallel
    )


def _money(value: float | None) -> str:
    return "?" if value is None else f"{value:.3f}"


def _meets(plan: Plan, ttft_ms: float, tpot_ms: float, ttft_target: float | None = None) -> bool:
    r = plan.request
    ttft_target = r.max_ttft_ms if ttft_target is None else ttft_target
    return (ttft_target is None or ttft_ms <= ttft_target) and (r.max_itl_ms is None or tpot_ms <= r.max_itl_ms)


def _aggregated(plan: Plan) -> Mode:
    r = plan.request
    # cost.replicas_for_target on the plan's numbers (its max_num_seqs is min(target, what fits) unless given).
    per_replica = min(plan.max_concurrency_typical, plan.max_num_seqs * plan.data_parallel_size)
    replicas = math.ceil(r.target_concurrency / max(1, per_replica))
    hourly = plan.cost_per_replica_hour
    cost = (
        None
        if hourly is None
        else cost_per_million_output_tokens(replicas, hourly, r.target_concurrency, plan.tpot_estimate_ms)
    )
    pool = Pool(
        AGGREGATED,
        plan.instance_type,
        _split(plan),
        plan.gpus_per_replica,
        replicas,
        None if hourly is None else round(hourly * replicas, 4),
        plan.nodes_per_replica,
    )
    return Mode(
        AGGREGATED,
        (pool,),
        plan.ttft_estimate_ms,
        plan.tpot_estimate_ms,
        None if cost is None else round(cost, 4),
        _meets(plan, plan.ttft_estimate_ms, plan.tpot_estimate_ms),
    )


# Prefill replicas the search tries at most per decode replica: beyond it a pool is mostly prefill, which the
# aggregated plan serves better (and the transfer, not prefill capacity, then bounds the TTFT).
MAX_PREFILL_PER_DECODE = 8

# Where no prefill pool meets the TTFT target, the pool is sized to this utilisation: an M/D/1 queue's mean wait is
# then at most two prompts' service time (rho / (2 (1 - rho)) = 2).
PREFILL_MAX_UTILIZATION = 0.8


def _disaggregated(ctx: Context, plan: Plan, fit: Fit, ttft_target: float) -> tuple[Mode, PrefillPhase]:
    r = plan.request
    decode_replicas = replicas_for_target(ctx, fit)
    # Every data-parallel rank is an engine of its own: the batch is per engine (module docstring).
    engines = fit.dp
    batch = math.ceil(r.target_concurrency / (decode_replicas * engines))
    step = dataclasses.replace(fit.step, batch=batch)
    decode_ms = step_time(step, FITTED, batch).total_ms
    # Prompts arrive as sequences finish: target_concurrency sequences, each out tokens of one decode step.
    prompts_per_ms = r.target_concurrency / (r.typical_output_tokens * decode_ms)
    budget = fit.max_num_batched_tokens
    tokens_per_ms = budget / step_time(step, FITTED, 0, budget).total_ms
    chunks = math.ceil(r.typical_input_tokens / budget)
    prefill_ms = chunks * step_time(step, FITTED, 0, r.typical_input_tokens / chunks).total_ms
    # Latent attention: each TP rank holds, and its decode peer reads, the whole latent (module docstring).
    copies = fit.tp if fit.step.is_mla else 1
    kv_bytes = ctx.kv_bytes_per_token * r.typical_input_tokens * copies
    rate = transfer_rate(plan.instance, fit.tp * fit.pp)
    transfer_ms = kv_bytes / (rate.gb_per_s * 1e9) * 1e3
    decode_wait_ms = (TTFT_WAIT_STEPS[True] + 1) * decode_ms
    fixed_ms = FITTED.serving_ms + prefill_ms + transfer_ms + decode_wait_ms
    service_ms = r.typical_input_tokens / tokens_per_ms

    def at(prefill_replicas: int) -> tuple[float, float]:
        """(TTFT ms, utilisation) with `prefill_replicas` prefill replicas; TTFT infinite at or above saturation."""
        rho = prompts_per_ms * service_ms / (prefill_replicas * engines)
        if rho >= 1:
            return math.inf, rho
        return fixed_ms + rho * service_ms / (2 * (1 - rho)), rho

    prefill_replicas = r.prefill_replicas
    if prefill_replicas is None:
        prefill_replicas = _smallest_prefill_pool(ttft_target, at, decode_replicas)
    ttft, rho = at(prefill_replicas)
    if r.prefill_replicas is not None or r.disaggregation == "on":
        _check_forced(r, prefill_replicas, ttft, rho, transfer_ms, rate)
    hourly = fit.cost
    total = prefill_replicas + decode_replicas
    cost = None if hourly is None else cost_per_million_output_tokens(total, hourly, r.target_concurrency, decode_ms)
    split = layout_text(fit.tp, fit.pp, fit.dp, fit.expert_parallel)
    pools = tuple(
        Pool(role, plan.instance_type, split, fit.gpus, n, None if hourly is None else round(hourly * n, 4), fit.nodes)
        for role, n in (("prefill", prefill_replicas), ("decode", decode_replicas))
    )
    shown_ttft = ttft if math.isfinite(ttft) else 600_000.0
    mode = Mode(
        DISAGGREGATED,
        pools,
        round(shown_ttft),
        round(decode_ms, 1),
        None if cost is None else round(cost, 4),
        math.isfinite(ttft) and _meets(plan, ttft, decode_ms, ttft_target),
    )
    phase = PrefillPhase(
        kv_bytes_per_request=kv_bytes,
        transfer=rate,
        transfer_ms=round(transfer_ms, 1),
        prefill_ms=round(prefill_ms, 1),
        queue_ms=round(ttft - fixed_ms, 1) if math.isfinite(ttft) else math.inf,
        decode_wait_ms=round(decode_wait_ms, 1),
        prefill_utilization=round(rho, 3),
    )
    return mode, phase


def _smallest_prefill_pool(ttft_target: float, at: Any, decode_replicas: int) -> int:
    """The fewest prefill replicas whose TTFT meets `ttft_target`; when none does (the transfer or the prefill alone
    is too long), the fewest at PREFILL_MAX_UTILIZATION or below."""
    most = max(1, MAX_PREFILL_PER_DECODE * decode_replicas)
    for n in range(1, most + 1):
        ttft, _ = at(n)
        if ttft <= ttft_target:
            return n
    return next((n for n in range(1, most + 1) if at(n)[1] <= PREFILL_MAX_UTILIZATION), most)


def _check_forced(
    r: PlanRequest, prefill_replicas: int, ttft: float, rho: float, transfer_ms: float, rate: TransferRate
) -> None:
    """A forced P/D layout (disaggregation on, or prefill_replicas) that cannot meet max_ttft_ms: one line why."""
    target = r.max_ttft_ms
    field = "workload.prefill_replicas" if r.prefill_replicas is not None else "workload.disaggregation"
    value = r.prefill_replicas if r.prefill_replicas is not None else r.disaggregation
    if rho >= 1:
        raise fail(
            E138,
            field,
            value,
            f"{prefill_replicas} prefill replica(s) cannot keep up with the prompts (utilisation {rho:.2f} >= 1); "
            "add prefill replicas or leave prefill_replicas out (the planner sizes it)",
        )
    if target is not None and ttft > target:
        raise ConfigError(
            E138,
            f"{field}: {value!r} is not allowed; it cannot meet max_ttft_ms {target:g}: TTFT estimate {ttft:.0f} ms "
            f"with {prefill_replicas} prefill replica(s), of which the KV transfer {transfer_ms:.0f} ms over "
            f"{rate.transport.upper()} at {rate.gb_per_s:g} GB/s; raise max_ttft_ms, use a family with EFA or "
            + ("leave prefill_replicas out" if r.prefill_replicas is not None else "set disaggregation auto"),
        )
