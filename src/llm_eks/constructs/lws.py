"""`LeaderWorkerSetController`: the LeaderWorkerSet controller (leaderworkerset.x-k8s.io/v1) from the pinned lws
chart, in namespace `lws-system` on the system nodes. vLLM runs a replica that spans nodes as a LeaderWorkerSet.

CRD upgrades: the chart ships its CRDs in `crds/`, which Helm installs on the first install and never upgrades. A
version bump is two steps, in this order:
  1. kubectl apply --server-side --force-conflicts \
       -f https://github.com/kubernetes-sigs/lws/releases/download/v<NEW>/manifests.yaml --selector=... (or the
     chart's crds/ from `helm pull oci://registry.k8s.io/lws/charts/lws --version <NEW> --untar`);
  2. bump LWS_CHART_VERSION in llm_eks/versions.py and deploy.
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
from llm_eks.error_codes import E310
from llm_eks.errors import ConfigError, named_errors
from llm_eks.manifests import network_policies as netpol
from llm_eks.versions import LWS_CHART_VERSION

# For an OCI repository the handler pulls the chart from `repository`; `chart` names it.
LWS_CHART = ChartSource("lws", "oci://registry.k8s.io/lws/charts/lws", LWS_CHART_VERSION)
# The released chart already points at the tag; said here too, so a chart packaged from the repository's main (tag
# `main`, pullPolicy Always) can never slip in.
MANAGER_IMAGE = MappingProxyType(
    {"repository": "registry.k8s.io/lws/lws", "tag": f"v{LWS_CHART_VERSION}", "pullPolicy": "IfNotPresent"}
)


@dataclass(frozen=True)
class LeaderWorkerSetOptions:
    """LeaderWorkerSet controller options; every default is the production-right one."""

    # The namespace upstream's installation guide uses.
    namespace: str = netpol.LWS_NAMESPACE
    # Where the API server's webhook calls come from: the control plane's ENIs in the VPC (the VPC's CIDR).
    control_plane_cidrs: tuple[str, ...] = ()
    # Two replicas: its webhooks fail closed (failurePolicy Fail) for LeaderWorkerSets and their pods, so one
    # controller pod down would stop every group from being created; leader election keeps one reconciling.
    replicas: int = 2
    placement: Placement = field(default_factory=Placement)
    # One small Deployment: one Helm wait.
    timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(5))
    # Merged over ours (addons.with_helm_values): whatever the chart offers that these options do not.
    helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def validate(self) -> None:
        check_name("lws.namespace", self.namespace, label=True)
        if not self.control_plane_cidrs:
            raise ConfigError(
                E310,
                "lws.control_plane_cidrs: () is not allowed; name the CIDRs the EKS control plane calls webhooks "
                "from (the VPC's CIDR), or its admission webhooks stay unreachable",
            )
        check_cidrs("lws.control_plane_cidrs", self.control_plane_cidrs)
        check_replicas("lws.replicas", self.replicas)
        check_helm_values("lws.helm_values", self.helm_values)


@dataclass(frozen=True, kw_only=True)
class LeaderWorkerSetProps(LeaderWorkerSetOptions):
    """`LeaderWorkerSetOptions` on one cluster (`InferenceCluster.add_leader_worker_set` fills the cluster in)."""

    cluster: eks.ICluster


class LeaderWorkerSetController(SingleChartAddon):
    """The LeaderWorkerSet controller from Helm; charts with LeaderWorkerSets must be added after it (they need its
    CRD and its webhooks)."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: LeaderWorkerSetProps) -> None:
        props.validate()  # before the namespace objects are built from it
        super().__init__(
            scope,
            id,
            source=LWS_CHART,
            release="lws",
            props=props,
            values=lws_values,
            # Restricted Pod Security, a deny-all, and the API server to the webhooks.
            namespace_objects=netpol.lws_namespace(props.namespace, props.control_plane_cidrs),
        )


def lws_values(props: LeaderWorkerSetProps) -> dict[str, Any]:
    """Helm values for lws (charts/lws/values.yaml at v0.10.0)."""
    return {
        **props.placement.values(),
        "replicaCount": props.replicas,
        "image": {"manager": dict(MANAGER_IMAGE)},
        # Upstream sets runAsNonRoot and drops every capability; the restricted Pod Security level also wants the
        # RuntimeDefault seccomp profile.
        "podSecurityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        # Upstream requests a whole CPU and 1 GiB with no limit; a few LeaderWorkerSets need far less.
        "resources": requests_limits("100m", "256Mi", memory_limit="512Mi"),
    }
