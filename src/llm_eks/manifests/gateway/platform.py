"""The gateway platform's own namespaces, as plain objects: Envoy Gateway's (its controller, the rate-limit service it
deploys, and the Valkey that holds the rate-limit counters), Envoy AI Gateway's controller, and the External Secrets
Operator's, each with restricted Pod Security, a default-deny and one allow per real flow. The constructs apply them
before their Helm releases; `llm-eks manifests` lists them with the other add-on namespaces.

Labels and ports, each read at the pinned release:
- Envoy Gateway v1.9.0: controller pods `control-plane: envoy-gateway` (charts/gateway-helm/templates/
  envoy-gateway-deployment.yaml), xDS for Envoy 18000, the rate-limit service's xDS 18001, metrics 19001 (the
  chart's `deployment.ports`); the rate-limit pods `app.kubernetes.io/{name: envoy-ratelimit, component: ratelimit,
  managed-by: envoy-gateway}`, gRPC 8081, metrics 19001 (internal/infrastructure/kubernetes/ratelimit/resource.go
  rateLimitLabels, InfraGRPCPort, PrometheusPort); Envoy pods `app.kubernetes.io/{name: envoy, component: proxy,
  managed-by: envoy-gateway}` (proxy/resource.go EnvoyAppLabel) plus the owning-gateway labels
  (internal/gatewayapi/translator.go).
- Envoy AI Gateway v1.1.0: controller pods `app.kubernetes.io/{name: ai-gateway-helm, instance: <release>}`
  (manifests/charts/ai-gateway-helm/templates/_helpers.tpl), extension server 1063 (called by Envoy Gateway's
  controller), pod mutating webhook 9443 (called by the API server), metrics 8080 (values.yaml service.ports).
- External Secrets Operator 2.9.0: pods `app.kubernetes.io/{name: external-secrets, instance: <release>}`, metrics
  8080 (deploy/charts/external-secrets values.yaml `metrics.listen.port`); with the webhook and cert controller
  off it takes no other connection.
- Valkey 9.1.1 (docker.io/valkey/valkey): port 6379; the official image runs as any non-root user with a writable
  working directory (valkey-io/valkey-helm 0.11.0 runs it as uid 1000 with a read-only root filesystem).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.checkov import UNLOCKED_IMAGE_SKIP, skip_annotations
from llm_eks.manifests.labels import PART_OF
from llm_eks.manifests.source import builds_objects
from llm_eks.versions import VALKEY_IMAGE

ENVOY_GATEWAY_NAMESPACE = "envoy-gateway-system"
AI_GATEWAY_NAMESPACE = "envoy-ai-gateway-system"
EXTERNAL_SECRETS_NAMESPACE = "external-secrets"
# Release names; the AI Gateway chart names its controller ai-gateway-controller whatever the release
# (controller.fullnameOverride), Envoy Gateway's ServiceAccount and Service are envoy-gateway.
ENVOY_GATEWAY_RELEASE = "eg"
AI_GATEWAY_RELEASE = "aieg"
EXTERNAL_SECRETS_RELEASE = "external-secrets"
AI_GATEWAY_CONTROLLER = "ai-gateway-controller"

ENVOY_GATEWAY_POD = {"control-plane": "envoy-gateway"}
ENVOY_XDS_PORT, RATELIMIT_XDS_PORT, ENVOY_GATEWAY_METRICS_PORT = 18000, 18001, 19001
RATELIMIT_POD = {
    "app.kubernetes.io/name": "envoy-ratelimit",
    "app.kubernetes.io/component": "ratelimit",
    "app.kubernetes.io/managed-by": "envoy-gateway",
}
RATELIMIT_GRPC_PORT, RATELIMIT_METRICS_PORT = 8081, 19001
ENVOY_POD = {
    "app.kubernetes.io/name": "envoy",
    "app.kubernetes.io/component": "proxy",
    "app.kubernetes.io/managed-by": "envoy-gateway",
}
OWNING_GATEWAY_NAME = "gateway.envoyproxy.io/owning-gateway-name"
OWNING_GATEWAY_NAMESPACE = "gateway.envoyproxy.io/owning-gateway-namespace"
AI_GATEWAY_POD = {"app.kubernetes.io/name": "ai-gateway-helm", "app.kubernetes.io/instance": AI_GATEWAY_RELEASE}
AI_GATEWAY_EXTENSION_PORT, AI_GATEWAY_WEBHOOK_PORT, AI_GATEWAY_METRICS_PORT = 1063, 9443, 8080
EXTERNAL_SECRETS_POD = {
    "app.kubernetes.io/name": "external-secrets",
    "app.kubernetes.io/instance": EXTERNAL_SECRETS_RELEASE,
}
EXTERNAL_SECRETS_METRICS_PORT = 8080

# The counter store.
VALKEY = "valkey"
VALKEY_POD = {"app.kubernetes.io/name": VALKEY, "app.kubernetes.io/instance": "ratelimit-counters"}
VALKEY_PORT = 6379
# Any non-root UID runs valkey-server (it needs no passwd entry; /data is an emptyDir owned through fsGroup): a high
# one, apart from the node's own users.
VALKEY_UID = 10001


def envoy_pods(gateway_namespaces: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Peers: the Envoy pods Envoy Gateway deploys (each Gateway's, in its own namespace in GatewayNamespace mode), in
    `gateway_namespaces` (empty: any namespace)."""
    if not gateway_namespaces:
        return [{"podSelector": {"matchLabels": dict(ENVOY_POD)}, "namespaceSelector": {}}]
    return [netpol.pods(ENVOY_POD, ns) for ns in gateway_namespaces]


