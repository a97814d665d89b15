"""`InferenceStack`: the composition root for one environment (`LlmEks-<env>`): config and plan in, constructs out.

The order lives in the constructs (`InferenceCluster.add_*`, see constructs/composition.py), so a user's own app gets it
too. With `compute: auto-mode` EKS Auto Mode takes Karpenter's place (its built-in system pool runs the controllers; the
node pools wait for the node role of their NodeClasses instead of Karpenter's controller). On create: cluster and system
nodes, then the controllers (each after the system node group, or `helm --wait` times out with nowhere to run), then
node pools (after Karpenter's CRDs and controller), then workloads (after the operators whose CRDs and webhooks they
need, by the names in each chart's `needs`). On delete CloudFormation walks the same graph backwards: workloads go
first, node pools are deleted while Karpenter still runs (so it drains and terminates their nodes), and the teardown
safety net sweeps what is left before the VPC goes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlparse

import aws_cdk as cdk
import cdk8s
from aws_cdk import aws_ec2 as ec2
from constructs import Construct, IConstruct

from llm_eks.config import ACCEPTED_RISKS, ALPHA_FEATURES, EnvironmentConfig
from llm_eks.config.capacity import reservation_warnings
from llm_eks.constructs.addons import PodIdentityRole
from llm_eks.constructs.api_key import GeneratedApiKey, GeneratedApiKeyProps
from llm_eks.constructs.audit import ObjectAccessTrail, ObjectAccessTrailProps, record_access_elsewhere
from llm_eks.constructs.auto_mode import AutoModeNodes
from llm_eks.constructs.cluster import InferenceCluster, InferenceClusterProps
from llm_eks.constructs.composition import as_icluster
from llm_eks.constructs.crds import (
    AI_GATEWAY_CRDS,
    ENVOY_GATEWAY_CRDS,
    GATEWAY_API_CRDS,
    INFERENCE_POOL_CRD,
    LLMD_CRDS,
)
from llm_eks.constructs.envoy_gateway import EnvoyGatewayOptions
from llm_eks.constructs.gpu_devices import gpu_options_for
from llm_eks.constructs.karpenter import Karpenter, KarpenterOptions
from llm_eks.constructs.keda import KedaOptions
from llm_eks.constructs.lws import LeaderWorkerSetOptions
from llm_eks.constructs.model_access import ModelWeightsAccessOptions
from llm_eks.constructs.observability import ObservabilityOptions
from llm_eks.constructs.placement_groups import ClusterPlacementGroups
from llm_eks.constructs.secrets import SecretsStoreCsi
from llm_eks.constructs.verify_runner import VerifyRunner, VerifyRunnerProps, VerifyTrust
from llm_eks.constructs.weights_bucket import WeightsBucket, WeightsBucketProps
from llm_eks.infra.annotations import annotate_plan_warnings
from llm_eks.infra.charts import ChartPlan, addons, build_charts, efa_node_classes, service_account, workload_secrets
from llm_eks.infra.workloads import VllmWorkload, Workload, build_workloads
from llm_eks.infra.workloads.keys import generated_keys
from llm_eks.manifests.alerting import used_secret_receivers
from llm_eks.manifests.benchmark import TOKENIZER_FILES
from llm_eks.manifests.gateway import GATEWAY_NAMESPACE
from llm_eks.manifests.gateway.props import TENANT_HEADER
from llm_eks.manifests.gateway.usage import TENANT as TENANT_LABEL
from llm_eks.manifests.node_pools import NodePoolsChart
from llm_eks.manifests.ray_serve import RayServeChart
from llm_eks.manifests.verifier import rbac_objects
from llm_eks.manifests.vllm import VllmChart
from llm_eks.manifests.vllm.compile_job import writer_name
from llm_eks.manifests.weights_staging import WeightsStagingProps, staging_key
from llm_eks.planner import Plan
from llm_eks.planner.compute_mode import AUTO_MODE

# Why a weights bucket without the stack's trail has no server access logs: the environment turned the trail off,
# which its config allows only where an organisation trail records the bucket's data events.
ORGANISATION_TRAIL = (
    "weights_bucket.data_events_trail is off: the environment says an organisation trail records its data events."
)


class InferenceStack(cdk.Stack):
    """One environment: cluster, capacity, operators and workloads, in dependency order."""

    def __init__(
        self,
        scope: Construct,
        config: EnvironmentConfig,
        plans: Plan | Sequence[Plan],
        workloads: Workload | Sequence[Workload] | None = None,
        *,
        verifier: VerifyTrust | None = None,
        **kwargs: Any,
    ) -> None:
        """`plans`: one per workload in `config.served` order (a single Plan for a one-workload environment);
        `workloads`: their chart props, built (and validated) from config and plans when not given;
        `verifier`: the one role (the promotion pipeline's verify step) that may start `llm-eks verify` here
        (VerifyRunner)."""
        self.plans: tuple[Plan, ...] = (plans,) if isinstance(plans, Plan) else tuple(plans)
        env = cdk.Environment(account=config.account, region=config.region) if config.account else None
        summary = "; ".join(p.summary_line() for p in self.plans)
        super().__init__(
            scope, config.stack_name, env=env, description=f"llm-eks {config.name}: {summary}"[:1024], **kwargs
        )
        self.config = config
        # Chart props are derived (and validated) before any construct is built.
        if workloads is None:
            workloads = build_workloads(config, self.plans, region=config.region)
        self.workloads: tuple[Workload, ...] = tuple(workloads) if isinstance(workloads, Sequence) else (workloads,)
        # The cdk8s app that holds this stack's charts; their objects also go to cdk.out/manifests/<env>/.
        self.k8s_app = cdk8s.App()
        self._charts: list[tuple[str, cdk8s.Chart]] = []
        self._review_only: list[tuple[str, cdk8s.Chart]] = []

        cdk.Tags.of(self).add("llm-eks:environment", config.name)
        for key, value in config.tags.items():
            cdk.Tags.of(self).add(key, value)
        # What production lets through by decision: a warning `cdk synth` prints on every synth (and `cdk synth
        # --strict` refuses), until the risk is removed from accepted_risks; `llm-eks verify` lists it too.
        for risk, reason in config.accepted_risks.items():
            cdk.Annotations.of(self).add_warning_v2(
                f"llm-eks:accepted-risk-{risk}", f"accepted risk {risk} ({ACCEPTED_RISKS[risk]}): {reason}"
            )
        for feature, reason in config.alpha_features.items():
            cdk.Annotations.of(self).add_info(f"alpha feature {feature} ({ALPHA_FEATURES[feature]}): {reason}")

        self.platform = InferenceCluster(self, "Platform", self._cluster_props(config))
        self.cluster = self.platform.cluster
        # What the node pools launch with: on EKS Auto Mode the node role of llm-eks's NodeClasses (Auto Mode runs
        # Karpenter and handles Spot interruptions itself); else the interruption queue and the controller, ordered
        # after the system nodes and the Pod Identity agent. The teardown safety net is ordered before the VPC, node
        # role and cluster by the construct itself.
        self.karpenter: Karpenter | None = None
        self.node_capacity: Karpenter | AutoModeNodes
        if config.compute == AUTO_MODE:
            self.node_capacity = self.platform.add_auto_mode_nodes()
        else:
            self.karpenter = self.node_capacity = self.platform.add_karpenter(
                KarpenterOptions(node_repair="node-repair" in config.alpha_features)
            )
        # The control plane calls webhooks and the external metrics API from its ENIs in the VPC's subnets.
        self._control_plane_cidrs = (config.vpc.cidr,)
        environment_addons = addons(self.workloads)
        routes = config.alerting.routes()
        # Receivers with a secret read it through the Secrets Store CSI driver: it goes in before Alertmanager.
        self.secrets_store: SecretsStoreCsi | None = (
            self.platform.add_secrets_store() if used_secret_receivers(routes) else None
        )
        self.observability = self.platform.add_observability(
            ObservabilityOptions(
                control_plane_cidrs=self._control_plane_cidrs,
                # Only KEDA's operator queries Prometheus from outside its namespace, and only where KEDA runs.
                prometheus_clients=ObservabilityOptions.prometheus_clients if "keda" in environment_addons else (),
                alert_routes=routes,
                alert_email=config.alerting.email,
                alert_topic_prefix=config.cluster_name,
                secrets_store=self.secrets_store,
            )
        )
        topics = self.observability.alert_topics
        cdk.CfnOutput(
            self, "AlertsTopicArn", value=topics.alerts.topic_arn, description="SNS topic every alert routed to sns"
        )
        self._addon_namespaces: list[dict[str, Any]] = list(self.observability.namespace_objects)
        # Read-only RBAC for `llm-eks verify` (group llm-eks-verify; an access entry maps a role to it): cluster-wide,
        # and a Role in the monitoring namespace, which comes with the observability stack.
        self.cluster.add_manifest("VerifierRbac", *rbac_objects()).node.add_dependency(self.observability)
        self.verify_runner = (
            None
            if verifier is None
            else VerifyRunner(
                self, "Verifier", VerifyRunnerProps(cluster=self.cluster, environment=config.name, trusted=verifier)
            )
        )
        self.api_keys = self._api_keys(config)
        # What a chart may need, by the names ChartPlan.needs uses (InferenceCluster.add_chart orders it after them).
        self._prerequisites: dict[str, tuple[IConstruct, ...]] = {
            "karpenter" if self.karpenter is not None else "auto-mode-nodes": (self.node_capacity,),
            "observability": (self.observability,),
        }
        for name in environment_addons:
            self._prerequisites[name] = self._add_addon(name)
        self.weights_bucket = self._weights_bucket(config)
        # Per workload: its S3 weights access, and the Pod Identity role its pods read secrets with.
        self._workload_prerequisites: dict[tuple[str | None, str], tuple[IConstruct, ...]] = {}
        for workload in self.workloads:
            self._add_workload_access(workload)
        # A cluster placement group per EFA node class (one AZ, one network segment), deleted only once Karpenter's
        # teardown has removed every instance (a group with instances in it cannot be deleted).
        self.placement_groups = ClusterPlacementGroups(
            self, "PlacementGroups", node_classes=efa_node_classes(self.workloads)
        )
        teardown = self.karpenter.teardown if self.karpenter is not None else None
        if teardown is not None and self.placement_groups.groups:
            teardown.run_before_deleting(*self.placement_groups.groups.values())
        self.charts = build_charts(
            self.k8s_app,
            config,
            self.workloads,
            node_role_name=self.node_capacity.node_role_name,
            # The EKS cluster security group lets nodes reach the control plane and each other.
            security_group_ids=(self.cluster.cluster_security_group_id,),
            weights_bucket=None if self.weights_bucket is None else self.weights_bucket.bucket_name,
            cache_signing_key=self._cache_signing_key(),
            cluster_oidc_issuer=self.cluster.cluster_open_id_connect_issuer_url,
            # Karpenter's EC2NodeClass selects a placement group by id, Auto Mode's NodeClass by name.
            placement_groups=self.placement_groups.names if self.karpenter is None else self.placement_groups.ids,
            # The tenants' keys are in this stack's region (a deploy-time value in an env-agnostic stack).
            region=self.region,
        )
        plans_by_key = {s.key: (s, p) for s, p in zip(config.served, self.plans, strict=True)}
        # Where the plans meet the environment's capacity reservations (a plan warning of its own id).
        capacity_warnings = reservation_warnings(config, self.plans)
        for planned in self.charts:
            if not planned.apply:
                self._review_only.append((planned.id, planned.chart))
                continue
            after = tuple(
                prerequisite for need in planned.needs for prerequisite in self._prerequisites_of(need, planned)
            )
            manifest = self.add_chart(planned.id, planned.chart, after=after)
            if isinstance(planned.chart, (VllmChart, RayServeChart)) and planned.workload is not None:
                # What the plan could not meet is said where the workload is applied: `cdk synth` shows it.
                served, workload_plan = plans_by_key[planned.workload.key]
                annotate_plan_warnings(
                    manifest,
                    workload_plan,
                    served.config.acknowledged_warnings,
                    extra=capacity_warnings.get(served.key, ()),
                )
            self._prerequisites[planned.id] = (manifest,)
        node_pools = next(c.chart for c in self.charts if c.id == "node-pools")
        if not isinstance(node_pools, NodePoolsChart):
            raise TypeError(f"the node-pools chart is a {type(node_pools).__name__}, not a NodePoolsChart")
        # The Neuron scheduler extension only where a pod takes some but not all Neuron chips of its node.
        contiguous = any(isinstance(w, VllmWorkload) and w.vllm.scheduler_name is not None for w in self.workloads)
        self.gpu_devices = self.platform.add_gpu_devices(gpu_options_for(node_pools.props, neuron_scheduler=contiguous))
        for objects in self.gpu_devices.namespace_objects.values():
            self._addon_namespaces += objects
        # Reviewed with the add-ons' cluster objects, last, as charts.addon_namespaces (which GitOps applies) has it.
        self._addon_namespaces += rbac_objects()

    @property
    def availability_zones(self) -> list[str]:
        """The configured zones, where the config names them: CDK's own answer for a stack with an account is a
        context lookup (ec2.Vpc asks for it to check the VPC's zones), and synth runs offline."""
        zones = self.config.vpc.availability_zones
        return list(zones) if zones else list(super().availability_zones)

    @property
    def plan(self) -> Plan:
        """The first workload's plan (the only one in a one-model environment)."""
        return self.plans[0]

    @property
    def workload(self) -> Workload:
        """The first workload's chart props (the only one in a one-model environment)."""
        return self.workloads[0]

    # -- composition --------------------------------------------------------------------------------------------

    def _cluster_props(self, config: EnvironmentConfig) -> InferenceClusterProps:
        props = InferenceClusterProps(
            cluster_name=config.cluster_name,
            vpc=self._imported_vpc(config) if config.vpc.imported else None,
            vpc_cidr=config.vpc.cidr,
            availability_zones=config.vpc.availability_zones,
            public_endpoint_cidrs=config.endpoint.public_cidrs,
            # Internal load balancers (the ALB, the gateway's NLB) get subnets of their own, so a NetworkPolicy can
            # admit them without admitting pods.
            load_balancer_subnet_cidrs=(
                config.vpc.load_balancer_subnet_cidrs()
                if (
                    (config.gateway is not None and config.gateway.expose == "nlb")
                    or any(s.config.alb is not None for s in config.served)
                )
                and not config.vpc.imported
                else ()
            ),
            admin_role_arns=config.admin_role_arns,
            rollout_role_arns=config.rollout_role_arns,
            auto_mode=config.compute == AUTO_MODE,
        )
        if props.auto_mode:
            return props  # Auto Mode's built-in system pool (config refuses system_nodes there)
        s = config.system_nodes
        return replace(
            props,
            system_instance_type=s.instance_type,
            system_min_size=s.min_size,
            system_desired_size=s.desired_size,
            system_max_size=s.max_size,
            system_disk_gib=s.disk_gib,
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

    def _api_keys(self, config: EnvironmentConfig) -> dict[str, GeneratedApiKey]:
        """The API key secrets the stack generates, by secret name: each workload's own (its server's key, and its
        tenant's credential at the gateway when no tenants are declared) and each declared tenant's without a secret
        of its own. No two workloads or tenants share one."""
        keys = {}
        for key in generated_keys(config, self.workloads):
            keys[key.secret_name] = GeneratedApiKey(self, key.construct_id, GeneratedApiKeyProps(key.secret_name))
            cdk.CfnOutput(self, f"{key.construct_id}SecretName", value=key.secret_name, description=key.description)
        return keys

    def _weights_bucket(self, config: EnvironmentConfig) -> WeightsBucket | None:
        """The environment's weights bucket (created, or an existing one to grant on); None when it has none."""
        b = config.weights_bucket
        if b is None:
            return None
        created = b.name is None
        endpoint = self.platform.s3_endpoint
        endpoints = (endpoint.vpc_endpoint_id,) if endpoint is not None else (config.vpc.s3_endpoint_id or "",)
        bucket = WeightsBucket(
            self,
            "Weights",
            WeightsBucketProps(
                cluster=as_icluster(self.cluster),
                existing_bucket_name=b.name,
                existing_kms_key_arn=b.kms_key_arn,
                # The pods reach S3 through the VPC's endpoint; an admin may work on the bucket from anywhere.
                vpc_endpoint_ids=endpoints if created else (),
                outside_vpc_role_arns=config.admin_role_arns if created else (),
            ),
        )
        if created and b.data_events_trail:
            # Production's records nobody in the account can delete before they expire (COMPLIANCE); elsewhere an
            # admin holding s3:BypassGovernanceRetention can, so the environment can still be torn down at once.
            lock = "COMPLIANCE" if config.production else "GOVERNANCE"
            ObjectAccessTrail(self, "WeightsAccess", ObjectAccessTrailProps(buckets=(bucket.bucket,), lock_mode=lock))
        elif created:
            record_access_elsewhere(bucket.bucket, ORGANISATION_TRAIL)
        cdk.CfnOutput(
            self, "WeightsBucketName", value=bucket.bucket_name, description="S3 bucket the staging Jobs fill"
        )
        return bucket

    def _add_addon(self, name: str) -> tuple[IConstruct, ...]:
        """Create an environment add-on (see charts.addons); return what the charts that need it wait for."""
        construct: IConstruct
        if name == "keda":
            keda = self.platform.add_keda(KedaOptions(control_plane_cidrs=self._control_plane_cidrs))
            # Its chart's PodMonitor is a prometheus-operator kind.
            keda.chart.node.add_dependency(self.observability.crds)
            self._addon_namespaces += keda.namespace_objects
            construct = keda
        elif name == "kuberay":
            kuberay = self.platform.add_kuberay()
            self._addon_namespaces += kuberay.namespace_objects
            construct = kuberay
        elif name == "lws":
            lws = self.platform.add_leader_worker_set(
                LeaderWorkerSetOptions(control_plane_cidrs=self._control_plane_cidrs)
            )
            self._addon_namespaces += lws.namespace_objects
            construct = lws
        elif name == "secrets":
            if self.secrets_store is None:
                self.secrets_store = self.platform.add_secrets_store()
            # The pods mount their generated keys at start: they must exist first.
            return self.secrets_store, *(k.secret for k in self.api_keys.values())
        elif name == "alb":
            # On EKS Auto Mode its own load balancing takes the Ingresses of class `alb`.
            construct = (
                self.platform.add_ingress_class()
                if self.karpenter is None
                else self.platform.add_load_balancer_controller()
            )
        elif name == "envoy-gateway":
            return self._add_gateway_platform()
        else:
            raise ValueError(f"unknown add-on {name!r}")  # a bug in charts.addons
        return (construct,)

    def _secrets(self) -> SecretsStoreCsi:
        """The Secrets Store CSI driver, which `addons` adds wherever a workload reads a secret."""
        if self.secrets_store is None:
            raise ValueError("a workload reads a secret but the secrets add-on was not added")  # a bug in addons()
        return self.secrets_store

    def _add_gateway_platform(self) -> tuple[IConstruct, ...]:
        """The gateway's controllers and their CRDs (which both discover once at start, so the CRDs come first), the
        counter store, and the operator that syncs the tenants' keys, with read access to exactly those keys."""
        crds = self.platform.add_pinned_crds(
            (*GATEWAY_API_CRDS, INFERENCE_POOL_CRD, *ENVOY_GATEWAY_CRDS, *AI_GATEWAY_CRDS, *LLMD_CRDS),
            id="GatewayCrds",
        )
        gateway = self.platform.add_envoy_gateway(
            EnvoyGatewayOptions(
                control_plane_cidrs=self._control_plane_cidrs,
                gateway_namespaces=(GATEWAY_NAMESPACE,),
                # The tenant the gateway authenticated, as the label the usage records and `llm-eks usage` sum by.
                metrics_request_headers={TENANT_HEADER: TENANT_LABEL},
            )
        )
        crds.add_dependent(gateway)
        secrets = self.platform.add_external_secrets()
        props = self.workloads[0].gateway
        assert props is not None  # the add-on comes with a gateway (charts.addons)
        for tenant in props.tenants:
            if tenant.api_key_secret is not None:
                secrets.add_secret(tenant.api_key_secret)
        self._addon_namespaces += [*gateway.namespace_objects, *secrets.namespace_objects]
        keys = tuple(k.secret for k in self.api_keys.values())
        return crds, gateway, secrets, *keys

    def _add_workload_access(self, workload: Workload) -> None:
        """The workload's own AWS access: its secrets (each by name) and its S3 weights, through its ServiceAccount's
        Pod Identity role.

        Its charts also wait for that role's Pod Identity association: a pod admitted before it exists gets no
        credentials from the webhook, and never reads the token or the weights.
        """
        namespace, account = service_account(workload)
        if workload.secrets:
            for secret_name in workload_secrets(workload):
                self._secrets().add_secret_reader(namespace, account, secret_name)
            identity = PodIdentityRole.for_service_account(as_icluster(self.cluster), namespace, account)
            self._workload_prerequisites[(workload.key, "secrets")] = (identity,)
        if workload.staging is not None:
            self._add_staging_access(workload, workload.staging)
        if isinstance(workload, VllmWorkload):
            self._add_benchmark_access(workload)
        if workload.weights_s3_uri is not None:
            uri = urlparse(workload.weights_s3_uri)
            prefix = uri.path.lstrip("/")
            weights = self.platform.add_model_weights_access(
                ModelWeightsAccessOptions(
                    bucket_name=uri.netloc,
                    prefix=prefix if not prefix or prefix.endswith("/") else f"{prefix}/",
                    service_account=account,
                    namespace=namespace,
                ),
                id="ModelWeights" if workload.key is None else f"ModelWeights-{workload.key}",
            )
            self._workload_prerequisites[(workload.key, "weights")] = (weights, weights.identity)

    def _add_staging_access(self, workload: Workload, staging: WeightsStagingProps) -> None:
        """Staged weights: the serving pods (vLLM's, or a RayService's head and workers, which share one
        ServiceAccount) read the prefix and their staging key's marker, the staging Job's own ServiceAccount writes
        the prefix and its markers (and reads the Hub token)."""
        if self.weights_bucket is None:
            raise ValueError("staged weights without a weights bucket")  # config validation refuses it
        bucket = self.weights_bucket
        namespace, account = service_account(workload)
        key = staging_key(staging)
        reader = bucket.add_reader(namespace, account, staging.prefix)
        bucket.add_marker_reader(namespace, account, staging.prefix, key)
        stager = bucket.add_stager(namespace, staging.name, staging.prefix)
        readers: tuple[IConstruct, ...] = (reader,)
        # Who waits for the weights: the serving pods, and the compile cache's writer (it runs the same server).
        waiting = [account]
        if isinstance(workload, VllmWorkload) and workload.vllm.compile_cache is not None:
            # Its one writer is the compile-cache Job's own ServiceAccount; the pods read and verify the cache.
            cache = workload.vllm.compile_cache
            writer = bucket.add_cache_writer(namespace, writer_name(workload.vllm), cache)
            bucket.add_cache_reader(namespace, account, cache)
            # It streams the staged weights as a replica does, once their marker is there.
            bucket.add_reader(namespace, writer_name(workload.vllm), staging.prefix)
            bucket.add_marker_reader(namespace, writer_name(workload.vllm), staging.prefix, key)
            readers = (reader, writer)
            waiting.append(writer_name(workload.vllm))
        stagers: tuple[IConstruct, ...] = (stager,)
        for _, adapter in workload.adapter_stagings:
            # Each adapter's Job writes its own prefix; the pods (and the cache's writer, which runs the same
            # server) read it and its marker, and fetch it at start.
            stagers += (bucket.add_stager(namespace, adapter.name, adapter.prefix),)
            for who in waiting:
                read = bucket.add_adapter_reader(namespace, who, adapter.prefix)
                bucket.add_marker_reader(namespace, who, adapter.prefix, staging_key(adapter))
                readers += (read,) if who == account else ()
        for job in (staging, *(a for _, a in workload.adapter_stagings)):
            if job.hf_token_secret is not None:
                self._secrets().add_secret_reader(namespace, job.name, job.hf_token_secret)
        self._workload_prerequisites[(workload.key, "weights")] = readers
        self._workload_prerequisites[(workload.key, "staging")] = stagers

    def _cache_signing_key(self) -> str | None:
        """The compile caches' signing key ARN, when a workload keeps a cache (the key exists once a writer does)."""
        if self.weights_bucket is None or not any(
            isinstance(w, VllmWorkload) and w.vllm.compile_cache is not None for w in self.workloads
        ):
            return None
        return self.weights_bucket.signing_key.key_arn

    def _add_benchmark_access(self, workload: VllmWorkload) -> None:
        """The benchmark Job's own ServiceAccount reads what a client needs: the API key, and the tokenizer (the
        staged files, or through the Hub token from the Hub)."""
        namespace, account = workload.vllm.namespace, workload.benchmark.name
        if workload.api_key_secret is not None:
            self._secrets().add_secret_reader(namespace, account, workload.api_key_secret)
        prefix = workload.benchmark.tokenizer_prefix
        if prefix is not None and self.weights_bucket is not None:
            self.weights_bucket.add_object_reader(namespace, account, prefix, TOKENIZER_FILES)
        elif prefix is None and workload.vllm.hf_token_secret is not None:
            self._secrets().add_secret_reader(namespace, account, workload.vllm.hf_token_secret)

    def _prerequisites_of(self, need: str, planned: ChartPlan) -> tuple[IConstruct, ...]:
        """What `need` of a chart stands for: an add-on or earlier chart, plus the chart's workload's own access."""
        key = planned.workload.key if planned.workload is not None else None
        own = self._workload_prerequisites.get((key, need), ()) if planned.workload is not None else ()
        if need in ("weights", "staging"):
            return own
        return (*self._prerequisites[need], *own)

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
