"""Capacity planner: model x weight format x KV-cache dtype x context x accelerator -> a vLLM deployment that fits.

Pure and deterministic: the same request always gives the same plan, and nothing here imports aws_cdk, cdk8s or
jsii (the `llm-eks plan` CLI must answer in well under a second). The numbers it produces (instance type, GPUs per
replica, tensor/pipeline parallel sizes, engine settings, pod requests, cold-start time) are the single source the
constructs and charts use.

Memory model, per GPU (vLLM V1 semantics):
    budget   = GPU memory x gpu_memory_utilization        (vLLM's own cap for everything it allocates)
    reserve  = fixed + fraction x GPU memory + activation peak
    usable   = budget - reserve
    KV cache = usable - weights on this GPU, in blocks of 16 tokens
The replica's KV-cache capacity in tokens is the smallest over its GPUs (vLLM allocates the same number of blocks on
every worker), so pipeline stages are sized by the heaviest stage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from llm_eks.catalog.accelerators import CATALOG as INSTANCE_CATALOG
from llm_eks.catalog.accelerators import (
    INSTANCE_TYPES,
    PRICE_REGION,
    PRICES_READ,
    InstanceType,
    instance_type,
    unknown_name,
)
from llm_eks.catalog.models import ModelSpec, model
from llm_eks.errors import ConfigError, fail
from llm_eks.manifests.engine import EngineSettings, parallel_flags, vllm_flags

GIB = 1024**3
# The multiplication sign of "1x L40S" in summaries, as an escape so linters do not mistake it for an x.
TIMES = "\N{MULTIPLICATION SIGN}"

WEIGHT_FORMATS = ("auto", "bf16", "fp8", "awq-int4")
KV_CACHE_DTYPES = ("auto", "fp8")
WEIGHTS_SOURCES = ("nvme", "s3", "ebs")

# --- Assumptions (each one is listed, with its number, in every plan's `assumptions`) -------------------------------
# AWQ int4 with group size 128 (the AutoAWQ default): 4-bit weights plus one fp16 scale and one packed 4-bit zero per
# group of 128 weights = 0.5 + 2.5/128 bytes per quantized weight. Embeddings and the output projection stay 16-bit.
AWQ_GROUP_SIZE = 128
AWQ_BYTES_PER_PARAM = 0.5 + 2.5 / AWQ_GROUP_SIZE
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
# Tensor-parallel sizes tried: powers of two (node GPU counts are powers of two, and NCCL/custom all-reduce are
# tuned for them).
TP_SIZES = (1, 2, 4, 8, 16)
MAX_TARGET_CONCURRENCY = 4096
MAX_NODES_PER_REPLICA = 16
# Pods share a node with DaemonSets (CNI, kube-proxy, CSI drivers, device plugin, DCGM and node exporters, log
# agent): keep this much of the node's allocatable CPU and memory for them.
DAEMONSET_CPU_MILLICORES = 1000
DAEMONSET_MEMORY_MIB = 2048
# Host memory a vLLM pod needs at least: API server, engine core, tokenizer, plus per GPU worker process.
MIN_POD_MEMORY_MIB = 6144
MIN_POD_MEMORY_PER_GPU_MIB = 2048
# Cold start. The vLLM OpenAI image is ~12 GB compressed (28.6 GB unpacked, vllm-project/vllm#22377, #27154); pull
# and unpack run at ~100 MB/s effective (layer download plus single-threaded gzip extraction by containerd).
IMAGE_COMPRESSED_BYTES = 12e9
IMAGE_PULL_BYTES_PER_S = 100e6
# nvme: a fresh node downloads the checkpoint from the Hugging Face Hub (~200 MB/s with hf-xet's parallel
# downloads, capped at 80 % of the instance's baseline network bandwidth) into the instance-store cache, then vLLM
# reads it from NVMe at ~2 GB/s.
HF_DOWNLOAD_BYTES_PER_S = 200e6
NVME_READ_BYTES_PER_S = 2e9
# s3: the Run:ai Model Streamer reads safetensors from S3 with many concurrent ranged GETs straight into GPU memory:
# ~2 GB/s, capped at 80 % of the instance's baseline network bandwidth.
S3_STREAM_BYTES_PER_S = 2e9
# ebs: weights on an initialized gp3 volume provisioned at 1,000 MiB/s (a snapshot-restored volume is lazily loaded
# and far slower unless Fast Snapshot Restore is on), capped at 90 % of the instance's dedicated EBS bandwidth.
EBS_GP3_BYTES_PER_S = 1000 * 1024**2
NETWORK_SHARE = 0.8
EBS_SHARE = 0.9
# Engine warm-up: process start, model init and tokenizer (20 s), torch.compile with an empty cache on a fresh node
# (60 s), CUDA-graph capture (20 s), plus NCCL set-up and slower compile per doubling of GPUs (10 s each) and Ray
# worker start-up per extra node (30 s). Conservative figures from vLLM start-up logs, not measurements of ours.
WARMUP_BASE_S = 20 + 60 + 20
WARMUP_PER_GPU_DOUBLING_S = 10
WARMUP_PER_EXTRA_NODE_S = 30
# Karpenter launch to a Ready node with GPUs advertised by the device plugin (EKS-optimized GPU AMI).
NODE_PROVISION_S = 90
# Inter-token latency estimate: a decode step reads this GPU's weights plus the KV cache of every running sequence,
# at 75 % of datasheet bandwidth, plus two all-reduces per layer when TP > 1 (~10 us over NVLink/NVSwitch, ~30 us
# over PCIe) and ~0.2 ms per pipeline hand-off.
ACHIEVABLE_BANDWIDTH = 0.75
ALL_REDUCE_US_NVLINK = 10
ALL_REDUCE_US_PCIE = 30
PIPELINE_HOP_MS = 0.2


@dataclass(frozen=True)
class PlanRequest:
    """What to serve and the targets to meet; every field is validated (ConfigError naming `workload.<field>`)."""

    # A catalog id (see llm_eks.catalog.models) or a ModelSpec for any other model.
    model: str | ModelSpec
    # auto: the checkpoint's own format; bf16 (16-bit), fp8 (vLLM quantizes a 16-bit checkpoint at load), awq-int4.
    weight_format: str = "auto"
    # auto: the activation dtype (2 bytes per value); fp8 halves the KV cache.
    kv_cache_dtype: str = "auto"
    # None: the model's max_position_embeddings.
    max_model_len: int | None = None
    # vLLM's default; the rest is headroom for the CUDA context outside vLLM's accounting.
    gpu_memory_utilization: float = 0.90
    # "auto" (the cheapest instance that meets the targets) or a catalog instance type.
    accelerator: str = "auto"
    # Concurrent sequences per replica at the typical request size.
    target_concurrency: int = 16
    typical_input_tokens: int = 1024
    typical_output_tokens: int = 256
    # nvme: Hugging Face download cached on the instance store; s3: Run:ai Model Streamer; ebs: a gp3 volume.
    weights_source: str = "nvme"
    # Pipeline parallelism may span at most this many nodes when one node cannot hold the model.
    max_nodes_per_replica: int = 2
    # Optional inter-token latency ceiling (ms) the estimate must meet at target_concurrency; None: not checked.
    max_itl_ms: float | None = None

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def spec(self) -> ModelSpec:
        """The model's architecture (catalog entry or the given spec)."""
        return self.model if isinstance(self.model, ModelSpec) else model(self.model)

    @property
    def resolved_weight_format(self) -> str:
        if self.weight_format != "auto":
            return self.weight_format
        return self.spec.quantization or "bf16"

    @property
    def resolved_max_model_len(self) -> int:
        return self.max_model_len if self.max_model_len is not None else self.spec.max_position_embeddings

    @property
    def typical_tokens(self) -> int:
        return self.typical_input_tokens + self.typical_output_tokens


