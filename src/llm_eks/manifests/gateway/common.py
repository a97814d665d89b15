"""Object parts both router kinds share: metadata, the restricted security contexts of the distroless router
images, gRPC probes, a Role with its binding, the TLS rule Envoy uses to reach a router, a ServiceMonitor."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from llm_eks.manifests.checkov import UNLOCKED_IMAGE_SKIP, skip_annotations
from llm_eks.manifests.gateway.props import ROUTER_METRICS_PORT
from llm_eks.manifests.labels import PART_OF
from llm_eks.manifests.source import builds_objects

NONROOT = 65532  # both images are built on gcr.io/distroless/static:nonroot (USER 65532:65532)

# The payload processor's config (its chart's default PayloadProcessorConfig): lift the body's `model` into the
# header the routes match. base-model-to-header is left out: it needs a model-mapping ConfigMap we do not use.


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


@builds_objects
def tls_to_self_signed(name: str, ns: str, host: str) -> dict[str, Any]:
    """The routers serve ext_proc over TLS with a certificate they generate at start (`--secure-serving`, on by
    default): Envoy encrypts to them but cannot verify it, as both upstream charts configure."""
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "DestinationRule",
        "metadata": meta(name, ns),
        "spec": {"host": host, "trafficPolicy": {"tls": {"mode": "SIMPLE", "insecureSkipVerify": True}}},
    }


@builds_objects
def service_monitor(name: str, ns: str, selector: Mapping[str, str]) -> dict[str, Any]:
    """The router's /metrics (auth off: the charts grant no tokenreview RBAC; Prometheus selects every monitor)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": meta(name, ns),
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "endpoints": [{"port": "http-metrics", "path": "/metrics", "interval": "15s"}],
        },
    }


# Why the routers (endpoint pickers, payload processor) differ from checkov's defaults.
ROUTER_SKIPS: Mapping[str, str] = {
    "CKV_K8S_11": "No CPU limit on purpose: every request waits on this ext_proc call; CFS throttling adds latency.",
    "CKV_K8S_38": "It watches the Kubernetes API (pods, InferencePools or ConfigMaps) with its own read-only Role.",
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


@builds_objects
def router_service(
    name: str, namespace: str, labels: Mapping[str, str], port: int, app_protocol: str
) -> dict[str, Any]:
    """A router's ClusterIP Service: ext_proc (Istio reads the protocol from the `grpc-` name and appProtocol) and
    its metrics."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(name, namespace, labels),
        "spec": {
            "type": "ClusterIP",
            "selector": dict(labels),
            "ports": [
                {"name": "grpc-ext-proc", "port": port, "targetPort": port, "appProtocol": app_protocol},
                {"name": "http-metrics", "port": ROUTER_METRICS_PORT, "targetPort": ROUTER_METRICS_PORT},
            ],
        },
    }
