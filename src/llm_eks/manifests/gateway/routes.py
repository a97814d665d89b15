"""Each workload's side of the gateway, in its own namespace: the `AIGatewayRoute` matching every name it serves (the
route kind the gateway reads, named by `route_kind`), for vLLM the `InferencePool` over its pods with the pool's
endpoint picker and one InferenceObjective per tenant that may call it, for Ray Serve the Envoy Gateway `Backend` and
`AIServiceBackend` of its Serve Service; the NetworkPolicies that let Envoy (and the picker) in; and, with a next
version, how its share of the traffic is set (`traffic_split`) and the Role that may set it.

Sources (envoyproxy/ai-gateway v1.1.0): api/v1beta1/ai_gateway_route.go (rules of at most 128 header matches, 15
rules, one InferencePool per rule, `timeouts.request` defaulting to 60 s when unset), internal/controller/
ai_gateway_route.go (the HTTPRoute it generates: the rules' matches under the path prefix "/", plus a final
`route-not-found` rule answering 404), api/v1beta1/ai_service_backend.go (the backendRef must be an Envoy Gateway
`Backend`); envoyproxy/gateway v1.9.0 api/v1alpha1/backend_types.go (`type: Endpoints`, `fqdn`); llm-d/llm-d-router
v0.10.0 config/crd/bases/llm-d.ai_inferenceobjectives.yaml (`priority`, `poolRef`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.gateway.common import meta, role
from llm_eks.manifests.gateway.picker import POOL_GROUP, endpoint_picker, inference_pool, picker_labels
from llm_eks.manifests.gateway.platform import ENVOY_POD, OWNING_GATEWAY_NAME
from llm_eks.manifests.gateway.props import (
    EPP_PORT,
    MATCHES_PER_RULE,
    MODEL_HEADER,
    ROUTER_METRICS_PORT,
    GatewayProps,
    ModelRoute,
    PoolBackend,
    ServiceBackend,
)
from llm_eks.manifests.source import builds_objects
from llm_eks.planner import kv_events

AIGW_GROUP = "aigateway.envoyproxy.io"
GATEWAY_API = "gateway.networking.k8s.io"


@dataclass(frozen=True)
class RouteKind:
    """The route kind a workload attaches to the gateway with: what the admission policies guard."""

    group: str
    version: str
    kind: str
    resource: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


def route_kind() -> RouteKind:
    """The one place that names the route kind the gateway reads: Envoy AI Gateway's AIGatewayRoute (its controller
    writes the HTTPRoute Envoy Gateway programs, and overwrites any edit of it)."""
    return RouteKind(AIGW_GROUP, "v1beta1", "AIGatewayRoute", "aigatewayroutes")


@dataclass(frozen=True)
class TrafficSplit:
    """How a route's traffic is split between its current and next version: pool share. The next version's pods are in
    the current version's InferencePool, so its share of the requests follows its share of the pool's replicas; the
    split is set by scaling the next version (`scale` subresource), and the smallest step is one pod of the pool."""

    # The object whose replicas set the share, and the current version's.
    api_group: str
    resource: str
    next_name: str
    current_name: str
    namespace: str

    @staticmethod
    def next_replicas(share: int, current_replicas: int, lowest: int, highest: int) -> int:
        """Replicas of the next version giving it about `share` percent of the pool beside `current_replicas`: 0 for
        0, else at least one pod (and `lowest`), at most `highest`."""
        if share <= 0:
            return 0
        if share >= 100:
            return highest
        wanted = math.ceil(share * max(current_replicas, 1) / (100 - share) - 1e-9)
        return max(1, lowest, min(wanted, highest))

    @staticmethod
    def share(next_replicas: int, current_replicas: int) -> int:
        """The next version's share of the pool's replicas, in percent."""
        total = next_replicas + current_replicas
        return round(100 * next_replicas / total) if total else 0


def traffic_split(r: ModelRoute) -> TrafficSplit:
    """The split of `r` (a route with a next version): the one function canary and rollback set weights through."""
    assert r.next_version is not None
    group, resource = (
        ("apps", "deployments")
        if r.next_version.kind == "Deployment"
        else ("leaderworkerset.x-k8s.io", "leaderworkersets")
    )
    return TrafficSplit(group, resource, r.next_version.name, r.name, r.namespace)


# The Kubernetes group whose members may move a route's split (`llm-eks canary`, `llm-eks rollback`): map an IAM
# role to it with an EKS access entry (kubernetes groups), beside llm-eks-verify for the checks between steps.
ROLLOUT_GROUP = "llm-eks-rollout"


def rollout_role(r: ModelRoute) -> list[dict[str, Any]]:
    """Read both versions' replicas, and scale the next version only: what moving the split needs, and nothing that
    could change the route, the pool or what either version runs."""
    split = traffic_split(r)
    rules = [
        {
            "apiGroups": [split.api_group],
            "resources": [split.resource],
            "resourceNames": [split.next_name, split.current_name],
            "verbs": ["get"],
        },
        {
            "apiGroups": [split.api_group],
            "resources": [f"{split.resource}/scale"],
            "resourceNames": [split.next_name],
            "verbs": ["get", "patch"],
        },
    ]
    return role(f"{r.name}-rollout", r.namespace, rules, ROLLOUT_GROUP, {}, subject_kind="Group")


@builds_objects
def ai_gateway_route(p: GatewayProps, r: ModelRoute) -> dict[str, Any]:
    """Every name the workload answers, matched exactly on the header the AI Gateway sets from the body, to its pool
    (or Serve backend), with a request timeout that outlasts the picker's hold."""
    backend: dict[str, Any] = (
        {"group": POOL_GROUP, "kind": "InferencePool", "name": r.name}
        if isinstance(r.backend, PoolBackend)
        else {"name": r.name}
    )
    matches = [{"headers": [{"type": "Exact", "name": MODEL_HEADER, "value": m}]} for m in r.model_names]
    rules = [
        {
            "name": f"models-{i // MATCHES_PER_RULE}",
            "matches": matches[i : i + MATCHES_PER_RULE],
            "backendRefs": [backend],
            "timeouts": {"request": f"{r.timeout_seconds}s"},
        }
        for i in range(0, len(matches), MATCHES_PER_RULE)
    ]
    kind = route_kind()
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": meta(r.name, r.namespace),
        "spec": {
            "parentRefs": [{"group": GATEWAY_API, "kind": "Gateway", "name": p.name, "namespace": p.namespace}],
            "rules": rules,
        },
    }


