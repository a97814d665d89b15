"""One candidate deployment (instance, TP, PP, nodes) evaluated against a request: weights, vLLM's memory budget
and KV cache (kv_cache, memory), latency, pods."""

from __future__ import annotations

import math
from dataclasses import dataclass

from llm_eks.catalog.accelerators import InstanceType
from llm_eks.catalog.formats import FORMATS, support
from llm_eks.catalog.models import ModelSpec
from llm_eks.planner.kv_cache import KvLayout, cdiv, kv_bytes_per_token_per_layer, kv_layout
from llm_eks.planner.kv_offload import host_mib, resolve_size
from llm_eks.planner.latency import (
    LatencyEstimate,
    StepShape,
    estimate,
    link,
    peak_tflops,
    pipeline_hop_us,
)
from llm_eks.planner.memory import Budget, batched_tokens, budget, lora_bytes, profile_peak_bytes
from llm_eks.planner.pods import DAEMONSET_CPU_MILLICORES, DAEMONSET_MEMORY_MIB, PodResources, shm_mib, vllm_host_mib
from llm_eks.planner.request import PlanRequest


class Context:
    """The request with everything that does not depend on the instance worked out once."""

    def __init__(self, request: PlanRequest, suggest: bool = True) -> None:
        self.request = request
        # Whether an error looks for the changes that would fit (planner/fixes.py); off while it looks.
        self.suggest = suggest
        self.spec = spec = request.spec
        self.fmt = request.resolved_weight_format
        self.max_len = request.resolved_max_model_len
        self.typical = request.typical_tokens
        self.kv_dtype_bytes = 1 if request.kv_cache_dtype == "fp8" else 2
        self.format = FORMATS[self.fmt]
        self.bytes_per_param = self.format.bytes_per_weight
        # vLLM quantizes Linear layers only: embeddings and the output projection stay 16-bit in every format, as
        # does a vision encoder (catalog/vision.py); MXFP4 checkpoints quantize only the routed experts.
        if self.format.quantized_layers == "moe-experts":
            quantized = spec.expert_parameters
        else:
            quantized = spec.parameters - spec.embedding_parameters - spec.vision_parameters
        self.weight_bytes = math.ceil((spec.parameters - quantized) * 2 + quantized * self.bytes_per_param)
        self.vision_bytes = spec.vision_parameters * 2
        # Bytes of one decoder layer, on average (what a pipeline stage holds per layer).
        decoder = self.weight_bytes - spec.embedding_parameters * 2 - spec.hidden_size * 2 - self.vision_bytes
        self.layer_bytes = decoder / spec.layers
        # Of which routed experts (read per step only where the batch routes).
        self.expert_layer_bytes = spec.expert_parameters * self.bytes_per_param / spec.layers
        self.kv_bytes_per_token = spec.layers * kv_bytes_per_token_per_layer(spec, 1, self.kv_dtype_bytes)
        native_bytes = 4 if spec.native_dtype == "float32" else 2
        if self.fmt == "awq-int4" or spec.quantization is not None:
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
    # The heaviest GPU's memory as vLLM accounts it (its weights include buffers allocated with them).
    memory: Budget
    kv_bytes_per_token_per_gpu: int
    # KV bytes one max_model_len request holds on this GPU (its blocks in every layer group).
    request_kv_bytes_per_gpu: int
    kv_cache_bytes_per_gpu: int
    kv_cache_tokens: int
    full_context: int
    typical: int
    max_num_batched_tokens: int
    # The latency estimates at target_concurrency (latency/model.py), and the step they come from.
    latency: LatencyEstimate
    step: StepShape
    replicas_per_node: int
    gpus_per_pod: int
    pod: PodResources
    host_memory_ok: bool
    nvme_ok: bool
    # Data-parallel ranks (each with `tp` GPUs and its own KV cache and batch) and whether the routed experts are
    # spread whole over all of their GPUs (vLLM --enable-expert-parallel); 1 and False for TP x PP.
    dp: int = 1
    expert_parallel: bool = False
    # Routed experts on the heaviest GPU under expert parallelism (0 for TP x PP).
    experts_per_gpu: int = 0
    # The CPU KV tier per engine (vLLM --kv-offloading-size, GiB); None: offload off.
    kv_offload_gib: float | None = None

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def weight_bytes_per_gpu(self) -> int:
        return self.memory.weights

    @property
    def gpu_memory_bytes(self) -> int:
        return self.memory.total

    @property
    def reserve_bytes_per_gpu(self) -> int:
        return self.memory.reserve

    @property
    def lora_bytes_per_gpu(self) -> int:
        """Of the reserve: LoRA adapter buffers (0 without adapters)."""
        return self.memory.lora

    @property
    def usable_bytes_per_gpu(self) -> int:
        return self.memory.usable

    @property
    def itl_ms(self) -> float:
        return self.latency.itl_ms

    @property
    def layout(self) -> str:
        """ "dp-ep" (data-parallel attention, expert-parallel MoE) or "tp-pp"."""
        return "dp-ep" if self.expert_parallel else "tp-pp"

    @property
    def dp_local(self) -> int:
        """Data-parallel ranks per node (vLLM --data-parallel-size-local)."""
        return self.dp // self.nodes

    @property
    def typical_per_rank(self) -> int:
        """Sequences of the typical size one data-parallel rank's KV cache holds (the replica's, for TP x PP)."""
        return self.typical // self.dp

    @property
    def fits(self) -> bool:
        return self.kv_cache_tokens >= 1 and self.full_context >= 1

    @property
    def cost(self) -> float | None:
        price = self.instance.on_demand_usd_per_hour
        return None if price is None else price * self.nodes / self.replicas_per_node


