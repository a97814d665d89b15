"""The assumptions behind a plan, each with its number, as `llm-eks plan` prints them."""

from __future__ import annotations

from llm_eks.catalog.accelerators import PRICE_REGION, PRICES_READ, InstanceType
from llm_eks.catalog.formats import support
from llm_eks.planner.cold_start import (
    KV_OFFLOAD_PREFAULT_BYTES_PER_S,
    NODE_PROVISION_S,
    WARMUP_BASE_S,
    WARMUP_PER_EXTRA_NODE_S,
    WARMUP_PER_GPU_DOUBLING_S,
    image_assumption,
    kv_offload_prefault_seconds,
    node_image_source,
    weights_assumption,
)
from llm_eks.planner.compute_mode import compute_assumptions
from llm_eks.planner.kv_cache import BLOCK_TOKENS
from llm_eks.planner.kv_offload import AUTO_SHARE
from llm_eks.planner.latency import FITTED, efa_link, link
from llm_eks.planner.memory import CUDA_GRAPH_BYTES, DRIVER_VISIBLE_FRACTION, GIB, NON_TORCH_BYTES, batch_defaults
from llm_eks.planner.pods import DAEMONSET_CPU_MILLICORES, DAEMONSET_MEMORY_MIB, vllm_host_mib
from llm_eks.planner.request import PlanRequest
from llm_eks.planner.sizing import Context, Fit, expert_padding


def _weights_assumption(ctx: Context, fit: Fit) -> str:
    fmt = ctx.format
    text = f"weights: {ctx.spec.parameters:,} parameters at {fmt.name} ({fmt.description})"
    if ctx.spec.vision_parameters:
        text += f", of which {ctx.spec.vision_parameters:,} are the vision encoder and projector, loaded in 16 bits"
    if fmt.weight_bits < 16:
        text += "; " + (
            f"{fmt.bytes_per_weight:.4f} B per quantized weight with its scales; {fmt.sixteen_bit_layers} in 16 bits"
        )
    cc = fit.instance.compute_capability
    if cc is not None and fmt.weight_bits < 16:
        cell = support(fmt.name, cc)
        text += f"; on {fit.instance.accelerator_name} vLLM 0.33 runs it {cell.level} ({cell.evidence})"
    padding = expert_padding(ctx, fit.instance, fit.tp)
    if cc is not None and padding > 1:
        hidden, width = support(fmt.name, cc).expert_alignment
        text += (
            f"; that kernel pads the routed experts (hidden size to a multiple of {hidden}, each GPU's slice of the "
            f"expert width to {width}): {padding - 1:+.1%} of their bytes, counted in the weights"
        )
    return text


def _kv_assumption(ctx: Context) -> str:
    spec, dtype = ctx.spec, ctx.kv_dtype_bytes
    if spec.is_mla:
        per_layer = f"({spec.kv_lora_rank} + {spec.qk_rope_head_dim}) latent x {dtype} B, on every TP rank"
    else:
        per_layer = f"2 x {spec.kv_heads} KV heads x {spec.head_dim} x {dtype} B"
    text = f"KV cache: {spec.layers} layers x {per_layer} = {ctx.kv_bytes_per_token:,} B per token"
    if spec.sliding_window_layers:
        text += f"; {spec.sliding_window_layers} layers keep a {spec.sliding_window}-token window"
    if spec.chunked_attention_layers:
        text += f"; {spec.chunked_attention_layers} layers keep {spec.attention_chunk_size}-token chunks"
    return text + f"; blocks of {BLOCK_TOKENS} tokens, grouped per layer type as vLLM's hybrid allocator does"


