"""WeightsStagingProps, their checks and the staging key."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_eks import aws_ids
from llm_eks.error_codes import E411
from llm_eks.errors import fail
from llm_eks.manifests.labels import require_dns1035, require_dns1123
from llm_eks.manifests.node_pools.specs import LABEL_NODE_POOL, CpuPoolSpec
from llm_eks.manifests.quantities import parse_quantity
from llm_eks.manifests.weights_staging.compile_cache import FORMAT as COMPILE_CACHE_FORMAT
from llm_eks.validation import HF_REPO
from llm_eks.versions import VLLM_IMAGE

# The ConfigMap the stack creates in each workload namespace: key `bucket` holds the weights bucket's name, known
# only at deploy time. Pods read it as an env var (configMapKeyRef); the kubelet expands $(LLM_EKS_WEIGHTS_BUCKET)
# in their command and args.
BUCKET_CONFIG_MAP = "llm-eks-weights"
BUCKET_KEY = "bucket"
# The compile cache's signing key (its ARN) in the same ConfigMap, and the env var the pods read it into.
SIGNING_KEY_KEY = "cache-signing-key"
SIGNING_KEY_ENV = "LLM_EKS_CACHE_SIGNING_KEY"
BUCKET_ENV = "LLM_EKS_WEIGHTS_BUCKET"
# Characters of the staging key (hex): 40 bits, ample for the handful of models one namespace stages.
KEY_LENGTH = 10
NAME_MAX = 63 - 1 - KEY_LENGTH
# What vLLM reads from a model folder: safetensors weights and their index, config and generation config, the
# tokenizer (tokenizer.json, tokenizer_config.json, SentencePiece *.model, tiktoken files, BPE vocab/merges *.txt)
# and the chat template (chat_template.jinja). vLLM 0.33 pulls *.model, *.py and *.json into the model folder and
# every non-weight file for the tokenizer (vllm/config/model.py, maybe_pull_model_tokenizer_for_runai).
DEFAULT_ALLOW_PATTERNS = ("*.safetensors", "*.json", "*.model", "*.tiktoken", "*.txt", "*.jinja")
# The checkpoint's own Python code: staged only for a workload that runs it (trust_remote_code), since any file
# staged is one more thing that could run.
REMOTE_CODE_PATTERNS = ("*.py",)
# A LoRA adapter (PEFT layout): adapter_config.json and adapter_model.safetensors, with the tokenizer files some
# adapters ship; never code.
ADAPTER_ALLOW_PATTERNS = ("*.safetensors", "*.json", "*.model", "*.tiktoken", "*.txt", "*.jinja")
# Duplicates of the weights the streamer would load too (it loads every *.safetensors under the prefix): Meta's
# original/ checkpoint folder and Mistral's consolidated.safetensors next to the sharded files.
DEFAULT_IGNORE_PATTERNS = ("original/*", "*consolidated*.safetensors")
# Extended resources of accelerators: staging must never tolerate their taints.
_ACCELERATOR_KEYS = ("nvidia.com/gpu", "aws.amazon.com/neuron")
_REVISION_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/+")


@dataclass(frozen=True)
class WeightsStagingProps:
    """One model's checkpoint, copied once from the Hugging Face Hub to s3://<weights bucket>/<prefix>."""

    # Base of the Job and ServiceAccount names (DNS-1035, at most 52 characters), e.g. "stage-llama-3-1-8b".
    name: str
    # The workload namespace: it holds the bucket ConfigMap, and the serving pods that read the prefix.
    namespace: str
    # Hugging Face repo, org/name.
    repo_id: str
    # Key prefix in the weights bucket, ending in '/', e.g. "models/meta-llama/Llama-3.1-8B-Instruct/main/". One
    # prefix per repo and revision: the Job never deletes, so a revision that drops files an earlier staging wrote to
    # the same prefix fails (the streamer would load every *.safetensors under it).
    prefix: str
    # Branch, tag or commit. A branch is resolved once, when the Job runs; pin a commit to re-stage on purpose.
    revision: str = "main"
    # Secrets Manager secret NAME with the Hugging Face token (gated models), mounted as a file as the serving pods
    # do; None for public models.
    hf_token_secret: str | None = None
    # Region of the secret and the bucket; None lets the SDKs find it.
    aws_region: str | None = None
    # The pinned vLLM image: it ships huggingface_hub (a vLLM dependency) and boto3 (with the Run:ai streamer's S3
    # support), so staging pulls no second image.
    image: str = VLLM_IMAGE
    # The vLLM image's own non-root user (UID 2000, GID 0).
    run_as_user: int = 2000
    # The CPU node pool (its nodes have 100 GiB disks; the system nodes' 50 GiB cannot hold the scratch volume).
    node_selector: Mapping[str, str] = field(default_factory=lambda: {LABEL_NODE_POOL: CpuPoolSpec().name})
    tolerations: tuple[Mapping[str, Any], ...] = ()
    allow_patterns: tuple[str, ...] = DEFAULT_ALLOW_PATTERNS
    ignore_patterns: tuple[str, ...] = DEFAULT_IGNORE_PATTERNS
    # Hashing (sha256 of each file) and the upload threads; limit = request so staging never starves system pods.
    cpu: str = "2"
    memory: str = "4Gi"
    # The emptyDir that holds the one file being staged: the largest file plus 1 GiB. 60Gi fits a 50 GB shard
    # (most checkpoints shard at 5 GB; single-file 8B models are 16 GB) next to the image on a 100 GiB CPU node.
    scratch_size: str = "60Gi"
    # Container restarts (restartPolicy OnFailure) and pod replacements before the Job fails; each attempt resumes.
    backoff_limit: int = 6
    # Keep the finished Job (and its log) for a day.
    ttl_seconds_after_finished: int = 86400
    # A Job still running after 6 hours fails (about 800 GB at 40 MB/s).
    active_deadline_seconds: int = 21600


