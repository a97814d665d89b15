"""The vision encoder and projector a multimodal checkpoint carries beside its decoder, as vLLM 0.33 loads them.

vLLM builds and loads the image tower unless image inputs are turned off (`--language-model-only`, or an image limit
of 0: vllm/config/multimodal.py `language_model_only`, vllm/model_executor/models/interfaces.py `_mark_tower_model`),
so its weights come off the KV cache like the decoder's. It is built unquantized in every checkpoint format the
planner knows (Llama 4: `quant_config=None`, models/mllama4.py; the FP8 recipes of Gemma 3 and Mistral Small leave
`vision_tower` and `multi_modal_projector` out), so the planner counts it at 16 bits.

One formula per vision `model_type` vLLM 0.33 serves among the catalog's families, each counting the modules its
model code instantiates (biases as its layers declare them):
- `siglip_vision_model` (Gemma 3, models/gemma3_mm.py + siglip.py): conv patch embedding with bias, learned position
  embeddings, layers of biased q/k/v/o and fc1/fc2 with two LayerNorms, a post-LayerNorm; the projector is one
  vision x text-hidden matrix and an RMSNorm.
- `pixtral` (Mistral Small 3.x, models/pixtral.py, mistral3.py): bias-free conv and layers (q/k/v/o, gated MLP, two
  RMSNorms), a pre-norm; the projector is an RMSNorm, the 2x2 patch merger and two linears to the text width.
- `llama4_vision_model` (Llama 4, models/mllama4.py): bias-free patch projection, class and position embeddings,
  pre/post LayerNorms, layers of biased q/k/v/o and fc1/fc2 with two LayerNorms, the pixel-shuffle MLP adapter and
  a projector to the text width.

Counted this way, decoder plus vision equals each catalog model's published parameter total exactly (catalog/configs/
SOURCES.md). Written by hand for the reason hf_config.py gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_eks.errors import fail

VISION_TYPES = ("siglip_vision_model", "pixtral", "llama4_vision_model")


def vision_parameters(config: Mapping[str, Any], text_hidden: int, path: str) -> int:
    """Parameters of the vision tower and projector of a multimodal config.json (0 when it has no vision_config)."""
    vision = config.get("vision_config")
    if vision is None:
        return 0
    vpath = f"{path}.vision_config"
    if not isinstance(vision, Mapping):
        raise fail(vpath, vision, "must be a mapping")
    kind = vision.get("model_type")
    h = _int(vision, "hidden_size", vpath)
    inner = _int(vision, "intermediate_size", vpath)
    layers = _int(vision, "num_hidden_layers", vpath)
    patch = _int(vision, "patch_size", vpath)
    channels = _int(vision, "num_channels", vpath, default=3)
    positions = (_int(vision, "image_size", vpath) // patch) ** 2 if kind != "pixtral" else 0
    if kind == "siglip_vision_model":
        layer = 4 * (h * h + h) + (h * inner + inner) + (inner * h + h) + 4 * h
        tower = layers * layer + channels * patch * patch * h + h + positions * h + 2 * h
        return tower + h * text_hidden + h
    if kind == "pixtral":
        merge = _int(config, "spatial_merge_size", path, default=2)
        layer = 4 * h * h + 3 * h * inner + 2 * h
        tower = layers * layer + channels * patch * patch * h + h
        bias = text_hidden * 2 if config.get("multimodal_projector_bias") else 0
        return tower + h + merge * merge * h * h + h * text_hidden + text_hidden * text_hidden + bias
    if kind == "llama4_vision_model":
        layer = (3 * h * h + 3 * h) + (h * h + h) + (h * inner + inner) + (inner * h + h) + 4 * h
        embeddings = channels * patch * patch * h + h + (positions + 1) * h + 4 * h
        adapter_in = _int(vision, "projector_input_dim", vpath)
        adapter_out = _int(vision, "projector_output_dim", vpath)
        adapter = inner * adapter_in + adapter_in * adapter_out
        if vision.get("multi_modal_projector_bias"):
            adapter += adapter_in + adapter_out
        projector = _int(vision, "vision_output_dim", vpath) * text_hidden
        return layers * layer + embeddings + adapter + projector
    raise fail(f"{vpath}.model_type", kind, f"the planner counts these vision encoders: {', '.join(VISION_TYPES)}")


def _int(config: Mapping[str, Any], key: str, path: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail(f"{path}.{key}", value, "must be a positive integer")
    return value