def valkey_url(namespace: str = ENVOY_GATEWAY_NAMESPACE) -> str:
    """Where the rate-limit service finds its counters (Envoy Gateway's `rateLimit.backend.redis.url`)."""
    return f"{VALKEY}.{namespace}.svc.cluster.local:{VALKEY_PORT}"


def envoy_gateway_namespace(
    ns: str,
    *,
    gateway_namespaces: Sequence[str] = (),
    ai_gateway_namespace: str = AI_GATEWAY_NAMESPACE,
    monitoring_namespace: str = netpol.MONITORING_NAMESPACE,
) -> list[dict[str, Any]]:
    """Envoy Gateway's controller serves xDS to the Envoy pods (18000, mTLS; each proxy authenticates with its
    ServiceAccount token in GatewayNamespace mode) and to the rate-limit service (18001); the rate-limit service takes
    Envoy's checks (8081); Valkey takes the rate-limit service's counters (6379); Prometheus scrapes both. The
    AI Gateway controller is a client of Envoy Gateway's, not the reverse: Envoy Gateway calls its extension server."""
    prometheus = netpol.pods(netpol.PROMETHEUS_POD, monitoring_namespace)
    return [
        netpol.namespace(ns, "restricted"),
        netpol.default_deny(ns),
        netpol.network_policy(
            "envoy-gateway",
            ns,
            ENVOY_GATEWAY_POD,
            [
                netpol.rule(envoy_pods(gateway_namespaces), netpol.tcp(ENVOY_XDS_PORT)),
                netpol.rule([netpol.pods(RATELIMIT_POD)], netpol.tcp(RATELIMIT_XDS_PORT)),
                netpol.rule([prometheus], netpol.tcp(ENVOY_GATEWAY_METRICS_PORT)),
            ],
        ),
        netpol.network_policy(
            "envoy-ratelimit",
            ns,
            RATELIMIT_POD,
            [
                netpol.rule(envoy_pods(gateway_namespaces), netpol.tcp(RATELIMIT_GRPC_PORT)),
                netpol.rule([prometheus], netpol.tcp(RATELIMIT_METRICS_PORT)),
            ],
        ),
        netpol.network_policy(
            VALKEY, ns, VALKEY_POD, [netpol.rule([netpol.pods(RATELIMIT_POD)], netpol.tcp(VALKEY_PORT))]
        ),
    ]


def ai_gateway_namespace(
    ns: str,
    control_plane_cidrs: Sequence[str],
    *,
    envoy_gateway_namespace: str = ENVOY_GATEWAY_NAMESPACE,
    monitoring_namespace: str = netpol.MONITORING_NAMESPACE,
) -> list[dict[str, Any]]:
    """Envoy Gateway's controller calls the AI Gateway's extension server (1063) on every translation; the API server
    calls its pod mutating webhook (9443), which adds the external processor to the Envoy pods of a Gateway an AI
    route names; Prometheus scrapes it. Its QuotaPolicy xDS port (18002) stays closed: nothing here uses QuotaPolicy."""
    return [
        netpol.namespace(ns, "restricted"),
        netpol.default_deny(ns),
        netpol.network_policy(
            AI_GATEWAY_CONTROLLER,
            ns,
            AI_GATEWAY_POD,
            [
                netpol.rule(
                    [netpol.pods(ENVOY_GATEWAY_POD, envoy_gateway_namespace)], netpol.tcp(AI_GATEWAY_EXTENSION_PORT)
                ),
                netpol.rule(netpol.cidrs(control_plane_cidrs), netpol.tcp(AI_GATEWAY_WEBHOOK_PORT)),
                netpol.rule(
                    [netpol.pods(netpol.PROMETHEUS_POD, monitoring_namespace)], netpol.tcp(AI_GATEWAY_METRICS_PORT)
                ),
            ],
        ),
    ]


