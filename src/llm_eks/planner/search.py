"""Choosing the deployment: the cheapest instance type that meets the targets, or the smallest split on a named
one, and the one-line error when nothing fits."""

from __future__ import annotations

import math
from typing import Any, NoReturn

from llm_eks.catalog.accelerators import CATALOG as INSTANCE_CATALOG
from llm_eks.catalog.accelerators import InstanceType, instance_type
from llm_eks.catalog.formats import require_supported, support
from llm_eks.error_codes import E124, E208, E209, E210
from llm_eks.errors import ConfigError, fail
from llm_eks.planner.assumptions import plan_assumptions
from llm_eks.planner.cold_start import cold_start_paths, estimate_cold_start
from llm_eks.planner.cost import per_million
from llm_eks.planner.expert_parallel import evaluate_expert_parallel
from llm_eks.planner.fixes import NoFitError, find_fixes
from llm_eks.planner.kv_cache import cdiv
from llm_eks.planner.neuron.plan import plan_on_neuron
from llm_eks.planner.parallelism import candidate_shapes, expert_parallel_shapes
from llm_eks.planner.plan_warnings import WARN_CONCURRENCY, WARN_NO_EFA, WARN_NO_PRICE, PlanWarning, slo_warnings
from llm_eks.planner.pods import vllm_host_mib
from llm_eks.planner.request import PlanRequest
from llm_eks.planner.result import TIMES, Plan, layout_text
from llm_eks.planner.shape import (
    expert_parallel_does_not_fit,
    expert_parallel_not_on,
    not_on_instance,
    shape_does_not_fit,
)
from llm_eks.planner.sizing import Context, Fit, evaluate


def planned(ctx: Context) -> Plan:
    """The plan of `ctx`'s request: the cheapest instance type (auto) or the named one."""
    r = ctx.request
    if r.accelerator == "auto":
        return cheapest(ctx)
    inst = instance_type(r.accelerator)
    if inst.accelerator_vendor == "neuron":
        return plan_on_neuron(ctx, inst)
    return on_instance(ctx, inst)


def quiet_plan(request: PlanRequest) -> Plan:
    """planned() for a candidate change: its errors look for no changes of their own."""
    return planned(Context(request, suggest=False))


def usable(ctx: Context, fit: Fit) -> bool:
    """Fits at full context, on a node with enough host memory and (for nvme) instance store."""
    return fit.fits and fit.host_memory_ok and fit.nvme_ok


def meets(ctx: Context, fit: Fit) -> bool:
    """Holds target_concurrency at the typical size, within the latency ceilings: the time per output token (it
    counts the prefill steps an inter-token p99 sees) under max_itl_ms, the TTFT under max_ttft_ms."""
    r = ctx.request
    return (
        fit.typical >= r.target_concurrency
        and (r.max_itl_ms is None or fit.latency.tpot_ms <= r.max_itl_ms)
        and (r.max_ttft_ms is None or fit.latency.ttft_ms <= r.max_ttft_ms)
    )


def efa_allowed(ctx: Context, inst: InstanceType) -> bool:
    """A replica may span nodes of `inst`: it has EFA, or the request accepts TCP between nodes."""
    return inst.efa or ctx.request.allow_without_efa


def on_instance(ctx: Context, inst: InstanceType) -> Plan:
    require_supported(ctx.fmt, inst)
    r = ctx.request
    single, multi = ([], []) if r.expert_parallel_only else candidate_shapes(ctx, inst)
    ep_single, ep_multi = expert_parallel_shapes(ctx, inst)
    if not single + multi + ep_single + ep_multi:  # only when the request fixes a size that this node cannot take
        raise not_on_instance(ctx, inst) if not r.expert_parallel_only else expert_parallel_not_on(ctx, inst)
    tp_pick, tp_fits = _tp_pp_on(ctx, inst, single, multi)
    ep_pick = _best([evaluate_expert_parallel(ctx, inst, *s) for s in ep_single + ep_multi], ctx)
    blocked = [f for f in (tp_pick, ep_pick) if f is not None and f.nodes > 1 and not efa_allowed(ctx, inst)]
    if tp_pick in blocked:
        tp_pick, tp_fits = None, []
    if ep_pick in blocked:
        ep_pick = None
    fit = _choose(ctx, tp_pick, ep_pick, tp_fits)
    if fit is None:
        if blocked:
            raise needs_efa(ctx, blocked[0])
        if r.expert_parallel_only:
            raise expert_parallel_does_not_fit(ctx, inst, ep_single + ep_multi)
        raise no_fit_on(ctx, inst, single, multi)
    return build(ctx, fit, tuple(shortfalls(ctx, fit)) if not meets(ctx, fit) else ())


