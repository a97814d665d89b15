"""`GatewayChart` (the gateway namespace) and `ModelRouteChart` (one workload's route, pool and picker)."""

from __future__ import annotations

import cdk8s
from constructs import Construct

from llm_eks.errors import ConfigError
from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.gateway.alerts import gateway_alerts
from llm_eks.manifests.gateway.guard import access_log, gateway_options, jwt_policies, route_policy, service_policy
from llm_eks.manifests.gateway.pool import route_objects
from llm_eks.manifests.gateway.props import CLUSTER_ISSUER, GatewayProps, ModelRoute
from llm_eks.manifests.gateway.router import gateway, gateway_pod_monitor, gateway_policies, payload_processor
from llm_eks.manifests.serving_objects import add_objects


class GatewayChart(cdk8s.Chart):
    """The environment's inference endpoint: its namespace (restricted Pod Security: istiod's gateway pods and both
    routers run non-root without capabilities), the Gateway and its options, the payload processor, the JWT check,
    the access log, their NetworkPolicies, and the admission policies that guard routes and Services."""

    def __init__(self, scope: Construct, construct_id: str, props: GatewayProps) -> None:
        props.validate()
        if props.auth is not None and props.auth.issuer == CLUSTER_ISSUER:
            raise ConfigError(
                "gateway.auth.issuer: 'eks-cluster' is not allowed here; the cluster's OIDC issuer URL must be "
                "filled in first (GatewayProps.with_cluster_issuer)"
            )
        super().__init__(scope, construct_id, namespace=props.namespace)
        self.props = props
        add_objects(
            self,
            [
                netpol.namespace(props.namespace, "restricted"),
                *([gateway_options(props)] if props.load_balanced else []),
                gateway(props),
                *payload_processor(props),
                *jwt_policies(props),
                access_log(props),
                *gateway_policies(props),
                gateway_pod_monitor(props),
                gateway_alerts(props),
                *route_policy(props),
                *service_policy(props),
            ],
        )


class ModelRouteChart(cdk8s.Chart):
    """One workload behind the gateway, in the workload's namespace (which its own chart creates)."""

    def __init__(self, scope: Construct, construct_id: str, props: GatewayProps, route: ModelRoute) -> None:
        if route not in props.routes:
            raise ConfigError(f"route: {route.name!r} is not allowed; it is not one of the gateway's routes")
        props.validate()
        super().__init__(scope, construct_id, namespace=route.namespace)
        add_objects(self, route_objects(props, route))
