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

Contract for the workload charts: the metrics are queried at
`thanos-query.monitoring.svc.cluster.local:10902` (manifests/query_endpoint.py: a Thanos Querier deduplicating the
two Prometheus replicas, the same answer whichever is up); Prometheus selects every ServiceMonitor, PodMonitor,
Probe, ScrapeConfig and PrometheusRule in every namespace; Grafana's sidecar loads dashboards from ConfigMaps
labelled `grafana_dashboard: "1"` in every namespace.

Survives a zone: two Prometheus replicas and two Alertmanagers, each pair with required anti-affinity on the zone
(kube-prometheus-stack 88.3.0 `podAntiAffinity: hard`, templates/prometheus/prometheus.yaml and
templates/alertmanager/alertmanager.yaml) and a PodDisruptionBudget; each Prometheus volume is created in its pod's
zone (WaitForFirstConsumer), so a lost zone takes one replica and its volume, never both. A replica added to an
existing environment starts empty and the querier fills its first weeks from the other. Prometheus drops its
`prometheus_replica` label from alerts and the Alertmanagers gossip (the operator sets `--cluster.*` with more than
one replica), so each alert is sent once.

Alerts reach people (llm_eks.manifests.alerting routes them): the chart's default `alertmanager.config` sends every
alert, the Watchdog included, to its `null` receiver, so this construct always renders a routing tree, creates the
topics it publishes to (AlertTopics: the alerts topic, the heartbeat topic a CloudWatch alarm watches) and gives
the Alertmanager pods' service account (named here, `kube-prometheus-stack-alertmanager`) a Pod Identity role that
may publish to them. Receivers with a secret (PagerDuty, Slack, webhooks) get it as a file from Secrets Manager
through the Secrets Store CSI driver (`secrets_store`), never as a Kubernetes Secret or a Helm value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from llm_eks.constructs.addons import (
    ChartSource,
    Placement,
    PodIdentityRole,
    addon_namespace,
    check_boundary,
    check_cidrs,
    check_helm_values,
    check_kms_key_arn,
    check_name,
    check_replicas,
    context_pin,
    harden_roles,
    install_chart,
    requests_limits,
    with_helm_values,
)
from llm_eks.constructs.alerting import AlertTopics, AlertTopicsProps
from llm_eks.constructs.secrets import SecretsStoreCsi
from llm_eks.error_codes import E306
from llm_eks.errors import ConfigError, named_errors
from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.alerting import (
    AlertRoutes,
    alertmanager_config,
    receiver_secret_class,
    secret_volume,
    used_secret_receivers,
    validate_routes,
)
from llm_eks.manifests.query_endpoint import query_objects, query_url
from llm_eks.manifests.source import builds_objects
from llm_eks.versions import (
    KUBE_PROMETHEUS_STACK_CHART_VERSION,
    PROMETHEUS_OPERATOR_CRDS_CHART_VERSION,
    THANOS_IMAGE,
)

PROMETHEUS_COMMUNITY = "https://prometheus-community.github.io/helm-charts"
KUBE_PROMETHEUS_STACK_CHART = ChartSource(
    "kube-prometheus-stack", PROMETHEUS_COMMUNITY, KUBE_PROMETHEUS_STACK_CHART_VERSION
)
PROMETHEUS_OPERATOR_CRDS_CHART = ChartSource(
    "prometheus-operator-crds", PROMETHEUS_COMMUNITY, PROMETHEUS_OPERATOR_CRDS_CHART_VERSION
)
RELEASE = "kube-prometheus-stack"
ZONE = "topology.kubernetes.io/zone"
DASHBOARD_LABEL = ("grafana_dashboard", "1")
# The Alertmanager pods' service account, named here (not left to the chart's helper) so its Pod Identity
# association names it exactly.
ALERTMANAGER_SERVICE_ACCOUNT = f"{RELEASE}-alertmanager"
# The SecretProviderClass mounting the alert receivers' secrets into the Alertmanager pods.
ALERT_SECRETS_CLASS = "alertmanager-receivers"


def _every_severity_to_sns() -> AlertRoutes:
    return AlertRoutes(receivers=MappingProxyType({}))


