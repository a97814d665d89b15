"""One inference endpoint per environment: an Istio Gateway (Gateway API) behind an internal NLB, routing each
request by its `model` to that workload, and within a vLLM workload to the replica the Gateway API Inference
Extension's endpoint picker (llm-d-router) chooses by load and prefix-cache affinity.

What a request goes through, load balancer to pod:
1. the internal NLB (AWS Load Balancer Controller, target type ip; TLS ends here with the ACM certificate) forwards to
   the Envoy pods istiod generates for the `Gateway`;
2. Envoy's first HTTP filter is the payload processor's ext_proc (`EnvoyFilter`, INSERT_FIRST): it reads the JSON
   body and copies its `model` into the `X-Gateway-Model-Name` header;
3. Envoy's route table (istiod renders it from the `HTTPRoute`s) matches that header exactly: each served model name
   and each LoRA adapter name appears in exactly one workload's route, so a request can only reach that workload;
   a name no route has gets 404 from Envoy;
4. a vLLM route's backend is an `InferencePool`: Envoy asks the pool's endpoint picker (ext_proc again) which pod
   to use, and it scores the pool's pods by queue length, KV-cache use and prefix-cache match (the scorers of its
   default config); a Ray Serve route's backend is its Serve Service, whose proxy balances its replicas itself;
5. Envoy forwards to the chosen pod IP on port 8000, where vLLM checks the API key.

Sources (pinned in `props`): llm-d-router v0.10.0 config/charts/llm-d-router-gateway and routerlib templates
(InferencePool, picker Deployment, RBAC, plugins config, the Istio DestinationRule); the
llm-d-inference-payload-processor chart (templates/istio.yaml: the EnvoyFilter and DestinationRule; its
`PayloadProcessorConfig`); Istio 1.30.3 kube-gateway.yaml (the pods it generates, their labels and the annotations it
copies onto the Service). Our changes to the upstream charts' output: restricted Pod Security contexts, modest
requests (the picker's chart asks 8 CPUs), metrics without auth (the charts grant no tokenreview RBAC) and without
pprof, probes and named ports on the payload processor, two payload-processor replicas with a PodDisruptionBudget.

Not verified here: the payload processor's v0.1.0 release takes `--config-file` with a `PayloadProcessorConfig` (its
chart at the newest source this machine has; the May 2026 chart passed `--plugin` flags instead).
"""

from llm_eks.manifests.gateway.chart import GatewayChart, ModelRouteChart
from llm_eks.manifests.gateway.pool import all_model_names, route_objects
from llm_eks.manifests.gateway.props import (
    CLUSTER_ISSUER,
    GATEWAY_NAMESPACE,
    MODEL_HEADER,
    GatewayAuth,
    GatewayProps,
    ModelRoute,
    NextVersion,
    PoolBackend,
    ServiceBackend,
)
from llm_eks.manifests.gateway.router import gateway, payload_processor
from llm_eks.versions import EPP_IMAGE, IPP_IMAGE

__all__ = [
    "CLUSTER_ISSUER",
    "EPP_IMAGE",
    "GATEWAY_NAMESPACE",
    "IPP_IMAGE",
    "MODEL_HEADER",
    "GatewayAuth",
    "GatewayChart",
    "GatewayProps",
    "ModelRoute",
    "ModelRouteChart",
    "NextVersion",
    "PoolBackend",
    "ServiceBackend",
    "all_model_names",
    "gateway",
    "payload_processor",
    "route_objects",
]
