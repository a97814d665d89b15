"""The gateway's data plane, as Envoy Gateway objects in the gateway's namespace: the GatewayClass, the EnvoyProxy
(Envoy's Deployment, PDB and Service: an internal NLB, or ClusterIP; the filter order; the access log), the Gateway
with one listener per credential kind in use, the AI Gateway's GatewayConfig (token costs counted from each
response's `usage`), the ClientTrafficPolicy (client headers stripped before routing, connection limits), the
NetworkPolicies and the monitors of the Envoy pods.

Sources, read at the pinned tags: envoyproxy/gateway v1.9.0 api/v1alpha1/envoyproxy_types.go (filterOrder, shutdown,
telemetry.accessLog, provider.kubernetes.envoyDeployment/envoyPDB/envoyService), internal/gatewayapi/listener.go
(a listener port below 1024 binds 10000 higher in the pod, so NetworkPolicies name the container port),
internal/xds/translator/listener.go and header_mutation.go (earlyRequestHeaders become the HTTP connection manager's
early header mutation: before routing and before every filter), internal/infrastructure/kubernetes/proxy/
resource.go (a memory limit turns on Envoy's heap overload actions); envoyproxy/ai-gateway v1.1.0
api/v1beta1/gateway_config.go (globalLLMRequestCosts; a Gateway names its GatewayConfig with the annotation
aigateway.envoyproxy.io/gateway-config), internal/endpointspec/endpointspec.go (with costs configured a streaming
request is given stream_options.include_usage, so streamed tokens are counted too); llm-d router v0.10.0
pkg/epp/metadata/consts.go and pkg/common/routing/common.go (the headers a client must never set); AWS Load
Balancer Controller v3.5.0 docs/guide/service (the NLB annotations); on EKS Auto Mode the EKS User Guide,
auto-configure-nlb.adoc@1eb6aa42 (class eks.amazonaws.com/nlb, which replaces the aws-load-balancer-type annotation;
scheme, target type, ssl-cert/-ports, attributes and target group attributes as annotations).
"""

from __future__ import annotations

from typing import Any

from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.checks.objects import GATEWAY_CONFIG_ANNOTATION
from llm_eks.manifests.gateway.common import meta
from llm_eks.manifests.gateway.platform import ENVOY_POD, OWNING_GATEWAY_NAME, OWNING_GATEWAY_NAMESPACE
from llm_eks.manifests.gateway.props import (
    AUTO_MODE_NLB_CLASS,
    ENVOY_METRICS_PORT,
    EXTPROC_METRICS_PORT,
    GATEWAY_CLASS,
    MODEL_HEADER,
    TENANT_HEADER,
    GatewayProps,
)
from llm_eks.manifests.source import builds_objects

GATEWAY_API = "gateway.networking.k8s.io"
EG_API = "gateway.envoyproxy.io/v1alpha1"
CONTROLLER_NAME = "gateway.envoyproxy.io/gatewayclass-controller"
SCHEME_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-scheme"
# Token costs, as metadata keys (namespace io.envoy.ai_gateway) the rate-limit rules charge.
INPUT_TOKENS, OUTPUT_TOKENS, TOTAL_TOKENS = "llm_input_token", "llm_output_token", "llm_total_token"
# A client may set none of these: prefixes and names, matched case-insensitively, removed before anything routes.
STRIPPED_PREFIXES = ("x-llm-eks-", "x-llm-d-", "x-gateway-", "x-ai-eg-")
STRIPPED_NAMES = (
    "x-slo-ttft-ms",
    "x-slo-tpot-ms",
    "x-prefiller-host-port",
    "x-encoder-hosts-ports",
    "x-data-parallel-host-port",
    "x-kv-cache-source-host-port",
)
# Envoy's drain when a pod stops: long enough for a generation in flight (requests are not retried).
DRAIN_SECONDS = 600


def container_port(port: int) -> int:
    """The port Envoy binds in its pod for a listener port (below 1024: 10000 higher)."""
    return port + 10000 if port < 1024 else port


@builds_objects
def gateway_class() -> dict[str, Any]:
    return {
        "apiVersion": f"{GATEWAY_API}/v1",
        "kind": "GatewayClass",
        "metadata": {"name": GATEWAY_CLASS, "labels": meta(GATEWAY_CLASS, "")["labels"]},
        "spec": {"controllerName": CONTROLLER_NAME},
    }


