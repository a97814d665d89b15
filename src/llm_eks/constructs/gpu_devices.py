"""`GpuDeviceSoftware`: the node software that turns accelerators into schedulable resources, via Helm, pinned.

- NVIDIA device plugin (advertises `nvidia.com/gpu`), only where the AMI does not already run it. Bottlerocket's
  NVIDIA variant runs the device plugin as a host service; a second copy from a DaemonSet double-advertises the
  GPUs and breaks CUDA in pods (bottlerocket-os/bottlerocket#4309). So the chart is installed only for AL2023, and
  even then its affinity excludes nodes labelled `llm-eks.io/ami-family=bottlerocket`.
- DCGM exporter (GPU metrics) on every NVIDIA node, AMI regardless; its ServiceMonitor stays off unless asked
  because the observability construct owns scraping.
- Neuron device plugin (advertises `aws.amazon.com/neuron`/`neuroncore`) for inf2/trn pools, from AWS's
  neuron-helm-chart with only the device plugin enabled. Bottlerocket ships the Neuron driver but not the plugin.
- EFA device plugin (advertises `vpc.amazonaws.com/efa`) on the nodes of EFA pools only, from AWS's eks-charts. EKS's
  AL2023 and Bottlerocket AMIs carry EFA's host components but not the plugin ("you must install the device plugin
  on the cluster separately", EKS user guide, device-management-efa); without it a pod requesting EFA never runs.

On EKS Auto Mode (`managed_device_plugins`) the nodes run the NVIDIA and Neuron device plugins themselves ("EKS
Auto Mode includes the NVIDIA device plugin for Kubernetes. This plugin runs automatically and isn't visible as a
daemon set", EKS User Guide, auto-accelerated; "You do not need to install the Neuron Device Plugin on EKS Auto Mode
nodes", automode-learn-instances), so neither is installed; the DCGM exporter (metrics) and the EFA device plugin
("EKS Compute: EKS Auto Mode, Karpenter, ...", device-management-efa) still are. The Neuron scheduler extension
depends on the Neuron chart's device plugin and is refused there.

Every DaemonSet selects the `llm-eks.io/accelerator` label the node pools put on their nodes and tolerates the
pool's taint, so nothing lands on system or CPU nodes. Each release waits for readiness with a timeout well inside
the kubectl Lambda's 15-minute life (a DaemonSet with no GPU node yet is ready at once).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from llm_eks.constructs.addons import (
    ChartSource,
    addon_namespace,
    check_helm_values,
    install_chart,
    with_helm_values,
)
from llm_eks.error_codes import E311
from llm_eks.errors import ConfigError, fail, named_errors
from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.node_pools import (
    ACCELERATOR_RESOURCE,
    AMI_FAMILIES,
    BOTTLEROCKET,
    DEFAULT_AMI_FAMILY,
    LABEL_ACCELERATOR,
    LABEL_AMI_FAMILY,
    LABEL_EFA,
    NEURON,
    NVIDIA,
    NodePoolsProps,
)
from llm_eks.planner.compute_mode import AUTO_MODE
from llm_eks.versions import (
    DCGM_EXPORTER_CHART_VERSION,
    EFA_DEVICE_PLUGIN_CHART_VERSION,
    NEURON_HELM_CHART_VERSION,
    NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
)

NVIDIA_DEVICE_PLUGIN_CHART = ChartSource(
    "nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", NVIDIA_DEVICE_PLUGIN_CHART_VERSION
)
DCGM_EXPORTER_CHART = ChartSource(
    "dcgm-exporter", "https://nvidia.github.io/dcgm-exporter/helm-charts", DCGM_EXPORTER_CHART_VERSION
)
EFA_DEVICE_PLUGIN_CHART = ChartSource(
    "aws-efa-k8s-device-plugin", "https://aws.github.io/eks-charts", EFA_DEVICE_PLUGIN_CHART_VERSION
)
# For an OCI repository the handler pulls the chart from `repository`; `chart` names it.
NEURON_HELM_CHART = ChartSource(
    "neuron-helm-chart", "oci://public.ecr.aws/neuron/neuron-helm-chart", NEURON_HELM_CHART_VERSION
)

# Dedicated namespaces: GPU node software is easy to find and never mixed with kube-system.
NVIDIA_NAMESPACE = netpol.NVIDIA_NAMESPACE
NEURON_NAMESPACE = netpol.NEURON_NAMESPACE
# Release names double as object names: the DCGM exporter's Service is `dcgm-exporter` in NVIDIA_NAMESPACE (port
# `metrics`, 9400), which is what the observability construct's ServiceMonitor selects.
NVIDIA_DEVICE_PLUGIN_RELEASE = "nvidia-device-plugin"
DCGM_EXPORTER_RELEASE = "dcgm-exporter"
NEURON_RELEASE = "neuron-device-plugin"
EFA_DEVICE_PLUGIN_RELEASE = "aws-efa-k8s-device-plugin"

_MAX_HELM_TIMEOUT_MINUTES = 10


def _tolerate(vendor: str) -> list[dict[str, str]]:
    """Tolerate the accelerator taint of `vendor`'s pools (any value), plus the critical-add-on taint."""
    return [
        {"key": ACCELERATOR_RESOURCE[vendor], "operator": "Exists", "effect": "NoSchedule"},
        {"key": "CriticalAddonsOnly", "operator": "Exists"},
    ]


