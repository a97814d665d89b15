"""A plan on a Neuron instance type: the engine path's checks, the chips per pod, and the one-line error naming why
nothing fits and what would."""

from __future__ import annotations

from collections.abc import Callable

from llm_eks.catalog.accelerators import CATALOG, InstanceType
from llm_eks.catalog.neuron import NeuronEngine, neuron_engine, neuron_refusal
from llm_eks.error_codes import E209, E211
from llm_eks.errors import ConfigError, fail
from llm_eks.planner.compute_mode import AUTO_MODE, image_source_on
from llm_eks.planner.neuron.assumptions import neuron_assumptions
from llm_eks.planner.neuron.cold_start import (
    compile_seconds,
    neuron_cold_start,
    neuron_cold_start_paths,
)
from llm_eks.planner.neuron.engine import NeuronLayout, NeuronServing
from llm_eks.planner.neuron.shape import needs_scheduler_extension, pod_chip_counts
from llm_eks.planner.neuron.sizing import (
    HOST_BYTES_PER_CHECKPOINT_BYTE,
    VLLM_NEURON_KV_CAP_FRACTION,
    NeuronFit,
    evaluate,
    largest_fitting_length,
)
from llm_eks.planner.plan_warnings import WARN_CONCURRENCY, WARN_NO_PRICE, PlanWarning, slo_warnings
from llm_eks.planner.result import TIMES, Plan
from llm_eks.planner.sizing import Context

GIB = 1024**3


def allowed_chip_counts(ctx: Context, inst: InstanceType) -> tuple[int, ...]:
    """The chips a pod may take on `inst` under the request's compute: on EKS Auto Mode one or all of them (its nodes
    run their own Neuron device plugin, without the scheduler extension that hands out contiguous partial sets)."""
    counts = pod_chip_counts(inst)
    if ctx.request.compute == AUTO_MODE:
        return tuple(c for c in counts if not needs_scheduler_extension(inst, c))
    return counts


def chip_counts(ctx: Context, inst: InstanceType) -> tuple[int, ...]:
    """The chips per pod to try on `inst`: those the request's tensor_parallel_size names (in cores), else all."""
    counts = allowed_chip_counts(ctx, inst)
    tp = ctx.request.tensor_parallel_size
    if tp is None:
        return counts
    return tuple(c for c in counts if c * inst.cores_per_accelerator == tp)


def candidates(ctx: Context, inst: InstanceType) -> list[NeuronFit]:
    engine = neuron_engine(inst)
    return [evaluate(ctx, inst, engine, c, ctx.request.max_num_seqs) for c in chip_counts(ctx, inst)]


def usable(fit: NeuronFit) -> bool:
    return fit.fits and fit.host_memory_ok


def meets(ctx: Context, fit: NeuronFit) -> bool:
    r = ctx.request
    return (
        fit.shape.max_num_seqs >= r.target_concurrency
        and (r.max_itl_ms is None or fit.latency.tpot_ms <= r.max_itl_ms)
        and (r.max_ttft_ms is None or fit.latency.ttft_ms <= r.max_ttft_ms)
    )


def refuse_if_unserved(ctx: Context, inst: InstanceType) -> None:
    """The engine path's one-line refusal (model, weights, KV cache, and what Neuron does not run), if any."""
    r = ctx.request
    refusal = neuron_refusal(ctx.spec, inst, ctx.fmt, r.kv_cache_dtype)
    if refusal is not None:
        raise refusal
    engine = neuron_engine(inst)
    if r.lora is not None:
        raise fail(
            E211,
            "workload.lora_adapters",
            dict(r.lora.adapters),
            f"{engine.name} on {inst.instance_type} is not planned with LoRA adapters by llm-eks; serve them on a GPU "
            "instance type, or merged into checkpoints of their own",
        )
    if r.pipeline_parallel_size not in (None, 1):
        raise fail(
            E211,
            "workload.pipeline_parallel_size",
            r.pipeline_parallel_size,
            f"{engine.name} does not run pipeline parallelism; a replica on {inst.instance_type} is one pod of "
            "tensor-parallel NeuronCores (use 1 or leave it out)",
        )
    if r.data_parallel_size not in (None, 1) or r.enable_expert_parallel:
        raise fail(
            E211,
            "workload.data_parallel_size",
            r.data_parallel_size,
            f"{engine.name} serves one tensor-parallel group per pod here; scale out with replicas (use 1 or leave "
            "it out, and no expert parallelism)",
        )


