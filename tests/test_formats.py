"""Checkpoint formats: bytes per weight, what vLLM 0.33 does with each on each GPU generation of the catalog, the
one-line error for an unsupported pair, and the mapping from a Hugging Face quantization_config."""

from __future__ import annotations

import pytest

from llm_eks.catalog.accelerators import CATALOG, instance_type
from llm_eks.catalog.formats import (
    FORMATS,
    GENERATIONS,
    LEVELS,
    families_that_run,
    format_of_quantization_config,
    require_supported,
    support,
    weight_format,
)
from llm_eks.error_codes import E205
from llm_eks.errors import ConfigError
from llm_eks.planner import PlanRequest
from llm_eks.planner.sizing import Context, evaluate, expert_padding
from tests.coded import raises_code

# One column per GPU of the catalog: (name, compute capability). N native, W weight-only, - unsupported.
GPUS = (
    ("A10G", (8, 6)),
    ("L4", (8, 9)),
    ("L40S", (8, 9)),
    ("A100", (8, 0)),
    ("H100", (9, 0)),
    ("H200", (9, 0)),
    ("B200", (10, 0)),
    ("B300", (10, 3)),
    ("RTX PRO", (12, 0)),
)
EXPECTED = {
    #              A10G L4   L40S A100 H100 H200 B200 B300 RTX PRO
    "bf16":       "N    N    N    N    N    N    N    N    N",
    "fp8":        "W    N    N    W    N    N    N    N    N",
    "fp8-block":  "W    W    W    W    N    N    N    N    N",
    "mxfp4":      "N    N    N    N    N    N    N    N    N",
    "nvfp4":      "W    W    W    W    W    W    N    N    N",
    "gptq-int4":  "N    N    N    N    N    N    N    N    N",
    "awq-int4":   "N    N    N    N    N    N    N    N    N",
    "w4a16":      "N    N    N    N    N    N    N    N    N",
    "w8a8-int8":  "N    N    N    N    N    N    -    -    -",
    "w8a8-fp8":   "W    N    N    W    N    N    N    N    N",
    "w4a16-experts": "N N  N    N    N    N    N    N    N",
}  # fmt: skip
LEVEL = {"N": "native", "W": "weight-only", "-": "unsupported"}
CELLS = [
    (fmt, gpu, cc, LEVEL[mark])
    for fmt, row in EXPECTED.items()
    for (gpu, cc), mark in zip(GPUS, row.split(), strict=True)
]


def test_the_table_covers_every_format_and_every_gpu_of_the_catalog() -> None:
    assert list(EXPECTED) == list(FORMATS)
    catalog_ccs = {row.compute_capability for row in CATALOG if row.accelerator_vendor == "nvidia"}
    assert catalog_ccs == {cc for _, cc in GPUS} == set(GENERATIONS)


@pytest.mark.parametrize(("fmt", "gpu", "cc", "level"), CELLS, ids=[f"{c[0]}-{c[1]}" for c in CELLS])
def test_support_level(fmt: str, gpu: str, cc: tuple[int, int], level: str) -> None:
    cell = support(fmt, cc)
    assert cell.level == level
    # Every cell names the vLLM source file it rests on.
    assert ".py" in cell.evidence and "\n" not in cell.evidence


def test_evidence_names_the_kernel_that_decides() -> None:
    assert "MarlinFP8ScaledMMLinearKernel" in support("fp8", (8, 6)).evidence
    assert "CutlassFP8ScaledMMLinearKernel" in support("fp8", (8, 9)).evidence
    assert "MarlinFP8ScaledMMLinearKernel" in support("fp8-block", (8, 9)).evidence
    assert "DeepGemm" in support("fp8-block", (10, 0)).evidence
    assert "MarlinNvFp4LinearKernel" in support("nvfp4", (9, 0)).evidence
    assert "trtllm_mxfp4_moe.py" in support("mxfp4", (10, 0)).evidence
    assert "gpt_oss_triton_kernels_moe.py" in support("mxfp4", (9, 0)).evidence
    assert "MacheteLinearKernel" in support("awq-int4", (9, 0)).evidence
    assert "CompressedTensorsW8A16Fp8" in support("w8a8-fp8", (8, 0)).evidence
    assert "vllm#54311" in support("w8a8-int8", (10, 0)).evidence


