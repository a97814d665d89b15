"""The gateway namespace: the `Gateway` istiod turns into Envoy pods behind an internal NLB, the payload processor
that lifts each request's `model` into a header (and the `EnvoyFilter` that puts it first in Envoy's chain), their
NetworkPolicies and monitors. See `gateway/__init__` for the path of a request and the sources.
"""

from __future__ import annotations

from typing import Any

from llm_eks.manifests import network_policies as netpol
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
from llm_eks.manifests.gateway.guard import options_name
from llm_eks.manifests.gateway.props import (
    GATEWAY_CLASS,
    GATEWAY_METRICS_PORT,
    IPP_HEALTH_PORT,
    IPP_PORT,
    MODEL_HEADER,
    ROUTER_METRICS_PORT,
    GatewayProps,
)
from llm_eks.manifests.labels import PART_OF
from llm_eks.manifests.source import builds_objects

IPP_NAME = "payload-processor"

IPP_POD = {"app.kubernetes.io/name": IPP_NAME}

EXT_PROC_TYPE = "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"
BUFFER_TYPE = "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer"
HEADER_MUTATION_TYPE = "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation"
# Our filters' names in the chain (each later patch anchors on the one before it).
IPP_FILTER = "envoy.filters.http.ext_proc.payload-processor"
BODY_LIMIT_FILTER = "llm-eks.request-body-limit"
STRIP_HEADER_FILTER = "llm-eks.strip-model-header"
_IPP_CONFIG = "ipp-config.yaml"

IPP_CONFIG = f"""apiVersion: llm-d.ai/v1alpha1
kind: PayloadProcessorConfig
plugins:
- type: body-field-to-header
  parameters:
    fieldName: model
    headerName: {MODEL_HEADER}
profiles:
- name: default
  plugins:
    request:
    - pluginRef: body-field-to-header
"""

# The picker's scorers, weights as in llm-d-router v0.10.0's chart default (default-plugins.yaml): queue length and
# KV-cache use (from each vLLM pod's /metrics) and the prefix-cache match of the prompt.


@builds_objects
def gateway(p: GatewayProps) -> dict[str, Any]:
    """The Gateway istiod turns into Envoy pods and a Service. Behind an NLB, the Service's class and internal scheme
    come from the options ConfigMap istiod merges over it (guard.gateway_options), and its infrastructure annotations
    (copied onto the Service by istiod) carry what differs per gateway: the source ranges and the certificate
    (AWS Load Balancer Controller v3.5.0 service annotations). In-cluster only, the Service is ClusterIP."""
    spec: dict[str, Any] = {"gatewayClassName": GATEWAY_CLASS}
    metadata = meta(p.name, p.namespace)
    if p.load_balanced:
        annotations = {
            "service.beta.kubernetes.io/load-balancer-source-ranges": ",".join(p.inbound_cidrs),
            "service.beta.kubernetes.io/aws-load-balancer-attributes": "load_balancing.cross_zone.enabled=true",
            # Envoy drains a pod's connections on shutdown; keep the target until then.
            "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes": (
                "deregistration_delay.timeout_seconds=60"
            ),
        }
        if p.certificate_arn is not None:
            annotations |= {
                "service.beta.kubernetes.io/aws-load-balancer-ssl-cert": p.certificate_arn,
                "service.beta.kubernetes.io/aws-load-balancer-ssl-ports": str(p.port),
                "service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy": p.ssl_policy,
                "service.beta.kubernetes.io/aws-load-balancer-backend-protocol": "tcp",
            }
        spec["infrastructure"] = {
            "annotations": annotations,
            "parametersRef": {"group": "", "kind": "ConfigMap", "name": options_name(p)},
        }
    else:
        # istiod reads the Service type from this Gateway annotation (deploymentcontroller.go).
        metadata["annotations"] = {"networking.istio.io/service-type": "ClusterIP"}
    # A next version's namespace attaches no route: its current version's HTTPRoute sends to its pool.
    namespaces = sorted({r.namespace for r in p.routes if r.routed})
    spec["listeners"] = [
        {
            "name": p.listener,
            "port": p.port,
            # The NLB ends TLS (or there is none in-cluster): Envoy receives plain HTTP on the listener's port.
            "protocol": "HTTP",
            "allowedRoutes": {
                "kinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
                # Only the workloads' namespaces may attach routes (and guard.route_policy checks what they match).
                "namespaces": {
                    "from": "Selector",
                    "selector": {
                        "matchExpressions": [
                            {"key": netpol.NAMESPACE_NAME_LABEL, "operator": "In", "values": namespaces}
                        ]
                    },
                },
            },
        }
    ]
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": metadata, "spec": spec}


