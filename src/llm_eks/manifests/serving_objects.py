"""The objects the vLLM and the Ray Serve chart emit around their workload: the workload Namespace, and the
ServiceAccount with the Hugging Face token's SecretProviderClass."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from constructs import Construct

from llm_eks.manifests.labels import PART_OF, plain_object
from llm_eks.manifests.pods import HF_TOKEN_FILE, secret_provider_class_name


def workload_namespace(scope: Construct, namespace: str, extra_labels: Mapping[str, str] | None = None) -> None:
    """The workload Namespace, under the baseline Pod Security Standard."""
    labels = {
        "app.kubernetes.io/part-of": PART_OF,
        # Nothing here needs privileges; warn on anything the restricted profile would refuse.
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
        **(extra_labels or {}),
    }
    plain_object(
        scope,
        "namespace",
        api_version="v1",
        kind="Namespace",
        metadata={"name": namespace, "labels": labels},
        body={},
    )


def workload_identity(
    scope: Construct,
    meta: Callable[[str], Mapping[str, Any]],
    name: str,
    hf_token_secret: str | None,
    aws_region: str | None,
) -> None:
    """ServiceAccount `name` (the AWS side binds it through Pod Identity to the token secret and the weights bucket),
    and, with a Hugging Face token secret, the SecretProviderClass that mounts it as a file."""
    plain_object(
        scope,
        "service-account",
        api_version="v1",
        kind="ServiceAccount",
        metadata=meta(name),
        body={"automountServiceAccountToken": False},
    )
    if hf_token_secret is None:
        return
    objects = f'- objectName: "{hf_token_secret}"\n  objectType: "secretsmanager"\n  objectAlias: "{HF_TOKEN_FILE}"\n'
    parameters = {"objects": objects, "usePodIdentity": "true"}
    if aws_region is not None:
        parameters["region"] = aws_region
    plain_object(
        scope,
        "secret-provider-class",
        api_version="secrets-store.csi.x-k8s.io/v1",
        kind="SecretProviderClass",
        metadata=meta(secret_provider_class_name(name)),
        body={"spec": {"provider": "aws", "parameters": parameters}},
    )
