"""`KubeRayOperator`: the KubeRay operator (ray.io/v1 RayCluster, RayJob, RayService) from the pinned
kuberay-operator chart, in namespace `kuberay-system` on the system nodes.

CRD upgrades: KubeRay publishes no separate CRD chart (ray-project/kuberay's helm-chart/ holds only kuberay-operator,
kuberay-apiserver and ray-cluster); kuberay-operator ships its CRDs in `crds/`, which Helm installs on the first
install and never upgrades. The four CRDs are ~4 MB, too large to pass through CloudFormation as a manifest. So a
KubeRay version bump is two steps, in this order:
  1. kubectl apply --server-side --force-conflicts \
       -k "github.com/ray-project/kuberay/ray-operator/config/crd?ref=v<NEW>"
     (server-side: client-side apply overflows the 256 KiB last-applied annotation on these CRDs);
  2. bump KUBERAY_OPERATOR_CHART_VERSION in llm_eks/versions.py and deploy.
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
    check_helm_values,
    check_name,
    check_replicas,
    requests_limits,
)
from llm_eks.errors import named_errors
from llm_eks.manifests import network_policies as netpol
from llm_eks.versions import KUBERAY_OPERATOR_CHART_VERSION

KUBERAY_OPERATOR_CHART = ChartSource(
    "kuberay-operator", "https://ray-project.github.io/kuberay-helm/", KUBERAY_OPERATOR_CHART_VERSION
)


@dataclass(frozen=True)
class KubeRayOperatorOptions:
    """KubeRay operator options; every default is the production-right one."""

    # Upstream has no fixed namespace (its kustomize uses `default`); its own namespace keeps RBAC reviewable.
    namespace: str = netpol.KUBERAY_NAMESPACE
    # One replica: the chart's Deployment uses the Recreate strategy, so a standby buys little, and an operator
    # outage only pauses reconciliation (running RayServices keep serving).
    replicas: int = 1
    placement: Placement = field(default_factory=Placement)
    # One small Deployment, no hook Jobs: one Helm wait.
    timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(5))
    # Merged over ours (addons.with_helm_values): whatever the chart offers that these options do not.
    helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def validate(self) -> None:
        check_name("kuberay.namespace", self.namespace, label=True)
        check_replicas("kuberay.replicas", self.replicas)
        check_helm_values("kuberay.helm_values", self.helm_values)


@dataclass(frozen=True, kw_only=True)
class KubeRayOperatorProps(KubeRayOperatorOptions):
    """`KubeRayOperatorOptions` on one cluster (`InferenceCluster.add_kuberay` fills the cluster in)."""

    cluster: eks.ICluster


class KubeRayOperator(SingleChartAddon):
    """The KubeRay operator from Helm; RayService charts must be added after it (they need its CRDs)."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: KubeRayOperatorProps) -> None:
        props.validate()  # before the namespace objects are built from it
        super().__init__(
            scope,
            id,
            source=KUBERAY_OPERATOR_CHART,
            release="kuberay-operator",
            props=props,
            values=kuberay_operator_values,
            # Restricted Pod Security, and a deny-all: the operator only makes outgoing calls.
            namespace_objects=netpol.kuberay_namespace(props.namespace),
        )


def kuberay_operator_values(props: KubeRayOperatorProps) -> dict[str, Any]:
    """Helm values for kuberay-operator."""
    return {
        **props.placement.values(),
        "replicas": props.replicas,
        # With more than one replica only the leader reconciles.
        "leaderElectionEnabled": True,
        # Upstream's 100m CPU limit throttles the operator while it reconciles a large RayService; the memory limit
        # stays at upstream's (about 500 MiB per 500 Ray pods).
        "resources": requests_limits("100m", "256Mi", memory_limit="512Mi"),
    }
