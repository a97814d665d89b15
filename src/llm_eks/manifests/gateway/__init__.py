"""One inference endpoint per environment: Envoy Gateway's Envoy pods behind an internal NLB, with Envoy AI Gateway
reading each request's `model`, authenticating and authorizing its tenant, charging its tokens, and handing vLLM
requests to the endpoint picker (llm-d router) that holds, orders and places them.

What a request goes through, load balancer to pod (filter order: envoyproxy/gateway v1.9.0
internal/xds/translator/httpfilters.go; envoyproxy/ai-gateway v1.1.0 internal/extensionserver):
1. the internal NLB (TLS ends here with the ACM certificate) forwards to the Envoy pods of the listener for the
   tenant's credential kind (`api-key` or `jwt`);
2. before routing, Envoy removes every client copy of a header the gateway sets or trusts (ClientTrafficPolicy
   early request headers: the model, identity and flow-control headers, the picker's P/D targets);
3. API-key or JWT authentication on the headers (401 for no or a wrong credential; a JWT only from
   `Authorization: Bearer`), then the tenant filter (tenant_filter.py: principal -> tenant, fairness id, objective;
   403 for an unknown principal), then a per-replica request limit;
4. the body buffer (413 above max_request_bytes), then the AI Gateway's external processor reads the body, sets
   x-ai-eg-model from its `model` and clears the route cache: the route is chosen from the body;
5. authorization (403 unless the tenant may call that model; the body names nothing), then the tenant's global
   request rate and token budgets for that model (429 with Retry-After);
6. a vLLM route's backend is an InferencePool: its picker holds the request while no replica is ready or the pool is
   saturated (flow control: priority band by tenant, tenants take turns within a band; 503 or 429 with Retry-After
   when the hold ends or the band is full), then picks the pod by queue, KV cache and prefix match (precise, from
   the pods' KV-cache events, where a CPU tier keeps prefixes the GPU evicted: precise_prefix.py); a Ray Serve
   route's backend is its Serve Service;
7. tokens are charged from the response's `usage` when it ends (streamed responses too).

Sources: each module names its own; the gateway comparison that chose this stack is in docs/concepts/gateway.md.
"""

from llm_eks.manifests.gateway.chart import GatewayChart, ModelRouteChart
from llm_eks.manifests.gateway.hold import Hold, hold_for
from llm_eks.manifests.gateway.props import (
    AUTO_MODE_NLB_CLASS,
    GATEWAY_NAMESPACE,
    MODEL_HEADER,
    FlowControl,
    GatewayProps,
    ModelRoute,
    NextVersion,
    PoolBackend,
    PrecisePrefix,
    ServiceBackend,
)
from llm_eks.manifests.gateway.routes import all_model_names, route_kind, route_objects, traffic_split
from llm_eks.manifests.gateway.tenants import CLUSTER_ISSUER, Issuer, Tenant, TenantLimits
from llm_eks.versions import ENVOY_PROXY_IMAGE, EPP_IMAGE

__all__ = [
    "AUTO_MODE_NLB_CLASS",
    "CLUSTER_ISSUER",
    "ENVOY_PROXY_IMAGE",
    "EPP_IMAGE",
    "GATEWAY_NAMESPACE",
    "MODEL_HEADER",
    "FlowControl",
    "GatewayChart",
    "GatewayProps",
    "Hold",
    "Issuer",
    "ModelRoute",
    "ModelRouteChart",
    "NextVersion",
    "PoolBackend",
    "PrecisePrefix",
    "ServiceBackend",
    "Tenant",
    "TenantLimits",
    "all_model_names",
    "hold_for",
    "route_kind",
    "route_objects",
    "traffic_split",
]
