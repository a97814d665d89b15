"""The vLLM engine settings a serving chart passes to vLLM: typed here, rendered only where they are used.

The planner fills an `EngineSettings`; the vLLM chart renders it as `vllm serve` flags (`vllm_flags`) and the Ray
Serve chart as LLMConfig `engine_kwargs` (`ray_engine_kwargs`). `llm-eks plan` shows the same flags through the same
functions, so what the plan prints is what the pod runs.

Pure Python (no cdk8s import): the planner and the CLI use it and must stay fast.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llm_eks.error_codes import E202
from llm_eks.errors import ConfigError, fail
from llm_eks.planner import kv_events
from llm_eks.validation import HF_REPO, LORA_NAME, whole_number

# A vLLM choice value (dtype, KV-cache dtype, quantization method): one lower-case word, never a flag.
_CHOICE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
# A restored adapter's folder in the pod, and a Hub revision.
_LOCAL_PATH = re.compile(r"^/[A-Za-z0-9._/-]+$")
_REVISION = re.compile(r"^[A-Za-z0-9._+][A-Za-z0-9._/+-]{0,254}$")

# The default of every gpu_memory_utilization (EngineSettings, PlanRequest, the config's workload, `llm-eks plan`):
# vLLM 0.33's own default (CacheConfig.gpu_memory_utilization = Field(default=0.92), vllm/config/cache.py in the
# 0.33.0 wheel), kept because its remaining 8 % is where the CUDA context, NCCL and cuBLAS live (planner/memory.py).
GPU_MEMORY_UTILIZATION = 0.92


@dataclass(frozen=True)
class EngineSettings:
    """What vLLM needs to size and run one model; the parallel sizes live on the chart props (they place pods)."""

    # The longest request (prompt + output) in tokens; the KV cache is sized to hold at least one.
    max_model_len: int
    # vLLM 0.33's own default (GPU_MEMORY_UTILIZATION); the rest holds the CUDA context, outside vLLM's accounting.
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION
    # Sequences per scheduler step (the replica's concurrency); None keeps vLLM's default.
    max_num_seqs: int | None = None
    # Tokens per scheduler step; None keeps vLLM's default (which depends on the GPU).
    max_num_batched_tokens: int | None = None
    # "auto" stores the KV cache in the activation dtype; "fp8" halves it.
    kv_cache_dtype: str = "auto"
    # None lets vLLM detect the checkpoint's quantization (AWQ, FP8 repos); "fp8" quantizes a 16-bit checkpoint at load.
    quantization: str | None = None
    # "auto" runs the checkpoint's dtype; "bfloat16" for float32 checkpoints the planner sized at 16 bits.
    dtype: str = "auto"
    # LoRA adapters served beside the base model, (name, Hugging Face repo id); each gets a GPU slot (--max-loras).
    lora_modules: tuple[tuple[str, str], ...] = ()
    # vLLM's default rank cap; an adapter of a higher rank fails to load.
    max_lora_rank: int = 16
    # The Hub commit (or branch, tag) vLLM downloads the checkpoint at; None: the repo's default branch, or weights
    # that do not come from the Hub.
    revision: str | None = None
    # Run the checkpoint's own Python code (--trust-remote-code); off unless the workload asks.
    trust_remote_code: bool = False
    # Serve a multimodal checkpoint's decoder alone (--language-model-only: vLLM neither builds nor loads its vision
    # tower); off unless the model is catalogued text-only (ModelSpec.language_model_only).
    language_model_only: bool = False
    # A CPU tier for the KV cache, GiB per engine (--kv-offloading-size with the native backend); None: off, the
    # planner sizes it (planner/kv_offload.py).
    kv_offloading_size: float | None = None
    # vLLM's KV-cache events for the endpoint picker's precise prefix-cache scorer (--kv-events-config JSON, with
    # the render endpoints it tokenizes on); None: the picker's approximate scorer, no events (planner/kv_events.py).
    kv_events_config: str | None = None


def validate_engine(settings: EngineSettings, path: str) -> None:
    """Raise ConfigError (one line naming `<path>.<field>`) on the first bad setting."""
    for name, value in (
        ("max_model_len", settings.max_model_len),
        ("max_num_seqs", settings.max_num_seqs),
        ("max_num_batched_tokens", settings.max_num_batched_tokens),
    ):
        if value is not None and (not whole_number(value) or value < 1):
            raise fail(E202, f"{path}.{name}", value, "must be a whole number of at least 1")
    utilization = settings.gpu_memory_utilization
    if isinstance(utilization, bool) or not isinstance(utilization, int | float) or not 0 < utilization <= 1:
        raise fail(E202, f"{path}.gpu_memory_utilization", utilization, "must be a fraction in (0, 1]")
    seqs, batched = settings.max_num_seqs, settings.max_num_batched_tokens
    if seqs is not None and batched is not None and batched < seqs:
        # vLLM's SchedulerConfig refuses to start otherwise.
        raise fail(E202, f"{path}.max_num_batched_tokens", batched, f"must be at least max_num_seqs ({seqs})")
    for name, choice in (
        ("kv_cache_dtype", settings.kv_cache_dtype),
        ("quantization", settings.quantization),
        ("dtype", settings.dtype),
    ):
        if choice is not None and (not isinstance(choice, str) or not _CHOICE.match(choice)):
            raise fail(E202, f"{path}.{name}", choice, "must be one vLLM value such as auto or fp8")
    for name, source in settings.lora_modules:
        if not LORA_NAME.match(name) or not (HF_REPO.match(source) or _LOCAL_PATH.match(source)):
            raise fail(
                E202,
                f"{path}.lora_modules",
                f"{name}={source}",
                "must be a name (letters, digits, '.', '_', '-') and a Hugging Face repo id or an absolute path",
            )
    if settings.revision is not None and not _REVISION.match(settings.revision):
        raise fail(
            E202, f"{path}.revision", settings.revision, "must be a commit, branch or tag (letters, digits, ._-/+)"
        )
    if settings.quantization == "awq":
        raise ConfigError(
            E202,
            f"{path}.quantization: 'awq' is not allowed; it forces the slow AWQ kernel: omit it (auto-detected) or "
            "use awq_marlin",
        )


# vLLM's --data-parallel-rpc-port default (config/parallel.py ParallelConfig.data_parallel_rpc_port: "Fixed port
# for data parallel messaging, shared by all nodes"); rendered for multi-node data parallelism so the port a
# NetworkPolicy must open is in the arguments.
DATA_PARALLEL_RPC_PORT = 29550


def parallel_flags(
    tensor_parallel_size: int,
    pipeline_parallel_size: int,
    data_parallel_size: int = 1,
    data_parallel_size_local: int | None = None,
    expert_parallel: bool = False,
) -> list[str]:
    """`vllm serve` parallelism flags every pod of a replica gets (pipeline and data parallelism only when used;
    the ranks per node and the RPC port only when data-parallel ranks span nodes: `data_parallel_size_local`)."""
    flags = ["--tensor-parallel-size", str(tensor_parallel_size)]
    if pipeline_parallel_size > 1:
        flags += ["--pipeline-parallel-size", str(pipeline_parallel_size)]
    if data_parallel_size > 1:
        flags += ["--data-parallel-size", str(data_parallel_size)]
        if data_parallel_size_local is not None and data_parallel_size_local < data_parallel_size:
            flags += ["--data-parallel-size-local", str(data_parallel_size_local)]
            flags += ["--data-parallel-rpc-port", str(DATA_PARALLEL_RPC_PORT)]
    if expert_parallel:
        flags.append("--enable-expert-parallel")
    return flags


def data_parallel_pod_flags(node_rank: int, data_parallel_size_local: int, leader_address: str) -> list[str]:
    """The flags one pod of a multi-node data-parallel replica adds to `parallel_flags`: every pod names the
    leader's address (--data-parallel-address); node 0 runs the API server and ranks 0 to local - 1, every other
    node runs its ranks headless from node_rank x local (--headless --data-parallel-start-rank), as vLLM's
    multi-node data-parallel deployment runs it (entrypoints/cli/serve.py run_headless)."""
    if node_rank == 0:
        return ["--data-parallel-address", leader_address]
    return [
        "--headless",
        "--data-parallel-start-rank",
        str(node_rank * data_parallel_size_local),
        "--data-parallel-address",
        leader_address,
    ]


def vllm_flags(settings: EngineSettings) -> list[str]:
    """`vllm serve` flags for the settings; a setting left to vLLM's default is not passed."""
    flags = [
        "--max-model-len",
        str(settings.max_model_len),
        "--gpu-memory-utilization",
        f"{settings.gpu_memory_utilization:g}",
    ]
    if settings.dtype != "auto":
        flags += ["--dtype", settings.dtype]
    if settings.kv_cache_dtype != "auto":
        flags += ["--kv-cache-dtype", settings.kv_cache_dtype]
    if settings.quantization is not None:
        flags += ["--quantization", settings.quantization]
    if settings.max_num_seqs is not None:
        flags += ["--max-num-seqs", str(settings.max_num_seqs)]
    if settings.max_num_batched_tokens is not None:
        flags += ["--max-num-batched-tokens", str(settings.max_num_batched_tokens)]
    if settings.revision is not None:
        # vLLM's tokenizer revision follows it (ModelConfig: tokenizer_revision defaults to revision).
        flags += ["--revision", settings.revision]
    if settings.trust_remote_code:
        flags.append("--trust-remote-code")
    if settings.language_model_only:
        flags.append("--language-model-only")
    if settings.kv_offloading_size is not None:
        # The native backend named, so vLLM's default changing never changes what runs (planner/kv_offload.py).
        flags += ["--kv-offloading-size", f"{settings.kv_offloading_size:g}", "--kv-offloading-backend", "native"]
    if settings.lora_modules:
        # `name=source` per adapter: a folder the pod restored (staged adapters), else a Hub id vLLM downloads.
        flags += ["--enable-lora", "--max-loras", str(len(settings.lora_modules))]
        flags += ["--max-lora-rank", str(settings.max_lora_rank), "--lora-modules"]
        flags += [f"{name}={source}" for name, source in settings.lora_modules]
    if settings.kv_events_config is not None:
        flags += kv_events.vllm_flags(settings.kv_events_config)
    return flags


