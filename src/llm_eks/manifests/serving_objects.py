"""The objects the vLLM and the Ray Serve chart emit around their workload: the workload Namespace and the
ServiceAccount (cdk8s-plus objects: manifests/plus) with the Hugging Face token's SecretProviderClass."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import cdk8s
import cdk8s_plus_35 as kplus
from constructs import Construct

from llm_eks.manifests import plus
from llm_eks.manifests.labels import PART_OF, plain_object
from llm_eks.manifests.network_policies import pod_security_labels
from llm_eks.manifests.pods import HF_TOKEN_FILE, secret_provider_class_name
from llm_eks.manifests.source import SOURCE_ANNOTATION, sourced_metadata


def workload_namespace(
    scope: Construct, namespace: str, extra_labels: Mapping[str, str] | None = None
) -> kplus.Namespace:
    """The workload Namespace, under the restricted Pod Security Standard: every pod we run there (vLLM, the Ray
    head and workers with KubeRay's injected containers, the benchmark Job) is non-root, drops every capability,
    never escalates and uses the RuntimeDefault seccomp profile."""
    labels = {
        "app.kubernetes.io/part-of": PART_OF,
        **pod_security_labels("restricted"),
        **(extra_labels or {}),
    }
    metadata = sourced_metadata({"name": namespace, "labels": labels}, __name__)
    return plus.namespace(scope, "namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})


def workload_identity(
    scope: Construct,
    meta: Callable[[str], Mapping[str, Any]],
    name: str,
    hf_token_secret: str | None,
    aws_region: str | None,
) -> kplus.ServiceAccount:
    """ServiceAccount `name` (the AWS side binds it through Pod Identity to the token secret and the weights bucket),
    and, with a Hugging Face token secret, the SecretProviderClass that mounts it as a file."""
    account = plus.service_account(
        scope,
        "service-account",
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": sourced_metadata(meta(name), __name__),
            "automountServiceAccountToken": False,
        },
    )
    if hf_token_secret is not None:
        secret_file_class(
            scope,
            "secret-provider-class",
            meta(secret_provider_class_name(name)),
            hf_token_secret,
            HF_TOKEN_FILE,
            aws_region,
        )
    return account


def secret_file_class(
    scope: Construct,
    construct_id: str,
    metadata: Mapping[str, Any],
    secret_name: str,
    file_name: str,
    aws_region: str | None,
) -> None:
    """A SecretProviderClass that mounts Secrets Manager secret `secret_name` (by name) as the file `file_name`, read
    with the pod's own Pod Identity credentials (AWS provider); never synced into a Kubernetes Secret."""
    objects = f'- objectName: "{secret_name}"\n  objectType: "secretsmanager"\n  objectAlias: "{file_name}"\n'
    parameters = {"objects": objects, "usePodIdentity": "true"}
    if aws_region is not None:
        parameters["region"] = aws_region
    plain_object(
        scope,
        construct_id,
        api_version="secrets-store.csi.x-k8s.io/v1",
        kind="SecretProviderClass",
        metadata=metadata,
        body={"spec": {"provider": "aws", "parameters": parameters}},
        source=__name__,
    )


def add_objects(scope: Construct, objects: list[dict[str, Any]]) -> list[cdk8s.ApiObject | kplus.Resource]:
    """Add whole Kubernetes objects (NetworkPolicies, ...) to a chart, named `<kind>-<name>` in lower case, and return
    them in order. Each names the module that built it (labels.builds_objects on its builder). On a cdk8s-plus chart
    (plus.PlusChart), the standard kinds plus.BUILDERS lists become cdk8s-plus objects, synthesized as the dicts are;
    the others are plain ApiObjects."""
    on_plus = isinstance(scope, plus.PlusChart)
    added: list[cdk8s.ApiObject | kplus.Resource] = []
    for obj in objects:
        construct_id = f"{obj['kind'].lower()}-{obj['metadata']['name']}"
        build = plus.BUILDERS.get((obj["apiVersion"], obj["kind"])) if on_plus else None
        if build is not None:
            if SOURCE_ANNOTATION not in (obj["metadata"].get("annotations") or {}):  # a builder without builds_objects
                raise ValueError(f"{obj['kind']} {obj['metadata']['name']}: names no source; decorate its builder")
            added.append(build(scope, construct_id, obj))
            continue
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        added.append(
            plain_object(
                scope,
                construct_id,
                api_version=obj["apiVersion"],
                kind=obj["kind"],
                metadata=obj["metadata"],
                body=body,
                source=(obj["metadata"].get("annotations") or {}).get(SOURCE_ANNOTATION),
            )
        )
    return added