def _tp_pp_on(
    ctx: Context, inst: InstanceType, single: list[tuple[int, int, int]], multi: list[tuple[int, int, int]]
) -> tuple[Fit | None, list[Fit]]:
    """The TP x PP split on a named instance (the smallest one-node split that meets the targets, else the one that
    holds the most; multi-node splits only when no one-node split fits), and the usable splits it chose from. None:
    nothing fits."""
    for shapes in (single, multi):
        fits = [f for f in (evaluate(ctx, inst, *s) for s in shapes) if usable(ctx, f)]
        if not fits:
            continue
        for fit in fits:  # smallest first: the smallest split that meets the targets
            if meets(ctx, fit):
                return fit, fits
        return max(fits, key=lambda f: (f.typical, -f.gpus)), fits
    return None, []


def _best(fits: list[Fit], ctx: Context) -> Fit | None:
    """The usable DP x EP layout that meets the targets at the lowest cost per token (then fewest GPUs), else the
    one that holds the most sequences; None when none is usable."""
    fits = [f for f in fits if usable(ctx, f)]
    if not fits:
        return None
    meeting = [f for f in fits if meets(ctx, f)]
    if meeting:
        return min(meeting, key=lambda f: (per_million(ctx, f) or math.inf, f.gpus * f.nodes, f.nodes))
    return max(fits, key=lambda f: (f.typical, -f.gpus))


def _choose(ctx: Context, tp_pp: Fit | None, ep: Fit | None, tp_pp_fits: list[Fit]) -> Fit | None:
    """TP x PP or DP x EP: the one that meets the targets; when both do, DP x EP only if a million output tokens
    cost less on it than on every TP x PP split that meets them (`tp_pp_fits`), so a layout that TP x PP serves as
    cheaply keeps the TP x PP choice (the cheapest per hour, as before); when neither meets them, TP x PP's (what
    the plan warns about)."""
    if ep is None or tp_pp is None:
        return tp_pp or ep
    if not meets(ctx, ep):
        return tp_pp
    if not meets(ctx, tp_pp):
        return ep
    ep_cost = per_million(ctx, ep)
    tp_costs = [c for f in tp_pp_fits if meets(ctx, f) and (c := per_million(ctx, f)) is not None]
    return ep if ep_cost is not None and tp_costs and ep_cost < min(tp_costs) else tp_pp


def cheapest(ctx: Context) -> Plan:
    """The plan on the catalog instance type that meets the targets at the lowest cost; the one-line error saying
    why when none does."""
    best, fitting, tried = cheapest_fit(ctx)
    if best is not None:
        return build(ctx, best, ())
    no_cheapest(ctx, fitting, tried)


def cheapest_fit(ctx: Context) -> tuple[Fit | None, list[Fit], list[Fit]]:
    """The search over the catalog: the cheapest candidate that meets the targets with one-node replicas, else with
    multi-node ones (TP x PP or DP x EP, as `_choose` decides); with every candidate tried and those usable."""
    fitting: list[Fit] = []
    tried: list[Fit] = []
    for multi_node in (False, True):
        tp_meeting: list[Fit] = []
        ep_meeting: list[Fit] = []
        for inst in INSTANCE_CATALOG:
            evaluated, ep_evaluated = _filling(ctx, inst, multi_node)
            tried += evaluated + ep_evaluated
            fitting += [f for f in evaluated + ep_evaluated if usable(ctx, f)]
            tp_meeting += [f for f in evaluated if usable(ctx, f) and meets(ctx, f)]
            ep_meeting += [f for f in ep_evaluated if usable(ctx, f) and meets(ctx, f)]
        best_tp = (
            min(tp_meeting, key=lambda f: (f.cost, f.gpus * f.nodes, -f.kv_cache_tokens, f.instance.instance_type))
            if tp_meeting
            else None
        )
        best_ep = (
            min(ep_meeting, key=lambda f: (per_million(ctx, f) or math.inf, f.cost, f.gpus, f.instance.instance_type))
            if ep_meeting
            else None
        )
        best = _choose(ctx, best_tp, best_ep, tp_meeting)
        if best is not None:
            return best, fitting, tried
    return None, fitting, tried


