"""Tensor and pipeline parallel shapes vLLM accepts for a model on an instance type."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_eks.catalog.accelerators import InstanceType
from llm_eks.catalog.models import ModelSpec

if TYPE_CHECKING:
    from llm_eks.infra.plan.sizing import Context

# Tensor-parallel sizes tried: powers of two (node GPU counts are powers of two, and NCCL/custom all-reduce are
# tuned for them).
TP_SIZES = (1, 2, 4, 8, 16)


def valid_tensor_parallel_sizes(spec: ModelSpec, max_size: int) -> tuple[int, ...]:
    """Tensor-parallel sizes vLLM accepts for this model, up to `max_size` (the GPUs of one node).

    vLLM's rule (ModelConfig.verify_with_parallel_config and QKVParallelLinear): attention heads must be divisible
    by TP; KV heads are split when TP <= KV heads (so KV heads must be divisible by TP) and replicated when
    TP > KV heads (so TP must be a multiple of KV heads). The MLP's intermediate size must split evenly too.
    """
    sizes = []
    for tp in TP_SIZES:
        if tp > max_size or spec.attention_heads % tp:
            continue
        kv_ok = spec.kv_heads % tp == 0 if tp <= spec.kv_heads else tp % spec.kv_heads == 0
        if kv_ok and spec.intermediate_size % tp == 0:
            sizes.append(tp)
    return tuple(sizes)


def candidate_shapes(ctx: Context, inst: InstanceType) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    """(tp, pp, nodes) to try on `inst`: one-node shapes (smallest first), then multi-node ones. Only the sizes the
    request fixes, when it does (tensor_parallel_size, pipeline_parallel_size)."""
    if ctx.request.fixed_shape:
        from llm_eks.infra.plan.shape import requested_shapes

        return requested_shapes(ctx, inst)
    spec = ctx.spec
    sizes = valid_tensor_parallel_sizes(spec, inst.accelerators)
    widest = sizes[-1]
    single = [(tp, 1, 1) for tp in sizes]
    # When the heads cap TP below the node's GPUs (e.g. 28 heads on 8 GPUs: TP <= 4), pipeline stages inside the
    # node use the rest.
    pp = 2
    while widest * pp <= inst.accelerators and pp <= spec.layers:
        single.append((widest, pp, 1))
        pp *= 2
    multi = []
    for nodes in range(2, ctx.request.max_nodes_per_replica + 1):
        pp = nodes * inst.accelerators // widest
        if pp <= spec.layers:
            multi.append((widest, pp, nodes))
    return single, multi
