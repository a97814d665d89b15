"""Capacity planner: model x weight format x KV-cache dtype x context x accelerator -> a vLLM deployment that fits.

Pure and deterministic: the same request always gives the same plan, and nothing here imports aws_cdk, cdk8s or
jsii (the `llm-eks plan` CLI must answer in well under a second). The numbers it produces (instance type, GPUs per
replica, tensor/pipeline parallel sizes, engine settings, pod requests, cold-start time) are the single source the
constructs and charts use.

`plan()` is the one entry point. One module per concern, each read top to bottom:
    request       PlanRequest and its validation
    sizing        one candidate (instance, TP, PP, nodes): weights, KV cache, concurrency, pods
    memory        GPU memory per worker as vLLM accounts it
    tensor_split  the tensor-parallel sizes vLLM accepts for a model
    parallelism   the TP/PP shapes, and the DP x EP layouts of a MoE model, to try on an instance type
    expert_parallel one DP x EP candidate (data-parallel attention, experts over DP x TP GPUs) as vLLM builds it
    shape         why the TP/PP (or DP x EP) sizes a request fixes cannot work, with numbers
    cost          cost per million output tokens, which ranks candidates and decides between layouts
    compare       every instance type that can serve a request, ranked by cost per million output tokens
    latency       the latency estimates (decode step, TTFT, throughput), with the interconnect figures
    cold_start    image, weights, warm-up and node launch times
    pods          host CPU and memory per pod
    search        choosing among candidates, and the one-line error when none fits
    fixes         when none fits: the changes that would, each planned, cheapest first
    assumptions   what a plan assumed, with its numbers
    disaggregation whether separate prefill and decode pools pay, their sizes, and the NIXL KV-transfer config
    kv_offload    the CPU KV tier (vLLM --kv-offloading-size): its host memory, and the prefix reuse of multi-turn chat
    kv_events     precise prefix-cache routing: when a workload gets it, and vLLM's --kv-events-config
    engine        the vLLM engine settings a plan carries, and their `vllm serve` flags and Ray engine_kwargs
    plan_warnings the warnings a plan carries, with ids a user can acknowledge
    result        Plan and what it carries
"""

from __future__ import annotations

import dataclasses

from llm_eks.planner import kv_events
from llm_eks.planner.cold_start import ColdStart
from llm_eks.planner.kv_offload import Reuse, reuse
from llm_eks.planner.memory import GIB
from llm_eks.planner.parallelism import valid_tensor_parallel_sizes
from llm_eks.planner.plan_warnings import (
    WARN_CONCURRENCY,
    WARN_ITL,
    WARN_NO_EFA,
    WARN_NO_PRICE,
    WARN_RESERVATION,
    WARNING_IDS,
    PlanWarning,
)
from llm_eks.planner.pods import PodResources
from llm_eks.planner.request import KV_CACHE_DTYPES, WEIGHT_FORMATS, WEIGHTS_SOURCES, LoraAdapters, PlanRequest
from llm_eks.planner.result import TIMES, Plan
from llm_eks.planner.search import planned
from llm_eks.planner.sizing import Context, Fit

__all__ = [
    "GIB",
    "KV_CACHE_DTYPES",
    "TIMES",
    "WARNING_IDS",
    "WARN_CONCURRENCY",
    "WARN_ITL",
    "WARN_NO_EFA",
    "WARN_NO_PRICE",
    "WARN_RESERVATION",
    "WEIGHTS_SOURCES",
    "WEIGHT_FORMATS",
    "ColdStart",
    "LoraAdapters",
    "Plan",
    "PlanRequest",
    "PlanWarning",
    "PodResources",
    "plan",
    "valid_tensor_parallel_sizes",
]


def plan(request: PlanRequest) -> Plan:
    """The deployment plan for `request`; ConfigError (one line) when nothing fits: a NoFitError (planner/fixes.py)
    lists the changes that would, cheapest first."""
    planned_ = planned(Context(request))
    # The prefill/decode decision on the chosen layout (ConfigError when a forced one cannot meet the targets).
    from llm_eks.planner.disaggregation import decide

    return dataclasses.replace(
        planned_, disaggregation=decide(planned_), prefix_reuse=_reuse(planned_), prefix_cache=_scoring(planned_)
    )


def _scoring(p: Plan) -> kv_events.Scoring:
    """The endpoint picker's prefix-cache scorer on the plan's own layout (a precise request it cannot serve is a
    one-line ConfigError naming workload.prefix_cache_scorer)."""
    r = p.request
    return kv_events.resolve(
        r.prefix_cache_scorer,
        "workload",
        offload=bool(p.kv_offload_gib),
        picker=r.picker,
        neuron=p.neuron is not None,
        engines_per_replica=p.data_parallel_size,
        served_model_name=p.served_model_name,
    )


def _reuse(p: Plan) -> Reuse | None:
    """The multi-turn prefix reuse estimate on the plan's own layout (its chosen candidate's step)."""
    if p.request.conversation_turns == 1 or not isinstance(p.fit, Fit):
        # Neuron's engine paths are planned by their own latency model (planner/neuron): no reuse estimate there.
        return None
    return reuse(p)
