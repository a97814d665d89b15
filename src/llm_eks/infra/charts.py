"""An environment's charts, in apply order, built from its workload props (infra/workloads.py): the one place charts
are built. The CDK stack applies them through the cluster; `llm-eks manifests` writes the same objects for GitOps.
Also which add-ons and secrets a workload's charts need before they apply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cdk8s

from llm_eks.config import EnvironmentConfig
from llm_eks.infra.workloads import Addon, RayServeWorkload, VllmWorkload, Workload
from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.autoscaling import VllmAutoscalingChart
from llm_eks.manifests.benchmark import BENCHMARK_APP, LOAD_ARGS, BenchmarkChart, load_template
from llm_eks.manifests.benchmark import service_account as benchmark_service_account
from llm_eks.manifests.gateway import GATEWAY_NAMESPACE, GatewayChart, ModelRouteChart, platform
from llm_eks.manifests.headroom import headroom_objects, priority_class
from llm_eks.manifests.labels import SYSTEM_NODE_LABEL, selector_labels, serving_selector
from llm_eks.manifests.monitoring import MonitoringChart
from llm_eks.manifests.monitoring_model import GpuMonitoringChart
from llm_eks.manifests.neuron_monitor import NeuronMonitorChart
from llm_eks.manifests.node_pools import NodePoolsChart, NodePoolsProps
from llm_eks.manifests.query_endpoint import query_objects
from llm_eks.manifests.ray_monitoring import RayMonitoringChart, pod_selector
from llm_eks.manifests.ray_serve import RayServeChart
from llm_eks.manifests.serving_objects import add_objects
from llm_eks.manifests.verifier import LOAD_GROUP, load_policy, load_rbac, rbac_objects, workload_rbac
from llm_eks.manifests.vllm import PORT, VllmChart
from llm_eks.manifests.vllm.disaggregated import ROLE_LABEL
from llm_eks.manifests.weights_staging import bucket_config_map, staging_objects
from llm_eks.planner.compute_mode import AUTO_MODE


@dataclass(frozen=True)
class ChartPlan:
    """One chart of an environment, in apply order, with what must exist in the cluster before it."""

    id: str
    chart: cdk8s.Chart
    # Prerequisites by name: "karpenter" (on EKS Auto Mode "auto-mode-nodes": the node role), "observability", "keda",
    # "kuberay", "lws", "secrets", "alb", "envoy-gateway" (the gateway's CRDs, Envoy Gateway, AI Gateway, the counter
    # store and the External Secrets Operator), "weights" (this chart's workload's S3 read access), "staging" (its
    # staging Job's write access), or the id of an earlier chart. The CDK stack maps each to a construct; a GitOps
    # pipeline to a sync wave.
    needs: tuple[str, ...] = ()
    # False: written for review only, applied by hand (a Job cannot be updated in place).
    apply: bool = True
    # The workload whose objects the chart holds (its secrets and weights are what "secrets" and "weights" mean).
    workload: Workload | None = None


def chart_id(workload: Workload, base: str) -> str:
    """`vllm`, `monitoring`, ... for the one-model shorthand; `<key>-vllm`, ... for a workload of `workloads`."""
    return base if workload.key is None else f"{workload.key}-{base}"


def service_account(workload: Workload) -> tuple[str, str]:
    """(namespace, name) of the workload pods' ServiceAccount, the subject of their Pod Identity association."""
    return workload.service_account


def workload_secrets(workload: Workload) -> tuple[str, ...]:
    """The Secrets Manager secrets (by name) the workload's ServiceAccount reads: the Hub token, the API key."""
    return workload.secrets


