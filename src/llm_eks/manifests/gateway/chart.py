"""`GatewayChart` (the gateway's namespace, its Envoy Gateway and AI Gateway objects, the tenants' key sync, the
admission policies) and `ModelRouteChart` (one workload's route, pool, picker and objectives).

Both are cdk8s-plus charts (manifests/plus): their ServiceAccounts, ConfigMaps, Deployments and Services are
cdk8s-plus objects synthesizing exactly the reviewed dicts; the Gateway API, Envoy Gateway, AI Gateway, Gateway API
Inference Extension, External Secrets and Prometheus Operator objects are custom resources, dicts validated against
the vendored CRDs. The typed attributes GATEWAY_PUBLIC_ATTRIBUTES and ROUTE_PUBLIC_ATTRIBUTES list are their public
API (tests/test_chart_api.py snapshots them).
"""

from __future__ import annotations

from typing import TypeVar

import cdk8s
import cdk8s_plus_35 as kplus
from constructs import Construct

from llm_eks.error_codes import E131
from llm_eks.errors import ConfigError
from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests import plus
from llm_eks.manifests.gateway.auth import key_secrets, security_policies, tenant_filters
from llm_eks.manifests.gateway.guard import admission_policies
from llm_eks.manifests.gateway.limits import traffic_policy
from llm_eks.manifests.gateway.observability import gateway_monitoring
from llm_eks.manifests.gateway.props import GatewayProps, ModelRoute
from llm_eks.manifests.gateway.proxy import (
    client_policy,
    envoy_proxy,
    gateway,
    gateway_class,
    gateway_config,
    gateway_pod_monitor,
    gateway_policies,
)
from llm_eks.manifests.gateway.routes import route_objects
from llm_eks.manifests.gateway.tenants import CLUSTER_ISSUER
from llm_eks.manifests.serving_objects import add_objects

# The charts' public API: attribute name and type. A user's extended chart relies on these; tests/test_chart_api.py
# fails when one is removed or its type changes (a breaking change: a 0.x minor, announced in the changelog).
GATEWAY_PUBLIC_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("props", "GatewayProps"),
    # The per-tenant Grafana dashboard (found by Grafana's sidecar through its grafana_dashboard label).
    ("dashboard", "kplus.ConfigMap"),
    # The gateway namespace's NetworkPolicies by name (its default-deny and who reaches the Envoy pods).
    ("network_policies", "dict[str, kplus.NetworkPolicy]"),
)
ROUTE_PUBLIC_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("props", "GatewayProps"),
    ("route", "ModelRoute"),
    # A pool's endpoint picker (llm-d router): its Deployment, the Service the gateway calls it through, its
    # configuration and its account; None for a Ray Serve route (a Backend, no picker).
    ("picker_deployment", "kplus.Deployment | None"),
    ("picker_service", "kplus.Service | None"),
    ("picker_config", "kplus.ConfigMap | None"),
    ("picker_service_account", "kplus.ServiceAccount | None"),
    # Who reaches the workload's pods and the picker through the gateway, by name.
    ("network_policies", "dict[str, kplus.NetworkPolicy]"),
)

_K = TypeVar("_K", bound=kplus.Resource)


def _one(added: list[cdk8s.ApiObject | kplus.Resource], kind: type[_K], name: str | None = None) -> _K | None:
    """The object of cdk8s-plus class `kind` (named `name`, if given) among `added`, or None."""
    found = [o for o in added if isinstance(o, kind) and name in (None, o.name)]
    return found[0] if len(found) == 1 else None


class GatewayChart(plus.PlusChart):
    """The environment's inference endpoint: its namespace (restricted Pod Security: Envoy Gateway's Envoy pods and
    the AI Gateway's processor run non-root without capabilities), the GatewayClass, EnvoyProxy, Gateway and the
    policies on it, the tenants' key Secrets (synced by the External Secrets Operator in its own namespace), the
    NetworkPolicies, the monitors, the per-tenant dashboard and the gateway's alerts, and the admission policies that
    guard routes, policies and Services.

    `region`: where the tenants' keys are in Secrets Manager (the stack's region; required with API-key tenants).
    Its public attributes are GATEWAY_PUBLIC_ATTRIBUTES."""

    props: GatewayProps
    dashboard: kplus.ConfigMap
    network_policies: dict[str, kplus.NetworkPolicy]

    def __init__(self, scope: Construct, construct_id: str, props: GatewayProps, region: str | None = None) -> None:
        props.validate()
        if any(i.issuer == CLUSTER_ISSUER for i in props.issuers):
            raise ConfigError(
                E131,
                "gateway.issuers: 'eks-cluster' is not allowed here; the cluster's OIDC issuer URL must be filled in "
                "first (GatewayProps.with_cluster_issuer)",
            )
        if region is None and any(t.api_key_secret is not None for t in props.tenants):
            raise ConfigError(
                E131,
                "region: None is not allowed with API-key tenants; the SecretStore reads their keys from Secrets "
                "Manager in one region (give the environment a region, or pass --region)",
            )
        super().__init__(scope, construct_id, namespace=props.namespace)
        self.props = props
        namespaces = sorted({r.namespace for r in props.routes if r.routed})
        added = add_objects(
            self,
            [
                netpol.namespace(props.namespace, "restricted"),
                gateway_class(),
                envoy_proxy(props),
                gateway(props, namespaces),
                gateway_config(props),
                client_policy(props),
                traffic_policy(props),
                *security_policies(props),
                *tenant_filters(props),
                *key_secrets(props, region),
                *gateway_policies(props),
                gateway_pod_monitor(props),
                *gateway_monitoring(props),
                *admission_policies(props),
            ],
        )
        dashboard = _one(added, kplus.ConfigMap)
        assert dashboard is not None  # gateway_monitoring's dashboard: the chart's one ConfigMap
        self.dashboard = dashboard


class ModelRouteChart(plus.PlusChart):
    """One workload behind the gateway, in the workload's namespace (which its own chart creates); its public
    attributes are ROUTE_PUBLIC_ATTRIBUTES."""

    props: GatewayProps
    route: ModelRoute
    picker_deployment: kplus.Deployment | None
    picker_service: kplus.Service | None
    picker_config: kplus.ConfigMap | None
    picker_service_account: kplus.ServiceAccount | None
    network_policies: dict[str, kplus.NetworkPolicy]

    def __init__(self, scope: Construct, construct_id: str, props: GatewayProps, route: ModelRoute) -> None:
        if route not in props.routes:
            raise ConfigError(E131, f"route: {route.name!r} is not allowed; it is not one of the gateway's routes")
        props.validate()
        super().__init__(scope, construct_id, namespace=route.namespace)
        self.props, self.route = props, route
        added = add_objects(self, route_objects(props, route))
        # The picker's objects are all named after it (picker.endpoint_picker).
        self.picker_deployment = _one(added, kplus.Deployment, route.picker)
        self.picker_service = _one(added, kplus.Service, route.picker)
        self.picker_config = _one(added, kplus.ConfigMap, route.picker)
        self.picker_service_account = _one(added, kplus.ServiceAccount, route.picker)
