"""Each workload's side of the gateway, in its own namespace: the `HTTPRoute` matching every name it serves, and for
vLLM the `InferencePool` over its pods with the pool's endpoint picker; the NetworkPolicies that let Envoy (and the
picker) in. See `gateway/__init__` for the path of a request and the sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.gateway.alerts import picker_alerts
from llm_eks.manifests.gateway.common import (
    grpc_probe,
    meta,
    namespace_env,
    role,
    router_meta,
    router_service,
    security,
    service_monitor,
    tls_to_self_signed,
)
from llm_eks.manifests.gateway.props import (
    EPP_HEALTH_PORT,
    EPP_PORT,
    MODEL_HEADER,
    ROUTER_METRICS_PORT,
    GatewayProps,
    ModelRoute,
    PoolBackend,
    ServiceBackend,
)
from llm_eks.manifests.labels import PART_OF
from llm_eks.manifests.source import builds_objects

_EPP_CONFIG = "plugins.yaml"
POOL_GROUP = "inference.networking.k8s.io"

EPP_CONFIG = """apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: prefix-cache-scorer
- type: metrics-data-source
  parameters:
    scheme: "http"
    path: "/metrics"
- type: core-metrics-extractor
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: prefix-cache-scorer
    weight: 3
"""


def backend_refs(r: ModelRoute) -> list[dict[str, Any]]:
    """Where the route sends a matched request: its pool (or Serve Service); with a next version at a weight above
    0, both pools, split by weight (Gateway API backendRef weights, conformance-tested across InferencePools)."""
    if not isinstance(r.backend, PoolBackend):
        return [{"kind": "Service", "name": r.backend.service, "port": r.backend.port}]
    current: dict[str, Any] = {"group": POOL_GROUP, "kind": "InferencePool", "name": r.name}
    nxt = r.next_version
    if nxt is None or nxt.weight == 0:
        return [current]
    following = {"group": POOL_GROUP, "kind": "InferencePool", "name": nxt.pool, "namespace": nxt.namespace}
    if nxt.weight == 100:
        # Every request to the next version: the current pool stays out of the rule (an empty share is no share).
        return [following]
    return [{**current, "weight": 100 - nxt.weight}, {**following, "weight": nxt.weight}]


@builds_objects
def reference_grant(r: ModelRoute, current_namespace: str) -> dict[str, Any]:
    """In a next version's namespace: the current version's HTTPRoute may send to this pool (a backendRef into
    another namespace needs the target namespace's consent; istiod checks it for InferencePools too)."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": meta(r.name, r.namespace),
        "spec": {
            "from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": current_namespace}],
            "to": [{"group": POOL_GROUP, "kind": "InferencePool", "name": r.name}],
        },
    }


# The Kubernetes group whose members may move a route's weights (`llm-eks canary`, `llm-eks rollback`): map an IAM
# role to it with an EKS access entry (kubernetes groups), beside llm-eks-verify for the checks between steps.
ROLLOUT_GROUP = "llm-eks-rollout"


def rollout_role(r: ModelRoute) -> list[dict[str, Any]]:
    """Get and patch on this one HTTPRoute, bound to ROLLOUT_GROUP: what moving the canary's weight needs."""
    rule = {
        "apiGroups": ["gateway.networking.k8s.io"],
        "resources": ["httproutes"],
        "resourceNames": [r.name],
        "verbs": ["get", "patch"],
    }
    return role(f"{r.name}-rollout", r.namespace, [rule], ROLLOUT_GROUP, {}, subject_kind="Group")


@builds_objects
def http_route(p: GatewayProps, r: ModelRoute) -> dict[str, Any]:
    """Every name the workload answers, matched exactly on the header the payload processor set, to its backend
    (both versions' pools by weight while a next version takes a share)."""
    backends = backend_refs(r)
    matches = [
        {
            "path": {"type": "PathPrefix", "value": "/v1"},
            "headers": [{"type": "Exact", "name": MODEL_HEADER, "value": m}],
        }
        for m in r.model_names
    ]
    # The Gateway API allows 64 matches per rule and 16 rules per route: 1024 names per workload.
    rules = [{"matches": matches[i : i + 64], "backendRefs": backends} for i in range(0, len(matches), 64)]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": meta(r.name, r.namespace),
        "spec": {
            "parentRefs": [
                {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "name": p.name,
                    "namespace": p.namespace,
                    "sectionName": p.listener,
                }
            ],
            "rules": rules,
        },
    }


@builds_objects
def inference_pool(r: ModelRoute, backend: PoolBackend) -> dict[str, Any]:
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": meta(r.name, r.namespace),
        "spec": {
            "targetPorts": [{"number": backend.port}],
            "appProtocol": "http",
            "selector": {"matchLabels": dict(backend.selector)},
            "endpointPickerRef": {
                "name": r.picker,
                "port": {"number": EPP_PORT},
                # A picker restart degrades to plain load balancing over the pool instead of failing requests.
                "failureMode": "FailOpen",
            },
        },
    }