def generated_rules(p: GatewayProps, r: ModelRoute) -> list[dict[str, Any]]:
    """The rules of the HTTPRoute the AI Gateway's controller writes from `r`'s AIGatewayRoute (same name and
    namespace; internal/controller/ai_gateway_route.go newHTTPRoute): each rule's header matches under the path prefix
    "/", its backend as Envoy Gateway sees it (the pool, or the Serve Backend the AIServiceBackend names), and a last
    `route-not-found` rule without backends. What `llm-eks verify` holds the cluster's HTTPRoute to."""
    backend: dict[str, Any] = (
        {"group": POOL_GROUP, "kind": "InferencePool", "name": r.name, "namespace": r.namespace}
        if isinstance(r.backend, PoolBackend)
        else {"group": "gateway.envoyproxy.io", "kind": "Backend", "name": r.name}
    )
    rules = []
    for rule in ai_gateway_route(p, r)["spec"]["rules"]:
        matches = [{**m, "path": {"type": "PathPrefix", "value": "/"}} for m in rule["matches"]]
        rules.append({"name": rule["name"], "matches": matches, "backendRefs": [backend]})
    return rules


@builds_objects
def serve_backend(r: ModelRoute, backend: ServiceBackend) -> list[dict[str, Any]]:
    """A Ray Serve workload's Serve Service as the AI Gateway's backend: an Envoy Gateway Backend by FQDN, and the
    AIServiceBackend (OpenAI schema, the default /v1 prefix) the route names."""
    return [
        {
            "apiVersion": "gateway.envoyproxy.io/v1alpha1",
            "kind": "Backend",
            "metadata": meta(r.name, r.namespace),
            "spec": {
                "type": "Endpoints",
                "endpoints": [
                    {
                        "fqdn": {
                            "hostname": f"{backend.service}.{r.namespace}.svc.cluster.local",
                            "port": backend.port,
                        }
                    }
                ],
            },
        },
        {
            "apiVersion": f"{AIGW_GROUP}/v1beta1",
            "kind": "AIServiceBackend",
            "metadata": meta(r.name, r.namespace),
            "spec": {
                "schema": {"name": "OpenAI"},
                "backendRef": {"group": "gateway.envoyproxy.io", "kind": "Backend", "name": r.name},
            },
        },
    ]


