"""The vision encoder and projector a multimodal checkpoint carries beside its decoder, as vLLM 0.33 loads them.

vLLM builds and loads the image tower unless image inputs are turned off (`--language-model-only`, or an image limit
of 0: vllm/config/multimodal.py `language_model_only`, vllm/model_executor/models/interfaces.py `_mark_tower_model`),
so its weights come off the KV cache like the decoder's. The planner counts it at 16 bits in every checkpoint format:
Llama 4 builds it with `quant_config=None` (models/mllama4.py), and the quantized checkpoints of the others that we
read leave it out (`vision_tower`, `multi_modal_projector`, `visual` in their ignore lists).

One formula per vision `model_type` vLLM 0.33 serves among the catalog's families, each counting the modules its
model code instantiates (biases as its layers declare them). Sizes a config leaves out take transformers' defaults,
as the config object vLLM reads does:
- `siglip_vision_model` (Gemma 3, models/gemma3_mm.py + siglip.py): conv patch embedding with bias, learned position
  embeddings, layers of biased q/k/v/o and fc1/fc2 with two LayerNorms, a post-LayerNorm; the projector is one
  vision x text-hidden matrix and an RMSNorm.
- `pixtral` (Mistral Small 3.x, models/pixtral.py, mistral3.py): bias-free conv and layers (q/k/v/o, gated MLP, two
  RMSNorms), a pre-norm; the projector is an RMSNorm, the 2x2 patch merger and two linears to the text width.
- `llama4_vision_model` (Llama 4, models/mllama4.py): bias-free patch projection, class and position embeddings,
  pre/post LayerNorms, layers of biased q/k/v/o and fc1/fc2 with two LayerNorms, the pixel-shuffle MLP adapter and
  a projector to the text width.
- `qwen2_5_vl` (Qwen2.5-VL, models/qwen2_5_vl.py): bias-free Conv3d patch embedding, layers of biased qkv/proj and a
  biased gated MLP with two RMSNorms; the merger is an RMSNorm and two biased linears (no position table: 2-D RoPE).
- `qwen3_vl`, `qwen3_vl_moe` (Qwen3-VL, models/qwen3_vl.py): biased Conv3d, a learned position table, layers of
  biased qkv/proj and a biased plain MLP with two LayerNorms; a merger and one more per deepstack level.

Counted this way, decoder plus vision equals the published parameter total of every multimodal model we have a
config for (catalog/configs/SOURCES.md, tests/fixtures/vl_configs/SOURCES.md). Written by hand for the reason
hf_config.py gives.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from llm_eks.error_codes import E203
from llm_eks.errors import fail

# transformers' Qwen2_5_VLVisionConfig and Qwen3VLVisionConfig defaults (configuration_qwen2_5_vl.py,
# configuration_qwen3_vl.py): newer Qwen files store only the keys that differ from these.
QWEN2_5_DEFAULTS = {"depth": 32, "hidden_size": 3584, "intermediate_size": 3420, "in_channels": 3, "patch_size": 14,
                    "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 3584}  # fmt: skip
QWEN3_DEFAULTS = {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "in_channels": 3, "patch_size": 16,
                  "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 3584,
                  "num_position_embeddings": 2304}  # fmt: skip
QWEN3_DEEPSTACK_DEFAULT = [8, 16, 24]


def vision_parameters(config: Mapping[str, Any], text_hidden: int, path: str) -> int:
    """Parameters of the vision tower and projector of a multimodal config.json (0 when it has no vision_config)."""
    vision = config.get("vision_config")
    if vision is None:
        return 0
    vpath = f"{path}.vision_config"
    if not isinstance(vision, Mapping):
        raise fail(E203, vpath, vision, "must be a mapping")
    # Original Qwen2.5-VL files leave the vision model_type out; the top level names the family.
    kind = vision.get("model_type") or config.get("model_type")
    count = _FAMILIES.get(str(kind))
    if count is None:
        raise fail(
            E203, f"{vpath}.model_type", kind, f"the planner counts these vision encoders: {', '.join(_FAMILIES)}"
        )
    return count(config, vision, text_hidden, path)


def deepstack_levels(config: Mapping[str, Any]) -> int:
    """Qwen3-VL's deepstack levels: the model keeps one max_num_batched_tokens x text-hidden buffer per level on each
    GPU, allocated with the weights (models/qwen3_vl.py `deepstack_input_embeds`); 0 for other models."""
    vision = config.get("vision_config")
    if not isinstance(vision, Mapping) or _FAMILIES.get(str(vision.get("model_type"))) is not _qwen3:
        return 0
    indexes = vision.get("deepstack_visual_indexes", QWEN3_DEEPSTACK_DEFAULT)
    return len(indexes) if isinstance(indexes, list) else 0


def _siglip(config: Mapping[str, Any], vision: Mapping[str, Any], text_hidden: int, path: str) -> int:
    size = _sizes(vision, f"{path}.vision_config", {"num_channels": 3})
    h, inner, patch = size("hidden_size"), size("intermediate_size"), size("patch_size")
    positions = (size("image_size") // patch) ** 2
    layer = 4 * (h * h + h) + (h * inner + inner) + (inner * h + h) + 4 * h
    tower = size("num_hidden_layers") * layer + size("num_channels") * patch * patch * h + h + positions * h + 2 * h
    return tower + h * text_hidden + h


def _pixtral(config: Mapping[str, Any], vision: Mapping[str, Any], text_hidden: int, path: str) -> int:
    size = _sizes(vision, f"{path}.vision_config", {"num_channels": 3})
    h, inner, patch = size("hidden_size"), size("intermediate_size"), size("patch_size")
    merge = _sizes(config, path, {"spatial_merge_size": 2})("spatial_merge_size")
    layer = 4 * h * h + 3 * h * inner + 2 * h
    tower = size("num_hidden_layers") * layer + size("num_channels") * patch * patch * h + h
    bias = text_hidden * 2 if config.get("multimodal_projector_bias") else 0
    return tower + h + merge * merge * h * h + h * text_hidden + text_hidden * text_hidden + bias


def _llama4(config: Mapping[str, Any], vision: Mapping[str, Any], text_hidden: int, path: str) -> int:
    size = _sizes(vision, f"{path}.vision_config", {"num_channels": 3})
    h, inner, patch = size("hidden_size"), size("intermediate_size"), size("patch_size")
    positions = (size("image_size") // patch) ** 2 + 1  # and the class embedding
    layer = (3 * h * h + 3 * h) + (h * h + h) + (h * inner + inner) + (inner * h + h) + 4 * h
    embeddings = size("num_channels") * patch * patch * h + h + positions * h + 4 * h
    adapter_in, adapter_out = size("projector_input_dim"), size("projector_output_dim")
    adapter = inner * adapter_in + adapter_in * adapter_out
    if vision.get("multi_modal_projector_bias"):
        adapter += adapter_in + adapter_out
    projector = size("vision_output_dim") * text_hidden
    return size("num_hidden_layers") * layer + embeddings + adapter + projector


def _qwen2_5(config: Mapping[str, Any], vision: Mapping[str, Any], text_hidden: int, path: str) -> int:
    size = _sizes(vision, f"{path}.vision_config", QWEN2_5_DEFAULTS)
    h, inner, merged = (
        size("hidden_size"),
        size("intermediate_size"),
        size("hidden_size") * size("spatial_merge_size") ** 2,
    )
    patch = size("in_channels") * size("temporal_patch_size") * size("patch_size") ** 2 * h
    block = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + (2 * h * inner + 2 * inner) + (inner * h + h)
    merger = h + merged * merged + merged + merged * size("out_hidden_size") + size("out_hidden_size")
    return patch + size("depth") * block + merger


def _qwen3(config: Mapping[str, Any], vision: Mapping[str, Any], text_hidden: int, path: str) -> int:
    vpath = f"{path}.vision_config"
    size = _sizes(vision, vpath, QWEN3_DEFAULTS)
    h, inner, merged = (
        size("hidden_size"),
        size("intermediate_size"),
        size("hidden_size") * size("spatial_merge_size") ** 2,
    )
    out = size("out_hidden_size")
    patch = size("in_channels") * size("temporal_patch_size") * size("patch_size") ** 2 * h + h
    block = 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * inner + inner) + (inner * h + h)
    mlp = merged * merged + merged + merged * out + out
    deepstack = vision.get("deepstack_visual_indexes", QWEN3_DEEPSTACK_DEFAULT)
    if not isinstance(deepstack, list):
        raise fail(E203, f"{vpath}.deepstack_visual_indexes", deepstack, "must be a list of layer indexes")
    levels = len(deepstack) * (2 * merged + mlp)  # each deepstack merger normalizes after the 2x2 shuffle
    return patch + size("num_position_embeddings") * h + size("depth") * block + 2 * h + mlp + levels


_FAMILIES: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any], int, str], int]] = {
    "siglip_vision_model": _siglip,
    "pixtral": _pixtral,
    "llama4_vision_model": _llama4,
    "qwen2_5_vl": _qwen2_5,
    "qwen3_vl": _qwen3,
    "qwen3_vl_moe": _qwen3,
    # transformers 5 saves the Qwen3-VL vision configs under these names.
    "qwen3_vl_vision": _qwen3,
    "qwen3_vl_moe_vision": _qwen3,
}


def _sizes(config: Mapping[str, Any], path: str, defaults: Mapping[str, int]) -> Callable[[str], int]:
    """A reader of positive integer sizes from `config`, falling back to `defaults`; anything else is one line."""

    def size(key: str) -> int:
        value = config.get(key, defaults.get(key))
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise fail(E203, f"{path}.{key}", value, "must be a positive integer")
        return value

    return size
