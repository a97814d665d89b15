"""The model catalog: well-known open models the planner sizes by id, and `model()` to look one up. Each row is a
`ModelSpec` (catalog/model_spec.py, re-exported here with `estimate_parameters`).

Catalog numbers are copied from each model's config.json on the Hugging Face Hub (cited per row). Parameter counts
are the published totals; `estimate_parameters` reproduces every one of them exactly from the architecture (a
Llama-style decoder: grouped-query attention, a gated MLP of three matrices, RMSNorm), which cross-checks the rows.
`architecture` is the same config.json's `architectures[0]` (which engine paths serve the model: catalog/neuron.py).

Pure Python: no aws_cdk import (the `llm-eks plan` CLI must start fast).
"""

from __future__ import annotations

from pathlib import Path

from llm_eks.catalog.model_spec import DTYPES, QUANTIZATIONS, ModelSpec, estimate_parameters
from llm_eks.error_codes import E200
from llm_eks.errors import did_you_mean, fail

__all__ = [
    "CATALOG",
    "CONFIGS",
    "CONFIG_MODELS",
    "DTYPES",
    "LANGUAGE_MODEL_ONLY",
    "MODELS",
    "QUANTIZATIONS",
    "ModelSpec",
    "estimate_parameters",
    "model",
]

CATALOG: tuple[ModelSpec, ...] = (
    # https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json
    # (32 layers, hidden 4096, 32 heads / 8 KV heads, intermediate 14336, vocab 128256, 131072 positions, bfloat16);
    # 8,030,261,248 parameters (the model card's safetensors total).
    ModelSpec(
        id="meta-llama/Llama-3.1-8B-Instruct",
        architecture="LlamaForCausalLM",
        parameters=8_030_261_248,
        layers=32,
        hidden_size=4096,
        attention_heads=32,
        kv_heads=8,
        head_dim=128,
        max_position_embeddings=131072,
        vocab_size=128256,
        intermediate_size=14336,
        awq_checkpoint="hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4",
    ),
    # https://huggingface.co/meta-llama/Llama-3.3-70B-Instruct/blob/main/config.json
    # (80 layers, hidden 8192, 64 heads / 8 KV heads, intermediate 28672, vocab 128256, 131072 positions, bfloat16);
    # 70,553,706,496 parameters.
    ModelSpec(
        id="meta-llama/Llama-3.3-70B-Instruct",
        architecture="LlamaForCausalLM",
        parameters=70_553_706_496,
        layers=80,
        hidden_size=8192,
        attention_heads=64,
        kv_heads=8,
        head_dim=128,
        max_position_embeddings=131072,
        vocab_size=128256,
        intermediate_size=28672,
        awq_checkpoint="casperhansen/llama-3.3-70b-instruct-awq",
    ),
    # https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/main/config.json
    # (28 layers, hidden 3584, 28 heads / 4 KV heads, intermediate 18944, vocab 152064, 32768 positions, bfloat16,
    # untied; q/k/v biases); 7,615,616,512 parameters. Longer contexts need YaRN rope scaling, not modelled here.
    ModelSpec(
        id="Qwen/Qwen2.5-7B-Instruct",
        architecture="Qwen2ForCausalLM",
        parameters=7_615_616_512,
        layers=28,
        hidden_size=3584,
        attention_heads=28,
        kv_heads=4,
        head_dim=128,
        max_position_embeddings=32768,
        vocab_size=152064,
        intermediate_size=18944,
        awq_checkpoint="Qwen/Qwen2.5-7B-Instruct-AWQ",
    ),
    # https://huggingface.co/Qwen/Qwen2.5-72B-Instruct/blob/main/config.json
    # (80 layers, hidden 8192, 64 heads / 8 KV heads, intermediate 29568, vocab 152064, 32768 positions, bfloat16);
    # 72,706,203,648 parameters.
    ModelSpec(
        id="Qwen/Qwen2.5-72B-Instruct",
        architecture="Qwen2ForCausalLM",
        parameters=72_706_203_648,
        layers=80,
        hidden_size=8192,
        attention_heads=64,
        kv_heads=8,
        head_dim=128,
        max_position_embeddings=32768,
        vocab_size=152064,
        intermediate_size=29568,
        awq_checkpoint="Qwen/Qwen2.5-72B-Instruct-AWQ",
    ),
    # https://huggingface.co/mistralai/Mistral-7B-Instruct-v0.3/blob/main/config.json
    # (32 layers, hidden 4096, 32 heads / 8 KV heads, intermediate 14336, vocab 32768, 32768 positions, no sliding
    # window, bfloat16); 7,248,023,552 parameters.
    ModelSpec(
        id="mistralai/Mistral-7B-Instruct-v0.3",
        architecture="MistralForCausalLM",
        parameters=7_248_023_552,
        layers=32,
        hidden_size=4096,
        attention_heads=32,
        kv_heads=8,
        head_dim=128,
        max_position_embeddings=32768,
        vocab_size=32768,
        intermediate_size=14336,
    ),
    # https://huggingface.co/mistralai/Mixtral-8x7B-Instruct-v0.1/blob/main/config.json
    # (32 layers, hidden 4096, 32 heads / 8 KV heads, 8 experts of intermediate 14336, 2 per token, vocab 32000,
    # 32768 positions, bfloat16); 46,702,792,704 parameters, 12,879,925,248 active per token.
    ModelSpec(
        id="mistralai/Mixtral-8x7B-Instruct-v0.1",
        architecture="MixtralForCausalLM",
        parameters=46_702_792_704,
        layers=32,
        hidden_size=4096,
        attention_heads=32,
        kv_heads=8,
        head_dim=128,
        max_position_embeddings=32768,
        vocab_size=32000,
        intermediate_size=14336,
        num_experts=8,
        experts_per_token=2,
        active_parameters=12_879_925_248,
    ),
    # https://huggingface.co/deepseek-ai/DeepSeek-R1-Distill-Llama-8B/blob/main/config.json
    # (Llama 3.1 8B architecture: 32 layers, hidden 4096, 32 / 8 heads, intermediate 14336, vocab 128256, 131072
    # positions, bfloat16); 8,030,261,248 parameters.
    ModelSpec(
        id="deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
        architecture="LlamaForCausalLM",
        parameters=8_030_261_248,
        layers=32,
        hidden_size=4096,
        attention_heads=32,
        kv_heads=8,
        head_dim=128,
        max_position_embeddings=131072,
        vocab_size=128256,
        intermediate_size=14336,
    ),
    # https://huggingface.co/deepseek-ai/DeepSeek-R1-Distill-Qwen-32B/blob/main/config.json
    # (Qwen2.5-32B architecture: 64 layers, hidden 5120, 40 heads / 8 KV heads, intermediate 27648, vocab 152064,
    # 131072 positions, bfloat16); 32,763,876,352 parameters.
    ModelSpec(
        id="deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
        architecture="Qwen2ForCausalLM",
        parameters=32_763_876_352,
        layers=64,
        hidden_size=5120,
        attention_heads=40,
        kv_heads=8,
        head_dim=128,
        max_position_embeddings=131072,
        vocab_size=152064,
        intermediate_size=27648,
    ),
)