# The flags vllm_flags renders (and their short forms): extra arguments must not set them a second time.
VLLM_FLAG_FIELDS = {
    "--max-model-len": "max_model_len",
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--dtype": "dtype",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--quantization": "quantization",
    "-q": "quantization",
    "--max-num-seqs": "max_num_seqs",
    "--max-num-batched-tokens": "max_num_batched_tokens",
    "--enable-lora": "lora_modules",
    "--max-loras": "lora_modules",
    "--max-lora-rank": "max_lora_rank",
    "--lora-modules": "lora_modules",
    "--revision": "revision",
    "--tokenizer-revision": "revision",
    "--code-revision": "revision",
    "--trust-remote-code": "trust_remote_code",
    "--language-model-only": "language_model_only",
    "--kv-offloading-size": "kv_offloading_size",
    "--kv-offloading-backend": "kv_offloading_size",
    "--kv-events-config": "kv_events_config",
    "--enable-scale-out": "kv_events_config",
}


def ray_engine_kwargs(settings: EngineSettings) -> dict[str, int | float | str]:
    """LLMConfig `engine_kwargs` (vLLM's EngineArgs field names) for the settings; defaults are left out."""
    kwargs: dict[str, int | float | str] = {
        "max_model_len": settings.max_model_len,
        "gpu_memory_utilization": settings.gpu_memory_utilization,
    }
    if settings.dtype != "auto":
        kwargs["dtype"] = settings.dtype
    if settings.kv_cache_dtype != "auto":
        kwargs["kv_cache_dtype"] = settings.kv_cache_dtype
    if settings.quantization is not None:
        kwargs["quantization"] = settings.quantization
    if settings.max_num_batched_tokens is not None:
        kwargs["max_num_batched_tokens"] = settings.max_num_batched_tokens
    if settings.max_num_seqs is not None:
        kwargs["max_num_seqs"] = settings.max_num_seqs
    if settings.revision is not None:
        kwargs["revision"] = settings.revision
    if settings.trust_remote_code:
        kwargs["trust_remote_code"] = True
    if settings.language_model_only:
        kwargs["language_model_only"] = True
    return kwargs


# The engine_kwargs ray_engine_kwargs can set: extra kwargs must not set them a second time.
RAY_ENGINE_FIELDS = (
    "max_model_len",
    "gpu_memory_utilization",
    "dtype",
    "kv_cache_dtype",
    "quantization",
    "max_num_batched_tokens",
    "max_num_seqs",
    "revision",
    "trust_remote_code",
    "language_model_only",
)
