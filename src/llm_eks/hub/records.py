"""Recorded models: `models/<org>/<name>.json` in the user's app, written by `llm-eks models add`, read offline.

One reviewed JSON file per Hugging Face model, so `cdk synth` and `llm-eks plan` size it from the checkpoint's own
figures without touching the network:

    {
      "format": 1,
      "id": "Qwen/Qwen3-8B",
      "revision": "main",                          # what was asked for
      "commit": "<40 hex>",                        # the commit it resolved to; every source URL is pinned to it
      "fetched_at": "2026-11-30T17:00:00Z",
      "total_size": 16381470720,                   # exact bytes of the stored weight tensors
      "total_size_from": "model.safetensors.index.json metadata.total_size",
      "total_parameters": 8190735360,              # the index's own count when it records one, else null
      "config": { ...config.json as published, without id2label / label2id / task_specific_params... },
      "quantization_file": null,                   # or {"name": "hf_quant_config.json", "content": {...}}
      "sources": {"config.json": "https://huggingface.co/Qwen/Qwen3-8B/resolve/<commit>/config.json", ...}
    }

The file is read as strictly as cdk.json (a key written twice is an error, not a silent loss) and every field is
checked; a bad file is one line naming the file and the field. `checkpoint_parameters` is the one place that turns
the recorded bytes into what ModelSpec takes. Pure Python, no network: the CLI's plan path imports it.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from llm_eks.catalog.models import MODELS, ModelSpec
from llm_eks.error_codes import E200, E708
from llm_eks.errors import ConfigError, did_you_mean, fail
from llm_eks.strict_json import loads
from llm_eks.validation import is_hf_repo_id

# Where `llm-eks models add` writes and synth reads, relative to the app's folder (the one holding cdk.json).
MODELS_DIR = "models"
# CDK context key that points synth at another folder (`-c llm-eks:models-dir=path`).
MODELS_DIR_CONTEXT = "llm-eks:models-dir"
FORMAT_VERSION = 1
# Keys of config.json that say nothing about memory or speed and can be long (classification label maps, the
# task presets of old configs); dropped at top level and inside nested *_config objects.
DROPPED_CONFIG_KEYS = ("id2label", "label2id", "task_specific_params")
# Quantization configs kept beside config.json: ModelOpt <= 0.29 writes hf_quant_config.json, which vLLM 0.33 reads
# when config.json has none (vllm/transformers_utils/config.py); AutoGPTQ/AutoAWQ's quantize_config.json and
# quant_config.json and Intel Neural Compressor's quantization_config.json are read when --quantization names them
# (vllm/model_executor/layers/quantization/{auto_gptq,auto_awq,inc/inc}.py, get_config_filenames).
QUANTIZATION_FILES = ("hf_quant_config.json", "quantize_config.json", "quant_config.json", "quantization_config.json")
TOTAL_SIZE_FROM = (
    "model.safetensors.index.json metadata.total_size",
    "model.safetensors size minus its header",
)
_KEYS = (
    "format",
    "id",
    "revision",
    "commit",
    "fetched_at",
    "total_size",
    "total_size_from",
    "total_parameters",
    "config",
    "quantization_file",
    "sources",
)
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
# Bytes per weight of an unquantized checkpoint, by config.json's torch_dtype.
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class ModelRecord:
    """One recorded model: what `llm-eks models add` read from the Hub, as the file holds it."""

    id: str
    revision: str
    commit: str
    fetched_at: str
    # Bytes of the stored weight tensors: the planner's exact checkpoint size.
    total_size: int
    total_size_from: str
    # The safetensors index's metadata.total_parameters (transformers writes it since 2025); None when absent.
    total_parameters: int | None
    config: Mapping[str, Any]
    # A quantization config published beside config.json: (file name, content); None when config.json holds it.
    quantization_file: tuple[str, Mapping[str, Any]] | None
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def effective_config(self) -> dict[str, Any]:
        """config.json with the quantization config vLLM would attach: a ModelOpt hf_quant_config.json fills
        config.quantization_config when config.json has none (vllm/transformers_utils/config.py, get_config)."""
        config = dict(self.config)
        separate = self.quantization_file
        if separate is not None and separate[0] == "hf_quant_config.json" and _quantization_config(config) is None:
            config["quantization_config"] = dict(separate[1])
        return config

    def to_json(self) -> dict[str, Any]:
        """The file's content, keys in the documented order."""
        quantization = None
        if self.quantization_file is not None:
            quantization = {"name": self.quantization_file[0], "content": self.quantization_file[1]}
        return {
            "format": FORMAT_VERSION,
            "id": self.id,
            "revision": self.revision,
            "commit": self.commit,
            "fetched_at": self.fetched_at,
            "total_size": self.total_size,
            "total_size_from": self.total_size_from,
            "total_parameters": self.total_parameters,
            "config": self.config,
            "quantization_file": quantization,
            "sources": dict(self.sources),
        }


