"""One Neuron candidate (instance type, chips per pod) evaluated against a request: weights and KV cache per core in
the compiled shape, the batch that fits, host memory, pods and latency.

Memory per core. Every core holds its share of the weights (query and output projections over the padded query
heads, key and value projections over the replicated KV heads, the MLP and the vocabulary split over TP) and the KV
cache of the compiled shape: NxD Inference allocates the contiguous layout, max_num_seqs x max_model_len tokens,
vllm-neuron the blocks `--num-gpu-blocks-override` names, baked into the compiled graphs either way. Both must fit
gpu_memory_utilization of the core's HBM (vLLM's budget: vllm-neuron applies it, vllm-neuron/docs/design/vllm/
determine_available_memory_design.md; NxD Inference does not apply it, and what its compiled graphs keep for
activations and I/O is not published, so the same share stands in for that reserve, an assumption). vllm-neuron
also caps the KV cache at 30 % of that budget by default (VLLM_NEURON_KV_GMU_BUDGET_CAP_FRACTION, the same page: a
larger KV allocation risks the compiler's NCC_EVRF009), which the planner keeps.

Host memory. NxD Inference loads and shards the whole checkpoint in host memory and the compile runs on the serving
instance type (the compile cache's writer Job). Compiling Llama-3.1-8B-Instruct (16.06 GB of bf16 weights) with NxD
Inference was killed for memory on a trn1.2xlarge with 32 GiB of host memory (aws-neuron/aws-neuron-sdk#1222, the
same report in aws-neuron/neuronx-distributed-inference#26): a pod must have more host memory than that ratio of
the checkpoint (2.14x). It is a floor read off one failure, not a measured requirement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from llm_eks.catalog.accelerators import InstanceType
from llm_eks.catalog.neuron import NeuronEngine
from llm_eks.planner.kv_cache import cdiv
from llm_eks.planner.latency import LatencyEstimate
from llm_eks.planner.neuron.latency import FITTED, NeuronStep, estimate
from llm_eks.planner.neuron.shape import CompiledShape, ShardedHeads, compiled_shape, sharded_heads
from llm_eks.planner.pods import PodResources
from llm_eks.planner.sizing import Context, pod_share

GIB = 1024**3
# vllm-neuron's KV cap: a fraction of gpu_memory_utilization x HBM (VLLM_NEURON_KV_GMU_BUDGET_CAP_FRACTION default).
VLLM_NEURON_KV_CAP_FRACTION = 0.30
# The failure the host memory floor is read off (module docstring): 32 GiB of host memory, Llama-3.1-8B's bf16 bytes.
FAILED_HOST_BYTES = 32 * GIB
FAILED_CHECKPOINT_BYTES = 8_030_261_248 * 2
HOST_BYTES_PER_CHECKPOINT_BYTE = FAILED_HOST_BYTES / FAILED_CHECKPOINT_BYTES
# Dense BF16 TFLOPS per chip (aws-neuron-sdk about-neuron/arch/neuron-hardware: inferentia2.rst and trainium.rst "190
# FP16/BF16/cFP8/TF32 TFLOPS", trainium2.rst "667 BF16/FP16/TF32 TFLOPS").
PEAK_BF16_TFLOPS_PER_CHIP = {"Inferentia2": 190.0, "Trainium": 190.0, "Trainium2": 667.0}


@dataclass(frozen=True)
class NeuronFit:
    """One (instance type, chips per pod) evaluated against the request."""

    instance: InstanceType
    engine: NeuronEngine
    chips: int
    heads: ShardedHeads
    weight_bytes_per_core: int
    kv_bytes_per_token_per_core: int
    memory_per_core_bytes: int
    usable_bytes_per_core: int
    # The KV cache the compiled shape allocates on each core, and vllm-neuron's cap on it (None on NxD Inference).
    kv_cache_bytes_per_core: int
    kv_cap_bytes_per_core: int | None
    shape: CompiledShape
    # Sequences of max_model_len one core's memory holds at most (0: not even one).
    max_sequences: int
    replicas_per_node: int
    pod: PodResources
    host_memory_needed_bytes: int
    latency: LatencyEstimate
    step: NeuronStep

    @property
    def tp(self) -> int:
        return self.chips * self.instance.cores_per_accelerator

    @property
    def fits(self) -> bool:
        """The compiled batch of max_model_len sequences fits beside the weights."""
        return 1 <= self.shape.max_num_seqs <= self.max_sequences

    @property
    def host_memory_ok(self) -> bool:
        return self.pod.memory_mib * 1024**2 > self.host_memory_needed_bytes

    @property
    def cost(self) -> float | None:
        price = self.instance.on_demand_usd_per_hour
        return None if price is None else price / self.replicas_per_node

    # What a plan reads off its candidate, under a GPU Fit's names (sizing.Fit): one pod of one tensor-parallel
    # group per replica, chips for GPUs and NeuronCores for the per-GPU figures; the compiled batch is both the
    # sequences that fit and those at the typical size.
    pp: ClassVar[int] = 1
    nodes: ClassVar[int] = 1
    dp: ClassVar[int] = 1
    dp_local: ClassVar[int] = 1
    expert_parallel: ClassVar[bool] = False
    kv_offload_gib: ClassVar[float | None] = None

    @property
    def gpus_per_pod(self) -> int:
        return self.chips

    @property
    def weight_bytes_per_gpu(self) -> int:
        return self.weight_bytes_per_core

    @property
    def kv_bytes_per_token_per_gpu(self) -> int:
        return self.kv_bytes_per_token_per_core

    @property
    def gpu_memory_bytes(self) -> int:
        return self.memory_per_core_bytes

    @property
    def usable_bytes_per_gpu(self) -> int:
        return self.usable_bytes_per_core

    @property
    def reserve_bytes_per_gpu(self) -> int:
        """The share gpu_memory_utilization leaves out."""
        return self.memory_per_core_bytes - self.usable_bytes_per_core

    @property
    def kv_cache_bytes_per_gpu(self) -> int:
        return self.kv_cache_bytes_per_core

    @property
    def kv_cache_tokens(self) -> int:
        return self.shape.max_num_seqs * self.shape.max_model_len

    @property
    def full_context(self) -> int:
        return self.shape.max_num_seqs

    @property
    def typical(self) -> int:
        return self.shape.max_num_seqs

    @property
    def max_num_batched_tokens(self) -> int:
        return self.shape.max_num_batched_tokens or self.shape.max_model_len


def weight_bytes_per_core(ctx: Context, heads: ShardedHeads) -> int:
    """The 16-bit weights one core holds: the checkpoint's over TP, plus the padded query heads' and replicated KV
    heads' projections."""
    spec = ctx.spec
    extra_heads = 2 * (heads.query_heads - spec.attention_heads) + 2 * (heads.kv_heads - spec.kv_heads)
    extra = spec.layers * spec.hidden_size * spec.head_dim * extra_heads * 2
    return math.ceil((ctx.weight_bytes + extra) / heads.tensor_parallel_size)