def best_on(ctx: Context, inst: InstanceType) -> NeuronFit:
    """The plan's candidate on a named Neuron instance type: the fewest chips that meet the targets, else the one
    that holds the most sequences; a one-line error when none fits."""
    refuse_if_unserved(ctx, inst)
    fits = candidates(ctx, inst)
    if not fits:
        raise not_a_size(ctx, inst)
    good = [f for f in fits if usable(f)]
    if not good:
        raise no_fit(ctx, inst, fits)
    for fit in good:  # fewest chips first
        if meets(ctx, fit):
            return fit
    return max(good, key=lambda f: (f.shape.max_num_seqs, -f.chips))


def not_a_size(ctx: Context, inst: InstanceType) -> ConfigError:
    r = ctx.request
    counts = allowed_chip_counts(ctx, inst)
    sizes = [c * inst.cores_per_accelerator for c in counts]
    auto = (
        " (EKS Auto Mode gives a pod one chip or the whole node: no Neuron scheduler extension for contiguous sets)"
        if r.compute == AUTO_MODE and counts != pod_chip_counts(inst)
        else ""
    )
    return fail(
        E209,
        "workload.tensor_parallel_size",
        r.tensor_parallel_size,
        f"on {inst.instance_type} a pod takes {', '.join(map(str, counts))} chip(s) of "
        f"{inst.cores_per_accelerator} NeuronCores{auto}: tensor_parallel_size {', '.join(map(str, sizes))}",
    )


def no_fit(ctx: Context, inst: InstanceType, fits: list[NeuronFit], suggest: bool = True) -> ConfigError:
    """Why nothing fits `inst`, with what would (unless not `suggest`): host memory first (it rules the instance size
    out whatever the shape), then HBM."""
    spec, r = ctx.spec, ctx.request
    engine = fits[0].engine
    if all(f.weight_bytes_per_core > f.usable_bytes_per_core for f in fits):
        widest = max(fits, key=lambda f: f.chips)
        larger = f"; {_other_sizes(ctx, inst, usable)}" if suggest else ""
        return fail(
            E209,
            "workload.accelerator",
            inst.instance_type,
            f"{spec.id}'s {ctx.weight_bytes / 1e9:.1f} GB of bf16 weights take "
            f"{widest.weight_bytes_per_core / GIB:.2f} GiB on each of the {widest.tp} {inst.neuron_core}s of "
            f"{widest.chips} chip(s), above the "
            f"{widest.usable_bytes_per_core / GIB:.2f} GiB each has for weights and KV cache (gpu_memory_utilization "
            f"{r.gpu_memory_utilization:g} of {widest.memory_per_core_bytes / GIB:.0f} GiB){larger}",
        )
    if not any(f.host_memory_ok for f in fits):
        fit = max(fits, key=lambda f: f.pod.memory_mib)
        larger = _other_sizes(ctx, inst, lambda f: f.host_memory_ok and f.fits) if suggest else ""
        return fail(
            E209,
            "workload.accelerator",
            inst.instance_type,
            f"a pod's {fit.pod.memory_mib:,} MiB of host memory is not enough to compile and load the "
            f"{ctx.checkpoint_bytes / 1e9:.1f} GB checkpoint of {spec.id}: compiling Llama-3.1-8B-Instruct with NxD "
            f"Inference ran out of memory on a 32 GiB trn1.2xlarge (aws-neuron/aws-neuron-sdk#1222), so llm-eks asks "
            f"for more than {HOST_BYTES_PER_CHECKPOINT_BYTE:.2f}x the checkpoint "
            f"({fit.host_memory_needed_bytes / GIB:.1f} GiB)" + (f"; {larger}" if larger else ""),
        )
    if r.max_num_seqs is not None and any(f.max_sequences >= 1 for f in fits):
        most = max(f.max_sequences for f in fits)
        return fail(
            E209,
            "workload.max_num_seqs",
            r.max_num_seqs,
            f"{engine.name} compiles max_num_seqs x max_model_len {ctx.max_len} of KV cache on every core and at most "
            f"{most} such sequences fit beside the weights on {inst.instance_type}; lower it or max_model_len",
        )
    widest = max(fits, key=lambda f: f.chips)
    longest = largest_fitting_length(ctx, inst, engine, widest.chips)
    cap = (
        f", and {engine.name} caps the KV cache at {VLLM_NEURON_KV_CAP_FRACTION:.0%} of that"
        if engine.name == "vllm-neuron"
        else ""
    )
    shorter = (
        f"max_model_len {longest} fits one sequence there"
        if longest >= r.typical_tokens
        else f"no max_model_len that holds the typical request ({r.typical_tokens} tokens) fits"
    )
    larger = f"; {_other_sizes(ctx, inst, usable)}" if suggest else ""
    return fail(
        E209,
        "workload.accelerator",
        inst.instance_type,
        f"{spec.id} takes {widest.weight_bytes_per_core / GIB:.2f} GiB of weights on each of {widest.tp} "
        f"{inst.neuron_core}s ({widest.chips} chip(s)) and one {ctx.max_len}-token sequence "
        f"{widest.kv_bytes_per_token_per_core * widest.shape.kv_tokens // max(widest.shape.max_num_seqs, 1) / GIB:.2f} "
        f"GiB of KV cache; each core has {widest.memory_per_core_bytes / GIB:.0f} GiB x gpu_memory_utilization "
        f"{r.gpu_memory_utilization:g} = {widest.usable_bytes_per_core / GIB:.2f} GiB{cap}; {shorter}{larger}",
    )