def plan_assumptions(ctx: Context, fit: Fit) -> list[str]:
    inst, r = fit.instance, ctx.request
    gib = fit.reserve_bytes_per_gpu / GIB
    out = [
        _weights_assumption(ctx, fit),
        _kv_assumption(ctx),
        f"GPU memory: {inst.accelerator_memory_mib:,} MiB per {inst.accelerator_name} as EC2 reports it, "
        f"{DRIVER_VISIBLE_FRACTION:.0%} of it visible to CUDA; vLLM's budget is that x gpu_memory_utilization",
        f"deducted from the budget per GPU besides weights (vLLM's profiling): the sampler's penalty state for "
        f"max_num_seqs requests + {NON_TORCH_BYTES / GIB:.2f} GiB non-torch workspaces + "
        f"{CUDA_GRAPH_BYTES / GIB:.2f} GiB CUDA graphs + the profiling run's peak for "
        f"{fit.max_num_batched_tokens} batched tokens and its sampler"
        f"{' + the LoRA buffers' if fit.lora_bytes_per_gpu else ''} = {gib:.2f} GiB",
        f"max_num_batched_tokens {fit.max_num_batched_tokens} per data-parallel rank: vLLM's OpenAI-server default "
        f"for this GPU ({batch_defaults(inst)[0]}) shared over the {fit.dp} ranks, whose tokens every MoE layer "
        "gathers (its profiled workspaces grow with them), made explicit"
        if fit.expert_parallel
        else f"max_num_batched_tokens {fit.max_num_batched_tokens}: vLLM's OpenAI-server default for this GPU, "
        "made explicit",
        f"max_num_seqs = each of the {fit.dp} data-parallel ranks' share of target_concurrency "
        f"({r.target_concurrency}), capped by what its KV cache holds at the typical size (vLLM applies it per rank)"
        if r.max_num_seqs is None and fit.dp > 1
        else f"max_num_seqs = target_concurrency ({r.target_concurrency}), capped by what fits at the typical size"
        if r.max_num_seqs is None
        else f"max_num_seqs {r.max_num_seqs} as given: vLLM's profiling run (the activation peak above) uses it",
        f"pod requests: node allocatable less {DAEMONSET_CPU_MILLICORES}m CPU and {DAEMONSET_MEMORY_MIB} MiB for "
        f"DaemonSets, split over {fit.replicas_per_node} pod(s) per node",
        *_offload_assumption(r, fit),
        image_assumption(node_image_source(ctx, fit)),
        weights_assumption(r.weights_source),
        f"warm-up: {WARMUP_BASE_S} s (start-up, torch.compile with a cold cache, CUDA graphs) + "
        f"{WARMUP_PER_GPU_DOUBLING_S} s per doubling of GPUs + {WARMUP_PER_EXTRA_NODE_S} s per extra node",
        f"node provisioning: {NODE_PROVISION_S} s from Karpenter launch to a Ready GPU node",
        _latency_assumption(fit),
        f"price: on-demand {PRICE_REGION}, AWS Price List of {PRICES_READ}",
        *compute_assumptions(r.compute, inst.family),
    ]
    if r.fixed_shape or r.data_parallel_size is not None or r.enable_expert_parallel is not None:
        fixed = [f"{name} {value}" for name, value in (("tensor_parallel_size", r.tensor_parallel_size),
                 ("pipeline_parallel_size", r.pipeline_parallel_size), ("data_parallel_size", r.data_parallel_size),
                 ("enable_expert_parallel", r.enable_expert_parallel)) if value is not None]  # fmt: skip
        out.append(f"parallelism: {' and '.join(fixed)} as given; the planner chose the rest")
    if fit.expert_parallel:
        out += expert_parallel_assumptions(ctx, fit)
    elif ctx.spec.is_moe and fit.tp > 1:
        out.append(
            "experts: split across the TP ranks (vLLM 0.33 uses expert parallelism only with --enable-expert-parallel, "
            "off by default, vllm/config/parallel.py; with it each rank holds whole experts, the same checkpoint bytes "
            "per GPU, vllm/model_executor/layers/fused_moe/config.py, which a padding MoE kernel then pads whole), so "
            "memory holds either way; latency assumes all-reduce"
        )
    if r.lora is not None:
        out.append(
            f"LoRA: {r.lora.max_loras} adapter slot(s) at max rank {r.lora.max_rank}: "
            f"{fit.lora_bytes_per_gpu / GIB:.2f} GiB of A/B buffers per GPU over every linear layer (vLLM allocates "
            "them at load, adapter or not), counted in the reserve above; adapters load from the Hub at start"
        )
    if ctx.fmt == "fp8" and ctx.spec.quantization is None:
        out.append(
            "fp8: vLLM quantizes the 16-bit checkpoint layer by layer while loading (vllm#31914, so the 16-bit "
            "model never sits whole in GPU memory); start-up reads the 16-bit files"
        )
    return out


