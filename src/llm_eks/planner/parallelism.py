"""Tensor and pipeline parallel shapes vLLM accepts for a model on an instance type, and the data-parallel x
expert-parallel layouts to try for a MoE model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_eks.catalog.accelerators import InstanceType
from llm_eks.planner.latency import link
from llm_eks.planner.tensor_split import TP_SIZES, attention_tensor_parallel_sizes, valid_tensor_parallel_sizes

if TYPE_CHECKING:
    from llm_eks.planner.sizing import Context

Shape = tuple[int, int, int]

__all__ = [
    "TP_SIZES",
    "Shape",
    "candidate_shapes",
    "expert_parallel_shapes",
    "requested_shapes",
    "valid_tensor_parallel_sizes",
]


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


def expert_parallel_shapes(ctx: Context, inst: InstanceType) -> tuple[list[Shape], list[Shape]]:
    """(tp, dp, nodes) DP x EP layouts to try on `inst`: one-node ones, then multi-node ones; none for a dense
    model, or when the request rules expert parallelism out (enable_expert_parallel false, pipeline stages, LoRA).

    Left to the planner (enable_expert_parallel and data_parallel_size not given), a layout fills whole nodes, has
    no more EP ranks than routed experts, and is tried only on NVSwitch instance types: its collectives then ride
    NVLink inside a node (measured figures, hardware.py), where PCIe-only GPUs have none for all-gather or
    reduce-scatter; and not at all when the request fixes the TP or PP size alone. A request that asks for expert
    parallelism gets it on any instance type."""
    r, spec, n = ctx.request, ctx.spec, inst.accelerators
    if _expert_parallel_ruled_out(ctx, inst):
        return [], []
    tps = (r.tensor_parallel_size,) if r.tensor_parallel_size is not None else attention_tensor_parallel_sizes(spec, n)
    single: list[Shape] = []
    multi: list[Shape] = []
    for nodes in range(1, r.max_nodes_per_replica + 1):
        for tp in tps:
            dp = _data_parallel_size(ctx, n, tp, nodes)
            if dp is not None and tp * dp > 1:
                (single if nodes == 1 else multi).append((tp, dp, nodes))
    return single, multi


def _expert_parallel_ruled_out(ctx: Context, inst: InstanceType) -> bool:
    """No DP x EP layouts for `ctx` on `inst` (expert_parallel_shapes says why)."""
    r = ctx.request
    if not ctx.spec.is_moe or r.enable_expert_parallel is False or r.lora is not None:
        return True
    if (r.pipeline_parallel_size or 1) > 1:
        return True
    # A request that fixes TP or PP alone reproduces a `vllm serve` without data or expert parallelism.
    return not r.expert_parallel_only and (r.fixed_shape or link(inst) != "nvlink")


def _data_parallel_size(ctx: Context, n: int, tp: int, nodes: int) -> int | None:
    """The data-parallel size of a layout of `tp` GPUs per rank over `nodes` nodes of `n` GPUs: the request's (if it
    fits the nodes), else the one that fills them (if it has no more EP ranks than routed experts); None: neither."""
    r = ctx.request
    if tp > n:  # tensor parallelism stays inside a node
        return None
    if r.data_parallel_size is not None:
        dp = r.data_parallel_size
        return dp if (tp * dp <= n if nodes == 1 else tp * dp == nodes * n) else None
    dp = nodes * n // tp
    return dp if dp * tp <= ctx.spec.num_experts else None
