"""Tensor and pipeline parallel shapes vLLM accepts for a model on an instance type."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_eks.catalog.accelerators import InstanceType
from llm_eks.planner.tensor_split import TP_SIZES, valid_tensor_parallel_sizes

if TYPE_CHECKING:
    from llm_eks.planner.sizing import Context

Shape = tuple[int, int, int]

__all__ = ["TP_SIZES", "Shape", "candidate_shapes", "requested_shapes", "valid_tensor_parallel_sizes"]


def candidate_shapes(ctx: Context, inst: InstanceType) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    """(tp, pp, nodes) to try on `inst`: one-node shapes (smallest first), then multi-node ones. Only the sizes the
    request fixes, when it does (tensor_parallel_size, pipeline_parallel_size)."""
    if ctx.request.fixed_shape:
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


def requested_shapes(ctx: Context, inst: InstanceType) -> tuple[list[Shape], list[Shape]]:
    """(tp, pp, nodes) on `inst` that keep the request's fixed sizes, the planner choosing the other one: one-node
    shapes (fewest GPUs first), then multi-node ones. A split that needs more than one node spans whole nodes."""
    spec, r, n = ctx.spec, ctx.request, inst.accelerators
    tps = (r.tensor_parallel_size,) if r.tensor_parallel_size is not None else valid_tensor_parallel_sizes(spec, n)
    single: list[Shape] = []
    multi: list[Shape] = []
    for tp in tps:
        if tp > n:  # tensor parallelism stays inside a node
            continue
        if r.pipeline_parallel_size is not None:
            pps: tuple[int, ...] = (r.pipeline_parallel_size,)
        else:
            pps = tuple(2**i for i in range(spec.layers.bit_length()) if 2**i <= spec.layers)
        for pp in pps:
            gpus = tp * pp
            if gpus <= n:
                single.append((tp, pp, 1))
            elif gpus % n == 0 and gpus // n <= r.max_nodes_per_replica:
                multi.append((tp, pp, gpus // n))
    single.sort(key=lambda s: (s[0] * s[1], s[1]))
    multi.sort(key=lambda s: (s[2], s[1]))
    return single, multi
