"""`InferenceStack`: the composition root for one environment (`LlmEks-<env>`): config and plan in, constructs out.

The order lives in the constructs (`InferenceCluster.add_*`, see constructs/composition.py), so a user's own app
gets it too. On create: cluster and system nodes, then the controllers (each after the system node group, or
`helm --wait` times out with nowhere to run), then node pools (after Karpenter's CRDs and controller), then
workloads (after the operators whose CRDs and webhooks they need, by the names in each chart's `needs`). On delete
CloudFormation walks the same graph backwards: workloads go first, node pools are deleted while Karpenter still runs
(so it drains and terminates their nodes), and the teardown safety net sweeps what is left before the VPC goes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import aws_cdk as cdk
import cdk8s
from aws_cdk import aws_ec2 as ec2
from constructs import Construct, IConstruct

from llm_eks.constructs.addons import PodIdentityRole
from llm_eks.constructs.api_key import GeneratedApiKey, GeneratedApiKeyProps
from llm_eks.constructs.cluster import InferenceCluster, InferenceClusterProps
from llm_eks.constructs.composition import as_icluster
from llm_eks.constructs.gpu_devices import gpu_options_for
from llm_eks.constructs.keda import KedaOptions
from llm_eks.constructs.model_access import ModelWeightsAccessOptions
from llm_eks.constructs.observability import ObservabilityOptions
from llm_eks.infra.annotations import annotate_plan_warnings
from llm_eks.infra.charts import addons, build_charts, service_account, workload_secrets
from llm_eks.infra.config import EnvironmentConfig
from llm_eks.infra.plan import Plan
from llm_eks.infra.workloads import Workload, build_workload, generated_api_key_secret
from llm_eks.manifests.node_pools import NodePoolsChart
from llm_eks.manifests.ray_serve import RayServeChart
from llm_eks.manifests.vllm import VllmChart


class InferenceStack(cdk.Stack):
    """One environment: cluster, capacity, operators and workloads, in dependency order."""

    def __init__(
        self,
        scope: Construct,
        config: EnvironmentConfig,
        plan: Plan,
        workload: Workload | None = None,
        **kwargs: Any,
    ) -> None:
        env = cdk.Environment(account=config.account, region=config.region) if config.account else None
        super().__init__(
            scope,
            config.stack_name,
            env=env,
            description=f"llm-eks {config.name}: {plan.summary_line()}"[:1024],
            **kwargs,
        )
        self.config = config
        self.plan = plan
        # Chart props are derived (and validated) before any construct is built.
        self.workload: Workload = workload or build_workload(config, plan, region=config.region)
        # The cdk8s app that holds this stack's charts; their objects also go to cdk.out/manifests/<env>/.
        self.k8s_app = cdk8s.App()
        self._charts: list[tuple[str, cdk8s.Chart]] = []
        self._review_only: list[tuple[str, cdk8s.Chart]] = []

        cdk.Tags.of(self).add("llm-eks:environment", config.name)
        for key, value in config.tags.items():
            cdk.Tags.of(self).add(key, value)

        self.platform = InferenceCluster(self, "Platform", self._cluster_props(config))
        self.cluster = self.platform.cluster
        # The interruption queue and the controller, ordered after the system nodes and the Pod Identity agent. The
        # teardown safety net is ordered before the VPC, node role and cluster by the construct itself.
        self.karpenter = self.platform.add_karpenter()
        # The control plane calls webhooks and the external metrics API from its ENIs in the VPC's subnets.
        self._control_plane_cidrs = (config.vpc.cidr,)
        keda = "keda" in addons(self.workload, config)
        self.observability = self.platform.add_observability(
            ObservabilityOptions(
                control_plane_cidrs=self._control_plane_cidrs,
                # Only KEDA's operator queries Prometheus from outside its namespace, and only where KEDA runs.
                prometheus_clients=ObservabilityOptions.prometheus_clients if keda else (),
            )
        )
        self._addon_namespaces: list[dict[str, Any]] = list(self.observability.namespace_objects)
        self.api_key = self._api_key(config)
        # What a chart may need, by the names ChartPlan.needs uses (InferenceCluster.add_chart orders it after them).
        self._prerequisites: dict[str, tuple[IConstruct, ...]] = {
            "karpenter": (self.karpenter,),
            "observability": (self.observability,),
        }
        for name in addons(self.workload, config):
            self._prerequisites[name] = self._add_addon(name, config)
        self.charts = build_charts(
            self.k8s_app,
            config,
            self.workload,
            node_role_name=self.karpenter.node_role_name,
            # The EKS cluster security group lets nodes reach the control plane and each other.
            security_group_ids=(self.cluster.cluster_security_group_id,),
        )
        for planned in self.charts:
            if not planned.apply:
                self._review_only.append((planned.id, planned.chart))
                continue
            after = tuple(prerequisite for need in planned.needs for prerequisite in self._prerequisites[need])
            manifest = self.add_chart(planned.id, planned.chart, after=after)
            if isinstance(planned.chart, (VllmChart, RayServeChart)):
                # What the plan could not meet is said where the workload is applied: `cdk synth` shows it.
                annotate_plan_warnings(manifest, plan, config.workload.acknowledged_warnings)
            self._prerequisites[planned.id] = (manifest,)
        node_pools = next(c.chart for c in self.charts if c.id == "node-pools")
        if not isinstance(node_pools, NodePoolsChart):
            raise TypeError(f"the node-pools chart is a {type(node_pools).__name__}, not a NodePoolsChart")
        self.gpu_devices = self.platform.add_gpu_devices(gpu_options_for(node_pools.props))
        for objects in self.gpu_devices.namespace_objects.values():
            self._addon_namespaces += objects

    # -- composition --------------------------------------------------------------------------------------------

    def _cluster_props(self, config: EnvironmentConfig) -> InferenceClusterProps:
        s = config.system_nodes
        return InferenceClusterProps(
            cluster_name=config.cluster_name,
            vpc=self._imported_vpc(config) if config.vpc.imported else None,
            vpc_cidr=config.vpc.cidr,
            availability_zones=config.vpc.availability_zones,
            public_endpoint_cidrs=config.endpoint.public_cidrs,
            # The internal ALB gets subnets of its own, so the serving port can admit it without admitting pods.
            load_balancer_subnet_cidrs=(
                config.vpc.load_balancer_subnet_cidrs()
                if config.workload.internal_alb and not config.vpc.imported
                else ()
            ),
            system_instance_type=s.instance_type,
            system_min_size=s.min_size,
            system_desired_size=s.desired_size,
            system_max_size=s.max_size,
            system_disk_gib=s.disk_gib,
            admin_role_arns=config.admin_role_arns,
        )

    def _imported_vpc(self, config: EnvironmentConfig) -> ec2.IVpc:
        v = config.vpc
        return ec2.Vpc.from_vpc_attributes(
            self,
            "ImportedVpc",
            vpc_id=v.vpc_id or "",
            availability_zones=list(v.availability_zones),
            private_subnet_ids=list(v.private_subnet_ids),
            public_subnet_ids=list(v.public_subnet_ids) or None,
        )

    def _api_key(self, config: EnvironmentConfig) -> GeneratedApiKey | None:
        """The generated API key secret, unless the key is off, the config names its own secret, or the engine has
        no key check."""
        if self.workload.api_key_secret is None or config.workload.api_key_secret is not None:
            return None
        name = generated_api_key_secret(config)
        api_key = GeneratedApiKey(self, "ApiKey", GeneratedApiKeyProps(secret_name=name))
        cdk.CfnOutput(self, "ApiKeySecretName", value=name, description="Secrets Manager secret holding the API key")
        return api_key

    def _add_addon(self, name: str, config: EnvironmentConfig) -> tuple[IConstruct, ...]:
        """Create an add-on (see charts.addons); return what the charts that need it wait for.

        With a token or S3 weights, the chart also waits for its ServiceAccount's Pod Identity association: a pod
        admitted before it exists gets no credentials from the webhook, and never reads the token or the weights.
        """
        namespace, account = service_account(self.workload)
        construct: IConstruct
        if name == "keda":
            keda = self.platform.add_keda(KedaOptions(control_plane_cidrs=self._control_plane_cidrs))
            self._addon_namespaces += keda.namespace_objects
            construct = keda
        elif name == "kuberay":
            kuberay = self.platform.add_kuberay()
            self._addon_namespaces += kuberay.namespace_objects
            construct = kuberay
        elif name == "secrets":
            secrets = self.platform.add_secrets_store()
            # The Hub token and the API key, each by name: the role reads exactly these.
            for secret_name in workload_secrets(self.workload):
                secrets.add_secret_reader(namespace, account, secret_name)
            # The pods mount the generated key at start: it must exist first.
            key = (self.api_key.secret,) if self.api_key is not None else ()
            return secrets, PodIdentityRole.for_service_account(as_icluster(self.cluster), namespace, account), *key
        elif name == "weights":
            uri = urlparse(config.workload.weights_s3_uri or "")
            prefix = uri.path.lstrip("/")
            weights = self.platform.add_model_weights_access(
                ModelWeightsAccessOptions(
                    bucket_name=uri.netloc,
                    prefix=prefix if not prefix or prefix.endswith("/") else f"{prefix}/",
                    service_account=account,
                    namespace=namespace,
                )
            )
            return weights, weights.identity
        elif name == "alb":
            construct = self.platform.add_load_balancer_controller()
        else:
            raise ValueError(f"unknown add-on {name!r}")  # a bug in charts.addons
        return (construct,)

    # -- charts ------------------------------------------------------------------------------------------------

    def add_chart(self, id: str, chart: cdk8s.Chart, *, after: tuple[IConstruct, ...] = ()) -> IConstruct:
        """Apply a cdk8s chart after the constructs it needs (operators, CRDs) and record it for review."""
        manifest = self.platform.add_chart(id, chart, after=after)
        self._charts.append((id, chart))
        return manifest

    def addon_namespace_objects(self) -> list[dict[str, Any]]:
        """The add-on namespaces this stack creates (with their Pod Security labels) and their NetworkPolicies, each
        applied before its add-on's Helm releases."""
        return [self.resolve(obj) for obj in self._addon_namespaces]

    def review_objects(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """Each chart's Kubernetes objects with CDK tokens resolved to CloudFormation references; charts that are
        applied by hand (the benchmark Job) come last."""
        return [(id, self.resolve(chart.to_json())) for id, chart in (*self._charts, *self._review_only)]