def kv_bytes_per_token_per_core(ctx: Context, heads: ShardedHeads) -> int:
    spec = ctx.spec
    return spec.layers * 2 * heads.kv_heads_per_core * spec.head_dim * 2


def max_sequences(engine: str, usable: int, weights: int, kv_per_token: int, max_len: int) -> int:
    """The most sequences of `max_len` tokens whose compiled KV fits beside the weights in `usable` bytes (and under
    vllm-neuron's cap)."""
    room = usable - weights
    if engine == "vllm-neuron":
        room = min(room, int(usable * VLLM_NEURON_KV_CAP_FRACTION))
    one = compiled_shape(engine, 1, max_len).kv_tokens * kv_per_token
    return max(room // one, 0) if one else 0


def step_for(
    ctx: Context,
    inst: InstanceType,
    heads: ShardedHeads,
    shape: CompiledShape,
    weights: int,
    kv_per_token: int,
    batch: int,
    input_tokens: int,
    output_tokens: int,
    served: bool = True,
) -> NeuronStep:
    """The latency model's view of a replica on `inst` running `batch` sequences in the compiled `shape`."""
    spec = ctx.spec
    tp = heads.tensor_parallel_size
    if shape.engine == "vllm-neuron":
        decode_batch = next((b for b in shape.num_seqs_buckets if b >= batch), shape.max_num_seqs)
        decode_buckets: tuple[int, ...] = (shape.max_model_len,)
    else:
        decode_batch = shape.max_num_seqs
        decode_buckets = shape.token_generation_buckets
    active = (spec.active_parameters or spec.parameters) - spec.vocab_size * spec.hidden_size
    return NeuronStep(
        neuron_core=inst.neuron_core or "NeuronCore-v2",
        layers=spec.layers,
        weight_bytes_per_core=weights,
        kv_bytes_per_token_per_core=kv_per_token,
        bandwidth_per_core_gbps=inst.memory_bandwidth_gbps / inst.cores_per_accelerator,
        peak_tflops_per_core=PEAK_BF16_TFLOPS_PER_CHIP[inst.accelerator_name] / inst.cores_per_accelerator,
        linear_flops_per_token_per_core=2 * active / tp,
        attention_flops_per_context_token=4 * heads.query_heads * spec.head_dim * spec.layers / tp,
        batch=batch,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        decode_batch=max(decode_batch, batch),
        decode_buckets=decode_buckets,
        prefill_budget=shape.max_num_batched_tokens if shape.engine == "vllm-neuron" else None,
        served=served,
    )


def evaluate(ctx: Context, inst: InstanceType, engine: NeuronEngine, chips: int, max_num_seqs: int | None) -> NeuronFit:
    """`inst` with pods of `chips` chips: the compiled batch is `max_num_seqs` when given, else the target
    concurrency capped by what fits (at least 1, so a candidate that fits nothing still reports its numbers)."""
    r = ctx.request
    tp = chips * inst.cores_per_accelerator
    heads = sharded_heads(ctx.spec, tp)
    weights = weight_bytes_per_core(ctx, heads)
    kv_per_token = kv_bytes_per_token_per_core(ctx, heads)
    per_core = inst.memory_per_core_bytes
    usable = int(per_core * r.gpu_memory_utilization)
    most = max_sequences(engine.name, usable, weights, kv_per_token, ctx.max_len)
    batch = max_num_seqs if max_num_seqs is not None else max(1, min(r.target_concurrency, most))
    shape = compiled_shape(engine.name, batch, ctx.max_len)
    _, replicas_per_node, pod, _, _ = pod_share(inst, chips, 1)
    live = min(r.target_concurrency, batch)
    step = step_for(
        ctx, inst, heads, shape, weights, kv_per_token, live, r.typical_input_tokens, r.typical_output_tokens
    )
    return NeuronFit(
        instance=inst,
        engine=engine,
        chips=chips,
        heads=heads,
        weight_bytes_per_core=weights,
        kv_bytes_per_token_per_core=kv_per_token,
        memory_per_core_bytes=per_core,
        usable_bytes_per_core=usable,
        kv_cache_bytes_per_core=shape.kv_tokens * kv_per_token,
        kv_cap_bytes_per_core=int(usable * VLLM_NEURON_KV_CAP_FRACTION) if engine.name == "vllm-neuron" else None,
        shape=shape,
        max_sequences=most,
        replicas_per_node=replicas_per_node,
        pod=pod,
        host_memory_needed_bytes=math.ceil(ctx.checkpoint_bytes * HOST_BYTES_PER_CHECKPOINT_BYTE),
        latency=estimate(step, FITTED).rounded(),
        step=step,
    )


def blocks_text(shape: CompiledShape) -> str:
    return f"{shape.num_blocks} x {shape.block_size}"


def largest_fitting_length(ctx: Context, inst: InstanceType, engine: NeuronEngine, chips: int) -> int:
    """The longest max_model_len (a multiple of 128) one sequence of which fits `chips` chips; 0: none does."""
    heads = sharded_heads(ctx.spec, chips * inst.cores_per_accelerator)
    usable = int(inst.memory_per_core_bytes * ctx.request.gpu_memory_utilization)
    weights = weight_bytes_per_core(ctx, heads)
    per_token = kv_bytes_per_token_per_core(ctx, heads)
    low, high = 0, cdiv(ctx.spec.max_position_embeddings, 128)
    while low < high:
        mid = (low + high + 1) // 2
        if max_sequences(engine.name, usable, weights, per_token, mid * 128) >= 1:
            low = mid
        else:
            high = mid - 1
    return low * 128
