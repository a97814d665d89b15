"""GPU memory per worker as vLLM accounts it: the budget, the runtime reserve and the activation peak, and the
scheduler batch that sizes the peak."""

from __future__ import annotations

from llm_eks.catalog.accelerators import InstanceType

GIB = 1024**3

# Runtime memory vLLM needs besides weights and KV cache, per GPU: CUDA context, cuBLAS workspace, NCCL buffers and
# the CUDA-graph pool (a fixed amount), plus 1 % of the device because the driver reports ~1 % less than EC2's
# GpuInfo figure on HBM parts, plus the activation peak of vLLM's profiling run (below).
RESERVE_FIXED_BYTES = int(1.5 * GIB)

RESERVE_FRACTION = 0.01

# Activation peak of one forward pass over max_num_batched_tokens tokens: ~4 hidden-size bf16 buffers (residual,
# norm output, attention in/out) and ~3 intermediate-size bf16 buffers of this GPU's MLP shard, plus fp32 logits
# (twice, for sampling) for every scheduled sequence. Matches vLLM's reported ~1.2 GiB peak for Llama 3.1 8B at 8192.
ACTIVATION_HIDDEN_BUFFERS = 4

ACTIVATION_MLP_BUFFERS = 3

# vLLM's paged KV cache is handed out in blocks of 16 tokens (the CUDA default block size).
KV_BLOCK_TOKENS = 16


def batched_tokens(inst: InstanceType, target: int) -> int:
    # vLLM's own default for the OpenAI server (EngineArgs.get_batch_defaults): 8192 on GPUs with >= 70 GiB that are
    # not A100s (larger chunks cost A100 throughput, vLLM PR #17885), 2048 elsewhere. Set explicitly so the
    # activation reserve above matches what runs; never below max_num_seqs (vLLM requires it).
    big = inst.accelerator_memory_gib >= 70 and not inst.accelerator_name.startswith("A100")
    return max(8192 if big else 2048, target)