_PROM_DURATION = re.compile(r"^(\d+(y|w|d|h|m|s|ms))+$")
# The EBS CSI add-on's driver, and EKS Auto Mode's block storage (EKS User Guide, create-storage-class).
STORAGE_PROVISIONERS = ("ebs.csi.aws.com", "ebs.csi.eks.amazonaws.com")


@dataclass(frozen=True)
class ObservabilityOptions:
    """Monitoring stack options; every default is the production-right one."""

    namespace: str = netpol.MONITORING_NAMESPACE
    # Where the EKS control plane's ENIs are (it calls the operator's webhook); empty: the cluster's VPC.
    control_plane_cidrs: tuple[str, ...] = ()
    # Pods outside the namespace that query the metrics (the query endpoint), as (namespace, pod labels): KEDA's
    # operator by default.
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
    # Who gets which alerts (llm_eks.manifests.alerting): every severity to the alerts topic, the Watchdog to the
    # heartbeat topic a CloudWatch alarm watches.
    alert_routes: AlertRoutes = field(default_factory=_every_severity_to_sns)
    # Emails subscribed to the alerts topic (each confirms once); none: subscribe your on-call yourself.
    alert_email: tuple[str, ...] = ()
    # Topics `<prefix>-alerts` and `<prefix>-heartbeat`; None: the cluster's name (a deploy-time reference for a
    # cluster whose name CloudFormation generates).
    alert_topic_prefix: str | None = None
    # Forward the stack's failed deploys and stuck rollbacks (CloudFormation events) to the alerts topic.
    alert_stack_failures: bool = True
    # The Secrets Store CSI driver: required when a receiver holds a secret (it is mounted as a file).
    secrets_store: SecretsStoreCsi | None = None
    # Two Prometheus replicas, one per zone (required anti-affinity; each volume is created in its pod's zone): a
    # zone or node loss leaves one scraping and evaluating every rule. At most the cluster's zones.
    prometheus_replicas: int = 2
    # Two Alertmanagers, one per zone, gossiping so each alert is sent once and silences survive one restart.
    alertmanager_replicas: int = 2
    # The Thanos querier in front of both Prometheus replicas (manifests/query_endpoint.py): KEDA, Grafana and
    # verify read it, so each gets the same answer whichever replica is up.
    query_replicas: int = 2
    # The querier's and the sidecars' image (one pinned release; locked by digest with `llm-eks images lock`).
    query_image: str = THANOS_IMAGE
    # Your organisation's permissions boundary on the Alertmanager pods' role; None: no boundary.
    permissions_boundary: iam.IManagedPolicy | None = None

    def validate(self) -> None:
        check_name("observability.namespace", self.namespace, label=True)
        check_cidrs("observability.control_plane_cidrs", self.control_plane_cidrs)
        for i, (namespace, _) in enumerate(self.prometheus_clients):
            check_name(f"observability.prometheus_clients[{i}]", namespace, label=True)
        check_name("observability.storage_class_name", self.storage_class_name, label=False)
        if not _PROM_DURATION.match(self.retention):
            raise ConfigError(
                E306,
                f"observability.retention: {self.retention!r} is not allowed; "
                "must be a Prometheus duration such as 15d",
            )
        if not 10 <= self.volume_size_gib <= 16384:
            raise ConfigError(
                E306,
                f"observability.volume_size_gib: {self.volume_size_gib} is not allowed; must be between 10 and 16384",
            )
        check_kms_key_arn("observability.kms_key_arn", self.kms_key_arn)
        if self.storage_provisioner not in STORAGE_PROVISIONERS:
            raise ConfigError(
                E306,
                f"observability.storage_provisioner: {self.storage_provisioner!r} is not allowed; must be one of "
                f"{', '.join(STORAGE_PROVISIONERS)} (the EBS CSI add-on's, or EKS Auto Mode's)",
            )
        check_helm_values("observability.helm_values", self.helm_values)
        check_boundary("observability.permissions_boundary", self.permissions_boundary)
        for name in ("prometheus_replicas", "alertmanager_replicas", "query_replicas"):
            check_replicas(f"observability.{name}", getattr(self, name))
        if self.query_replicas < 2:
            raise ConfigError(
                E306,
                f"observability.query_replicas: {self.query_replicas} is not allowed; must be 2 or 3 (KEDA's scaling "
                "and verify read through it: one replica would be a single point of failure)",
            )
        validate_routes("observability.alert_routes", self.alert_routes)
        if used_secret_receivers(self.alert_routes) and self.secrets_store is None:
            raise ConfigError(
                E306,
                "observability.secrets_store: None is not allowed with receivers that hold a secret "
                f"({', '.join(used_secret_receivers(self.alert_routes))}); pass the cluster's SecretsStoreCsi "
                "(InferenceCluster.add_secrets_store), which mounts each secret into Alertmanager as a file",
            )

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
        zones = len(cluster.vpc.availability_zones)
        for name in ("prometheus_replicas", "alertmanager_replicas"):
            if getattr(props, name) > zones:
                raise ConfigError(
                    E306,
                    f"observability.{name}: {getattr(props, name)} is not allowed; must be at most the cluster's "
                    f"{zones} availability zones (one replica per zone: another would stay Pending)",
                )
        self.namespace = props.namespace
        self.query_image = context_pin(self, props.query_image)
        # The namespace and its NetworkPolicies, and the query endpoint (plain objects: no CRD, so they go first).
        self.namespace_objects = netpol.monitoring_namespace(
            props.namespace,
            props.control_plane_cidrs or (cluster.vpc.vpc_cidr_block,),
            [netpol.pods(labels, namespace) for namespace, labels in props.prometheus_clients],
        ) + query_objects(
            props.namespace,
            node_selector=props.placement.node_selector,
            tolerations=props.placement.tolerations,
            image=self.query_image,
            replicas=props.query_replicas,
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
            self.storage_class = eks.KubernetesManifest(
                self, "StorageClass", cluster=cluster, manifest=list(self.objects)
            )
        routes = props.alert_routes
        self.alert_topics = AlertTopics(
            self,
            "AlertTopics",
            AlertTopicsProps(
                name_prefix=props.alert_topic_prefix or cluster.cluster_name,
                email=props.alert_email,
                heartbeat=routes.heartbeat_topic,
                stack_failures=props.alert_stack_failures,
            ),
        )
        # One role for the Alertmanager pods: it publishes to the topics and reads the receivers' secrets.
        self.alertmanager_identity = PodIdentityRole.for_service_account(
            cluster, props.namespace, ALERTMANAGER_SERVICE_ACCOUNT
        )
        harden_roles(self.alertmanager_identity, props.permissions_boundary)
        self.alert_topics.grant_publish(self.alertmanager_identity.role)
        secret_class = receiver_secret_class(routes, ALERT_SECRETS_CLASS, props.namespace, cdk.Stack.of(self).region)
        self.receiver_secrets: eks.KubernetesManifest | None = None
        if secret_class is not None:
            assert props.secrets_store is not None  # validate() refuses it otherwise
            for receiver in used_secret_receivers(routes).values():
                props.secrets_store.add_secret_reader(props.namespace, ALERTMANAGER_SERVICE_ACCOUNT, receiver.secret)
            self.objects.append(secret_class)
            # Its kind comes with the driver's CRDs; the Alertmanager pods mount it.
            self.receiver_secrets = eks.KubernetesManifest(
                self, "ReceiverSecrets", cluster=cluster, manifest=[secret_class]
            )
            self.receiver_secrets.node.add_dependency(self.namespace_manifest, props.secrets_store)
        alerting = alertmanager_config(
            routes,
            alerts_topic_arn=self.alert_topics.alerts.topic_arn,
            heartbeat_topic_arn=None if self.alert_topics.heartbeat is None else self.alert_topics.heartbeat.topic_arn,
            region=cdk.Stack.of(self).region,
        )
        values = kube_prometheus_stack_values(
            props,
            alerting=alerting,
            alert_secrets=ALERT_SECRETS_CLASS if secret_class is not None else None,
            thanos_image=self.query_image,
        )
        self.chart = install_chart(
            self,
            "Chart",
            cluster=cluster,
            source=KUBE_PROMETHEUS_STACK_CHART,
            release=RELEASE,
            namespace=props.namespace,
            values=with_helm_values(values, props.helm_values),
            timeout=props.timeout,
            waits=3,
            create_namespace=False,
        )
        # The association before the pods: the Pod Identity webhook hands out credentials at admission only.
        self.chart.node.add_dependency(self.crds, self.namespace_manifest, self.alertmanager_identity)
        if self.storage_class is not None:
            self.chart.node.add_dependency(self.storage_class)
        if self.receiver_secrets is not None:
            self.chart.node.add_dependency(self.receiver_secrets)


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


def _one_per_zone(replicas: int) -> dict[str, Any]:
    """The chart's anti-affinity values: required, one replica per zone (none for a single replica)."""
    if replicas == 1:
        return {"replicas": 1, "podAntiAffinity": ""}
    return {"replicas": replicas, "podAntiAffinity": "hard", "podAntiAffinityTopologyKey": ZONE}


def _pdb(replicas: int) -> dict[str, Any]:
    """One replica may go at a time; a single replica gets none (it would block every node drain)."""
    return {"enabled": replicas > 1, "minAvailable": 1}


def kube_prometheus_stack_values(
    props: ObservabilityOptions,
    *,
    alerting: Mapping[str, Any],
    alert_secrets: str | None = None,
    thanos_image: str = THANOS_IMAGE,
) -> dict[str, Any]:
    """Helm values for kube-prometheus-stack, with `alerting` as Alertmanager's config (manifests.alerting) and the
    receivers' secrets mounted from SecretProviderClass `alert_secrets`. No credential in here: Grafana generates
    its admin password, the receivers' secrets are files."""
    selector = dict(props.placement.node_selector)
    tolerations = [dict(t) for t in props.placement.tolerations]
    on_system = {"nodeSelector": selector, "tolerations": tolerations}
    alertmanager_spec: dict[str, Any] = {
        **on_system,
        **_one_per_zone(props.alertmanager_replicas),
        "resources": requests_limits("50m", "64Mi", memory_limit="256Mi"),
    }
    if alert_secrets is not None:
        volume, mount = secret_volume(alert_secrets)
        alertmanager_spec |= {"volumes": [volume], "volumeMounts": [mount]}
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
            "podDisruptionBudget": _pdb(props.prometheus_replicas),
            # The headless <fullname>-thanos-discovery Service over the sidecars, which the querier resolves.
            "thanosService": {"enabled": True},
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
                **_one_per_zone(props.prometheus_replicas),
                # The Thanos sidecar serves this replica's series to the querier (a non-empty map turns it on:
                # templates/prometheus/prometheus.yaml `if .Values.prometheus.prometheusSpec.thanos`).
                "thanos": {
                    "image": thanos_image,
                    "resources": requests_limits("50m", "128Mi", memory_limit="512Mi"),
                },
                # The config reloader signals Prometheus instead of POSTing /-/reload, so the operator leaves out
                # --web.enable-lifecycle (prometheus-operator v0.93.0 promcfg.go): port 9090 admits the VPC CIDR
                # for the API server's proxy (`llm-eks verify`), and no pod may then POST /-/quit through it.
                "reloadStrategy": "ProcessSignal",
            },
        },
        "alertmanager": {
            "podDisruptionBudget": _pdb(props.alertmanager_replicas),
            "serviceAccount": {"create": True, "name": ALERTMANAGER_SERVICE_ACCOUNT},
            "config": dict(alerting),
            "alertmanagerSpec": alertmanager_spec,
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
                },
                # The same answer whichever Prometheus replica is up (manifests/query_endpoint.py).
                "datasources": {"url": f"{query_url(props.namespace)}/"},
            },
        },
        "kube-state-metrics": {**on_system, "resources": requests_limits("50m", "128Mi", memory_limit="512Mi")},
        # node-exporter is a DaemonSet: it must run on GPU nodes too, whatever NoSchedule taint they carry.
        "prometheus-node-exporter": {
            "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
            "resources": requests_limits("50m", "64Mi", memory_limit="128Mi"),
        },
    }