def external_secrets_namespace(
    ns: str, *, monitoring_namespace: str = netpol.MONITORING_NAMESPACE
) -> list[dict[str, Any]]:
    """The operator only calls out (Secrets Manager, the Kubernetes API); Prometheus scrapes its metrics. The tenant
    key Secrets it writes live here too, where no other pod runs."""
    prometheus = netpol.pods(netpol.PROMETHEUS_POD, monitoring_namespace)
    return [
        netpol.namespace(ns, "restricted"),
        netpol.default_deny(ns),
        netpol.network_policy(
            "external-secrets-metrics",
            ns,
            EXTERNAL_SECRETS_POD,
            [netpol.rule([prometheus], netpol.tcp(EXTERNAL_SECRETS_METRICS_PORT))],
        ),
    ]


def _meta(name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": {**labels, "app.kubernetes.io/part-of": PART_OF}}


@builds_objects
def counter_store(
    namespace: str = ENVOY_GATEWAY_NAMESPACE,
    *,
    image: str = VALKEY_IMAGE,
    max_memory_mib: int = 256,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Valkey for the rate-limit service's counters: one replica, nothing persisted (counters are per window; a lost
    pod resets the current windows, and with the rate-limit service failing open traffic passes unlimited for those
    seconds), memory capped and evicting only keys that carry a TTL (every counter the rate-limit service writes
    does), a Service, and a PodDisruptionBudget of maxUnavailable 1 (minAvailable would block every node drain of a
    single replica). No password: only the rate-limit pods reach it (envoy_gateway_namespace's NetworkPolicy), and
    Envoy Gateway's Redis settings take a URL and TLS, not a password."""
    memory_limit = max_memory_mib + 64
    args = [
        "--port",
        str(VALKEY_PORT),
        # Counters live for one window; nothing to restore after a restart.
        "--save",
        "",
        "--appendonly",
        "no",
        "--maxmemory",
        f"{max_memory_mib}mb",
        "--maxmemory-policy",
        "volatile-ttl",
        # Protected mode refuses every non-loopback client when no password is set; the NetworkPolicy decides who
        # connects.
        "--protected-mode",
        "no",
    ]
    reasons = {
        "CKV_K8S_11": "No CPU limit on purpose: every rate-limited request waits on a counter update here.",
        "CKV_K8S_15": "IfNotPresent: a registry outage must not block a restart of the counters.",
        **({} if "@sha256:" in image else UNLOCKED_IMAGE_SKIP),
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {**_meta(VALKEY, namespace, VALKEY_POD), "annotations": skip_annotations(reasons)},
        "spec": {
            "replicas": 1,
            # One pod at a time: two would split the counters between them.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(VALKEY_POD)},
            "template": {
                "metadata": {"labels": {**VALKEY_POD, "app.kubernetes.io/part-of": PART_OF}},
                "spec": {
                    "automountServiceAccountToken": False,
                    "nodeSelector": dict(node_selector or {"llm-eks.io/node-role": "system"}),
                    **({"tolerations": [dict(t) for t in tolerations]} if tolerations else {}),
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": VALKEY_UID,
                        "runAsGroup": VALKEY_UID,
                        "fsGroup": VALKEY_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": VALKEY,
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["valkey-server"],
                            "args": args,
                            "workingDir": "/data",
                            "ports": [{"name": "valkey", "containerPort": VALKEY_PORT}],
                            "readinessProbe": {"tcpSocket": {"port": VALKEY_PORT}, "periodSeconds": 5},
                            "livenessProbe": {
                                "tcpSocket": {"port": VALKEY_PORT},
                                "periodSeconds": 10,
                                "initialDelaySeconds": 10,
                            },
                            "resources": {
                                "requests": {"cpu": "100m", "memory": f"{memory_limit}Mi"},
                                "limits": {"memory": f"{memory_limit}Mi"},
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                                "readOnlyRootFilesystem": True,
                            },
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        }
                    ],
                    "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "64Mi"}}],
                },
            },
        },
    }
    return [
        deployment,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(VALKEY, namespace, VALKEY_POD),
            "spec": {
                "type": "ClusterIP",
                "selector": dict(VALKEY_POD),
                "ports": [{"name": "valkey", "port": VALKEY_PORT, "targetPort": VALKEY_PORT}],
            },
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": _meta(VALKEY, namespace, VALKEY_POD),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(VALKEY_POD)}},
        },
    ]
