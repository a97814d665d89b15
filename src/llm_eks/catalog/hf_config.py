"""Hugging Face config.json -> the architecture fields the planner needs, and a parameter count from them.

One reader for the decoder families vLLM 0.33 serves that matter for memory: Llama-style dense and Mixtral-style MoE
(llama, mistral, qwen2, qwen3), fine-grained MoE (qwen3_moe, with `moe_intermediate_size`), multi-head latent
attention with shared experts and leading dense layers (deepseek_v2, deepseek_v3, kimi_k2), alternating sliding-window
attention with biased experts (gpt_oss), interleaved local/global attention (gemma3), and chunked local attention
with NoPE global layers (llama4). A multimodal config's `text_config` is read when the top level has no decoder.

The layer types follow vLLM's own model code: gpt-oss slides on even layers (`OAIAttention`, models/gpt_oss.py,
`layer_types`); Gemma 3 every layer but each `sliding_window_pattern`-th (models/gemma3.py, `layer_types`); Llama 4
chunks every layer whose `no_rope_layers` entry is 1, defaulting to all but each 4th (models/llama4.py).

Hand-written because no maintained library maps config.json to parameter counts offline (transformers would
instantiate the model on the meta device: seconds of import for a CLI that must answer in well under one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_eks.error_codes import E203
from llm_eks.errors import ConfigError, fail

# model_type values read; anything else is read as a Llama-style decoder and must not carry the fields below.
MLA_TYPES = ("deepseek_v2", "deepseek_v3", "kimi_k2")


def decoder_config(config: Mapping[str, Any], path: str) -> tuple[Mapping[str, Any], str]:
    """The decoder part of a config.json (its `text_config` for a multimodal model) and its field path."""
    if "num_hidden_layers" not in config and isinstance(config.get("text_config"), Mapping):
        return config["text_config"], f"{path}.text_config"
    return config, path


def architecture_fields(config: Mapping[str, Any], path: str) -> dict[str, Any]:
    """ModelSpec fields read from a decoder config (everything but id, parameters and quantization)."""
    required = {
        "num_hidden_layers": "layers",
        "hidden_size": "hidden_size",
        "num_attention_heads": "attention_heads",
        "max_position_embeddings": "max_position_embeddings",
        "vocab_size": "vocab_size",
        "intermediate_size": "intermediate_size",
    }
    values: dict[str, Any] = {}
    for key, name in required.items():
        if key not in config:
            raise ConfigError(E203, f"{path}.{key}: missing; a decoder config.json must have it")
        values[name] = _positive_int(config[key], f"{path}.{key}")
    layers = values["layers"]
    model_type = str(config.get("model_type", ""))
    if config.get("index_topk"):
        # DeepSeek-V3.2's sparse attention (and GLM-5's): a lightning indexer with a KV cache of its own
        # (vllm/model_executor/models/deepseek_v2.py DeepseekV32IndexerCache) and sparse MLA backends with their own
        # cache format; sized as plain MLA the plan would promise memory vLLM does not have.
        raise fail(
            E203,
            f"{path}.index_topk",
            config["index_topk"],
            "sparse attention with an indexer (DeepSeek-V3.2 DSA) keeps a second KV cache the planner does not "
            "model; such models are not planned",
        )
    values["kv_heads"] = _positive_int(config.get("num_key_value_heads") or values["attention_heads"], path)
    if config.get("head_dim") is not None:
        values["head_dim"] = _positive_int(config["head_dim"], f"{path}.head_dim")
    values["native_dtype"] = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
    values["tie_word_embeddings"] = bool(config.get("tie_word_embeddings", False))

    if "kv_lora_rank" in config or model_type in MLA_TYPES:
        values["kv_lora_rank"] = _positive_int(config.get("kv_lora_rank"), f"{path}.kv_lora_rank")
        values["qk_rope_head_dim"] = _positive_int(config.get("qk_rope_head_dim"), f"{path}.qk_rope_head_dim")
        # The config repeats num_attention_heads as num_key_value_heads; MLA caches one latent, not KV heads.
        values["kv_heads"] = values["attention_heads"]
        values["head_dim"] = (
            _positive_int(config.get("qk_nope_head_dim"), f"{path}.qk_nope_head_dim") + values["qk_rope_head_dim"]
        )

    sliding = _sliding_layers(config, layers, path)
    if sliding:
        values["sliding_window"] = _positive_int(config.get("sliding_window"), f"{path}.sliding_window")
        values["sliding_window_layers"] = sliding
    chunk = config.get("attention_chunk_size")
    if chunk:
        values["attention_chunk_size"] = _positive_int(chunk, f"{path}.attention_chunk_size")
        values["chunked_attention_layers"] = _chunked_layers(config, layers, path)

    experts = config.get("num_local_experts") or config.get("num_experts") or config.get("n_routed_experts") or 0
    values["num_experts"] = _non_negative_int(experts, f"{path}.num_local_experts")
    if values["num_experts"] > 1:
        per_token = config.get("num_experts_per_tok") or config.get("experts_per_token")
        values["experts_per_token"] = _positive_int(per_token, f"{path}.num_experts_per_tok")
        if config.get("moe_intermediate_size"):
            values["moe_intermediate_size"] = _positive_int(
                config["moe_intermediate_size"], f"{path}.moe_intermediate_size"
            )
        shared = config.get("n_shared_experts") or (1 if model_type.startswith("llama4") else 0)
        values["shared_experts"] = _non_negative_int(shared, f"{path}.n_shared_experts")
        values["dense_layers"] = _dense_layers(config, layers, path)
    return values


def _sliding_layers(config: Mapping[str, Any], layers: int, path: str) -> int:
    types = config.get("layer_types")
    if isinstance(types, list) and types:
        if len(types) != layers:
            raise fail(E203, f"{path}.layer_types", f"{len(types)} entries", f"must list one type per layer ({layers})")
        return sum(1 for t in types if t == "sliding_attention")
    if not config.get("sliding_window") or config.get("use_sliding_window") is False:
        return 0
    pattern = config.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 1:
        return layers - layers // pattern  # every pattern-th layer is global
    if str(config.get("model_type", "")).startswith("gemma3"):
        return layers - layers // 6  # Gemma 3's default pattern when the config leaves it out
    return layers  # Mistral-style: every layer slides


def _chunked_layers(config: Mapping[str, Any], layers: int, path: str) -> int:
    no_rope = config.get("no_rope_layers")
    if isinstance(no_rope, list) and no_rope:
        if len(no_rope) != layers:
            raise fail(
                E203, f"{path}.no_rope_layers", f"{len(no_rope)} entries", f"must list one flag per layer ({layers})"
            )
        return sum(1 for flag in no_rope if flag)
    interval = config.get("no_rope_layer_interval") or 4
    return layers - layers // _positive_int(interval, f"{path}.no_rope_layer_interval")


def _dense_layers(config: Mapping[str, Any], layers: int, path: str) -> int:
    """Layers with a dense MLP instead of experts."""
    if config.get("first_k_dense_replace") is not None:
        return _non_negative_int(config["first_k_dense_replace"], f"{path}.first_k_dense_replace")
    if config.get("interleave_moe_layer_step"):
        step = _positive_int(config["interleave_moe_layer_step"], f"{path}.interleave_moe_layer_step")
        return layers - layers // step
    mlp_only = config.get("mlp_only_layers")
    dense = len(mlp_only) if isinstance(mlp_only, list) else 0
    step = config.get("decoder_sparse_step") or 1
    if step > 1:
        dense = max(dense, layers - layers // step)
    return dense


def estimate_parameters(config: Mapping[str, Any], fields: Mapping[str, Any]) -> int:
    """Parameters of the decoder described by `config` (read into `fields` by architecture_fields): embeddings (and
    an untied output projection), each layer's attention, MLP or experts (with router and shared experts), norms,
    biases where the family has them, and the final norm. Multi-token-prediction layers are not counted (vLLM loads
    them only for speculative decoding)."""
    hidden, heads, kv_heads = fields["hidden_size"], fields["attention_heads"], fields["kv_heads"]
    head_dim = fields.get("head_dim") or hidden // heads
    model_type = str(config.get("model_type", ""))
    if fields.get("kv_lora_rank"):
        attention = _mla_attention(config, fields)
    else:
        attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
        # Qwen2-style q/k/v biases; vLLM builds Qwen2.5-VL's decoder as Qwen2ForCausalLM (models/qwen2_5_vl.py).
        if config.get("attention_bias") or model_type in ("qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"):
            attention += heads * head_dim + 2 * kv_heads * head_dim
            if model_type == "gpt_oss":
                attention += hidden + heads  # o_proj bias and the per-head attention sinks
        # Per-head q/k RMSNorm weights (Qwen3 and Qwen3-VL's decoders, Gemma 3); Llama 4's qk_norm has none
        # (models/llama4.py, RMSNorm(has_weight=False)).
        if (
            model_type in ("qwen3", "qwen3_moe", "qwen3_vl_text", "qwen3_vl_moe_text")
            or model_type.startswith("gemma3")
            or (config.get("use_qk_norm") and not model_type.startswith("llama4"))
        ):
            attention += 2 * head_dim
    dense_mlp = 3 * hidden * int(config.get("intermediate_size_mlp") or fields["intermediate_size"])
    experts = fields.get("num_experts", 0)
    if experts > 1:
        expert_width = fields.get("moe_intermediate_size") or fields["intermediate_size"]
        expert = 3 * hidden * expert_width
        if model_type == "gpt_oss":
            expert += 2 * expert_width + hidden  # gate_up and down biases
        router = hidden * experts + (experts if model_type in ("gpt_oss", "deepseek_v3", "kimi_k2") else 0)
        moe = experts * expert + router + fields.get("shared_experts", 0) * 3 * hidden * expert_width
        dense = fields.get("dense_layers", 0)
        mlp_total = dense * dense_mlp + (fields["layers"] - dense) * moe
    else:
        mlp_total = fields["layers"] * dense_mlp
    norms = fields["layers"] * 2 * hidden * (2 if model_type.startswith("gemma3") else 1)
    embeddings = fields["vocab_size"] * hidden * (1 if fields.get("tie_word_embeddings") else 2)
    return int(embeddings + fields["layers"] * attention + mlp_total + norms + hidden)


def active_parameters(fields: Mapping[str, Any], total: int) -> int | None:
    """Parameters one token touches in an MoE model (its routed experts, not the others); None for a dense model."""
    experts = fields.get("num_experts", 0)
    if experts <= 1:
        return None
    width = fields.get("moe_intermediate_size") or fields["intermediate_size"]
    unused = (fields["layers"] - fields.get("dense_layers", 0)) * (experts - fields["experts_per_token"])
    return int(total - unused * 3 * fields["hidden_size"] * width)


def _mla_attention(config: Mapping[str, Any], fields: Mapping[str, Any]) -> int:
    """DeepSeek-V2/V3 attention: low-rank query (when q_lora_rank), the compressed KV latent and its projections."""
    hidden, heads = fields["hidden_size"], fields["attention_heads"]
    rope, kv_lora = fields["qk_rope_head_dim"], fields["kv_lora_rank"]
    nope = _positive_int(config.get("qk_nope_head_dim"), "qk_nope_head_dim")
    v_dim = _positive_int(config.get("v_head_dim"), "v_head_dim")
    q_lora = int(config.get("q_lora_rank") or 0)
    query = hidden * q_lora + q_lora + q_lora * heads * (nope + rope) if q_lora else hidden * heads * (nope + rope)
    latent = hidden * (kv_lora + rope) + kv_lora + kv_lora * heads * (nope + v_dim)
    return int(query + latent + heads * v_dim * hidden)


def _positive_int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail(E203, path, value, "must be a positive integer")
    return int(value)


def _non_negative_int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise fail(E203, path, value, "must be an integer >= 0")
    return int(value)
