"""`GatewayChart` (the gateway namespace) and `ModelRouteChart` (one workload's route, pool and picker)."""

from __future__ import annotations

import cdk8s
from constructs import Construct

from llm_eks.errors import ConfigError
from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.gateway.pool import route_objects
from llm_eks.manifests.gateway.props import GatewayProps, ModelRoute
from llm_eks.manifests.gateway.router import gateway, gateway_pod_monitor, gateway_policies, payload_processor
from llm_eks.manifests.serving_objects import add_objects


class GatewayChart(cdk8s.Chart):
    """The environment's inference endpoint: its namespace (restricted Pod Security: istiod's gateway pods and both
    routers run non-root without capabilities), the Gateway, the payload processor and their NetworkPolicies."""

    def __init__(self, scope: Construct, construct_id: str, props: GatewayProps) -> None:
        props.validate()
        super().__init__(scope, construct_id, namespace=props.namespace)
        self.props = props
        add_objects(
            self,
            [
                netpol.namespace(props.namespace, "restricted"),
                gateway(props),
                *payload_processor(props),
                *gateway_policies(props),
                gateway_pod_monitor(props),
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