def evaluate(ctx: Context, inst: InstanceType, tp: int, pp: int, nodes: int) -> Fit:
    """One TP x PP layout on `inst`: the heaviest pipeline stage's GPU as vLLM accounts its memory, and its step."""
    spec, r = ctx.spec, ctx.request
    stage_layers = math.ceil(spec.layers / pp)
    # Heaviest stage: its share of layers plus the embedding (first stage) or output projection (last stage);
    # a single stage holds both.
    stage_embeddings = spec.embedding_parameters if pp == 1 else spec.vocab_size * spec.hidden_size
    # The MoE kernel's padding of the routed experts comes on top of the checkpoint's bytes.
    padding = expert_padding(ctx, inst, tp)
    layer_bytes = ctx.layer_bytes + ctx.expert_layer_bytes * (padding - 1)
    # The vision encoder sits on the first stage; counted on the heaviest one whatever PP is (an upper bound).
    weight_per_gpu = math.ceil((stage_layers * layer_bytes + stage_embeddings * 2 + ctx.vision_bytes) / tp)

    # vLLM's profiling run schedules max_num_seqs sequences: an explicit one, else the target (what the plan sets).
    max_num_seqs = r.scheduled_sequences
    batched = batched_tokens(inst, max_num_seqs)
    weights = weight_per_gpu + deepstack_bytes(ctx, batched)

    # The KV layout of the heaviest stage (kv_cache.py), then vLLM's budget and its deductions (memory.py).
    # Async scheduling keeps max_concurrent_batches (2 at PP=1, PP + 1 above) batches in flight.
    layout = kv_layout(spec, tp, pp, ctx.kv_dtype_bytes, (2 if pp == 1 else pp + 1) * batched)
    # LoRA buffers of the heaviest stage's layers (allocated at load, like weights).
    lora = (
        0 if r.lora is None else lora_bytes(spec, tp, r.lora.max_loras, r.lora.max_rank) * stage_layers // spec.layers
    )
    peak = profile_peak_bytes(spec, tp, batched, max_num_seqs)
    memory = budget(inst, r.gpu_memory_utilization, weights, peak, max_num_seqs, spec.vocab_size, lora)

    experts = stage_layers * ctx.expert_layer_bytes * padding / tp
    step = step_shape(
        ctx, inst, tp, pp, r.target_concurrency, stage_layers, weight_per_gpu, experts, layout, batched,
        pipeline_hop_us(inst, nodes),
    )  # fmt: skip
    return fit_of(ctx, inst, (tp, pp, 1, nodes), memory, layout, step)