def _other_sizes(ctx: Context, inst: InstanceType, ok: Callable[[NeuronFit], bool]) -> str:
    """What would serve the request instead: the smallest other Neuron size (its own family first) on which a
    candidate passes `ok`, or whose host memory suffices at a shorter max_model_len."""
    ordered = sorted(
        (row for row in CATALOG if row.accelerator_vendor == "neuron" and row.instance_type != inst.instance_type),
        key=lambda row: (row.family != inst.family, row.accelerators, row.memory_gib),
    )
    for row in ordered:
        if neuron_refusal(ctx.spec, row, ctx.fmt, ctx.request.kv_cache_dtype) is not None:
            continue
        fits = candidates(ctx, row)
        name = f"{row.instance_type} ({row.accelerators}{TIMES} {row.accelerator_name}, {row.memory_gib:g} GiB RAM)"
        if any(ok(f) for f in fits):
            return f"{name} serves it"
        hosted = [f for f in fits if f.host_memory_ok]
        longest = max((largest_fitting_length(ctx, row, f.engine, f.chips) for f in hosted), default=0)
        if longest >= ctx.request.typical_tokens:
            return f"{name} serves it at max_model_len {longest} or less"
    return "no Neuron instance type serves it at this max_model_len: lower it, or use a GPU instance type"


def shortfalls(ctx: Context, fit: NeuronFit) -> list[PlanWarning]:
    r, out = ctx.request, []
    if fit.shape.max_num_seqs < r.target_concurrency:
        out.append(
            PlanWarning(
                WARN_CONCURRENCY,
                f"only {fit.shape.max_num_seqs} of the {r.target_concurrency} target sequences fit one replica on "
                f"{fit.instance.instance_type}: {fit.engine.name} compiles max_model_len {ctx.max_len} of KV cache for "
                "every sequence of its batch; lower max_model_len or target_concurrency and scale out with replicas",
            )
        )
    lat = fit.latency
    return [*out, *slo_warnings(r.max_itl_ms, r.max_ttft_ms, lat.tpot_ms, lat.ttft_ms)]


def layout(ctx: Context, fit: NeuronFit, engine: NeuronEngine) -> NeuronLayout:
    inst = fit.instance
    return NeuronLayout(
        serving=NeuronServing(engine=engine.name, shape=fit.shape, shutdown_timeout=engine.shutdown_timeout),
        engine_label=engine.label,
        vllm_version=engine.vllm_version,
        image=engine.image,
        neuron_core=inst.neuron_core or "",
        logical_core_config=inst.logical_core_config,
        cores_per_chip=inst.cores_per_accelerator,
        memory_per_core_bytes=inst.memory_per_core_bytes,
        chips_per_pod=fit.chips,
        scheduler_extension=needs_scheduler_extension(inst, fit.chips),
        host_memory_needed_bytes=fit.host_memory_needed_bytes,
        compile_seconds=compile_seconds(engine.name, ctx.checkpoint_bytes),
    )


def build(ctx: Context, fit: NeuronFit) -> Plan:
    """The Plan of a Neuron candidate."""
    r, inst = ctx.request, fit.instance
    warnings = shortfalls(ctx, fit) if not meets(ctx, fit) else []
    if inst.on_demand_usd_per_hour is None:
        warnings.append(PlanWarning(WARN_NO_PRICE, f"{inst.instance_type}: cost unknown: {inst.note}"))
    details = layout(ctx, fit, fit.engine)
    # On EKS Auto Mode the node's image path is Auto Mode's own (its parallel pull on Trn, a plain pull on Inf).
    image_source = image_source_on(r.compute, r.image_source, inst.family)
    return Plan(
        request=r,
        fit=fit,
        max_num_seqs=fit.shape.max_num_seqs,
        cold_start=neuron_cold_start(inst, fit.engine.name, ctx.checkpoint_bytes, image_source),
        cold_start_paths=neuron_cold_start_paths(
            inst, ctx.checkpoint_bytes, image_source, auto_mode=r.compute == AUTO_MODE
        ),
        assumptions=tuple(neuron_assumptions(ctx, fit, details)),
        warnings=tuple(warnings),
        neuron=details,
    )


def plan_on_neuron(ctx: Context, inst: InstanceType) -> Plan:
    return build(ctx, best_on(ctx, inst))
