"""Checkpoint weight formats the planner knows, their bytes per weight, and what vLLM 0.33 does with each on each
NVIDIA GPU generation of the accelerator catalog.

Support levels, per (format, compute capability):
- "native": vLLM runs the format at the weight x activation precision its checkpoint was made for. A W4A16 format
  (GPTQ, AWQ, compressed-tensors W4A16, gpt-oss MXFP4, whose vLLM comment reads "Canonical mxfp4 checkpoints are
  weight-only W4A16") is native wherever vLLM has a W4A16 kernel for it (Marlin, Machete, OAI Triton, TRT-LLM).
- "weight-only": the format asks for 8- or 4-bit activations this GPU cannot compute, so vLLM keeps the weights
  quantized in memory and computes in 16 bits (Marlin; vLLM logs "Weight-only FP8/FP4 compression will be used
  leveraging the Marlin kernel"). Memory is as native; compute-bound phases (prefill, large batches) are slower.
- "unsupported": vLLM 0.33 fails to serve it on this GPU.

Every cell cites vLLM 0.33.0 (PyPI wheel, commit g4ba787ec9): paths are inside the `vllm` package. The wheel's
default CUDA is 13.0 (envs.py VLLM_MAIN_CUDA_VERSION), so every "CUDA >= 12.x" condition of its kernels holds.

Pure Python: the `llm-eks plan` CLI imports this and must start in well under a second.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llm_eks.catalog.accelerators import CATALOG, InstanceType, unknown_name
from llm_eks.error_codes import E205
from llm_eks.errors import ConfigError, fail

LEVELS = ("native", "weight-only", "unsupported")
VLLM_VERSION = "0.33"


@dataclass(frozen=True)
class WeightFormat:
    """One checkpoint format: what is stored per quantized weight and which layers are quantized."""

    # The planner's weight_format value.
    name: str
    # What a checkpoint of this format holds, one line.
    description: str
    # Bits of one quantized weight.
    weight_bits: int
    # Bytes of scale and zero point stored per group of `group_size` weights (0: per-tensor or per-channel scales,
    # a few bytes per matrix row, which round to nothing per weight).
    scale_bytes_per_group: float
    group_size: int
    # "linear": every Linear layer of the decoder is quantized; "moe-experts": only the routed experts are.
    quantized_layers: str
    # Activation precision the format computes with where it runs natively.
    activations: str
    # How vLLM recognises it (quantization_config.quant_method, and the scheme for compressed-tensors).
    detected_as: str

    @property
    def bytes_per_weight(self) -> float:
        """Bytes per quantized weight, scales and zero points included."""
        per_group = self.scale_bytes_per_group / self.group_size if self.group_size else 0.0
        return self.weight_bits / 8 + per_group

    @property
    def sixteen_bit_layers(self) -> str:
        """The weights this format leaves in 16 bits (vLLM quantizes Linear layers, never the embeddings)."""
        if self.quantized_layers == "moe-experts":
            return "everything but the routed experts: attention, router, dense MLPs, embeddings and lm_head"
        if self.weight_bits == 16:
            return "all"
        return "embeddings and lm_head (and any module the checkpoint's ignore list names)"


FORMATS: dict[str, WeightFormat] = {
    f.name: f
    for f in (
        WeightFormat(
            "bf16", "16-bit weights (bfloat16 or float16 checkpoints)", 16, 0, 0, "linear", "16-bit", "no config"
        ),
        WeightFormat(
            "fp8",
            "FP8 E4M3 weights, one fp32 scale per tensor or per output channel",
            8, 0, 0, "linear", "fp8", "quant_method fp8 (no weight_block_size), or modelopt quant_algo FP8",
        ),
        WeightFormat(
            "fp8-block",
            "FP8 E4M3 weights, one fp32 scale per 128x128 block (DeepSeek-V3/R1, Qwen3-FP8)",
            8, 4, 128 * 128, "linear", "fp8", "quant_method fp8 with weight_block_size [128, 128]",
        ),
        WeightFormat(
            "mxfp4",
            "MXFP4 (E2M1) routed experts, one E8M0 byte scale per 32 weights; the rest bf16 (gpt-oss)",
            4, 1, 32, "moe-experts", "16-bit", "quant_method mxfp4",
        ),
        WeightFormat(
            "nvfp4",
            "NVFP4 (E2M1) weights, one FP8 E4M3 scale per 16 weights plus an fp32 scale per tensor",
            4, 1, 16, "linear", "fp4", "modelopt quant_algo NVFP4, or compressed-tensors nvfp4-pack-quantized",
        ),
        WeightFormat(
            "gptq-int4",
            "4-bit integer weights, fp16 scale and packed 4-bit zero point per group of 128",
            4, 2.5, 128, "linear", "16-bit", "quant_method gptq, bits 4",
        ),
        WeightFormat(
            "awq-int4",
            "4-bit integer weights, fp16 scale and packed 4-bit zero point per group of 128",
            4, 2.5, 128, "linear", "16-bit", "quant_method awq, bits 4",
        ),
        WeightFormat(
            "w4a16",
            "compressed-tensors 4-bit integer weights, symmetric, a 16-bit scale per group of 128",
            4, 2, 128, "linear", "16-bit", "compressed-tensors, weights int 4, no input_activations",
        ),
        WeightFormat(
            "w8a8-int8",
            "compressed-tensors int8 weights (per-channel scale), int8 activations quantized per token",
            8, 0, 0, "linear", "int8", "compressed-tensors, weights int 8, input_activations int 8",
        ),
        WeightFormat(
            "w8a8-fp8",
            "compressed-tensors FP8 weights (per-tensor or per-channel scale), FP8 activations",
            8, 0, 0, "linear", "fp8", "compressed-tensors, weights float 8, input_activations float 8",
        ),
        # Kimi K2.5 (and K2-Thinking): the ignore list keeps attention, shared experts, the dense MLP and lm_head in
        # bf16; the routed experts' scales are params_dtype (bf16), one per 32 weights (compressed_tensors_moe_wna16.py
        # CompressedTensorsWNA16MoEMethod: w13/w2 scales of hidden_size // group_size groups).
        WeightFormat(
            "w4a16-experts",
            "compressed-tensors 4-bit integer routed experts, symmetric, a 16-bit scale per group of 32; the rest bf16 "
            "(Kimi K2.5)",
            4, 2, 32, "moe-experts", "16-bit",
            "compressed-tensors, weights int 4 group 32, no input_activations, ignore list naming self_attn",
        ),
    )
}  # fmt: skip


@dataclass(frozen=True)
class Support:
    """What vLLM 0.33 does with one format on one GPU generation, and where its source says so."""

    level: str
    # Why, then where: "<reason> (<file> <function>)", one line.
    evidence: str
    # MoE kernels that pad the routed experts' weights: (hidden, per-GPU intermediate) rounded up to these multiples
    # when the weights are created (1: no padding). Counted in the weights, like vLLM's "Model loading took".
    expert_alignment: tuple[int, int] = (1, 1)


# The compute capabilities of the NVIDIA GPUs in the accelerator catalog (accelerators.py), in table order.
GENERATIONS: dict[tuple[int, int], str] = {
    (8, 0): "A100",
    (8, 6): "A10G",
    (8, 9): "L4, L40S",
    (9, 0): "H100, H200",
    (10, 0): "B200",
    (10, 3): "B300",
    (12, 0): "RTX PRO 4500/6000 Blackwell",
}

_K = "model_executor/kernels/linear"
_Q = "model_executor/layers/quantization"
_MOE = "model_executor/layers/fused_moe"

_BF16 = Support("native", "unquantized bf16/fp16 GEMMs; bf16 needs sm80+ (platforms/cuda.py check_if_supports_dtype)")
_FP8_MARLIN = Support(
    "weight-only",
    "no FP8 tensor cores: _POSSIBLE_FP8_KERNELS falls through to MarlinFP8ScaledMMLinearKernel, FP8 weights with "
    f"16-bit compute ({_K}/scaled_mm/marlin.py is_supported; {_Q}/utils/marlin_utils_fp8.py is_fp8_marlin_supported)",
)
_FP8_CUTLASS = Support(
    "native",
    "CutlassFP8ScaledMMLinearKernel: cutlass_scaled_mm_supports_fp8 is true on sm89 (CUDA >= 12.4) and sm90 "
    f"({_K}/scaled_mm/cutlass.py is_supported; {_Q}/utils/w8a8_utils.py cutlass_fp8_supported)",
)
_FP8_FLASHINFER = Support(
    "native",
    f"FlashInferFP8ScaledMMLinearKernel, first in _POSSIBLE_FP8_KERNELS, needs sm100+ ({_K}/scaled_mm/flashinfer.py "
    "is_supported)",
)
_BLOCK_MARLIN = Support(
    "weight-only",
    "_POSSIBLE_FP8_BLOCK_KERNELS: the FlashInfer, DeepGEMM and CUTLASS block kernels need sm90+, so "
    f"MarlinFP8ScaledMMLinearKernel runs it with 16-bit compute ({_K}/__init__.py _POSSIBLE_FP8_BLOCK_KERNELS; "
    "platforms/cuda.py support_deep_gemm; csrc cutlass_scaled_mm_supports_block_fp8)",
)
_BLOCK_MARLIN_SM89 = Support(
    "weight-only",
    _BLOCK_MARLIN.evidence[:-1] + f"; MoE experts run natively on Triton FP8, {_MOE}/experts/triton_moe.py)",
)
_BLOCK_SM90 = Support(
    "native",
    "FlashInferFp8DeepGEMMDynamicBlockScaledKernel (sm90 only) or DeepGemmFp8BlockScaledMMKernel "
    f"({_K}/scaled_mm/flashinfer.py, {_K}/scaled_mm/deep_gemm.py is_supported; vllm/utils/flashinfer.py "
    "has_flashinfer_fp8_blockscale_gemm)",
)
_BLOCK_DEEPGEMM = Support(
    "native",
    f"DeepGemmFp8BlockScaledMMKernel, DeepGEMM bundled in vllm/third_party ({_K}/scaled_mm/deep_gemm.py "
    "is_supported; platforms/cuda.py support_deep_gemm: sm90, sm10x, sm12x)",
)
# The expert padding of those MXFP4 backends (vllm/model_executor/layers/fused_moe/oracle/mxfp4.py,
# mxfp4_round_up_hidden_size_and_intermediate_size):
# Marlin and FlashInfer TRT-LLM round the hidden size up to 256 and each GPU's intermediate slice up to 128 (gpt-oss:
# 2880 -> 3072 and 2944, +9 % of expert bytes at TP1); the OAI Triton kernels round the slice up to 64 only.
_MXFP4_PAD_256_128 = (256, 128)
_MXFP4_MARLIN = Support(
    "native",
    "W4A16 by design; MoE experts on the Marlin MXFP4 kernel, dense MXFP4 linears on MarlinMxFp4LinearKernel "
    f"({_MOE}/oracle/mxfp4.py _get_priority_backends_for_gpt_oss; {_MOE}/experts/marlin_moe.py needs sm75+; "
    f"{_Q}/mxfp4.py Mxfp4Config.get_min_capability 80)",
    _MXFP4_PAD_256_128,
)
_MXFP4_TRITON = Support(
    "native",
    "W4A16 by design; MoE experts on the OpenAI Triton kernels, bf16 activations "
    f"({_MOE}/experts/gpt_oss_triton_kernels_moe.py _triton_kernel_moe_supports_current_device: sm90 to sm12x)",
    (1, 64),
)
_MXFP4_TRTLLM = Support(
    "native",
    "MoE experts on FlashInfer TRT-LLM MXFP4 x BF16, first in the gpt-oss backend list "
    f"({_MOE}/experts/trtllm_mxfp4_moe.py: is_device_capability_family(100); {_MOE}/oracle/mxfp4.py)",
    _MXFP4_PAD_256_128,
)
_MXFP4_SM120 = Support(
    "native",
    "W4A16 by design; on sm12x the backend list moves Marlin ahead of the OAI Triton kernels "
    f"({_MOE}/oracle/mxfp4.py _get_priority_backends_for_gpt_oss)",
    _MXFP4_PAD_256_128,
)
_NVFP4_MARLIN = Support(
    "weight-only",
    "no FP4 tensor cores before sm100: _POSSIBLE_NVFP4_KERNELS falls back to MarlinNvFp4LinearKernel, FP4 "
    f"weights with 16-bit compute ({_K}/nvfp4/marlin.py is_supported; {_Q}/utils/marlin_utils_fp4.py "
    "is_fp4_marlin_supported: sm75+)",
)
_NVFP4_SM10X = Support(
    "native",
    f"FlashInferCuteDslNvFp4LinearKernel, first in _POSSIBLE_NVFP4_KERNELS ({_K}/nvfp4/flashinfer.py is_supported: "
    "is_device_capability_family(100))",
)
_NVFP4_SM120 = Support(
    "native",
    "FlashInferCutlassNvFp4LinearKernel (cutlass_fp4_supported and sm100+) or FlashInferB12xNvFp4LinearKernel "
    f"(sm120+) ({_K}/nvfp4/flashinfer.py is_supported)",
)
_INT4_MARLIN = Support(
    "native",
    f"W4A16 by design; choose_mp_linear_kernel picks MarlinLinearKernel ({_K}/mixed_precision/marlin.py "
    f"can_implement; {_Q}/utils/marlin_utils.py query_marlin_supported_quant_types: sm75+)",
)
_INT4_MACHETE = Support(
    "native",
    f"W4A16 by design; MacheteLinearKernel on sm90 (Marlin when Machete cannot take the group size or zero points) "
    f"({_K}/mixed_precision/machete.py can_implement: is_device_capability(90))",
)
_INT8_CUTLASS = Support(
    "native",
    f"CutlassInt8ScaledMMLinearKernel, first in _POSSIBLE_INT8_KERNELS ({_K}/scaled_mm/cutlass.py; "
    f"{_K}/__init__.py _POSSIBLE_INT8_KERNELS)",
)
_INT8_BROKEN = Support(
    "unsupported",
    "its CUTLASS int8 GEMM has no kernel from sm100 on yet claims every int8 layer before the Triton fallback, so "
    f"start-up fails ({_K}/scaled_mm/cutlass.py CutlassInt8ScaledMMLinearKernel.is_supported; vllm#54311)",
)
_INT4_EXPERTS_MARLIN = Support(
    "native",
    "W4A16 by design; routed experts on the Marlin MoE kernel (select_wna16_moe_backend: FlashInfer TRT-LLM MxInt4 "
    f"needs sm10x, so MarlinExperts is next; {_MOE}/oracle/int_wna16.py _get_priority_backends; "
    f"{_MOE}/experts/marlin_moe.py _supports_current_device: sm75+)",
)
_INT4_EXPERTS_TRTLLM = Support(
    "native",
    "W4A16 by design; routed experts on FlashInfer TRT-LLM MxInt4, first in the WNA16 MoE backend list for int4 "
    f"group-32 scales ({_MOE}/oracle/int_wna16.py _get_priority_backends; {_MOE}/experts/trtllm_mxint4_moe.py: "
    "is_device_capability_family(100), kInt4Static32)",
)
_WFP8_MARLIN = Support(
    "weight-only",
    "CompressedTensorsW8A8Fp8 needs sm89, so the scheme falls back to CompressedTensorsW8A16Fp8 on Marlin "
    f"({_Q}/compressed_tensors/compressed_tensors.py _get_scheme_from_parts; _POSSIBLE_WFP8A16_KERNELS)",
)

_ALL = tuple(GENERATIONS)
_SUPPORT: dict[str, dict[tuple[int, int], Support]] = {
    "bf16": dict.fromkeys(_ALL, _BF16),
    "fp8": {
        (8, 0): _FP8_MARLIN, (8, 6): _FP8_MARLIN, (8, 9): _FP8_CUTLASS, (9, 0): _FP8_CUTLASS,
        (10, 0): _FP8_FLASHINFER, (10, 3): _FP8_FLASHINFER, (12, 0): _FP8_FLASHINFER,
    },
    "fp8-block": {
        (8, 0): _BLOCK_MARLIN, (8, 6): _BLOCK_MARLIN, (8, 9): _BLOCK_MARLIN_SM89, (9, 0): _BLOCK_SM90,
        (10, 0): _BLOCK_DEEPGEMM, (10, 3): _BLOCK_DEEPGEMM, (12, 0): _BLOCK_DEEPGEMM,
    },
    "mxfp4": {
        (8, 0): _MXFP4_MARLIN, (8, 6): _MXFP4_MARLIN, (8, 9): _MXFP4_MARLIN, (9, 0): _MXFP4_TRITON,
        (10, 0): _MXFP4_TRTLLM, (10, 3): _MXFP4_TRTLLM, (12, 0): _MXFP4_SM120,
    },
    "nvfp4": {
        (8, 0): _NVFP4_MARLIN, (8, 6): _NVFP4_MARLIN, (8, 9): _NVFP4_MARLIN, (9, 0): _NVFP4_MARLIN,
        (10, 0): _NVFP4_SM10X, (10, 3): _NVFP4_SM10X, (12, 0): _NVFP4_SM120,
    },
    **{
        name: {cc: _INT4_MACHETE if cc == (9, 0) else _INT4_MARLIN for cc in _ALL}
        for name in ("gptq-int4", "awq-int4", "w4a16")
    },
    "w8a8-int8": {cc: _INT8_BROKEN if cc >= (10, 0) else _INT8_CUTLASS for cc in _ALL},
    "w8a8-fp8": {
        (8, 0): _WFP8_MARLIN, (8, 6): _WFP8_MARLIN, (8, 9): _FP8_CUTLASS, (9, 0): _FP8_CUTLASS,
        (10, 0): _FP8_FLASHINFER, (10, 3): _FP8_FLASHINFER, (12, 0): _FP8_FLASHINFER,
    },
    "w4a16-experts": {
        cc: _INT4_EXPERTS_TRTLLM if cc in ((10, 0), (10, 3)) else _INT4_EXPERTS_MARLIN for cc in _ALL
    },
}  # fmt: skip


def weight_format(name: str, field: str = "workload.weight_format") -> WeightFormat:
    """The format called `name`; unknown names raise ConfigError with a did-you-mean hint."""
    if isinstance(name, str) and name in FORMATS:
        return FORMATS[name]
    raise unknown_name(E205, field, name, list(FORMATS))


def support(format: str, compute_capability: tuple[int, int]) -> Support:
    """What vLLM 0.33 does with `format` on a GPU of `compute_capability` (major, minor), with its evidence."""
    cells = _SUPPORT[weight_format(format).name]
    if compute_capability not in cells:
        known = ", ".join(_sm(cc) for cc in GENERATIONS)
        raise fail(E205, "compute_capability", compute_capability, f"the format table covers {known}")
    return cells[compute_capability]


def families_that_run(format: str) -> list[str]:
    """Instance families of the catalog whose GPU runs `format` natively or weight-only, catalog order."""
    out: list[str] = []
    for row in CATALOG:
        cc = row.compute_capability
        if cc is not None and support(format, cc).level != "unsupported" and row.family not in out:
            out.append(row.family)
    return out


def require_supported(format: str, instance: InstanceType, field: str = "workload.weight_format") -> None:
    """Raise a one-line ConfigError when vLLM 0.33 cannot serve `format` on `instance`'s GPU, naming the format,
    the GPU and the instance families that can run it."""
    fmt = weight_format(format, field).name
    where = f"{fmt!r} is not allowed on {instance.instance_type}"
    runs = f"instance families that run it: {', '.join(families_that_run(fmt))}"
    cc = instance.compute_capability
    if cc is None:
        raise ConfigError(
            E205,
            f"{field}: {where} ({instance.accelerator_name}): the format table covers vLLM {VLLM_VERSION} on NVIDIA "
            f"GPUs only; {runs}",
        )
    cell = support(fmt, cc)
    if cell.level == "unsupported":
        raise ConfigError(
            E205,
            f"{field}: {where} ({instance.accelerator_name}, {_sm(cc)}): "
            f"in vLLM {VLLM_VERSION} {cell.evidence}; {runs}",
        )


def _sm(cc: tuple[int, int]) -> str:
    return f"sm{cc[0]}{cc[1]}"


# --- HF quantization_config -> format name ---------------------------------------------------------------------

_KNOWN_METHODS = (
    "fp8 (per-tensor/channel or weight_block_size), mxfp4, modelopt (quant_algo FP8 or NVFP4), gptq and awq "
    "(bits 4), compressed-tensors (W4A16, W4A16 routed experts in groups of 32, W8A8 int8, W8A8 fp8, NVFP4)"
)


def format_of_quantization_config(
    config: Mapping[str, Any] | None, path: str = "model_config.quantization_config"
) -> str:
    """The format name of a Hugging Face config.json `quantization_config` ("bf16" when there is none).

    Unknown methods, bit widths and compressed-tensors schemes raise a one-line ConfigError naming the field.
    """
    if config is None:
        return "bf16"
    if not isinstance(config, Mapping):
        raise fail(E205, path, config, "must be an object")
    method = config.get("quant_method")
    method = method.lower() if isinstance(method, str) else method
    if method is None and isinstance(config.get("quantization"), Mapping):
        method = "modelopt"  # hf_quant_config.json of ModelOpt <= 0.29, attached as vLLM attaches it (config.py)
    if method == "fp8":
        block = config.get("weight_block_size")
        if block is None:
            return "fp8"
        if block == [128, 128]:
            return "fp8-block"
        raise fail(
            E205, f"{path}.weight_block_size", block, "the planner knows [128, 128] blocks (DeepSeek, Qwen3 FP8)"
        )
    if method == "mxfp4":
        return "mxfp4"
    if method in ("modelopt", "modelopt_fp4"):
        return _modelopt(config, path)
    if method in ("gptq", "awq"):
        bits = config.get("bits", config.get("w_bit"))
        if bits != 4:
            raise fail(E205, f"{path}.bits", bits, f"the planner knows 4-bit {method.upper()} checkpoints")
        return f"{method}-int4"
    if method == "compressed-tensors":
        return _compressed_tensors(config, path)
    raise fail(E205, f"{path}.quant_method", method, f"the planner knows {_KNOWN_METHODS}")


def _modelopt(config: Mapping[str, Any], path: str) -> str:
    # ModelOpt writes quant_algo at the top (config.json) or under "quantization" (hf_quant_config.json); vLLM reads
    # both (model_executor/layers/quantization/modelopt.py ModelOptQuantConfigBase.from_config).
    nested = config.get("quantization")
    algo = nested.get("quant_algo") if isinstance(nested, Mapping) else config.get("quant_algo")
    name = {"FP8": "fp8", "NVFP4": "nvfp4"}.get(algo.upper() if isinstance(algo, str) else "")
    if name is None:
        raise fail(E205, f"{path}.quant_algo", algo, "the planner knows ModelOpt FP8 and NVFP4 checkpoints")
    return name


def _compressed_tensors(config: Mapping[str, Any], path: str) -> str:
    groups = config.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise fail(E205, f"{path}.config_groups", groups, "must name at least one quantization scheme")
    names = {_scheme(group, f"{path}.config_groups.{key}") for key, group in groups.items()}
    if len(names) > 1:
        raise fail(E205, f"{path}.config_groups", sorted(names), "the planner sizes checkpoints with one scheme")
    name = names.pop()
    ignore = config.get("ignore")
    if name == "w4a16" and isinstance(ignore, list) and any("self_attn" in str(entry) for entry in ignore):
        # Attention left unquantized: the routed experts alone are int4 (Kimi K2.5's checkpoint).
        sizes = {g.get("weights", {}).get("group_size") for g in groups.values() if isinstance(g, Mapping)}
        if sizes != {32}:
            raise fail(
                E205,
                f"{path}.config_groups",
                sorted(map(str, sizes)),
                "the planner knows W4A16 routed experts (attention ignored) with groups of 32 (Kimi K2.5)",
            )
        return "w4a16-experts"
    return name


def _scheme(group: Any, path: str) -> str:
    weights = group.get("weights") if isinstance(group, Mapping) else None
    if not isinstance(weights, Mapping):
        raise fail(E205, f"{path}.weights", weights, "must be an object with type and num_bits")
    acts = group.get("input_activations")
    w = (weights.get("type"), weights.get("num_bits"))
    a = (acts.get("type"), acts.get("num_bits")) if isinstance(acts, Mapping) else None
    if w == ("int", 4) and a is None:
        return "w4a16"
    if w == ("int", 8) and a == ("int", 8):
        return "w8a8-int8"
    if w == ("float", 8) and a == ("float", 8):
        return "fp8-block" if weights.get("strategy") == "block" else "w8a8-fp8"
    if w == ("float", 4) and a == ("float", 4) and weights.get("group_size") == 16:
        return "nvfp4"
    scheme = f"weights {w[0]} {w[1]}, activations " + ("16-bit" if a is None else f"{a[0]} {a[1]}")
    raise fail(
        E205,
        path,
        scheme,
        "the planner knows compressed-tensors W4A16 (int 4, no activations), W8A8 int8, W8A8 fp8 and NVFP4 "
        "(float 4, group 16)",
    )