def _service(p: GatewayProps) -> dict[str, Any]:
    if not p.load_balanced:
        return {"type": "ClusterIP"}
    # Auto Mode takes the class instead of the type annotation ("aws-load-balancer-type: Not supported, use
    # spec.loadBalancerClass", auto-configure-nlb.adoc@1eb6aa42); the AWS Load Balancer Controller reads either.
    load_balancer_type = (
        {}
        if p.load_balancer_class == AUTO_MODE_NLB_CLASS
        else {"service.beta.kubernetes.io/aws-load-balancer-type": "external"}
    )
    annotations = {
        **load_balancer_type,
        "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
        SCHEME_ANNOTATION: "internal",
        "service.beta.kubernetes.io/aws-load-balancer-attributes": "load_balancing.cross_zone.enabled=true",
        # Envoy drains a pod's connections on shutdown; keep the target until then.
        "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes": (
            "deregistration_delay.timeout_seconds=60"
        ),
    }
    if p.certificate_arn is not None:
        annotations |= {
            "service.beta.kubernetes.io/aws-load-balancer-ssl-cert": p.certificate_arn,
            "service.beta.kubernetes.io/aws-load-balancer-ssl-ports": ",".join(str(port) for _, port in p.listeners()),
            "service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy": p.ssl_policy,
            "service.beta.kubernetes.io/aws-load-balancer-backend-protocol": "tcp",
        }
    return {
        "type": "LoadBalancer",
        "loadBalancerClass": p.load_balancer_class,
        "annotations": annotations,
        "loadBalancerSourceRanges": list(p.inbound_cidrs),
    }


def _access_log() -> dict[str, Any]:
    """One JSON line per request on stdout: who (tenant), what (model, path, status, tokens), never a body, a key or
    the Authorization header (none is in the format)."""
    fields = {
        "start_time": "%START_TIME%",
        "tenant": f"%REQ({TENANT_HEADER})%",
        "model": f"%REQ({MODEL_HEADER})%",
        "method": "%REQ(:METHOD)%",
        "path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
        "status": "%RESPONSE_CODE%",
        "flags": "%RESPONSE_FLAGS%",
        "details": "%RESPONSE_CODE_DETAILS%",
        "dropped": "%RESP(X-LLM-D-REQUEST-DROPPED-REASON)%",
        "input_tokens": f"%DYNAMIC_METADATA(io.envoy.ai_gateway:{INPUT_TOKENS})%",
        "output_tokens": f"%DYNAMIC_METADATA(io.envoy.ai_gateway:{OUTPUT_TOKENS})%",
        "duration_ms": "%DURATION%",
        "upstream": "%UPSTREAM_HOST%",
        "request_id": "%REQ(X-REQUEST-ID)%",
    }
    return {
        "settings": [
            {"format": {"type": "JSON", "json": fields}, "sinks": [{"type": "File", "file": {"path": "/dev/stdout"}}]}
        ]
    }


@builds_objects
def envoy_proxy(p: GatewayProps) -> dict[str, Any]:
    """Envoy's pods and Service for this Gateway."""
    envoy_labels = {**ENVOY_POD, OWNING_GATEWAY_NAME: p.name, OWNING_GATEWAY_NAMESPACE: p.namespace}
    return {
        "apiVersion": EG_API,
        "kind": "EnvoyProxy",
        "metadata": meta(p.name, p.namespace),
        "spec": {
            "provider": {
                "type": "Kubernetes",
                "kubernetes": {
                    "envoyDeployment": {
                        "replicas": p.envoy_replicas,
                        "pod": {
                            "nodeSelector": dict(p.node_selector),
                            **({"tolerations": [dict(t) for t in p.tolerations]} if p.tolerations else {}),
                            "topologySpreadConstraints": [
                                {
                                    "maxSkew": 1,
                                    "topologyKey": "topology.kubernetes.io/zone",
                                    "whenUnsatisfiable": "DoNotSchedule",
                                    "labelSelector": {"matchLabels": envoy_labels},
                                }
                            ],
                        },
                        "container": {
                            "image": p.envoy_image,
                            # The limit turns on Envoy's overload manager (shrink heaps, then stop accepting
                            # requests near it) instead of an OOM kill.
                            "resources": {
                                "requests": {"cpu": "500m", "memory": "512Mi"},
                                "limits": {"memory": "2Gi"},
                            },
                        },
                    },
                    **({"envoyPDB": {"minAvailable": 1}} if p.envoy_replicas > 1 else {}),
                    "envoyService": _service(p),
                },
            },
            # Ahead of the body buffer: the tenant filter (so the AI Gateway's processor, inserted right after the
            # buffer, sees the tenant) and the per-replica request limit (overload protection before any body is
            # buffered).
            "filterOrder": [
                {"name": "envoy.filters.http.lua", "before": "envoy.filters.http.buffer"},
                {"name": "envoy.filters.http.local_ratelimit", "before": "envoy.filters.http.buffer"},
            ],
            "shutdown": {"drainTimeout": f"{DRAIN_SECONDS}s"},
            "telemetry": {"accessLog": _access_log()},
        },
    }