@builds_objects
def payload_processor(p: GatewayProps) -> list[dict[str, Any]]:
    """The body-based router: a Deployment Envoy calls for every request's headers and body, its config, RBAC
    (it watches ConfigMaps in its namespace), Service, PodDisruptionBudget, and the Istio objects that insert it."""
    ns = p.namespace
    labels = dict(IPP_POD)
    pod_sc, container_sc = security()
    host = f"{IPP_NAME}.{ns}.svc.cluster.local"
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": router_meta(IPP_NAME, ns, labels, p.router_image),
        "spec": {
            "replicas": p.router_replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": {**labels, "app.kubernetes.io/part-of": PART_OF}},
                "spec": {
                    "serviceAccountName": IPP_NAME,
                    "automountServiceAccountToken": True,
                    "securityContext": pod_sc,
                    "nodeSelector": dict(p.node_selector),
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "topology.kubernetes.io/zone",
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": labels},
                        }
                    ],
                    "containers": [
                        {
                            "name": IPP_NAME,
                            "image": p.router_image,
                            "imagePullPolicy": "IfNotPresent",
                            "args": [
                                "--config-file",
                                f"/config/{_IPP_CONFIG}",
                                "--v=2",
                                "--tracing=false",
                                "--metrics-endpoint-auth=false",
                                "--enable-pprof=false",
                            ],
                            "env": namespace_env(),
                            "ports": [
                                {"name": "grpc", "containerPort": IPP_PORT},
                                {"name": "grpc-health", "containerPort": IPP_HEALTH_PORT},
                                {"name": "metrics", "containerPort": ROUTER_METRICS_PORT},
                            ],
                            "readinessProbe": grpc_probe(IPP_HEALTH_PORT),
                            "livenessProbe": {**grpc_probe(IPP_HEALTH_PORT, period=20), "initialDelaySeconds": 15},
                            "resources": {
                                "requests": {"cpu": "250m", "memory": "128Mi"},
                                "limits": {"memory": "512Mi"},
                            },
                            "securityContext": container_sc,
                            "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True}],
                        }
                    ],
                    "volumes": [{"name": "config", "configMap": {"name": IPP_NAME}}],
                },
            },
        },
    }
    service = router_service(IPP_NAME, ns, labels, IPP_PORT, "HTTP2")
    envoy_filter = {
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "EnvoyFilter",
        "metadata": meta(IPP_NAME, ns),
        "spec": {
            # Must be in the Gateway's namespace: the CRD refuses a cross-namespace targetRef.
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": p.name}],
            "configPatches": _filter_chain(p, host),
        },
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(IPP_NAME, ns, labels)},
        *role(
            f"{IPP_NAME}-configmap-reader",
            ns,
            [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}],
            IPP_NAME,
            labels,
        ),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(IPP_NAME, ns, labels),
            "data": {_IPP_CONFIG: IPP_CONFIG},
        },
        deployment,
        service,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta(IPP_NAME, ns, labels),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}},
        },
        envoy_filter,
        tls_to_self_signed(IPP_NAME, ns, host),
        service_monitor(IPP_NAME, ns, labels),
    ]


def _http_filter(anchor: str | None, value: dict[str, Any]) -> dict[str, Any]:
    """A patch adding HTTP filter `value` to the gateway's listener: first in the chain (`anchor` None), or right
    after the filter named `anchor`."""
    hcm: dict[str, Any] = {"name": "envoy.filters.network.http_connection_manager"}
    if anchor is not None:
        hcm["subFilter"] = {"name": anchor}
    return {
        "applyTo": "HTTP_FILTER",
        "match": {"context": "GATEWAY", "listener": {"filterChain": {"filter": hcm}}},
        "patch": {"operation": "INSERT_FIRST" if anchor is None else "INSERT_AFTER", "value": value},
    }