def _filling(ctx: Context, inst: InstanceType, multi_node: bool) -> tuple[list[Fit], list[Fit]]:
    """The TP x PP and DP x EP candidates on `inst` whose replica fills its node (or, `multi_node`, spans nodes):
    none where the search does not look (not NVIDIA, no price, the weight format unsupported, or nodes without EFA
    that the request does not accept)."""
    cc = inst.compute_capability
    if inst.accelerator_vendor != "nvidia" or inst.on_demand_usd_per_hour is None or cc is None:
        return [], []
    if support(ctx.fmt, cc).level == "unsupported" or (multi_node and not efa_allowed(ctx, inst)):
        return [], []
    single, multi = ([], []) if ctx.request.expert_parallel_only else candidate_shapes(ctx, inst)
    ep_single, ep_multi = expert_parallel_shapes(ctx, inst)
    # A replica fills its node(s): the price per replica then holds without assuming other pods pack in.
    shapes = multi if multi_node else [s for s in single if s[0] * s[1] == inst.accelerators]
    ep_shapes = ep_multi if multi_node else [s for s in ep_single if s[0] * s[1] == inst.accelerators]
    return [evaluate(ctx, inst, *s) for s in shapes], [evaluate_expert_parallel(ctx, inst, *s) for s in ep_shapes]


def no_cheapest(ctx: Context, fitting: list[Fit], tried: list[Fit]) -> NoReturn:
    """Why no catalog instance type serves the request (from the candidates `tried` and those `fitting`): the fixed
    split or expert parallelism that fits nowhere, the model that fits nowhere (with the changes that would), or
    the concurrency, ITL or TTFT target no fitting candidate meets."""
    r = ctx.request
    spec = ctx.spec
    if not fitting and tried and r.expert_parallel_only:
        closest = max(tried, key=lambda f: f.usable_bytes_per_gpu - f.weight_bytes_per_gpu - f.request_kv_bytes_per_gpu)
        raise expert_parallel_does_not_fit(ctx, closest.instance, [(closest.tp, closest.dp, closest.nodes)])
    if not fitting and tried and r.fixed_shape and not any(f.fits for f in tried):
        raise shape_does_not_fit(ctx, tried)
    if not fitting:
        reason = (
            f"at {ctx.fmt} ({ctx.weight_bytes / 1e9:.1f} GB of weights) it fits no catalog instance type at "
            f"max_model_len {ctx.max_len} across up to {r.max_nodes_per_replica} node(s) per replica"
        )
        if not ctx.suggest:
            raise fail(E209, "workload.model", spec.id, reason)
        fixes, attempted = find_fixes(r, ctx.fmt, None, quiet_plan)
        raise NoFitError("workload.model", spec.id, reason, fixes, attempted)
    best = max(fitting, key=lambda f: (f.typical, -(f.cost or 0)))
    if best.typical < r.target_concurrency:
        raise fail(
            E210,
            "workload.target_concurrency",
            r.target_concurrency,
            f"at most {best.typical} sequences of {ctx.typical} tokens fit one replica "
            f"(on {where(best)}); lower it, shorten the typical request or use kv_cache_dtype fp8, "
            "and scale out with replicas instead",
        )
    holding = [f for f in fitting if f.typical >= r.target_concurrency]
    within_itl = [f for f in holding if r.max_itl_ms is None or f.latency.tpot_ms <= r.max_itl_ms]
    if not within_itl:
        fastest = min(holding, key=lambda f: f.latency.tpot_ms)
        raise fail(
            E210,
            "workload.max_itl_ms",
            r.max_itl_ms,
            f"the lowest time-per-output-token estimate at {r.target_concurrency} concurrent sequences is "
            f"{fastest.latency.tpot_ms:g} ms (on {where(fastest)}); raise it, lower target_concurrency or use fp8 "
            "weights",
        )
    quickest = min(within_itl, key=lambda f: f.latency.ttft_ms)
    raise fail(
        E210,
        "workload.max_ttft_ms",
        r.max_ttft_ms,
        f"the lowest time-to-first-token estimate at {r.target_concurrency} concurrent sequences of "
        f"{r.typical_input_tokens} prompt tokens is {quickest.latency.ttft_ms:g} ms (on {where(quickest)}); raise "
        "it, lower target_concurrency or shorten the typical prompt",
    )