def deepstack_bytes(ctx: Context, batched: int) -> int:
    """Qwen3-VL's deepstack buffers for `batched` tokens: allocated with the weights, whole on every GPU."""
    return ctx.spec.deepstack_levels * batched * ctx.spec.hidden_size * 2


def fit_of(
    ctx: Context,
    inst: InstanceType,
    shape: tuple[int, int, int, int],
    memory: Budget,
    layout: KvLayout,
    step: StepShape,
    expert_parallel: bool = False,
    experts_per_gpu: int = 0,
) -> Fit:
    """The Fit of a layout of `shape` (TP, PP, DP, nodes) on `inst` once its GPU's memory budget, KV layout and step
    are worked out, for TP x PP and DP x EP alike: the KV cache the budget leaves (each data-parallel rank holds a
    pool of its own), the step's latency, and the pods (a DP x EP pod runs its node's ranks, an engine each)."""
    tp, pp, dp, nodes = shape
    num_blocks = layout.num_blocks(memory.available_kv)
    engines = dp // nodes if expert_parallel else 1
    gpus_per_node, replicas_per_node, pod, host_ok, offload = pod_share(
        inst, tp * pp * dp, nodes, ctx.request.kv_offload, engines
    )
    return Fit(
        instance=inst,
        tp=tp,
        pp=pp,
        nodes=nodes,
        memory=memory,
        kv_bytes_per_token_per_gpu=layout.bytes_per_token,
        request_kv_bytes_per_gpu=layout.blocks_per_request(ctx.max_len) * layout.bytes_per_block,
        kv_cache_bytes_per_gpu=num_blocks * layout.bytes_per_block,
        kv_cache_tokens=dp * layout.logged_tokens(num_blocks, ctx.max_len),
        full_context=dp * layout.requests_that_fit(num_blocks, ctx.max_len),
        typical=dp * layout.requests_that_fit(num_blocks, ctx.typical),
        max_num_batched_tokens=step.token_budget,
        latency=estimate(step).rounded(),
        step=step,
        replicas_per_node=replicas_per_node,
        gpus_per_pod=gpus_per_node,
        pod=pod,
        host_memory_ok=host_ok,
        nvme_ok=nvme_fits(ctx, inst),
        dp=dp,
        expert_parallel=expert_parallel,
        experts_per_gpu=experts_per_gpu,
        kv_offload_gib=offload,
    )


def pod_share(
    inst: InstanceType, gpus: int, nodes: int, offload: float | str | None = None, engines: int = 1
) -> tuple[int, int, PodResources, bool, float | None]:
    """(GPUs per pod, replicas per node, the pod's share of the node, whether that holds vLLM's host memory and the
    CPU KV tier, the tier's GiB per engine) for a replica of `gpus` GPUs (all of each node's when it spans `nodes` >
    1) whose pods run `engines` engines each (data-parallel ranks), with the request's kv_offload `offload`."""
    gpus_per_node = gpus if nodes == 1 else inst.accelerators
    replicas_per_node = inst.accelerators // gpus if nodes == 1 else 1
    cpu = (inst.allocatable_cpu - DAEMONSET_CPU_MILLICORES) // replicas_per_node // 10 * 10
    memory = (inst.allocatable_memory - DAEMONSET_MEMORY_MIB) // replicas_per_node
    # The tier sits in /dev/shm, whose volume counts against the pod's memory limit: it must fit beside both.
    need = vllm_host_mib(gpus_per_node)
    if offload is not None:
        need = max(need, shm_mib(gpus_per_node))
    spare = memory - need
    size = resolve_size(offload, spare, engines)
    # auto that finds less than a GiB per engine spare cannot hold a tier: the pod does not fit, like a named size.
    host_ok = spare >= host_mib(size, engines) and size != 0
    return gpus_per_node, replicas_per_node, PodResources(cpu_millicores=cpu, memory_mib=memory), host_ok, size


