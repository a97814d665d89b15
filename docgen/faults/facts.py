"""What the fault matrix depends on in one environment, read from the synthesized output: the CloudFormation
template, the review YAML and the Helm values `write_review` writes (the files tests/golden holds), and the plan's
cold-start figures. The system nodes' CPU sums what the objects request exactly and approximates the EKS add-ons and
DaemonSets llm-eks does not size (SYSTEM_ADDON_MILLICORES, DAEMONSET_MILLICORES_PER_NODE)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ENVIRONMENTS = ("dev", "staging", "prod")
SYSTEM = {"llm-eks.io/node-role": "system"}
NODE_POOL = "llm-eks.io/node-pool"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE = "topology.kubernetes.io/zone"

# CPU the system nodes carry besides what the synthesized objects request (millicores), each an approximation of the
# component's usual default (not read in source): the EKS add-ons and DaemonSets llm-eks does not size.
SYSTEM_ADDON_MILLICORES = {
    "CoreDNS (2 x 100 m)": 200,
    "EBS CSI controller (2 x ~50 m)": 100,
    "AWS Load Balancer Controller (2 x 100 m, where installed)": 0,
    "Grafana sidecars, config reloaders (~100 m)": 100,
}
# DaemonSets on every system node (aws-node, kube-proxy, Pod Identity agent, node exporter, Secrets Store CSI and its
# provider, the node monitoring agent), approximate.
DAEMONSET_MILLICORES_PER_NODE = 300


@dataclass(frozen=True)
class Workload:
    """One served model as deployed."""

    name: str
    engine: str  # "vllm" or "ray-serve"
    min_replicas: int
    # Replicas of the on-demand floor (its own Deployment, on-demand only): 0 without one.
    floor: int
    # The floor's zone spread is a requirement (DoNotSchedule).
    floor_spread_required: bool
    # Capacity types and instance types of the pool the other replicas run on; NodePools it may fall back to.
    capacity_types: tuple[str, ...]
    instance_types: tuple[str, ...]
    fallback_pools: tuple[str, ...]
    # Where the weights come from at start: "staged" (S3, waiting for the marker), "s3", "hub".
    weights: str
    # The serving pod mounts a Secrets Manager secret (CSI): its start needs Secrets Manager.
    secrets: bool
    # The vLLM liveness probe sees a stalled engine.
    stall_probe: bool
    # Ray Serve: the head on the system nodes; GCS fault tolerance.
    head_on_system: bool = False
    gcs_fault_tolerance: bool = False
    # The plan's figures: a replica on a new node, the start-up of a container on its node (weights + warm-up).
    cold_start_s: int = 0
    startup_s: int = 0
    # A disaggregated vLLM workload: its prefill Deployment or LeaderWorkerSet (`<name>-prefill`) beside the decode
    # one, and the pods of one prefill replica (> 1: a LeaderWorkerSet group spanning nodes).
    prefill_pool: bool = False
    prefill_group_size: int = 1

    @property
    def floor_holds_minimum(self) -> bool:
        return self.floor >= self.min_replicas > 0


@dataclass(frozen=True)
class EnvFacts:
    """What the faults depend on in one environment."""

    name: str
    zones: int
    workloads: tuple[Workload, ...]
    prometheus_replicas: int
    prometheus_zone_spread: bool
    alertmanager_replicas: int
    alertmanager_receivers: tuple[str, ...]
    query_endpoint_replicas: int
    keda_reads_query_endpoint: bool
    keda_metrics_servers: int
    keda_metrics_server_pdb: bool
    scaled_objects_fail_safe: bool
    karpenter_replicas: int
    node_repair: bool
    deadmans_alarm: bool
    stack_failure_rule: bool
    gateway: bool
    # The gateway's Envoy pods (EnvoyProxy envoyDeployment.replicas; each carries the AI Gateway's processor).
    envoy_replicas: int
    picker_replicas: int
    system_nodes: int
    system_instance_type: str
    system_millicores: int
    alerts: frozenset[str] = field(default_factory=frozenset)

    @property
    def system_allocatable_millicores(self) -> int | None:
        """CPU one system node offers pods (EKS's kube-reserved formula), None for a type this does not know."""
        vcpus = _vcpus(self.system_instance_type)
        if vcpus is None:
            return None
        reserved = 60 + 10 + (10 * min(max(vcpus - 2, 0), 2)) + 2.5 * max(vcpus - 4, 0)
        return int(vcpus * 1000 - reserved)

    @property
    def survives_a_system_node(self) -> bool | None:
        allocatable = self.system_allocatable_millicores
        if allocatable is None:
            return None
        return self.system_millicores <= (self.system_nodes - 1) * allocatable

    @classmethod
    def read(cls, outdir: Path, env: str, plans: Mapping[str, tuple[int, int]]) -> EnvFacts:
        """The facts of `env` from a synth output folder; `plans` maps a workload name to its planned (cold start on
        a new node, start-up on its node) seconds."""
        template = json.loads((outdir / f"LlmEks-{env}.template.json").read_text())
        folder = outdir / "manifests" / env
        objects: list[dict[str, Any]] = []
        for path in sorted(folder.glob("*.yaml")):
            if path.name != "helm-releases.yaml":
                objects += [o for o in yaml.safe_load_all(path.read_text()) if o]
        releases = [r for r in yaml.safe_load_all((folder / "helm-releases.yaml").read_text()) if r]
        values = {r["release"]: r["values"] or {} for r in releases}
        return _facts(env, template, objects, values, plans)


def _vcpus(instance_type: str) -> int | None:
    """vCPUs of a general-purpose, compute or memory type (m7i.xlarge: 4), None for another."""
    match = re.fullmatch(r"[cmr]\d+[a-z]*\.(\d*)(x?)large", instance_type)
    if not match:
        return None
    factor = int(match.group(1) or 1)
    return 4 * factor if match.group(2) else 2


def _dig(value: Any, *path: str, default: Any = None) -> Any:
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return default
        value = value[key]
    return value


def _millicores(quantity: Any) -> int:
    text = str(quantity)
    return int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)


