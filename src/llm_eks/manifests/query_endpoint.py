"""The one query endpoint of an environment's metrics: a Thanos Querier over both Prometheus replicas' Thanos
sidecars, deduplicating their series on the `prometheus_replica` label.

Why a deduplicating querier rather than one of the replicas: KEDA's triggers, Grafana and `llm-eks verify` must get
the same answer whichever replica is up. Through the operator's headless Service each query lands on either
replica, and a replica that restarted, or started empty in another zone, answers `rate()` and quantiles over a
window with a gap: dashboards flap and verify's percentiles depend on which pod answered. The querier fills one
replica's gap from the other and answers while one is down (partial response, Thanos's default).

Upstream facts, read at the pinned versions:
- thanos-io/thanos@v0.42.2 cmd/thanos/query.go: `--query.replica-label` ("labels to treat as a replica indicator
  along which data is deduplicated"), `--endpoint.sd-config` (inline YAML, `endpoints[].address` may use `dnssrv+`;
  `--endpoint` is deprecated), `--query.partial-response` on by default; pkg/api/query/v1.go: `dedup` defaults to
  true; pkg/extkingpin/flags.go and cmd/thanos/config.go: HTTP on 10902, gRPC on 10901; pkg/server/http/http.go:
  `/-/healthy` and `/-/ready`; its image runs as UID 1001 with entrypoint /bin/thanos (Dockerfile).
- prometheus-operator v0.93.0 pkg/prometheus/promcfg.go: each replica's external label `prometheus_replica`, dropped
  from alerts (so Alertmanager deduplicates both replicas' alerts); pkg/operator/defaults.go: Thanos v0.42.2 is
  the operator's default sidecar, pinned here for the sidecar and the querier alike.
- kube-prometheus-stack 88.3.0 templates/prometheus/serviceThanosSidecar.yaml: `prometheus.thanosService.enabled`
  creates the headless `<fullname>-thanos-discovery` Service (port `grpc` 10901) over the Prometheus pods; the
  fullname of release `kube-prometheus-stack` is the release name (_helpers.tpl).

Rules and alerts stay in Prometheus: each replica evaluates them and Alertmanager deduplicates the notifications.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.checkov import skip_annotations, with_image_skips
from llm_eks.manifests.source import builds_objects
from llm_eks.versions import THANOS_IMAGE

MONITORING_NAMESPACE = netpol.MONITORING_NAMESPACE
NAME = "thanos-query"
HTTP_PORT = 10902
GRPC_PORT = 10901
POD = {"app.kubernetes.io/name": NAME}
# kube-prometheus-stack's headless Service over the Prometheus pods' sidecars (module docstring).
DISCOVERY_SERVICE = "kube-prometheus-stack-thanos-discovery"
REPLICA_LABEL = "prometheus_replica"
# The image's own user (module docstring).
RUN_AS_USER = 1001
# Where the querier differs from checkov's defaults, and why.
QUERY_SKIPS = {
    "CKV_K8S_15": "IfNotPresent on purpose: a release tag never moves; a registry outage must not block a restart.",
    "CKV_K8S_40": "Runs as the Thanos image's own non-root user (UID 1001), not an arbitrary UID the image lacks.",
}


def query_url(namespace: str = MONITORING_NAMESPACE) -> str:
    """The in-cluster URL KEDA and Grafana query (a Prometheus-compatible HTTP API)."""
    return f"http://{NAME}.{namespace}.svc.cluster.local:{HTTP_PORT}"


def _endpoints(namespace: str) -> str:
    return f"endpoints:\n- address: dnssrv+_grpc._tcp.{DISCOVERY_SERVICE}.{namespace}.svc.cluster.local\n"


def _skips(image: str) -> dict[str, str]:
    return with_image_skips(QUERY_SKIPS, image)


@builds_objects
def query_objects(
    namespace: str,
    *,
    node_selector: Mapping[str, str],
    tolerations: Sequence[Mapping[str, Any]] = (),
    image: str = THANOS_IMAGE,
    replicas: int = 2,
) -> list[dict[str, Any]]:
    """ServiceAccount, Deployment (`replicas` over zones where possible), Service and PodDisruptionBudget of the
    querier, on the nodes `node_selector` names."""
    labels = {**POD, "app.kubernetes.io/part-of": "llm-eks"}
    meta = {"name": NAME, "namespace": namespace, "labels": labels}
    probe = {"httpGet": {"path": "/-/ready", "port": "http"}, "periodSeconds": 5, "timeoutSeconds": 3}
    container = {
        "name": "query",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": [
            "query",
            f"--http-address=0.0.0.0:{HTTP_PORT}",
            f"--grpc-address=0.0.0.0:{GRPC_PORT}",
            f"--query.replica-label={REPLICA_LABEL}",
            f"--endpoint.sd-config={_endpoints(namespace)}",
            "--log.format=json",
        ],
        "ports": [
            {"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"},
            {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": probe,
        "livenessProbe": {**probe, "httpGet": {"path": "/-/healthy", "port": "http"}, "failureThreshold": 6},
        # A handful of dashboards and KEDA's two queries per workload every 15 s: small; the limit keeps a runaway
        # query from taking a system node.
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    spec = {
        "serviceAccountName": NAME,
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "runAsGroup": RUN_AS_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "nodeSelector": dict(node_selector),
        "tolerations": [dict(t) for t in tolerations],
        # Stateless: a skewed pair beats a Pending one, so the zone spread is a preference; the PDB keeps one up.
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": dict(POD)},
            }
        ],
        "containers": [container],
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta, "automountServiceAccountToken": False},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {**meta, "annotations": skip_annotations(_skips(image))},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": dict(POD)},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                "template": {"metadata": {"labels": labels}, "spec": spec},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {
                "type": "ClusterIP",
                "selector": dict(POD),
                "ports": [
                    {"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"},
                    {"name": "grpc", "port": GRPC_PORT, "targetPort": "grpc", "protocol": "TCP"},
                ],
            },
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta,
            "spec": {
                "minAvailable": 1,
                "selector": {"matchLabels": dict(POD)},
                "unhealthyPodEvictionPolicy": "AlwaysAllow",
            },
        },
    ]
