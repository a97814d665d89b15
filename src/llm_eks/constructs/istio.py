"""`IstioGateway`: Istio's control plane, istiod, as the Gateway API controller of the inference gateway, from the
pinned `base` and `istiod` charts in namespace `istio-system` on the system nodes. No sidecars, no mesh: istiod
watches Gateways of class `istio`, HTTPRoutes and InferencePools, deploys one Envoy Deployment and Service per Gateway
(in the Gateway's namespace) and serves it its configuration (xDS) and certificates.

Two releases, same version, in this order:
  1. `istio-base` (chart `base`): Istio's CRDs (EnvoyFilter, DestinationRule and 13 more), the default-revision
     validating webhook and the istio-reader service account. No Gateway API CRDs: those come separately.
  2. `istiod` (chart `istiod`): the Deployment, its Service, RBAC, the mesh and injector ConfigMaps, the
     GatewayClass defaults and the validating webhook of the `default` revision.

CRD upgrades: at 1.30.3 `base` renders its CRDs from templates (`base.enableCRDTemplates: true`, the default;
templates/crds.yaml), not from `crds/`, so they are ordinary release objects: `helm upgrade` to a new pinned version
upgrades them, before istiod (which depends on `istio-base`). A version bump is one line: ISTIO_CHART_VERSION in
llm_eks/versions.py (Istio upgrades in place one minor version at a time). The CRDs carry
`helm.sh/resource-policy: keep`: deleting the release leaves them (and every Istio object) in the cluster.

The Gateway API and InferencePool CRDs need not exist before istiod: it starts and becomes ready without them, and
its Gateway controllers start when the CRDs appear (pkg/kube/kclient/crdwatcher.go WaitForCRD,
pilot/pkg/bootstrap/configcontroller.go). What creates Gateways, HTTPRoutes, InferencePools and EnvoyFilters must
come after this construct and after those CRDs.
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
from llm_eks.errors import ConfigError, named_errors
from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.gateway.props import GATEWAY_CLASS
from llm_eks.versions import ISTIO_CHART_VERSION

ISTIO_REPOSITORY = "https://istio-release.storage.googleapis.com/charts"
ISTIO_BASE_CHART = ChartSource("base", ISTIO_REPOSITORY, ISTIO_CHART_VERSION)
ISTIOD_CHART = ChartSource("istiod", ISTIO_REPOSITORY, ISTIO_CHART_VERSION)
# The chart sources say `hub: registry.istio.io/testing`, `tag: latest`; the release rewrites them to these. Said here
# so the images never depend on that rewrite: docker.io/istio/pilot:<v> (istiod), docker.io/istio/proxyv2:<v>
# (the gateways' Envoy).
ISTIO_HUB = "docker.io/istio"
# The istiod env variables that must never be set (see istiod_values).
FORBIDDEN_ENV = ("PILOT_ENABLE_ALPHA_GATEWAY_API",)
MAX_GATEWAY_REPLICAS = 20


@dataclass(frozen=True)
class IstioGatewayOptions:
    """Istio (Gateway API controller only) options; every default is the production-right one."""

    # The namespace Istio's charts and docs assume (global.istioNamespace is set to match if you change it).
    namespace: str = netpol.ISTIO_NAMESPACE
    # Where the API server's webhook calls come from: the control plane's ENIs in the VPC (the VPC's CIDR).
    control_plane_cidrs: tuple[str, ...] = ()
    # Namespaces whose Gateway pods may open xDS to istiod; empty: Gateway pods in any namespace. xDS is mTLS and
    # istiod authenticates each proxy by its service account token, so this only narrows who can try.
    gateway_namespaces: tuple[str, ...] = ()
    # Two istiod replicas, fixed (no HPA: the cluster runs no metrics-server, so an HPA would never scale). A
    # running gateway keeps its last configuration when istiod is gone, but a gateway pod that starts (scale-up,
    # node replacement) gets no configuration and no certificate, EnvoyFilter/DestinationRule writes fail (istiod
    # flips its validating webhooks to failurePolicy Fail once ready) and InferencePool changes stop reaching the
    # gateways. One system-node drain must not do that; the chart adds a PDB (minAvailable 1) at 2 replicas.
    replicas: int = 2
    # Every Gateway of class `istio` gets this many Envoy pods, and with more than one a PDB (minAvailable 1): the
    # inference endpoint survives a node drain. A Gateway's own parametersRef ConfigMap can override it.
    gateway_replicas: int = 2
    placement: Placement = field(default_factory=Placement)
    # istiod: one Deployment, one Helm wait (the charts have no hook Jobs).
    timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(5))
    # base: CRDs, a webhook configuration and a service account; no pods to wait for.
    base_timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(3))
    # Merged over our istiod values (addons.with_helm_values): whatever the chart offers that these options do not.
    helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def validate(self) -> None:
        check_name("istio.namespace", self.namespace, label=True)
        if not self.control_plane_cidrs:
            raise ConfigError(
                "istio.control_plane_cidrs: () is not allowed; name the CIDRs the EKS control plane calls webhooks "
                "from (the VPC's CIDR), or istiod's validating webhooks stay unreachable"
            )
        check_cidrs("istio.control_plane_cidrs", self.control_plane_cidrs)
        for i, ns in enumerate(self.gateway_namespaces):
            check_name(f"istio.gateway_namespaces[{i}]", ns, label=True)
        check_replicas("istio.replicas", self.replicas)
        if not 1 <= self.gateway_replicas <= MAX_GATEWAY_REPLICAS:
            raise ConfigError(
                f"istio.gateway_replicas: {self.gateway_replicas} is not allowed; must be between 1 and "
                f"{MAX_GATEWAY_REPLICAS}"
            )
        check_helm_values("istio.helm_values", self.helm_values)
        for path in ("env", "pilot.env"):
            env = _at(self.helm_values, path)
            for name in FORBIDDEN_ENV:
                if isinstance(env, Mapping) and name in env:
                    raise ConfigError(
                        f"istio.helm_values.{path}.{name}: {env[name]!r} is not allowed; leave it unset: with the "
                        "Gateway API standard CRDs istiod 1.30 would wait forever for v1alpha2 TCPRoute/UDPRoute"
                    )


def _at(values: Mapping[str, Any], path: str) -> Any:
    node: Any = values
    for key in path.split("."):
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


@dataclass(frozen=True, kw_only=True)
class IstioGatewayProps(IstioGatewayOptions):
    """`IstioGatewayOptions` on one cluster."""

    cluster: eks.ICluster


class IstioGateway(Construct):
    """The namespace objects, then `istio-base`, then `istiod`. Whatever creates Gateways (class `istio`),
    HTTPRoutes, InferencePools, EnvoyFilters or DestinationRules must be added after it (Istio's CRDs and webhooks).

    `namespace_objects` lists the plain Kubernetes objects applied outside Helm, for the review output.
    """

    @named_errors
    def __init__(self, scope: Construct, id: str, props: IstioGatewayProps) -> None:
        props.validate()
        super().__init__(scope, id)
        cluster = props.cluster
        self.namespace = props.namespace
        self.gateway_class = GATEWAY_CLASS
        # Restricted Pod Security, a deny-all, and istiod's three callers: gateway pods, the API server, Prometheus.
        self.namespace_objects = netpol.istio_namespace(
            props.namespace, props.control_plane_cidrs, gateway_namespaces=props.gateway_namespaces
        )
        self.namespace_manifest = addon_namespace(self, "Namespace", cluster=cluster, objects=self.namespace_objects)
        self.base = install_chart(
            self,
            "Base",
            cluster=cluster,
            source=ISTIO_BASE_CHART,
            release="istio-base",
            namespace=props.namespace,
            values=base_values(props),
            timeout=props.base_timeout,
            create_namespace=False,
        )
        self.base.node.add_dependency(self.namespace_manifest)
        self.chart = install_chart(
            self,
            "Istiod",
            cluster=cluster,
            source=ISTIOD_CHART,
            release="istiod",
            namespace=props.namespace,
            values=with_helm_values(istiod_values(props), props.helm_values),
            timeout=props.timeout,
            create_namespace=False,
        )
        # istiod watches (and its webhooks validate) the kinds whose CRDs `base` installs.
        self.chart.node.add_dependency(self.base, self.namespace_manifest)


def base_values(props: IstioGatewayOptions) -> dict[str, Any]:
    """Helm values for base (manifests/charts/base/values.yaml at 1.30.3): the chart's defaults (every CRD, none of
    `base.excludedCRDs`; `defaultRevision: default`, whose validating webhook starts failurePolicy Ignore and is
    flipped to Fail by istiod), with the namespace that webhook calls istiod in."""
    return {"global": {"istioNamespace": props.namespace}}


def istiod_values(props: IstioGatewayOptions) -> dict[str, Any]:
    """Helm values for istiod (manifests/charts/istio-control/istio-discovery/values.yaml at 1.30.3). The chart
    takes its values at the top level (`pilot.*` is merged over them by templates/zzy_descope_legacy.yaml)."""
    gateway_class: dict[str, Any] = {"deployment": {"spec": {"replicas": props.gateway_replicas}}}
    if props.gateway_replicas > 1:
        # istiod renders a gateway PDB only when the class defaults provide one (deploymentcontroller.go); on a
        # single replica it would block every node drain.
        gateway_class["podDisruptionBudget"] = {"spec": {"minAvailable": 1}}
    return {
        # Top-level nodeSelector/tolerations (templates/deployment.yaml); the chart adds its own
        # cni.istio.io/not-ready toleration before ours.
        **props.placement.values(),
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": dict(netpol.ISTIOD_POD)},
            }
        ],
        "global": {
            "hub": ISTIO_HUB,
            "tag": ISTIO_CHART_VERSION,
            "istioNamespace": props.namespace,
            # No MutatingWebhookConfiguration (this is the only value that leaves it out of the chart): nothing here
            # runs sidecars, so no pod anywhere gets one by a label. The injector ConfigMap and istiod's injector
            # stay: istiod renders each Gateway's Deployment from their `kube-gateway` template and values.
            "operatorManageWebhooks": True,
        },
        "autoscaleEnabled": False,
        "replicaCount": props.replicas,
        # Upstream requests 500m / 2 GiB for a mesh; the controller of a few Gateways needs far less. GOMAXPROCS
        # follows limits.cpu.
        "resources": requests_limits("250m", "512Mi", cpu_limit="2", memory_limit="2Gi"),
        # Upstream leaves seccomp unset: istiod then fails Pod Security `restricted` (everything else passes).
        "seccompProfile": {"type": "RuntimeDefault"},
        "env": {
            # Off by default (pilot/pkg/features/experimental.go): routes to InferencePools need it.
            "ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "true",
            # On by default (pilot/pkg/features/pilot.go): a policy with a workload selector would also bind the
            # Gateway API gateways. Ours attach by targetRefs only, so nothing else can weaken them that way.
            "ENABLE_SELECTOR_BASED_K8S_GATEWAY_POLICY": "false",
            # Never PILOT_ENABLE_ALPHA_GATEWAY_API (validate() refuses it): with it istiod 1.30 watches TCPRoute and
            # UDPRoute at v1alpha2, which the Gateway API v1.6 standard CRDs no longer serve; the CRD watcher keys
            # on the CRD name, so that informer would never sync.
        },
        "gateways": {
            # The generated gateway pods: with it they pass Pod Security `restricted` (kube-gateway.yaml). Leave
            # gateways.securityContext unset: setting it replaces the pod securityContext, seccomp and the
            # unprivileged-port sysctl included.
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        # Defaults for every Gateway of class `istio`: ConfigMap istio-default-gatewayclass-istio, strategic-merge
        # patched over each generated Deployment and PDB.
        "gatewayClasses": {GATEWAY_CLASS: gateway_class},
        # Telemetry v2 stays on (the chart's default): the gateway's Envoy exports istio_requests_total and friends.
    }
