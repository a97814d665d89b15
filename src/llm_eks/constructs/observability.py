"""`Observability`: kube-prometheus-stack (Prometheus Operator, Prometheus, Alertmanager, Grafana, kube-state-metrics,
node-exporter) in namespace `monitoring`, its CRDs from the separate `prometheus-operator-crds` chart, and an
encrypted gp3 StorageClass for Prometheus' volume.

CRDs: kube-prometheus-stack ships them in a subchart's `crds/` directory, which Helm installs once and never
upgrades, so a chart bump would run a new operator against old CRDs. `prometheus-operator-crds` carries the same
CRDs as templates: `helm upgrade` applies them, and pinning both charts to one operator version (v0.93.0) keeps them
in step (the Karpenter `karpenter-crd` pattern). The main chart gets `crds.enabled: false`. We do not rely on
`skip_crds`: the aws_eks_v2 kubectl handler (aws-cdk-lib 2.275.0) reads `SkipCrds` but never passes `--skip-crds`
to Helm. The CRD chart's templates (~4.5 MB) sit in a subchart, which keeps Helm's release Secret (gzip, ~0.6 MB)
under Kubernetes' 1 MiB limit; Helm 4 in the kubectl layer applies them server-side, so the 256 KiB
last-applied-annotation limit of client-side `kubectl apply` never applies.

Contract for the workload charts: Prometheus is `prometheus-operated.monitoring.svc.cluster.local:9090`; it selects
every ServiceMonitor, PodMonitor, Probe, ScrapeConfig and PrometheusRule in every namespace; Grafana's sidecar loads
dashboards from ConfigMaps labelled `grafana_dashboard: "1"` in every namespace.
"""

from __future__ import annotations

import re
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
    check_kms_key_arn,
    check_name,
    install_chart,
    requests_limits,
    with_helm_values,
)
from llm_eks.errors import ConfigError, named_errors
from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.source import builds_objects
from llm_eks.versions import KUBE_PROMETHEUS_STACK_CHART_VERSION, PROMETHEUS_OPERATOR_CRDS_CHART_VERSION

PROMETHEUS_COMMUNITY = "https://prometheus-community.github.io/helm-charts"
KUBE_PROMETHEUS_STACK_CHART = ChartSource(
    "kube-prometheus-stack", PROMETHEUS_COMMUNITY, KUBE_PROMETHEUS_STACK_CHART_VERSION
)
PROMETHEUS_OPERATOR_CRDS_CHART = ChartSource(
    "prometheus-operator-crds", PROMETHEUS_COMMUNITY, PROMETHEUS_OPERATOR_CRDS_CHART_VERSION
)
RELEASE = "kube-prometheus-stack"
DASHBOARD_LABEL = ("grafana_dashboard", "1")

_PROM_DURATION = re.compile(r"^(\d+(y|w|d|h|m|s|ms))+$")
# The EBS CSI add-on's driver, and EKS Auto Mode's block storage (EKS User Guide, create-storage-class).
STORAGE_PROVISIONERS = ("ebs.csi.aws.com", "ebs.csi.eks.amazonaws.com")


