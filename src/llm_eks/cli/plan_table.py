"""`llm-eks plan` as a reader sees it: the plan table, the cold-start paths side by side, and the catalog."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from llm_eks.planner import TIMES
from llm_eks.planner.memory import DRIVER_VISIBLE_FRACTION
from llm_eks.planner.pods import vllm_host_mib


def _gib(n: float) -> str:
    return f"{n / 1024**3:.2f} GiB"


def _neuron_rows(p: Any) -> list[tuple[str, str]]:
    """The rows of a plan on a Neuron instance type: cores for GPUs, the engine path, the compiled shape."""
    inst, n, cold, pod, r = p.instance, p.neuron, p.cold_start, p.pod_resources, p.request
    shape = n.serving.shape
    price = "no on-demand price" if inst.on_demand_usd_per_hour is None else f"${inst.on_demand_usd_per_hour:g}/h"
    cost = (
        f"cost unknown: {inst.note}"
        if p.cost_per_replica_hour is None
        else f"${p.cost_per_replica_hour:.2f}/h per replica (on-demand)"
    )
    per_pod = f"{p.gpus_per_pod} of {inst.accelerators} chip(s) per pod, {p.replicas_per_node} pod(s) per node"
    if n.scheduler_extension:
        per_pod += " (contiguous chips: the Neuron scheduler extension)"
    return [
        ("Model", f"{p.model.id} ({p.model.parameters / 1e9:.2f}B parameters, {p.model.architecture})"),
        ("Checkpoint", f"{p.checkpoint}, bf16 weights {p.weight_bytes / 1e9:.1f} GB, max_model_len {p.max_model_len}"),
        (
            "Instance",
            f"{inst.instance_type}: {inst.accelerators}{TIMES} {inst.accelerator_name} = {inst.cores} {n.neuron_core}s "
            f"(logical NeuronCore configuration {n.logical_core_config}, {_gib(n.memory_per_core_bytes)} HBM each), "
            f"{inst.vcpus} vCPU, {inst.memory_gib:g} GiB RAM, {price}",
        ),
        ("Engine", f"{n.engine_label}, image {n.image}"),
        ("Parallelism", f"TP {p.tensor_parallel_size} over {p.tensor_parallel_size} NeuronCores, {per_pod}"),
        ("Compiled shape", shape.summary()),
        (
            "Memory / core",
            f"{_gib(p.gpu_memory_bytes)} {TIMES} {p.gpu_memory_utilization:g} = {_gib(p.usable_bytes_per_gpu)}; "
            f"weights {_gib(p.weight_bytes_per_gpu)}, KV cache {_gib(p.kv_cache_bytes_per_gpu)} "
            f"({p.kv_bytes_per_token_per_gpu:,} B per token per core)",
        ),
        (
            "KV cache",
            f"{p.kv_cache_tokens:,} tokens per replica (max_num_seqs {shape.max_num_seqs} x {shape.max_model_len})",
        ),
        (
            "Concurrency",
            f"{p.max_num_seqs} sequences compiled (target {r.target_concurrency}: "
            f"{'met' if p.meets_target else 'NOT met'})",
        ),
        (
            "Latency",
            f"at {min(r.target_concurrency, p.max_num_seqs)} sequences (Neuron model estimates): TTFT "
            f"~{p.ttft_estimate_ms:g} ms, inter-token ~{p.itl_estimate_ms:g} ms, ~{p.tpot_estimate_ms:g} ms per "
            "output token with prefill, "
            f"{p.output_tokens_per_s:g} output tokens/s per replica",
        ),
        ("Cost", cost),
        (
            "Cold start",
            f"image {cold.image_pull_s:g} s ({r.image_source}) + staged weights onto the node {cold.weights_s:g} s + "
            f"engine start {cold.warmup_s:g} s = {cold.total_s:g} s; startup probe must allow {cold.startup_s:g} s; "
            f"+{cold.node_provision_s:g} s for a new node; ahead-of-time compile ~{n.compile_seconds} s in the compile "
            "cache's writer Job",
        ),
        (
            "Pod requests",
            f"cpu {pod.cpu}, memory {pod.memory} (above the {n.host_memory_needed_bytes / 1024**3:.1f} GiB compile "
            f"floor), {p.extended_resource} {p.gpus_per_pod}",
        ),
        ("Engine args", " ".join(p.engine_args)),
    ]


def table(p: Any) -> str:
    if p.neuron is not None:
        rows = _neuron_rows(p) + [("Warning", str(w)) for w in p.warnings]
        return _render(p, rows)
    inst, cold, pod, r = p.instance, p.cold_start, p.pod_resources, p.request
    price = "no on-demand price" if inst.on_demand_usd_per_hour is None else f"${inst.on_demand_usd_per_hour:g}/h"
    cost = "n/a" if p.cost_per_replica_hour is None else f"${p.cost_per_replica_hour:.2f}/h"
    # On EKS Auto Mode its fee per instance-hour goes beside every $/h (unknown unless AWS's page was read).
    fee = "" if p.auto_mode_fee is None else f" + {p.auto_mode_fee}"
    budget = p.usable_bytes_per_gpu + p.reserve_bytes_per_gpu  # vLLM's requested memory (plan/memory.py)
    target = "met" if p.meets_target else "NOT met"
    link = "" if inst.interconnect == "none" else f", {inst.interconnect}"
    rows = [
        ("Model", f"{p.model.id} ({p.model.parameters / 1e9:.2f}B parameters)"),
        (
            "Checkpoint",
            f"{p.checkpoint}, {p.weight_format} weights {p.weight_bytes / 1e9:.1f} GB, "
            f"KV cache {p.kv_cache_dtype}, max_model_len {p.max_model_len}",
        ),
        (
            "Instance",
            f"{inst.instance_type}: {inst.accelerators}{TIMES} {inst.accelerator_name} "
            f"({inst.accelerator_memory_gib:.1f} GiB{link}), {inst.vcpus} vCPU, "
            f"{inst.memory_gib:g} GiB RAM, {inst.local_nvme_gb} GB NVMe, {price}{fee}",
        ),
        (
            "Parallelism",
            (
                f"DP {p.data_parallel_size} {TIMES} TP {p.tensor_parallel_size} = {p.gpus_per_replica} GPU(s) per "
                f"replica, experts over EP {p.expert_parallel_size}, {p.nodes_per_replica} node(s) per replica "
                f"({p.data_parallel_size_local} DP rank(s) each), {p.replicas_per_node} replica(s) per node"
            )
            if p.expert_parallel
            else f"TP {p.tensor_parallel_size} {TIMES} PP {p.pipeline_parallel_size} = "
            f"{p.gpus_per_replica} GPU(s) per replica, "
            f"{p.nodes_per_replica} node(s) per replica, {p.replicas_per_node} replica(s) per node",
        ),
        (
            "Memory / GPU",
            f"{_gib(p.gpu_memory_bytes)} ({DRIVER_VISIBLE_FRACTION:.0%} visible to CUDA) {TIMES} "
            f"{p.gpu_memory_utilization:g} = {_gib(budget)}; "
            f"reserve {_gib(p.reserve_bytes_per_gpu)}, weights {_gib(p.weight_bytes_per_gpu)}, "
            f"KV cache {_gib(p.kv_cache_bytes_per_gpu)}",
        ),
        ("KV cache", f"{p.kv_cache_tokens:,} tokens per replica ({p.kv_bytes_per_token // 1024} KiB per token)"),
        (
            "Concurrency",
            f"{p.max_concurrency_typical} sequences of {r.typical_tokens} tokens (target {r.target_concurrency}: "
            f"{target}); {p.max_concurrency_full_context} at full context",
        ),
        (
            "Latency",
            f"at {r.target_concurrency} sequences (estimates): TTFT ~{p.ttft_estimate_ms:g} ms, inter-token "
            f"~{p.itl_estimate_ms:g} ms, ~{p.tpot_estimate_ms:g} ms per output token with prefill, "
            f"{p.output_tokens_per_s:g} output tokens/s per replica",
        ),
        ("Cost", f"{cost} per replica (on-demand){fee}"),
        (
            "Cold start",
            f"image {cold.image_pull_s:g} s ({p.node_image_source}) + weights {cold.weights_s:g} s "
            f"({r.weights_source}) + warm-up "
            f"{cold.warmup_s:g} s = {cold.total_s:g} s; startup probe must allow {cold.startup_s:g} s; "
            f"+{cold.node_provision_s:g} s for a new node",
        ),
        (
            "Pod requests",
            f"cpu {pod.cpu}, memory {pod.memory}, {p.extended_resource} {p.gpus_per_pod}"
            + (f", vpc.amazonaws.com/efa {p.efa_interfaces_per_pod}" if p.efa_interfaces_per_pod else ""),
        ),
        ("Engine args", " ".join(p.engine_args)),
    ]
    if r.warm_replicas:
        price = p.warm_headroom_usd_per_hour
        rows.insert(
            -2,
            (
                "Warm headroom",
                f"{r.warm_replicas} replica-shaped placeholder(s) keep node(s) up: "
                + ("no on-demand price" if price is None else f"${price:.2f}/h")
                + f"; a scale-out then skips the {cold.node_provision_s:g} s node launch and the "
                + f"{cold.image_pull_s:g} s image pull",
            ),
        )
    if p.kv_offload_gib is not None:
        per = f" x {p.engines_per_pod} engines" if p.engines_per_pod > 1 else ""
        rows.insert(
            -2,
            (
                "KV offload",
                f"CPU tier {p.kv_offload_gib:g} GiB per engine{per} (vLLM native, in /dev/shm): "
                f"{p.kv_offload_mib_per_pod} MiB of the pod's {pod.memory} beside the "
                f"{vllm_host_mib(p.gpus_per_pod)} MiB vLLM needs",
            ),
        )
    if p.auto_mode_fee is not None:
        # On EKS Auto Mode nodes are replaced weekly: what that costs the replicas (planner/compute_mode.py).
        rows.insert(-2, ("Node lifetime", p.node_replacement.line()))
    scoring = None if p.prefix_cache is None else p.prefix_cache.line(p.kv_offload_gib is not None)
    if scoring is not None:
        # Which prefix-cache scorer the endpoint picker runs, and the flags precise adds (planner/kv_events.py).
        rows.insert(-1, ("Prefix scorer", scoring))
    rows += [("Warning", str(w)) for w in p.warnings]  # with its id, to acknowledge it in the CDK app
    return _render(p, rows)


def _render(p: Any, rows: list[tuple[str, str]]) -> str:
    width = max(len(label) for label, _ in rows)
    lines = [p.summary_line(), ""]
    lines += [f"{label:<{width}}  {value}" for label, value in rows]
    lines += ["", *_paths_table(p)]
    lines += ["", "Assumptions:"] + [f"  - {a}" for a in p.assumptions]
    if p.disaggregation is not None:
        lines += ["", "Prefill/decode:"] + [f"  {line}" for line in decision_lines(p.disaggregation)]
    if p.prefix_reuse is not None:
        lines += ["", "Prefix reuse (multi-turn):"] + [f"  {line}" for line in reuse_lines(p.prefix_reuse)]
    return "\n".join(lines)


def reuse_lines(u: Any) -> list[str]:
    """Where multi-turn prompts find their prefixes, and the TTFT that follows (planner/kv_offload.py)."""
    cpu = f", CPU tier {u.cpu_hit:.0%}" if u.cpu_tokens else " (no CPU tier)"
    return [
        f"prompt tokens: GPU prefix cache {u.gpu_hit:.0%}{cpu}, prefilled {u.prefilled:.0%} "
        f"(of which earlier turns computed {u.reusable:.0%})",
        f"TTFT ~{u.ttft_ms:g} ms (no reuse ~{u.ttft_no_reuse_ms:g} ms, GPU cache alone ~{u.ttft_gpu_ms:g} ms"
        + (f", CPU loads {u.load_ms:g} ms" if u.cpu_tokens else "")
        + f"); caches beyond running sequences: GPU {u.gpu_idle_tokens:,} tokens, CPU {u.cpu_tokens:,} tokens, "
        f"{u.tokens_written_per_s:,.0f} KV tokens written per second",
        *(f"- {a}" for a in u.assumptions),
    ]


def _mode(m: Any) -> str:
    cost = "no price" if m.usd_per_million_output_tokens is None else f"${m.usd_per_million_output_tokens:.3f}"
    pools = " + ".join(
        f"{pool.replicas}{TIMES} {pool.role} {pool.split}"
        + (f" on {pool.nodes_per_replica} nodes" if pool.nodes_per_replica > 1 else "")
        for pool in m.pools
    )
    met = "meets" if m.meets_targets else "misses"
    return f"{pools}: TTFT ~{m.ttft_ms:g} ms, ~{m.tpot_ms:g} ms per output token, {cost} per 1M output tokens ({met})"


def _pool_kind(d: Any) -> str:
    """What serves each pool: a Deployment, or a LeaderWorkerSet where a replica spans nodes."""
    nodes = d.disaggregated.pools[0].nodes_per_replica if d.disaggregated is not None else 1
    return f"LeaderWorkerSet ({nodes} pods per replica)" if nodes > 1 else "Deployment"


def decision_lines(d: Any) -> list[str]:
    """The prefill/decode decision as the plan table and `plan --compare` print it: both modes, then the choice."""
    lines = [f"aggregated     {_mode(d.aggregated)}"]
    if d.disaggregated is not None and d.phase is not None:
        ph = d.phase
        bound = " (upper bound)" if ph.transfer.upper_bound else ""
        lines.append(f"disaggregated  {_mode(d.disaggregated)}")
        lines.append(
            f"  TTFT parts: prefill {ph.prefill_ms:g} ms, queue {ph.queue_ms:g} ms (prefill pool "
            f"{ph.prefill_utilization:.0%} busy), KV {ph.kv_bytes_per_request / 2**20:,.0f} MiB over "
            f"{ph.transfer.transport.upper()} at {ph.transfer.gb_per_s:g} GB/s{bound} = {ph.transfer_ms:g} ms, decode "
            f"{ph.decode_wait_ms:g} ms; transfer rate published, not measured here: {ph.transfer.source}"
        )
    ratio = f" ({d.ratio} prefill:decode)" if d.recommended == "disaggregated" else ""
    lines.append(
        f"{d.setting}: {d.recommended}{ratio}: {d.why}"
        + (
            f"; served so: a prefill and a decode {_pool_kind(d)} behind the gateway's endpoint picker"
            if d.recommended == "disaggregated"
            else ""
        )
    )
    return lines


# How each source reads in the path table.
WEIGHTS_LABEL = {"nvme": "Hub download", "s3": "S3 stream", "staged": "S3 + compile cache", "ebs": "EBS volume"}
IMAGE_LABEL = {"pull": "pulled", "parallel-pull": "parallel pull", "snapshot": "snapshot", "headroom": "on the node"}


def _paths_table(p: Any) -> list[str]:
    """Queue spike to a Ready replica, every path side by side; `*` marks the one in use."""
    head = ("", "weights", "image", "node", "node s", "image s", "weights s", "warm-up s", "total s")
    rows = [
        (
            "*" if c.in_use else "",
            WEIGHTS_LABEL[c.weights_source],
            IMAGE_LABEL[c.image_source],
            "warm" if c.warm_node else "new",
            *(f"{value:g}" for value in (c.node_s, c.image_s, c.weights_s, c.warmup_s, c.total_s)),
        )
        for c in p.cold_start_paths
    ]
    widths = [max(len(row[i]) for row in (head, *rows)) for i in range(len(head))]
    lines = ["Cold start by path (queue spike to a Ready replica; * in use; S3 needs the weights in a bucket, the "
             "compile cache staged weights, snapshot an image snapshot, warm node warm_replicas, whose "
             "placeholders pull the image):"]  # fmt: skip
    for row in (head, *rows):
        cells = [cell.ljust(w) if i < 4 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def print_catalog(as_json: bool) -> None:
    from llm_eks.catalog.accelerators import CATALOG as INSTANCES
    from llm_eks.catalog.accelerators import PRICE_REGION, PRICES_READ
    from llm_eks.catalog.models import CATALOG as MODELS

    if as_json:
        body = {
            "models": [dataclasses.asdict(m) for m in MODELS],
            "instance_types": [{**dataclasses.asdict(i), "extended_resource": i.extended_resource} for i in INSTANCES],
            "prices_read": PRICES_READ,
            "price_region": PRICE_REGION,
        }
        print(json.dumps(body, indent=2, ensure_ascii=False))
        return
    print("Models")
    print(
        f"  {'id':<46} {'attention':<9} {'total':>8} {'active':>8} {'layers':>6} {'heads/kv':>8} {'context':>8}  "
        "checkpoint"
    )
    for m in MODELS:
        moe = f", MoE {m.num_experts}x top-{m.experts_per_token}" if m.is_moe else ""
        active = f"{(m.active_parameters or m.parameters) / 1e9:>7.2f}B"
        print(
            f"  {m.id:<46} {m.attention_kind:<9} {m.parameters / 1e9:>7.2f}B {active} {m.layers:>6} "
            f"{m.attention_heads:>4}/{m.kv_heads:<3} {m.max_position_embeddings:>8}  {m.quantization or m.native_dtype}"
            f"{moe}"
        )
    print()
    print(f"Instance types (on-demand {PRICE_REGION}, prices of {PRICES_READ})")
    print(
        f"  {'instance type':<18} {'accelerators':<20} {'GiB':>6} {'CC':>4} {'vCPU':>5} {'RAM':>6} {'NVMe GB':>8} EFA  "
        f"{'$/h':>9}"
    )
    for i in INSTANCES:
        price = "-" if i.on_demand_usd_per_hour is None else f"{i.on_demand_usd_per_hour:.4f}"
        accel = f"{i.accelerators}{TIMES} {i.accelerator_name}"
        # CUDA compute capability: decides which checkpoint formats vLLM runs natively (catalog/formats.py).
        cc = "-" if i.compute_capability is None else "{}.{}".format(*i.compute_capability)
        print(
            f"  {i.instance_type:<18} {accel:<20} {i.accelerator_memory_gib:>6.1f} {cc:>4} {i.vcpus:>5} "
            f"{i.memory_gib:>6g} {i.local_nvme_gb:>8} {'yes' if i.efa else 'no ':<4} {price:>9}"
        )