def _filter_chain(p: GatewayProps, host: str) -> list[dict[str, Any]]:
    """Three filters, in this order, ahead of Envoy's routing: the body-size limit, the removal of any client-sent
    model header, then the payload processor that sets it from the body. With `auth` they follow Istio's RBAC filter
    (its JWT check comes before that), so an unauthenticated request is refused before anything reads its body;
    without, the model servers check their keys and the chain starts the listener's HTTP filters.

    The header is removed first because the payload processor leaves a request without a `model` field as it came
    (its body-field-to-header plugin skips it): a client's own header would then pick the route. A route's
    RequestHeaderModifier cannot help: Envoy applies it when forwarding, after the route was chosen."""
    anchor = "envoy.filters.http.rbac" if p.auth is not None else None
    buffer = {
        "name": BODY_LIMIT_FILTER,
        "typed_config": {"@type": BUFFER_TYPE, "max_request_bytes": p.max_request_bytes},
    }
    strip = {
        "name": STRIP_HEADER_FILTER,
        "typed_config": {
            "@type": HEADER_MUTATION_TYPE,
            "mutations": {"request_mutations": [{"remove": MODEL_HEADER.lower()}]},
        },
    }
    processor = {
        "name": IPP_FILTER,
        "typed_config": {
            "@type": EXT_PROC_TYPE,
            # Fail closed: a request whose model was never read must not be routed.
            "failure_mode_allow": False,
            "allow_mode_override": True,
            # Routing needs only the request: responses (and their streamed tokens) bypass it.
            "processing_mode": {
                "request_header_mode": "SEND",
                "response_header_mode": "SKIP",
                "request_body_mode": "FULL_DUPLEX_STREAMED",
                "response_body_mode": "NONE",
                "request_trailer_mode": "SEND",
                "response_trailer_mode": "SKIP",
            },
            "grpc_service": {"envoy_grpc": {"cluster_name": f"outbound|{IPP_PORT}||{host}"}},
        },
    }
    return [
        _http_filter(anchor, buffer),
        _http_filter(BODY_LIMIT_FILTER, strip),
        _http_filter(STRIP_HEADER_FILTER, processor),
    ]


def gateway_policies(p: GatewayProps) -> list[dict[str, Any]]:
    """Ingress into the gateway namespace: the NLB's ENIs (when there is one) and in-cluster clients (pods labelled
    llm-eks.io/inference-client in namespaces labelled so) to Envoy's listener, Envoy to the payload processor,
    Prometheus to both's metrics. The NLB's own security group admits only `inbound_cidrs`."""
    ns, prometheus = p.namespace, netpol.pods(netpol.PROMETHEUS_POD, p.monitoring_namespace)
    envoy = {netpol.GATEWAY_NAME_LABEL: p.name}
    listener = [netpol.rule(netpol.client_peers(), netpol.tcp(p.port))]
    if p.load_balanced:
        listener.insert(0, netpol.rule(netpol.cidrs(p.load_balancer_cidrs), netpol.tcp(p.port)))
    return [
        netpol.default_deny(ns),
        netpol.network_policy(
            f"{p.name}-listener",
            ns,
            envoy,
            [*listener, netpol.rule([prometheus], netpol.tcp(GATEWAY_METRICS_PORT))],
        ),
        netpol.network_policy(
            IPP_NAME,
            ns,
            IPP_POD,
            [
                netpol.rule([netpol.pods(envoy)], netpol.tcp(IPP_PORT)),
                netpol.rule([prometheus], netpol.tcp(ROUTER_METRICS_PORT)),
            ],
        ),
    ]


@builds_objects
def gateway_pod_monitor(p: GatewayProps) -> dict[str, Any]:
    """Envoy's own metrics (istio_requests_total and friends) from the generated gateway pods."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": meta(p.name, p.namespace),
        "spec": {
            "selector": {"matchLabels": {netpol.GATEWAY_NAME_LABEL: p.name}},
            "podMetricsEndpoints": [{"port": "metrics", "path": "/stats/prometheus", "interval": "15s"}],
        },
    }
