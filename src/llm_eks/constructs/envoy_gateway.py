"""`EnvoyGateway`: Envoy Gateway (the Gateway API controller of the inference gateway), with Envoy AI Gateway as its
extension (body-based model routing, token costs, InferencePool backends) and the rate-limit counters' Valkey,
from the pinned charts, on the system nodes.

Three parts, in this order:
  1. the namespaces (restricted Pod Security, default-deny and the flows of manifests/gateway/platform.py) and the
     Valkey that holds the global rate-limit counters (Envoy Gateway deploys the rate-limit service, not its store);
  2. `eg` (chart gateway-helm) in `envoy-gateway-system`: the controller, in GatewayNamespace mode (each Gateway's
     Envoy Deployment, Service and PDB live in the Gateway's own namespace, where its Pod Security and admission
     rules apply), its rate-limit service on Valkey (failing open: a store outage must not become a gateway outage),
     and the AI Gateway as extension server. Its CRDs come from `PinnedCrds` (`crds.enabled: false`): Helm never
     upgrades a chart's crds/, and that subchart also carries the Gateway API experimental channel;
  3. `aieg` (chart ai-gateway-helm) in `envoy-ai-gateway-system`: the controller (AIGatewayRoute -> HTTPRoute, the
     extension server, and a mutating webhook that adds its external processor to the Envoy pods of every Gateway
     an AI route names).

Whatever creates Gateways of this controller, AIGatewayRoutes or Envoy Gateway policies must come after it and after
the CRDs (`crds.ENVOY_GATEWAY_CRDS`, `AI_GATEWAY_CRDS`, `GATEWAY_API_CRDS`, `INFERENCE_POOL_CRD`, `LLMD_CRDS`), which
must exist before the controllers start: both discover their kinds once at start.

Sources (read at the pinned tags; versions.py): envoyproxy/gateway v1.9.0 charts/gateway-helm/values.tmpl.yaml and
templates (the EnvoyGateway config is the chart's `config.envoyGateway`, merged over the chart's own by sprig
`merge`, templates/envoy-gateway-config.yaml), api/v1alpha1/envoygateway_types.go (provider.kubernetes.deploy,
watch, rateLimitDeployment, rateLimitPDB; rateLimit.backend.redis.url, failClosed; extensionManager hooks, service,
backendResources, failOpen default false); envoyproxy/ai-gateway v1.1.0 manifests/envoy-gateway-values.yaml and
examples/inference-pool/envoy-gateway-values-addon.yaml (the extension manager block), manifests/charts/
ai-gateway-helm/values.yaml; envoyproxy/ratelimit src/settings/settings.go (LIMIT_RESPONSE_HEADERS_ENABLED,
LIMIT_RESET_HEADER: the reset header carries the seconds until the window ends, src/service/ratelimit.go).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from llm_eks.constructs.addons import (
    ChartSource,
    Placement,
    addon_namespace,
    check_cidrs,
    check_helm_values,
    check_name,
    check_replicas,
    install_chart,
    requests_limits,
    with_helm_values,
)
from llm_eks.error_codes import E310
from llm_eks.errors import fail, named_errors
from llm_eks.images.charts import IMAGE_DIGESTS_CONTEXT
from llm_eks.images.lock import check_digests, pin
from llm_eks.manifests.gateway import platform
from llm_eks.manifests.labels import PART_OF
from llm_eks.versions import AI_GATEWAY_VERSION, ENVOY_GATEWAY_VERSION, VALKEY_IMAGE

ENVOY_GATEWAY_CHART = ChartSource("gateway-helm", "oci://docker.io/envoyproxy/gateway-helm", ENVOY_GATEWAY_VERSION)
AI_GATEWAY_CHART = ChartSource("ai-gateway-helm", "oci://docker.io/envoyproxy/ai-gateway-helm", AI_GATEWAY_VERSION)
# The controller name Gateways of this controller's GatewayClass carry (the chart's default).
CONTROLLER_NAME = "gateway.envoyproxy.io/gatewayclass-controller"
# Envoy Gateway watches only namespaces with this label (every namespace llm-eks creates carries it): a Gateway,
# route or policy anywhere else is not reconciled.
WATCH_LABEL = ("app.kubernetes.io/part-of", PART_OF)


@dataclass(frozen=True)
class EnvoyGatewayOptions:
    """Envoy Gateway + AI Gateway options; every default is the production-right one."""

    namespace: str = platform.ENVOY_GATEWAY_NAMESPACE
    ai_gateway_namespace: str = platform.AI_GATEWAY_NAMESPACE
    # Where the API server calls webhooks from (the AI Gateway's pod mutator): the control plane's ENIs in the VPC.
    control_plane_cidrs: tuple[str, ...] = ()
    # Namespaces whose Envoy pods may open xDS and rate-limit calls; empty: Envoy pods in any watched namespace.
    gateway_namespaces: tuple[str, ...] = ()
    # Two controllers under leader election: a running Envoy keeps its configuration when the controller is gone, but
    # a new Envoy pod gets none and no policy change lands; one system-node drain must not do that.
    replicas: int = 2
    # The AI Gateway controller is on every path of a change (extension server) and of a new Envoy pod (its mutating
    # webhook fails closed): two, leader-elected, with a PDB.
    ai_gateway_replicas: int = 2
    # The rate-limit service: two, so one drained node does not lift every limit (it fails open).
    ratelimit_replicas: int = 2
    # Valkey's memory for counters: each counter is a few dozen bytes per (tenant, model, window).
    counter_store_mib: int = 256
    # Request headers the AI Gateway copies into its gen_ai.* metric attributes (header -> attribute), e.g. the
    # authenticated tenant. Only headers the gateway itself sets belong here: a client's value would be a label.
    metrics_request_headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    placement: Placement = field(default_factory=Placement)
    # Envoy Gateway: the certgen hook Job, then the controller rollout = 2 Helm waits of 5 minutes, plus setup.
    timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(5))
    # AI Gateway: one Deployment, no hooks.
    ai_gateway_timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(5))
    # Merged over ours (addons.with_helm_values): whatever each chart offers that these options do not.
    helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    ai_gateway_helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def validate(self) -> None:
        check_name("envoy_gateway.namespace", self.namespace, label=True)
        check_name("envoy_gateway.ai_gateway_namespace", self.ai_gateway_namespace, label=True)
        if not self.control_plane_cidrs:
            raise fail(
                E310,
                "envoy_gateway.control_plane_cidrs",
                (),
                "name the CIDRs the EKS control plane calls webhooks from (the VPC's CIDR), or the AI Gateway's pod "
                "webhook stays unreachable and no Envoy pod starts",
            )
        check_cidrs("envoy_gateway.control_plane_cidrs", self.control_plane_cidrs)
        for i, ns in enumerate(self.gateway_namespaces):
            check_name(f"envoy_gateway.gateway_namespaces[{i}]", ns, label=True)
        check_replicas("envoy_gateway.replicas", self.replicas)
        check_replicas("envoy_gateway.ai_gateway_replicas", self.ai_gateway_replicas)
        check_replicas("envoy_gateway.ratelimit_replicas", self.ratelimit_replicas)
        if not 64 <= self.counter_store_mib <= 8192:
            raise fail(E310, "envoy_gateway.counter_store_mib", self.counter_store_mib, "must be 64 to 8192 (MiB)")
        for header, attribute in self.metrics_request_headers.items():
            for value in (header, attribute):
                if not value or any(c in value for c in ",: ") or value != value.strip():
                    raise fail(
                        E310,
                        "envoy_gateway.metrics_request_headers",
                        dict(self.metrics_request_headers),
                        "header and attribute names must be non-empty, without ',', ':' or spaces",
                    )
        check_helm_values("envoy_gateway.helm_values", self.helm_values)
        check_helm_values("envoy_gateway.ai_gateway_helm_values", self.ai_gateway_helm_values)


@dataclass(frozen=True, kw_only=True)
class EnvoyGatewayProps(EnvoyGatewayOptions):
    """`EnvoyGatewayOptions` on one cluster."""

    cluster: eks.ICluster


class EnvoyGateway(Construct):
    """The namespaces and counter store, then `eg`, then `aieg` (Envoy Gateway calls the AI Gateway's extension
    server and fails closed without it, so both must be up before any Gateway is programmed).

    `namespace_objects` lists the plain Kubernetes objects applied outside Helm, for the review output.
    """

    @named_errors
    def __init__(self, scope: Construct, id: str, props: EnvoyGatewayProps) -> None:
        props.validate()
        super().__init__(scope, id)
        cluster = props.cluster
        self.namespace = props.namespace
        self.controller_name = CONTROLLER_NAME
        self.namespace_objects = [
            *platform.envoy_gateway_namespace(props.namespace, gateway_namespaces=props.gateway_namespaces),
            *platform.ai_gateway_namespace(
                props.ai_gateway_namespace, props.control_plane_cidrs, envoy_gateway_namespace=props.namespace
            ),
            *platform.counter_store(
                props.namespace,
                # Pinned by digest where the app's lock holds one (the context install_chart reads too).
                image=pin(VALKEY_IMAGE, check_digests(self.node.try_get_context(IMAGE_DIGESTS_CONTEXT) or {}, "")),
                max_memory_mib=props.counter_store_mib,
                node_selector=props.placement.node_selector,
                tolerations=props.placement.tolerations,
            ),
        ]
        self.namespace_manifest = addon_namespace(self, "Namespace", cluster=cluster, objects=self.namespace_objects)
        self.chart = install_chart(
            self,
            "EnvoyGateway",
            cluster=cluster,
            source=ENVOY_GATEWAY_CHART,
            release=platform.ENVOY_GATEWAY_RELEASE,
            namespace=props.namespace,
            values=with_helm_values(envoy_gateway_values(props), props.helm_values),
            timeout=props.timeout,
            waits=2,
            create_namespace=False,
            skip_crds=True,
        )
        self.chart.node.add_dependency(self.namespace_manifest)
        self.ai_gateway = install_chart(
            self,
            "AiGateway",
            cluster=cluster,
            source=AI_GATEWAY_CHART,
            release=platform.AI_GATEWAY_RELEASE,
            namespace=props.ai_gateway_namespace,
            values=with_helm_values(ai_gateway_values(props), props.ai_gateway_helm_values),
            timeout=props.ai_gateway_timeout,
            create_namespace=False,
        )
        # Its ClusterRole binds Envoy Gateway's ServiceAccount (InferencePool reads); and its extension server is on
        # the path of every translation Envoy Gateway makes.
        self.ai_gateway.node.add_dependency(self.chart, self.namespace_manifest)


def _spread(labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """Replicas in different zones where possible: losing one AZ must not take every replica."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": dict(labels)},
        }
    ]


