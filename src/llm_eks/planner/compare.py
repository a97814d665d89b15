"""Compare before choosing: every catalog instance type that can serve a request, on its best split, with what a
million output tokens costs there at the target load; for a MoE model, also its best DP x EP layout, as a row of
its own.

Uses the search's own functions (candidate shapes, `evaluate`, `usable`, `meets`), so a row is what
`llm-eks plan --accelerator <type> --tensor-parallel-size <tp> --pipeline-parallel-size <pp>` plans (with
`--data-parallel-size <dp> --enable-expert-parallel` for a DP x EP row).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm_eks.catalog import auto_mode
from llm_eks.catalog.accelerators import CATALOG as INSTANCE_CATALOG
from llm_eks.catalog.accelerators import InstanceType
from llm_eks.errors import ConfigError
from llm_eks.planner.compute_mode import AUTO_MODE
from llm_eks.planner.cost import COST_FORMULA, cost_per_million_output_tokens, per_million, replicas_for_target
from llm_eks.planner.expert_parallel import evaluate_expert_parallel
from llm_eks.planner.neuron import plan as neuron
from llm_eks.planner.neuron.sizing import NeuronFit
from llm_eks.planner.parallelism import candidate_shapes, expert_parallel_shapes
from llm_eks.planner.request import PlanRequest
from llm_eks.planner.result import layout_text
from llm_eks.planner.search import efa_allowed, meets, usable
from llm_eks.planner.sizing import Context, Fit, evaluate

__all__ = [
    "COST_FORMULA",
    "Comparison",
    "best_expert_parallel_fit",
    "best_fit",
    "compare",
    "cost_per_million_output_tokens",
    "neuron_refusals",
    "rank",
    "replicas_for_target",
    "row",
]


# How the table names each Neuron engine path.
NEURON_SHORT = {"nxd-inference": "NxDI", "vllm-neuron": "vllm-neuron"}


@dataclass(frozen=True)
class Comparison:
    """One instance type on its best split for the request, and what serving the target load there costs."""

    instance_type: str
    accelerator_name: str
    gpus_per_node: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    nodes_per_replica: int
    kv_cache_tokens: int
    # Sequences of the typical size the KV cache of one replica holds.
    concurrency_typical: int
    itl_ms: float
    # Mean time per output token with chunked prefill, median time to first token, and output tokens per second one
    # replica produces, all at target_concurrency sequences (latency/model.py).
    tpot_ms: float
    ttft_ms: float
    output_tokens_per_s: float
    # None: no on-demand price in the catalog (then no cost per token either).
    usd_per_replica_hour: float | None
    # Replicas that together run target_concurrency sequences.
    replicas: int
    usd_per_million_output_tokens: float | None
    meets_targets: bool
    # "tp-pp" or "dp-ep" (data-parallel attention with the experts spread over DP x TP GPUs).
    layout: str = "tp-pp"
    # Data-parallel ranks and the expert-parallel size (1 and 1 for TP x PP).
    data_parallel_size: int = 1
    expert_parallel_size: int = 1
    # The engine: vLLM (NVIDIA), or a Neuron engine path (nxd-inference, vllm-neuron), whose TP counts NeuronCores.
    engine: str = "vllm"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def shape(self) -> str:
        """The split as the table shows it: "TP8 PP2", "DP16 TP1 EP16", or on Neuron "TP2 NxDI" / "TP64 vllm-neuron"
        (TP over NeuronCores, and the engine path)."""
        if self.engine != "vllm":
            return f"TP{self.tensor_parallel_size} {NEURON_SHORT.get(self.engine, self.engine)}"
        return layout_text(
            self.tensor_parallel_size, self.pipeline_parallel_size, self.data_parallel_size, self.layout == "dp-ep"
        )


def compare(request: PlanRequest) -> list[Comparison]:
    """Every catalog instance type that can serve `request` (its accelerator is ignored), best first: those that
    meet the targets, then by cost per million output tokens (unpriced last), then by $/h. A MoE model gets a second
    row per GPU instance type for its best DP x EP layout where one fits; a Neuron instance type its best fit on its
    engine path where that path serves the model (`neuron_refusals` says why not elsewhere)."""
    ctx = Context(request)
    rows = []
    for inst in INSTANCE_CATALOG:
        if inst.accelerator_vendor != "nvidia":
            fit = best_neuron_fit(ctx, inst)
            if fit is not None:
                rows.append(row(ctx, fit))
            continue
        if request.compute == AUTO_MODE and not auto_mode.launches(inst.family):
            continue  # EKS Auto Mode does not launch this family
        for best in (best_fit(ctx, inst), best_expert_parallel_fit(ctx, inst)):
            if best is not None:
                rows.append(row(ctx, best))
    return sorted(rows, key=rank)


def _neuron_fits(ctx: Context, inst: InstanceType) -> tuple[list[NeuronFit], ConfigError | None]:
    """The usable fits on a Neuron instance type, or the one-line reason there are none."""
    try:
        neuron.refuse_if_unserved(ctx, inst)
    except ConfigError as err:
        return [], err
    fits = neuron.candidates(ctx, inst)
    good = [f for f in fits if neuron.usable(f)]
    if not fits:
        return [], neuron.not_a_size(ctx, inst)
    return good, None if good else neuron.no_fit(ctx, inst, fits, suggest=False)


def _neuron_per_million(ctx: Context, fit: NeuronFit) -> float | None:
    if fit.cost is None:
        return None
    replicas = math.ceil(ctx.request.target_concurrency / fit.shape.max_num_seqs)
    return cost_per_million_output_tokens(replicas, fit.cost, ctx.request.target_concurrency, fit.latency.tpot_ms)


def best_neuron_fit(ctx: Context, inst: InstanceType) -> NeuronFit | None:
    """The Neuron fit a row shows: as for GPUs, a replica fills its node (all its chips), so the price per replica
    holds without assuming other pods pack in; None when that does not fit (or the path refuses the request)."""
    fits, _ = _neuron_fits(ctx, inst)
    fits = [f for f in fits if f.chips == inst.accelerators]
    if not fits:
        return None
    return min(fits, key=lambda f: (not neuron.meets(ctx, f), _neuron_per_million(ctx, f) or math.inf, f.chips))


def neuron_refusals(request: PlanRequest) -> list[tuple[str, str]]:
    """(instance type, why) for every Neuron instance type that cannot serve `request`: the engine path's reason
    (the model, its format, what the path runs) or why nothing fits (host memory, HBM)."""
    ctx = Context(request, suggest=False)
    out = []
    for inst in INSTANCE_CATALOG:
        if inst.accelerator_vendor == "neuron":
            _, err = _neuron_fits(ctx, inst)
            if err is not None:
                out.append((inst.instance_type, err.message.split(" is not allowed; ", 1)[-1]))
    return out


def _cheapest(ctx: Context, fits: list[Fit]) -> Fit:
    return min(fits, key=lambda f: (not meets(ctx, f), per_million(ctx, f) or math.inf, f.gpus * f.nodes))


def best_fit(ctx: Context, inst: InstanceType) -> Fit | None:
    """As auto plans: a replica fills its node, one-node splits first, then whole nodes; among the usable splits,
    the one that meets the targets at the lowest cost per token, then with the fewest GPUs. None: nothing fits."""
    if ctx.request.expert_parallel_only:
        return None
    return _best_filling(ctx, inst, candidate_shapes(ctx, inst), evaluate)


def best_expert_parallel_fit(ctx: Context, inst: InstanceType) -> Fit | None:
    """The DP x EP layout auto would weigh on `inst`: whole nodes, one node first, then several; None: none fits
    (or the model, the request or the instance type rules expert parallelism out)."""
    return _best_filling(ctx, inst, expert_parallel_shapes(ctx, inst), evaluate_expert_parallel)


def _best_filling(
    ctx: Context,
    inst: InstanceType,
    shapes: tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]],
    evaluator: Callable[[Context, InstanceType, int, int, int], Fit],
) -> Fit | None:
    """Of the (one-node, multi-node) `shapes` `evaluator` sizes on `inst`: the cheapest usable one that fills its
    node, else the cheapest usable multi-node one (where EFA or the request allows)."""
    single, multi = shapes
    whole = [s for s in single if s[0] * s[1] == inst.accelerators]
    for candidates in (whole, multi if efa_allowed(ctx, inst) else []):
        fits = [f for f in (evaluator(ctx, inst, *s) for s in candidates) if usable(ctx, f)]
        if fits:
            return _cheapest(ctx, fits)
    return None


def row(ctx: Context, fit: Fit | NeuronFit) -> Comparison:
    """One row: a GPU split or a Neuron candidate (whose replica is one pod and whose batch is compiled), and what
    serving the target load on it costs."""
    inst = fit.instance
    if isinstance(fit, NeuronFit):
        cost, ok, engine = _neuron_per_million(ctx, fit), neuron.meets(ctx, fit), fit.engine.name
        replicas = math.ceil(ctx.request.target_concurrency / fit.shape.max_num_seqs)
    else:
        cost, ok, engine = per_million(ctx, fit), meets(ctx, fit), "vllm"
        replicas = replicas_for_target(ctx, fit)
    return Comparison(
        instance_type=inst.instance_type,
        accelerator_name=inst.accelerator_name,
        gpus_per_node=inst.accelerators,
        tensor_parallel_size=fit.tp,
        pipeline_parallel_size=fit.pp,
        nodes_per_replica=fit.nodes,
        kv_cache_tokens=fit.kv_cache_tokens,
        concurrency_typical=fit.typical,
        itl_ms=fit.latency.itl_ms,
        tpot_ms=fit.latency.tpot_ms,
        ttft_ms=fit.latency.ttft_ms,
        output_tokens_per_s=fit.latency.output_tokens_per_s,
        usd_per_replica_hour=None if fit.cost is None else round(fit.cost, 4),
        replicas=replicas,
        usd_per_million_output_tokens=None if cost is None else round(cost, 4),
        meets_targets=ok,
        layout="dp-ep" if fit.expert_parallel else "tp-pp",
        data_parallel_size=fit.dp,
        expert_parallel_size=fit.tp * fit.dp if fit.expert_parallel else 1,
        engine=engine,
    )


def rank(c: Comparison) -> tuple[bool, bool, float, float, str, str]:
    """Meets the targets first, then priced, then cheapest per million output tokens, then per hour."""
    cost = c.usd_per_million_output_tokens
    hourly = c.usd_per_replica_hour
    return (
        not c.meets_targets,
        cost is None,
        math.inf if cost is None else cost,
        math.inf if hourly is None else hourly,
        c.instance_type,
        c.layout,
    )