def _node_affinity(*match_expressions: dict[str, Any]) -> dict[str, Any]:
    # Replaces each chart's default affinity; Helm replaces lists, so none of the default terms survive.
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(match_expressions)}]
            }
        }
    }


def nvidia_device_plugin_values() -> dict[str, Any]:
    """Values for the nvidia-device-plugin chart: NVIDIA pool nodes that do not run the plugin themselves."""
    return {
        # The chart's default affinity wants Node Feature Discovery labels we do not run; select our pool labels
        # instead, and never Bottlerocket nodes (their built-in plugin already advertises the GPUs).
        "affinity": _node_affinity(
            {"key": LABEL_ACCELERATOR, "operator": "In", "values": [NVIDIA]},
            {"key": LABEL_AMI_FAMILY, "operator": "NotIn", "values": [BOTTLEROCKET]},
        ),
        "tolerations": _tolerate(NVIDIA),
        "priorityClassName": "system-node-critical",
        # The AMI has the driver and container toolkit; feature discovery adds nothing the pools do not label.
        "gfd": {"enabled": False},
        "nfd": {"enabled": False},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    }


def dcgm_exporter_values(*, service_monitor: bool) -> dict[str, Any]:
    """Values for the dcgm-exporter chart: every NVIDIA pool node, Bottlerocket or AL2023."""
    return {
        "nodeSelector": {LABEL_ACCELERATOR: NVIDIA},
        "tolerations": _tolerate(NVIDIA),
        "priorityClassName": "system-node-critical",
        # The chart default container securityContext (root + CAP_SYS_ADMIN, everything else dropped) is kept on
        # purpose: DCGM needs it for profiling metrics, and on Bottlerocket the NVIDIA runtime only exposes the
        # GPUs to a container that holds CAP_SYS_ADMIN (bottlerocket-os/bottlerocket#3992).
        "serviceMonitor": {"enabled": service_monitor},
    }


def efa_device_plugin_values() -> dict[str, Any]:
    """Values for aws-efa-k8s-device-plugin v0.5.30: the nodes of EFA pools, whatever their GPU taint. Its own
    `supportedInstanceLabels` (a required node affinity on the EFA instance types) stays as the chart has it, and its
    template adds the CriticalAddonsOnly toleration itself."""
    return {
        # Only nodes whose node class lists EFA interfaces (other nodes have no EFA device to advertise).
        "nodeSelector": {LABEL_EFA: "true"},
        "tolerations": [_tolerate(NVIDIA)[0], _tolerate(NEURON)[0]],
    }


def neuron_values(*, scheduler: bool) -> dict[str, Any]:
    """Values for neuron-helm-chart: the device plugin only (plus the scheduler extension when asked)."""
    return {
        "devicePlugin": {
            "enabled": True,
            # The chart defaults the plugin to kube-system; keep it with the release.
            "namespaceOverride": NEURON_NAMESPACE,
            "nodeSelector": {LABEL_ACCELERATOR: NEURON},
            # Replaces the chart's instance-type list (which lags new Neuron types) with our pool label.
            "affinity": _node_affinity({"key": LABEL_ACCELERATOR, "operator": "In", "values": [NEURON]}),
            "tolerations": _tolerate(NEURON),
        },
        # Needed only for pods taking more than one but fewer than all Neuron devices of a node (contiguous
        # device sets); such pods must then set schedulerName: my-scheduler.
        "scheduler": {"enabled": scheduler},
        # Problem detector / recovery and the DRA driver are separate decisions (DRA excludes the device plugin).
        "npd": {"enabled": False},
        "draDriver": {"enabled": False},
    }


