"""`ModelSpec`: the architecture numbers of one model that decide its memory, described in config
(`ModelSpec.from_mapping`) or read from a local Hugging Face config.json (`ModelSpec.from_hf_config`), and the
Llama-style parameter count (`estimate_parameters`) that cross-checks the catalog rows (catalog/models.py).

Pure Python: no aws_cdk import (the `llm-eks plan` CLI must start fast).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from llm_eks.catalog.formats import FORMATS, format_of_quantization_config
from llm_eks.catalog.hf_config import active_parameters, architecture_fields, decoder_config
from llm_eks.catalog.hf_config import estimate_parameters as hf_estimate_parameters
from llm_eks.catalog.vision import deepstack_levels, vision_parameters
from llm_eks.error_codes import E103, E104, E203, E204
from llm_eks.errors import ConfigError, did_you_mean, fail

# A Python class name, as config.json's `architectures` holds them.
_ARCHITECTURE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,99}")
# The checkpoint's own dtype; 16-bit ones run as stored, float32 ones are served in 16 bits by vLLM's dtype "auto".
DTYPES = ("bfloat16", "float16", "float32")
# A checkpoint that is already quantized: its weights load as stored and vLLM detects the method itself.
QUANTIZATIONS = tuple(name for name in FORMATS if name != "bf16")


@dataclass(frozen=True)
class ModelSpec:
    """The architecture numbers that decide memory: weights, KV cache per token, and valid tensor-parallel sizes."""

    # Hugging Face repo id; also the served model name clients send.
    id: str
    # Total parameters (all experts for a mixture of experts).
    parameters: int
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    max_position_embeddings: int
    vocab_size: int
    # MLP width (per expert for a mixture of experts).
    intermediate_size: int
    native_dtype: str = "bfloat16"
    # True when the output projection reuses the input embedding matrix (one vocab x hidden matrix, not two).
    tie_word_embeddings: bool = False
    # Mixture of experts: experts per layer and experts each token is routed to; 0 for a dense model.
    num_experts: int = 0
    experts_per_token: int = 0
    # Parameters a token touches (MoE); None for a dense model (all of them).
    active_parameters: int | None = None
    # Set when the checkpoint itself is quantized (see QUANTIZATIONS); None for a 16/32-bit checkpoint.
    quantization: str | None = None
    # Multi-head latent attention (DeepSeek-V2/V3/R1, Kimi K2): each layer caches one latent of kv_lora_rank +
    # qk_rope_head_dim values per token instead of K and V heads; 0 for other attention.
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    # Sliding-window layers (gpt-oss, Gemma 3, Mistral): how many, and the window in tokens; 0 when none.
    sliding_window_layers: int = 0
    sliding_window: int = 0
    # Chunked local attention (Llama 4): how many layers attend within chunks of attention_chunk_size tokens.
    chunked_attention_layers: int = 0
    attention_chunk_size: int = 0
    # Fine-grained MoE: each expert's MLP width when it differs from intermediate_size (Qwen3-MoE, DeepSeek), the
    # always-on shared experts, and the leading/interleaved layers that keep a dense MLP of intermediate_size.
    moe_intermediate_size: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    # A published AWQ int4 checkpoint of this model, served when weight_format is awq-int4.
    awq_checkpoint: str | None = None
    # Of `parameters`: the vision encoder and projector of a multimodal checkpoint (catalog/vision.py), which vLLM
    # loads by default and keeps in 16 bits; 0 for a text-only model.
    vision_parameters: int = 0
    # Qwen3-VL's deepstack levels, each a max_num_batched_tokens x hidden_size buffer loaded with the weights.
    deepstack_levels: int = 0
    # A multimodal checkpoint served text-only (vLLM --language-model-only skips its vision tower, so it is neither
    # loaded nor counted here); False for a text model, or one whose vision encoder loads (vision_parameters).
    language_model_only: bool = False
    # The Hugging Face architecture (config.json `architectures[0]`, e.g. LlamaForCausalLM): which engines can run the
    # model (the Neuron engines serve a fixed list, catalog/neuron.py). None: not stated (a model described by hand).
    architecture: str | None = None

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def attention_kind(self) -> str:
        """mla, hybrid (sliding-window or chunked layers next to full ones) or full."""
        if self.is_mla:
            return "mla"
        return "hybrid" if self.sliding_window_layers or self.chunked_attention_layers else "full"

    @property
    def expert_width(self) -> int:
        return self.moe_intermediate_size or self.intermediate_size

    @property
    def expert_parameters(self) -> int:
        """Parameters of the routed experts' MLPs (the part MXFP4 checkpoints quantize); 0 for a dense model."""
        if not self.is_moe:
            return 0
        return (self.layers - self.dense_layers) * self.num_experts * 3 * self.hidden_size * self.expert_width

    @property
    def short_name(self) -> str:
        return self.id.rsplit("/", 1)[-1]

    @property
    def embedding_parameters(self) -> int:
        """Input embedding plus output projection (one matrix when tied). Quantization leaves these in 16 bits."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    def validate(self, path: str = "workload.model_spec") -> ModelSpec:
        """Raise ConfigError naming the first bad field; returns self so calls chain."""
        self._check_counts(path)
        self._check_layer_shapes(path)
        self._check_choices(path)
        self._check_sizes(path)
        return self

    def _check_counts(self, path: str) -> None:
        """The id and every count field: positive, or at least 0 where a model may have none."""
        if not isinstance(self.id, str) or not self.id.strip() or any(c.isspace() for c in self.id):
            raise fail(E203, f"{path}.id", self.id, "must be a Hugging Face repo id such as org/model-name")
        for name in (
            "parameters",
            "layers",
            "hidden_size",
            "attention_heads",
            "kv_heads",
            "head_dim",
            "max_position_embeddings",
            "vocab_size",
            "intermediate_size",
        ):
            _positive_int(getattr(self, name), f"{path}.{name}")
        for name in ("num_experts", "experts_per_token"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise fail(E203, f"{path}.{name}", value, "must be an integer >= 0 (0 for a dense model)")
        for name in (
            "kv_lora_rank",
            "qk_rope_head_dim",
            "sliding_window_layers",
            "sliding_window",
            "chunked_attention_layers",
            "attention_chunk_size",
            "moe_intermediate_size",
            "shared_experts",
            "dense_layers",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise fail(E203, f"{path}.{name}", value, "must be an integer >= 0 (0 when the model has none)")

    def _check_layer_shapes(self, path: str) -> None:
        """Fields that only make sense together: latent attention, windowed layers, MoE layers, KV heads."""
        if (self.kv_lora_rank > 0) != (self.qk_rope_head_dim > 0):
            raise fail(
                E203,
                f"{path}.qk_rope_head_dim",
                self.qk_rope_head_dim,
                "must be set together with kv_lora_rank (multi-head latent attention caches both per token)",
            )
        if self.sliding_window_layers + self.chunked_attention_layers > self.layers:
            raise fail(
                E203,
                f"{path}.sliding_window_layers",
                self.sliding_window_layers,
                f"sliding-window plus chunked layers ({self.chunked_attention_layers}) must not exceed layers "
                f"({self.layers})",
            )
        for count, size, name in (
            (self.sliding_window_layers, self.sliding_window, "sliding_window"),
            (self.chunked_attention_layers, self.attention_chunk_size, "attention_chunk_size"),
        ):
            if (count > 0) != (size > 0):
                raise fail(
                    E203, f"{path}.{name}", size, f"must be above 0 exactly when the model has such layers ({count})"
                )
        if self.dense_layers >= self.layers and self.is_moe:
            raise fail(E203, f"{path}.dense_layers", self.dense_layers, f"must be below layers ({self.layers}) for MoE")
        if self.attention_heads % self.kv_heads:
            raise fail(
                E203,
                f"{path}.kv_heads",
                self.kv_heads,
                f"must divide attention_heads ({self.attention_heads}): each KV head serves a group of query heads",
            )

    def _check_choices(self, path: str) -> None:
        """The dtype, the flags and the quantization among what llm-eks knows; experts per token within the experts."""
        if self.native_dtype not in DTYPES:
            raise fail(E203, f"{path}.native_dtype", self.native_dtype, f"must be one of {', '.join(DTYPES)}")
        if not isinstance(self.tie_word_embeddings, bool):
            raise fail(E203, f"{path}.tie_word_embeddings", self.tie_word_embeddings, "must be true or false")
        if self.quantization is not None and self.quantization not in QUANTIZATIONS:
            raise fail(
                E203, f"{path}.quantization", self.quantization, f"must be null or one of {', '.join(QUANTIZATIONS)}"
            )
        if self.num_experts > 1 and not 1 <= self.experts_per_token <= self.num_experts:
            raise fail(
                E203,
                f"{path}.experts_per_token",
                self.experts_per_token,
                f"must be between 1 and num_experts ({self.num_experts})",
            )
        if self.num_experts <= 1 and self.experts_per_token > 1:
            raise fail(E203, f"{path}.experts_per_token", self.experts_per_token, "needs num_experts > 1")

    def _check_sizes(self, path: str) -> None:
        """The vision encoder and the parameter counts against what the layers alone hold; the AWQ checkpoint id."""
        _non_negative_int(self.vision_parameters, f"{path}.vision_parameters")
        _non_negative_int(self.deepstack_levels, f"{path}.deepstack_levels")
        if not isinstance(self.language_model_only, bool):
            raise fail(E203, f"{path}.language_model_only", self.language_model_only, "must be true or false")
        if self.language_model_only and (self.vision_parameters or self.deepstack_levels):
            raise fail(
                E203,
                f"{path}.language_model_only",
                True,
                "a model served text-only loads no vision encoder: leave vision_parameters and deepstack_levels at 0",
            )
        if self.architecture is not None and (
            not isinstance(self.architecture, str) or not _ARCHITECTURE.fullmatch(self.architecture)
        ):
            raise fail(
                E203,
                f"{path}.architecture",
                self.architecture,
                "must be null or a Hugging Face architecture class name such as LlamaForCausalLM",
            )
        floor = self.embedding_parameters + self.layers * self.hidden_size + self.vision_parameters
        if self.parameters <= floor:
            raise fail(
                E203,
                f"{path}.parameters",
                self.parameters,
                f"must exceed the embeddings{' and vision encoder' if self.vision_parameters else ''} alone "
                f"({floor:,} for this vocab_size, hidden_size and layers)",
            )
        if self.active_parameters is not None:
            _positive_int(self.active_parameters, f"{path}.active_parameters")
            if self.active_parameters > self.parameters:
                raise fail(E203, f"{path}.active_parameters", self.active_parameters, "must not exceed parameters")
        if self.awq_checkpoint is not None and (
            not isinstance(self.awq_checkpoint, str) or "/" not in self.awq_checkpoint
        ):
            raise fail(E203, f"{path}.awq_checkpoint", self.awq_checkpoint, "must be a Hugging Face repo id (org/name)")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], path: str = "workload.model_spec") -> ModelSpec:
        """A model described in config with this class's field names. `parameters` may be left out when the
        model is Llama-style (see estimate_parameters); `kv_heads` defaults to attention_heads (no GQA) and
        `head_dim` to hidden_size / attention_heads."""
        if not isinstance(data, Mapping):
            raise fail(E203, path, data, "must be an object with the model's architecture fields")
        allowed = [f.name for f in fields(cls)]
        for key in data:
            if key not in allowed:
                raise ConfigError(
                    E103, f"{path}: unknown key {key!r}; {did_you_mean(str(key), allowed)}allowed: {', '.join(allowed)}"
                )
        for key in ("id", "layers", "hidden_size", "attention_heads", "max_position_embeddings", "vocab_size"):
            if key not in data:
                raise ConfigError(E104, f"{path}.{key}: missing; this field is required")
        if "intermediate_size" not in data:
            raise ConfigError(E104, f"{path}.intermediate_size: missing; this field is required")
        values = dict(data)
        for key in ("layers", "hidden_size", "attention_heads", "intermediate_size", "vocab_size"):
            _positive_int(values[key], f"{path}.{key}")
        values.setdefault("kv_heads", values["attention_heads"])
        _positive_int(values["kv_heads"], f"{path}.kv_heads")
        if "head_dim" not in values:
            if values["hidden_size"] % values["attention_heads"]:
                raise ConfigError(
                    E203,
                    f"{path}.head_dim: missing; hidden_size ({values['hidden_size']}) is not a multiple of "
                    f"attention_heads ({values['attention_heads']}), so it must be given",
                )
            values["head_dim"] = values["hidden_size"] // values["attention_heads"]
        _positive_int(values["head_dim"], f"{path}.head_dim")
        if "parameters" not in values:
            values["parameters"] = estimate_parameters(
                layers=values["layers"],
                hidden_size=values["hidden_size"],
                attention_heads=values["attention_heads"],
                kv_heads=values["kv_heads"],
                head_dim=values["head_dim"],
                intermediate_size=values["intermediate_size"],
                vocab_size=values["vocab_size"],
                tie_word_embeddings=bool(values.get("tie_word_embeddings", False)),
                num_experts=values.get("num_experts", 0) if isinstance(values.get("num_experts", 0), int) else 0,
            )
        return cls(**values).validate(path)

    @classmethod
    def from_hf_config(
        cls,
        source: str | Path | Mapping[str, Any],
        id: str,
        parameters: int | None = None,
        path: str = "model_config",
        language_model_only: bool = False,
    ) -> ModelSpec:
        """A model read from a Hugging Face config.json (a path, or the parsed dict): the decoder families
        `llm_eks.catalog.hf_config` describes (dense, Mixtral-style and fine-grained MoE, multi-head latent attention,
        sliding-window and chunked local layers), its dtype and quantization_config (FP8, AWQ 4-bit, MXFP4).

        `parameters`: give the real count when you have it; otherwise it is computed from the architecture
        (`hf_config.estimate_parameters`, within 0.1 % of the published totals of every catalog model).
        `language_model_only`: serve a multimodal checkpoint's decoder alone (vLLM --language-model-only); its
        vision_config is then not read, so a vision tower the planner cannot count (Kimi K2.5's MoonViT) is no error.
        """
        top = _read_config(source, path)
        config, decoder_path = decoder_config(top, path)
        values: dict[str, Any] = {"id": id, **architecture_fields(config, decoder_path)}
        architectures = top.get("architectures")
        if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
            values["architecture"] = architectures[0]
        if "tie_word_embeddings" not in config and "tie_word_embeddings" in top:  # Qwen3-VL keeps it at the top
            values["tie_word_embeddings"] = bool(top["tie_word_embeddings"])
        if language_model_only:
            values["language_model_only"] = True
            vision = 0
        else:
            values["vision_parameters"] = vision = vision_parameters(top, values["hidden_size"], path)
            values["deepstack_levels"] = deepstack_levels(top)
        path = decoder_path
        quantization = config.get("quantization_config") or top.get("quantization_config")
        fmt = format_of_quantization_config(quantization, f"{path}.quantization_config")
        values["quantization"] = None if fmt == "bf16" else fmt
        if parameters is not None:
            values["parameters"] = _positive_int(parameters, "parameters")
        else:
            values["parameters"] = hf_estimate_parameters(config, values) + vision
        # Text tokens touch no vision weights.
        values["active_parameters"] = active_parameters(values, values["parameters"] - vision)
        return cls.from_mapping(values, path)


def estimate_parameters(
    *,
    layers: int,
    hidden_size: int,
    attention_heads: int,
    kv_heads: int,
    head_dim: int,
    intermediate_size: int,
    vocab_size: int,
    tie_word_embeddings: bool = False,
    num_experts: int = 0,
    qkv_bias: bool = False,
) -> int:
    """Parameters of a Llama-style decoder: per layer q/o projections (hidden x heads x head_dim each), k/v
    projections (hidden x kv_heads x head_dim each), a gated MLP of three hidden x intermediate matrices (per
    expert, plus a hidden x experts router, for MoE), two RMSNorm vectors; plus embeddings (and an untied output
    projection) and the final norm. Exact for every catalog model (Qwen2 adds q/k/v biases)."""
    attention = 2 * hidden_size * attention_heads * head_dim + 2 * hidden_size * kv_heads * head_dim
    if qkv_bias:
        attention += attention_heads * head_dim + 2 * kv_heads * head_dim
    experts = max(num_experts, 1)
    mlp = 3 * hidden_size * intermediate_size * experts + (hidden_size * experts if experts > 1 else 0)
    layer = attention + mlp + 2 * hidden_size
    embeddings = vocab_size * hidden_size * (1 if tie_word_embeddings else 2)
    return embeddings + layers * layer + hidden_size


def _positive_int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail(E203, path, value, "must be a positive integer")
    return value


def _non_negative_int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise fail(E203, path, value, "must be an integer >= 0")
    return value


def _read_config(source: str | Path | Mapping[str, Any], path: str) -> Mapping[str, Any]:
    if isinstance(source, Mapping):
        return source
    file = Path(source)
    if file.is_dir():
        file = file / "config.json"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise fail(E204, path, str(file), "no such file; give the path of a Hugging Face config.json") from None
    except (OSError, UnicodeDecodeError) as err:
        raise fail(E204, path, str(file), f"cannot be read ({err.__class__.__name__})") from None
    except json.JSONDecodeError as err:
        raise fail(E204, path, str(file), f"is not JSON (line {err.lineno}: {err.msg})") from None
    if not isinstance(data, Mapping):
        raise fail(E204, path, str(file), "must hold a JSON object")
    return data