@builds_objects
def endpoint_picker(r: ModelRoute) -> list[dict[str, Any]]:
    """The pool's endpoint picker: its ServiceAccount and the two Roles its chart grants (pods; pools and the llm-d
    objective APIs it watches), the scorer config, Deployment, Service and the TLS rule Envoy uses to reach it."""
    ns, name = r.namespace, r.picker
    labels = picker_labels(r)
    pod_sc, container_sc = security()
    read = ["get", "watch", "list"]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": router_meta(name, ns, labels, r.picker_image),
        "spec": {
            "replicas": r.picker_replicas,
            # Upstream: one active replica; Recreate lets a new one take over at once. With leader election only the
            # leader is Ready, so a rolling update could never replace it (llm-d-router v0.10.0
            # config/charts/routerlib/templates/_deployment.yaml says the same), and a PodDisruptionBudget would
            # block every drain of the leader's node: neither is set. A rollout is a few seconds of FailOpen.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": {**labels, "app.kubernetes.io/part-of": PART_OF}},
                "spec": {
                    "serviceAccountName": name,
                    "securityContext": pod_sc,
                    "nodeSelector": dict(r.node_selector),
                    # The standby on another node, in another zone where there is one: a node or zone loss leaves
                    # one to take the lease.
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": key,
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": labels},
                        }
                        for key in ("topology.kubernetes.io/zone", "kubernetes.io/hostname")
                    ],
                    # The chart's: mirror the longest grace period of the pool's pods.
                    "terminationGracePeriodSeconds": 130,
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
                            "livenessProbe": {
                                **grpc_probe(EPP_HEALTH_PORT, _health(r, "liveness")),
                                "initialDelaySeconds": 5,
                            },
                            "readinessProbe": grpc_probe(EPP_HEALTH_PORT, _health(r, "readiness"), period=2),
                            # The chart asks 8 CPUs and 8 GiB, sized for large fleets; a few replicas per model need
                            # far less. Memory is the prefix index: the limit keeps a leak from taking the node.
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
    service = router_service(name, ns, labels, EPP_PORT, "kubernetes.io/h2c")
    objects = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(name, ns, labels)},
        *role(f"{name}-pods", ns, [{"apiGroups": [""], "resources": ["pods"], "verbs": read}], name, labels),
        *role(
            f"{name}-pools",
            ns,
            [
                {"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"], "verbs": read},
                {
                    "apiGroups": ["inference.networking.x-k8s.io", "llm-d.ai"],
                    "resources": ["inferenceobjectives", "inferencemodelrewrites"],
                    "verbs": read,
                },
            ],
            name,
            labels,
        ),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(name, ns, labels),
            "data": {_EPP_CONFIG: EPP_CONFIG},
        },
        deployment,
        service,
        tls_to_self_signed(name, ns, f"{name}.{ns}.svc.cluster.local"),
        service_monitor(name, ns, labels),
    ]
    if r.picker_replicas > 1:
        objects += role(
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
        )
    return objects


def picker_labels(r: ModelRoute) -> dict[str, str]:
    return {"app.kubernetes.io/name": "endpoint-picker", "app.kubernetes.io/instance": r.picker}


def _picker_args(r: ModelRoute) -> list[str]:
    args = [
        "--pool-name",
        r.name,
        "--pool-namespace",
        r.namespace,
        "--pool-group",
        "inference.networking.k8s.io",
        "--zap-encoder",
        "json",
        "--config-file",
        f"/config/{_EPP_CONFIG}",
        "--grpc-health-port",
        str(EPP_HEALTH_PORT),
        "--tracing=false",
        "--metrics-endpoint-auth=false",
        "--enable-pprof=false",
    ]
    if r.picker_replicas > 1:
        args.append("--ha-enable-leader-election")
    return args


def _health(r: ModelRoute, probe: str) -> str:
    """Without leader election any service name answers once the pool is synced (the chart uses
    `inference-extension`); with it, only `liveness` and `readiness` do (cmd/epp/runner/health.go at v0.10.0)."""
    return probe if r.picker_replicas > 1 else "inference-extension"


def route_policies(p: GatewayProps, r: ModelRoute, monitoring_namespace: str) -> list[dict[str, Any]]:
    """Ingress added to the workload's namespace (its default-deny comes with the workload): Envoy to the serving
    port, and for a pool Envoy to the picker, the picker to vLLM's /metrics, Prometheus to the picker's metrics."""
    envoy = netpol.pods({netpol.GATEWAY_NAME_LABEL: p.name}, p.namespace)
    if isinstance(r.backend, ServiceBackend):
        # Ray Serve: the Serve proxy runs on every Ray pod; the Serve Service selects them.
        return [
            netpol.network_policy(
                f"{r.name}-gateway",
                r.namespace,
                r.backend.selector,
                [netpol.rule([envoy], netpol.tcp(r.backend.port))],
            )
        ]
    picker = picker_labels(r)
    return [
        netpol.network_policy(
            f"{r.name}-gateway",
            r.namespace,
            r.backend.selector,
            [netpol.rule([envoy, netpol.pods(picker)], netpol.tcp(r.backend.port))],
        ),
        netpol.network_policy(
            r.picker,
            r.namespace,
            picker,
            [
                netpol.rule([envoy], netpol.tcp(EPP_PORT)),
                netpol.rule(
                    [netpol.pods(netpol.PROMETHEUS_POD, monitoring_namespace)], netpol.tcp(ROUTER_METRICS_PORT)
                ),
            ],
        ),
    ]


def route_objects(p: GatewayProps, r: ModelRoute) -> list[dict[str, Any]]:
    """Everything one workload adds for the gateway, in its own namespace: a next version has no HTTPRoute (its
    current version's sends to it) but a ReferenceGrant letting that route reach its pool."""
    objects = [http_route(p, r) if r.canary_of is None else reference_grant(r, r.canary_of[1])]
    if r.next_version is not None:
        objects += rollout_role(r)
    if isinstance(r.backend, PoolBackend):
        objects += [inference_pool(r, r.backend), *endpoint_picker(r), picker_alerts(r)]
    return objects + route_policies(p, r, p.monitoring_namespace)


def all_model_names(routes: Sequence[ModelRoute]) -> dict[str, str]:
    """model name -> the route (workload) whose HTTPRoute matches it (a next version's pool answers the same names
    through its current version's route)."""
    return {m: r.name for r in routes if r.routed for m in r.model_names}