@builds_objects
def inference_objectives(p: GatewayProps, r: ModelRoute) -> list[dict[str, Any]]:
    """One InferenceObjective per tenant that may call this pool: its name is what the gateway sets in the objective
    header for that tenant, its priority the tenant's band."""
    return [
        {
            "apiVersion": "llm-d.ai/v1alpha2",
            "kind": "InferenceObjective",
            "metadata": meta(t.objective, r.namespace),
            "spec": {"priority": t.priority, "poolRef": {"group": POOL_GROUP, "name": r.name}},
        }
        for t in pool_tenants(p, r)
    ]


def pool_tenants(p: GatewayProps, r: ModelRoute) -> list[Any]:
    """The tenants that may call at least one of the route's names."""
    return [t for t in p.tenants if set(t.models) & set(r.model_names)]


def envoy_peer(p: GatewayProps) -> dict[str, Any]:
    """The gateway's Envoy pods (Envoy Gateway's GatewayNamespace mode runs them in the gateway's namespace)."""
    return netpol.pods({**ENVOY_POD, OWNING_GATEWAY_NAME: p.name}, p.namespace)


def route_policies(p: GatewayProps, r: ModelRoute) -> list[dict[str, Any]]:
    """Ingress added to the workload's namespace (its default-deny comes with the workload): Envoy to the serving
    port, and for a pool Envoy to the picker, the picker to vLLM's /metrics (and its render endpoints), Prometheus to
    the picker's metrics; with precise prefix scoring, the picker to the pods' KV-event sockets."""
    envoy = envoy_peer(p)
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
    # Precise prefix scoring: the picker dials each pod's KV-event and replay sockets (it subscribes; the pods only
    # bind), so the pods admit the picker on those two ports and nothing else there (planner/kv_events.py).
    events = (
        []
        if r.precise_prefix is None
        else [
            netpol.network_policy(
                f"{r.name}-kv-events",
                r.namespace,
                r.backend.selector,
                [netpol.rule([netpol.pods(picker)], netpol.tcp(kv_events.EVENTS_PORT, kv_events.REPLAY_PORT))],
            )
        ]
    )
    return [
        *events,
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
                    [netpol.pods(netpol.PROMETHEUS_POD, p.monitoring_namespace)], netpol.tcp(ROUTER_METRICS_PORT)
                ),
            ],
        ),
    ]


def route_objects(p: GatewayProps, r: ModelRoute) -> list[dict[str, Any]]:
    """Everything one workload adds for the gateway, in its own namespace; a next version adds nothing (its pods are
    in its current version's pool, whose route, picker and policies serve them)."""
    if not r.routed:
        return []
    objects = [ai_gateway_route(p, r)]
    if r.next_version is not None:
        objects += rollout_role(r)
    if isinstance(r.backend, PoolBackend):
        priorities = [t.priority for t in pool_tenants(p, r)]
        objects += [inference_pool(r, r.backend), *endpoint_picker(r, priorities), *inference_objectives(p, r)]
    else:
        objects += serve_backend(r, r.backend)
    return objects + route_policies(p, r)


def all_model_names(routes: Sequence[ModelRoute]) -> dict[str, str]:
    """model name -> the route (workload) that matches it (a next version answers through its current version's)."""
    return {m: r.name for r in routes if r.routed for m in r.model_names}
