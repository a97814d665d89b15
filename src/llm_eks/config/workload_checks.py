"""Checks across the fields of one workload, after the schema has built it (`validation.validate_environment` runs
them for each workload): each raises a one-line `environments.<env>.workloads.<key>.<field>: <value> is not allowed;
<what is allowed>`. Single-value rules live in `inputs`."""

from __future__ import annotations

from llm_eks import aws_ids
from llm_eks.catalog.accelerators import INSTANCE_TYPES
from llm_eks.config import inputs
from llm_eks.config.environment import (
    CAPACITY_TYPES,
    ENGINES,
    WEIGHT_SOURCES,
    WorkloadConfig,
    split_revision,
)
from llm_eks.error_codes import E121, E122, E125, E126, E127, E128
from llm_eks.errors import ConfigError, fail
from llm_eks.planner import kv_events
from llm_eks.validation import HF_REPO, LORA_NAME

# A branch, tag or commit as the Hub and git allow them (the subset staging passes on safely).
_REVISION_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/+")


def validate_workload(w: WorkloadConfig, path: str, held: bool = False) -> None:
    """Every cross-field rule of one workload at `path`; `held`: the gateway's endpoint picker holds its requests
    while it scales from zero."""
    if w.engine not in ENGINES:
        raise fail(E121, f"{path}.engine", w.engine, f"must be one of {', '.join(ENGINES)}")
    if w.engine == "ray-serve":
        _validate_ray_serve_workload(w, path)
    inputs.validate_model_spec(w, path)
    _validate_capacity(w, path, held)
    if w.warm_replicas and w.engine != "vllm":
        raise fail(
            E121,
            f"{path}.warm_replicas",
            w.warm_replicas,
            "needs engine vllm (Ray Serve scales its own workers inside the RayCluster); use 0 with ray-serve",
        )
    inputs.validate_slo(w.slo, f"{path}.slo")
    a = w.autoscaling
    inputs.validate_scale_to_zero(w, path)
    if a.waiting_per_replica < 1:
        raise fail(E121, f"{path}.autoscaling.waiting_per_replica", a.waiting_per_replica, "must be at least 1")
    if not 0 < a.kv_cache_usage < 1:
        raise fail(E121, f"{path}.autoscaling.kv_cache_usage", a.kv_cache_usage, "must be between 0 and 1 (exclusive)")
    _validate_weights_source(w, path)
    _validate_api_key(w, path)
    kv_events.validate_setting(w.prefix_cache_scorer, path)
    if w.revision is not None:
        _validate_revision(f"{path}.revision", w.revision)
    _validate_lora(w, path)
    _validate_neuron(w, path)
    inputs.validate_acknowledged_warnings(w.acknowledged_warnings, f"{path}.acknowledged_warnings")
    _validate_benchmark(w, path)


def _validate_ray_serve_workload(w: WorkloadConfig, path: str) -> None:
    """What a Ray Serve workload cannot do: data or expert parallelism, prefill/decode pools, a CPU KV tier."""
    # The RayService chart renders tensor x pipeline parallelism only (its engine_kwargs carry no DP or EP).
    for name in ("data_parallel_size", "enable_expert_parallel"):
        value = getattr(w, name)
        if value is True or (type(value) is int and value > 1):
            raise fail(
                E121,
                f"{path}.{name}",
                value,
                "engine 'ray-serve' serves tensor x pipeline parallelism only; data and expert parallelism "
                "need engine 'vllm'",
            )
    # vLLM's NIXL prefill/decode pools are planned for the vLLM engine; Ray Serve workloads stay aggregated.
    for name, value in (("disaggregation", w.disaggregation), ("prefill_replicas", w.prefill_replicas)):
        if value == "on" or (name == "prefill_replicas" and value is not None):
            raise fail(
                E121,
                f"{path}.{name}",
                value,
                "prefill/decode pools are planned for engine 'vllm' only (vLLM's NixlConnector behind the "
                "endpoint picker); use disaggregation auto or off with ray-serve",
            )
    if w.kv_offload is not None:
        raise fail(
            E121,
            f"{path}.kv_offload",
            w.kv_offload,
            "the CPU KV tier is planned for engine 'vllm' only (vLLM keeps it in /dev/shm, where a Ray worker "
            "also keeps its object store); leave it out with ray-serve",
        )


