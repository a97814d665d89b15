"""The engines that serve models on AWS Neuron chips, one per chip family, and which models each one serves.

vLLM on Neuron is a separate line that trails upstream vLLM: a plugin (vllm-neuron) built on one upstream vLLM
release, shipped with one Neuron SDK in one of AWS's Neuron Deep Learning Containers. Two paths, read from the Neuron
SDK's own documentation and release notes (read 2026-12-03):

- `nxd-inference` (Inferentia2, Trainium: inf2, trn1, trn1n): NxD Inference through vllm-neuron 0.5.3 on vLLM 0.16.0,
  Neuron SDK 2.31.1. The Neuron 2.34 announcements put NxD Inference on Inf2 and Trn1 in maintenance at SDK 2.31
  (no new models or features); the vLLM-native plugin below runs on Trn2 and Trn3 only. AWS's container for this path
  is pytorch-inference-vllm-neuronx:0.16.0-neuronx-py312-sdk2.31.1-ubuntu24.04 (aws-neuron/deep-learning-containers
  README.md and vllm/inference/0.16.0/Dockerfile.neuronx at 2be9ed1d: vllm-neuron branch release-0.5.3,
  neuronx_distributed_inference 0.10.18399, "trn1,trn2,trn3,inf2"). Models: the NxD Inference vLLM user guide's
  list (aws-neuron/aws-neuron-sdk libraries/nxd-inference/developer_guides/vllm-user-guide-v1.rst at 81ce03ae:
  "Llama 2/3.1/3.3, Llama 4 Scout, Maverick, Qwen 2.5, Qwen 3, Qwen2-VL, Qwen3-VL, Pixtral"), which the plugin maps
  from the checkpoint's `architectures[0]` onto NxD Inference's model table (vllm_neuron/worker/
  neuronx_distributed_model_loader.py `_get_neuron_model_cls`, read in the release-0.5.0 source, whn09/vllm-neuron
  @3afb0a92; NxD Inference utils/constants.py MODEL_TYPES at aws-neuron/neuronx-distributed-inference@ef2731ef).
  Why this path and not optimum-neuron's vLLM integration: docs/how-to/serve-on-neuron.md.
- `vllm-neuron` (Trainium2: trn2): vllm-neuron 0.29.0.1.2.0, plugin 1.2.0 on vLLM 0.29.0, Neuron SDK 2.33.0 (the 2.33.0
  component release notes: "vLLM Neuron (Beta) 2.33.0 0.29.0.1.2.0"; the version is `<vLLM>.<plugin>`). Models: its
  model recipes (aws-neuron-sdk vllm-neuron/docs/model-recipes/ at 81ce03ae, the plugin's documentation synced with
  SDK 2.32): Llama 3 (1B, 8B, 70B; LlamaForCausalLM), GPT-OSS (GptOssForCausalLM), Qwen3-VL
  (Qwen3VLForConditionalGeneration).

Of these, the planner sizes dense text decoders with full attention in 16-bit weights (its Neuron memory and latency
model, planner/neuron/, describes no experts, windowed or chunked attention, vision towers or Neuron's own
quantization flows); everything else is refused with the reason and what would serve it.

Pure Python: the `llm-eks plan` CLI imports this.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_eks.catalog.accelerators import CATALOG, InstanceType
from llm_eks.catalog.model_spec import ModelSpec
from llm_eks.error_codes import E201, E211
from llm_eks.errors import ConfigError, fail
from llm_eks.versions import NEURON_NXDI_IMAGE, NEURON_VLLM_IMAGE


@dataclass(frozen=True)
class NeuronEngine:
    """One engine path: the vLLM it is built on, the plugin and SDK, its image, and what it serves."""

    # "nxd-inference" or "vllm-neuron": plans, charts and docs name a path by it.
    name: str
    # The upstream vLLM release the plugin is built on: the argument parser its flags are checked against.
    vllm_version: str
    # The plugin's version (and the library under it) as the image ships it.
    plugin: str
    neuron_sdk: str
    image: str
    # Instance families the path runs on.
    families: tuple[str, ...]
    # (config.json architecture, the models it covers) the path serves.
    architectures: tuple[tuple[str, str], ...]
    # The key under vLLM's --additional-config that holds the Neuron settings.
    settings_key: str
    # Whether its vLLM has --shutdown-timeout (vLLM 0.16.0's arg_utils.py has none: SIGTERM cancels the server).
    shutdown_timeout: bool
    # One line on what the path is and its support status.
    summary: str

    @property
    def label(self) -> str:
        """`nxd-inference (vllm-neuron 0.5.3 on vLLM 0.16.0, Neuron SDK 2.31.1)`."""
        return f"{self.name} ({self.plugin} on vLLM {self.vllm_version}, Neuron SDK {self.neuron_sdk})"

    def serves(self, architecture: str | None) -> bool:
        return architecture is not None and any(a == architecture for a, _ in self.architectures)

    def models_text(self) -> str:
        return ", ".join(f"{label} ({arch})" for arch, label in self.architectures)


NXD_INFERENCE = NeuronEngine(
    name="nxd-inference",
    vllm_version="0.16.0",
    plugin="vllm-neuron 0.5.3 with NxD Inference 0.10.18399",
    neuron_sdk="2.31.1",
    image=NEURON_NXDI_IMAGE,
    families=("inf2", "trn1", "trn1n"),
    architectures=(
        ("LlamaForCausalLM", "Llama 2/3.1/3.3"),
        ("Llama4ForConditionalGeneration", "Llama 4"),
        ("Qwen2ForCausalLM", "Qwen 2.5"),
        ("Qwen3ForCausalLM", "Qwen 3"),
        ("Qwen2VLForConditionalGeneration", "Qwen2-VL"),
        ("Qwen3VLForConditionalGeneration", "Qwen3-VL"),
        ("LlavaForConditionalGeneration", "Pixtral"),
    ),
    settings_key="override_neuron_config",
    shutdown_timeout=False,
    summary="NxD Inference through vllm-neuron, in maintenance (no new models) since Neuron SDK 2.31",
)
VLLM_NEURON = NeuronEngine(
    name="vllm-neuron",
    vllm_version="0.29.0",
    plugin="vllm-neuron 0.29.0.1.2.0 (plugin 1.2.0)",
    neuron_sdk="2.33.0",
    image=NEURON_VLLM_IMAGE,
    families=("trn2",),
    architectures=(
        ("LlamaForCausalLM", "Llama 3"),
        ("GptOssForCausalLM", "GPT-OSS"),
        ("Qwen3VLForConditionalGeneration", "Qwen3-VL"),
    ),
    settings_key="neuron_config",
    shutdown_timeout=True,
    summary="vLLM's Neuron plugin for Trainium2 and Trainium3 (Beta at SDK 2.33, generally available from 2.34)",
)
NEURON_ENGINES = (NXD_INFERENCE, VLLM_NEURON)

# Architectures the planner's Neuron model sizes (dense text decoders with full attention).
PLANNED_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")


def neuron_engine(inst: InstanceType) -> NeuronEngine:
    """The engine path of a Neuron instance type's family."""
    for engine in NEURON_ENGINES:
        if inst.family in engine.families:
            return engine
    raise ConfigError(E201, f"workload.accelerator: {inst.instance_type!r} has no Neuron engine path in llm-eks")


