"""The assumptions behind a plan, each with its number, as `llm-eks plan` prints them."""

from __future__ import annotations

from llm_eks.catalog.accelerators import PRICE_REGION, PRICES_READ
from llm_eks.infra.plan.cold_start import (
    IMAGE_COMPRESSED_BYTES,
    IMAGE_PULL_BYTES_PER_S,
    NODE_PROVISION_S,
    WARMUP_BASE_S,
    WARMUP_PER_EXTRA_NODE_S,
    WARMUP_PER_GPU_DOUBLING_S,
    weights_assumption,
)
from llm_eks.infra.plan.latency import ACHIEVABLE_BANDWIDTH
from llm_eks.infra.plan.memory import GIB, KV_BLOCK_TOKENS, RESERVE_FIXED_BYTES, RESERVE_FRACTION
from llm_eks.infra.plan.pods import DAEMONSET_CPU_MILLICORES, DAEMONSET_MEMORY_MIB
from llm_eks.infra.plan.sizing import AWQ_BYTES_PER_PARAM, AWQ_GROUP_SIZE, Context, Fit


def plan_assumptions(ctx: Context, fit: Fit) -> list[str]:
    inst, r = fit.instance, ctx.request
    gib = fit.reserve_bytes_per_gpu / GIB
    out = [
        f"weights: {ctx.spec.parameters:,} parameters at {ctx.fmt}; embeddings and output projection stay 16-bit"
        + (
            f"; AWQ int4 = 0.5 B + group-{AWQ_GROUP_SIZE} fp16 scale and 4-bit zero = {AWQ_BYTES_PER_PARAM:.4f} B"
            if ctx.fmt == "awq-int4"
            else ""
        ),
        f"KV cache: 2 x {ctx.spec.layers} layers x {ctx.spec.kv_heads} KV heads x {ctx.spec.head_dim} x "
        f"{ctx.kv_dtype_bytes} B = {ctx.kv_bytes_per_token:,} B per token, blocks of {KV_BLOCK_TOKENS} tokens",
        f"GPU memory: {inst.accelerator_memory_mib:,} MiB per {inst.accelerator_name} as EC2 reports it",
        f"runtime reserve per GPU: {RESERVE_FIXED_BYTES / GIB:.1f} GiB (CUDA context, cuBLAS, NCCL, CUDA graphs) + "
        f"{RESERVE_FRACTION:.0%} of GPU memory + activation peak for {fit.max_num_batched_tokens} batched tokens "
        f"= {gib:.2f} GiB",
        f"max_num_batched_tokens {fit.max_num_batched_tokens}: vLLM's OpenAI-server default for this GPU, "
        "made explicit",
        f"max_num_seqs = target_concurrency ({r.target_concurrency}), capped by what fits at the typical size"
        if r.max_num_seqs is None
        else f"max_num_seqs {r.max_num_seqs} as given: vLLM's profiling run (the activation peak above) uses it",
        f"pod requests: node allocatable less {DAEMONSET_CPU_MILLICORES}m CPU and {DAEMONSET_MEMORY_MIB} MiB for "
        f"DaemonSets, split over {fit.replicas_per_node} pod(s) per node",
        f"image pull: {IMAGE_COMPRESSED_BYTES / 1e9:.0f} GB compressed vLLM image at "
        f"{IMAGE_PULL_BYTES_PER_S / 1e6:.0f} MB/s",
        weights_assumption(r.weights_source),
        f"warm-up: {WARMUP_BASE_S} s (start-up, torch.compile with a cold cache, CUDA graphs) + "
        f"{WARMUP_PER_GPU_DOUBLING_S} s per doubling of GPUs + {WARMUP_PER_EXTRA_NODE_S} s per extra node",
        f"node provisioning: {NODE_PROVISION_S} s from Karpenter launch to a Ready GPU node",
        f"inter-token latency: weights + KV read per step at {ACHIEVABLE_BANDWIDTH:.0%} of "
        f"{inst.memory_bandwidth_gbps:g} GB/s, plus all-reduce and pipeline hops",
        f"price: on-demand {PRICE_REGION}, AWS Price List of {PRICES_READ}",
    ]
    if r.fixed_shape:
        fixed = [f"{name} {value}" for name, value in (("tensor_parallel_size", r.tensor_parallel_size),
                 ("pipeline_parallel_size", r.pipeline_parallel_size)) if value is not None]  # fmt: skip
        out.append(f"parallelism: {' and '.join(fixed)} as given; the planner chose the rest")
    if ctx.fmt == "fp8" and ctx.spec.quantization is None:
        out.append(
            "fp8: vLLM quantizes the 16-bit checkpoint layer by layer while loading (vllm#31914, so the 16-bit "
            "model never sits whole in GPU memory); start-up reads the 16-bit files"
        )
    return out