def _pod_millicores(pod: Mapping[str, Any]) -> int:
    return sum(_millicores(_dig(c, "resources", "requests", "cpu", default="0")) for c in pod.get("containers", []))


def _by_kind(objects: Iterable[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def _named(objects: Iterable[dict[str, Any]], kind: str, name: str) -> dict[str, Any] | None:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found[0] if found else None


def _pool_requirements(objects: list[dict[str, Any]], pool: str) -> dict[str, tuple[str, ...]]:
    node_pool = _named(objects, "NodePool", pool)
    if node_pool is None:
        return {}
    return {
        r["key"]: tuple(r.get("values", ())) for r in _dig(node_pool, "spec", "template", "spec", "requirements") or []
    }


def _pools_of(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The NodePools a pod may run on: its node selector's, or its node affinity's."""
    if NODE_POOL in (pod.get("nodeSelector") or {}):
        return (pod["nodeSelector"][NODE_POOL],)
    terms = _dig(pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    for term in terms or []:
        for expression in term.get("matchExpressions", []):
            if expression["key"] == NODE_POOL:
                return tuple(expression["values"])
    return ()


def _weights(pod: Mapping[str, Any], args: list[str]) -> str:
    if any(c["name"] == "wait-for-weights" for c in pod.get("initContainers", [])):
        return "staged"
    return "s3" if args and str(args[0]).startswith("s3://") else "hub"


def _csi_secrets(pod: Mapping[str, Any]) -> bool:
    return any(_dig(v, "csi", "driver") == "secrets-store.csi.k8s.io" for v in pod.get("volumes", []))


def _vllm_workloads(objects: list[dict[str, Any]], plans: Mapping[str, tuple[int, int]]) -> list[Workload]:
    out = []
    for deployment in _by_kind(objects, "Deployment") + _by_kind(objects, "LeaderWorkerSet"):
        labels = deployment["metadata"].get("labels", {})
        if labels.get("app.kubernetes.io/name") != "vllm":
            continue
        name = deployment["metadata"]["name"]
        if deployment["kind"] == "Deployment":
            pod = deployment["spec"]["template"]["spec"]
        else:
            pod = deployment["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
        scaled = _named(objects, "ScaledObject", name)
        floor_object = _named(objects, "Deployment", f"{name}-floor")
        floor = floor_object["spec"]["replicas"] if floor_object else 0
        floor_pod = floor_object["spec"]["template"]["spec"] if floor_object else {}
        spread = [c for c in floor_pod.get("topologySpreadConstraints", []) if c["topologyKey"] == ZONE]
        minimum = (scaled["spec"]["minReplicaCount"] if scaled else deployment["spec"].get("replicas", 1)) + floor
        pools = _pools_of(pod)
        primary = _pool_requirements(objects, pools[0]) if pools else {}
        (container,) = [c for c in pod["containers"] if c["name"] == "vllm"]
        cold, startup = plans[name]
        out.append(
            Workload(
                name=name,
                engine="vllm",
                min_replicas=minimum,
                floor=floor,
                floor_spread_required=bool(spread) and all(c["whenUnsatisfiable"] == "DoNotSchedule" for c in spread),
                capacity_types=primary.get(CAPACITY_TYPE, ()),
                instance_types=primary.get("node.kubernetes.io/instance-type", ()),
                fallback_pools=pools[1:],
                weights=_weights(pod, container.get("args", [])),
                secrets=_csi_secrets(pod),
                stall_probe="exec" in container.get("livenessProbe", {}),
                cold_start_s=cold,
                startup_s=startup,
                prefill_pool=bool(_prefill_pool(objects, name)),
                prefill_group_size=_prefill_pool(objects, name).get("size", 1),
            )
        )
    return out


def _prefill_pool(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The prefill pool of vLLM workload `name`: {} without one; {"size": pods per group} for a LeaderWorkerSet."""
    if _named(objects, "Deployment", f"{name}-prefill") is not None:
        return {"size": 1}
    lws = _named(objects, "LeaderWorkerSet", f"{name}-prefill")
    return {} if lws is None else {"size": int(lws["spec"]["leaderWorkerTemplate"]["size"])}


def _ray_workloads(objects: list[dict[str, Any]], plans: Mapping[str, tuple[int, int]]) -> list[Workload]:
    out = []
    for service in _by_kind(objects, "RayService"):
        name = service["metadata"]["name"]
        config = service["spec"]["rayClusterConfig"]
        serve = yaml.safe_load(service["spec"]["serveConfigV2"])
        llm = serve["applications"][0]["args"]["llm_configs"][0]
        head = config["headGroupSpec"]["template"]["spec"]
        (workers,) = config["workerGroupSpecs"]
        worker = workers["template"]["spec"]
        source = str(llm["model_loading_config"]["model_source"])
        staged = any(c["name"] == "wait-for-weights" for c in worker.get("initContainers", []))
        pools = _pools_of(worker)
        primary = _pool_requirements(objects, pools[0]) if pools else {}
        cold, startup = plans[name]
        out.append(
            Workload(
                name=name,
                engine="ray-serve",
                min_replicas=int(llm["deployment_config"]["autoscaling_config"]["min_replicas"]),
                floor=0,
                floor_spread_required=False,
                capacity_types=primary.get(CAPACITY_TYPE, ()),
                instance_types=primary.get("node.kubernetes.io/instance-type", ()),
                fallback_pools=pools[1:],
                weights="staged" if staged else ("s3" if source.startswith("s3://") else "hub"),
                secrets=_csi_secrets(worker),
                stall_probe=False,
                head_on_system=head.get("nodeSelector") == SYSTEM,
                gcs_fault_tolerance="gcsFaultToleranceOptions" in config,
                cold_start_s=cold,
                startup_s=startup,
            )
        )
    return out


# Where an EnvoyProxy sets its Envoy pods' replicas.
ENVOY_REPLICAS = ("spec", "provider", "kubernetes", "envoyDeployment", "replicas")


def _system_millicores(objects: list[dict[str, Any]], values: Mapping[str, Any], nodes: int) -> int:
    """CPU requested on the system nodes: the objects pinned there, the Helm releases' sized pods, the add-ons and
    DaemonSets llm-eks does not size (approximations above)."""
    total = 0
    for o in objects:
        if o["kind"] in ("Deployment", "StatefulSet"):
            pod = o["spec"]["template"]["spec"]
            if all(pod.get("nodeSelector", {}).get(k) == v for k, v in SYSTEM.items()):
                total += _pod_millicores(pod) * o["spec"].get("replicas", 1)
        elif o["kind"] == "RayService":
            head = o["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
            if head.get("nodeSelector") == SYSTEM:
                total += _pod_millicores(head)
    karpenter = values.get("karpenter", {})
    total += _millicores(_dig(karpenter, "controller", "resources", "requests", "cpu", default="0")) * karpenter.get(
        "replicas", 2
    )
    keda = values.get("keda", {})
    for part, replicas in (("operator", "operator"), ("metricServer", "metricsServer")):
        cpu = _dig(keda, "resources", part, "requests", "cpu", default="0")
        total += _millicores(cpu) * _dig(keda, replicas, "replicaCount", default=1)
    total += 50 * _dig(keda, "webhooks", "replicaCount", default=1)  # the chart's webhook default, approximately
    kps = values.get("kube-prometheus-stack", {})
    prometheus = _dig(kps, "prometheus", "prometheusSpec", default={})
    per_prometheus = _millicores(_dig(prometheus, "resources", "requests", "cpu", default="0"))
    per_prometheus += _millicores(_dig(prometheus, "thanos", "resources", "requests", "cpu", default="0"))
    total += per_prometheus * prometheus.get("replicas", 1)
    alertmanager = _dig(kps, "alertmanager", "alertmanagerSpec", default={})
    total += _millicores(_dig(alertmanager, "resources", "requests", "cpu", default="0")) * alertmanager.get(
        "replicas", 1
    )
    for part in (("prometheusOperator",), ("grafana",), ("kube-state-metrics",)):
        total += _millicores(_dig(kps, *part, "resources", "requests", "cpu", default="0"))
    if "kuberay-operator" in values:
        total += _millicores(_dig(values["kuberay-operator"], "resources", "requests", "cpu", default="0"))
    # The gateway's controllers, rate-limit service and operator (Helm values); its Envoy pods (EnvoyProxy objects).
    eg = values.get("eg", {})
    total += _millicores(_dig(eg, "deployment", "envoyGateway", "resources", "requests", "cpu", default="0")) * _dig(
        eg, "deployment", "replicas", default=1
    )
    limiter = _dig(eg, "config", "envoyGateway", "provider", "kubernetes", "rateLimitDeployment", default={})
    total += _millicores(_dig(limiter, "container", "resources", "requests", "cpu", default="0")) * limiter.get(
        "replicas", 1
    )
    controller = _dig(values.get("aieg", {}), "controller", default={})
    total += _millicores(_dig(controller, "resources", "requests", "cpu", default="0")) * controller.get(
        "replicaCount", 1
    )
    secrets = values.get("external-secrets", {})
    total += _millicores(_dig(secrets, "resources", "requests", "cpu", default="0")) * secrets.get("replicaCount", 1)
    for proxy in _by_kind(objects, "EnvoyProxy"):
        envoy = _dig(proxy, "spec", "provider", "kubernetes", "envoyDeployment", default={})
        if all(_dig(envoy, "pod", "nodeSelector", default={}).get(k) == v for k, v in SYSTEM.items()):
            cpu = _millicores(_dig(envoy, "container", "resources", "requests", "cpu", default="0"))
            total += cpu * envoy.get("replicas", 1)
    if "aws-load-balancer-controller" in values:
        total += 200
    return total + sum(SYSTEM_ADDON_MILLICORES.values()) + DAEMONSET_MILLICORES_PER_NODE * nodes


def _facts(
    env: str,
    template: Mapping[str, Any],
    objects: list[dict[str, Any]],
    values: Mapping[str, Any],
    plans: Mapping[str, tuple[int, int]],
) -> EnvFacts:
    resources = template["Resources"].values()
    subnets = [r for r in resources if r["Type"] == "AWS::EC2::Subnet"]
    zones = len({json.dumps(r["Properties"].get("AvailabilityZone"), sort_keys=True) for r in subnets})
    (group,) = [r["Properties"] for r in resources if r["Type"] == "AWS::EKS::Nodegroup"]
    kps = values["kube-prometheus-stack"]
    prometheus = kps["prometheus"]["prometheusSpec"]
    alertmanager = kps["alertmanager"]
    keda = values["keda"]
    scaled = _by_kind(objects, "ScaledObject")
    triggers = [t for s in scaled for t in s["spec"]["triggers"] if t["type"] == "prometheus"]
    pickers = [
        o
        for o in _by_kind(objects, "Deployment")
        if o["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "endpoint-picker"
    ]
    query = _named(objects, "Deployment", "thanos-query")
    proxies = _by_kind(objects, "EnvoyProxy")
    alerts = frozenset(
        r["alert"]
        for o in _by_kind(objects, "PrometheusRule")
        for g in o["spec"]["groups"]
        for r in g["rules"]
        if "alert" in r
    )
    nodes = group["ScalingConfig"]["MinSize"]
    return EnvFacts(
        name=env,
        zones=zones,
        workloads=tuple(_vllm_workloads(objects, plans) + _ray_workloads(objects, plans)),
        prometheus_replicas=prometheus.get("replicas", 1),
        prometheus_zone_spread=prometheus.get("podAntiAffinity") == "hard"
        and prometheus.get("podAntiAffinityTopologyKey") == ZONE,
        alertmanager_replicas=alertmanager["alertmanagerSpec"].get("replicas", 1),
        alertmanager_receivers=tuple(
            r["name"] for r in _dig(alertmanager, "config", "receivers", default=[]) if r["name"] != "null"
        ),
        query_endpoint_replicas=query["spec"]["replicas"] if query else 0,
        keda_reads_query_endpoint=bool(triggers)
        and all("thanos-query" in t["metadata"]["serverAddress"] for t in triggers),
        keda_metrics_servers=_dig(keda, "metricsServer", "replicaCount", default=1),
        keda_metrics_server_pdb=_dig(keda, "podDisruptionBudget", "metricServer") is not None,
        scaled_objects_fail_safe=bool(scaled)
        and all("fallback" in s["spec"] for s in scaled)
        and all(t["metadata"].get("ignoreNullValues") == "false" for t in triggers),
        karpenter_replicas=values["karpenter"].get("replicas", 1),
        node_repair=bool(_dig(values["karpenter"], "settings", "featureGates", "nodeRepair", default=False)),
        deadmans_alarm=any(
            r["Type"] == "AWS::CloudWatch::Alarm" and r["Properties"].get("MetricName") == "NumberOfMessagesPublished"
            for r in resources
        ),
        stack_failure_rule=any(
            r["Type"] == "AWS::Events::Rule"
            and "CloudFormation Stack Status Change" in _dig(r, "Properties", "EventPattern", "detail-type", default=[])
            for r in resources
        ),
        gateway=bool(proxies),
        envoy_replicas=min((_dig(p, *ENVOY_REPLICAS, default=1) for p in proxies), default=0),
        picker_replicas=min((p["spec"]["replicas"] for p in pickers), default=0),
        system_nodes=nodes,
        system_instance_type=group["InstanceTypes"][0],
        system_millicores=_system_millicores(objects, values, nodes),
        alerts=alerts,
    )