def prerequisites(workload: Workload) -> tuple[Addon, ...]:
    """The add-ons the workload chart itself waits for (besides its node pools)."""
    needs: list[Addon] = ["kuberay"] if isinstance(workload, RayServeWorkload) else []
    if isinstance(workload, VllmWorkload) and workload.vllm.nodes_per_replica > 1:
        needs.append("lws")
    # The Secrets Store driver for any pod of the workload that mounts a secret: the serving pods, or the staging Job
    # (the Hub token, which staged-weights serving pods never hold).
    staging_token = workload.staging is not None and workload.staging.hf_token_secret
    if workload.secrets or staging_token:
        needs.append("secrets")
    if workload.weights_s3_uri is not None:
        needs.append("weights")
    if workload.staging is not None:
        # Read access for the pods, write access for the staging Job.
        needs += ["weights", "staging"]
    if isinstance(workload, VllmWorkload) and workload.vllm.ingress is not None:
        needs.append("alb")
    return tuple(needs)


def addons(workloads: Sequence[Workload]) -> tuple[Addon, ...]:
    """Every add-on this environment installs besides Karpenter and observability, in a stable order. Ray Serve
    scales its own replicas, so KEDA comes only with vLLM (its autoscaling charts wait for it). S3 weights access
    is per workload (ChartPlan.workload), not an environment add-on. A gateway needs Envoy Gateway (with the AI
    Gateway, its CRDs, the counter store and the External Secrets Operator) and, for its NLB, the AWS Load Balancer
    Controller (on EKS Auto Mode, whose own load balancing makes the NLB, nothing more)."""
    wanted = {need for w in workloads for need in prerequisites(w)} - {"weights", "staging"}
    gateway = workloads[0].gateway if workloads else None
    if gateway is not None:
        wanted |= {"envoy-gateway", "alb"} if gateway.needs_load_balancer_controller else {"envoy-gateway"}
    if any(isinstance(w, VllmWorkload) for w in workloads):
        wanted.add("keda")
    order: tuple[Addon, ...] = ("kuberay", "lws", "secrets", "alb", "envoy-gateway", "keda")
    return tuple(name for name in order if name in wanted)


def efa_node_classes(workloads: Sequence[Workload]) -> tuple[str, ...]:
    """The EC2NodeClasses of the environment's EFA pools, each of which needs a cluster placement group."""
    return tuple(sorted({p.node_class for w in workloads for p in w.pools if p.efa_interfaces}))


def addon_namespaces(workloads: Sequence[Workload], config: EnvironmentConfig) -> list[dict[str, Any]]:
    """The namespaces of this environment's add-ons, at the constructs' defaults, each with its Pod Security labels
    and NetworkPolicies: what the CDK stack applies before each add-on's Helm releases, and what a GitOps pipeline
    applies before installing the add-ons itself (into these namespaces, without --create-namespace)."""
    # The control plane calls webhooks and the external metrics API from its ENIs in the VPC's subnets.
    cidrs = (config.vpc.cidr,)
    names = addons(workloads)
    keda = [netpol.pods(netpol.KEDA_OPERATOR_POD, netpol.KEDA_NAMESPACE)] if "keda" in names else []
    objects = netpol.monitoring_namespace(netpol.MONITORING_NAMESPACE, cidrs, keda)
    # The query endpoint in front of both Prometheus replicas (Observability applies it with the namespace).
    objects += query_objects(netpol.MONITORING_NAMESPACE, node_selector=dict([SYSTEM_NODE_LABEL]))
    if "kuberay" in names:
        objects += netpol.kuberay_namespace(netpol.KUBERAY_NAMESPACE)
    if "lws" in names:
        objects += netpol.lws_namespace(netpol.LWS_NAMESPACE, cidrs)
    if "keda" in names:
        objects += netpol.keda_namespace(netpol.KEDA_NAMESPACE, cidrs)
    if "envoy-gateway" in names:
        objects += gateway_platform_objects(cidrs)
    vendors = {p.vendor for w in workloads for p in w.pools}
    if "nvidia" in vendors:
        objects += netpol.nvidia_namespace(netpol.NVIDIA_NAMESPACE)
    if "neuron" in vendors:
        objects += netpol.neuron_namespace(netpol.NEURON_NAMESPACE)
    # The read-only RBAC of `llm-eks verify`: cluster-wide, and in the monitoring namespace (the workloads' charts carry
    # their namespaces' Roles).
    return objects + rbac_objects()


