"""Object parts the gateway's objects share: metadata, the restricted security contexts of the distroless endpoint
picker image, gRPC probes, a Role with its binding, and the picker's checkov suppressions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from llm_eks.manifests.checkov import UNLOCKED_IMAGE_SKIP, skip_annotations
from llm_eks.manifests.labels import PART_OF
from llm_eks.manifests.source import builds_objects

NONROOT = 65532  # the picker image is built on gcr.io/distroless/static:nonroot (USER 65532:65532)


def meta(name: str, namespace: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": PART_OF, **(labels or {})}}


def security() -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod, container) security contexts at the restricted Pod Security level, for the distroless routers."""
    pod = {
        "runAsNonRoot": True,
        "runAsUser": NONROOT,
        "runAsGroup": NONROOT,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    return pod, container


def grpc_probe(port: int, service: str | None = None, period: int = 10) -> dict[str, Any]:
    grpc: dict[str, Any] = {"port": port}
    if service is not None:
        grpc["service"] = service
    return {"grpc": grpc, "periodSeconds": period}


def namespace_env() -> list[dict[str, Any]]:
    return [{"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]


@builds_objects
def role(
    name: str,
    ns: str,
    rules: list[dict[str, Any]],
    subject: str,
    labels: Mapping[str, str],
    *,
    subject_kind: Literal["ServiceAccount", "Group"] = "ServiceAccount",
) -> list[dict[str, Any]]:
    """A Role and its RoleBinding to `subject`: a ServiceAccount of `ns`, or a Kubernetes group (people and CI roles
    that an EKS access entry maps to it)."""
    bound: dict[str, Any] = (
        {"kind": "ServiceAccount", "name": subject, "namespace": ns}
        if subject_kind == "ServiceAccount"
        else {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": subject}
    )
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(name, ns, labels),
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(name, ns, labels),
            "subjects": [bound],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        },
    ]


# Why the endpoint pickers differ from checkov's defaults.
ROUTER_SKIPS: Mapping[str, str] = {
    "CKV_K8S_11": "No CPU limit on purpose: every request waits on this ext_proc call; CFS throttling adds latency.",
    "CKV_K8S_38": "It watches the Kubernetes API (pods, InferencePools, objectives) with its own read-only Role.",
}
# IfNotPresent (CKV_K8S_15), for what the image reference is: a digest names one image for good, a tag does not.
PULL_POLICY_BY_DIGEST = (
    "IfNotPresent: the image is pinned by digest, so a cached copy is that image; a registry outage must not block a "
    "restart."
)
PULL_POLICY_BY_TAG = (
    "IfNotPresent: a registry outage must not block a restart; a tag can move, so lock the digest (llm-eks images "
    "lock)."
)


def router_meta(name: str, namespace: str, labels: Mapping[str, str], image: str) -> dict[str, Any]:
    """A router Deployment's metadata, with its checkov suppressions (the digest one only while `image` has none)."""
    reasons = dict(ROUTER_SKIPS)
    if "@sha256:" in image:
        reasons["CKV_K8S_15"] = PULL_POLICY_BY_DIGEST
    else:
        reasons["CKV_K8S_15"] = PULL_POLICY_BY_TAG
        reasons.update(UNLOCKED_IMAGE_SKIP)
    return {**meta(name, namespace, labels), "annotations": skip_annotations(reasons)}