def _validate_capacity(w: WorkloadConfig, path: str, held: bool) -> None:
    """Capacity types, the replica bounds and the accelerator limit."""
    if not w.capacity_types or any(t not in CAPACITY_TYPES for t in w.capacity_types):
        raise fail(
            E122,
            f"{path}.capacity_types",
            list(w.capacity_types),
            f"must be a non-empty subset of {list(CAPACITY_TYPES)}",
        )
    if len(set(w.capacity_types)) != len(w.capacity_types):
        raise fail(E122, f"{path}.capacity_types", list(w.capacity_types), "must not repeat a capacity type")
    r = w.replicas
    if r.min < 0 or (r.min == 0 and w.autoscaling.scale_to_zero is None and not held):
        raise fail(
            E122,
            f"{path}.replicas.min",
            r.min,
            "must be at least 1 (0 only with autoscaling.scale_to_zero working hours, or for a vLLM workload behind "
            "the gateway, whose endpoint picker holds the requests that wake it)",
        )
    if r.max < max(r.min, 1):
        raise fail(E122, f"{path}.replicas.max", r.max, f"must be at least replicas.min ({r.min}) and at least 1")
    if r.max > 64:
        raise fail(E122, f"{path}.replicas.max", r.max, "must be at most 64")
    if w.accelerator_limit is not None and w.accelerator_limit < 1:
        raise fail(E122, f"{path}.accelerator_limit", w.accelerator_limit, "must be a positive number of accelerators")


def _validate_weights_source(w: WorkloadConfig, path: str) -> None:
    """Where the weights come from, the Hub token's secret and the image snapshot."""
    if w.weights not in WEIGHT_SOURCES:
        raise fail(E125, f"{path}.weights", w.weights, f"must be one of {', '.join(WEIGHT_SOURCES)}")
    if w.weights == "s3":
        if w.weights_s3_uri is None:
            raise fail(E125, f"{path}.weights_s3_uri", w.weights_s3_uri, "weights 's3' needs an s3://bucket/prefix URI")
        problem = aws_ids.s3_uri_problem(w.weights_s3_uri)
        if problem is not None:
            raise fail(E125, f"{path}.weights_s3_uri", w.weights_s3_uri, problem)
    elif w.weights_s3_uri is not None:
        raise ConfigError(E125, f"{path}.weights_s3_uri: only allowed with weights 's3'")
    if w.hf_token_secret is not None and (
        not aws_ids.SECRET_NAME.match(w.hf_token_secret) or w.hf_token_secret.startswith(("hf_", "arn:"))
    ):
        raise fail(
            E125,
            f"{path}.hf_token_secret",
            "hf_…" if w.hf_token_secret.startswith("hf_") else w.hf_token_secret,
            "must be the NAME of a Secrets Manager secret holding the token (never the token, never an ARN)",
        )
    if w.image_snapshot_id is not None and not aws_ids.SNAPSHOT_ID.match(w.image_snapshot_id):
        raise fail(
            E125,
            f"{path}.image_snapshot_id",
            w.image_snapshot_id,
            "must be an EBS snapshot id such as snap-0123456789abcdef0",
        )


def _validate_benchmark(w: WorkloadConfig, path: str) -> None:
    b = w.benchmark
    if b.request_rate <= 0:
        raise fail(E126, f"{path}.benchmark.request_rate", b.request_rate, "must be a positive number of requests/s")
    if not 1 <= b.num_prompts <= 100_000:
        raise fail(E126, f"{path}.benchmark.num_prompts", b.num_prompts, "must be 1 to 100000")
    if b.request_rate > b.num_prompts:
        raise fail(
            E126,
            f"{path}.benchmark.request_rate",
            b.request_rate,
            f"must be at most num_prompts ({b.num_prompts}) per second; a higher rate sends every prompt in the "
            "first second already",
        )