def needs_efa(ctx: Context, fit: Fit) -> ConfigError:
    """A replica must span nodes of an instance type without EFA and the request does not accept TCP: the field that
    forced the nodes (a fixed size that outgrows one node), else the instance type, and the sizes that have EFA."""
    r, inst = ctx.request, fit.instance
    path: str
    value: Any
    if fit.expert_parallel and r.data_parallel_size is not None:
        path, value = "workload.data_parallel_size", r.data_parallel_size
    elif not fit.expert_parallel and r.pipeline_parallel_size is not None and fit.tp * fit.pp > inst.accelerators:
        path, value = "workload.pipeline_parallel_size", r.pipeline_parallel_size
    else:
        path, value = "workload.accelerator", inst.instance_type
    context = f" at max_model_len {ctx.max_len}" if path == "workload.accelerator" else ""
    reason = (
        f"a replica of {ctx.spec.id}{context} needs {fit.nodes} {inst.instance_type} nodes ({where(fit)}) and "
        f"{inst.instance_type} has no EFA, so the nodes would exchange activations over TCP"
    )
    if path == "workload.accelerator" and ctx.suggest:
        fixes, tried = find_fixes(r, ctx.fmt, inst, quiet_plan, blocked_by_efa=True)
        return NoFitError(path, value, reason, fixes, tried)
    with_efa = [row.instance_type for row in INSTANCE_CATALOG if row.family == inst.family and row.efa]
    choose = f"such as {', '.join(with_efa)}" if with_efa else "of another family"
    return fail(
        E124,
        path,
        value,
        f"{reason}; choose an instance type with EFA ({choose}), or accept TCP with acknowledged_warnings "
        f"{WARN_NO_EFA} (allow_without_efa)",
    )


def where(fit: Fit) -> str:
    inst = fit.instance
    nodes = f"{fit.nodes}{TIMES} " if fit.nodes > 1 else ""
    return f"{nodes}{inst.instance_type}, {layout_text(fit.tp, fit.pp, fit.dp, fit.expert_parallel)}"


def shortfalls(ctx: Context, fit: Fit) -> list[PlanWarning]:
    r = ctx.request
    out = []
    if fit.typical < r.target_concurrency:
        capped = (
            f"max_num_seqs is capped at {max(fit.typical, 1)}"
            if r.max_num_seqs is None
            else f"beyond them vLLM preempts sequences (max_num_seqs {r.max_num_seqs} as given)"
        )
        out.append(
            PlanWarning(
                WARN_CONCURRENCY,
                f"only {fit.typical} of the {r.target_concurrency} target sequences of {ctx.typical} tokens fit one "
                f"replica on {fit.instance.instance_type}; {capped}",
            )
        )
    lat = fit.latency
    return [*out, *slo_warnings(r.max_itl_ms, r.max_ttft_ms, lat.tpot_ms, lat.ttft_ms)]


