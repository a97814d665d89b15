"""The OpenAI endpoint's API key as a file: a SecretProviderClass for the Secrets Manager secret, the CSI volume and
mount that put it at API_KEY_PATH, and the shell wrapper that hands it to a process as an environment variable.

The key is never a template value, a manifest value or a Kubernetes Secret: the Secrets Store CSI driver (AWS provider,
Pod Identity) writes the secret's SecretString into the pod's tmpfs volume, and the container's shell reads it from
there just before it execs the real program. vLLM 0.33 takes its key only from `--api-key` or `VLLM_API_KEY`
(vllm/entrypoints/serve/middleware/register.py); an environment variable is the narrower of the two (argv is
world-readable in /proc, the environment only to the same user). `vllm bench serve` sends `OPENAI_API_KEY` as
`Authorization: Bearer` (vllm/benchmarks/lib/endpoint_request_func.py, _get_headers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from constructs import Construct

from llm_eks.manifests.serving_objects import secret_file_class

API_KEY_DIR = "/var/run/secrets/llm-eks"
API_KEY_FILE = "api-key"
API_KEY_PATH = f"{API_KEY_DIR}/{API_KEY_FILE}"
API_KEY_VOLUME = "api-key"


def secret_provider_class_name(name: str) -> str:
    """The SecretProviderClass of workload `name`'s API key."""
    return f"{name}-api-key"


def api_key_secret_provider_class(
    scope: Construct,
    meta: Callable[[str], Mapping[str, Any]],
    name: str,
    secret: str,
    aws_region: str | None,
) -> None:
    """The SecretProviderClass that mounts Secrets Manager secret `secret` (by name) as the file API_KEY_FILE."""
    secret_file_class(
        scope, "api-key-secret-provider-class", meta(secret_provider_class_name(name)), secret, API_KEY_FILE, aws_region
    )


def api_key_volume(name: str) -> dict[str, Any]:
    """The Secrets Store CSI volume carrying workload `name`'s API key file."""
    return {
        "name": API_KEY_VOLUME,
        "csi": {
            "driver": "secrets-store.csi.k8s.io",
            "readOnly": True,
            "volumeAttributes": {"secretProviderClass": secret_provider_class_name(name)},
        },
    }


def api_key_mount() -> dict[str, Any]:
    """Where the key file appears in the container (API_KEY_PATH)."""
    return {"name": API_KEY_VOLUME, "mountPath": API_KEY_DIR, "readOnly": True}


def export_key(variable: str) -> str:
    """Shell that exports the key file's content as `variable`, or stops the container with a one-line reason.

    `$(cat ...)` drops trailing newlines, so a secret saved with one still matches what clients send.
    """
    return (
        f'{variable}="$(cat {API_KEY_PATH})" && [ -n "${variable}" ] '
        f'|| {{ echo "no API key in {API_KEY_PATH} (Secrets Store CSI mount)" >&2; exit 1; }}; '
        f"export {variable}"
    )
