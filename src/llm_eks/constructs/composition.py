"""What `InferenceCluster` installs on itself, and in what order: the composition knowledge a user's own app needs.

The rule every method applies: a controller installed with `helm --wait` waits for the system node group (its pods have
nowhere to run before it, and aws_eks_v2's readiness barrier ignores node groups), and Karpenter also waits for the Pod
Identity agent (its pods get no AWS credentials before it). On EKS Auto Mode the controllers run on Auto Mode's built-in
system pool, which exists with the cluster: they wait for the cluster's NetworkPolicy controller instead, and options
left at the default `Placement()` land there (`system_placement`). A chart added with `add_chart` waits for what it
names in `after`; a Karpenter there also makes the chart deleted before the controller, so Karpenter drains the chart's
nodes.

Each add-on is created beside the cluster construct (in its scope), not under it: the paths, and so the logical
ids, are the ones a hand-wired app (and llm-eks's own stacks) gives them, so moving to these methods replaces
nothing. Pass `scope` to put one elsewhere.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any, TypeVar, cast

import cdk8s
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct, Node

from llm_eks.constructs.addons import Placement
from llm_eks.constructs.auto_mode import (
    EBS_PROVISIONER,
    AutoModeNodes,
    AutoModeNodesOptions,
    AutoModeNodesProps,
    ingress_class,
)
from llm_eks.constructs.crds import CrdSource, PinnedCrds, PinnedCrdsProps
from llm_eks.constructs.envoy_gateway import EnvoyGateway, EnvoyGatewayOptions, EnvoyGatewayProps
from llm_eks.constructs.external_secrets import ExternalSecrets, ExternalSecretsOptions, ExternalSecretsProps
from llm_eks.constructs.gpu_devices import GpuDeviceSoftware, GpuDeviceSoftwareOptions, GpuDeviceSoftwareProps
from llm_eks.constructs.interruption import InterruptionQueue, InterruptionQueueProps
from llm_eks.constructs.karpenter import Karpenter, KarpenterOptions, KarpenterProps
from llm_eks.constructs.keda import Keda, KedaOptions, KedaProps
from llm_eks.constructs.kuberay import KubeRayOperator, KubeRayOperatorOptions, KubeRayOperatorProps
from llm_eks.constructs.load_balancer import (
    AwsLoadBalancerController,
    AwsLoadBalancerControllerOptions,
    AwsLoadBalancerControllerProps,
)
from llm_eks.constructs.lws import LeaderWorkerSetController, LeaderWorkerSetOptions, LeaderWorkerSetProps
from llm_eks.constructs.model_access import ModelWeightsAccess, ModelWeightsAccessOptions, ModelWeightsAccessProps
from llm_eks.constructs.observability import Observability, ObservabilityOptions, ObservabilityProps
from llm_eks.constructs.secrets import SecretsStoreCsi, SecretsStoreCsiOptions, SecretsStoreCsiProps
from llm_eks.error_codes import E304
from llm_eks.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
C = TypeVar("C", bound=IConstruct)
OptionsT = TypeVar("OptionsT")


def as_icluster(cluster: eks.Cluster) -> eks.ICluster:
    """`cluster` typed as the `eks.ICluster` that props take. `eks.Cluster` implements ICluster (jsii declares and
    checks it), but its Python binding leaves out ICluster's optional `kubectl_provider_options` property, so a type
    checker does not accept one for the other. The one cast that bridges the binding's gap is here."""
    return cast(eks.ICluster, cluster)


def with_cluster(props_type: type[T], options: DataclassInstance, cluster: eks.ICluster, **changes: Any) -> T:
    """`props_type` (an options class plus `cluster`) from `options`, on `cluster`."""
    values = {f.name: getattr(options, f.name) for f in fields(options)}
    return props_type(**{**values, **changes, "cluster": cluster})