def _pod(props: EnvoyGatewayOptions, labels: Mapping[str, str]) -> dict[str, Any]:
    placement = props.placement.values()
    return {**placement, "topologySpreadConstraints": _spread(labels)}


def envoy_gateway_values(props: EnvoyGatewayOptions) -> dict[str, Any]:
    """Helm values for gateway-helm (values.tmpl.yaml at v1.9.0: certgen.job.nodeSelector/tolerations read by
    templates/certgen.yaml)."""
    key, value = WATCH_LABEL
    placement = props.placement.values()
    return {
        "crds": {"enabled": False},
        # Zone labels on Envoy pods for zone-aware routing, through a webhook on pods/binding: nothing here uses it,
        # and a webhook less is one call less on every pod start.
        "topologyInjector": {"enabled": False},
        "deployment": {
            "replicas": props.replicas,
            "pod": _pod(props, platform.ENVOY_GATEWAY_POD),
            "envoyGateway": {"resources": requests_limits("100m", "256Mi", memory_limit="1024Mi")},
        },
        "podDisruptionBudget": {"minAvailable": 1} if props.replicas > 1 else {"minAvailable": 0},
        # The certgen hook Job lands on any untainted node by itself; where the system nodes are tainted (EKS Auto
        # Mode's system pool) it goes there too, not onto a node the workloads' pools would launch for it.
        **({"certgen": {"job": placement}} if props.placement.tolerations else {}),
        "config": {
            "envoyGateway": {
                "gateway": {"controllerName": CONTROLLER_NAME},
                "provider": {
                    "type": "Kubernetes",
                    "kubernetes": {
                        # Each Gateway's Envoy Deployment, Service and PDB in the Gateway's own namespace.
                        "deploy": {"type": "GatewayNamespace"},
                        "watch": {"type": "NamespaceSelector", "namespaceSelector": {"matchLabels": {key: value}}},
                        "rateLimitDeployment": {
                            "replicas": props.ratelimit_replicas,
                            "pod": _pod(props, platform.RATELIMIT_POD),
                            "container": {
                                # Merged by name into the env Envoy Gateway renders (resource.go): the service adds
                                # RateLimit-Limit/-Remaining and Retry-After (seconds to the window's end) to its
                                # answers, which Envoy copies into the 429.
                                "env": [
                                    {"name": "LIMIT_RESPONSE_HEADERS_ENABLED", "value": "true"},
                                    {"name": "LIMIT_RESET_HEADER", "value": "Retry-After"},
                                ],
                                "resources": requests_limits("100m", "128Mi", memory_limit="512Mi"),
                            },
                        },
                        **({"rateLimitPDB": {"minAvailable": 1}} if props.ratelimit_replicas > 1 else {}),
                    },
                },
                # AI Gateway's AIServiceBackend needs Envoy Gateway's Backend (a Ray Serve Service by name).
                "extensionApis": {"enableBackend": True},
                "rateLimit": {
                    "backend": {"type": "Redis", "redis": {"url": platform.valkey_url(props.namespace)}},
                    # A counter store outage lets traffic through unlimited (and alerts) instead of refusing it all.
                    "failClosed": False,
                },
                "extensionManager": {
                    "hooks": {
                        "xdsTranslator": {
                            "translation": {
                                kind: {"includeAll": True} for kind in ("listener", "route", "cluster", "secret")
                            },
                            "post": ["Translation", "Cluster", "Route"],
                        }
                    },
                    "service": {
                        "fqdn": {
                            "hostname": (
                                f"{platform.AI_GATEWAY_CONTROLLER}.{props.ai_gateway_namespace}.svc.cluster.local"
                            ),
                            "port": platform.AI_GATEWAY_EXTENSION_PORT,
                        }
                    },
                    "backendResources": [
                        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "version": "v1"}
                    ],
                    # failOpen stays false (the default): an extension error keeps the last good configuration
                    # instead of programming Envoy without AI Gateway's filters.
                },
            }
        },
    }


def ai_gateway_values(props: EnvoyGatewayOptions) -> dict[str, Any]:
    """Helm values for ai-gateway-helm (values.yaml at v1.1.0)."""
    placement = props.placement.values()
    controller: dict[str, Any] = {
        "replicaCount": props.ai_gateway_replicas,
        "leaderElection": {"enabled": True},
        "podDisruptionBudget": {"enabled": props.ai_gateway_replicas > 1, "minAvailable": 1},
        "nodeSelector": placement["nodeSelector"],
        "tolerations": placement["tolerations"],
        "topologySpreadConstraints": _spread(platform.AI_GATEWAY_POD),
        "resources": requests_limits("100m", "256Mi", memory_limit="1Gi"),
    }
    if props.metrics_request_headers:
        controller["metricsRequestHeaderAttributes"] = ",".join(
            f"{header}:{attribute}" for header, attribute in props.metrics_request_headers.items()
        )
    return {
        "controller": controller,
        "envoyGateway": {"namespace": props.namespace},
        # Never debug in production: the external processor then logs request bodies.
        "extProc": {"logLevel": "info"},
    }
