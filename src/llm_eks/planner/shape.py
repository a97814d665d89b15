"""Shapes the request fixes (`tensor_parallel_size`, `pipeline_parallel_size`, as `vllm serve` takes them): the
one-line error, with its numbers, when that shape cannot work (parallelism.requested_shapes lists what to try)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_eks.catalog.accelerators import InstanceType
from llm_eks.error_codes import E209
from llm_eks.errors import ConfigError, fail
from llm_eks.planner.memory import GIB

if TYPE_CHECKING:
    from llm_eks.planner.sizing import Context, Fit

# The multiplication sign of "TP2 x PP2" (result.TIMES; result imports the request module this one builds on).
TIMES = "\N{MULTIPLICATION SIGN}"


def named_size(ctx: Context) -> tuple[str, int]:
    """The field an error about the fixed shape names: the tensor parallel size when given, else the pipeline one."""
    r = ctx.request
    if r.tensor_parallel_size is not None:
        return "workload.tensor_parallel_size", r.tensor_parallel_size
    assert r.pipeline_parallel_size is not None
    return "workload.pipeline_parallel_size", r.pipeline_parallel_size


def fixed_sizes_text(ctx: Context) -> str:
    r = ctx.request
    parts = [f"TP{r.tensor_parallel_size}" if r.tensor_parallel_size is not None else "",
             f"PP{r.pipeline_parallel_size}" if r.pipeline_parallel_size is not None else ""]  # fmt: skip
    return f" {TIMES} ".join(p for p in parts if p)


def not_on_instance(ctx: Context, inst: InstanceType) -> ConfigError:
    """No split keeping the fixed sizes fits one node of `inst` or whole nodes up to max_nodes_per_replica."""
    path, value = named_size(ctx)
    return fail(
        E209,
        path,
        value,
        f"no split with {fixed_sizes_text(ctx)} fits one {inst.instance_type} node ({gpus_text(inst.accelerators)}) or "
        f"whole nodes up to max_nodes_per_replica ({ctx.request.max_nodes_per_replica})",
    )


def room_per_gpu(ctx: Context, fit: Fit) -> int:
    """Bytes per GPU left after the weights and one max_model_len sequence (negative: short by that much)."""
    return fit.usable_bytes_per_gpu - fit.weight_bytes_per_gpu - fit.request_kv_bytes_per_gpu


def gpus_text(n: int) -> str:
    return f"{n} GPU{'s' if n > 1 else ''}"


def memory_shortfall(ctx: Context, fit: Fit) -> str:
    """Why `fit` holds no max_model_len sequence, in GiB per GPU."""
    usable = fit.usable_bytes_per_gpu / GIB
    weights = fit.weight_bytes_per_gpu / GIB
    need = fit.request_kv_bytes_per_gpu / GIB
    head = (
        f"each GPU has {usable:.1f} GiB for weights and KV cache (gpu_memory_utilization "
        f"{ctx.request.gpu_memory_utilization:g} less what vLLM deducts besides weights)"
    )
    if weights >= usable:
        return f"{head} but its share of the weights alone is {weights:.1f} GiB"
    return (
        f"{head}; its {weights:.1f} GiB of weights leave {usable - weights:.2f} GiB, and one {ctx.max_len}-token "
        f"sequence needs {need:.2f} GiB of KV cache"
    )


def shape_does_not_fit(ctx: Context, fits: list[Fit]) -> ConfigError:
    """The fixed shape fits no GPU memory: the numbers of the split that came closest (most room per GPU)."""
    path, value = named_size(ctx)
    spec = ctx.spec
    best = max(fits, key=lambda f: room_per_gpu(ctx, f))
    inst = best.instance
    nodes = f"{best.nodes}{TIMES} " if best.nodes > 1 else ""
    return fail(
        E209,
        path,
        value,
        f"{spec.id} at {ctx.fmt} does not fit max_model_len {ctx.max_len} with TP{best.tp} {TIMES} PP{best.pp} on "
        f"{nodes}{inst.instance_type} ({inst.accelerator_memory_gib:.1f} GiB {inst.accelerator_name}): "
        f"{memory_shortfall(ctx, best)}; split wider, quantize (weight_format, kv_cache_dtype) or shorten "
        "max_model_len",
    )


def expert_parallel_field(ctx: Context) -> tuple[str, object]:
    """The field an error about a fixed DP x EP layout names: data_parallel_size when given, else
    enable_expert_parallel."""
    r = ctx.request
    if r.data_parallel_size is not None:
        return "workload.data_parallel_size", r.data_parallel_size
    return "workload.enable_expert_parallel", r.enable_expert_parallel


def expert_parallel_not_on(ctx: Context, inst: InstanceType) -> ConfigError:
    """No DP x EP layout the request allows fits one node of `inst` or whole nodes."""
    path, value = expert_parallel_field(ctx)
    r = ctx.request
    tp = f" with TP{r.tensor_parallel_size}" if r.tensor_parallel_size is not None else ""
    return fail(
        E209,
        path,
        value,
        f"no DP x EP layout{tp} fits one {inst.instance_type} node ({gpus_text(inst.accelerators)}) or whole nodes "
        f"up to max_nodes_per_replica ({r.max_nodes_per_replica})",
    )


def expert_parallel_does_not_fit(ctx: Context, inst: InstanceType, shapes: list[tuple[int, int, int]]) -> ConfigError:
    """The DP x EP layouts the request allows fit no GPU memory: the numbers of the one that came closest."""
    from llm_eks.planner.expert_parallel import evaluate_expert_parallel

    path, value = expert_parallel_field(ctx)
    fits = [evaluate_expert_parallel(ctx, inst, *s) for s in shapes]
    best = max(fits, key=lambda f: room_per_gpu(ctx, f))
    nodes = f"{best.nodes}{TIMES} " if best.nodes > 1 else ""
    layout = f"DP{best.dp} {TIMES} TP{best.tp} (EP{best.dp * best.tp})"
    if best.fits:
        why = "it fits, but not the host memory or instance store a pod needs there"
    else:
        why = memory_shortfall(ctx, best)
    return fail(
        E209,
        path,
        value,
        f"{ctx.spec.id} at {ctx.fmt} does not fit max_model_len {ctx.max_len} with {layout} on {nodes}"
        f"{inst.instance_type} ({inst.accelerator_memory_gib:.1f} GiB {inst.accelerator_name}): {why}; use more "
        "nodes, quantize (weight_format, kv_cache_dtype) or shorten max_model_len",
    )