def gateway_platform_objects(control_plane_cidrs: Sequence[str]) -> list[dict[str, Any]]:
    """The namespaces of the gateway's platform, at the constructs' defaults (EnvoyGateway, ExternalSecrets)."""
    return [
        *platform.envoy_gateway_namespace(platform.ENVOY_GATEWAY_NAMESPACE, gateway_namespaces=(GATEWAY_NAMESPACE,)),
        *platform.ai_gateway_namespace(platform.AI_GATEWAY_NAMESPACE, control_plane_cidrs),
        *platform.counter_store(platform.ENVOY_GATEWAY_NAMESPACE),
        *platform.external_secrets_namespace(platform.EXTERNAL_SECRETS_NAMESPACE),
    ]


def build_charts(
    app: cdk8s.App,
    config: EnvironmentConfig,
    workloads: Sequence[Workload],
    *,
    node_role_name: str,
    security_group_ids: tuple[str, ...],
    weights_bucket: str | None = None,
    cache_signing_key: str | None = None,
    cluster_oidc_issuer: str | None = None,
    placement_groups: Mapping[str, str] | None = None,
    region: str | None = None,
) -> list[ChartPlan]:
    """Every chart of one environment: the node pools, then each workload's charts. The single place charts are
    built: the CDK stack applies these through the cluster, `llm-eks manifests` writes the same objects for GitOps.

    `weights_bucket`: the name of the environment's weights bucket (a CloudFormation reference in the stack), put
    into ConfigMap `llm-eks-weights` of each workload with staged weights; None leaves that ConfigMap out (GitOps
    with a bucket the stack creates: apply it with the stack output's name). `cache_signing_key`: the ARN of the KMS
    key the compile caches are signed with, in the same ConfigMap. `cluster_oidc_issuer`: the cluster's OIDC
    issuer URL, for a gateway that trusts the cluster's own service-account tokens. `placement_groups`: the cluster
    placement group of each EFA node class (efa_node_classes), by node class name: its id for Karpenter, its name on
    EKS Auto Mode. `region`: where the gateway's tenant keys are in Secrets Manager (default: the environment's
    region; the stack passes its own)."""
    v = config.vpc
    snapshots = [s.config.image_snapshot_id for s in config.served if s.config.image_snapshot_id is not None]
    pools = NodePoolsProps(
        cluster_name=config.cluster_name,
        node_role_name=node_role_name,
        # Workloads sharing a family share its pool (build_workloads merged them): one spec per pool name.
        gpu_pools=tuple({p.name: p for w in workloads for p in w.pools}.values()),
        cpu_pool=workloads[0].cpu_pool,
        security_group_ids=security_group_ids,
        subnet_ids=v.private_subnet_ids if v.imported else (),
        image_snapshot_id=snapshots[0] if snapshots else None,
        tags=dict(config.tags),
        placement_groups=dict(placement_groups or {}),
        compute=config.compute,
    )
    node_pools = NodePoolsChart(app, "node-pools", pools)
    if config.workloads and any(isinstance(w, VllmWorkload) and w.headroom is not None for w in workloads):
        # Several workloads: the placeholders' PriorityClass is nobody's; it goes with the capacity it reserves.
        add_objects(node_pools, [priority_class()])
    capacity = "auto-mode-nodes" if config.compute == AUTO_MODE else "karpenter"
    charts = [ChartPlan("node-pools", node_pools, needs=(capacity,))]
    nvidia = [w for w in workloads if w.gpu_pool.vendor == "nvidia"]
    if config.workloads and nvidia:
        # Several workloads: the cluster's one DCGM ServiceMonitor is nobody's (build_workloads gave it to none).
        targets = nvidia[0].monitoring.targets
        charts.append(
            ChartPlan(
                "gpu-monitoring",
                GpuMonitoringChart(app, "gpu-monitoring", targets, netpol.MONITORING_NAMESPACE),
                needs=("observability",),
            )
        )
    neuron = [w for w in workloads if isinstance(w, VllmWorkload) and w.neuron_monitor_image is not None]
    if neuron:
        # The cluster's one Neuron monitor, whichever workloads run on Neuron (manifests/neuron_monitor.py).
        assert neuron[0].neuron_monitor_image is not None
        charts.append(
            ChartPlan(
                "neuron-monitoring",
                NeuronMonitorChart(
                    app,
                    "neuron-monitoring",
                    image=neuron[0].neuron_monitor_image,
                    namespace=netpol.MONITORING_NAMESPACE,
                    scrape_interval=neuron[0].monitoring.targets.scrape_interval,
                ),
                needs=("observability",),
            )
        )
    for workload in workloads:
        if isinstance(workload, RayServeWorkload):
            charts += _ray_serve_charts(app, workload, weights_bucket)
        else:
            # A next version shares its current version's namespace, whose Roles and load policy name both load Jobs.
            loads = [
                w
                for w in workloads
                if isinstance(w, VllmWorkload) and (w is workload or (w.canary_of and w.canary_of == workload.key))
            ]
            charts += _vllm_charts(app, config, workload, weights_bucket, cache_signing_key, loads)
    return charts + _gateway_charts(app, workloads, cluster_oidc_issuer, region or config.region)


