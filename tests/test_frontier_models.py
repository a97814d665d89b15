"""Frontier models in the catalog (issue 24/25): Kimi-K2-Instruct (FP8), Kimi-K2.5's text decoder (INT4 experts),
Qwen3-Coder-480B-A35B-Instruct (bf16); their totals against the published figures (catalog/configs/SOURCES.md), how
vLLM 0.33 reads their checkpoints, and the plans they get. DeepSeek-V3.2 is refused, not sized wrong."""

from __future__ import annotations

import hashlib
import json

import pytest

from llm_eks.catalog.formats import FORMATS, format_of_quantization_config, support
from llm_eks.catalog.models import CONFIGS, MODELS, ModelSpec
from llm_eks.errors import ConfigError
from llm_eks.planner import PlanRequest, plan
from llm_eks.planner.sizing import Context

KIMI_K2, KIMI_K25 = "moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2.5"
QWEN_CODER = "Qwen/Qwen3-Coder-480B-A35B-Instruct"


def test_totals_equal_the_published_counts() -> None:
    # Qwen3-Coder: the Hub's safetensors BF16 count; Kimi K2: the logical count of its safetensors headers.
    assert MODELS[QWEN_CODER].parameters == 480_154_875_392
    assert MODELS[KIMI_K2].parameters == MODELS[KIMI_K25].parameters == 1_026_408_232_448
    assert round(MODELS[KIMI_K2].active_parameters or 0, -9) == 33e9  # "32B activated" on the model card
    assert round(MODELS[QWEN_CODER].active_parameters or 0, -9) == 35e9  # "A35B"


def test_weight_bytes_match_the_checkpoint_payloads() -> None:
    """Kimi K2's FP8 payload is 1,029,173,256,720 bytes; Kimi-K2-Thinking (K2.5's decoder and INT4 scheme without its
    vision tower) 594,205,920,512; Qwen3-Coder's bf16 is two bytes per parameter."""
    assert Context(PlanRequest(model=KIMI_K2)).weight_bytes == pytest.approx(1_029_173_256_720, rel=2e-4)
    assert Context(PlanRequest(model=KIMI_K25)).weight_bytes == pytest.approx(594_205_920_512, rel=1e-5)
    assert Context(PlanRequest(model=QWEN_CODER)).weight_bytes == 2 * 480_154_875_392


def test_architectures_as_vllm_reads_them() -> None:
    k2, coder = MODELS[KIMI_K2], MODELS[QWEN_CODER]
    assert (k2.attention_kind, k2.num_experts, k2.experts_per_token, k2.shared_experts, k2.dense_layers) == (
        "mla",
        384,
        8,
        1,
        1,
    )
    assert (k2.quantization, k2.max_position_embeddings, k2.kv_lora_rank + k2.qk_rope_head_dim) == (
        "fp8-block",
        131072,
        576,
    )
    assert (coder.attention_kind, coder.attention_heads, coder.kv_heads, coder.num_experts, coder.shared_experts) == (
        "full",
        96,
        8,
        160,
        0,
    )
    assert coder.quantization is None and coder.max_position_embeddings == 262144


def test_kimi_k25_is_its_int4_text_decoder_served_text_only() -> None:
    k25 = MODELS[KIMI_K25]
    assert (k25.quantization, k25.language_model_only, k25.vision_parameters) == ("w4a16-experts", True, 0)
    config = json.loads((CONFIGS / "moonshotai__Kimi-K2.5.json").read_text())
    quant = config["text_config"]["quantization_config"]
    assert format_of_quantization_config(quant) == "w4a16-experts"
    assert FORMATS["w4a16-experts"].bytes_per_weight == 0.5 + 2 / 32
    # Marlin on Hopper, FlashInfer TRT-LLM's MxInt4 on Blackwell (fused_moe/oracle/int_wna16.py).
    assert "MarlinExperts" in support("w4a16-experts", (9, 0)).evidence
    assert "trtllm_mxint4_moe.py" in support("w4a16-experts", (10, 0)).evidence
    p = plan(PlanRequest(model=KIMI_K25, accelerator="p5en.48xlarge", max_model_len=32768))
    assert "--language-model-only" in p.engine_args and p.engine.language_model_only
    # Read with its vision tower it is a one-line error: MoonViT is not a kind the planner counts.
    with pytest.raises(ConfigError) as err:
        ModelSpec.from_hf_config(config, id=KIMI_K25)
    assert "\n" not in str(err.value) and str(err.value).startswith("model_config.vision_config")


