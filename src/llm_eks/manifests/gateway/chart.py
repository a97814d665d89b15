"""`GatewayChart` (the gateway's namespace, its Envoy Gateway and AI Gateway objects, the tenants' key sync, the
admission policies) and `ModelRouteChart` (one workload's route, pool, picker and objectives)."""

from __future__ import annotations

import cdk8s
from constructs import Construct

from llm_eks.error_codes import E131
from llm_eks.errors import ConfigError
from llm_eks.manifests import network_policies as netpol
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


class GatewayChart(cdk8s.Chart):
    """The environment's inference endpoint: its namespace (restricted Pod Security: Envoy Gateway's Envoy pods and
    the AI Gateway's processor run non-root without capabilities), the GatewayClass, EnvoyProxy, Gateway and the
    policies on it, the tenants' key Secrets (synced by the External Secrets Operator in its own namespace), the
    NetworkPolicies, the monitors, the per-tenant dashboard and the gateway's alerts, and the admission policies that
    guard routes, policies and Services.

    `region`: where the tenants' keys are in Secrets Manager (the stack's region; required with API-key tenants)."""

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
        add_objects(
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


class ModelRouteChart(cdk8s.Chart):
    """One workload behind the gateway, in the workload's namespace (which its own chart creates)."""

    def __init__(self, scope: Construct, construct_id: str, props: GatewayProps, route: ModelRoute) -> None:
        if route not in props.routes:
            raise ConfigError(E131, f"route: {route.name!r} is not allowed; it is not one of the gateway's routes")
        props.validate()
        super().__init__(scope, construct_id, namespace=route.namespace)
        add_objects(self, route_objects(props, route))