@dataclass(frozen=True)
class GpuDeviceSoftwareOptions:
    """Which accelerators the cluster's pools have, and the AMI family their nodes run."""

    nvidia: bool = True
    neuron: bool = False
    # Must equal NodePoolsProps.ami_family: on Bottlerocket the NVIDIA device plugin is part of the OS.
    ami_family: str = DEFAULT_AMI_FAMILY
    # Off: the observability construct adds the ServiceMonitors (and the chart's own needs the CRD first).
    dcgm_service_monitor: bool = False
    # Off: only pods that take some but not all Neuron devices of a node need it (see neuron_values).
    neuron_scheduler: bool = False
    # The EFA device plugin, for pools whose nodes carry EFA interfaces (replicas that span nodes); off without them.
    efa: bool = False
    # True on EKS Auto Mode: its nodes run the NVIDIA and Neuron device plugins (a second copy would double-advertise
    # the devices), so neither is installed here. False: the nodes' AMIs decide (see ami_family).
    managed_device_plugins: bool = False
    # Each Helm release must finish well inside the kubectl Lambda's 15 minutes; otherwise the Lambda dies before
    # Helm reports, and the deployment fails on a timeout instead of Helm's own error.
    helm_timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(10))
    # Merged over our values of each chart (addons.with_helm_values).
    nvidia_device_plugin_helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    dcgm_exporter_helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    neuron_helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    efa_device_plugin_helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def validate(self) -> None:
        for name in (
            "nvidia_device_plugin_helm_values",
            "dcgm_exporter_helm_values",
            "neuron_helm_values",
            "efa_device_plugin_helm_values",
        ):
            check_helm_values(name, getattr(self, name))
        if not (self.nvidia or self.neuron):
            raise ConfigError(E311, "nvidia, neuron: both False is not allowed; enable the accelerators the pools use")
        if self.managed_device_plugins and self.neuron_scheduler:
            raise fail(
                E311,
                "neuron_scheduler",
                True,
                "the Neuron scheduler extension comes with the Neuron chart's device plugin, which EKS Auto Mode "
                "nodes replace with their own (managed_device_plugins): give each pod one Neuron device or the whole "
                "node",
            )
        if self.ami_family not in AMI_FAMILIES:
            raise fail(E311, "ami_family", self.ami_family, f"must be one of {', '.join(AMI_FAMILIES)}")
        minutes = self.helm_timeout.to_minutes(integral=False)
        if not 1 <= minutes <= _MAX_HELM_TIMEOUT_MINUTES:
            raise ConfigError(
                E311,
                f"helm_timeout: {minutes:g} minutes is not allowed; must be between 1 and "
                f"{_MAX_HELM_TIMEOUT_MINUTES} minutes (the kubectl Lambda dies at 15)",
            )


def gpu_options_for(pools: NodePoolsProps, **overrides: Any) -> GpuDeviceSoftwareOptions:
    """Options matching a NodePoolsChart: the vendors its pools use and its AMI family."""
    vendors = {pool.vendor for pool in pools.gpu_pools}
    return GpuDeviceSoftwareOptions(
        nvidia=NVIDIA in vendors,
        neuron=NEURON in vendors,
        ami_family=pools.ami_family,
        efa=any(pool.efa_interfaces for pool in pools.gpu_pools),
        managed_device_plugins=pools.compute == AUTO_MODE,
        **overrides,
    )


@dataclass(frozen=True, kw_only=True)
class GpuDeviceSoftwareProps(GpuDeviceSoftwareOptions):
    """`GpuDeviceSoftwareOptions` on one cluster (`InferenceCluster.add_gpu_devices` fills the cluster in)."""

    cluster: eks.ICluster

    @classmethod
    def for_node_pools(cls, cluster: eks.ICluster, pools: NodePoolsProps, **overrides: Any) -> GpuDeviceSoftwareProps:
        """Props matching a NodePoolsChart: the vendors its pools use and its AMI family."""
        options = gpu_options_for(pools, **overrides)
        return cls(cluster=cluster, **{f.name: getattr(options, f.name) for f in fields(options)})


