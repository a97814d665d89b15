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

IPP_NAME = "payload-processor"

IPP_POD = {"app.kubernetes.io/name": IPP_NAME}

EXT_PROC_TYPE = "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"
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


def gateway(p: GatewayProps) -> dict[str, Any]:
    """The Gateway istiod turns into Envoy pods and a LoadBalancer Service; its infrastructure annotations are copied
    onto that Service, where the AWS Load Balancer Controller reads them (service annotations at v3.5.0)."""
    annotations = {
        "service.beta.kubernetes.io/aws-load-balancer-type": "external",
        "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
        "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
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
    namespaces = sorted({r.namespace for r in p.routes})
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": meta(p.name, p.namespace),
        "spec": {
            "gatewayClassName": GATEWAY_CLASS,
            "infrastructure": {"annotations": annotations},
            "listeners": [
                {
                    "name": p.listener,
                    "port": p.port,
                    # The NLB ends TLS: Envoy receives plain HTTP on the listener's port.
                    "protocol": "HTTP",
                    "allowedRoutes": {
                        "kinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
                        # Only the workloads' namespaces may attach routes.
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
            ],
        },
    }


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
            "configPatches": [
                {
                    "applyTo": "HTTP_FILTER",
                    "match": {
                        "context": "GATEWAY",
                        "listener": {
                            "filterChain": {"filter": {"name": "envoy.filters.network.http_connection_manager"}}
                        },
                    },
                    "patch": {
                        # First, so the header exists before Envoy matches routes and calls the endpoint picker.
                        "operation": "INSERT_FIRST",
                        "value": {
                            "name": "envoy.filters.http.ext_proc.payload-processor",
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
                        },
                    },
                }
            ],
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


def gateway_policies(p: GatewayProps) -> list[dict[str, Any]]:
    """Ingress into the gateway namespace: the NLB's ENIs to Envoy's listener, Envoy to the payload processor,
    Prometheus to both's metrics. The NLB's own security group admits only `inbound_cidrs`."""
    ns, prometheus = p.namespace, netpol.pods(netpol.PROMETHEUS_POD, p.monitoring_namespace)
    envoy = {netpol.GATEWAY_NAME_LABEL: p.name}
    return [
        netpol.default_deny(ns),
        netpol.network_policy(
            f"{p.name}-listener",
            ns,
            envoy,
            [
                netpol.rule(netpol.cidrs(p.load_balancer_cidrs), netpol.tcp(p.port)),
                netpol.rule([prometheus], netpol.tcp(GATEWAY_METRICS_PORT)),
            ],
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