@pytest.mark.parametrize(
    ("instance", "tp", "padding"),
    [
        # Marlin (A100, L4, A10G): hidden 2880 -> 3072, each GPU's slice of the 2880-wide experts up to 128.
        ("p4de.24xlarge", 1, 3072 * 2944 / (2880 * 2880)),
        ("p4de.24xlarge", 4, 3072 * 768 / (2880 * 720)),
        ("g6.xlarge", 1, 3072 * 2944 / (2880 * 2880)),
        # OAI Triton (H100, H200): the slice up to 64 only.
        ("p5.48xlarge", 1, 1.0),
        ("p5en.48xlarge", 2, 1472 / 1440),
        # FlashInfer TRT-LLM (B200): as Marlin.
        ("p6-b200.48xlarge", 8, 3072 * 384 / (2880 * 360)),
    ],
)
def test_mxfp4_experts_are_padded_to_the_moe_kernels_tile(instance: str, tp: int, padding: float) -> None:
    ctx = Context(PlanRequest(model="openai/gpt-oss-120b"))
    assert expert_padding(ctx, instance_type(instance), tp) == pytest.approx(padding)


def test_expert_padding_is_counted_in_the_weights_only_for_moe() -> None:
    oss = Context(PlanRequest(model="openai/gpt-oss-120b"))
    marlin = evaluate(oss, instance_type("p4de.24xlarge"), 4, 1, 1).weight_bytes_per_gpu  # 3072 x 768 per expert
    triton = evaluate(oss, instance_type("p5.48xlarge"), 4, 1, 1).weight_bytes_per_gpu  # 2880 x 768
    experts = oss.spec.expert_parameters * FORMATS["mxfp4"].bytes_per_weight / 4
    assert marlin - triton == pytest.approx(experts * (3072 - 2880) * 768 / (2880 * 720), rel=1e-6)
    assert (
        expert_padding(
            Context(PlanRequest(model="meta-llama/Llama-3.1-8B-Instruct")), instance_type("p4de.24xlarge"), 1
        )
        == 1.0
    )


def test_levels_are_the_three_documented_ones() -> None:
    assert {c[3] for c in CELLS} == set(LEVELS)


def test_bytes_per_quantized_weight_include_scales_and_zero_points() -> None:
    bytes_per_weight = {name: f.bytes_per_weight for name, f in FORMATS.items()}
    assert bytes_per_weight == {
        "bf16": 2.0,
        "fp8": 1.0,
        "fp8-block": 1 + 4 / (128 * 128),  # fp32 scale per 128x128 block
        "mxfp4": 0.5 + 1 / 32,  # E8M0 byte per 32 weights
        "nvfp4": 0.5 + 1 / 16,  # FP8 scale per 16 weights
        "gptq-int4": 0.5 + 2.5 / 128,  # fp16 scale + 4-bit zero per 128
        "awq-int4": 0.5 + 2.5 / 128,
        "w4a16": 0.5 + 2 / 128,  # symmetric: scale only
        "w8a8-int8": 1.0,
        "w8a8-fp8": 1.0,
        "w4a16-experts": 0.5 + 2 / 32,  # bf16 scale per 32 (Kimi K2.5)
    }


def test_what_stays_sixteen_bit() -> None:
    assert FORMATS["mxfp4"].quantized_layers == "moe-experts"
    assert FORMATS["mxfp4"].sixteen_bit_layers.startswith("everything but the routed experts")
    assert FORMATS["nvfp4"].sixteen_bit_layers.startswith("embeddings and lm_head")
    assert FORMATS["w4a16-experts"].quantized_layers == "moe-experts"
    assert {f.quantized_layers for n, f in FORMATS.items() if n not in ("mxfp4", "w4a16-experts")} == {"linear"}


