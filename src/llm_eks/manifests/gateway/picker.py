"""A vLLM workload's InferencePool and its endpoint picker (llm-d router v0.10.0): the picker's ServiceAccount and the
Roles its chart grants (pods; pools and the llm-d objective APIs it watches; leases for leader election), its config
(picker_config.py), Deployment, Service and ServiceMonitor.

The AI Gateway builds the picker's ext_proc cluster itself, TLS without verification (the picker serves with a
certificate it generates at start), and calls it fail-closed with a 300 s message timeout whatever the pool's
failureMode (envoyproxy/ai-gateway v1.1.0 internal/extensionserver/inferencepool.go): hence two picker replicas under
leader election (only the leader is Ready: llm-d router cmd/epp/runner/health.go), spread over zones. No
PodDisruptionBudget: with one Ready pod of two, any budget would forbid evicting the leader, and a drain would hang;
a drain moves the lease instead (a failover of a few seconds, during which requests to this model fail).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llm_eks.manifests.gateway.common import grpc_probe, meta, namespace_env, role, router_meta, security
from llm_eks.manifests.gateway.picker_config import picker_config_text
from llm_eks.manifests.gateway.props import (
    EPP_HEALTH_PORT,
    EPP_PORT,
    ROUTER_METRICS_PORT,
    ModelRoute,
    PoolBackend,
)
from llm_eks.manifests.labels import PART_OF
from llm_eks.manifests.source import builds_objects

POOL_GROUP = "inference.networking.k8s.io"
_CONFIG_FILE = "plugins.yaml"
# A held request on a draining leader ends at shutdown (503 rejected-shutting-down); give it the hold's time.
_DRAIN_MARGIN_SECONDS = 30


def picker_labels(r: ModelRoute) -> dict[str, str]:
    return {"app.kubernetes.io/name": "endpoint-picker", "app.kubernetes.io/instance": r.picker}


@builds_objects
def inference_pool(r: ModelRoute, backend: PoolBackend) -> dict[str, Any]:
    return {
        "apiVersion": f"{POOL_GROUP}/v1",
        "kind": "InferencePool",
        "metadata": meta(r.name, r.namespace),
        "spec": {
            "targetPorts": [{"number": backend.port}],
            "appProtocol": "http",
            "selector": {"matchLabels": dict(backend.selector)},
            "endpointPickerRef": {
                "name": r.picker,
                "port": {"number": EPP_PORT},
                # What the AI Gateway does anyway (it ignores this field): a request the picker cannot place is
                # refused, never sent to a pod of its own choosing.
                "failureMode": "FailClose",
            },
        },
    }


@builds_objects
def endpoint_picker(r: ModelRoute, priorities: Sequence[int]) -> list[dict[str, Any]]:
    """Every object of the pool's picker."""
    assert r.flow is not None  # a pool's route has flow control (validate_gateway)
    ns, name = r.namespace, r.picker
    labels = picker_labels(r)
    pod_sc, container_sc = security()
    read = ["get", "watch", "list"]
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": router_meta(name, ns, labels, r.picker_image),
        "spec": {
            "replicas": r.picker_replicas,
            # With leader election only the leader is Ready, so a rolling update could never replace it (llm-d-router
            # v0.10.0 config/charts/routerlib/templates/_deployment.yaml says the same): Recreate, a failover of a
            # few seconds on each rollout.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": {**labels, "app.kubernetes.io/part-of": PART_OF}},
                "spec": {
                    "serviceAccountName": name,
                    "securityContext": pod_sc,
                    "nodeSelector": dict(r.node_selector),
                    **({"tolerations": [dict(t) for t in r.tolerations]} if r.tolerations else {}),
                    # The standby on another node, in another zone where there is one: a node or zone loss leaves one
                    # to take the lease.
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": key,
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": labels},
                        }
                        for key in ("topology.kubernetes.io/zone", "kubernetes.io/hostname")
                    ],
                    "terminationGracePeriodSeconds": r.flow.hold_seconds + _DRAIN_MARGIN_SECONDS,
                    "containers": [
                        {
                            "name": "epp",
                            "image": r.picker_image,
                            "imagePullPolicy": "IfNotPresent",
                            "args": _picker_args(r),
                            "env": [
                                *namespace_env(),
                                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            ],
                            "ports": [
                                {"name": "grpc", "containerPort": EPP_PORT},
                                {"name": "grpc-health", "containerPort": EPP_HEALTH_PORT},
                                {"name": "metrics", "containerPort": ROUTER_METRICS_PORT},
                            ],
                            "livenessProbe": {**grpc_probe(EPP_HEALTH_PORT, "liveness"), "initialDelaySeconds": 5},
                            "readinessProbe": grpc_probe(EPP_HEALTH_PORT, "readiness", period=2),
                            # The chart asks 8 CPUs and 8 GiB, sized for large fleets; a few replicas per model need
                            # far less. Memory holds the prefix index and held requests (flowControl.maxBytes).
                            "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
                            "securityContext": container_sc,
                            "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True}],
                        }
                    ],
                    "volumes": [{"name": "config", "configMap": {"name": name}}],
                },
            },
        },
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(name, ns, labels)},
        *role(f"{name}-pods", ns, [{"apiGroups": [""], "resources": ["pods"], "verbs": read}], name, labels),
        *role(
            f"{name}-pools",
            ns,
            [
                {"apiGroups": [POOL_GROUP], "resources": ["inferencepools"], "verbs": read},
                {
                    "apiGroups": ["llm-d.ai"],
                    "resources": ["inferenceobjectives", "inferencemodelrewrites"],
                    "verbs": read,
                },
            ],
            name,
            labels,
        ),
        *role(
            f"{name}-leader-election",
            ns,
            [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": [*read, "create", "update", "patch", "delete"],
                },
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            ],
            name,
            labels,
        ),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(name, ns, labels),
            "data": {_CONFIG_FILE: picker_config_text(r.flow, priorities, r.pd_non_cached_tokens, r.precise_prefix)},
        },
        deployment,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta(name, ns, labels),
            "spec": {
                "type": "ClusterIP",
                "selector": dict(labels),
                "ports": [
                    {"name": "grpc-ext-proc", "port": EPP_PORT, "targetPort": EPP_PORT},
                    {"name": "http-metrics", "port": ROUTER_METRICS_PORT, "targetPort": ROUTER_METRICS_PORT},
                ],
            },
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": meta(name, ns),
            "spec": {
                "selector": {"matchLabels": dict(labels)},
                "endpoints": [{"port": "http-metrics", "path": "/metrics", "interval": "15s"}],
            },
        },
    ]


def _picker_args(r: ModelRoute) -> list[str]:
    return [
        "--pool-name",
        r.name,
        "--pool-namespace",
        r.namespace,
        "--pool-group",
        POOL_GROUP,
        "--zap-encoder",
        "json",
        "--config-file",
        f"/config/{_CONFIG_FILE}",
        "--grpc-health-port",
        str(EPP_HEALTH_PORT),
        "--tracing=false",
        # Prometheus scrapes it without a token (the chart grants no tokenreview RBAC); only Prometheus reaches it.
        "--metrics-endpoint-auth=false",
        "--enable-pprof=false",
        "--ha-enable-leader-election",
    ]