class GpuDeviceSoftware(Construct):
    """Helm releases of the device plugins and the DCGM exporter; attributes are None when not installed."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: GpuDeviceSoftwareProps) -> None:
        props.validate()
        super().__init__(scope, id)
        self.props = props
        self.nvidia_device_plugin: eks.HelmChart | None = None
        self.dcgm_exporter: eks.HelmChart | None = None
        self.neuron_device_plugin: eks.HelmChart | None = None
        self.efa_device_plugin: eks.HelmChart | None = None
        # Namespace name -> its Namespace and NetworkPolicies (applied before the releases; kept for the review).
        self.namespace_objects: dict[str, list[dict[str, Any]]] = {}
        self._namespaces: dict[str, eks.KubernetesManifest] = {}
        if props.nvidia:
            # Privileged Pod Security (the reason is on the Namespace); only Prometheus gets in, to the exporter.
            self._namespace(NVIDIA_NAMESPACE, netpol.nvidia_namespace(NVIDIA_NAMESPACE))
            if props.ami_family != BOTTLEROCKET and not props.managed_device_plugins:
                self.nvidia_device_plugin = self._release(
                    "NvidiaDevicePlugin",
                    NVIDIA_DEVICE_PLUGIN_CHART,
                    NVIDIA_DEVICE_PLUGIN_RELEASE,
                    NVIDIA_NAMESPACE,
                    with_helm_values(nvidia_device_plugin_values(), props.nvidia_device_plugin_helm_values),
                )
            self.dcgm_exporter = self._release(
                "DcgmExporter",
                DCGM_EXPORTER_CHART,
                DCGM_EXPORTER_RELEASE,
                NVIDIA_NAMESPACE,
                with_helm_values(
                    dcgm_exporter_values(service_monitor=props.dcgm_service_monitor), props.dcgm_exporter_helm_values
                ),
            )
        if props.neuron and not props.managed_device_plugins:
            self._namespace(NEURON_NAMESPACE, netpol.neuron_namespace(NEURON_NAMESPACE))
            self.neuron_device_plugin = self._release(
                "NeuronDevicePlugin",
                NEURON_HELM_CHART,
                NEURON_RELEASE,
                NEURON_NAMESPACE,
                with_helm_values(neuron_values(scheduler=props.neuron_scheduler), props.neuron_helm_values),
            )
        if props.efa:
            # Privileged with host network and /dev/infiniband: GPU node software, in the same namespace (Pod
            # Security privileged; a host-network pod is outside NetworkPolicy, and it takes no connections).
            namespace = NVIDIA_NAMESPACE if props.nvidia else NEURON_NAMESPACE
            if namespace not in self._namespaces:
                self._namespace(namespace, netpol.neuron_namespace(namespace))
            self.efa_device_plugin = self._release(
                "EfaDevicePlugin",
                EFA_DEVICE_PLUGIN_CHART,
                EFA_DEVICE_PLUGIN_RELEASE,
                namespace,
                with_helm_values(efa_device_plugin_values(), props.efa_device_plugin_helm_values),
            )

    @property
    def releases(self) -> list[eks.HelmChart]:
        """The releases installed, for callers that order other resources after them."""
        charts = (self.nvidia_device_plugin, self.dcgm_exporter, self.neuron_device_plugin, self.efa_device_plugin)
        return [chart for chart in charts if chart is not None]

    def _namespace(self, name: str, objects: list[dict[str, Any]]) -> None:
        self.namespace_objects[name] = objects
        manifest_id = "".join(part.capitalize() for part in name.split("-")) + "Namespace"
        self._namespaces[name] = addon_namespace(self, manifest_id, cluster=self.props.cluster, objects=objects)

    def _release(
        self, id: str, source: ChartSource, release: str, namespace: str, values: dict[str, Any]
    ) -> eks.HelmChart:
        chart = install_chart(
            self,
            id,
            cluster=self.props.cluster,
            source=source,
            release=release,
            namespace=namespace,
            timeout=self.props.helm_timeout,
            values=values,
            create_namespace=False,
        )
        chart.node.add_dependency(self._namespaces[namespace])
        return chart