@dataclass(frozen=True)
class ColdStart:
    """Modelled time from a pod being scheduled to serving, and its parts (seconds)."""

    image_pull_s: float
    weights_s: float
    warmup_s: float
    # Image pull + weights + warm-up, on a node that is already up.
    total_s: float
    # Container start to serving (weights + warm-up): what the startup probe must allow.
    startup_s: float
    # Karpenter launch to a Ready GPU node.
    node_provision_s: float
    # A replica that needs a new node: node provisioning + total.
    scale_out_s: float


# Plan warning ids: stable, so a user can acknowledge one (`cdk.Annotations.of(scope).acknowledge_warning(id, why)`)
# while the message keeps its numbers.
WARN_CONCURRENCY = "llm-eks:plan-concurrency"
WARN_ITL = "llm-eks:plan-itl"
WARN_NO_EFA = "llm-eks:plan-no-efa"
WARN_NO_PRICE = "llm-eks:plan-no-price"
WARNING_IDS = (WARN_CONCURRENCY, WARN_ITL, WARN_NO_EFA, WARN_NO_PRICE)


@dataclass(frozen=True)
class PlanWarning:
    """Something the plan could not meet or could not know; the stack turns it into a CDK warning annotation."""

    id: str
    message: str

    def __str__(self) -> str:
        return f"{self.message} [ack: {self.id}]"