@dataclass(frozen=True)
class ObservabilityOptions:
    """Monitoring stack options; every default is the production-right one."""

    namespace: str = netpol.MONITORING_NAMESPACE
    # Where the EKS control plane's ENIs are (it calls the operator's webhook); empty: the cluster's VPC.
    control_plane_cidrs: tuple[str, ...] = ()
    # Pods outside the namespace that query Prometheus, as (namespace, pod labels): KEDA's operator by default.
    prometheus_clients: tuple[tuple[str, Mapping[str, str]], ...] = ((netpol.KEDA_NAMESPACE, netpol.KEDA_OPERATOR_POD),)
    # Two weeks covers a release cycle's latency and cost comparisons; longer belongs in a remote store.
    retention: str = "15d"
    # 50 GiB holds 15 days of a few GPU nodes' vLLM, DCGM and cluster series with room to spare.
    volume_size_gib: int = 50
    # Create the encrypted gp3 StorageClass below; False when the cluster already has one of this name.
    create_storage_class: bool = True
    storage_class_name: str = "gp3-encrypted"
    # None: EBS's AWS-managed key (aws/ebs); a customer key ARN for stricter key policies.
    kms_key_arn: str | None = None
    # The EBS CSI driver the StorageClass names: the EBS CSI add-on's; on EKS Auto Mode its own block storage's
    # (ebs.csi.eks.amazonaws.com, which InferenceCluster.add_observability sets there).
    storage_provisioner: str = "ebs.csi.aws.com"
    placement: Placement = field(default_factory=Placement)
    # Worst case is 3 Helm waits (pre-install cert Job, main --wait, post-install webhook-patch Job): 3 x 4 min + 2
    # min setup = 14 min, inside the kubectl Lambda's 15. A normal install takes 2-3 minutes.
    timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(4))
    # CRDs only: no pods to wait for.
    crds_timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(3))
    # Merged over our kube-prometheus-stack values (addons.with_helm_values), e.g. Grafana's ingress or remote write.
    helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def validate(self) -> None:
        check_name("observability.namespace", self.namespace, label=True)
        check_cidrs("observability.control_plane_cidrs", self.control_plane_cidrs)
        for i, (namespace, _) in enumerate(self.prometheus_clients):
            check_name(f"observability.prometheus_clients[{i}]", namespace, label=True)
        check_name("observability.storage_class_name", self.storage_class_name, label=False)
        if not _PROM_DURATION.match(self.retention):
            raise ConfigError(
                f"observability.retention: {self.retention!r} is not allowed; must be a Prometheus duration such as 15d"
            )
        if not 10 <= self.volume_size_gib <= 16384:
            raise ConfigError(
                f"observability.volume_size_gib: {self.volume_size_gib} is not allowed; must be between 10 and 16384"
            )
        check_kms_key_arn("observability.kms_key_arn", self.kms_key_arn)
        if self.storage_provisioner not in STORAGE_PROVISIONERS:
            raise ConfigError(
                f"observability.storage_provisioner: {self.storage_provisioner!r} is not allowed; must be one of "
                f"{', '.join(STORAGE_PROVISIONERS)} (the EBS CSI add-on's, or EKS Auto Mode's)"
            )
        check_helm_values("observability.helm_values", self.helm_values)

    @property
    def retention_size(self) -> str:
        """Prometheus deletes old blocks at 80% of the volume, leaving room for the WAL and compaction."""
        return f"{self.volume_size_gib * 8 // 10}GB"


@dataclass(frozen=True, kw_only=True)
class ObservabilityProps(ObservabilityOptions):
    """`ObservabilityOptions` on one cluster (`InferenceCluster.add_observability` fills the cluster in)."""

    cluster: eks.ICluster


class Observability(Construct):
    """The CRD chart, the StorageClass, then kube-prometheus-stack, in that order.

    Grafana's admin password is generated by its chart on first install and kept across upgrades in Secret
    `kube-prometheus-stack-grafana` (key `admin-password`) in the namespace; it is never in the template.
    `objects` lists the plain Kubernetes objects this construct applies outside Helm, for the review output.
    """

    @named_errors
    def __init__(self, scope: Construct, id: str, props: ObservabilityProps) -> None:
        props.validate()
        super().__init__(scope, id)
        cluster = props.cluster
        self.namespace = props.namespace
        self.namespace_objects = netpol.monitoring_namespace(
            props.namespace,
            props.control_plane_cidrs or (cluster.vpc.vpc_cidr_block,),
            [netpol.pods(labels, namespace) for namespace, labels in props.prometheus_clients],
        )
        self.namespace_manifest = addon_namespace(self, "Namespace", cluster=cluster, objects=self.namespace_objects)
        self.crds = install_chart(
            self,
            "Crds",
            cluster=cluster,
            source=PROMETHEUS_OPERATOR_CRDS_CHART,
            release="prometheus-operator-crds",
            namespace=props.namespace,
            values={},
            timeout=props.crds_timeout,
            create_namespace=False,
        )
        self.crds.node.add_dependency(self.namespace_manifest)
        self.objects: list[dict[str, Any]] = [storage_class(props)] if props.create_storage_class else []
        self.storage_class: eks.KubernetesManifest | None = None
        if self.objects:
            self.storage_class = eks.KubernetesManifest(self, "StorageClass", cluster=cluster, manifest=self.objects)
        self.chart = install_chart(
            self,
            "Chart",
            cluster=cluster,
            source=KUBE_PROMETHEUS_STACK_CHART,
            release=RELEASE,
            namespace=props.namespace,
            values=with_helm_values(kube_prometheus_stack_values(props), props.helm_values),
            timeout=props.timeout,
            waits=3,
            create_namespace=False,
        )
        self.chart.node.add_dependency(self.crds, self.namespace_manifest)
        if self.storage_class is not None:
            self.chart.node.add_dependency(self.storage_class)