def model_file(models_dir: Path, model_id: str) -> Path:
    """models/<org>/<name>.json for a Hub id (the id is checked to be org/name first, so this stays inside)."""
    org, _, name = model_id.partition("/")
    return models_dir / org / f"{name}.json"


def recorded_config(config: Any) -> Any:
    """config.json as the file keeps it: without DROPPED_CONFIG_KEYS, at top level and in nested *_config objects."""
    if not isinstance(config, Mapping):
        return config
    return {
        key: recorded_config(value) if key.endswith("_config") else value
        for key, value in config.items()
        if key not in DROPPED_CONFIG_KEYS
    }


def checkpoint_parameters(record: ModelRecord) -> int | None:
    """The exact parameter count the checkpoint's bytes give, or None when they cannot give it exactly.

    - The index's own `total_parameters` when it records one and the checkpoint is not quantized.
    - Else, unquantized: total_size / bytes per weight of config.json's torch_dtype (transformers' save_pretrained
      stores every tensor in that dtype, and total_size counts each stored tensor once, tied ones included).
    - Quantized (FP8, MXFP4, NVFP4, GPTQ/AWQ int4, ...): None. Packed values, block scales and layers kept in 16 bits
      make bytes and parameters differ by a format-specific amount; the planner then takes total_size as the weight
      bytes, and ModelSpec estimates the parameter count from the architecture.

    The one function to adapt when ModelSpec takes the checkpoint's bytes directly.
    """
    config = record.effective_config()
    if _quantization_config(config) is not None:
        return None
    if record.total_parameters is not None:
        return record.total_parameters
    nested = config.get("text_config")
    text: Mapping[str, Any] = nested if isinstance(nested, Mapping) else {}
    dtype = config.get("torch_dtype") or config.get("dtype") or text.get("torch_dtype") or text.get("dtype")
    size = _DTYPE_BYTES.get(dtype) if isinstance(dtype, str) else None
    if size is None or record.total_size % size:
        return None
    return record.total_size // size


def model_spec(record: ModelRecord, source: str) -> ModelSpec:
    """The planner's ModelSpec for a recorded model; errors name the file (`source`) and the config key."""
    return ModelSpec.from_hf_config(
        record.effective_config(),
        id=record.id,
        parameters=checkpoint_parameters(record),
        path=f"{source}: config",
    )