# Models read from copies of their config.json (catalog/configs/, provenance in its SOURCES.md): parameters computed
# from the architecture (within 0.1 % of each published total), format from the checkpoint's quantization_config.
CONFIGS = Path(__file__).with_name("configs")
CONFIG_MODELS = (
    "openai/gpt-oss-20b",
    "openai/gpt-oss-120b",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-235B-A22B",
    "Qwen/Qwen3-235B-A22B-FP8",
    "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-R1",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    "google/gemma-3-27b-it",
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
    # Frontier MoE models (parameter totals: SOURCES.md). Kimi K2.5 is served as its text decoder (below).
    "moonshotai/Kimi-K2-Instruct",
    "moonshotai/Kimi-K2.5",
    "Qwen/Qwen3-Coder-480B-A35B-Instruct",
)
# Multimodal checkpoints the catalog serves text-only (vLLM --language-model-only): Kimi K2.5's MoonViT tower is a
# vision encoder catalog/vision.py has no formula for, so it is skipped rather than guessed.
LANGUAGE_MODEL_ONLY = ("moonshotai/Kimi-K2.5",)
CATALOG += tuple(
    ModelSpec.from_hf_config(
        CONFIGS / f"{model_id.replace('/', '__')}.json",
        id=model_id,
        path=f"catalog {model_id}",
        language_model_only=model_id in LANGUAGE_MODEL_ONLY,
    )
    for model_id in CONFIG_MODELS
)

MODELS: dict[str, ModelSpec] = {spec.id: spec for spec in CATALOG}


def model(model_id: str, field: str = "workload.model") -> ModelSpec:
    """The catalog entry for a Hugging Face id; unknown ids raise ConfigError with a did-you-mean hint."""
    if isinstance(model_id, str) and model_id in MODELS:
        return MODELS[model_id]
    hint = did_you_mean(model_id, MODELS) if isinstance(model_id, str) else ""
    raise fail(
        E200,
        field,
        model_id,
        f"{hint}catalog models: {', '.join(MODELS)} (describe any other model with workload.model_spec)",
    )