def _neuron_types_serving(architecture: str | None) -> list[str]:
    """Neuron families whose path serves `architecture` and that the planner sizes, e.g. ["inf2", "trn1"]."""
    if architecture not in PLANNED_ARCHITECTURES:
        return []
    families = [f for e in NEURON_ENGINES if e.serves(architecture) for f in e.families]
    return sorted(set(families), key=lambda f: [row.family for row in CATALOG].index(f))


def _unsized(spec: ModelSpec) -> str | None:
    """Why the planner's Neuron model does not size `spec` (None: it does)."""
    if spec.is_moe:
        return "a mixture of experts"
    if spec.is_mla:
        return "multi-head latent attention"
    if spec.sliding_window_layers or spec.chunked_attention_layers:
        return "windowed or chunked attention layers"
    if spec.vision_parameters:
        return "a vision encoder"
    return None


def neuron_refusal(spec: ModelSpec, inst: InstanceType, weight_format: str, kv_cache_dtype: str) -> ConfigError | None:
    """The one-line reason `spec` cannot be served or planned on `inst`'s Neuron path, naming what would work; None
    when it can."""
    engine = neuron_engine(inst)
    where = f"on {inst.instance_type}: its engine path is {engine.label}"
    arch = spec.architecture
    if arch is None:
        return fail(
            E211,
            "workload.model",
            spec.id,
            f"not allowed {where}, which serves models by their config.json architecture and {spec.id}'s is not "
            "known; give workload.model_spec.architecture, or plan from its config.json (--model-config)",
        )
    if not engine.serves(arch):
        others = [f for f in _neuron_types_serving(arch) if f not in engine.families]
        instead = f"{', '.join(others)} (another Neuron path) or GPU instance types" if others else "GPU instance types"
        return fail(
            E211,
            "workload.model",
            spec.id,
            f"{arch} is not served {where}, which serves {engine.models_text()}; {instead} (accelerator auto) can "
            "serve it",
        )
    unsized = _unsized(spec)
    if arch not in PLANNED_ARCHITECTURES or unsized is not None:
        why = f"{spec.id} has {unsized}" if unsized is not None else f"{arch} is not one of them"
        return fail(
            E211,
            "workload.model",
            spec.id,
            f"{engine.name} serves {arch} on {inst.instance_type}, but llm-eks's Neuron planner sizes dense "
            f"full-attention text decoders ({', '.join(PLANNED_ARCHITECTURES)}) and {why}; GPU instance types "
            "(accelerator auto) can serve it",
        )
    if weight_format != "bf16" or spec.quantization is not None:
        return fail(
            E211,
            "workload.weight_format",
            spec.quantization or weight_format,
            f"16-bit weights only on {inst.instance_type}: {engine.name} quantizes through Neuron's own flow, never "
            "vLLM's --quantization, and the planner sizes bf16 on Neuron; use auto with a 16-bit checkpoint, or a GPU "
            "instance type",
        )
    if kv_cache_dtype != "auto":
        return fail(
            E211,
            "workload.kv_cache_dtype",
            kv_cache_dtype,
            f"the KV cache on {inst.instance_type} follows the checkpoint ({engine.name} takes FP8 KV from calibrated "
            "checkpoint scales, not vLLM's --kv-cache-dtype); use auto",
        )
    return None
