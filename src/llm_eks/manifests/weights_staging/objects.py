"""The staging Job's objects, and the init container that holds a serving pod until its weights are staged."""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from llm_eks.manifests.checkov import SERVING_POD_SKIPS, UNLOCKED_IMAGE_SKIP, skip_annotations
from llm_eks.manifests.labels import app_labels
from llm_eks.manifests.pods import (
    HF_TOKEN_FILE,
    container_security_context,
    hf_token_env,
    hf_token_mount,
    hf_token_volume,
    placement,
    pod_security_context,
    secret_provider_class_name,
)
from llm_eks.manifests.quantities import parse_quantity
from llm_eks.manifests.source import builds_objects
from llm_eks.manifests.weights_staging.props import (
    BUCKET_CONFIG_MAP,
    BUCKET_ENV,
    BUCKET_KEY,
    COMPILE_CACHE_SUBDIR,
    KEY_LENGTH,
    SIGNING_KEY_ENV,
    SIGNING_KEY_KEY,
    WeightsStagingProps,
    staging_job_name,
    staging_key,
    validate_weights_staging_props,
)

STAGING_APP = "llm-eks-weights-staging"
STAGING_KEY_LABEL = "llm-eks.io/staging-key"
SCRIPT_DIR = "/opt/llm-eks"
SCRIPT_FILE = "stage.py"
SCRATCH_DIR = "/scratch"
WAIT_CONTAINER = "wait-for-weights"
# Karpenter neither consolidates nor drifts a node under a pod with this annotation (Spot can still reclaim it; the
# next attempt resumes).
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
# The init container: Python with boto3 uses about 50 MiB.
WAIT_CPU_REQUEST = "50m"
WAIT_CPU_LIMIT = "500m"
WAIT_MEMORY = "128Mi"
# Copying a whole checkpoint onto the node (a Neuron server loads a local directory): boto3's threaded download and
# a sha256 of every file, one after another, want more than the waits' share.
FETCH_WEIGHTS_CONTAINER = "fetch-weights"
FETCH_CPU_REQUEST = "1"
FETCH_CPU_LIMIT = "4"
FETCH_MEMORY = "1Gi"
RESTORE_COMPILE_CACHE_CONTAINER = "restore-compile-cache"
# The restore container: boto3 reading one object at a time, hashing as it goes.
COMPILE_CACHE_CPU_REQUEST = "100m"
COMPILE_CACHE_CPU_LIMIT = "500m"
COMPILE_CACHE_MEMORY = "256Mi"
# vLLM's port (vllm.props.PORT; not imported: vllm.pod imports this package).
VLLM_PORT = 8000
# The compile-cache writer's vLLM listens here only (vllm.pod.LOOPBACK): it serves nobody.
LOOPBACK = "127.0.0.1"
# The writer Job's container gets compile_cache.py through this variable (its command is a shell around vLLM).
COMPILE_CACHE_SCRIPT_ENV = "LLM_EKS_COMPILE_CACHE_SCRIPT"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_PACKAGE = __name__.rpartition(".")[0]
# It runs the vLLM image like the server, for the same reasons; it writes nothing, so its root filesystem is
# read-only and it has CPU and memory limits.
STAGING_POD_SKIPS = {check: SERVING_POD_SKIPS[check] for check in ("CKV_K8S_15", "CKV_K8S_40")}


def stage_script() -> str:
    """stage.py's text: the ConfigMap holds it verbatim and the tests import the same file."""
    return resources.files(_PACKAGE).joinpath("stage.py").read_text(encoding="utf-8")


def wait_script() -> str:
    """wait.py's text, run with `python3 -c` by the init container."""
    return resources.files(_PACKAGE).joinpath("wait.py").read_text(encoding="utf-8")


def compile_cache_script() -> str:
    """compile_cache.py's text, run with `python3 -c` by the restore init container and the writer Job."""
    return resources.files(_PACKAGE).joinpath("compile_cache.py").read_text(encoding="utf-8")


def bucket_env(name: str = BUCKET_ENV) -> dict[str, Any]:
    """The env var holding the weights bucket's name, from the stack's ConfigMap (the pod fails to start, with the
    ConfigMap named in its events, while the ConfigMap is missing)."""
    return {"name": name, "valueFrom": {"configMapKeyRef": {"name": BUCKET_CONFIG_MAP, "key": BUCKET_KEY}}}


