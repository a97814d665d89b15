"""The assumptions behind a Neuron plan, each with its number, as `llm-eks plan` prints them."""

from __future__ import annotations

from llm_eks.catalog.accelerators import PRICE_REGION, PRICES_READ
from llm_eks.planner.cold_start import IMAGE_COMPRESSED_BYTES, NODE_PROVISION_S, WARMUP_INIT_S
from llm_eks.planner.compute_mode import compute_assumptions
from llm_eks.planner.neuron.cold_start import COMPILE_S_PER_GB, NEURON_WEIGHTS_SOURCE
from llm_eks.planner.neuron.engine import NeuronLayout
from llm_eks.planner.neuron.latency import FITTED
from llm_eks.planner.neuron.sizing import (
    HOST_BYTES_PER_CHECKPOINT_BYTE,
    PEAK_BF16_TFLOPS_PER_CHIP,
    VLLM_NEURON_KV_CAP_FRACTION,
    NeuronFit,
)
from llm_eks.planner.pods import DAEMONSET_CPU_MILLICORES, DAEMONSET_MEMORY_MIB
from llm_eks.planner.sizing import Context

GIB = 1024**3


def neuron_assumptions(ctx: Context, fit: NeuronFit, details: NeuronLayout) -> list[str]:
    inst, r, spec, heads = fit.instance, ctx.request, ctx.spec, fit.heads
    cores = inst.cores_per_accelerator
    out = [
        f"engine: {details.engine_label}, image {details.image}; its flags are checked against vLLM "
        f"{details.vllm_version}'s own argument parser, its Neuron settings against field lists read from the plugin "
        "and NxD Inference source (the Neuron wheels themselves are not reachable from the tests)",
        f"hardware: {inst.instance_type} has {inst.accelerators} {inst.accelerator_name} chip(s) of {cores} "
        f"{inst.neuron_core}s as the runtime presents them (logical NeuronCore configuration "
        f"{inst.logical_core_config}), {inst.memory_per_core_bytes / GIB:.0f} GiB of HBM and "
        f"{inst.memory_bandwidth_gbps / cores:g} GB/s per core, "
        f"{PEAK_BF16_TFLOPS_PER_CHIP[inst.accelerator_name] / cores:g} dense BF16 TFLOPS per core (Neuron SDK "
        "hardware pages)",
        f"weights: {spec.parameters:,} parameters at bf16 over TP {fit.tp}; query heads padded {spec.attention_heads} "
        f"-> {heads.query_heads} and KV heads {spec.kv_heads} -> {heads.kv_heads} as NxD Inference shards "
        f"grouped-query attention, {fit.weight_bytes_per_core / GIB:.2f} GiB per core",
        f"KV cache: {spec.layers} layers x 2 x {heads.kv_heads_per_core} KV head(s) per core x {spec.head_dim} x 2 B "
        f"= {fit.kv_bytes_per_token_per_core:,} B per token per core, allocated for the compiled shape "
        f"({fit.shape.kv_tokens:,} tokens: {fit.shape.summary()})",
        (
            f"memory: gpu_memory_utilization {r.gpu_memory_utilization:g} of each core's HBM for weights and KV "
            f"({fit.usable_bytes_per_core / GIB:.2f} GiB); vllm-neuron applies it and caps the KV cache at "
            f"{VLLM_NEURON_KV_CAP_FRACTION:.0%} of it"
            if fit.engine.name == "vllm-neuron"
            else f"memory: gpu_memory_utilization {r.gpu_memory_utilization:g} of each core's HBM for weights and KV "
            f"({fit.usable_bytes_per_core / GIB:.2f} GiB): NxD Inference does not apply it, and what its compiled "
            "graphs keep for activations and I/O is not published, so the rest stands in for that (not verified)"
        ),
        f"host memory: a pod needs more than {HOST_BYTES_PER_CHECKPOINT_BYTE:.2f}x the checkpoint "
        f"({fit.host_memory_needed_bytes / GIB:.1f} GiB; compiling Llama-3.1-8B-Instruct with NxD Inference ran out of "
        f"memory with 32 GiB, aws-neuron/aws-neuron-sdk#1222) and has {fit.pod.memory_mib:,} MiB",
        f"latency: the Neuron model fitted on published Neuron runs (eta_memory {FITTED.eta_memory_v2:g} on "
        f"NeuronCore-v2, {FITTED.eta_memory_v3:g} on v3; eta_compute {FITTED.eta_compute:g}; {FITTED.step_ms:g} ms per "
        f"step, {FITTED.layer_us:g} us per layer, {FITTED.sequence_layer_us:g} us per layer and sequence of the "
        f"{fit.step.decode_batch}-sequence batch the compiled decode step runs); docs: Planner accuracy scores it on "
        "runs it was not fitted on",
        f"compile: ahead of time in the compile cache's writer Job on {inst.instance_type}, ~"
        f"{details.compile_seconds} s ({COMPILE_S_PER_GB[fit.engine.name]:.0f} s per GB of checkpoint, the Neuron "
        "documentation's figure); serving pods restore the signed artefacts",
        f"cold start: the {IMAGE_COMPRESSED_BYTES / 1e9:.0f} GB vLLM image's pull stands in for the Neuron container's "
        f"(no published size); staged weights fetched onto the node then read by the engine; {WARMUP_INIT_S} s of "
        f"engine start (no published Neuron start figure); {NODE_PROVISION_S} s to a new node",
        f"pods: {fit.replicas_per_node} per node of {fit.chips} chip(s) each"
        + (" (the Neuron scheduler extension hands out contiguous chips)" if details.scheduler_extension else "")
        + f"; {DAEMONSET_CPU_MILLICORES}m CPU and {DAEMONSET_MEMORY_MIB} MiB kept for DaemonSets",
        (
            f"price: on-demand {PRICE_REGION}, AWS Price List of {PRICES_READ}"
            if inst.on_demand_usd_per_hour is not None
            else f"price: cost unknown: {inst.note}"
        ),
        *compute_assumptions(r.compute, inst.family),
    ]
    note = weights_note(ctx)
    if note is not None:
        out.append(note)
    return out


def weights_note(ctx: Context) -> str | None:
    """What the plan says when the request names another weights source than Neuron's one."""
    source = ctx.request.weights_source
    if source == NEURON_WEIGHTS_SOURCE:
        return None
    return (
        f"weights: a Neuron server loads a local checkpoint, so the plan uses staged weights fetched onto the node "
        f"and the compile cache, whatever weights_source says ({source})"
    )
