"""One candidate deployment (instance, TP, PP, nodes) evaluated against a request: memory, KV cache, latency, pods."""

from __future__ import annotations

import math
from dataclasses import dataclass

from llm_eks.catalog.accelerators import InstanceType
from llm_eks.infra.plan.latency import ACHIEVABLE_BANDWIDTH, ALL_REDUCE_US_NVLINK, ALL_REDUCE_US_PCIE, PIPELINE_HOP_MS
from llm_eks.infra.plan.memory import (
    ACTIVATION_HIDDEN_BUFFERS,
    ACTIVATION_MLP_BUFFERS,
    KV_BLOCK_TOKENS,
    RESERVE_FIXED_BYTES,
    RESERVE_FRACTION,
    batched_tokens,
)
from llm_eks.infra.plan.pods import (
    DAEMONSET_CPU_MILLICORES,
    DAEMONSET_MEMORY_MIB,
    MIN_POD_MEMORY_MIB,
    MIN_POD_MEMORY_PER_GPU_MIB,
)
from llm_eks.infra.plan.request import PlanRequest
from llm_eks.infra.plan.result import PodResources

# AWQ int4 with group size 128 (the AutoAWQ default): 4-bit weights plus one fp16 scale and one packed 4-bit zero per
# group of 128 weights = 0.5 + 2.5/128 bytes per quantized weight. Embeddings and the output projection stay 16-bit.
AWQ_GROUP_SIZE = 128

AWQ_BYTES_PER_PARAM = 0.5 + 2.5 / AWQ_GROUP_SIZE


class Context:
    """The request with everything that does not depend on the instance worked out once."""

    def __init__(self, request: PlanRequest) -> None:
        self.request = request
        self.spec = spec = request.spec
        self.fmt = request.resolved_weight_format
        self.max_len = request.resolved_max_model_len
        self.typical = request.typical_tokens
        self.kv_dtype_bytes = 1 if request.kv_cache_dtype == "fp8" else 2
        self.bytes_per_param = {"bf16": 2.0, "fp8": 1.0, "awq-int4": AWQ_BYTES_PER_PARAM}[self.fmt]
        # Embeddings and the output projection stay 16-bit in every format (vLLM quantizes Linear layers only).
        quantized = spec.parameters - spec.embedding_parameters
        self.weight_bytes = math.ceil(spec.embedding_parameters * 2 + quantized * self.bytes_per_param)
        self.kv_bytes_per_token = 2 * spec.layers * spec.kv_heads * spec.head_dim * self.kv_dtype_bytes
        native_bytes = 4 if spec.native_dtype == "float32" else 2
        if self.fmt == "awq-int4" or spec.quantization == "fp8":
            self.checkpoint_bytes = self.weight_bytes
        else:
            self.checkpoint_bytes = spec.parameters * native_bytes
        if self.fmt == "awq-int4" and spec.quantization is None:
            self.checkpoint = spec.awq_checkpoint or spec.id
        else:
            self.checkpoint = spec.id


@dataclass(frozen=True)
class Fit:
    """One (instance, TP, PP, nodes) evaluated against the request."""

    instance: InstanceType
    tp: int
    pp: int
    nodes: int
    weight_bytes_per_gpu: int
    kv_bytes_per_token_per_gpu: int
    gpu_memory_bytes: int
    reserve_bytes_per_gpu: int
    usable_bytes_per_gpu: int
    kv_cache_bytes_per_gpu: int
    kv_cache_tokens: int
    full_context: int
    typical: int
    max_num_batched_tokens: int
    itl_ms: float
    replicas_per_node: int
    gpus_per_pod: int
    pod: PodResources
    host_memory_ok: bool
    nvme_ok: bool

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def fits(self) -> bool:
        return self.kv_cache_tokens >= 1 and self.full_context >= 1

    @property
    def cost(self) -> float | None:
        price = self.instance.on_demand_usd_per_hour
        return None if price is None else price * self.nodes / self.replicas_per_node