def _gateway_charts(
    app: cdk8s.App, workloads: Sequence[Workload], cluster_oidc_issuer: str | None, region: str | None
) -> list[ChartPlan]:
    """The gateway's namespace, then each workload's route (after the workload: its namespace comes with it); a next
    version has no route of its own."""
    shared = workloads[0].gateway
    if shared is None:
        return []
    if any(w.gateway is not shared for w in workloads):
        raise ValueError("every workload of an environment must carry the same gateway")  # a bug in the caller
    props = shared.with_cluster_issuer(cluster_oidc_issuer)
    needs = (
        ("envoy-gateway", "alb", "observability")
        if props.needs_load_balancer_controller
        else ("envoy-gateway", "observability")
    )
    charts = [ChartPlan("gateway", GatewayChart(app, "gateway", props, region), needs=needs)]
    for workload, route in zip(workloads, props.routes, strict=True):
        if not route.routed:
            continue
        route_id = chart_id(workload, "route")
        own = chart_id(workload, "ray-serve" if isinstance(workload, RayServeWorkload) else "vllm")
        charts.append(
            ChartPlan(
                route_id,
                ModelRouteChart(app, route_id, props, route),
                needs=(own, "envoy-gateway", "observability"),
                workload=workload,
            )
        )
    return charts


def _ray_serve_charts(app: cdk8s.App, workload: RayServeWorkload, weights_bucket: str | None) -> list[ChartPlan]:
    r = workload.ray
    ray_id, monitoring_id = chart_id(workload, "ray-serve"), chart_id(workload, "monitoring")
    ray = RayServeChart(app, ray_id, r)
    # The namespace's policies travel with the workload: one apply, so no pod ever runs unprotected.
    # Behind a gateway (which then authenticates: config refuses Ray Serve behind api-key), through it only.
    add_objects(
        ray, netpol.ray_policies(r.namespace, r.name, pod_selector(r.name), direct_clients=workload.gateway is None)
    )
    # What `llm-eks verify` reads in the namespace (group llm-eks-verify).
    add_objects(ray, workload_rbac(r.namespace))
    if workload.staging is not None:
        # As for vLLM: the staging Job and the workers that wait for it in one apply; no compile cache to sign.
        bucket = [] if weights_bucket is None else [bucket_config_map(r.namespace, weights_bucket)]
        add_objects(ray, [*bucket, *staging_objects(workload.staging)])
    return [
        ChartPlan(ray_id, ray, needs=("node-pools", *prerequisites(workload)), workload=workload),
        ChartPlan(
            monitoring_id,
            RayMonitoringChart(app, monitoring_id, workload.monitoring),
            needs=(ray_id, "observability"),
            workload=workload,
        ),
    ]