def test_an_int4_checkpoint_quantizing_attention_stays_w4a16() -> None:
    group = {"weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}}
    assert format_of_quantization_config({"quant_method": "compressed-tensors", "config_groups": {"g": group}}) == (
        "w4a16"
    )
    with pytest.raises(ConfigError) as err:
        format_of_quantization_config(
            {"quant_method": "compressed-tensors", "config_groups": {"g": group}, "ignore": ["re:.*self_attn.*"]}
        )
    assert str(err.value) == (
        "model_config.quantization_config.config_groups: ['128'] is not allowed; the planner knows W4A16 routed "
        "experts (attention ignored) with groups of 32 (Kimi K2.5) [LLMEKS-E205]"
    )


@pytest.mark.parametrize(
    ("model", "accelerator", "summary"),
    [
        (KIMI_K2, "p5en.48xlarge", "Kimi-K2-Instruct on p5en.48xlarge (8\N{MULTIPLICATION SIGN} H200): TP8 PP1, "
         "1 replica/node, KV 106k tokens, $63.30/h per replica"),
        (KIMI_K2, "p5.48xlarge", "Kimi-K2-Instruct on 2\N{MULTIPLICATION SIGN} p5.48xlarge (8\N{MULTIPLICATION SIGN} "
         "H100): TP8 PP2, 2 nodes/replica, KV 310k tokens, $110.08/h per replica"),
        (QWEN_CODER, "p5en.48xlarge", "Qwen3-Coder-480B-A35B-Instruct on p5en.48xlarge (8\N{MULTIPLICATION SIGN} "
         "H200): TP8 PP1, 1 replica/node, KV 507k tokens, $63.30/h per replica"),
        (QWEN_CODER, "p5.48xlarge", "Qwen3-Coder-480B-A35B-Instruct on 2\N{MULTIPLICATION SIGN} p5.48xlarge "
         "(8\N{MULTIPLICATION SIGN} H100): DP2 TP8 EP16, 2 nodes/replica, KV 901k tokens, $110.08/h per replica"),
    ],
)  # fmt: skip
def test_frontier_plans(model: str, accelerator: str, summary: str) -> None:
    p = plan(PlanRequest(model=model, accelerator=accelerator, max_model_len=32768))
    assert p.summary_line() == summary
    assert p.meets_target and not p.warnings


def test_kimi_k2_does_not_fit_one_h100_node() -> None:
    """1.03 TB of FP8 weights on 8 x 80 GB: one p5.48xlarge cannot hold them in any split."""
    with pytest.raises(ConfigError) as err:
        plan(PlanRequest(model=KIMI_K2, accelerator="p5.48xlarge", max_model_len=32768, max_nodes_per_replica=1))
    assert str(err.value).startswith("workload.accelerator: 'p5.48xlarge' is not allowed; moonshotai/Kimi-K2-Instruct")


def test_deepseek_v32_sparse_attention_is_refused_not_sized_as_mla() -> None:
    assert "deepseek-ai/DeepSeek-V3.2" not in MODELS
    config = {
        "architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32", "num_hidden_layers": 61,
        "hidden_size": 7168, "num_attention_heads": 128, "num_key_value_heads": 128, "intermediate_size": 18432,
        "max_position_embeddings": 163840, "vocab_size": 129280, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128, "v_head_dim": 128, "q_lora_rank": 1536, "index_topk": 2048, "index_head_dim": 128,
        "index_n_heads": 64, "n_routed_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 2048,
        "n_shared_experts": 1, "first_k_dense_replace": 3,
    }  # fmt: skip
    with pytest.raises(ConfigError) as err:
        ModelSpec.from_hf_config(config, id="deepseek-ai/DeepSeek-V3.2")
    assert str(err.value) == (
        "model_config.index_topk: 2048 is not allowed; sparse attention with an indexer (DeepSeek-V3.2 DSA) keeps a "
        "second KV cache the planner does not model; such models are not planned [LLMEKS-E203]"
    )


@pytest.mark.parametrize(
    ("name", "blob"),
    [
        ("moonshotai__Kimi-K2-Instruct", "09a59d7ee7aa257764bdc823ae51efc269ae3b09"),
        ("moonshotai__Kimi-K2.5", "2a9983f30584b7fb293b5a334dff3a585a1e9206"),
        ("Qwen__Qwen3-Coder-480B-A35B-Instruct", "f7d77deb15267781f7281340c613235fea3df266"),
    ],
)
def test_the_catalog_copies_are_the_upstream_blobs(name: str, blob: str) -> None:
    """Each copy is byte for byte aiconfigurator's file at 095f58a51c4c (git blob ids, SOURCES.md)."""
    data = (CONFIGS / f"{name}.json").read_bytes()
    assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob  # git's object id
    assert blob[:8] in (CONFIGS / "SOURCES.md").read_text()