def kv_offload_too_large(r: PlanRequest, inst: InstanceType, fit: Fit, need: int) -> ConfigError:
    """The CPU KV tier does not fit the pod's share of `inst`'s memory beside vLLM's `need` MiB: one line."""
    spare = fit.pod.memory_mib - need
    engines = fit.dp_local if fit.expert_parallel else 1
    per = f" x {engines} engines per pod" if engines > 1 else ""
    most = f"at most {spare // 1024 // engines} GiB" if spare >= 1024 * engines else "no CPU tier fits"
    return fail(
        E208,
        "workload.kv_offload",
        r.kv_offload,
        f"a pod's share of {inst.instance_type}'s host memory ({fit.pod.memory_mib} MiB) holds the {need} MiB "
        f"vLLM needs and {max(spare, 0)} MiB more{per}: {most} there; lower kv_offload, use auto, or choose "
        "an instance type with more memory",
    )


def no_fit_on(
    ctx: Context, inst: InstanceType, single: list[tuple[int, int, int]], multi: list[tuple[int, int, int]]
) -> ConfigError:
    spec, r = ctx.spec, ctx.request
    fits = [evaluate(ctx, inst, *s) for s in single + multi]
    memory_fits = [f for f in fits if f.fits]
    if memory_fits and not any(f.nvme_ok for f in memory_fits):
        return fail(
            E209,
            "workload.weights_source",
            r.weights_source,
            f"the {ctx.checkpoint_bytes / 1e9:.1f} GB checkpoint (plus 10 % headroom) does not fit the "
            f"{inst.local_nvme_gb} GB instance store of {inst.instance_type}; use s3 or ebs",
        )
    if memory_fits:
        worst = memory_fits[0]
        need = vllm_host_mib(worst.gpus_per_pod)
        if r.kv_offload is not None:
            return kv_offload_too_large(r, inst, worst, need)
        return fail(
            E209,
            "workload.accelerator",
            inst.instance_type,
            f"a pod's share of its host memory ({worst.pod.memory_mib} MiB) is below the {need} MiB vLLM needs; "
            "choose a larger size of the family",
        )
    if r.fixed_shape:
        return shape_does_not_fit(ctx, fits)
    nodes = max([s[2] for s in single + multi])
    span = f"{nodes} node{'s' if nodes > 1 else ''}"
    reason = (
        f"{spec.id} at {ctx.fmt} ({ctx.weight_bytes / 1e9:.1f} GB of weights, "
        f"{ctx.kv_bytes_per_token // 1024} KiB of KV cache per token) does not fit max_model_len {ctx.max_len} "
        f"on {span} of {inst.accelerators}{TIMES} {inst.accelerator_name} "
        f"({inst.accelerator_memory_gib:.1f} GiB each)"
    )
    if not ctx.suggest:
        return fail(E209, "workload.accelerator", inst.instance_type, reason)
    fixes, tried = find_fixes(r, ctx.fmt, inst, quiet_plan)
    return NoFitError("workload.accelerator", inst.instance_type, reason, fixes, tried)


def build(ctx: Context, fit: Fit, warnings: tuple[PlanWarning, ...]) -> Plan:
    r, inst = ctx.request, fit.instance
    # Per data-parallel rank, as vLLM applies --max-num-seqs (the replica's, for TP x PP).
    share = cdiv(r.target_concurrency, fit.dp)
    max_num_seqs = r.max_num_seqs if r.max_num_seqs is not None else max(1, min(share, fit.typical_per_rank))
    extra = list(warnings)
    if fit.nodes > 1 and not inst.efa:  # only when the request accepts it (allow_without_efa)
        across = (
            "the experts' all-gather and reduce-scatter cross nodes over TCP"
            if fit.expert_parallel
            else "pipeline stages exchange activations over TCP"
        )
        extra.append(PlanWarning(WARN_NO_EFA, f"{inst.instance_type} has no EFA: {across}"))
    if inst.on_demand_usd_per_hour is None:
        extra.append(PlanWarning(WARN_NO_PRICE, f"{inst.instance_type}: {inst.note or 'no on-demand price'}"))
    return Plan(
        request=r,
        fit=fit,
        max_num_seqs=max_num_seqs,
        cold_start=estimate_cold_start(ctx, fit),
        cold_start_paths=cold_start_paths(ctx, fit),
        assumptions=tuple(plan_assumptions(ctx, fit)),
        warnings=tuple(extra),
    )