def load_record(path: Path, model_id: str) -> ModelRecord:
    """Read and check one recorded model file; every problem is a one-line ConfigError naming the file."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(E708, f"{source}: cannot be read ({err.__class__.__name__})") from None
    data = loads(text, source, root=source)
    if not isinstance(data, Mapping):
        raise fail(E708, source, data, "must hold a JSON object written by `llm-eks models add`")
    for key in data:
        if key not in _KEYS:
            raise ConfigError(
                E708, f"{source}: unknown key {key!r}; {did_you_mean(key, _KEYS)}allowed: {', '.join(_KEYS)}"
            )
    for key in _KEYS:
        if key not in data:
            raise ConfigError(E708, f"{source}.{key}: missing; re-run `llm-eks models add {model_id}`")
    if data["format"] != FORMAT_VERSION:
        raise fail(E708, f"{source}.format", data["format"], f"this llm-eks reads format {FORMAT_VERSION}")
    if data["id"] != model_id:
        raise fail(E708, f"{source}.id", data["id"], f"must be {model_id!r}, the id this file's path names")
    if not isinstance(data["revision"], str) or not data["revision"]:
        raise fail(E708, f"{source}.revision", data["revision"], "must be the branch, tag or commit that was asked for")
    if not isinstance(data["commit"], str) or not _COMMIT.match(data["commit"]):
        raise fail(E708, f"{source}.commit", data["commit"], "must be a 40-character lowercase hex commit sha")
    if not isinstance(data["fetched_at"], str) or not _TIMESTAMP.match(data["fetched_at"]):
        raise fail(E708, f"{source}.fetched_at", data["fetched_at"], "must be a UTC time such as 2026-11-30T17:00:00Z")
    _positive_int(data["total_size"], f"{source}.total_size", "a number of bytes")
    if data["total_size_from"] not in TOTAL_SIZE_FROM:
        raise fail(
            E708, f"{source}.total_size_from", data["total_size_from"], f"must be one of {list(TOTAL_SIZE_FROM)}"
        )
    if data["total_parameters"] is not None:
        _positive_int(data["total_parameters"], f"{source}.total_parameters", "null or a parameter count")
    if not isinstance(data["config"], Mapping):
        raise fail(E708, f"{source}.config", data["config"], "must be the model's config.json object")
    quantization = data["quantization_file"]
    if quantization is not None:
        if (
            not isinstance(quantization, Mapping)
            or set(quantization) != {"name", "content"}
            or quantization["name"] not in QUANTIZATION_FILES
            or not isinstance(quantization["content"], Mapping)
        ):
            raise fail(
                E708,
                f"{source}.quantization_file",
                quantization,
                f"must be null or {{name, content}} with name one of {', '.join(QUANTIZATION_FILES)}",
            )
        quantization = (quantization["name"], quantization["content"])
    sources = data["sources"]
    if not isinstance(sources, Mapping) or not all(
        isinstance(url, str) and url.startswith(("https://", "http://")) for url in sources.values()
    ):
        raise fail(E708, f"{source}.sources", sources, "must map each file read to the URL it was read from")
    return ModelRecord(
        id=data["id"],
        revision=data["revision"],
        commit=data["commit"],
        fetched_at=data["fetched_at"],
        total_size=data["total_size"],
        total_size_from=data["total_size_from"],
        total_parameters=data["total_parameters"],
        config=data["config"],
        quantization_file=quantization,
        sources=MappingProxyType(dict(sources)),
    )


def write_record(record: ModelRecord, path: Path) -> None:
    """Write the file for review: 2-space JSON, keys in the documented order, config keys as published."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _typo_of_catalog_id(model_id: str) -> str:
    """`did you mean 'x'? ` only for a near-miss of a catalog id: any org/name may be a real Hub model, so a loose
    match (Qwen3-32B ~ Qwen2.5-72B-Instruct) would mislead."""
    close = difflib.get_close_matches(model_id, list(MODELS), n=1, cutoff=0.9)
    return f"did you mean {close[0]!r}? " if close else ""


def _quantization_config(config: Mapping[str, Any]) -> Any:
    """The quantization config vLLM 0.33 reads from config.json: top level, a multimodal text_config's, or
    compressed-tensors' compression_config (vllm/model_executor/model_loader/weight_utils.py, get_quant_config)."""
    text = config.get("text_config")
    nested = text.get("quantization_config") if isinstance(text, Mapping) else None
    return config.get("quantization_config") or nested or config.get("compression_config")


def _positive_int(value: Any, path: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail(E708, path, value, f"must be {what} (a positive integer)")
    return value


def recorded_model(models_dir: Path, model_id: Any, field_path: str) -> ModelSpec | None:
    """The ModelSpec of `model_id` from its recorded file when one exists; None for a catalog id without one.

    A recorded file wins over the catalog: it is the reviewed, exact record of the checkpoint this app deploys (the
    catalog's AWQ checkpoint name is kept). An id that is neither is a one-line error at `field_path`, telling the
    user to record it."""
    if not is_hf_repo_id(model_id):
        if model_id in MODELS:  # every catalog id is org/name; kept for safety should one not be
            return None
        raise fail(
            E200,
            field_path,
            model_id,
            f"{did_you_mean(str(model_id), MODELS)}must be a catalog model or a Hugging Face id (org/name) recorded "
            "with `llm-eks models add`",
        )
    path = model_file(models_dir, model_id)
    if not path.is_file():
        if model_id in MODELS:
            return None
        raise fail(
            E200,
            field_path,
            model_id,
            f"{_typo_of_catalog_id(model_id)}not a catalog model and {path} does not exist: run "
            f"`llm-eks models add {model_id}` in the app's folder to record it from the Hugging Face Hub, or "
            "describe it with workload.model_spec (`llm-eks plan --catalog` lists the catalog)",
        )
    spec = model_spec(load_record(path, model_id), str(path))
    catalog = MODELS.get(model_id)
    if catalog is not None and catalog.awq_checkpoint is not None:
        spec = replace(spec, awq_checkpoint=catalog.awq_checkpoint)
    return spec