def _validate_revision(field_path: str, revision: str) -> None:
    if not revision or len(revision) > 255 or not set(revision) <= _REVISION_CHARS or ".." in revision:
        raise fail(
            E125,
            field_path,
            revision,
            "must be a Hub commit (40 hex), or a branch or tag: up to 255 letters, digits and ._-/+ without '..'",
        )


def _validate_neuron(w: WorkloadConfig, path: str) -> None:
    """A workload on a Neuron instance type (Inferentia, Trainium): engine vllm on staged weights with the compile
    cache, where the writer Job compiles the model ahead of time and serving pods restore it (manifests/vllm/neuron)."""
    inst = INSTANCE_TYPES.get(w.accelerator)
    if inst is None or inst.accelerator_vendor != "neuron":
        return
    where = f"on {w.accelerator} (AWS Neuron)"
    if w.engine != "vllm":
        raise fail(E121, f"{path}.engine", w.engine, f"{where} needs engine vllm (the Neuron vLLM container)")
    if w.weights != "staged" or not w.compile_cache:
        raise fail(
            E121,
            f"{path}.weights",
            w.weights if w.weights != "staged" else "staged without compile_cache",
            f'{where} needs weights "staged" with compile_cache: the model is compiled ahead of time in the compile '
            "cache's writer Job from the staged checkpoint, and serving pods restore it",
        )


def _validate_lora(w: WorkloadConfig, path: str) -> None:
    if not w.lora_adapters:
        return
    if w.engine != "vllm":
        raise fail(
            E127,
            f"{path}.lora_adapters",
            dict(w.lora_adapters),
            "needs engine vllm (Ray Serve LLM loads LoRA from a dynamic path, which llm-eks does not configure)",
        )
    if w.weights != "staged":
        raise fail(
            E127,
            f"{path}.lora_adapters",
            dict(w.lora_adapters),
            'needs weights "staged": adapters are staged into the weights bucket at a pinned revision and restored '
            "at start (vLLM would fetch each from the Hub at every start, at no fixed revision)",
        )
    for name, source in w.lora_adapters.items():
        if not LORA_NAME.match(name):
            raise fail(
                E127,
                f"{path}.lora_adapters",
                name,
                "adapter names are 1-64 letters, digits, '.', '_' and '-', starting with a letter or digit (clients "
                "send the name as `model`)",
            )
        if source.startswith("s3://"):
            raise fail(
                E127,
                f"{path}.lora_adapters.{name}",
                source,
                "vLLM 0.33 loads an adapter from a local path or the Hugging Face Hub only (vllm/lora/utils.py, "
                "get_adapter_absolute_path); publish it to the Hub (a private repo with hf_token_secret)",
            )
        repo, revision = split_revision(source)
        if not HF_REPO.match(repo):
            raise fail(
                E127,
                f"{path}.lora_adapters.{name}",
                source,
                "must be a Hugging Face repo id, pinned with @<commit>, such as org/adapter@<40 hex>",
            )
        _validate_revision(f"{path}.lora_adapters.{name}", revision)


def _validate_api_key(w: WorkloadConfig, path: str) -> None:
    if w.api_key_secret is None:
        return
    if not w.api_key:
        raise ConfigError(E128, f"{path}.api_key_secret: only allowed with api_key true")
    if w.engine != "vllm":
        raise fail(
            E128,
            f"{path}.api_key_secret",
            w.api_key_secret,
            "only engine 'vllm' checks an API key (Ray Serve LLM has none; NetworkPolicies guard it)",
        )
    if not aws_ids.SECRET_NAME.match(w.api_key_secret) or w.api_key_secret.startswith("arn:"):
        raise fail(
            E128,
            f"{path}.api_key_secret",
            w.api_key_secret,
            "must be the NAME of a Secrets Manager secret holding the key (never the key, never an ARN)",
        )