@builds_objects
def gateway(p: GatewayProps, route_namespaces: list[str]) -> dict[str, Any]:
    """The Gateway: one listener per credential kind in use, plain HTTP to Envoy (the NLB ends TLS), routes only from
    the workloads' namespaces (and guard.py checks what they match)."""
    listeners = [
        {
            "name": name,
            "port": port,
            "protocol": "HTTP",
            "allowedRoutes": {
                "kinds": [{"group": GATEWAY_API, "kind": "HTTPRoute"}],
                "namespaces": {
                    "from": "Selector",
                    "selector": {
                        "matchExpressions": [
                            {"key": netpol.NAMESPACE_NAME_LABEL, "operator": "In", "values": route_namespaces}
                        ]
                    },
                },
            },
        }
        for name, port in p.listeners()
    ]
    metadata = meta(p.name, p.namespace)
    metadata["annotations"] = {GATEWAY_CONFIG_ANNOTATION: p.name}
    return {
        "apiVersion": f"{GATEWAY_API}/v1",
        "kind": "Gateway",
        "metadata": metadata,
        "spec": {
            "gatewayClassName": GATEWAY_CLASS,
            "infrastructure": {
                "parametersRef": {"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy", "name": p.name}
            },
            "listeners": listeners,
        },
    }


@builds_objects
def gateway_config(p: GatewayProps) -> dict[str, Any]:
    """The AI Gateway's per-Gateway settings: the token costs every route charges (one definition, so no route can
    set its own), and its external processor's resources."""
    return {
        "apiVersion": "aigateway.envoyproxy.io/v1beta1",
        "kind": "GatewayConfig",
        "metadata": meta(p.name, p.namespace),
        "spec": {
            "extProc": {
                "kubernetes": {
                    "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
                }
            },
            "globalLLMRequestCosts": [
                {"metadataKey": INPUT_TOKENS, "type": "InputToken"},
                {"metadataKey": OUTPUT_TOKENS, "type": "OutputToken"},
                {"metadataKey": TOTAL_TOKENS, "type": "TotalToken"},
            ],
        },
    }


@builds_objects
def client_policy(p: GatewayProps) -> dict[str, Any]:
    """What Envoy does before any filter: every client copy of a header the gateway sets or trusts is removed (case
    does not matter: header names are case-insensitive in Envoy), underscores in header names refused, connections,
    streams and slow bodies bounded."""
    remove = [{"type": "Prefix", "value": v} for v in STRIPPED_PREFIXES]
    remove += [{"type": "Exact", "value": v} for v in STRIPPED_NAMES]
    return {
        "apiVersion": EG_API,
        "kind": "ClientTrafficPolicy",
        "metadata": meta(p.name, p.namespace),
        "spec": {
            "targetRefs": [{"group": GATEWAY_API, "kind": "Gateway", "name": p.name}],
            "headers": {"earlyRequestHeaders": {"removeOnMatch": remove}, "withUnderscoresAction": "RejectRequest"},
            "connection": {
                # Per listener and Envoy replica: a flood of connections stops here, not in the buffer.
                "connectionLimit": {"value": 4096},
                # The body buffer's cap, so the AI Gateway's processor buffers against the same limit.
                "bufferLimit": f"{p.max_request_bytes}",
            },
            # A body that does not arrive within a minute is cut: slow uploads hold no buffer for long.
            "timeout": {"http": {"requestReceivedTimeout": "60s"}},
            "http2": {"maxConcurrentStreams": 100},
            "path": {"escapedSlashesAction": "RejectRequest"},
        },
    }


def gateway_policies(p: GatewayProps) -> list[dict[str, Any]]:
    """Ingress into the gateway namespace: the NLB's ENIs (when there is one) and in-cluster clients (pods labelled
    llm-eks.io/inference-client in namespaces labelled so) to Envoy's listeners, Prometheus to Envoy's and the
    external processor's metrics. The NLB's own security group admits only `inbound_cidrs`."""
    ns, prometheus = p.namespace, netpol.pods(netpol.PROMETHEUS_POD, p.monitoring_namespace)
    ports = netpol.tcp(*(container_port(port) for _, port in p.listeners()))
    listener = [netpol.rule(netpol.client_peers(), ports)]
    if p.load_balanced:
        listener.insert(0, netpol.rule(netpol.cidrs(p.load_balancer_cidrs), ports))
    envoy = {**ENVOY_POD, OWNING_GATEWAY_NAME: p.name}
    return [
        netpol.default_deny(ns),
        netpol.network_policy(
            f"{p.name}-listener",
            ns,
            envoy,
            [*listener, netpol.rule([prometheus], netpol.tcp(ENVOY_METRICS_PORT, EXTPROC_METRICS_PORT))],
        ),
    ]


@builds_objects
def gateway_pod_monitor(p: GatewayProps) -> dict[str, Any]:
    """Envoy's stats and the AI Gateway external processor's gen_ai metrics (by tenant) from the Envoy pods."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": meta(p.name, p.namespace),
        "spec": {
            "selector": {"matchLabels": {**ENVOY_POD, OWNING_GATEWAY_NAME: p.name}},
            "podMetricsEndpoints": [
                {"targetPort": ENVOY_METRICS_PORT, "path": "/stats/prometheus", "interval": "15s"},
                {"targetPort": EXTPROC_METRICS_PORT, "path": "/metrics", "interval": "15s"},
            ],
        },
    }