def _vllm_charts(
    app: cdk8s.App,
    config: EnvironmentConfig,
    workload: VllmWorkload,
    weights_bucket: str | None,
    cache_signing_key: str | None,
    loads: list[VllmWorkload],
) -> list[ChartPlan]:
    vllm = workload.vllm
    ids = {base: chart_id(workload, base) for base in ("vllm", "autoscaling", "monitoring", "benchmark")}
    vllm_chart = VllmChart(app, ids["vllm"], vllm)
    bench = workload.benchmark
    next_version = workload.canary_of is not None
    policies = netpol.vllm_policies(
        vllm.namespace,
        vllm.name,
        # Both Deployments' pods (the on-demand floor's too).
        serving_selector(vllm.name),
        PORT,
        benchmark=selector_labels(BENCHMARK_APP, bench.name),
        # Target type ip: the internal ALB's ENIs connect to the pods directly, from its own subnets (no pod's).
        alb_cidrs=config.vpc.load_balancer_subnet_cidrs() if vllm.ingress is not None else (),
        group=vllm.nodes_per_replica > 1,
        # Without a key of its own, behind the (then authenticating) gateway: clients come through it only.
        direct_clients=workload.gateway is None or vllm.api_key_secret is not None,
        # A next version shares its current version's namespace, whose chart carries the namespace's default-deny.
        namespace_default_deny=not next_version,
    )
    if vllm.disaggregation is not None:
        serving = serving_selector(vllm.name)
        policies += netpol.prefill_decode_policies(
            vllm.namespace, vllm.name, {**serving, ROLE_LABEL: "prefill"}, {**serving, ROLE_LABEL: "decode"}
        )
    add_objects(vllm_chart, policies)
    # What `llm-eks verify` reads in the namespace (group llm-eks-verify), and the load Job `--load` runs (group
    # llm-eks-load); the benchmark's ServiceAccount is applied with the workload, so that Job finds it.
    # A next version's namespace is its current version's, whose chart carries these Roles (naming both load Jobs).
    account = benchmark_service_account(vllm, bench)
    if next_version:
        add_objects(vllm_chart, [account])
    else:
        # Group llm-eks-load may create only these load Jobs, as verify builds them (its admission policy).
        jobs = [load_template(w.vllm, w.benchmark) for w in loads]
        load = [
            *load_rbac(vllm.namespace, [j["metadata"]["name"] for j in jobs]),
            *load_policy(vllm.namespace, jobs, LOAD_ARGS, LOAD_GROUP),
        ]
        add_objects(vllm_chart, [*workload_rbac(vllm.namespace), account, *load])
    if workload.headroom is not None:
        add_objects(vllm_chart, headroom_objects(workload.headroom))
    if workload.staging is not None:
        # The staging Job and the pods that wait for it travel together: one apply, one namespace.
        signing = cache_signing_key if vllm.compile_cache is not None else None
        # One ConfigMap per namespace: a next version reads its current version's.
        shared = weights_bucket is None or next_version
        bucket = [] if shared else [bucket_config_map(vllm.namespace, weights_bucket or "", signing)]
        adapters = [o for _, adapter in workload.adapter_stagings for o in staging_objects(adapter)]
        add_objects(vllm_chart, [*bucket, *staging_objects(workload.staging), *adapters])
    own = ids["vllm"]
    # A next version applies after its current version, whose chart creates the namespace it joins.
    after = (f"{workload.canary_of}-vllm",) if next_version else ()
    charts = [ChartPlan(own, vllm_chart, needs=("node-pools", *after, *prerequisites(workload)), workload=workload)]
    if not next_version:
        # A next version's replicas are its share of the pool, set by `llm-eks canary`: KEDA scales the current one.
        charts.append(
            ChartPlan(
                ids["autoscaling"],
                VllmAutoscalingChart(app, ids["autoscaling"], vllm, workload.autoscaling),
                (own, "keda"),
                workload=workload,
            )
        )
    return [
        *charts,
        ChartPlan(
            ids["monitoring"],
            MonitoringChart(app, ids["monitoring"], workload.monitoring),
            (own, "observability"),
            workload=workload,
        ),
        ChartPlan(
            ids["benchmark"],
            BenchmarkChart(app, ids["benchmark"], vllm, bench, with_service_account=False),
            needs=(own,),
            apply=False,
            workload=workload,
        ),
    ]