def _at_least(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise fail(E411, f"weights_staging.{name}", value, f"must be a whole number of at least {minimum}")


def _patterns(name: str, patterns: tuple[str, ...], *, required: bool) -> None:
    if required and not patterns:
        raise fail(
            E411, f"weights_staging.{name}", patterns, "must list at least one file pattern such as '*.safetensors'"
        )
    for i, pattern in enumerate(patterns):
        if not isinstance(pattern, str) or not pattern or pattern.startswith("/") or "$" in pattern:
            raise fail(
                E411,
                f"weights_staging.{name}[{i}]",
                pattern,
                "must be a non-empty fnmatch pattern relative to the repo root, without '$'",
            )


def validate_weights_staging_props(p: WeightsStagingProps) -> None:
    """Every check on the props; raises ConfigError with one line naming the field, the value and what is allowed."""
    require_dns1035("weights_staging.name", p.name)
    if len(p.name) > NAME_MAX:
        raise fail(
            E411,
            "weights_staging.name",
            p.name,
            f"must be at most {NAME_MAX} characters (the Job name adds '-' and a {KEY_LENGTH}-character key)",
        )
    require_dns1123("weights_staging.namespace", p.namespace)
    if len(p.repo_id) > 96 or not HF_REPO.match(p.repo_id) or ".." in p.repo_id or "--" in p.repo_id:
        raise fail(
            E411,
            "weights_staging.repo_id",
            p.repo_id,
            "must be a Hugging Face repo id (org/name) such as meta-llama/Llama-3.1-8B",
        )
    if not p.revision or len(p.revision) > 255 or not set(p.revision) <= _REVISION_CHARS or ".." in p.revision:
        raise fail(
            E411,
            "weights_staging.revision",
            p.revision,
            "must be a branch, tag or commit: up to 255 letters, digits and ._-/+ without '..'",
        )
    problem = aws_ids.s3_uri_problem(f"s3://weights-bucket/{p.prefix}")
    if problem is None and (not p.prefix.endswith("/") or p.prefix.startswith("/") or "*" in p.prefix):
        problem = "the key prefix must end in '/', not start with '/' and hold no '*' (IAM grants it as <prefix>*)"
    if problem is not None:
        raise fail(E411, "weights_staging.prefix", p.prefix, problem)
    if p.hf_token_secret is not None and not aws_ids.SECRET_NAME.match(p.hf_token_secret):
        raise fail(
            E411,
            "weights_staging.hf_token_secret",
            p.hf_token_secret,
            "must be a Secrets Manager secret name (letters, digits and /_+=.@-)",
        )
    if p.aws_region is not None and not aws_ids.REGION.match(p.aws_region):
        raise fail(E411, "weights_staging.aws_region", p.aws_region, "must be an AWS region such as us-east-1")
    if not p.image or any(c.isspace() for c in p.image) or "$" in p.image:
        raise fail(E411, "weights_staging.image", p.image, "must be an image reference without spaces or '$'")
    _at_least("run_as_user", p.run_as_user, 1)
    _patterns("allow_patterns", p.allow_patterns, required=True)
    _patterns("ignore_patterns", p.ignore_patterns, required=False)
    for name, amount in (("cpu", p.cpu), ("memory", p.memory), ("scratch_size", p.scratch_size)):
        if parse_quantity(f"weights_staging.{name}", amount) <= 0:
            raise fail(E411, f"weights_staging.{name}", amount, "must be above 0")
    if parse_quantity("weights_staging.scratch_size", p.scratch_size) < 2 * 1024**3:
        raise fail(
            E411, "weights_staging.scratch_size", p.scratch_size, "must be at least 2Gi (one file plus 1Gi headroom)"
        )
    for toleration in p.tolerations:
        key = toleration.get("key")
        if key in _ACCELERATOR_KEYS or (toleration.get("operator") == "Exists" and key is None):
            raise fail(
                E411,
                "weights_staging.tolerations",
                key or "every taint",
                "staging runs on CPU capacity, never GPU nodes",
            )
    _at_least("backoff_limit", p.backoff_limit, 0)
    _at_least("ttl_seconds_after_finished", p.ttl_seconds_after_finished, 1)
    _at_least("active_deadline_seconds", p.active_deadline_seconds, 1)


def staging_key(p: WeightsStagingProps) -> str:
    """10 hex characters over what the staged files depend on: repo, revision, prefix, patterns and image. The Job is
    named `<name>-<key>` (a Job's pod template is immutable, so a new model gets a new Job), the marker records the
    key, and the serving pods' init container waits for it."""
    inputs = {
        "repo_id": p.repo_id,
        "revision": p.revision,
        "prefix": p.prefix,
        "allow_patterns": list(p.allow_patterns),
        "ignore_patterns": list(p.ignore_patterns),
        "image": p.image,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:KEY_LENGTH]


def staging_job_name(p: WeightsStagingProps) -> str:
    return f"{p.name}-{staging_key(p)}"


# vLLM's torch.compile cache below the serving container's cache folder: VLLM_CACHE_ROOT is <cache dir>/vllm and vLLM
# 0.33 writes under $VLLM_CACHE_ROOT/torch_compile_cache (vllm/compilation/backends.py).
COMPILE_CACHE_SUBDIR = "vllm/torch_compile_cache"
# Key prefix of the saved caches in the weights bucket: one per workload and GPU family.
COMPILE_CACHE_ROOT = "compile-cache"


def compile_cache_prefix(workload_name: str, instance_family: str) -> str:
    """`compile-cache/<workload name>/<instance family>/`: where the replicas of one workload on one GPU family (e.g.
    g6e) keep their torch.compile caches, one signed cache per cache key (compile_cache_key) below it. Compiled
    kernels are specific to the GPU; vLLM's own hash keeps apart caches of other configs and images."""
    require_dns1035("compile_cache.workload_name", workload_name)
    require_dns1123("compile_cache.instance_family", instance_family)
    return f"{COMPILE_CACHE_ROOT}/{workload_name}/{instance_family}/"


def compile_cache_key(image: str, vllm_args: Sequence[str]) -> str:
    """The cache key: a hash of the image and `vllm serve`'s arguments, which decide what vLLM compiles, and of the
    signed manifest's format. A changed image, engine argument or format is a new key, so a new, separately signed
    cache under a prefix of its own (the cache is add-only: nothing is ever rewritten in place)."""
    body = json.dumps({"image": image, "args": list(vllm_args), "format": COMPILE_CACHE_FORMAT}, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()[:KEY_LENGTH]