@builds_objects
def bucket_config_map(namespace: str, bucket: str, signing_key: str | None = None) -> dict[str, Any]:
    """ConfigMap `llm-eks-weights` in a workload namespace, holding the weights bucket's name and, with a compile
    cache, its signing key's ARN (the stack passes their CloudFormation references, resolved at deploy time)."""
    data = {BUCKET_KEY: bucket}
    if signing_key is not None:
        data[SIGNING_KEY_KEY] = signing_key
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": BUCKET_CONFIG_MAP,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "llm-eks"},
        },
        "data": data,
    }


def s3_model_uri(prefix: str, env: str = BUCKET_ENV) -> str:
    """`s3://$(LLM_EKS_WEIGHTS_BUCKET)/<prefix>` for vLLM's model argument; the kubelet expands the variable from the
    container's env (which must hold bucket_env(env))."""
    return f"s3://$({env})/{prefix}"


def script_config_map_name(p: WeightsStagingProps) -> str:
    return f"{p.name}-script"


def staging_annotations(image: str) -> dict[str, str]:
    reasons = dict(STAGING_POD_SKIPS)
    if "@sha256:" not in image:
        reasons.update(UNLOCKED_IMAGE_SKIP)
    return skip_annotations(reasons)


def _meta(p: WeightsStagingProps, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": p.namespace, "labels": app_labels(STAGING_APP, p.name)}


@builds_objects
def _secret_provider_class(p: WeightsStagingProps, secret: str) -> dict[str, Any]:
    """The same SecretProviderClass serving_objects.secret_file_class builds (a test compares them), as a dict."""
    objects = f'- objectName: "{secret}"\n  objectType: "secretsmanager"\n  objectAlias: "{HF_TOKEN_FILE}"\n'
    parameters = {"objects": objects, "usePodIdentity": "true"}
    if p.aws_region is not None:
        parameters["region"] = p.aws_region
    return {
        "apiVersion": "secrets-store.csi.x-k8s.io/v1",
        "kind": "SecretProviderClass",
        "metadata": _meta(p, secret_provider_class_name(p.name)),
        "spec": {"provider": "aws", "parameters": parameters},
    }


def stage_args(p: WeightsStagingProps) -> list[str]:
    """stage.py's arguments; the kubelet expands the bucket variable."""
    args = [f"{SCRIPT_DIR}/{SCRIPT_FILE}", "--bucket", f"$({BUCKET_ENV})", "--prefix", p.prefix]
    args += ["--repo-id", p.repo_id, "--revision", p.revision, "--key", staging_key(p)]
    for pattern in p.allow_patterns:
        args += ["--allow", pattern]
    for pattern in p.ignore_patterns:
        args += ["--ignore", pattern]
    scratch_bytes = int(parse_quantity("weights_staging.scratch_size", p.scratch_size))
    return [*args, "--scratch", SCRATCH_DIR, "--scratch-bytes", str(scratch_bytes)]


def _stage_env(p: WeightsStagingProps) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        bucket_env(),
        # Everything the run writes lands on the scratch volume; the root filesystem is read-only.
        {"name": "HOME", "value": SCRATCH_DIR},
        {"name": "TMPDIR", "value": SCRATCH_DIR},
        {"name": "HF_HOME", "value": f"{SCRATCH_DIR}/huggingface"},
        # huggingface_hub >= 1.0 (vLLM 0.33 requires >= 1.31) downloads through hf_xet; hf_transfer and
        # HF_HUB_ENABLE_HF_TRANSFER are gone. Each file is read once: no Xet chunk cache on the scratch volume.
        {"name": "HF_XET_CHUNK_CACHE_SIZE_BYTES", "value": "0"},
        {"name": "HF_HUB_DISABLE_PROGRESS_BARS", "value": "1"},
        {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
    ]
    if p.hf_token_secret is not None:
        env.append(hf_token_env())
    if p.aws_region is not None:
        env.append({"name": "AWS_REGION", "value": p.aws_region})
    return env


@builds_objects
def _job(p: WeightsStagingProps) -> dict[str, Any]:
    key = staging_key(p)
    labels = {**app_labels(STAGING_APP, p.name), STAGING_KEY_LABEL: key}
    volumes: list[dict[str, Any]] = [
        {"name": "script", "configMap": {"name": script_config_map_name(p), "defaultMode": 0o444}},
        {"name": "scratch", "emptyDir": {"sizeLimit": p.scratch_size}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "script", "mountPath": SCRIPT_DIR, "readOnly": True},
        {"name": "scratch", "mountPath": SCRATCH_DIR},
    ]
    if p.hf_token_secret is not None:
        volumes.append(hf_token_volume(p.name))
        mounts.append(hf_token_mount())
    container = {
        "name": "stage",
        "image": p.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3"],
        "args": stage_args(p),
        "env": _stage_env(p),
        "resources": {
            "requests": {"cpu": p.cpu, "memory": p.memory, "ephemeral-storage": p.scratch_size},
            "limits": {"cpu": p.cpu, "memory": p.memory},
        },
        "volumeMounts": mounts,
        "securityContext": {**container_security_context(), "readOnlyRootFilesystem": True},
    }
    pod_spec: dict[str, Any] = {
        # OnFailure restarts the container in the same pod, so the scratch volume (and a half-downloaded file, which
        # huggingface_hub resumes) survives; a lost pod is replaced and resumes from what S3 already holds.
        "restartPolicy": "OnFailure",
        "serviceAccountName": p.name,
        # Pod Identity and the CSI driver bring their own tokens; the script never calls the Kubernetes API.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        # GID 0: the vLLM image's user, as the serving pods run it.
        "securityContext": pod_security_context(p.run_as_user, run_as_group=0),
        "containers": [container],
        "volumes": volumes,
    }
    pod_spec.update(placement(p.node_selector, p.tolerations))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": staging_job_name(p),
            "namespace": p.namespace,
            "labels": labels,
            "annotations": staging_annotations(p.image),
        },
        "spec": {
            "backoffLimit": p.backoff_limit,
            "ttlSecondsAfterFinished": p.ttl_seconds_after_finished,
            "activeDeadlineSeconds": p.active_deadline_seconds,
            "template": {
                "metadata": {"labels": labels, "annotations": {DO_NOT_DISRUPT: "true"}},
                "spec": pod_spec,
            },
        },
    }