def evaluate(ctx: Context, inst: InstanceType, tp: int, pp: int, nodes: int) -> Fit:
    spec, r = ctx.spec, ctx.request
    stage_layers = math.ceil(spec.layers / pp)
    # Heaviest stage: its share of layers plus the embedding (first stage) or output projection (last stage);
    # a single stage holds both.
    stage_embeddings = spec.embedding_parameters if pp == 1 else spec.vocab_size * spec.hidden_size
    stage_bytes = stage_layers * spec.layer_parameters * ctx.bytes_per_param + stage_embeddings * 2
    weight_per_gpu = math.ceil(stage_bytes / tp)
    kv_heads_per_gpu = max(1, spec.kv_heads // tp)  # replicated, one per GPU, when TP > KV heads
    kv_per_token_gpu = 2 * stage_layers * kv_heads_per_gpu * spec.head_dim * ctx.kv_dtype_bytes

    gpu_bytes = inst.accelerator_memory_bytes
    # vLLM's profiling run schedules max_num_seqs sequences: an explicit one, else the target (what the plan sets).
    batched = batched_tokens(inst, r.scheduled_sequences)
    experts = spec.experts_per_token if spec.is_moe else 1
    activation = (
        batched
        * (
            ACTIVATION_HIDDEN_BUFFERS * spec.hidden_size * 2
            + ACTIVATION_MLP_BUFFERS * 2 * spec.intermediate_size * experts // tp
        )
        + r.scheduled_sequences * spec.vocab_size * 4 * 2
    )
    reserve = RESERVE_FIXED_BYTES + int(RESERVE_FRACTION * gpu_bytes) + activation
    usable = int(gpu_bytes * r.gpu_memory_utilization) - reserve
    kv_bytes = usable - weight_per_gpu
    blocks = max(kv_bytes, 0) // (kv_per_token_gpu * KV_BLOCK_TOKENS)
    kv_tokens = blocks * KV_BLOCK_TOKENS
    kv_used = kv_tokens * kv_per_token_gpu

    # Decode-step estimate at the target batch: weights + KV of running sequences (halfway through their output).
    context = r.typical_input_tokens + r.typical_output_tokens / 2
    step_bytes = weight_per_gpu + r.target_concurrency * context * kv_per_token_gpu
    stage_ms = step_bytes / (inst.memory_bandwidth_gbps * 1e9 * ACHIEVABLE_BANDWIDTH) * 1000
    if tp > 1:
        hop_us = ALL_REDUCE_US_NVLINK if "NVSwitch" in inst.interconnect else ALL_REDUCE_US_PCIE
        stage_ms += 2 * stage_layers * hop_us / 1000
    itl_ms = round(stage_ms * pp + (pp - 1) * PIPELINE_HOP_MS, 1)

    gpus_per_node = tp * pp if nodes == 1 else inst.accelerators
    replicas_per_node = inst.accelerators // (tp * pp) if nodes == 1 else 1
    cpu = (inst.allocatable_cpu - DAEMONSET_CPU_MILLICORES) // replicas_per_node // 10 * 10
    memory = (inst.allocatable_memory - DAEMONSET_MEMORY_MIB) // replicas_per_node
    host_ok = memory >= MIN_POD_MEMORY_MIB + MIN_POD_MEMORY_PER_GPU_MIB * gpus_per_node
    nvme_ok = r.weights_source != "nvme" or inst.local_nvme_gb * 1e9 >= ctx.checkpoint_bytes * 1.1
    return Fit(
        instance=inst,
        tp=tp,
        pp=pp,
        nodes=nodes,
        weight_bytes_per_gpu=weight_per_gpu,
        kv_bytes_per_token_per_gpu=kv_per_token_gpu,
        gpu_memory_bytes=gpu_bytes,
        reserve_bytes_per_gpu=reserve,
        usable_bytes_per_gpu=usable,
        kv_cache_bytes_per_gpu=kv_used,
        kv_cache_tokens=kv_tokens,
        full_context=kv_tokens // ctx.max_len,
        typical=kv_tokens // ctx.typical,
        max_num_batched_tokens=batched,
        itl_ms=itl_ms,
        replicas_per_node=replicas_per_node,
        gpus_per_pod=gpus_per_node,
        pod=PodResources(cpu_millicores=cpu, memory_mib=memory),
        host_memory_ok=host_ok,
        nvme_ok=nvme_ok,
    )
