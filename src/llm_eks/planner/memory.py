"""GPU memory per worker as vLLM 0.33 accounts for it when it sizes the KV cache, one named term per function.

vLLM (vllm/v1/worker/gpu_worker.py `Worker.determine_available_memory`, vllm/utils/mem_utils.py `memory_profiling`):

    available_kv = requested_memory                      ceil(total x gpu_memory_utilization)
                 - weights                               what loading the model allocated
                 - sampler state                         per-request buffers the sampler allocates at load
                 - non-torch growth                      workspaces allocated while profiling
                 - transient peak                        the profiling forward pass and sampler, above the weights
                 - CUDA-graph estimate                   VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (the default)

The CUDA context, NCCL buffers and cuBLAS handles are created before vLLM's baseline snapshot (`Worker.init_device`),
so they come out of the (1 - utilization) slack, not out of this budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llm_eks.catalog.accelerators import InstanceType
from llm_eks.catalog.models import ModelSpec
from llm_eks.planner.kv_cache import cdiv

GIB = 1024**3

# The driver reports ~1 % less device memory than EC2's GpuInfo figure on HBM parts (A100 80 GB: 79.25 GiB to
# CUDA against 80 GiB in GpuInfo); vLLM's `total` is CUDA's figure.
DRIVER_VISIBLE_FRACTION = 0.99
# Workspaces the profiling run allocates outside PyTorch's caching allocator (MoE and attention-backend workspaces,
# allocator slack). Calibrated on a published vLLM log: gpt-oss-20b on one A100 80GB at utilization 0.65 (vLLM 0.19,
# before CUDA-graph memory was deducted) kept 1.23 GiB beyond weights and KV cache, of which the transient peak
# below accounts for 0.56 GiB (https://myoceane.fr/index.php/ai-vllm-a100-gemma-4/). The one published log with
# 0.33's accounting (tests/fixtures/vllm_startup_logs.json, the "0.21+" record) implies 0.70 GiB once the sampler
# state below is counted. Two logs: not verified further.
NON_TORCH_BYTES = int(0.67 * GIB)
# The CUDA-graph pool vLLM profiles and deducts before sizing the KV cache (default since v0.21). Published logs
# of vLLM 0.2x show 0.36 GiB (gpustack/runner#251, TP2) and 0.44 GiB (vllm-project/vllm#48214, 51 piecewise graphs up
# to 512 tokens); we take the larger. vLLM measures it per model; this is not a model of it.
CUDA_GRAPH_BYTES = int(0.44 * GIB)
# The profiling pass: ~4 hidden-size bf16 buffers (residual, norm output, attention in/out) and ~3 MLP-width bf16
# buffers of this GPU's MLP shard (per routed expert slot for MoE) per scheduled token. Matches vLLM's reported
# ~1.2 GiB peak for Llama 3.1 8B at 8192 batched tokens.
ACTIVATION_HIDDEN_BUFFERS = 4
ACTIVATION_MLP_BUFFERS = 3
# The sampler pass runs on one row per profiled request, in the model dtype and again in fp32
# (`_dummy_sampler_run`, vllm/v1/worker/gpu/model_runner.py): ~2 fp32 logit rows per request at the peak.
LOGIT_ROWS_BYTES = 2 * 4


def visible_bytes(inst: InstanceType) -> int:
    """Device memory CUDA reports for one GPU of `inst` (vLLM's `total_memory`)."""
    return int(inst.accelerator_memory_bytes * DRIVER_VISIBLE_FRACTION)


def requested_bytes(visible: int, utilization: float) -> int:
    """vLLM's budget for everything it allocates on the GPU (`request_memory`, vllm/v1/worker/utils.py)."""
    return math.ceil(visible * utilization)


def batch_defaults(inst: InstanceType) -> tuple[int, int]:
    """vLLM's OpenAI-server defaults (max_num_batched_tokens, max_num_seqs) for this GPU
    (`EngineArgs.get_batch_defaults`, vllm/engine/arg_utils.py): 16384/1024 from 160 GiB (B200), 8192/1024 from
    70 GiB except A100s (larger chunks cost A100 throughput, vLLM PR #17885), 2048/256 below."""
    gib = inst.accelerator_memory_gib
    if gib >= 160:
        return 16384, 1024
    if gib >= 70 and not inst.accelerator_name.startswith("A100"):
        return 8192, 1024
    return 2048, 256


def batched_tokens(inst: InstanceType, max_num_seqs: int) -> int:
    """max_num_batched_tokens the plan sets: vLLM's default for the GPU, never below max_num_seqs (vLLM requires
    it). Set explicitly so the profiled peak below matches what runs."""
    return max(batch_defaults(inst)[0], max_num_seqs)


def sampler_state_bytes(max_num_seqs: int, vocab_size: int) -> int:
    """The penalty statistics vLLM 0.33's sampler keeps for every request slot (`PenaltiesState`,
    vllm/v1/worker/gpu/sample/penalties.py): int32 output-token counts over the vocabulary and a prompt-token bitmask,
    allocated at load after the baseline snapshot, so `memory_profiling` counts them as consumed (vllm/utils/
    mem_utils.py `total_consumed`). 0.6 GiB at 1024 sequences and a 150k vocabulary."""
    return max_num_seqs * (vocab_size + cdiv(vocab_size, 32)) * 4


def profile_peak_bytes(spec: ModelSpec, tp: int, batched: int, max_num_seqs: int, last_stage: bool = True) -> int:
    """The transient peak of vLLM's profiling run (`GPUModelRunner.profile_run`): one forward pass over
    `batched` tokens spread over min(batched, max_num_seqs) requests, then the sampler on one logits row per
    request (on the last pipeline stage)."""
    requests = min(batched, max_num_seqs)
    slots = spec.experts_per_token if spec.is_moe else 1
    width = spec.expert_width if spec.is_moe else spec.intermediate_size
    per_token = ACTIVATION_HIDDEN_BUFFERS * spec.hidden_size * 2 + ACTIVATION_MLP_BUFFERS * 2 * width * slots // tp
    logits = requests * spec.vocab_size * LOGIT_ROWS_BYTES if last_stage else 0
    return batched * per_token + logits


def expert_parallel_batched_tokens(inst: InstanceType, data_parallel_size: int, max_num_seqs: int) -> int:
    """max_num_batched_tokens of each data-parallel rank the plan sets under expert parallelism: vLLM's default for
    the GPU shared out over the ranks (never below max_num_seqs). vLLM applies its default per engine, but the
    default all2all (allgather_reducescatter) hands every rank's tokens to each GPU's MoE layer, whose workspaces
    scale with them (fused_moe/modular_kernel.py `_allocate_buffers`: M x topk rows for the M gathered tokens) and
    are profiled with a full batch on every rank; dividing keeps the gathered tokens at one engine's default. A
    planner choice, made explicit in the engine arguments."""
    return max(cdiv(batch_defaults(inst)[0], data_parallel_size), max_num_seqs)


def expert_parallel_peak_bytes(spec: ModelSpec, data_parallel_size: int, batched: int, max_num_seqs: int) -> int:
    """The profiling peak of one GPU under expert parallelism: as `profile_peak_bytes` for the rank's own tokens,
    but the MoE buffers cover the tokens of every data-parallel rank (the all-gather dispatch) at the whole expert
    width (each GPU computes whole experts: FusedMoEParallelConfig.make sets tp_size 1 inside the MoE layer)."""
    requests = min(batched, max_num_seqs)
    hidden = ACTIVATION_HIDDEN_BUFFERS * spec.hidden_size * 2 * batched
    experts = ACTIVATION_MLP_BUFFERS * 2 * spec.expert_width * spec.experts_per_token * data_parallel_size * batched
    return hidden + experts + requests * spec.vocab_size * LOGIT_ROWS_BYTES


def available_kv_bytes(requested: int, weights: int, sampler_state: int, peak: int, lora: int = 0) -> int:
    """What is left for the KV cache (`determine_available_memory`): the budget less weights (and the LoRA buffers
    allocated with them), the sampler state, non-torch growth, the transient peak and the CUDA-graph estimate."""
    return requested - weights - lora - sampler_state - NON_TORCH_BYTES - peak - CUDA_GRAPH_BYTES


@dataclass(frozen=True)
class Budget:
    """One GPU's memory as vLLM accounts for it when it sizes the KV cache, term by term (the module docstring), for
    any layout: the layout's weights, transient peak, sampler slots and LoRA buffers go in; what is left for the KV
    cache comes out."""

    # Device memory EC2 lists for the GPU (before the driver's share).
    total: int
    # ceil(visible x gpu_memory_utilization): vLLM's requested memory.
    requested: int
    weights: int
    sampler_state: int
    peak: int
    # LoRA adapter buffers (0 without adapters).
    lora: int = 0

    @property
    def reserve(self) -> int:
        """Everything vLLM deducts besides the weights (LoRA buffers included)."""
        return self.sampler_state + NON_TORCH_BYTES + self.peak + CUDA_GRAPH_BYTES + self.lora

    @property
    def usable(self) -> int:
        """What weights and KV cache share: requested less the reserve."""
        return self.requested - self.reserve

    @property
    def available_kv(self) -> int:
        return available_kv_bytes(self.requested, self.weights, self.sampler_state, self.peak, self.lora)


def budget(
    inst: InstanceType, utilization: float, weights: int, peak: int, max_num_seqs: int, vocab_size: int, lora: int = 0
) -> Budget:
    """The budget of one GPU of `inst` at `utilization` holding `weights` bytes, whose profiling run peaks `peak`
    bytes above them (the layout's: `profile_peak_bytes` or `expert_parallel_peak_bytes`), whose engine keeps sampler
    state for `max_num_seqs` slots over `vocab_size`, and with `lora` bytes of adapter buffers."""
    return Budget(
        total=inst.accelerator_memory_bytes,
        requested=requested_bytes(visible_bytes(inst), utilization),
        weights=weights,
        sampler_state=sampler_state_bytes(max_num_seqs, vocab_size),
        peak=peak,
        lora=lora,
    )


def lora_bytes(spec: ModelSpec, tp: int, max_loras: int, max_rank: int, dtype_bytes: int = 2) -> int:
    """The LoRA weight buffers vLLM 0.33 allocates on each GPU with --enable-lora, for the whole model (the caller
    takes its stage's share). At model load every linear layer is wrapped (vllm/lora/layers/base_linear.py,
    `create_lora_weights`) with stacked A and B buffers for max_loras slots at max_lora_rank, in the base model's
    dtype: a column-parallel layer keeps A whole (rank x input) and shards B (output / TP x rank); a row-parallel
    layer (without fully_sharded_loras) shards A and keeps B whole; merged layers keep one A and one B per slice
    (qkv: 3, gate_up: 2). MoE layers hold the same per expert (vllm/lora/layers/fused_moe.py). The buffers exist
    whether or not an adapter is loaded, so they come off the KV cache like weights do."""
    h = spec.hidden_size
    q = spec.attention_heads * spec.head_dim
    kv = spec.kv_heads * spec.head_dim
    attention = 3 * h + (q + 2 * kv) // tp + q // tp + h  # qkv_proj (3 slices), o_proj

    def mlp(width: int) -> int:
        return 2 * h + 2 * width // tp + width // tp + h  # gate_up_proj (2 slices), down_proj

    moe_layers = spec.layers - spec.dense_layers if spec.is_moe else 0
    dense_mlp = (spec.layers - moe_layers) * mlp(spec.intermediate_size)
    expert_mlp = moe_layers * (spec.num_experts + spec.shared_experts) * mlp(spec.expert_width)
    per_rank = spec.layers * attention + dense_mlp + expert_mlp
    return max_loras * max_rank * per_rank * dtype_bytes