@builds_objects
def staging_objects(p: WeightsStagingProps) -> list[dict[str, Any]]:
    """ServiceAccount `name`, the Hugging Face token's SecretProviderClass (with a token secret), the script's
    ConfigMap and the Job `<name>-<key>`, as plain dicts (serving_objects.add_objects adds them to a chart)."""
    validate_weights_staging_props(p)
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _meta(p, p.name),
            "automountServiceAccountToken": False,
        }
    ]
    if p.hf_token_secret is not None:
        objects.append(_secret_provider_class(p, p.hf_token_secret))
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(p, script_config_map_name(p)),
            "data": {SCRIPT_FILE: stage_script()},
        }
    )
    objects.append(_job(p))
    return objects


def wait_for_weights_init_container(
    bucket_env_name: str, prefix: str, key: str, image: str, region: str | None
) -> dict[str, Any]:
    """An init container for a serving pod: it polls the marker of `key` (staging_key of the model's props),
    s3://$BUCKET/staging-markers/<prefix><key>.json, every 10 s, logs a line a minute, and exits 0 once it is there;
    without it and without a live staging of that key for 600 s it exits 1 with one line naming the staging Job
    (wait.py). It runs with the pod's ServiceAccount, whose role needs s3:GetObject on the prefix and on that key's
    marker (and s3:ListBucket, so a missing marker reads as missing rather than as access denied)."""
    _check_staged(prefix, key)
    return _script_container(
        WAIT_CONTAINER,
        image,
        wait_script(),
        ["--bucket", f"$({bucket_env_name})", "--prefix", prefix, "--key", key],
        bucket_env_name,
        region,
        (WAIT_CPU_REQUEST, WAIT_CPU_LIMIT, WAIT_MEMORY),
    )


