"""Tensor-parallel sizes vLLM accepts for a model: a leaf module, so the request's validation and the search share it
without an import circle."""

from __future__ import annotations

from llm_eks.catalog.models import ModelSpec

# Tensor-parallel sizes tried: powers of two (node GPU counts are powers of two, and NCCL/custom all-reduce are
# tuned for them).
TP_SIZES = (1, 2, 4, 8, 16)


def valid_tensor_parallel_sizes(spec: ModelSpec, max_size: int) -> tuple[int, ...]:
    """Tensor-parallel sizes vLLM accepts for this model, up to `max_size` (the GPUs of one node).

    vLLM's rule (ModelConfig.verify_with_parallel_config and QKVParallelLinear): attention heads must be divisible
    by TP; KV heads are split when TP <= KV heads (so KV heads must be divisible by TP) and replicated when
    TP > KV heads (so TP must be a multiple of KV heads). The MLP's intermediate size must split evenly too, and
    so must each expert's width (fused MoE shards every expert across TP ranks when expert parallelism is off,
    vLLM's default).
    """
    sizes = []
    for tp in TP_SIZES:
        if tp > max_size or spec.attention_heads % tp:
            continue
        kv_ok = spec.kv_heads % tp == 0 if tp <= spec.kv_heads else tp % spec.kv_heads == 0
        if kv_ok and spec.intermediate_size % tp == 0 and spec.expert_width % tp == 0:
            sizes.append(tp)
    return tuple(sizes)


def attention_tensor_parallel_sizes(spec: ModelSpec, max_size: int) -> tuple[int, ...]:
    """Tensor-parallel sizes vLLM accepts under expert parallelism, up to `max_size`: the attention heads, KV heads
    and dense MLP must split as above, but not the experts, which each GPU holds whole
    (FusedMoEParallelConfig.make: tp_size 1 inside the MoE layer once use_ep)."""
    sizes = []
    for tp in TP_SIZES:
        if tp > max_size or spec.attention_heads % tp:
            continue
        kv_ok = spec.kv_heads % tp == 0 if tp <= spec.kv_heads else tp % spec.kv_heads == 0
        if kv_ok and spec.intermediate_size % tp == 0:
            sizes.append(tp)
    return tuple(sizes)