@dataclass(frozen=True)
class PodResources:
    """Requests for one vLLM pod: its share of the node's allocatable CPU and memory after DaemonSets."""

    cpu_millicores: int
    memory_mib: int

    @property
    def cpu(self) -> str:
        return f"{self.cpu_millicores}m"

    @property
    def memory(self) -> str:
        return f"{self.memory_mib}Mi"


@dataclass(frozen=True)
class Plan:
    """A deployment of one model that fits: where it runs, how it is split, what it holds, costs and takes to start."""

    request: PlanRequest
    model: ModelSpec
    # The served name clients send (the requested model id) and the checkpoint vLLM loads (an AWQ repo for awq-int4).
    served_model_name: str
    checkpoint: str
    weight_format: str
    kv_cache_dtype: str
    max_model_len: int
    gpu_memory_utilization: float
    instance: InstanceType
    tensor_parallel_size: int
    pipeline_parallel_size: int
    nodes_per_replica: int
    replicas_per_node: int
    # Accelerators each pod requests (all of them per node when a replica spans nodes).
    gpus_per_pod: int
    weight_bytes: int
    # Bytes read at start-up (a 16-bit checkpoint when vLLM quantizes to fp8 at load).
    checkpoint_bytes: int
    weight_bytes_per_gpu: int
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    gpu_memory_bytes: int
    reserve_bytes_per_gpu: int
    # GPU memory x gpu_memory_utilization - reserve: what weights and KV cache share on each GPU.
    usable_bytes_per_gpu: int
    kv_cache_bytes_per_gpu: int
    kv_cache_tokens: int
    max_concurrency_full_context: int
    max_concurrency_typical: int
    max_num_seqs: int
    max_num_batched_tokens: int
    itl_estimate_ms: float
    cost_per_replica_hour: float | None
    cold_start: ColdStart
    pod_resources: PodResources
    assumptions: tuple[str, ...]
    warnings: tuple[PlanWarning, ...] = field(default=())

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
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def usable_bytes_per_replica(self) -> int:
        return self.usable_bytes_per_gpu * self.gpus_per_replica

    @property
    def target_concurrency(self) -> int:
        return self.request.target_concurrency

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
        )

    @property
    def engine_args(self) -> tuple[str, ...]:
        """The `vllm serve` flags of this plan, rendered by the vLLM chart's own functions (for `llm-eks plan`)."""
        args = parallel_flags(self.tensor_parallel_size, self.pipeline_parallel_size)
        if self.nodes_per_replica > 1:
            args += ["--distributed-executor-backend", "ray"]  # workers on other nodes join through a Ray cluster
        return (*args, *vllm_flags(self.engine), "--served-model-name", self.served_model_name)

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
        return (
            f"{self.model.short_name} on {where}: TP{self.tensor_parallel_size} PP{self.pipeline_parallel_size}, "
            f"{placement}, KV {_tokens(self.kv_cache_tokens)} tokens, {cost} per replica"
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
            },
            "cost": {"usd_per_replica_hour": self.cost_per_replica_hour},
            "cold_start": {
                "image_pull_s": self.cold_start.image_pull_s,
                "weights_s": self.cold_start.weights_s,
                "weights_source": self.request.weights_source,
                "warmup_s": self.cold_start.warmup_s,
                "total_s": self.cold_start.total_s,
                "startup_s": self.cold_start.startup_s,
                "node_provision_s": self.cold_start.node_provision_s,
                "scale_out_s": self.cold_start.scale_out_s,
            },
            "pod_resources": {
                "cpu": self.pod_resources.cpu,
                "memory": self.pod_resources.memory,
                self.extended_resource: self.gpus_per_pod,
            },
            "engine_args": list(self.engine_args),
            "assumptions": list(self.assumptions),
            "warnings": [{"id": w.id, "message": w.message} for w in self.warnings],
        }


