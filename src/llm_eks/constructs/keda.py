"""`Keda`: the KEDA operator, metrics API server and admission webhooks from the pinned kedacore/keda chart.

KEDA needs no AWS permissions here: the vLLM ScaledObjects use the Prometheus trigger against the in-cluster
Prometheus. The chart ships its CRDs as templates, so `helm upgrade` to a new pinned version upgrades them too.

Two metrics server replicas with a PodDisruptionBudget: the chart's own note (kedacore/charts@v2.20.2
keda/values.yaml `metricsServer.replicaCount`) says only one instance serves at a time and more "could only reduce
downtime during a failover", which is the point here: with one, the HPAs of every workload freeze while it restarts
or its node is replaced. The operator exposes its scaler metrics (`keda_scaler_detail_errors_total` and the rest,
kedacore/keda@v2.20.2 pkg/metricscollector/prommetrics.go) on port 8080 and the chart's PodMonitor scrapes them
(`prometheus.operator.podMonitor`); the PodMonitor is a prometheus-operator kind, so this release goes in after the
monitoring CRDs (`prometheus_pod_monitor`). The scraped `namespace` label (the ScaledObject's) is renamed
`exported_namespace`, as Prometheus does for a label the target also sets.
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
    SingleChartAddon,
    check_cidrs,
    check_helm_values,
    check_name,
    check_replicas,
    requests_limits,
)
from llm_eks.errors import named_errors
from llm_eks.manifests import network_policies as netpol
from llm_eks.versions import KEDA_CHART_VERSION

KEDA_CHART = ChartSource("keda", "https://kedacore.github.io/charts", KEDA_CHART_VERSION)


@dataclass(frozen=True)
class KedaOptions:
    """KEDA install options; every default is the production-right one."""

    namespace: str = netpol.KEDA_NAMESPACE
    # Where the EKS control plane's ENIs are (it calls the metrics API and the webhooks); empty: the cluster's VPC.
    control_plane_cidrs: tuple[str, ...] = ()
    # KEDA's HA guide: extra operator replicas stand by under leader election and only shorten a failover.
    operator_replicas: int = 2
    # Admission webhooks are stateless; 2 keep ScaledObject validation up while a system node drains.
    webhook_replicas: int = 2
    # One serves external.metrics.k8s.io at a time; a second shortens a failover (module docstring).
    metrics_server_replicas: int = 2
    # Scrape the operator's scaler metrics with the chart's PodMonitor (needs the prometheus-operator CRDs first).
    prometheus_pod_monitor: bool = True
    # Where Prometheus runs, which scrapes the operator's metrics port.
    monitoring_namespace: str = netpol.MONITORING_NAMESPACE
    placement: Placement = field(default_factory=Placement)
    # Three small Deployments and the CRDs: well inside 5 minutes; no hook Jobs, so one Helm wait.
    timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(5))
    # Merged over ours (addons.with_helm_values): whatever the chart offers that these options do not.
    helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def validate(self) -> None:
        check_name("keda.namespace", self.namespace, label=True)
        check_cidrs("keda.control_plane_cidrs", self.control_plane_cidrs)
        check_replicas("keda.operator_replicas", self.operator_replicas)
        check_replicas("keda.webhook_replicas", self.webhook_replicas)
        check_replicas("keda.metrics_server_replicas", self.metrics_server_replicas)
        check_name("keda.monitoring_namespace", self.monitoring_namespace, label=True)
        check_helm_values("keda.helm_values", self.helm_values)


@dataclass(frozen=True, kw_only=True)
class KedaProps(KedaOptions):
    """`KedaOptions` on one cluster (`InferenceCluster.add_keda` fills the cluster in)."""

    cluster: eks.ICluster


class Keda(SingleChartAddon):
    """KEDA from Helm in its own namespace, pinned to the system nodes."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: KedaProps) -> None:
        props.validate()  # before the namespace objects are built from it
        super().__init__(
            scope,
            id,
            source=KEDA_CHART,
            release="keda",
            props=props,
            values=keda_values,
            # Restricted Pod Security, and the API server's calls to the metrics API and webhooks only.
            namespace_objects=netpol.keda_namespace(
                props.namespace,
                props.control_plane_cidrs or (props.cluster.vpc.vpc_cidr_block,),
                monitoring_namespace=props.monitoring_namespace if props.prometheus_pod_monitor else None,
            ),
        )


def _spread(app: str) -> list[dict[str, Any]]:
    """Replicas in different zones where possible: losing one AZ must not take every replica."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": app}},
        }
    ]


def keda_values(props: KedaProps) -> dict[str, Any]:
    """Helm values for kedacore/keda."""
    placement = props.placement.values()
    return {
        # One global selector/tolerations: the chart applies them to operator, metrics server and webhooks.
        **placement,
        "crds": {"install": True},
        "operator": {"replicaCount": props.operator_replicas},
        "metricsServer": {"replicaCount": props.metrics_server_replicas},
        "webhooks": {"replicaCount": props.webhook_replicas},
        # The operator's scaler metrics (errors per trigger, empty answers, latency), for the scaler-error alert.
        "prometheus": {
            "operator": {
                "enabled": props.prometheus_pod_monitor,
                "podMonitor": {"enabled": props.prometheus_pod_monitor},
            }
        },
        "resources": {
            "operator": requests_limits("100m", "128Mi", memory_limit="512Mi"),
            "metricServer": requests_limits("100m", "128Mi", memory_limit="512Mi"),
            "webhooks": requests_limits("50m", "64Mi", memory_limit="256Mi"),
        },
        "topologySpreadConstraints": {
            "operator": _spread("keda-operator"),
            "metricsServer": _spread("keda-operator-metrics-apiserver"),
            "webhooks": _spread("keda-admission-webhooks"),
        },
        # A PDB on a single-replica Deployment would block node drains, so only the replicated parts get one.
        "podDisruptionBudget": {
            "operator": {"minAvailable": 1} if props.operator_replicas > 1 else {},
            "metricServer": {"minAvailable": 1} if props.metrics_server_replicas > 1 else {},
            "webhooks": {"minAvailable": 1} if props.webhook_replicas > 1 else {},
        },
    }
