"""Choosing the deployment: the cheapest instance type that meets the targets, or the smallest split on a named
one, and the one-line error when nothing fits."""

from __future__ import annotations

from llm_eks.catalog.accelerators import CATALOG as INSTANCE_CATALOG
from llm_eks.catalog.accelerators import InstanceType
from llm_eks.catalog.formats import require_supported, support
from llm_eks.errors import ConfigError, fail
from llm_eks.planner.assumptions import plan_assumptions
from llm_eks.planner.cold_start import cold_start_paths, estimate_cold_start
from llm_eks.planner.parallelism import candidate_shapes
from llm_eks.planner.pods import MIN_POD_MEMORY_MIB, MIN_POD_MEMORY_PER_GPU_MIB
from llm_eks.planner.result import TIMES, WARN_CONCURRENCY, WARN_ITL, WARN_NO_EFA, WARN_NO_PRICE, Plan, PlanWarning
from llm_eks.planner.shape import not_on_instance, shape_does_not_fit
from llm_eks.planner.sizing import Context, Fit, evaluate


def usable(ctx: Context, fit: Fit) -> bool:
    """Fits at full context, on a node with enough host memory and (for nvme) instance store."""
    return fit.fits and fit.host_memory_ok and fit.nvme_ok


def meets(ctx: Context, fit: Fit) -> bool:
    itl = ctx.request.max_itl_ms
    return fit.typical >= ctx.request.target_concurrency and (itl is None or fit.itl_ms <= itl)


def on_instance(ctx: Context, inst: InstanceType) -> Plan:
    require_supported(ctx.fmt, inst)
    single, multi = candidate_shapes(ctx, inst)
    if not single + multi:  # only when the request fixes a size that this node cannot take
        raise not_on_instance(ctx, inst)
    for shapes in (single, multi):
        fits = [f for f in (evaluate(ctx, inst, *s) for s in shapes) if usable(ctx, f)]
        if not fits:
            continue
        for fit in fits:  # smallest first: the smallest split that meets the targets
            if meets(ctx, fit):
                return build(ctx, fit, ())
        best = max(fits, key=lambda f: (f.typical, -f.gpus))
        return build(ctx, best, tuple(shortfalls(ctx, best)))
    raise no_fit_on(ctx, inst, single, multi)


def cheapest(ctx: Context) -> Plan:
    fitting: list[Fit] = []
    tried: list[Fit] = []
    for multi_node in (False, True):
        for inst in INSTANCE_CATALOG:
            if inst.accelerator_vendor != "nvidia" or inst.on_demand_usd_per_hour is None:
                continue
            if inst.compute_capability is None or support(ctx.fmt, inst.compute_capability).level == "unsupported":
                continue
            single, multi = candidate_shapes(ctx, inst)
            # A replica fills its node(s): the price per replica then holds without assuming other pods pack in.
            shapes = multi if multi_node else [s for s in single if s[0] * s[1] == inst.accelerators]
            evaluated = [evaluate(ctx, inst, *s) for s in shapes]
            tried += evaluated
            fitting += [f for f in evaluated if usable(ctx, f)]
        meeting = [f for f in fitting if meets(ctx, f)]
        if meeting:
            best = min(meeting, key=lambda f: (f.cost, f.gpus * f.nodes, -f.kv_cache_tokens, f.instance.instance_type))
            return build(ctx, best, ())
    r, spec = ctx.request, ctx.spec
    if not fitting and tried and r.fixed_shape and not any(f.fits for f in tried):
        raise shape_does_not_fit(ctx, tried)
    if not fitting:
        raise fail(
            "workload.model",
            spec.id,
            f"at {ctx.fmt} ({ctx.weight_bytes / 1e9:.1f} GB of weights) it fits no catalog instance type at "
            f"max_model_len {ctx.max_len} across up to {r.max_nodes_per_replica} node(s) per replica; "
            f"{remedies(ctx, bigger=False)}",
        )
    best = max(fitting, key=lambda f: (f.typical, -(f.cost or 0)))
    if best.typical < r.target_concurrency:
        raise fail(
            "workload.target_concurrency",
            r.target_concurrency,
            f"at most {best.typical} sequences of {ctx.typical} tokens fit one replica "
            f"(on {where(best)}); lower it, shorten the typical request or use kv_cache_dtype fp8, "
            "and scale out with replicas instead",
        )
    fastest = min((f for f in fitting if f.typical >= r.target_concurrency), key=lambda f: f.itl_ms)
    raise fail(
        "workload.max_itl_ms",
        r.max_itl_ms,
        f"the lowest inter-token latency estimate at {r.target_concurrency} concurrent sequences is "
        f"{fastest.itl_ms} ms (on {where(fastest)}); raise it, lower target_concurrency or use fp8 weights",
    )


def where(fit: Fit) -> str:
    inst = fit.instance
    nodes = f"{fit.nodes}{TIMES} " if fit.nodes > 1 else ""
    return f"{nodes}{inst.instance_type}, TP{fit.tp} PP{fit.pp}"


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
    if r.max_itl_ms is not None and fit.itl_ms > r.max_itl_ms:
        out.append(
            PlanWarning(WARN_ITL, f"inter-token latency estimate {fit.itl_ms} ms exceeds max_itl_ms {r.max_itl_ms:g}")
        )
    return out