class ClusterComposition:
    """The `add_*` methods of `InferenceCluster` (a mixin: the class itself builds the cluster and system nodes)."""

    cluster: eks.Cluster
    cluster_name: str
    # The managed node group of the controllers; None on EKS Auto Mode (its built-in system pool runs them).
    system_nodegroup: eks.Nodegroup | None
    # What controllers wait for before `helm --wait` can succeed: the node group, or on Auto Mode the NetworkPolicy
    # controller's ConfigMap (the system pool itself exists with the cluster).
    system_capacity: IConstruct
    auto_mode: bool

    @property
    def system_placement(self) -> Placement:
        raise NotImplementedError  # InferenceCluster's

    def _beside(self, scope: Construct | None) -> Construct:
        return scope or cast(Construct, Node.of(cast(IConstruct, self)).scope)

    def _on_system_nodes(self, options: OptionsT) -> OptionsT:
        """`options` with their placement on this cluster's system nodes when left at the default `Placement()`
        (on Auto Mode: its system pool, whose taint the controllers must tolerate)."""
        if getattr(options, "placement", None) == Placement():
            return replace(options, placement=self.system_placement)  # type: ignore[type-var]
        return options

    def after_system_nodes(self, *constructs: C) -> None:
        """Order controllers after the system node group: `helm --wait` needs a node to run on, and aws_eks_v2's
        readiness barrier ignores node groups."""
        for construct in constructs:
            construct.node.add_dependency(self.system_capacity)

    def add_addon(self, addon: C) -> C:
        """An add-on of your own (a construct holding Helm releases): installed after the system nodes."""
        self.after_system_nodes(addon)
        return addon

    def add_karpenter(
        self,
        options: KarpenterOptions | None = None,
        *,
        id: str = "Karpenter",
        queue_id: str = "Interruption",
        scope: Construct | None = None,
    ) -> Karpenter:
        """Karpenter on this cluster: the interruption queue (unless `options` brings one, then we create none) and
        the controller, pinned to the system nodes, installed after them and after the Pod Identity agent."""
        if self.auto_mode or self.system_nodegroup is None:
            raise ConfigError(
                E304,
                "add_karpenter: not allowed on an EKS Auto Mode cluster, which runs Karpenter itself; add the node "
                "role of your NodeClasses with add_auto_mode_nodes",
            )
        options = options or KarpenterOptions()
        scope = self._beside(scope)
        queue = options.interruption_queue or InterruptionQueue(
            scope, queue_id, InterruptionQueueProps(cluster_name=self.cluster_name)
        )
        return Karpenter(
            scope,
            id,
            with_cluster(
                KarpenterProps,
                options,
                as_icluster(self.cluster),
                interruption_queue=queue,
                # Its pods need the system nodes and Pod Identity credentials before `helm --wait` can succeed.
                depends_on=(self.system_nodegroup, self.cluster.eks_pod_identity_agent, *options.depends_on),
            ),
        )

    def add_auto_mode_nodes(
        self, options: AutoModeNodesOptions | None = None, *, id: str = "AutoModeNodes", scope: Construct | None = None
    ) -> AutoModeNodes:
        """On EKS Auto Mode: the IAM role and access entry of the nodes of your NodeClasses (their `spec.role`). Add
        the charts holding NodeClasses and NodePools with `add_chart(..., after=(nodes,))`."""
        if not self.auto_mode:
            raise ConfigError(E304, "add_auto_mode_nodes: only on an EKS Auto Mode cluster (auto_mode=True)")
        options = options or AutoModeNodesOptions()
        tagging = getattr(self, "auto_mode_tagging", None)
        props = with_cluster(
            AutoModeNodesProps,
            options,
            as_icluster(self.cluster),
            depends_on=(*options.depends_on, *((tagging,) if tagging is not None else ())),
        )
        return AutoModeNodes(self._beside(scope), id, props)

    def add_keda(self, options: KedaOptions | None = None, *, id: str = "Keda", scope: Construct | None = None) -> Keda:
        """KEDA, after the system nodes."""
        props = with_cluster(KedaProps, self._on_system_nodes(options or KedaOptions()), as_icluster(self.cluster))
        return self.add_addon(Keda(self._beside(scope), id, props))

    def add_kuberay(
        self, options: KubeRayOperatorOptions | None = None, *, id: str = "KubeRay", scope: Construct | None = None
    ) -> KubeRayOperator:
        """The KubeRay operator, after the system nodes."""
        options = self._on_system_nodes(options or KubeRayOperatorOptions())
        props = with_cluster(KubeRayOperatorProps, options, as_icluster(self.cluster))
        return self.add_addon(KubeRayOperator(self._beside(scope), id, props))

    def add_leader_worker_set(
        self, options: LeaderWorkerSetOptions, *, id: str = "LeaderWorkerSet", scope: Construct | None = None
    ) -> LeaderWorkerSetController:
        """The LeaderWorkerSet controller, after the system nodes (options name the control plane's CIDRs)."""
        props = with_cluster(LeaderWorkerSetProps, self._on_system_nodes(options), as_icluster(self.cluster))
        return self.add_addon(LeaderWorkerSetController(self._beside(scope), id, props))

    def add_observability(
        self, options: ObservabilityOptions | None = None, *, id: str = "Observability", scope: Construct | None = None
    ) -> Observability:
        """kube-prometheus-stack and its CRDs, after the system nodes (on Auto Mode, Prometheus's volume from Auto
        Mode's own EBS provisioner)."""
        options = self._on_system_nodes(options or ObservabilityOptions())
        if self.auto_mode and options.storage_provisioner == ObservabilityOptions.storage_provisioner:
            options = replace(options, storage_provisioner=EBS_PROVISIONER)
        props = with_cluster(ObservabilityProps, options, as_icluster(self.cluster))
        return self.add_addon(Observability(self._beside(scope), id, props))

    def add_secrets_store(
        self, options: SecretsStoreCsiOptions | None = None, *, id: str = "SecretsStore", scope: Construct | None = None
    ) -> SecretsStoreCsi:
        """The Secrets Store CSI driver and its AWS provider, after the system nodes."""
        options = self._on_system_nodes(options or SecretsStoreCsiOptions())
        props = with_cluster(SecretsStoreCsiProps, options, as_icluster(self.cluster))
        return self.add_addon(SecretsStoreCsi(self._beside(scope), id, props))

    def add_load_balancer_controller(
        self,
        options: AwsLoadBalancerControllerOptions | None = None,
        *,
        id: str = "LoadBalancerController",
        scope: Construct | None = None,
    ) -> AwsLoadBalancerController:
        """The AWS Load Balancer Controller, after the system nodes (not on EKS Auto Mode: `add_ingress_class`)."""
        if self.auto_mode:
            raise ConfigError(
                E304,
                "add_load_balancer_controller: not allowed on an EKS Auto Mode cluster, which runs load balancing "
                "itself; hand it your Ingresses with add_ingress_class",
            )
        options = self._on_system_nodes(options or AwsLoadBalancerControllerOptions())
        props = with_cluster(AwsLoadBalancerControllerProps, options, as_icluster(self.cluster))
        return self.add_addon(AwsLoadBalancerController(self._beside(scope), id, props))

    def add_ingress_class(self, name: str = "alb", *, id: str = "IngressClass") -> eks.KubernetesManifest:
        """On EKS Auto Mode: IngressClass `name` for Auto Mode's ALB controller (eks.amazonaws.com/alb), the class
        llm-eks's Ingresses name (`alb`, the name the AWS Load Balancer Controller's chart gives its own)."""
        if not self.auto_mode:
            raise ConfigError(
                E304, "add_ingress_class: only on an EKS Auto Mode cluster (add_load_balancer_controller)"
            )
        manifest = self.cluster.add_manifest(id, ingress_class(name))
        manifest.node.add_dependency(self.system_capacity)
        return manifest

    def add_envoy_gateway(
        self, options: EnvoyGatewayOptions, *, id: str = "EnvoyGateway", scope: Construct | None = None
    ) -> EnvoyGateway:
        """Envoy Gateway with Envoy AI Gateway and the rate-limit counters' store, after the system nodes (options
        name the control plane's CIDRs). Both controllers discover their CRDs once at start: add the pinned CRDs
        first (`add_pinned_crds` with crds.ENVOY_GATEWAY_CRDS, AI_GATEWAY_CRDS, the Gateway API and InferencePool
        CRDs) and make this wait for them."""
        props = with_cluster(EnvoyGatewayProps, self._on_system_nodes(options), as_icluster(self.cluster))
        return self.add_addon(EnvoyGateway(self._beside(scope), id, props))

    def add_external_secrets(
        self,
        options: ExternalSecretsOptions | None = None,
        *,
        id: str = "ExternalSecrets",
        scope: Construct | None = None,
    ) -> ExternalSecrets:
        """The External Secrets Operator, scoped to its own namespace, after the system nodes and the Pod Identity
        agent (its role comes through it)."""
        props = with_cluster(
            ExternalSecretsProps, self._on_system_nodes(options or ExternalSecretsOptions()), as_icluster(self.cluster)
        )
        secrets = self.add_addon(ExternalSecrets(self._beside(scope), id, props))
        secrets.chart.node.add_dependency(self.cluster.eks_pod_identity_agent)
        return secrets

    def add_pinned_crds(
        self, sources: tuple[CrdSource, ...], *, id: str = "Crds", scope: Construct | None = None
    ) -> PinnedCrds:
        """Upstream CRDs applied at deploy time from pinned, hash-checked URLs (e.g. `crds.GATEWAY_API_CRDS` and
        `crds.INFERENCE_POOL_CRD`), by a Lambda in the cluster's private subnets; charts with their objects wait for
        it (`after`)."""
        return PinnedCrds(self._beside(scope), id, PinnedCrdsProps(cluster=as_icluster(self.cluster), sources=sources))

    def add_gpu_devices(
        self, options: GpuDeviceSoftwareOptions | None = None, *, id: str = "GpuDevices", scope: Construct | None = None
    ) -> GpuDeviceSoftware:
        """Device plugins and the DCGM exporter (`gpu_devices.gpu_options_for(pools)` matches a node pools chart),
        after the system nodes; on EKS Auto Mode no NVIDIA or Neuron device plugin (Auto Mode runs them)."""
        options = options or GpuDeviceSoftwareOptions()
        if self.auto_mode and not options.managed_device_plugins:
            options = replace(options, managed_device_plugins=True)
        props = with_cluster(GpuDeviceSoftwareProps, options, as_icluster(self.cluster))
        return self.add_addon(GpuDeviceSoftware(self._beside(scope), id, props))

    def add_model_weights_access(
        self, options: ModelWeightsAccessOptions, *, id: str = "ModelWeights", scope: Construct | None = None
    ) -> ModelWeightsAccess:
        """Read access to model weights in S3 for one service account (IAM only: nothing waits for nodes)."""
        return ModelWeightsAccess(
            self._beside(scope), id, with_cluster(ModelWeightsAccessProps, options, as_icluster(self.cluster))
        )

    def add_chart(self, id: str, chart: cdk8s.Chart, *, after: tuple[IConstruct, ...] = ()) -> eks.KubernetesManifest:
        """Apply a cdk8s chart of your own after what it needs (`after`: operators, CRDs, Pod Identity roles).

        A `Karpenter` in `after` orders the chart after its CRDs and controller and deletes it first on teardown (so
        Karpenter drains the nodes of the node pools in it); `AutoModeNodes` orders it after the node role and its
        access entry (deleted after the chart); anything else is a plain dependency.
        """
        manifest = self.cluster.add_cdk8s_chart(id, chart)
        for prerequisite in after:
            if isinstance(prerequisite, (Karpenter, AutoModeNodes)):
                prerequisite.add_dependent(manifest)
            else:
                manifest.node.add_dependency(prerequisite)
        return manifest
