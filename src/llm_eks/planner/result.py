"""What a plan says: `Plan` (where the model runs, how it is split, what it holds, costs and takes to start), its
cold start, warnings and pod requests."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from llm_eks.catalog import auto_mode
from llm_eks.catalog.accelerators import PRICE_REGION, PRICES_READ, InstanceType
from llm_eks.catalog.models import ModelSpec
from llm_eks.planner.cold_start import ColdStart, ColdStartPath
from llm_eks.planner.compute_mode import AUTO_MODE, NodeReplacement, image_source_on, node_replacement
from llm_eks.planner.engine import EngineSettings, data_parallel_pod_flags, parallel_flags, vllm_flags
from llm_eks.planner.kv_events import Scoring, kv_events_config
from llm_eks.planner.kv_offload import Reuse, host_mib
from llm_eks.planner.neuron.engine import NeuronLayout, neuron_flags
from llm_eks.planner.neuron.sizing import NeuronFit
from llm_eks.planner.plan_warnings import PlanWarning
from llm_eks.planner.pods import PodResources, vllm_host_mib
from llm_eks.planner.request import PlanRequest
from llm_eks.planner.sizing import Context, Fit

# The multiplication sign of "1x L40S" in summaries, as an escape so linters do not mistake it for an x.
TIMES = "\N{MULTIPLICATION SIGN}"


def layout_text(tp: int, pp: int, dp: int = 1, expert_parallel: bool = False) -> str:
    """A split as summaries and tables show it: "TP8 PP2", or with expert parallelism "DP16 TP1 EP16"."""
    if expert_parallel:
        return f"DP{dp} TP{tp} EP{dp * tp}"
    return f"TP{tp} PP{pp}"


# The extended resource EFA interfaces are requested as (Karpenter's `vpc.amazonaws.com/efa`, which the EFA device
# plugin advertises): a multi-node replica's pods ask for all of their node's.
EFA_RESOURCE = "vpc.amazonaws.com/efa"


@dataclass(frozen=True)
class Plan:
    """A deployment of one model that fits: where it runs, how it is split, what it holds, costs and takes to start.

    It holds the request and the candidate the search chose (`fit`); what it says of them (the instance, the split,
    the memory and KV cache, the latency estimates) are properties read off the two."""

    request: PlanRequest
    # The chosen candidate: a sizing.Fit on GPUs; on a Neuron instance type a neuron.sizing.NeuronFit, whose
    # per-GPU figures are per NeuronCore and whose GPUs per pod are chips.
    fit: Fit | NeuronFit
    # vLLM --max-num-seqs, per data-parallel rank as vLLM applies it (the replica's, for TP x PP).
    max_num_seqs: int
    cold_start: ColdStart
    assumptions: tuple[str, ...]
    warnings: tuple[PlanWarning, ...] = field(default=())
    # Queue spike to a Ready replica by path, the one in use first (llm-eks plan prints them side by side).
    cold_start_paths: tuple[ColdStartPath, ...] = field(default=())
    # Whether separate prefill and decode pools pay for this request: a planner.disaggregation.Decision (typed Any:
    # that module imports this one); None only on a plan made without it (the search's candidates).
    disaggregation: Any = None
    # Where multi-turn prompts find their prefixes and the TTFT that follows (kv_offload.Reuse); None: single-turn
    # traffic, or a plan made without it (the search's candidates).
    prefix_reuse: Reuse | None = None
    # A plan on a Neuron instance type: its engine path, compiled shape and cores (tensor_parallel_size then counts
    # NeuronCores, gpus_per_pod chips, and the per-GPU memory figures are per core). None on GPUs.
    neuron: NeuronLayout | None = None
    # The endpoint picker's prefix-cache scorer (kv_events.Scoring): precise adds vLLM's KV-events flags to the
    # engine. None only on a plan made without it (the search's candidates): approximate, no events.
    prefix_cache: Scoring | None = None

    @cached_property
    def context(self) -> Context:
        """The request's figures that do not depend on the instance (weights, checkpoint, KV bytes per token), as the
        search worked them out."""
        return Context(self.request, suggest=False)

    @property
    def model(self) -> ModelSpec:
        return self.context.spec

    @property
    def served_model_name(self) -> str:
        """The name clients send: the requested model id."""
        return self.model.id

    @property
    def checkpoint(self) -> str:
        """The checkpoint vLLM loads (an AWQ repo for awq-int4)."""
        return self.context.checkpoint

    @property
    def weight_format(self) -> str:
        return self.context.fmt

    @property
    def kv_cache_dtype(self) -> str:
        return self.request.kv_cache_dtype

    @property
    def max_model_len(self) -> int:
        return self.context.max_len

    @property
    def gpu_memory_utilization(self) -> float:
        return self.request.gpu_memory_utilization

    @property
    def weight_bytes(self) -> int:
        return self.context.weight_bytes

    @property
    def checkpoint_bytes(self) -> int:
        """Bytes read at start-up (a 16-bit checkpoint when vLLM quantizes to fp8 at load)."""
        return self.context.checkpoint_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        return self.context.kv_bytes_per_token

    @property
    def instance(self) -> InstanceType:
        return self.fit.instance

    @property
    def tensor_parallel_size(self) -> int:
        return self.fit.tp

    @property
    def pipeline_parallel_size(self) -> int:
        return self.fit.pp

    @property
    def nodes_per_replica(self) -> int:
        return self.fit.nodes

    @property
    def replicas_per_node(self) -> int:
        return self.fit.replicas_per_node

    @property
    def gpus_per_pod(self) -> int:
        """Accelerators each pod requests (all of them per node when a replica spans nodes)."""
        return self.fit.gpus_per_pod

    @property
    def data_parallel_size(self) -> int:
        """Data-parallel ranks of the replica (vLLM --data-parallel-size; each with tensor_parallel_size GPUs, its own
        scheduler, max_num_seqs and KV cache)."""
        return self.fit.dp

    @property
    def data_parallel_size_local(self) -> int:
        """Data-parallel ranks on each node (--data-parallel-size-local)."""
        return self.fit.dp_local

    @property
    def expert_parallel(self) -> bool:
        """The routed experts spread whole over data_parallel_size x tensor_parallel_size GPUs
        (--enable-expert-parallel)."""
        return self.fit.expert_parallel

    @property
    def weight_bytes_per_gpu(self) -> int:
        return self.fit.weight_bytes_per_gpu

    @property
    def kv_bytes_per_token_per_gpu(self) -> int:
        return self.fit.kv_bytes_per_token_per_gpu

    @property
    def gpu_memory_bytes(self) -> int:
        return self.fit.gpu_memory_bytes

    @property
    def reserve_bytes_per_gpu(self) -> int:
        return self.fit.reserve_bytes_per_gpu

    @property
    def usable_bytes_per_gpu(self) -> int:
        """GPU memory x gpu_memory_utilization - reserve: what weights and KV cache share on each GPU."""
        return self.fit.usable_bytes_per_gpu

    @property
    def kv_cache_bytes_per_gpu(self) -> int:
        return self.fit.kv_cache_bytes_per_gpu

    @property
    def kv_cache_tokens(self) -> int:
        return self.fit.kv_cache_tokens

    @property
    def max_concurrency_full_context(self) -> int:
        return self.fit.full_context

    @property
    def max_concurrency_typical(self) -> int:
        return self.fit.typical

    @property
    def max_num_batched_tokens(self) -> int:
        return self.fit.max_num_batched_tokens

    # At target_concurrency sequences of the typical size (latency/model.py): the median inter-token latency (a
    # decode step), the mean time per output token (with chunked prefill mixed in), the median time to first token
    # and the output tokens per second one replica produces.
    @property
    def itl_estimate_ms(self) -> float:
        return self.fit.latency.itl_ms

    @property
    def tpot_estimate_ms(self) -> float:
        return self.fit.latency.tpot_ms

    @property
    def ttft_estimate_ms(self) -> float:
        return self.fit.latency.ttft_ms

    @property
    def output_tokens_per_s(self) -> float:
        return self.fit.latency.output_tokens_per_s

    @property
    def cost_per_replica_hour(self) -> float | None:
        cost = self.fit.cost
        return None if cost is None else round(cost, 4)

    @property
    def pod_resources(self) -> PodResources:
        return self.fit.pod

    @property
    def kv_offload_gib(self) -> float | None:
        """The CPU KV tier per engine (vLLM --kv-offloading-size, GiB); None: offload off."""
        return self.fit.kv_offload_gib

    @property
    def engines_per_pod(self) -> int:
        """vLLM engines a pod runs (data-parallel ranks on its node; 1 for TP x PP): each holds its own CPU tier."""
        return self.data_parallel_size_local if self.expert_parallel else 1

    @property
    def kv_offload_mib_per_pod(self) -> int:
        """Host memory (and /dev/shm) a pod's CPU KV tier takes, MiB; 0 with offload off."""
        return host_mib(self.kv_offload_gib, self.engines_per_pod)

    @property
    def instance_type(self) -> str:
        return self.instance.instance_type

    @property
    def instance_family(self) -> str:
        return self.instance.family

    @property
    def accelerator_name(self) -> str:
        return self.instance.accelerator_name

    @property
    def extended_resource(self) -> str:
        return self.instance.extended_resource

    @property
    def gpus_per_replica(self) -> int:
        """Accelerators (GPUs, or Neuron chips) of one replica."""
        cores = self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size
        return cores // self.instance.cores_per_accelerator if self.neuron is not None else cores

    @property
    def layout(self) -> str:
        """ "dp-ep" (data-parallel attention, experts over DP x TP GPUs) or "tp-pp"."""
        return "dp-ep" if self.expert_parallel else "tp-pp"

    @property
    def expert_parallel_size(self) -> int:
        """GPUs the routed experts are spread over (1: every GPU holds a TP slice of every expert)."""
        return self.tensor_parallel_size * self.data_parallel_size if self.expert_parallel else 1

    @property
    def efa_interfaces_per_pod(self) -> int:
        """EFA interfaces each pod of a multi-node replica requests (`vpc.amazonaws.com/efa`): all of its node's; a
        pod of a disaggregated plan whose KV moves over EFA (NIXL's libfabric backend), its share of its node's; 0 for
        an aggregated replica on one node, or on an instance type without EFA."""
        if self.nodes_per_replica > 1:
            return self.instance.efa_interfaces
        if self.disaggregation is not None and self.disaggregation.kv_over_efa:
            return max(1, self.instance.efa_interfaces * self.gpus_per_pod // self.instance.accelerators)
        return 0

    @property
    def usable_bytes_per_replica(self) -> int:
        return self.usable_bytes_per_gpu * self.gpus_per_replica

    @property
    def target_concurrency(self) -> int:
        return self.request.target_concurrency

    @property
    def warm_headroom_usd_per_hour(self) -> float | None:
        """What the warm placeholders cost: each holds a replica's node(s) around the clock; None without a price."""
        if self.cost_per_replica_hour is None:
            return None
        return round(self.request.warm_replicas * self.cost_per_replica_hour, 4)

    @property
    def node_image_source(self) -> str:
        """The image path a new node takes (on EKS Auto Mode, Auto Mode's own: planner/compute_mode.py)."""
        return image_source_on(self.request.compute, self.request.image_source, self.instance.family)

    @property
    def node_replacement(self) -> NodeReplacement:
        """How often the replicas' nodes are replaced, each a replica restart (planner/compute_mode.py)."""
        cold = self.cold_start
        return node_replacement(self.request.compute, self.nodes_per_replica, cold.total_s, cold.node_provision_s)

    @property
    def auto_mode_fee(self) -> str | None:
        """Auto Mode's fee beside the instance's $/h, as the plan prints it; None with self-managed Karpenter."""
        return auto_mode.fee_text(self.instance.instance_type) if self.request.compute == AUTO_MODE else None

    @property
    def meets_target(self) -> bool:
        return self.max_concurrency_typical >= self.request.target_concurrency

    @property
    def engine(self) -> EngineSettings:
        """The vLLM settings this plan sized; the charts render them (flags for vLLM, engine_kwargs for Ray)."""
        spec = self.model
        return EngineSettings(
            max_model_len=self.max_model_len,
            gpu_memory_utilization=self.gpu_memory_utilization,
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens,
            kv_cache_dtype=self.kv_cache_dtype,
            # Dynamic FP8 from the 16-bit checkpoint; AWQ and FP8 repos are auto-detected.
            quantization="fp8" if self.weight_format == "fp8" and spec.quantization != "fp8" else None,
            # The planner sizes 16-bit weights: never serve float32.
            dtype="bfloat16" if spec.native_dtype == "float32" and self.weight_format != "awq-int4" else "auto",
            lora_modules=() if self.request.lora is None else self.request.lora.adapters,
            max_lora_rank=16 if self.request.lora is None else self.request.lora.max_rank,
            language_model_only=spec.language_model_only,
            kv_offloading_size=self.kv_offload_gib,
            kv_events_config=(
                kv_events_config(self.served_model_name)
                if self.prefix_cache is not None and self.prefix_cache.precise
                else None
            ),
        )

    @property
    def engine_args(self) -> tuple[str, ...]:
        """The `vllm serve` flags every pod of this plan gets, rendered by the vLLM chart's own functions (for
        `llm-eks plan`); a multi-node replica's pods add their own (`pod_engine_args`)."""
        if self.neuron is not None:
            flags = neuron_flags(self.neuron.serving, self.engine)
            return ("--tensor-parallel-size", str(self.tensor_parallel_size), *flags, "--served-model-name",
                    self.served_model_name)  # fmt: skip
        args = parallel_flags(
            self.tensor_parallel_size,
            self.pipeline_parallel_size,
            self.data_parallel_size,
            self.data_parallel_size_local if self.nodes_per_replica > 1 else None,
            self.expert_parallel,
        )
        if self.nodes_per_replica > 1 and self.data_parallel_size == 1:
            # vLLM's multiprocessing backend across nodes: the LeaderWorkerSet adds each pod's --node-rank and the
            # leader's --master-addr (manifests/vllm/pod.py).
            args += ["--nnodes", str(self.nodes_per_replica)]
        return (*args, *vllm_flags(self.engine), "--served-model-name", self.served_model_name)

    def pod_engine_args(self, node_rank: int, leader_address: str) -> tuple[str, ...]:
        """The full `vllm serve` flags of the pod on node `node_rank` (0: the leader) of a multi-node data-parallel
        replica: engine_args plus the leader's address and, on the other nodes, --headless and the pod's first
        data-parallel rank (engine.data_parallel_pod_flags). Other plans: engine_args (a multi-node TP x PP
        replica's --node-rank and --master-addr are the chart's)."""
        if self.nodes_per_replica == 1 or self.data_parallel_size == 1:
            return self.engine_args
        if not 0 <= node_rank < self.nodes_per_replica:
            raise ValueError(f"node_rank {node_rank} is outside the replica's {self.nodes_per_replica} nodes")
        return (*self.engine_args, *data_parallel_pod_flags(node_rank, self.data_parallel_size_local, leader_address))

    def summary_line(self) -> str:
        """One line for `cdk synth` and the CLI."""
        inst = self.instance
        where = f"{inst.instance_type} ({inst.accelerators}{TIMES} {inst.accelerator_name})"
        if self.nodes_per_replica > 1:
            where = f"{self.nodes_per_replica}{TIMES} {where}"
            placement = f"{self.nodes_per_replica} nodes/replica"
        else:
            placement = f"{self.replicas_per_node} replica{'s' if self.replicas_per_node > 1 else ''}/node"
        cost = "no on-demand price" if self.cost_per_replica_hour is None else f"${self.cost_per_replica_hour:.2f}/h"
        split = layout_text(
            self.tensor_parallel_size, self.pipeline_parallel_size, self.data_parallel_size, self.expert_parallel
        )
        if self.neuron is not None:
            where = f"{inst.instance_type} ({inst.accelerators}{TIMES} {inst.accelerator_name}, {inst.cores} cores)"
            split = f"TP{self.tensor_parallel_size} on {self.gpus_per_pod} chip(s), {self.neuron.engine}"
            cost = "cost unknown" if self.cost_per_replica_hour is None else cost
        fee = "" if self.auto_mode_fee is None else f" ({self.auto_mode_fee})"
        return (
            f"{self.model.short_name} on {where}: {split}, "
            f"{placement}, KV {tokens_text(self.kv_cache_tokens)} tokens, {cost} per replica{fee}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready view (stable key order)."""
        inst = self.instance
        return {
            "summary": self.summary_line(),
            "model": {
                "id": self.model.id,
                "served_model_name": self.served_model_name,
                "checkpoint": self.checkpoint,
                "parameters": self.model.parameters,
                "weight_format": self.weight_format,
                "kv_cache_dtype": self.kv_cache_dtype,
                "max_model_len": self.max_model_len,
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
                "tensor_parallel_size": self.tensor_parallel_size,
                "pipeline_parallel_size": self.pipeline_parallel_size,
                "gpus_per_replica": self.gpus_per_replica,
                "nodes_per_replica": self.nodes_per_replica,
                "replicas_per_node": self.replicas_per_node,
                "gpus_per_pod": self.gpus_per_pod,
                "layout": self.layout,
                "data_parallel_size": self.data_parallel_size,
                "data_parallel_size_local": self.data_parallel_size_local,
                "expert_parallel_size": self.expert_parallel_size,
                "efa_interfaces_per_pod": self.efa_interfaces_per_pod,
            },
            "memory": {
                "weight_bytes": self.weight_bytes,
                "checkpoint_bytes": self.checkpoint_bytes,
                "weight_bytes_per_gpu": self.weight_bytes_per_gpu,
                "kv_bytes_per_token": self.kv_bytes_per_token,
                "kv_bytes_per_token_per_gpu": self.kv_bytes_per_token_per_gpu,
                "gpu_memory_bytes": self.gpu_memory_bytes,
                "gpu_memory_utilization": self.gpu_memory_utilization,
                "reserve_bytes_per_gpu": self.reserve_bytes_per_gpu,
                "usable_bytes_per_gpu": self.usable_bytes_per_gpu,
                "usable_bytes_per_replica": self.usable_bytes_per_replica,
                "kv_cache_bytes_per_gpu": self.kv_cache_bytes_per_gpu,
                "kv_cache_tokens": self.kv_cache_tokens,
            },
            "concurrency": {
                "target": self.request.target_concurrency,
                "typical_tokens": self.request.typical_tokens,
                "at_typical_size": self.max_concurrency_typical,
                "at_full_context": self.max_concurrency_full_context,
                "meets_target": self.meets_target,
                "itl_estimate_ms": self.itl_estimate_ms,
                "tpot_estimate_ms": self.tpot_estimate_ms,
                "ttft_estimate_ms": self.ttft_estimate_ms,
                "output_tokens_per_s": self.output_tokens_per_s,
            },
            "cost": {
                "usd_per_replica_hour": self.cost_per_replica_hour,
                "warm_replicas": self.request.warm_replicas,
                "warm_headroom_usd_per_hour": self.warm_headroom_usd_per_hour,
            },
            "compute": {
                "mode": self.request.compute,
                "auto_mode_fee_usd_per_hour": (
                    auto_mode.fee_usd_per_hour(inst.instance_type) if self.request.compute == AUTO_MODE else None
                ),
                "node_replacement": {
                    "every_days": self.node_replacement.every_days,
                    "restarts_per_replica_month": self.node_replacement.restarts_per_replica_month,
                    "restart_s": self.node_replacement.restart_s,
                    "why": self.node_replacement.why,
                },
            },
            "cold_start": {
                "image_pull_s": self.cold_start.image_pull_s,
                "weights_s": self.cold_start.weights_s,
                "weights_source": self.request.weights_source,
                "image_source": self.node_image_source,
                "warmup_s": self.cold_start.warmup_s,
                "total_s": self.cold_start.total_s,
                "startup_s": self.cold_start.startup_s,
                "node_provision_s": self.cold_start.node_provision_s,
                "scale_out_s": self.cold_start.scale_out_s,
                "paths": [asdict(path) for path in self.cold_start_paths],
            },
            "pod_resources": {
                "cpu": self.pod_resources.cpu,
                "memory": self.pod_resources.memory,
                self.extended_resource: self.gpus_per_pod,
                **({EFA_RESOURCE: self.efa_interfaces_per_pod} if self.efa_interfaces_per_pod else {}),
            },
            "engine_args": list(self.engine_args),
            "disaggregation": None if self.disaggregation is None else self.disaggregation.to_dict(),
            "kv_offload": {
                "setting": self.request.kv_offload,
                "gib_per_engine": self.kv_offload_gib,
                "engines_per_pod": self.engines_per_pod,
                "host_mib_per_pod": self.kv_offload_mib_per_pod,
                "vllm_host_mib_per_pod": vllm_host_mib(self.gpus_per_pod),
                "backend": None if self.kv_offload_gib is None else "native",
            },
            "prefix_reuse": None if self.prefix_reuse is None else self.prefix_reuse.to_dict(),
            "prefix_cache": None if self.prefix_cache is None else self.prefix_cache.to_dict(),
            "assumptions": list(self.assumptions),
            "warnings": [{"id": w.id, "message": w.message} for w in self.warnings],
            **({"neuron": self.neuron.to_dict()} if self.neuron is not None else {}),
        }


def tokens_text(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.0f}k"
    return str(n)