def nvme_fits(ctx: Context, inst: InstanceType) -> bool:
    """The checkpoint (plus 10 % headroom) fits the instance store, when the weights are cached there."""
    return ctx.request.weights_source != "nvme" or inst.local_nvme_gb * 1e9 >= ctx.checkpoint_bytes * 1.1


def step_shape(
    ctx: Context,
    inst: InstanceType,
    tp: int,
    pp: int,
    batch: int,
    stage_layers: int,
    weight_per_gpu: int,
    expert_bytes: float,
    layout: KvLayout,
    token_budget: int,
    hop_us: float,
) -> StepShape:
    """A step of `batch` sequences of the typical size on one GPU of the heaviest stage: the weights every step reads
    (`weight_per_gpu`, of which `expert_bytes` are routed experts this GPU holds), and the KV of a running sequence
    halfway through its output; `hop_us` per pipeline hand-off."""
    spec, r = ctx.spec, ctx.request
    context = int(r.typical_input_tokens + r.typical_output_tokens / 2)
    # A step reads no vision weights.
    dense = weight_per_gpu - ctx.vision_bytes / tp - expert_bytes
    level = support(ctx.fmt, inst.compute_capability).level if inst.compute_capability else "native"
    compute = ctx.format.activations if level == "native" else "16-bit"
    active = (spec.active_parameters or spec.parameters) - spec.vision_parameters
    return StepShape(
        batch=batch,
        input_tokens=r.typical_input_tokens,
        output_tokens=r.typical_output_tokens,
        layers_per_stage=stage_layers,
        pipeline_stages=pp,
        tensor_parallel_size=tp,
        dense_bytes=dense,
        expert_bytes=expert_bytes,
        experts_per_token=spec.experts_per_token if spec.is_moe else 0,
        num_experts=spec.num_experts if spec.is_moe else 0,
        kv_bytes_per_sequence=kv_read_bytes(layout, context),
        linear_flops_per_token=2 * active / tp / pp,
        decode_attention_flops_per_token=attention_flops(spec, context) / tp / pp,
        prefill_attention_flops_per_token=attention_flops(spec, r.typical_input_tokens // 2) / tp / pp,
        hidden_size=spec.hidden_size,
        is_moe=spec.is_moe,
        is_mla=spec.is_mla,
        memory_bandwidth_gbps=inst.memory_bandwidth_gbps,
        peak_tflops=peak_tflops(inst, compute),
        interconnect=link(inst),
        pipeline_hop_us=hop_us,
        token_budget=token_budget,
    )


def attention_flops(spec: ModelSpec, context: int) -> float:
    """FLOPs of one token's attention over `context` earlier tokens: QK and PV, 2 FLOPs per multiply-add, over
    every head (MLA: the latent and rope dimensions it attends with); local layers only their window."""
    head = spec.kv_lora_rank + spec.qk_rope_head_dim if spec.is_mla else spec.head_dim
    full = spec.layers - spec.sliding_window_layers - spec.chunked_attention_layers
    tokens = full * context
    tokens += spec.sliding_window_layers * min(context, spec.sliding_window)
    tokens += spec.chunked_attention_layers * min(context, spec.attention_chunk_size)
    return 4.0 * spec.attention_heads * head * tokens


def expert_padding(ctx: Context, inst: InstanceType, tp: int) -> float:
    """How much larger the routed experts are on `inst` than in the checkpoint: the hidden size and each GPU's slice
    of the expert width rounded up to the MoE kernel's multiples (`Support.expert_alignment`, formats.py)."""
    spec = ctx.spec
    if not spec.is_moe or inst.compute_capability is None:
        return 1.0
    hidden_align, width_align = support(ctx.fmt, inst.compute_capability).expert_alignment
    width = spec.expert_width // tp
    padded = cdiv(spec.hidden_size, hidden_align) * hidden_align * cdiv(width, width_align) * width_align
    return padded / (spec.hidden_size * width)


def kv_read_bytes(layout: KvLayout, context: int) -> int:
    """KV bytes a decode step reads for one sequence of `context` tokens (windowed layers read their window)."""
    return sum(t.layers * t.bytes_per_token * (min(context, t.span) if t.span else context) for t in layout.types)