def fetch_adapter_init_container(
    name: str, prefix: str, key: str, dest: str, image: str, region: str | None
) -> dict[str, Any]:
    """An init container that waits for a LoRA adapter's staging (as wait-for-weights does) and then copies the
    files its marker lists into `dest` (on the pod's cache volume), each checked against the recorded size and
    sha256; a file that differs fails the container (and so holds the pod in Init). Container name `lora-<name>`."""
    _check_staged(prefix, key)
    if not _DNS_LABEL.fullmatch(name) or len(name) > 58:
        raise ValueError(f"name: {name!r} must be a DNS-1123 label of at most 58 characters")
    if not dest.startswith("/") or "$" in dest:
        raise ValueError(f"dest: {dest!r} must be an absolute path without '$'")
    return _script_container(
        f"lora-{name}",
        image,
        wait_script(),
        ["--bucket", f"$({BUCKET_ENV})", "--prefix", prefix, "--key", key, "--fetch-to", dest],
        BUCKET_ENV,
        region,
        (WAIT_CPU_REQUEST, WAIT_CPU_LIMIT, WAIT_MEMORY),
        no_bytecode=True,
    )


def fetch_weights_init_container(prefix: str, key: str, dest: str, image: str, region: str | None) -> dict[str, Any]:
    """An init container that waits for the model's staging (as wait-for-weights does) and then copies every file
    its marker lists into `dest` on the pod's cache volume, each checked against the recorded size and sha256 (a file
    that differs fails the container): for engines that load a local checkpoint directory, the Neuron ones. A file
    already there and matching (a restarted pod) is kept."""
    _check_staged(prefix, key)
    if not dest.startswith("/") or "$" in dest:
        raise ValueError(f"dest: {dest!r} must be an absolute path without '$'")
    return _script_container(
        FETCH_WEIGHTS_CONTAINER,
        image,
        wait_script(),
        ["--bucket", f"$({BUCKET_ENV})", "--prefix", prefix, "--key", key, "--fetch-to", dest],
        BUCKET_ENV,
        region,
        (FETCH_CPU_REQUEST, FETCH_CPU_LIMIT, FETCH_MEMORY),
        no_bytecode=True,
    )


def _check_staged(prefix: str, key: str) -> None:
    if len(key) != KEY_LENGTH or any(c not in "0123456789abcdef" for c in key):
        raise ValueError(f"key: {key!r} is not a staging key ({KEY_LENGTH} hex characters from staging_key)")
    if not prefix.endswith("/") or "$" in prefix:
        raise ValueError(f"prefix: {prefix!r} must end in '/' and hold no '$'")


def _script_container(
    name: str,
    image: str,
    script: str,
    args: list[str],
    bucket_env_name: str,
    region: str | None,
    resources: tuple[str, str, str],
    *,
    no_bytecode: bool = False,
) -> dict[str, Any]:
    """A container of the serving pod running one of this package's scripts with the vLLM image's python: the
    bucket's name from the ConfigMap, small fixed resources (cpu request, cpu limit, memory), restricted and
    read-only (it writes only to volumes)."""
    cpu_request, cpu_limit, memory = resources
    env = [bucket_env(bucket_env_name), {"name": "PYTHONUNBUFFERED", "value": "1"}]
    if no_bytecode:
        env.append({"name": "PYTHONDONTWRITEBYTECODE", "value": "1"})
    if region is not None:
        env.append({"name": "AWS_REGION", "value": region})
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-c", script],
        "args": args,
        "env": env,
        "resources": {
            "requests": {"cpu": cpu_request, "memory": memory},
            "limits": {"cpu": cpu_limit, "memory": memory},
        },
        "securityContext": {**container_security_context(), "readOnlyRootFilesystem": True, "runAsNonRoot": True},
    }


def cache_signing_key_env(name: str = SIGNING_KEY_ENV) -> dict[str, Any]:
    """The env var holding the compile cache's signing key ARN, from the stack's ConfigMap (key `cache-signing-key`)."""
    return {"name": name, "valueFrom": {"configMapKeyRef": {"name": BUCKET_CONFIG_MAP, "key": SIGNING_KEY_KEY}}}


def compile_cache_dir(cache_dir: str, subdir: str = COMPILE_CACHE_SUBDIR) -> str:
    """Where the engine keeps its compiled artefacts below `cache_dir`: vLLM's torch.compile cache in a container
    whose VLLM_CACHE_ROOT is `<cache_dir>/vllm` by default, another engine's (Neuron's) when `subdir` says."""
    if not subdir or subdir.startswith("/") or ".." in subdir.split("/") or "$" in subdir:
        raise ValueError(f"subdir: {subdir!r} must be a relative path below the cache folder")
    return f"{cache_dir.rstrip('/')}/{subdir}"