def valid_tensor_parallel_sizes(spec: ModelSpec, max_size: int) -> tuple[int, ...]:
    """Tensor-parallel sizes vLLM accepts for this model, up to `max_size` (the GPUs of one node).

    vLLM's rule (ModelConfig.verify_with_parallel_config and QKVParallelLinear): attention heads must be divisible
    by TP; KV heads are split when TP <= KV heads (so KV heads must be divisible by TP) and replicated when
    TP > KV heads (so TP must be a multiple of KV heads). The MLP's intermediate size must split evenly too.
    """
    sizes = []
    for tp in TP_SIZES:
        if tp > max_size or spec.attention_heads % tp:
            continue
        kv_ok = spec.kv_heads % tp == 0 if tp <= spec.kv_heads else tp % spec.kv_heads == 0
        if kv_ok and spec.intermediate_size % tp == 0:
            sizes.append(tp)
    return tuple(sizes)


def plan(request: PlanRequest) -> Plan:
    """The deployment plan for `request`; ConfigError (one line) when nothing fits."""
    ctx = _Context(request)
    if request.accelerator == "auto":
        return _auto(ctx)
    return _explicit(ctx, instance_type(request.accelerator))


# --- Validation -----------------------------------------------------------------------------------------------------


def _validate(r: PlanRequest) -> None:
    if isinstance(r.model, ModelSpec):
        r.model.validate("workload.model_spec")
        spec = r.model
    elif isinstance(r.model, str):
        spec = model(r.model)
    else:
        raise fail("workload.model", r.model, "must be a catalog model id or a ModelSpec")
    _choice("weight_format", r.weight_format, WEIGHT_FORMATS)
    _check_weight_format(r.weight_format, spec)
    _choice("kv_cache_dtype", r.kv_cache_dtype, KV_CACHE_DTYPES)
    for name in ("typical_input_tokens", "typical_output_tokens"):
        _int_between(name, getattr(r, name), 1, spec.max_position_embeddings)
    if r.max_model_len is not None:
        _int_between("max_model_len", r.max_model_len, 1, spec.max_position_embeddings)
    typical = r.typical_input_tokens + r.typical_output_tokens
    max_len = r.max_model_len if r.max_model_len is not None else spec.max_position_embeddings
    if max_len < typical:
        raise fail(
            "workload.max_model_len",
            max_len,
            f"must hold the typical request (typical_input_tokens + typical_output_tokens = {typical})",
        )
    util = r.gpu_memory_utilization
    if isinstance(util, bool) or not isinstance(util, int | float) or not 0 < util <= 1:
        raise fail("workload.gpu_memory_utilization", util, "must be a number above 0 and at most 1")
    if r.accelerator != "auto":
        inst = INSTANCE_TYPES.get(r.accelerator) if isinstance(r.accelerator, str) else None
        if inst is None:
            raise unknown_name("workload.accelerator", r.accelerator, ["auto", *_GPU_NAMES])
        if inst.accelerator_vendor != "nvidia":
            raise fail(
                "workload.accelerator",
                r.accelerator,
                "the planner models vLLM on NVIDIA GPUs only (Inferentia2 serving compiles the model ahead of time "
                "for fixed batch and sequence buckets, which this memory model does not describe); "
                "choose an NVIDIA instance type or auto",
            )
    _int_between("target_concurrency", r.target_concurrency, 1, MAX_TARGET_CONCURRENCY)
    _choice("weights_source", r.weights_source, WEIGHTS_SOURCES)
    _int_between("max_nodes_per_replica", r.max_nodes_per_replica, 1, MAX_NODES_PER_REPLICA)
    itl = r.max_itl_ms
    if itl is not None and (isinstance(itl, bool) or not isinstance(itl, int | float) or not 0 < itl <= 60_000):
        raise fail("workload.max_itl_ms", itl, "must be null or a positive number of milliseconds (at most 60000)")