def remedies(ctx: Context, bigger: bool) -> str:
    steps = []
    if ctx.fmt == "bf16":
        steps.append("weight_format fp8" + (" or awq-int4" if ctx.spec.awq_checkpoint else ""))
    elif ctx.fmt == "fp8" and ctx.spec.awq_checkpoint and ctx.spec.quantization is None:
        steps.append("weight_format awq-int4")
    if ctx.request.kv_cache_dtype == "auto":
        steps.append("kv_cache_dtype fp8")
    steps.append("a shorter max_model_len")
    if bigger:
        steps.append("a bigger instance")
    else:
        steps.append("a larger max_nodes_per_replica")
    return "use " + ", ".join(steps[:-1]) + " or " + steps[-1]


def no_fit_on(
    ctx: Context, inst: InstanceType, single: list[tuple[int, int, int]], multi: list[tuple[int, int, int]]
) -> ConfigError:
    spec, r = ctx.spec, ctx.request
    fits = [evaluate(ctx, inst, *s) for s in single + multi]
    memory_fits = [f for f in fits if f.fits]
    if memory_fits and not any(f.nvme_ok for f in memory_fits):
        return fail(
            "workload.weights_source",
            r.weights_source,
            f"the {ctx.checkpoint_bytes / 1e9:.1f} GB checkpoint (plus 10 % headroom) does not fit the "
            f"{inst.local_nvme_gb} GB instance store of {inst.instance_type}; use s3 or ebs",
        )
    if memory_fits:
        worst = memory_fits[0]
        return fail(
            "workload.accelerator",
            inst.instance_type,
            f"a pod's share of its host memory ({worst.pod.memory_mib} MiB) is below the "
            f"{MIN_POD_MEMORY_MIB + MIN_POD_MEMORY_PER_GPU_MIB * worst.gpus_per_pod} MiB vLLM needs; "
            "choose a larger size of the family",
        )
    if r.fixed_shape:
        return shape_does_not_fit(ctx, fits)
    nodes = max([s[2] for s in single + multi])
    span = f"{nodes} node{'s' if nodes > 1 else ''}"
    suggestion = ""
    try:
        alternative = cheapest(ctx)
        suggestion = f" such as {alternative.instance_type}"
    except ConfigError:
        pass
    return fail(
        "workload.accelerator",
        inst.instance_type,
        f"{spec.id} at {ctx.fmt} ({ctx.weight_bytes / 1e9:.1f} GB of weights, "
        f"{ctx.kv_bytes_per_token // 1024} KiB of KV cache per token) does not fit max_model_len {ctx.max_len} "
        f"on {span} of {inst.accelerators}{TIMES} {inst.accelerator_name} "
        f"({inst.accelerator_memory_gib:.1f} GiB each); "
        f"{remedies(ctx, bigger=True)}{suggestion}",
    )


def build(ctx: Context, fit: Fit, warnings: tuple[PlanWarning, ...]) -> Plan:
    r, spec, inst = ctx.request, ctx.spec, fit.instance
    max_num_seqs = r.max_num_seqs if r.max_num_seqs is not None else max(1, min(r.target_concurrency, fit.typical))
    cold = estimate_cold_start(ctx, fit)
    paths = cold_start_paths(ctx, fit)
    extra = list(warnings)
    if fit.nodes > 1 and not inst.efa:
        extra.append(
            PlanWarning(WARN_NO_EFA, f"{inst.instance_type} has no EFA: pipeline stages exchange activations over TCP")
        )
    if inst.on_demand_usd_per_hour is None:
        extra.append(PlanWarning(WARN_NO_PRICE, f"{inst.instance_type}: {inst.note or 'no on-demand price'}"))
    return Plan(
        request=r,
        model=spec,
        served_model_name=spec.id,
        checkpoint=ctx.checkpoint,
        weight_format=ctx.fmt,
        kv_cache_dtype=r.kv_cache_dtype,
        max_model_len=ctx.max_len,
        gpu_memory_utilization=r.gpu_memory_utilization,
        instance=inst,
        tensor_parallel_size=fit.tp,
        pipeline_parallel_size=fit.pp,
        nodes_per_replica=fit.nodes,
        replicas_per_node=fit.replicas_per_node,
        gpus_per_pod=fit.gpus_per_pod,
        weight_bytes=ctx.weight_bytes,
        checkpoint_bytes=ctx.checkpoint_bytes,
        weight_bytes_per_gpu=fit.weight_bytes_per_gpu,
        kv_bytes_per_token=ctx.kv_bytes_per_token,
        kv_bytes_per_token_per_gpu=fit.kv_bytes_per_token_per_gpu,
        gpu_memory_bytes=fit.gpu_memory_bytes,
        reserve_bytes_per_gpu=fit.reserve_bytes_per_gpu,
        usable_bytes_per_gpu=fit.usable_bytes_per_gpu,
        kv_cache_bytes_per_gpu=fit.kv_cache_bytes_per_gpu,
        kv_cache_tokens=fit.kv_cache_tokens,
        max_concurrency_full_context=fit.full_context,
        max_concurrency_typical=fit.typical,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=fit.max_num_batched_tokens,
        itl_estimate_ms=fit.itl_ms,
        cost_per_replica_hour=None if fit.cost is None else round(fit.cost, 4),
        cold_start=cold,
        cold_start_paths=paths,
        pod_resources=fit.pod,
        assumptions=tuple(plan_assumptions(ctx, fit)),
        warnings=tuple(extra),
    )