def _check_cache_args(prefix: str, cache_key: str, cache_dir: str) -> None:
    if not prefix.endswith("/") or prefix.startswith("/") or "$" in prefix or "*" in prefix:
        raise ValueError(f"prefix: {prefix!r} must end in '/', not start with '/' and hold no '$' or '*'")
    if not re.fullmatch(r"[0-9a-f]{8,64}", cache_key):
        raise ValueError(f"cache_key: {cache_key!r} must be 8-64 lowercase hex digits")
    if not cache_dir.startswith("/") or "$" in cache_dir:
        raise ValueError(f"cache_dir: {cache_dir!r} must be an absolute path without '$'")


def compile_cache_restore_container(
    prefix: str,
    cache_key: str,
    image: str,
    region: str | None,
    cache_dir: str,
    volume: str,
    subdir: str = COMPILE_CACHE_SUBDIR,
    deadline_seconds: int | None = None,
    required: bool = False,
) -> dict[str, Any]:
    """An init container for a serving pod, after wait-for-weights: it reads the signed manifest under
    s3://$BUCKET/<prefix> (see compile_cache_prefix), has KMS verify its signature, and downloads exactly the files
    it lists, each checked against its sha256, into <cache_dir>/vllm/torch_compile_cache (or <cache_dir>/`subdir`)
    on the cache volume `volume`. It always exits 0: no cache yet, a bad signature, a tampered file or a network
    error cost a compile, never the replica; unless `required` (an engine that must not compile), where it waits for
    the signed cache and fails without it, and the pod stays in Init. The pod's ServiceAccount needs s3:ListBucket
    on the prefix, s3:GetObject on `<prefix>*` (kms:Decrypt through S3 with a customer managed key) and kms:Verify
    on the signing key."""
    _check_cache_args(prefix, cache_key, cache_dir)
    if not _DNS_LABEL.fullmatch(volume):
        raise ValueError(f"volume: {volume!r} must be a volume name (a DNS-1123 label)")
    container = _script_container(
        RESTORE_COMPILE_CACHE_CONTAINER,
        image,
        compile_cache_script(),
        [
            "restore",
            "--bucket",
            f"$({BUCKET_ENV})",
            "--prefix",
            prefix,
            "--cache-key",
            cache_key,
            "--signing-key",
            f"$({SIGNING_KEY_ENV})",
            "--dest",
            compile_cache_dir(cache_dir, subdir),
            *(["--deadline-seconds", str(deadline_seconds)] if deadline_seconds is not None else []),
            *(["--required"] if required else []),
        ],
        BUCKET_ENV,
        region,
        (COMPILE_CACHE_CPU_REQUEST, COMPILE_CACHE_CPU_LIMIT, COMPILE_CACHE_MEMORY),
        no_bytecode=True,
    )
    container["env"].append(cache_signing_key_env())
    # It writes only to the cache volume; the pod's user (the vLLM image's, GID 0) owns what it restores.
    container["volumeMounts"] = [{"name": volume, "mountPath": cache_dir}]
    return container


def compile_cache_publish_command(
    prefix: str,
    cache_key: str,
    cache_dir: str,
    port: int = VLLM_PORT,
    subdir: str = COMPILE_CACHE_SUBDIR,
    max_file_bytes: int | None = None,
) -> str:
    """The writer Job's shell: vLLM in the background (listening on the pod's loopback only), this package's
    `publish` in the foreground once vLLM answers there, then vLLM stopped; the Job ends with publish's status. The
    script comes in through the environment (COMPILE_CACHE_SCRIPT_ENV), the bucket and the key's ARN from the
    stack's ConfigMap; `"$@"` are vLLM's arguments. (No `$(`: the kubelet would try to expand it.)"""
    _check_cache_args(prefix, cache_key, cache_dir)
    return (
        'vllm serve "$@" & server=$! ; '
        f'python3 -c "${COMPILE_CACHE_SCRIPT_ENV}" publish --bucket "${BUCKET_ENV}" --prefix {prefix} '
        f'--cache-key {cache_key} --signing-key "${SIGNING_KEY_ENV}" --src {compile_cache_dir(cache_dir, subdir)} '
        f"--health http://{LOOPBACK}:{port}/health "
        + (f"--max-bytes {max_file_bytes} " if max_file_bytes is not None else "")
        + "; status=$? ; "
        'kill -TERM "$server" ; wait "$server" ; exit "$status"'
    )
