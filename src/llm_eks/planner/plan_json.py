"""A plan as JSON (`llm-eks plan --json`, `Plan.to_dict`): every figure the table prints and the inputs behind
them, in a stable key order that scripts read."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from llm_eks.catalog import auto_mode
from llm_eks.catalog.accelerators import PRICE_REGION, PRICES_READ
from llm_eks.planner.compute_mode import AUTO_MODE
from llm_eks.planner.pods import EFA_RESOURCE, vllm_host_mib

if TYPE_CHECKING:
    from llm_eks.planner.result import Plan


def plan_dict(plan: Plan) -> dict[str, Any]:
    """`plan` as a JSON-ready dict."""
    inst = plan.instance
    return {
        "summary": plan.summary_line(),
        "model": {
            "id": plan.model.id,
            "served_model_name": plan.served_model_name,
            "checkpoint": plan.checkpoint,
            "parameters": plan.model.parameters,
            "weight_format": plan.weight_format,
            "kv_cache_dtype": plan.kv_cache_dtype,
            "max_model_len": plan.max_model_len,
        },
        "instance": {
            "instance_type": inst.instance_type,
            "instance_family": inst.family,
            "accelerator_name": inst.accelerator_name,
            "accelerator_vendor": inst.accelerator_vendor,
            "ray_accelerator_type": inst.ray_accelerator_type,
            "karpenter_name": inst.karpenter_name,
            "extended_resource": inst.extended_resource,
            "accelerators_per_node": inst.accelerators,
            "accelerator_memory_gib": round(inst.accelerator_memory_gib, 2),
            "on_demand_usd_per_hour": inst.on_demand_usd_per_hour,
            "efa_interfaces": inst.efa_interfaces,
            "prices_read": PRICES_READ,
            "price_region": PRICE_REGION,
        },
        "parallelism": {
            "tensor_parallel_size": plan.tensor_parallel_size,
            "pipeline_parallel_size": plan.pipeline_parallel_size,
            "gpus_per_replica": plan.gpus_per_replica,
            "nodes_per_replica": plan.nodes_per_replica,
            "replicas_per_node": plan.replicas_per_node,
            "gpus_per_pod": plan.gpus_per_pod,
            "layout": plan.layout,
            "data_parallel_size": plan.data_parallel_size,
            "data_parallel_size_local": plan.data_parallel_size_local,
            "expert_parallel_size": plan.expert_parallel_size,
            "efa_interfaces_per_pod": plan.efa_interfaces_per_pod,
        },
        "memory": {
            "weight_bytes": plan.weight_bytes,
            "checkpoint_bytes": plan.checkpoint_bytes,
            "weight_bytes_per_gpu": plan.weight_bytes_per_gpu,
            "kv_bytes_per_token": plan.kv_bytes_per_token,
            "kv_bytes_per_token_per_gpu": plan.kv_bytes_per_token_per_gpu,
            "gpu_memory_bytes": plan.gpu_memory_bytes,
            "gpu_memory_utilization": plan.gpu_memory_utilization,
            "reserve_bytes_per_gpu": plan.reserve_bytes_per_gpu,
            "usable_bytes_per_gpu": plan.usable_bytes_per_gpu,
            "usable_bytes_per_replica": plan.usable_bytes_per_replica,
            "kv_cache_bytes_per_gpu": plan.kv_cache_bytes_per_gpu,
            "kv_cache_tokens": plan.kv_cache_tokens,
        },
        "concurrency": {
            "target": plan.request.target_concurrency,
            "typical_tokens": plan.request.typical_tokens,
            "at_typical_size": plan.max_concurrency_typical,
            "at_full_context": plan.max_concurrency_full_context,
            "meets_target": plan.meets_target,
            "itl_estimate_ms": plan.itl_estimate_ms,
            "tpot_estimate_ms": plan.tpot_estimate_ms,
            "ttft_estimate_ms": plan.ttft_estimate_ms,
            "output_tokens_per_s": plan.output_tokens_per_s,
        },
        "cost": {
            "usd_per_replica_hour": plan.cost_per_replica_hour,
            "warm_replicas": plan.request.warm_replicas,
            "warm_headroom_usd_per_hour": plan.warm_headroom_usd_per_hour,
        },
        "compute": {
            "mode": plan.request.compute,
            "auto_mode_fee_usd_per_hour": (
                auto_mode.fee_usd_per_hour(inst.instance_type) if plan.request.compute == AUTO_MODE else None
            ),
            "node_replacement": {
                "every_days": plan.node_replacement.every_days,
                "restarts_per_replica_month": plan.node_replacement.restarts_per_replica_month,
                "restart_s": plan.node_replacement.restart_s,
                "why": plan.node_replacement.why,
            },
        },
        "cold_start": {
            "image_pull_s": plan.cold_start.image_pull_s,
            "weights_s": plan.cold_start.weights_s,
            "weights_source": plan.request.weights_source,
            "image_source": plan.node_image_source,
            "warmup_s": plan.cold_start.warmup_s,
            "total_s": plan.cold_start.total_s,
            "startup_s": plan.cold_start.startup_s,
            "node_provision_s": plan.cold_start.node_provision_s,
            "scale_out_s": plan.cold_start.scale_out_s,
            "paths": [asdict(path) for path in plan.cold_start_paths],
        },
        "pod_resources": {
            "cpu": plan.pod_resources.cpu,
            "memory": plan.pod_resources.memory,
            plan.extended_resource: plan.gpus_per_pod,
            **({EFA_RESOURCE: plan.efa_interfaces_per_pod} if plan.efa_interfaces_per_pod else {}),
        },
        "engine_args": list(plan.engine_args),
        "disaggregation": None if plan.disaggregation is None else plan.disaggregation.to_dict(),
        "kv_offload": {
            "setting": plan.request.kv_offload,
            "gib_per_engine": plan.kv_offload_gib,
            "engines_per_pod": plan.engines_per_pod,
            "host_mib_per_pod": plan.kv_offload_mib_per_pod,
            "vllm_host_mib_per_pod": vllm_host_mib(plan.gpus_per_pod),
            "backend": None if plan.kv_offload_gib is None else "native",
        },
        "prefix_reuse": None if plan.prefix_reuse is None else plan.prefix_reuse.to_dict(),
        "prefix_cache": None if plan.prefix_cache is None else plan.prefix_cache.to_dict(),
        "assumptions": list(plan.assumptions),
        "warnings": [{"id": w.id, "message": w.message} for w in plan.warnings],
        **({"neuron": plan.neuron.to_dict()} if plan.neuron is not None else {}),
    }