def test_unsupported_pair_fails_with_one_line_naming_the_gpu_and_what_runs_it() -> None:
    with pytest.raises(ConfigError) as err:
        require_supported("w8a8-int8", instance_type("p6-b200.48xlarge"))
    assert str(err.value) == (
        "workload.weight_format: 'w8a8-int8' is not allowed on p6-b200.48xlarge (B200, sm100): in vLLM 0.33 its "
        "CUTLASS int8 GEMM has no kernel from sm100 on yet claims every int8 layer before the Triton fallback, so "
        "start-up fails (model_executor/kernels/linear/scaled_mm/cutlass.py "
        "CutlassInt8ScaledMMLinearKernel.is_supported; vllm#54311); "
        "instance families that run it: g5, g6, gr6, g6e, p4d, p4de, p5, p5e, p5en [LLMEKS-E205]"
    )


def test_consumer_blackwell_refuses_int8_too() -> None:
    with raises_code(E205, match=r"^workload\.weight_format: 'w8a8-int8' is not allowed on g7e\.2xlarge "):
        require_supported("w8a8-int8", instance_type("g7e.2xlarge"))


def test_supported_and_weight_only_pairs_pass() -> None:
    require_supported("nvfp4", instance_type("g5.12xlarge"))  # weight-only Marlin FP4: plans, slower
    require_supported("w8a8-int8", instance_type("p5.48xlarge"))
    require_supported("mxfp4", instance_type("g6e.xlarge"))


def test_inferentia_is_outside_the_table() -> None:
    with pytest.raises(ConfigError) as err:
        require_supported("bf16", instance_type("inf2.xlarge"), field="environments.dev.workload.weight_format")
    assert str(err.value) == (
        "environments.dev.workload.weight_format: 'bf16' is not allowed on inf2.xlarge (Inferentia2): the format "
        "table covers vLLM 0.33 on NVIDIA GPUs only; instance families that run it: g5, g6, gr6, g6e, g7, g7e, "
        "p4d, p4de, p5, p5e, p5en, p6-b200, p6-b300 [LLMEKS-E205]"
    )


def test_unknown_format_and_capability() -> None:
    with pytest.raises(ConfigError) as err:
        weight_format("nvfp8")
    assert str(err.value) == (
        "workload.weight_format: 'nvfp8' is not allowed; did you mean 'nvfp4'? allowed: bf16, fp8, fp8-block, "
        "mxfp4, nvfp4, gptq-int4, awq-int4, w4a16, w8a8-int8, w8a8-fp8, w4a16-experts [LLMEKS-E205]"
    )
    with pytest.raises(ConfigError) as err:
        support("fp8", (7, 5))
    assert str(err.value) == (
        "compute_capability: (7, 5) is not allowed; the format table covers sm80, sm86, sm89, sm90, sm100, sm103, sm120"
        " [LLMEKS-E205]"
    )


def test_families_that_run_a_format_follow_the_catalog_order() -> None:
    assert families_that_run("w8a8-int8") == ["g5", "g6", "gr6", "g6e", "p4d", "p4de", "p5", "p5e", "p5en"]


# --- Hugging Face quantization_config ------------------------------------------------------------------------------

# Copies of published config.json quantization_config objects (/work/notes/model-configs, provenance there);
# ignore lists trimmed.
DEEPSEEK_V3 = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}
GPT_OSS = {"modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"], "quant_method": "mxfp4"}
SCOUT_FP8_DYNAMIC = {
    "config_groups": {
        "group_0": {
            "input_activations": {"dynamic": True, "num_bits": 8, "strategy": "token", "type": "float"},
            "targets": ["Linear"],
            "weights": {"dynamic": False, "num_bits": 8, "strategy": "channel", "type": "float"},
        }
    },
    "format": "float-quantized",
    "quant_method": "compressed-tensors",
}


def _ct(weights: dict, acts: dict | None) -> dict:
    group = {"targets": ["Linear"], "weights": weights, "input_activations": acts}
    return {"quant_method": "compressed-tensors", "config_groups": {"group_0": group}}


