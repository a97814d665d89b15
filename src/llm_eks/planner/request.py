"""What to plan: `PlanRequest`, every field validated when it is built (ConfigError naming `workload.<field>`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llm_eks.catalog import auto_mode
from llm_eks.catalog.accelerators import CATALOG as INSTANCE_CATALOG
from llm_eks.catalog.accelerators import INSTANCE_TYPES, unknown_name
from llm_eks.catalog.formats import FORMATS
from llm_eks.catalog.models import ModelSpec, model
from llm_eks.error_codes import E127, E201, E202, E205, E206, E207, E208
from llm_eks.errors import fail
from llm_eks.planner import kv_events
from llm_eks.planner.compute_mode import AUTO_MODE, COMPUTE_MODES
from llm_eks.planner.engine import GPU_MEMORY_UTILIZATION
from llm_eks.planner.kv_offload import THINK_TIME_S, max_turns
from llm_eks.planner.kv_offload import validate as validate_offload
from llm_eks.planner.tensor_split import attention_tensor_parallel_sizes, valid_tensor_parallel_sizes

# auto: the planner recommends separate prefill and decode pools where they cost less at the targets (planner/
# disaggregation.py); on: always plan them; off: never.
DISAGGREGATION_MODES = ("auto", "on", "off")

# Prefill replicas a request may fix: the most one model's prefill pool reasonably needs.
MAX_PREFILL_REPLICAS = 256

# Warm headroom beyond this is a second deployment, not headroom.
MAX_WARM_REPLICAS = 64
# auto: the checkpoint's own format; the others are llm_eks.catalog.formats (what vLLM 0.33 does with each per GPU).
WEIGHT_FORMATS = ("auto", *FORMATS)
# Formats vLLM can produce from a 16-bit checkpoint while loading (dynamic FP8); the others need a checkpoint in them.
LOAD_TIME_FORMATS = ("bf16", "fp8")

KV_CACHE_DTYPES = ("auto", "fp8")

WEIGHTS_SOURCES = ("nvme", "s3", "staged", "ebs")

# Where a node gets the serving image (plan/cold_start.py has the figures; not imported: it imports result).
IMAGE_SOURCES = ("pull", "parallel-pull", "snapshot")

# The values each choice field of PlanRequest takes: validation checks them, `llm-eks plan --help` lists them.
CHOICES: dict[str, tuple[str, ...]] = {
    "weight_format": WEIGHT_FORMATS,
    "kv_cache_dtype": KV_CACHE_DTYPES,
    "weights_source": WEIGHTS_SOURCES,
    "image_source": IMAGE_SOURCES,
    "compute": COMPUTE_MODES,
    "disaggregation": DISAGGREGATION_MODES,
    "prefix_cache_scorer": kv_events.SETTINGS,
}

MAX_TARGET_CONCURRENCY = 4096

MAX_NODES_PER_REPLICA = 16

# Upper bound of an explicit max_num_seqs: well above vLLM 0.33's largest default (1024 on H100/H200/B200, doubled by
# performance_mode throughput; EngineArgs.get_batch_defaults), so any real deployment can be reproduced.
MAX_NUM_SEQS = 16384

# vLLM 0.33's choices of --max-lora-rank (vllm/config/lora.py, MaxLoRARanks).
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)

# The multiplication sign of "TP2 x PP2" in messages (result.TIMES; not imported: result imports this module).
_TIMES = "\N{MULTIPLICATION SIGN}"


@dataclass(frozen=True)
class LoraAdapters:
    """LoRA adapters served beside the base model (vLLM --enable-lora): (name, Hugging Face repo id) pairs. Every
    adapter gets a GPU slot (max_loras), so any mix of them can share one batch."""

    adapters: tuple[tuple[str, str], ...]
    # vLLM's default; an adapter of a higher rank fails to load.
    max_rank: int = 16

    @property
    def max_loras(self) -> int:
        return len(self.adapters)


@dataclass(frozen=True)
class PlanRequest:
    """What to serve and the targets to meet; every field is validated (ConfigError naming `workload.<field>`)."""

    # A catalog id (see llm_eks.catalog.models) or a ModelSpec for any other model.
    model: str | ModelSpec
    # auto: the checkpoint's own format; bf16 (16-bit), fp8 (vLLM quantizes a 16-bit checkpoint at load), or the
    # format of a quantized checkpoint (llm_eks.catalog.formats).
    weight_format: str = "auto"
    # auto: the activation dtype (2 bytes per value); fp8 halves the KV cache.
    kv_cache_dtype: str = "auto"
    # None: the model's max_position_embeddings.
    max_model_len: int | None = None
    # vLLM 0.33's own default (engine.GPU_MEMORY_UTILIZATION); the rest holds the CUDA context, NCCL and cuBLAS.
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION
    # "auto" (the cheapest GPU instance type that meets the targets) or a catalog instance type; a Neuron one (inf2,
    # trn1, trn1n, trn2) is planned on its engine path (planner/neuron), never chosen by auto.
    accelerator: str = "auto"
    # Concurrent sequences per replica at the typical request size.
    target_concurrency: int = 16
    typical_input_tokens: int = 1024
    typical_output_tokens: int = 256
    # nvme: Hugging Face download cached on the instance store; s3: Run:ai Model Streamer; staged: the same from the
    # environment's weights bucket, with the torch.compile cache restored from it; ebs: a gp3 volume.
    weights_source: str = "nvme"
    # parallel-pull: what llm-eks's Bottlerocket GPU nodes do by default (SOCI parallel pull and unpack); pull:
    # containerd's default; snapshot: a data volume restored from an image snapshot (workload.image_snapshot_id).
    image_source: str = "parallel-pull"
    # karpenter: llm-eks's self-managed Karpenter and node classes; auto-mode: EKS Auto Mode's nodes (no image
    # snapshot, its own parallel pull, weekly node replacement, a management fee; planner/compute_mode.py).
    compute: str = "karpenter"
    # A replica may span at most this many nodes (pipeline stages, or a MoE model's data-parallel ranks) when one
    # node cannot hold the model.
    max_nodes_per_replica: int = 2
    # Optional inter-token latency ceiling (ms) the time-per-output-token estimate must meet at target_concurrency;
    # None: not checked.
    max_itl_ms: float | None = None
    # Optional time-to-first-token ceiling (ms) the TTFT estimate must meet at target_concurrency; None: not checked.
    max_ttft_ms: float | None = None
    # Reproduce a vLLM deployment: the sizes `vllm serve` takes. None: the planner chooses (the default).
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    # None: target_concurrency, capped by what fits at the typical size. Given: what vLLM schedules and profiles.
    max_num_seqs: int | None = None
    # Replica-shaped placeholder pods kept warm (config's workload.warm_replicas); the plan prices them.
    warm_replicas: int = 0
    # LoRA adapters beside the base model; their GPU buffers come off the KV cache. None: LoRA off.
    lora: LoraAdapters | None = None
    # Reproduce vLLM's data-parallel layout for a MoE model (--data-parallel-size): DP attention ranks, each with TP
    # inside, their experts spread over DP x TP GPUs. None: the planner chooses (1 unless expert parallelism wins).
    data_parallel_size: int | None = None
    # vLLM's --enable-expert-parallel (off by default in vLLM): True plans only DP x EP layouts, False only TP x PP.
    # None: the planner compares both for a MoE model and keeps TP x PP for a dense one.
    enable_expert_parallel: bool | None = None
    # A replica may span nodes of an instance type without EFA (activations then cross nodes over TCP). False: such
    # a plan is refused with a one-line error (config: acknowledged_warnings llm-eks:plan-no-efa sets it).
    allow_without_efa: bool = False
    # Separate prefill and decode pools (vLLM's NixlConnector): auto recommends them only where they cost less per
    # million output tokens at the targets (or meet targets one pool misses); on plans them always; off never.
    disaggregation: str = "auto"
    # Prefill replicas of a disaggregated plan; None: the fewest that meet max_ttft_ms (the planner sizes it).
    prefill_replicas: int | None = None
    # A CPU tier for the KV cache (vLLM --kv-offloading-size, GiB per engine; "auto": what the pod's memory share
    # holds beyond vLLM's needs). None (off): it only pays where prompts share prefixes the GPU cache evicts
    # (multi-turn chat, agents), and it takes host memory and start-up time (planner/kv_offload.py).
    kv_offload: float | str | None = None
    # Turns per conversation: above 1 the plan estimates the prefix reuse of multi-turn traffic (kv_offload.reuse).
    conversation_turns: int = 1
    # Mean seconds between an answer and the conversation's next message (an assumption the reuse estimate uses).
    think_time_s: float = THINK_TIME_S
    # How the gateway's endpoint picker scores prefix-cache hits: auto is precise (vLLM's KV-cache events, the CPU
    # tier included) where kv_offload is on and the picker can use it, approximate elsewhere (planner/kv_events.py).
    prefix_cache_scorer: str = kv_events.AUTO
    # What the environment gives the picker (gateway, vLLM's API key, engine), from the workload's config; None
    # (`llm-eks plan --model`): planned as if behind a gateway with api_key false, and the plan says so.
    picker: kv_events.Picker | None = None

    def __post_init__(self) -> None:
        validate_request(self)

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

    @property
    def fixed_shape(self) -> bool:
        """True when the request names a tensor or pipeline parallel size (the search then tries only those)."""
        return self.tensor_parallel_size is not None or self.pipeline_parallel_size is not None

    @property
    def expert_parallel_only(self) -> bool:
        """True when the request fixes a DP x EP layout (enable_expert_parallel, or a data_parallel_size above 1)."""
        dp = self.data_parallel_size
        # Checked before validate_request has typed the sizes (_validate_vllm_sizes reads it).
        return self.enable_expert_parallel is True or (type(dp) is int and dp > 1)

    @property
    def scheduled_sequences(self) -> int:
        """Sequences vLLM may batch, which its profiling run (and so the activation peak) uses: max_num_seqs when
        given, else target_concurrency (the chosen max_num_seqs never exceeds it)."""
        return self.max_num_seqs if self.max_num_seqs is not None else self.target_concurrency


def validate_request(r: PlanRequest) -> None:
    if isinstance(r.model, ModelSpec):
        r.model.validate("workload.model_spec")
        spec = r.model
    elif isinstance(r.model, str):
        spec = model(r.model)
    else:
        raise fail(E202, "workload.model", r.model, "must be a catalog model id or a ModelSpec")
    for name, allowed in CHOICES.items():
        _choice(name, getattr(r, name), allowed)
    _check_weight_format(r.weight_format, spec)
    for name in ("typical_input_tokens", "typical_output_tokens"):
        _int_between(name, getattr(r, name), 1, spec.max_position_embeddings)
    if r.max_model_len is not None:
        _int_between("max_model_len", r.max_model_len, 1, spec.max_position_embeddings)
    typical = r.typical_input_tokens + r.typical_output_tokens
    max_len = r.max_model_len if r.max_model_len is not None else spec.max_position_embeddings
    if max_len < typical:
        raise fail(
            E202,
            "workload.max_model_len",
            max_len,
            f"must hold the typical request (typical_input_tokens + typical_output_tokens = {typical})",
        )
    util = r.gpu_memory_utilization
    if isinstance(util, bool) or not isinstance(util, int | float) or not 0 < util <= 1:
        raise fail(E202, "workload.gpu_memory_utilization", util, "must be a number above 0 and at most 1")
    if r.accelerator != "auto":
        inst = INSTANCE_TYPES.get(r.accelerator) if isinstance(r.accelerator, str) else None
        if inst is None:
            raise unknown_name(E201, "workload.accelerator", r.accelerator, ["auto", *INSTANCE_TYPES])
    _check_compute(r)
    _int_between("target_concurrency", r.target_concurrency, 1, MAX_TARGET_CONCURRENCY)
    _int_between("warm_replicas", r.warm_replicas, 0, MAX_WARM_REPLICAS)
    _int_between("max_nodes_per_replica", r.max_nodes_per_replica, 1, MAX_NODES_PER_REPLICA)
    for name in ("max_itl_ms", "max_ttft_ms"):
        ceiling = getattr(r, name)
        if ceiling is not None and (
            isinstance(ceiling, bool) or not isinstance(ceiling, int | float) or not 0 < ceiling <= 600_000
        ):
            raise fail(
                E202, f"workload.{name}", ceiling, "must be null or a positive number of milliseconds (at most 600000)"
            )
    if r.picker is not None and not isinstance(r.picker, kv_events.Picker):
        raise fail(E202, "workload.picker", r.picker, "must be a kv_events.Picker or None")
    if not isinstance(r.allow_without_efa, bool):
        raise fail(E202, "workload.allow_without_efa", r.allow_without_efa, "must be true or false")
    if r.prefill_replicas is not None:
        _int_between("prefill_replicas", r.prefill_replicas, 1, MAX_PREFILL_REPLICAS)
        if r.disaggregation == "off":
            raise fail(
                E202,
                "workload.prefill_replicas",
                r.prefill_replicas,
                "sizes a prefill pool, and disaggregation is off: set disaggregation on or auto, or leave it out",
            )
    _validate_vllm_sizes(r, spec)
    _validate_lora(r.lora, spec)
    _validate_expert_parallel(r, spec)
    _validate_offload(r)


def _validate_offload(r: PlanRequest) -> None:
    """kv_offload and the multi-turn traffic the reuse estimate reads (planner/kv_offload.py)."""
    validate_offload(r.kv_offload, r.conversation_turns, r.think_time_s)
    inst = INSTANCE_TYPES.get(r.accelerator) if r.accelerator != "auto" else None
    if r.kv_offload is not None and inst is not None and inst.accelerator_vendor == "neuron":
        raise fail(
            E208,
            "workload.kv_offload",
            r.kv_offload,
            f"vLLM's CPU tier runs on CUDA GPUs (vLLM 0.33's CPUOffloadingSpec refuses other devices); "
            f"{inst.instance_type} runs Neuron's engine path: leave it out",
        )
    most = max_turns(r.typical_input_tokens, r.typical_output_tokens)
    if r.conversation_turns > most:
        raise fail(
            E208,
            "workload.conversation_turns",
            r.conversation_turns,
            f"turns of {r.typical_output_tokens} output tokens cannot average {r.typical_input_tokens} prompt "
            f"tokens (each prompt carries every earlier turn): at most {most}; raise typical_input_tokens",
        )


def _check_compute(r: PlanRequest) -> None:
    """What Auto Mode cannot do: restore an image snapshot, or launch a family it does not list."""
    if r.compute != AUTO_MODE:
        return
    if r.image_source == "snapshot":
        raise fail(
            E207,
            "workload.image_source",
            r.image_source,
            "needs a node data volume restored from an EBS snapshot, which EKS Auto Mode cannot give (its NodeClass "
            "takes no block device mappings or user data); Auto Mode nodes pull the image (compute auto-mode), or "
            "use compute karpenter to keep the snapshot",
        )
    if r.accelerator != "auto" and isinstance(r.accelerator, str):
        reason = auto_mode.unsupported_reason(auto_mode.family_of(r.accelerator))
        if reason is not None:
            raise fail(E201, "workload.accelerator", r.accelerator, f"{reason}; choose another instance type or auto")


def _validate_lora(lora: LoraAdapters | None, spec: ModelSpec) -> None:
    if lora is None:
        return
    if not lora.adapters:
        raise fail(E127, "workload.lora_adapters", {}, "must name at least one adapter (or leave it out)")
    if lora.max_rank not in LORA_RANKS:
        raise fail(E127, "workload.max_lora_rank", lora.max_rank, f"must be one of {', '.join(map(str, LORA_RANKS))}")
    if spec.is_mla:
        raise fail(
            E127,
            "workload.lora_adapters",
            dict(lora.adapters),
            f"{spec.id} uses multi-head latent attention, whose LoRA buffers the planner does not model; serve "
            "the adapters merged into their own checkpoints instead",
        )


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if name == kv_events.FIELD:
        # The workload's own check, message and code (E141), as cdk.json's value gets.
        kv_events.validate_setting(value, "workload")
    elif not isinstance(value, str) or value not in allowed:
        raise unknown_name(E205 if name == "weight_format" else E202, f"workload.{name}", value, list(allowed))


def _int_between(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise fail(E202, f"workload.{name}", value, f"must be an integer from {low} to {high}")


def _check_weight_format(fmt: str, spec: ModelSpec) -> None:
    if fmt == "auto":
        return
    if spec.quantization is not None and fmt != spec.quantization:
        raise fail(
            E205,
            "workload.weight_format",
            fmt,
            f"{spec.id} is already quantized ({spec.quantization}); use auto or {spec.quantization}",
        )
    if fmt == "awq-int4" and spec.quantization is None and spec.awq_checkpoint is None:
        raise fail(
            E205,
            "workload.weight_format",
            fmt,
            f"no AWQ checkpoint of {spec.id} is known; serve an AWQ repo as the model, described with "
            "workload.model_spec (quantization: awq-int4), or use bf16 or fp8",
        )
    if spec.quantization is None and fmt not in (*LOAD_TIME_FORMATS, "awq-int4"):
        raise fail(
            E205,
            "workload.weight_format",
            fmt,
            f"{spec.id} is a 16-bit checkpoint and vLLM makes only fp8 from one at load; serve a {fmt} checkpoint as "
            "the model (llm-eks plan --model-config its config.json, or workload.model_spec), or use bf16 or fp8",
        )


def _validate_vllm_sizes(r: PlanRequest, spec: ModelSpec) -> None:
    """Explicit tensor/pipeline parallel sizes and max_num_seqs: what vLLM accepts for the model, on the instance (a
    Neuron instance type's sizes are its engine path's, checked where it is planned: planner/neuron)."""
    inst = INSTANCE_TYPES[r.accelerator] if r.accelerator != "auto" else None
    tp, pp = r.tensor_parallel_size, r.pipeline_parallel_size
    if inst is not None and inst.accelerator_vendor == "neuron":
        if tp is not None:
            _int_between("tensor_parallel_size", tp, 1, inst.cores)
        if pp is not None:
            _int_between("pipeline_parallel_size", pp, 1, spec.layers)
        tp = pp = None
    # A DP x EP layout (its GPUs are DP x TP, checked with data_parallel_size).
    ep = r.expert_parallel_only
    if tp is not None:
        # Tensor parallelism stays inside one node (NVLink or PCIe); nodes are spanned with pipeline stages.
        node_gpus = inst.accelerators if inst is not None else _MAX_GPUS_PER_NODE
        # Under expert parallelism each GPU holds whole experts, so their width need not split over TP.
        sizes = (attention_tensor_parallel_sizes if ep else valid_tensor_parallel_sizes)(spec, node_gpus)
        if isinstance(tp, bool) or not isinstance(tp, int) or tp not in sizes:
            where = f"on {inst.instance_type} ({node_gpus} GPUs per node)" if inst else f"(up to {node_gpus} GPUs)"
            raise fail(
                E206,
                "workload.tensor_parallel_size",
                tp,
                f"valid sizes for {spec.id} {where}: {', '.join(map(str, sizes))} (its {spec.attention_heads} "
                f"attention heads and {spec.kv_heads} KV heads must split evenly, and tensor parallelism stays inside "
                "one node; span nodes with pipeline_parallel_size)",
            )
    if pp is not None and (isinstance(pp, bool) or not isinstance(pp, int) or not 1 <= pp <= spec.layers):
        raise fail(
            E206,
            "workload.pipeline_parallel_size",
            pp,
            f"must be an integer from 1 to {spec.layers} (each stage holds at least one of {spec.id}'s "
            f"{spec.layers} layers)",
        )
    if tp is not None and pp is not None and not ep:
        _check_gpus_per_replica(r, tp, pp, inst)
    mns = r.max_num_seqs
    if mns is not None:
        _int_between("max_num_seqs", mns, 1, MAX_NUM_SEQS)
        dp = r.data_parallel_size if isinstance(r.data_parallel_size, int) and r.data_parallel_size > 1 else 1
        if mns * dp < r.target_concurrency:
            must = f"times data_parallel_size {dp} (vLLM applies it per DP rank) must be" if dp > 1 else "must be"
            raise fail(
                E206,
                "workload.max_num_seqs",
                mns,
                f"{must} at least target_concurrency ({r.target_concurrency}): a replica never runs more than "
                "max_num_seqs sequences at once; lower target_concurrency and scale out with replicas instead",
            )


def _check_gpus_per_replica(r: PlanRequest, tp: int, pp: int, inst: Any) -> None:
    gpus = tp * pp
    shape = f"TP{tp} {_TIMES} PP{pp} = {gpus} GPUs"
    if inst is None:
        # auto: a replica fills its node(s), as when the planner chooses (the price per replica holds without
        # assuming other pods pack in).
        allowed = sorted({n * k for n in _GPUS_PER_NODE for k in range(1, r.max_nodes_per_replica + 1)})
        if gpus not in allowed:
            raise fail(
                E206,
                "workload.pipeline_parallel_size",
                pp,
                f"{shape}; with accelerator auto a replica fills whole nodes, so TP {_TIMES} PP must be one of "
                f"{', '.join(map(str, allowed))} (GPUs per node of a catalog instance type, times up to "
                f"max_nodes_per_replica {r.max_nodes_per_replica} nodes); or name an accelerator",
            )
        return
    n = inst.accelerators
    if gpus > n and gpus % n:
        raise fail(
            E206,
            "workload.pipeline_parallel_size",
            pp,
            f"{shape} must fit one {inst.instance_type} node ({n} GPU{'s' if n > 1 else ''}) or span whole nodes "
            f"(a multiple of {n})",
        )
    if gpus > n and gpus // n > r.max_nodes_per_replica:
        raise fail(
            E206,
            "workload.pipeline_parallel_size",
            pp,
            f"{shape} spans {gpus // n} {inst.instance_type} nodes; max_nodes_per_replica is "
            f"{r.max_nodes_per_replica}: raise it or use fewer stages",
        )


# The most data-parallel ranks a request may name: every GPU of MAX_NODES_PER_REPLICA nodes of 8.
MAX_DATA_PARALLEL_SIZE = 8 * MAX_NODES_PER_REPLICA


def _validate_expert_parallel(r: PlanRequest, spec: ModelSpec) -> None:
    """data_parallel_size and enable_expert_parallel: what vLLM 0.33 runs and the planner models. vLLM spreads the
    routed experts over EP = DP x TP GPUs as evenly as it can (fused_moe/expert_map_manager.py determine_expert_map:
    the first E mod EP ranks take one expert more) and requires EP to divide them only with EPLB (fused_moe/layer.py,
    "EPLB currently only supports even distribution"), which the planner never enables; so any EP size is accepted
    and the heaviest GPU holds ceil(E / EP) experts."""
    dp, ep = r.data_parallel_size, r.enable_expert_parallel
    if ep is not None and not isinstance(ep, bool):
        raise fail(E206, "workload.enable_expert_parallel", ep, "must be true, false or null (the planner chooses)")
    if dp is not None:
        _int_between("data_parallel_size", dp, 1, MAX_DATA_PARALLEL_SIZE)
    if not spec.is_moe:
        if ep:
            raise fail(
                E206,
                "workload.enable_expert_parallel",
                ep,
                f"{spec.id} is dense: it has no experts to spread; leave it out or set it false",
            )
        if dp is not None and dp > 1:
            raise fail(
                E206,
                "workload.data_parallel_size",
                dp,
                f"the planner models data parallelism for MoE models (attention per DP rank, experts over DP x TP); "
                f"{spec.id} is dense: scale it out with replicas",
            )
        return
    if ep is False and dp is not None and dp > 1:
        raise fail(
            E206,
            "workload.data_parallel_size",
            dp,
            "without expert parallelism vLLM shards every expert over DP x TP GPUs (FusedMoEParallelConfig.make), "
            "which the planner does not model; set enable_expert_parallel true or leave data_parallel_size out",
        )
    if not r.expert_parallel_only:
        return
    pp = r.pipeline_parallel_size
    if pp is not None and pp > 1:
        raise fail(
            E206,
            "workload.pipeline_parallel_size",
            pp,
            "the planner models expert parallelism without pipeline stages: use 1 (or leave it out) with "
            "data_parallel_size or enable_expert_parallel",
        )
    if r.lora is not None:
        raise fail(
            E206,
            "workload.lora_adapters",
            dict(r.lora.adapters),
            "the planner does not model LoRA buffers under expert parallelism; set enable_expert_parallel false",
        )
    tp = r.tensor_parallel_size
    if tp is not None and dp is not None and tp * dp == 1:
        raise fail(
            E206,
            "workload.data_parallel_size",
            dp,
            "expert parallelism needs more than one GPU: vLLM turns it off unless data_parallel_size x "
            "tensor_parallel_size > 1 (FusedMoEParallelConfig.make); raise either",
        )
    if tp is not None and dp is not None:
        _check_expert_parallel_gpus(r, tp, dp)


def _check_expert_parallel_gpus(r: PlanRequest, tp: int, dp: int) -> None:
    gpus = tp * dp
    shape = f"DP{dp} {_TIMES} TP{tp} = {gpus} GPUs"
    inst = INSTANCE_TYPES[r.accelerator] if r.accelerator != "auto" else None
    if inst is None:
        allowed = sorted({n * k for n in _GPUS_PER_NODE for k in range(1, r.max_nodes_per_replica + 1)})
        if gpus not in allowed:
            raise fail(
                E206,
                "workload.data_parallel_size",
                dp,
                f"{shape}; with accelerator auto a replica fills whole nodes, so DP {_TIMES} TP must be one of "
                f"{', '.join(map(str, allowed))}; or name an accelerator",
            )
        return
    n = inst.accelerators
    if gpus > n and (gpus % n or gpus // n > r.max_nodes_per_replica):
        raise fail(
            E206,
            "workload.data_parallel_size",
            dp,
            f"{shape} must fit one {inst.instance_type} node ({n} GPUs) or whole nodes (a multiple of {n}, at most "
            f"max_nodes_per_replica {r.max_nodes_per_replica} of them)",
        )


# GPUs per node of the NVIDIA instance types a request may name, and the most of them (the widest tensor split).
_GPUS_PER_NODE = sorted({row.accelerators for row in INSTANCE_CATALOG if row.accelerator_vendor == "nvidia"})

_MAX_GPUS_PER_NODE = _GPUS_PER_NODE[-1]