def expert_parallel_assumptions(ctx: Context, fit: Fit) -> list[str]:
    """What a DP x EP plan assumed: where the weights sit, what each rank holds, and how the nodes talk."""
    spec, inst = ctx.spec, fit.instance
    ep = fit.tp * fit.dp
    even = "evenly" if spec.num_experts % ep == 0 else f"unevenly ({spec.num_experts % ep} GPUs hold one more)"
    out = [
        f"expert parallelism (vLLM 0.33 --data-parallel-size {fit.dp} --enable-expert-parallel): {fit.dp} "
        f"data-parallel rank(s) of TP {fit.tp}, each with its own scheduler, max_num_seqs and KV cache, attention, "
        "dense MLPs and embeddings split over its TP GPUs (fused_moe/config.py FusedMoEParallelConfig.make); the "
        f"{spec.num_experts} routed experts spread whole over EP {ep} GPUs, {even}: {fit.experts_per_gpu} on the "
        "heaviest (fused_moe/expert_map_manager.py determine_expert_map; vLLM requires EP to divide them only with "
        "EPLB, which the plan leaves off)"
        + (
            f"; the {spec.shared_experts} shared expert(s) whole on every GPU (at TP > 1 too: vLLM's "
            "sequence-parallel MoE replicates them, models/deepseek_v2.py disable_tp)"
            if spec.shared_experts
            else ""
        ),
        f"expert-parallel collectives: vLLM 0.33's default all2all, allgather_reducescatter "
        f"(distributed/device_communicators/all2all.py): an all-gather (dispatch) and a reduce-scatter (combine) per "
        f"MoE layer over the EP group, {fit.latency.collectives_ms:g} ms of each decode step; "
        + (f"within one node over {link(inst)} (hardware.py ALL_REDUCE_US)" if fit.nodes == 1 else _inter_node(inst)),
    ]
    return out


def _inter_node(inst: InstanceType) -> str:
    if not inst.efa:
        return "across nodes over TCP (no EFA: an estimate, not measured)"
    efa = efa_link(inst)
    measured = (
        f"NCCL all-reduce measured between two {efa.measured_on}"
        if efa.verified
        else f"{efa.note} (unverified for {inst.instance_type})"
    )
    return (
        f"across nodes over EFA ({inst.efa_interfaces} interfaces per node: each pod requests "
        f"vpc.amazonaws.com/efa {inst.efa_interfaces}), costed from {measured} (hardware.py EFA_ALL_REDUCE_US)"
    )


def _latency_assumption(fit: Fit) -> str:
    lat, step = fit.latency, fit.step
    at = f"{step.batch} sequence{'s' if step.batch != 1 else ''}"
    if fit.dp > 1:
        at += f" per data-parallel rank ({step.replica_sequences} per replica, the ranks stepping in lockstep)"
    kernels = (
        "per-layer kernels, all-reduces and expert collectives"
        if fit.expert_parallel
        else "per-layer kernels and all-reduces"
    )
    return (
        f"latency at {at}: a decode step of {lat.step_ms:g} ms = "
        f"{lat.memory_ms:g} ms reading weights and KV at {FITTED.eta_memory:.0%} of {step.memory_bandwidth_gbps:g} "
        f"GB/s, then {lat.compute_ms:g} ms of compute at {FITTED.eta_compute:.0%} of {step.peak_tflops:g} TFLOPS, "
        f"{lat.layers_ms:g} ms of {kernels} and {FITTED.step_ms:g} ms per step; chunked "
        f"prefill adds {lat.prefill_interference_ms:g} ms per output token on average (p99 ITL {lat.itl_p99_ms:g} "
        f"ms); TTFT {lat.ttft_ms:g} ms (p99 {lat.ttft_p99_ms:g} ms), {lat.output_tokens_per_s:g} output tokens/s per "
        "replica (constants fitted to published vLLM runs, docs: planner accuracy)"
    )


def _offload_assumption(r: PlanRequest, fit: Fit) -> list[str]:
    """The CPU KV tier's host memory, when the workload has one."""
    if fit.kv_offload_gib is None:
        return []
    engines = fit.dp_local if fit.expert_parallel else 1
    how = "as given"
    if r.kv_offload == "auto":
        how = f"auto: {AUTO_SHARE:.0%} of the pod's memory beyond vLLM's, in whole GiB"
    per = f" x {engines} data-parallel ranks" if engines > 1 else ""
    return [
        f"CPU KV tier: {fit.kv_offload_gib:g} GiB per engine{per} ({how}) in the pod's /dev/shm, inside its "
        f"{fit.pod.memory_mib} MiB memory request beside the {vllm_host_mib(fit.gpus_per_pod)} MiB vLLM needs; "
        f"pre-faulted at start: {kv_offload_prefault_seconds(fit):.0f} s of the warm-up at "
        f"{KV_OFFLOAD_PREFAULT_BYTES_PER_S / 2**30:g} GiB/s (vLLM's own figure for one /dev/shm file; an upper bound, "
        "not measured)"
    ]
