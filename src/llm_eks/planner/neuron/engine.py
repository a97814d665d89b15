"""What a Neuron server runs with, and its `vllm serve` flags: the engine path, the compiled shape, and the Neuron
settings under `--additional-config`, rendered by the one function the chart and `llm-eks plan` both call.

Flags per path, each checked against the argument parser of the vLLM release the path is built on (tests/
test_neuron_flags.py: vLLM 0.16.0 and 0.29.0 from PyPI) and the Neuron settings against field lists read from the
plugin's and NxD Inference's source (tests/fixtures/neuron/):

- nxd-inference (vLLM 0.16.0): `--max-model-len` and `--max-num-seqs` are the compiled sequence length and batch;
  `--no-enable-prefix-caching` (vLLM 0.16's CacheConfig turns prefix caching on by default, and the plugin then
  asserts a block size) selects the contiguous KV layout, which needs `--num-gpu-blocks-override` equal to
  max_num_seqs (vllm-user-guide-v1.rst, Known Issues); `--dtype bfloat16` is NxD Inference's torch_dtype;
  `--additional-config {"override_neuron_config": {...}}` carries the buckets (the plugin reads the key with an
  underscore, vllm_neuron/worker/neuronx_distributed_model_loader.py:1018 at release-0.5.0; the user guide's
  hyphenated spelling is ignored). Not rendered: `--max-num-batched-tokens` (the plugin overwrites it, platform.py:363),
  `--enable-chunked-prefill` (forced off), `--quantization`, `--gpu-memory-utilization`, `--kv-cache-dtype`,
  `--shutdown-timeout` (0.16.0 has none).
- vllm-neuron (vLLM 0.29.0): the same two compiled sizes plus `--max-num-batched-tokens` (the prefill token budget,
  equal to the largest num_batched_tokens bucket), prefix caching with `--block-size` and `--num-gpu-blocks-override`
  (the KV allocation baked into the compiled graphs), and `--additional-config {"neuron_config": {...}}` with the
  prefill, segment and decode batch buckets (vllm-neuron/docs/guides/reference-configuration.md and
  tutorials/tutorial-llama3-70b.md at aws-neuron/aws-neuron-sdk@81ce03ae). Not rendered: `--quantization` (FP8 comes
  from a checkpoint's quantization_config), `--gpu-memory-utilization`, `--kv-cache-dtype`, `--data-parallel-size`.

Pure Python: the planner and the CLI use it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from llm_eks.planner.engine import EngineSettings
from llm_eks.planner.neuron.shape import CompiledShape

# The dtype both paths compile (the planner sizes 16-bit weights on Neuron).
NEURON_DTYPE = "bfloat16"


@dataclass(frozen=True)
class NeuronServing:
    """A Neuron server beyond EngineSettings: its engine path and the shape it compiles."""

    # "nxd-inference" or "vllm-neuron" (catalog/neuron.py).
    engine: str
    shape: CompiledShape
    # The engine's vLLM has --shutdown-timeout (0.29.0 does, 0.16.0 does not: the chart then drains in preStop).
    shutdown_timeout: bool

    @property
    def settings_key(self) -> str:
        return "override_neuron_config" if self.engine == "nxd-inference" else "neuron_config"


def neuron_settings(serving: NeuronServing) -> dict[str, Any]:
    """The `--additional-config` object: the Neuron settings under the path's key."""
    s = serving.shape
    if serving.engine == "nxd-inference":
        settings: dict[str, Any] = {
            "context_encoding_buckets": list(s.context_encoding_buckets),
            "token_generation_buckets": list(s.token_generation_buckets),
        }
    else:
        settings = {
            "num_batched_tokens_buckets": list(s.num_batched_tokens_buckets),
            "num_seqs_buckets": list(s.num_seqs_buckets),
        }
        if s.kv_segment_size_buckets:
            settings["kv_segment_size_buckets"] = list(s.kv_segment_size_buckets)
    return {serving.settings_key: settings}


def neuron_flags(serving: NeuronServing, settings: EngineSettings) -> list[str]:
    """`vllm serve` flags for a Neuron server (after the chart's model, host, port, name and parallel flags)."""
    s = serving.shape
    flags = ["--max-model-len", str(s.max_model_len), "--max-num-seqs", str(s.max_num_seqs), "--dtype", NEURON_DTYPE]
    if serving.engine == "vllm-neuron":
        assert s.max_num_batched_tokens is not None
        flags += ["--max-num-batched-tokens", str(s.max_num_batched_tokens)]
    flags.append("--enable-prefix-caching" if s.prefix_caching else "--no-enable-prefix-caching")
    if serving.engine == "vllm-neuron":
        flags += ["--block-size", str(s.block_size)]
    flags += ["--num-gpu-blocks-override", str(s.num_blocks)]
    flags += ["--additional-config", json.dumps(neuron_settings(serving), separators=(",", ":"), sort_keys=True)]
    if settings.revision is not None:
        flags += ["--revision", settings.revision]
    if settings.trust_remote_code:
        flags.append("--trust-remote-code")
    return flags


@dataclass(frozen=True)
class NeuronLayout:
    """What a Neuron plan adds to Plan: the engine path and its compiled shape, the cores, and what the pod needs."""

    serving: NeuronServing
    # `nxd-inference (vllm-neuron 0.5.3 ... on vLLM 0.16.0, Neuron SDK 2.31.1)` and its image.
    engine_label: str
    vllm_version: str
    image: str
    # "NeuronCore-v2" or "NeuronCore-v3", the logical NeuronCore configuration, logical cores per chip and the HBM
    # each addresses.
    neuron_core: str
    logical_core_config: int
    cores_per_chip: int
    memory_per_core_bytes: int
    chips_per_pod: int
    # Some but not all of the node's chips: only the Neuron scheduler extension hands them out contiguous.
    scheduler_extension: bool
    # Host memory a pod must exceed to compile and load the checkpoint (sizing.HOST_BYTES_PER_CHECKPOINT_BYTE).
    host_memory_needed_bytes: int
    # The ahead-of-time compile in the compile cache's writer Job (serving pods restore its output), seconds.
    compile_seconds: int

    @property
    def engine(self) -> str:
        return self.serving.engine

    def to_dict(self) -> dict[str, Any]:
        s = self.serving.shape
        return {
            "engine": self.serving.engine,
            "engine_label": self.engine_label,
            "vllm_version": self.vllm_version,
            "image": self.image,
            "neuron_core": self.neuron_core,
            "logical_core_config": self.logical_core_config,
            "cores_per_chip": self.cores_per_chip,
            "memory_per_core_bytes": self.memory_per_core_bytes,
            "chips_per_pod": self.chips_per_pod,
            "scheduler_extension": self.scheduler_extension,
            "host_memory_needed_bytes": self.host_memory_needed_bytes,
            "compile_seconds": self.compile_seconds,
            "compiled_shape": {
                "max_num_seqs": s.max_num_seqs,
                "max_model_len": s.max_model_len,
                "block_size": s.block_size,
                "num_blocks": s.num_blocks,
                "prefix_caching": s.prefix_caching,
                "context_encoding_buckets": list(s.context_encoding_buckets),
                "token_generation_buckets": list(s.token_generation_buckets),
                "max_num_batched_tokens": s.max_num_batched_tokens,
                "num_batched_tokens_buckets": list(s.num_batched_tokens_buckets),
                "kv_segment_size_buckets": list(s.kv_segment_size_buckets),
                "num_seqs_buckets": list(s.num_seqs_buckets),
            },
            "additional_config": neuron_settings(self.serving),
        }