@builds_objects
def storage_class(props: ObservabilityOptions) -> dict[str, Any]:
    """Encrypted gp3 through the EBS CSI driver (the cluster's managed add-on, or EKS Auto Mode's block storage)."""
    parameters = {"type": "gp3", "encrypted": "true"}
    if props.kms_key_arn:
        parameters["kmsKeyId"] = props.kms_key_arn
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": props.storage_class_name, "labels": {"app.kubernetes.io/part-of": "llm-eks"}},
        "provisioner": props.storage_provisioner,
        "parameters": parameters,
        # The volume is created in the zone the pod lands in; an immediate one could strand Prometheus in another AZ.
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": True,
        # Metrics are not precious, and `cdk destroy` must not leave paid volumes behind.
        "reclaimPolicy": "Delete",
    }


def kube_prometheus_stack_values(props: ObservabilityOptions) -> dict[str, Any]:
    """Helm values for kube-prometheus-stack. No credential in here: Grafana generates its admin password."""
    selector = dict(props.placement.node_selector)
    tolerations = [dict(t) for t in props.placement.tolerations]
    on_system = {"nodeSelector": selector, "tolerations": tolerations}
    return {
        # The CRDs come from the prometheus-operator-crds release (see the module docstring).
        "crds": {"enabled": False},
        # EKS runs etcd, the scheduler and the controller manager out of reach, and binds kube-proxy's metrics to
        # 127.0.0.1: scraping them only produces permanently firing TargetDown alerts.
        "kubeEtcd": {"enabled": False},
        "kubeScheduler": {"enabled": False},
        "kubeControllerManager": {"enabled": False},
        "kubeProxy": {"enabled": False},
        "prometheusOperator": {
            **on_system,
            "resources": requests_limits("100m", "128Mi", memory_limit="512Mi"),
            "admissionWebhooks": {"patch": {**on_system, "resources": requests_limits("50m", "64Mi")}},
        },
        "prometheus": {
            "prometheusSpec": {
                **on_system,
                # Select every monitor and rule in every namespace, not just the ones labelled with this release.
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
                "probeSelectorNilUsesHelmValues": False,
                "scrapeConfigSelectorNilUsesHelmValues": False,
                "serviceMonitorNamespaceSelector": {},
                "podMonitorNamespaceSelector": {},
                "ruleNamespaceSelector": {},
                "retention": props.retention,
                "retentionSize": props.retention_size,
                # Head-block compaction and dashboard queries burst above one core.
                "resources": requests_limits("500m", "2Gi", cpu_limit="2", memory_limit="4Gi"),
                "storageSpec": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "storageClassName": props.storage_class_name,
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": f"{props.volume_size_gib}Gi"}},
                        }
                    }
                },
                # Delete the volume with the Prometheus object, so `cdk destroy` leaves no EBS volume behind.
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
                # The config reloader signals Prometheus instead of POSTing /-/reload, so the operator leaves out
                # --web.enable-lifecycle (prometheus-operator v0.93.0 promcfg.go): port 9090 admits the VPC CIDR
                # for the API server's proxy (`llm-eks verify`), and no pod may then POST /-/quit through it.
                "reloadStrategy": "ProcessSignal",
            }
        },
        "alertmanager": {
            "alertmanagerSpec": {**on_system, "resources": requests_limits("50m", "64Mi", memory_limit="256Mi")}
        },
        "grafana": {
            **on_system,
            "resources": requests_limits("100m", "256Mi", memory_limit="512Mi"),
            # Dashboards come from ConfigMaps (GitOps-friendly); Grafana keeps no state worth a volume.
            "persistence": {"enabled": False},
            "sidecar": {
                "dashboards": {
                    "enabled": True,
                    "label": DASHBOARD_LABEL[0],
                    "labelValue": DASHBOARD_LABEL[1],
                    "searchNamespace": "ALL",
                }
            },
        },
        "kube-state-metrics": {**on_system, "resources": requests_limits("50m", "128Mi", memory_limit="512Mi")},
        # node-exporter is a DaemonSet: it must run on GPU nodes too, whatever NoSchedule taint they carry.
        "prometheus-node-exporter": {
            "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
            "resources": requests_limits("50m", "64Mi", memory_limit="128Mi"),
        },
    }