# Instance types a request may name: the NVIDIA rows (see the Inferentia2 message above).
_GPU_NAMES = [row.instance_type for row in INSTANCE_CATALOG if row.accelerator_vendor == "nvidia"]


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in allowed:
        raise unknown_name(f"workload.{name}", value, list(allowed))


def _int_between(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise fail(f"workload.{name}", value, f"must be an integer from {low} to {high}")


def _check_weight_format(fmt: str, spec: ModelSpec) -> None:
    if fmt == "auto":
        return
    if spec.quantization is not None and fmt != spec.quantization:
        raise fail(
            "workload.weight_format",
            fmt,
            f"{spec.id} is already quantized ({spec.quantization}); use auto or {spec.quantization}",
        )
    if fmt == "awq-int4" and spec.quantization is None and spec.awq_checkpoint is None:
        raise fail(
            "workload.weight_format",
            fmt,
            f"no AWQ checkpoint of {spec.id} is known; serve an AWQ repo as the model, described with "
            "workload.model_spec (quantization: awq-int4), or use bf16 or fp8",
        )


# --- Sizing ---------------------------------------------------------------------------------------------------------


class _Context:
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
class _Fit:
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


def _batched_tokens(inst: InstanceType, target: int) -> int:
    # vLLM's own default for the OpenAI server (EngineArgs.get_batch_defaults): 8192 on GPUs with >= 70 GiB that are
    # not A100s (larger chunks cost A100 throughput, vLLM PR #17885), 2048 elsewhere. Set explicitly so the
    # activation reserve above matches what runs; never below max_num_seqs (vLLM requires it).
    big = inst.accelerator_memory_gib >= 70 and not inst.accelerator_name.startswith("A100")
    return max(8192 if big else 2048, target)


def _evaluate(ctx: _Context, inst: InstanceType, tp: int, pp: int, nodes: int) -> _Fit:
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
    batched = _batched_tokens(inst, r.target_concurrency)
    experts = spec.experts_per_token if spec.is_moe else 1
    activation = (
        batched
        * (
            ACTIVATION_HIDDEN_BUFFERS * spec.hidden_size * 2
            + ACTIVATION_MLP_BUFFERS * 2 * spec.intermediate_size * experts // tp
        )
        + r.target_concurrency * spec.vocab_size * 4 * 2
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
    return _Fit(
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


def _shapes(ctx: _Context, inst: InstanceType) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    """(tp, pp, nodes) to try on `inst`: one-node shapes (smallest first), then multi-node ones."""
    spec = ctx.spec
    sizes = valid_tensor_parallel_sizes(spec, inst.accelerators)
    widest = sizes[-1]
    single = [(tp, 1, 1) for tp in sizes]
    # When the heads cap TP below the node's GPUs (e.g. 28 heads on 8 GPUs: TP <= 4), pipeline stages inside the
    # node use the rest.
    pp = 2
    while widest * pp <= inst.accelerators and pp <= spec.layers:
        single.append((widest, pp, 1))
        pp *= 2
    multi = []
    for nodes in range(2, ctx.request.max_nodes_per_replica + 1):
        pp = nodes * inst.accelerators // widest
        if pp <= spec.layers:
            multi.append((widest, pp, nodes))
    return single, multi


def _usable(ctx: _Context, fit: _Fit) -> bool:
    """Fits at full context, on a node with enough host memory and (for nvme) instance store."""
    return fit.fits and fit.host_memory_ok and fit.nvme_ok


def _meets(ctx: _Context, fit: _Fit) -> bool:
    itl = ctx.request.max_itl_ms
    return fit.typical >= ctx.request.target_concurrency and (itl is None or fit.itl_ms <= itl)


def _explicit(ctx: _Context, inst: InstanceType) -> Plan:
    single, multi = _shapes(ctx, inst)
    for shapes in (single, multi):
        fits = [f for f in (_evaluate(ctx, inst, *s) for s in shapes) if _usable(ctx, f)]
        if not fits:
            continue
        for fit in fits:  # smallest first: the smallest split that meets the targets
            if _meets(ctx, fit):
                return _build(ctx, fit, ())
        best = max(fits, key=lambda f: (f.typical, -f.gpus))
        return _build(ctx, best, tuple(_shortfalls(ctx, best)))
    raise _no_fit_on(ctx, inst, single, multi)


def _auto(ctx: _Context) -> Plan:
    fitting: list[_Fit] = []
    for multi_node in (False, True):
        for inst in INSTANCE_CATALOG:
            if inst.accelerator_vendor != "nvidia" or inst.on_demand_usd_per_hour is None:
                continue
            single, multi = _shapes(ctx, inst)
            # A replica fills its node(s): the price per replica then holds without assuming other pods pack in.
            shapes = multi if multi_node else [s for s in single if s[0] * s[1] == inst.accelerators]
            fitting += [f for f in (_evaluate(ctx, inst, *s) for s in shapes) if _usable(ctx, f)]
        meeting = [f for f in fitting if _meets(ctx, f)]
        if meeting:
            best = min(meeting, key=lambda f: (f.cost, f.gpus * f.nodes, -f.kv_cache_tokens, f.instance.instance_type))
            return _build(ctx, best, ())
    r, spec = ctx.request, ctx.spec
    if not fitting:
        raise fail(
            "workload.model",
            spec.id,
            f"at {ctx.fmt} ({ctx.weight_bytes / 1e9:.1f} GB of weights) it fits no catalog instance type at "
            f"max_model_len {ctx.max_len} across up to {r.max_nodes_per_replica} node(s) per replica; "
            f"{_remedies(ctx, bigger=False)}",
        )
    best = max(fitting, key=lambda f: (f.typical, -(f.cost or 0)))
    if best.typical < r.target_concurrency:
        raise fail(
            "workload.target_concurrency",
            r.target_concurrency,
            f"at most {best.typical} sequences of {ctx.typical} tokens fit one replica "
            f"(on {_where(best)}); lower it, shorten the typical request or use kv_cache_dtype fp8, "
            "and scale out with replicas instead",
        )
    fastest = min((f for f in fitting if f.typical >= r.target_concurrency), key=lambda f: f.itl_ms)
    raise fail(
        "workload.max_itl_ms",
        r.max_itl_ms,
        f"the lowest inter-token latency estimate at {r.target_concurrency} concurrent sequences is "
        f"{fastest.itl_ms} ms (on {_where(fastest)}); raise it, lower target_concurrency or use fp8 weights",
    )


def _where(fit: _Fit) -> str:
    inst = fit.instance
    nodes = f"{fit.nodes}{TIMES} " if fit.nodes > 1 else ""
    return f"{nodes}{inst.instance_type}, TP{fit.tp} PP{fit.pp}"


def _shortfalls(ctx: _Context, fit: _Fit) -> list[PlanWarning]:
    r = ctx.request
    out = []
    if fit.typical < r.target_concurrency:
        out.append(
            PlanWarning(
                WARN_CONCURRENCY,
                f"only {fit.typical} of the {r.target_concurrency} target sequences of {ctx.typical} tokens fit one "
                f"replica on {fit.instance.instance_type}; max_num_seqs is capped at {max(fit.typical, 1)}",
            )
        )
    if r.max_itl_ms is not None and fit.itl_ms > r.max_itl_ms:
        out.append(
            PlanWarning(WARN_ITL, f"inter-token latency estimate {fit.itl_ms} ms exceeds max_itl_ms {r.max_itl_ms:g}")
        )
    return out


def _remedies(ctx: _Context, bigger: bool) -> str:
    steps = []
    if ctx.fmt == "bf16":
        steps.append("weight_format fp8" + (" or awq-int4" if ctx.spec.awq_checkpoint else ""))
    elif ctx.fmt == "fp8" and ctx.spec.awq_checkpoint and ctx.spec.quantization is None:
        steps.append("weight_format awq-int4")
    if ctx.request.kv_cache_dtype == "auto":
        steps.append("kv_cache_dtype fp8")
    steps.append("a shorter max_model_len")
    if bigger:
        steps.append("a bigger instance")
    else:
        steps.append("a larger max_nodes_per_replica")
    return "use " + ", ".join(steps[:-1]) + " or " + steps[-1]


def _no_fit_on(
    ctx: _Context, inst: InstanceType, single: list[tuple[int, int, int]], multi: list[tuple[int, int, int]]
) -> ConfigError:
    spec, r = ctx.spec, ctx.request
    fits = [_evaluate(ctx, inst, *s) for s in single + multi]
    memory_fits = [f for f in fits if f.fits]
    if memory_fits and not any(f.nvme_ok for f in memory_fits):
        return fail(
            "workload.weights_source",
            r.weights_source,
            f"the {ctx.checkpoint_bytes / 1e9:.1f} GB checkpoint (plus 10 % headroom) does not fit the "
            f"{inst.local_nvme_gb} GB instance store of {inst.instance_type}; use s3 or ebs",
        )
    if memory_fits:
        worst = memory_fits[0]
        return fail(
            "workload.accelerator",
            inst.instance_type,
            f"a pod's share of its host memory ({worst.pod.memory_mib} MiB) is below the "
            f"{MIN_POD_MEMORY_MIB + MIN_POD_MEMORY_PER_GPU_MIB * worst.gpus_per_pod} MiB vLLM needs; "
            "choose a larger size of the family",
        )
    nodes = max([s[2] for s in single + multi])
    span = f"{nodes} node{'s' if nodes > 1 else ''}"
    suggestion = ""
    try:
        alternative = _auto(ctx)
        suggestion = f" such as {alternative.instance_type}"
    except ConfigError:
        pass
    return fail(
        "workload.accelerator",
        inst.instance_type,
        f"{spec.id} at {ctx.fmt} ({ctx.weight_bytes / 1e9:.1f} GB of weights, "
        f"{ctx.kv_bytes_per_token // 1024} KiB of KV cache per token) does not fit max_model_len {ctx.max_len} "
        f"on {span} of {inst.accelerators}{TIMES} {inst.accelerator_name} "
        f"({inst.accelerator_memory_gib:.1f} GiB each); "
        f"{_remedies(ctx, bigger=True)}{suggestion}",
    )


def _build(ctx: _Context, fit: _Fit, warnings: tuple[PlanWarning, ...]) -> Plan:
    r, spec, inst = ctx.request, ctx.spec, fit.instance
    max_num_seqs = max(1, min(r.target_concurrency, fit.typical))
    cold = _cold_start(ctx, fit)
    extra = list(warnings)
    if fit.nodes > 1 and not inst.efa:
        extra.append(
            PlanWarning(WARN_NO_EFA, f"{inst.instance_type} has no EFA: pipeline stages exchange activations over TCP")
        )
    if inst.on_demand_usd_per_hour is None:
        extra.append(PlanWarning(WARN_NO_PRICE, f"{inst.instance_type}: {inst.note or 'no on-demand price'}"))
    return Plan(
        request=r,
        model=spec,
        served_model_name=spec.id,
        checkpoint=ctx.checkpoint,
        weight_format=ctx.fmt,
        kv_cache_dtype=r.kv_cache_dtype,
        max_model_len=ctx.max_len,
        gpu_memory_utilization=r.gpu_memory_utilization,
        instance=inst,
        tensor_parallel_size=fit.tp,
        pipeline_parallel_size=fit.pp,
        nodes_per_replica=fit.nodes,
        replicas_per_node=fit.replicas_per_node,
        gpus_per_pod=fit.gpus_per_pod,
        weight_bytes=ctx.weight_bytes,
        checkpoint_bytes=ctx.checkpoint_bytes,
        weight_bytes_per_gpu=fit.weight_bytes_per_gpu,
        kv_bytes_per_token=ctx.kv_bytes_per_token,
        kv_bytes_per_token_per_gpu=fit.kv_bytes_per_token_per_gpu,
        gpu_memory_bytes=fit.gpu_memory_bytes,
        reserve_bytes_per_gpu=fit.reserve_bytes_per_gpu,
        usable_bytes_per_gpu=fit.usable_bytes_per_gpu,
        kv_cache_bytes_per_gpu=fit.kv_cache_bytes_per_gpu,
        kv_cache_tokens=fit.kv_cache_tokens,
        max_concurrency_full_context=fit.full_context,
        max_concurrency_typical=fit.typical,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=fit.max_num_batched_tokens,
        itl_estimate_ms=fit.itl_ms,
        cost_per_replica_hour=None if fit.cost is None else round(fit.cost, 4),
        cold_start=cold,
        pod_resources=fit.pod,
        assumptions=tuple(_assumptions(ctx, fit)),
        warnings=tuple(extra),
    )


def _weights_seconds(ctx: _Context, fit: _Fit) -> float:
    inst, source = fit.instance, ctx.request.weights_source
    network = inst.network_gbps * 1e9 / 8 * NETWORK_SHARE
    per_node = ctx.checkpoint_bytes / fit.nodes  # each node reads its own stages
    if source == "nvme":
        # hf download fetches the whole repo on every node (in parallel), then each node reads its stages.
        return ctx.checkpoint_bytes / min(HF_DOWNLOAD_BYTES_PER_S, network) + per_node / NVME_READ_BYTES_PER_S
    if source == "s3":
        return per_node / min(S3_STREAM_BYTES_PER_S, network)
    ebs = inst.ebs_bandwidth_mbps * 1e6 / 8 * EBS_SHARE
    return per_node / min(EBS_GP3_BYTES_PER_S, ebs)


def _cold_start(ctx: _Context, fit: _Fit) -> ColdStart:
    pull = IMAGE_COMPRESSED_BYTES / IMAGE_PULL_BYTES_PER_S
    weights = _weights_seconds(ctx, fit)
    warmup = WARMUP_BASE_S + WARMUP_PER_GPU_DOUBLING_S * math.log2(fit.gpus) + WARMUP_PER_EXTRA_NODE_S * (fit.nodes - 1)
    total = pull + weights + warmup
    return ColdStart(
        image_pull_s=round(pull),
        weights_s=round(weights),
        warmup_s=round(warmup),
        total_s=round(total),
        startup_s=round(weights + warmup),
        node_provision_s=NODE_PROVISION_S,
        scale_out_s=round(NODE_PROVISION_S + total),
    )


def _assumptions(ctx: _Context, fit: _Fit) -> list[str]:
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
        f"max_num_seqs = target_concurrency ({r.target_concurrency}), capped by what fits at the typical size",
        f"pod requests: node allocatable less {DAEMONSET_CPU_MILLICORES}m CPU and {DAEMONSET_MEMORY_MIB} MiB for "
        f"DaemonSets, split over {fit.replicas_per_node} pod(s) per node",
        f"image pull: {IMAGE_COMPRESSED_BYTES / 1e9:.0f} GB compressed vLLM image at "
        f"{IMAGE_PULL_BYTES_PER_S / 1e6:.0f} MB/s",
        _weights_assumption(r.weights_source),
        f"warm-up: {WARMUP_BASE_S} s (start-up, torch.compile with a cold cache, CUDA graphs) + "
        f"{WARMUP_PER_GPU_DOUBLING_S} s per doubling of GPUs + {WARMUP_PER_EXTRA_NODE_S} s per extra node",
        f"node provisioning: {NODE_PROVISION_S} s from Karpenter launch to a Ready GPU node",
        f"inter-token latency: weights + KV read per step at {ACHIEVABLE_BANDWIDTH:.0%} of "
        f"{inst.memory_bandwidth_gbps:g} GB/s, plus all-reduce and pipeline hops",
        f"price: on-demand {PRICE_REGION}, AWS Price List of {PRICES_READ}",
    ]
    if ctx.fmt == "fp8" and ctx.spec.quantization is None:
        out.append(
            "fp8: vLLM quantizes the 16-bit checkpoint layer by layer while loading (vllm#31914, so the 16-bit "
            "model never sits whole in GPU memory); start-up reads the 16-bit files"
        )
    return out


def _weights_assumption(source: str) -> str:
    if source == "nvme":
        return (
            f"weights (nvme): Hugging Face download at {HF_DOWNLOAD_BYTES_PER_S / 1e6:.0f} MB/s "
            f"(at most {NETWORK_SHARE:.0%} of baseline network) into the instance store, read at "
            f"{NVME_READ_BYTES_PER_S / 1e9:.0f} GB/s"
        )
    if source == "s3":
        return (
            f"weights (s3): Run:ai Model Streamer at {S3_STREAM_BYTES_PER_S / 1e9:.0f} GB/s "
            f"(at most {NETWORK_SHARE:.0%} of baseline network)"
        )
    return (
        f"weights (ebs): initialized gp3 volume at {EBS_GP3_BYTES_PER_S / 1024**2:.0f} MiB/s "
        f"(at most {EBS_SHARE:.0%} of the instance's EBS bandwidth)"
    )


def _tokens(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.0f}k"
    return str(n)