INT4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}
INT8 = {"num_bits": 8, "type": "int", "strategy": "channel"}
FP8_BLOCK = {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}
FP4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (None, "bf16"),
        (DEEPSEEK_V3, "fp8-block"),
        ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "fp8"),
        (GPT_OSS, "mxfp4"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}, "nvfp4"),
        ({"quant_method": "modelopt", "quantization": {"quant_algo": "FP8"}}, "fp8"),
        ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}, "gptq-int4"),
        ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, "awq-int4"),
        (SCOUT_FP8_DYNAMIC, "w8a8-fp8"),
        (_ct(INT4, None), "w4a16"),
        (_ct(INT8, {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True}), "w8a8-int8"),
        (_ct(FP8_BLOCK, {"num_bits": 8, "type": "float", "strategy": "group", "group_size": 128}), "fp8-block"),
        (_ct(FP4, FP4), "nvfp4"),
    ],
    ids=[
        "none", "deepseek-v3", "fp8", "gpt-oss", "modelopt-nvfp4", "modelopt-fp8", "gptq", "awq",
        "ct-fp8-dynamic", "ct-w4a16", "ct-int8", "ct-fp8-block", "ct-nvfp4",
    ],
)  # fmt: skip
def test_quantization_config_maps_to_a_format(config: dict | None, expected: str) -> None:
    assert format_of_quantization_config(config) == expected


P = "model_config.quantization_config"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"quant_method": "bitsandbytes"},
            f"{P}.quant_method: 'bitsandbytes' is not allowed; the planner knows fp8 (per-tensor/channel or "
            "weight_block_size), mxfp4, modelopt (quant_algo FP8 or NVFP4), gptq and awq (bits 4), "
            "compressed-tensors (W4A16, W4A16 routed experts in groups of 32, W8A8 int8, W8A8 fp8, NVFP4)"
            " [LLMEKS-E205]",
        ),
        (
            {"quant_method": "gptq", "bits": 8},
            f"{P}.bits: 8 is not allowed; the planner knows 4-bit GPTQ checkpoints [LLMEKS-E205]",
        ),
        (
            {"quant_method": "fp8", "weight_block_size": [64, 64]},
            f"{P}.weight_block_size: [64, 64] is not allowed; "
            "the planner knows [128, 128] blocks (DeepSeek, Qwen3 FP8) [LLMEKS-E205]",
        ),
        (
            {"quant_method": "modelopt", "quant_algo": "MXFP8"},
            f"{P}.quant_algo: 'MXFP8' is not allowed; the planner knows ModelOpt FP8 and NVFP4 checkpoints"
            " [LLMEKS-E205]",
        ),
        (
            _ct({"num_bits": 8, "type": "float", "strategy": "channel"}, None),
            f"{P}.config_groups.group_0: 'weights float 8, activations 16-bit' is not allowed; the planner knows "
            "compressed-tensors W4A16 (int 4, no activations), W8A8 int8, W8A8 fp8 and NVFP4 (float 4, group 16)"
            " [LLMEKS-E205]",
        ),
        (
            {"quant_method": "compressed-tensors", "config_groups": {}},
            f"{P}.config_groups: {{}} is not allowed; must name at least one quantization scheme [LLMEKS-E205]",
        ),
        ("fp8", f"{P}: 'fp8' is not allowed; must be an object [LLMEKS-E205]"),
    ],
    ids=["unknown-method", "gptq-8bit", "fp8-64-block", "modelopt-mxfp8", "ct-w8a16", "ct-no-groups", "not-object"],
)
def test_unknown_quantization_fails_with_one_line(config: object, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        format_of_quantization_config(config)  # type: ignore[arg-type]
    assert str(err.value) == message


def test_mixed_compressed_tensors_schemes_are_refused() -> None:
    config = _ct(INT4, None)
    config["config_groups"]["group_1"] = {"weights": INT8, "input_activations": INT8}
    with pytest.raises(ConfigError) as err:
        format_of_quantization_config(config)
    assert str(err.value) == (
        f"{P}.config_groups: ['w4a16', 'w8a8-int8'] is not allowed; the planner sizes checkpoints with one scheme"
        " [LLMEKS-E205]"
    )


def test_a_modelopt_hf_quant_config_file_is_read_as_vllm_attaches_it() -> None:
    legacy = {"producer": {"name": "modelopt", "version": "0.29.0"}, "quantization": {"quant_algo": "NVFP4"}}
    assert format_of_quantization_config(legacy) == "nvfp4"
