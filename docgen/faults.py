"""The fault matrix of docs/concepts/faults.md: for each fault a GPU fleet sees and each environment of the default app
(cdk.json), whether the platform survives it (S: no user-visible impact), degrades (D: capacity or quality lost, the
service continues) or fails (F: an outage of a model, or no bound), what happens, how long, and what alerts.

Every cell is computed here from the synthesized output (`EnvFacts.read`: the CloudFormation template, the review
YAML and the Helm values `write_review` writes, the same files tests/golden holds) and from the plan's cold-start
figures, by the small functions under "Rows". `make golden` rewrites the page's generated block and
tests/test_fault_matrix.py fails when the block and the synthesized objects disagree, so the page cannot drift from
what is deployed.

Constants from upstream, each read at its pinned version:
- Karpenter 1.14.1 repairs a node whose AcceleratedHardwareReady condition has been False for 10 minutes
  (aws/karpenter-provider-aws@v1.14.1 pkg/cloudprovider/cloudprovider.go, RepairPolicies), when its NodeRepair
  feature gate is on; the EKS node monitoring agent v1.7.0 sets that condition on the Xids it treats as fatal.
- A pod on a node that stops answering is evicted after the default `node.kubernetes.io/unreachable` toleration,
  300 s, plus the node monitor's grace period (about 40 s): a zone's pods are replaced after about 6 minutes.
- The endpoint picker's standby takes the lease within controller-runtime's 15 s lease (llm-d-router v0.10.0).
- The stall probe restarts a stalled vLLM within 120 s + 2 x 30 s (manifests/vllm/liveness.py and its probe).
- The CloudWatch dead-man's alarm fires after two silent 5-minute periods.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from llm_eks.config import resilience

ENVIRONMENTS = ("dev", "staging", "prod")
SYSTEM = {"llm-eks.io/node-role": "system"}
NODE_POOL = "llm-eks.io/node-pool"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE = "topology.kubernetes.io/zone"
REPAIR_SECONDS = 600
UNREACHABLE_SECONDS = resilience.UNREACHABLE_SECONDS
STALL_DETECT_SECONDS = 180
PICKER_TAKEOVER_SECONDS = 15
DEADMAN_SECONDS = 600

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


# -- Facts read from the synthesized output --------------------------------------------------------------------------


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
            )
        )
    return out


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
    for release in ("kuberay-operator", "istiod"):
        if release in values:
            replicas = 2 if release == "istiod" else 1
            total += _millicores(_dig(values[release], "resources", "requests", "cpu", default="0")) * replicas
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
        gateway=_named(objects, "Deployment", "payload-processor") is not None,
        picker_replicas=min((p["spec"]["replicas"] for p in pickers), default=0),
        system_nodes=nodes,
        system_instance_type=group["InstanceTypes"][0],
        system_millicores=_system_millicores(objects, values, nodes),
        alerts=alerts,
    )


# -- Rows ------------------------------------------------------------------------------------------------------------

SURVIVES, DEGRADES, FAILS, NONE = "S", "D", "F", "—"
_ORDER = {NONE: 0, SURVIVES: 1, DEGRADES: 2, FAILS: 3}


@dataclass(frozen=True)
class Cell:
    verdict: str
    # What happens and what users see, for how long (one or more sentences).
    text: str
    # The alerts that fire (those present in the environment).
    alerts: tuple[str, ...] = ()


def _minutes(seconds: float) -> str:
    return f"≈{math.ceil(seconds / 60)} min"


def _worst(cells: list[tuple[str, str]]) -> str:
    return max((v for v, _ in cells), key=_ORDER.__getitem__, default=NONE)


def _per_workload(f: EnvFacts, judge: Callable[[Workload], tuple[str, str]]) -> tuple[str, str]:
    judged = [(w, *judge(w)) for w in f.workloads]
    verdict = _worst([(v, t) for _, v, t in judged])
    return verdict, " ".join(f"{w.name}: {t}" for w, _, t in judged)


def _alerts(f: EnvFacts, *names: str) -> tuple[str, ...]:
    return tuple(n for n in names if n in f.alerts)


def _judged(verdict: str, text: str, alerts: tuple[str, ...]) -> Cell:
    """A cell whose alerts fire only when the fault costs something (none where it is survived)."""
    return Cell(verdict, text, () if verdict in (SURVIVES, NONE) else alerts)


def spot_reclaim(f: EnvFacts) -> Cell:
    def judge(w: Workload) -> tuple[str, str]:
        if "spot" not in w.capacity_types and not w.floor:
            return SURVIVES, "no Spot capacity."
        if w.floor_holds_minimum:
            return SURVIVES, (
                f"its {w.floor} minimum replicas run on on-demand capacity; a reclaimed burst replica is back after "
                f"the cold start ({w.cold_start_s} s)."
            )
        if w.min_replicas == 1:
            return FAILS, f"its only replica may be on Spot: an outage of {w.cold_start_s} s (the cold start)."
        return DEGRADES, f"one replica fewer for {w.cold_start_s} s (the cold start)."

    verdict, text = _per_workload(f, judge)
    return _judged(verdict, text, _alerts(f, "VllmNoReadyReplica", "RayServeNoHealthyReplica"))


def zone_loss(f: EnvFacts) -> Cell:
    monitoring = (
        f.prometheus_replicas >= 2
        and f.prometheus_zone_spread
        and f.alertmanager_replicas >= 2
        and f.query_endpoint_replicas >= 2
        and f.keda_metrics_servers >= 2
    )
    parts = [
        "Monitoring, alerting and autoscaling keep running in the other zone (a Prometheus, an Alertmanager, a "
        "query endpoint and a KEDA metrics server in each)."
        if monitoring
        else "Monitoring may be lost with its zone: no metrics, no alerts, autoscaling frozen."
    ]
    replace_after = UNREACHABLE_SECONDS

    def judge(w: Workload) -> tuple[str, str]:
        if w.engine == "ray-serve" and not w.gcs_fault_tolerance:
            return FAILS, (
                "the Ray head (no GCS fault tolerance) or its only worker may be in the lost zone: the Ray cluster "
                f"restarts, {_minutes(replace_after + w.cold_start_s)} of outage."
            )
        if w.min_replicas == 1:
            return FAILS, (
                f"its only replica may be in the lost zone: replaced after {_minutes(replace_after)} (the unreachable "
                f"node's eviction), then the cold start: {_minutes(replace_after + w.cold_start_s)} of outage."
            )
        spread = "one floor replica per zone (required)" if w.floor_spread_required else "replicas spread over zones"
        return DEGRADES, (
            f"{spread}: half its replicas for {_minutes(replace_after + w.cold_start_s)} (their replacements in the "
            "other zone)."
        )

    verdict, text = _per_workload(f, judge)
    if not monitoring:
        verdict = max(verdict, DEGRADES, key=_ORDER.__getitem__)
    return _judged(verdict, " ".join([*parts, text]), _alerts(f, "VllmNoReadyReplica", "RayServeNoHealthyReplica"))


def system_node_lost(f: EnvFacts) -> Cell:
    allocatable = f.system_allocatable_millicores
    need, have = f.system_millicores, (f.system_nodes - 1) * (allocatable or 0)
    heads = [w for w in f.workloads if w.head_on_system]
    figures = (
        f"The controllers request ≈{need / 1000:.1f} CPU; {f.system_nodes - 1} remaining {f.system_instance_type} "
        f"offer ≈{have / 1000:.1f}."
    )
    if heads:
        return Cell(
            FAILS,
            f"{figures} The Ray head of {', '.join(w.name for w in heads)} runs on the system nodes: the Ray cluster "
            "restarts.",
        )
    if f.survives_a_system_node:
        return Cell(SURVIVES, f"{figures} Everything rescheduled fits on the others (two of each controller).")
    return Cell(DEGRADES, f"{figures} Some controllers stay Pending until the node group replaces the node.")


def xid_fatal(f: EnvFacts) -> Cell:
    def judge(w: Workload) -> tuple[str, str]:
        if not f.node_repair:
            return FAILS, (
                "node repair is off: the replica on the bad GPU fails until someone deletes its NodeClaim "
                "(`kubectl delete nodeclaim`), then the cold start."
            )
        bound = REPAIR_SECONDS + w.cold_start_s
        if w.min_replicas == 1:
            return FAILS, f"its only replica is lost until the node is repaired and replaced: {_minutes(bound)}."
        return DEGRADES, f"one replica fewer until the node is repaired and replaced: {_minutes(bound)}."

    verdict, text = _per_workload(f, judge)
    repair = (
        "The node monitoring agent marks the node AcceleratedHardwareReady=False; Karpenter replaces it after 10 "
        "minutes. "
        if f.node_repair
        else ""
    )
    return Cell(verdict, repair + text, _alerts(f, "GpuXidFatal", "VllmNoReadyReplica"))


def gpu_hang(f: EnvFacts) -> Cell:
    def judge(w: Workload) -> tuple[str, str]:
        if not w.stall_probe:
            return FAILS, (
                "requests to the hung replica wait until the client's timeout; no probe sees it (Ray Serve's "
                "health check calls the same engine check as /health): a person deletes the pod."
            )
        bound = STALL_DETECT_SECONDS + w.startup_s
        if w.min_replicas == 1:
            return FAILS, (
                f"the stall probe restarts it within {STALL_DETECT_SECONDS // 60} min, then it starts again on its "
                f"node ({w.startup_s} s): {_minutes(bound)} of outage."
            )
        return DEGRADES, (
            f"requests on the hung replica stall until the probe restarts it ({STALL_DETECT_SECONDS // 60} min) and "
            f"it starts again ({w.startup_s} s): {_minutes(bound)}."
        )

    verdict, text = _per_workload(f, judge)
    return Cell(verdict, text, _alerts(f, "VllmEngineStalled", "RayVllmEngineStalled"))


def picker_down(f: EnvFacts) -> Cell:
    if not f.picker_replicas:
        return Cell(NONE, "No endpoint picker.")
    if f.picker_replicas >= 2:
        return Cell(
            SURVIVES,
            f"The standby takes the lease within ≈{PICKER_TAKEOVER_SECONDS} s; meanwhile the pool fails open (round "
            "robin over its ready pods).",
            _alerts(f, "EndpointPickerStandbyMissing", "EndpointPickerDown"),
        )
    return Cell(
        DEGRADES,
        "The pool fails open (round robin) until the picker restarts: seconds, minutes on a lost node.",
        _alerts(f, "EndpointPickerDown"),
    )


def payload_processor_down(f: EnvFacts) -> Cell:
    if not f.gateway:
        return Cell(NONE, "No gateway.")
    return Cell(
        FAILS,
        "Both replicas down: its filter fails closed for the whole listener, so every request through the gateway "
        "fails until one is back (one replica lost is survived: two replicas, a PDB). Its replicas and failure mode "
        "belong to the gateway's choice (the tenants issue).",
        _alerts(f, "GatewayPayloadProcessorDown", "GatewayPayloadProcessorDegraded", "GatewayErrorRatioHigh"),
    )


def prometheus_down(f: EnvFacts) -> Cell:
    if f.prometheus_replicas >= 2 and f.query_endpoint_replicas >= 1 and f.keda_reads_query_endpoint:
        both = (
            "Both down: KEDA's fallback holds every count, and the dead-man's switch fires within "
            f"{DEADMAN_SECONDS // 60} minutes."
            if f.scaled_objects_fail_safe and f.deadmans_alarm
            else "Both down: autoscaling and alerting stop."
        )
        return Cell(SURVIVES, f"One replica down: the query endpoint answers from the other. {both}")
    return Cell(DEGRADES, "KEDA's triggers fail and the HPA freezes; no rule runs; dashboards and verify are blind.")


def alertmanager_down(f: EnvFacts) -> Cell:
    if f.alertmanager_replicas >= 2:
        both = " Both down: the dead-man's switch (CloudWatch) fires." if f.deadmans_alarm else ""
        return Cell(SURVIVES, f"One replica down: the other, in the other zone, sends every alert.{both}")
    return Cell(DEGRADES, "No alert is sent until it restarts.")


def series_missing(f: EnvFacts) -> Cell:
    vllm = [w for w in f.workloads if w.engine == "vllm"]
    if not vllm:
        return Cell(NONE, "No KEDA-scaled workload.")
    if f.scaled_objects_fail_safe:
        return Cell(
            DEGRADES,
            "While replicas are ready an empty result is an error: KEDA's fallback holds the current count (no scale "
            "down, no scale out) until the series return.",
            _alerts(f, "VllmSeriesAbsent", "KedaScalerErrors"),
        )
    return Cell(FAILS, "An empty result reads 0: the workload scales down to its minimum under load.")


def metrics_server_down(f: EnvFacts) -> Cell:
    if f.keda_metrics_servers >= 2 and f.keda_metrics_server_pdb:
        return Cell(SURVIVES, "Two replicas over zones and a PDB: the other serves the HPAs.")
    return Cell(DEGRADES, "HPAs cannot read external metrics: every count is frozen until it restarts.")


def karpenter_down(f: EnvFacts) -> Cell:
    if f.karpenter_replicas >= 2:
        return Cell(SURVIVES, "Two replicas with leader election: the other takes over.")
    return Cell(DEGRADES, "No node is launched or drained until it restarts.")


def _start_dependency(f: EnvFacts, depends: Callable[[Workload], bool], what: str, bound: str) -> Cell:
    def judge(w: Workload) -> tuple[str, str]:
        if not depends(w):
            return SURVIVES, f"its start does not need {what}."
        if w.min_replicas == 1:
            return FAILS, f"a replica starting then (a replacement, a scale-out) waits for {what}: {bound}."
        return DEGRADES, f"running replicas serve; one starting then waits for {what}: {bound}."

    return _judged(*_per_workload(f, judge), _alerts(f, "GpuPodsPendingTooLong", "VllmNoReadyReplica"))


def s3_down(f: EnvFacts) -> Cell:
    return _start_dependency(
        f,
        lambda w: w.weights in ("staged", "s3"),
        "S3",
        "the wait for the weights gives up after 10 minutes with one line and retries (Init:CrashLoopBackOff) until "
        "S3 is back",
    )


def hub_down(f: EnvFacts) -> Cell:
    return _start_dependency(f, lambda w: w.weights == "hub", "the Hugging Face Hub", "until the Hub is back")


def new_staging_key(f: EnvFacts) -> Cell:
    staged = [w for w in f.workloads if w.weights == "staged"]
    if not staged:
        return Cell(NONE, "No staged weights.")
    return Cell(
        SURVIVES,
        "One marker per staging key, written once: the running version's pods start at once while the new one "
        "stages; a staging that would replace a file the running key lists fails before it changes anything. The "
        "new version's pods wait for their own marker (GpuPodsPendingTooLong pages if its staging fails).",
    )


def crash_looping_deploy(f: EnvFacts) -> Cell:
    return Cell(
        DEGRADES,
        "The old replicas keep serving (no pod is removed before its replacement is ready); the rollout stalls and is "
        "not rolled back; a scale-out meanwhile partly lands on the crashing version. kube-prometheus-stack's "
        "KubePodCrashLooping and KubeDeploymentRolloutStuck page.",
    )


def flood(f: EnvFacts) -> Cell:
    return Cell(
        FAILS,
        "KEDA scales to the maximum, each replica after its cold start; beyond it vLLM's queue grows without bound "
        "and clients wait until their own timeout (no early rejection: the gateway's flow control belongs to the "
        "tenants issue).",
        _alerts(f, "VllmWaitingQueueGrowing", "VllmTimeToFirstTokenAboveSlo", "RayVllmWaitingQueueGrowing"),
    )


def failed_lambda(f: EnvFacts) -> Cell:
    alerted = " The stack's failure reaches the alerts topic (EventBridge rule)." if f.stack_failure_rule else ""
    return Cell(SURVIVES, f"CloudFormation rolls the update back; serving is untouched.{alerted}")


def corrupt_cache(f: EnvFacts) -> Cell:
    return Cell(
        SURVIVES,
        "The restore checks the KMS signature and each file's sha256; on any mismatch it discards the cache and vLLM "
        "compiles (tens of seconds more warm-up). A signed cache that crashes vLLM would crash-loop every new "
        "replica (KubePodCrashLooping pages): `compile_cache: false` on the workload retires it in one deploy.",
    )


def api_blip(f: EnvFacts) -> Cell:
    return Cell(SURVIVES, "Serving continues; scaling, provisioning and interruption handling pause.")


def ray_head_lost(f: EnvFacts) -> Cell:
    ray = [w for w in f.workloads if w.engine == "ray-serve"]
    if not ray:
        return Cell(NONE, "No Ray Serve workload.")

    def judge(w: Workload) -> tuple[str, str]:
        if w.gcs_fault_tolerance:
            return DEGRADES, "the workers keep serving while the head restarts (GCS fault tolerance)."
        return FAILS, (
            "no GCS fault tolerance: the Ray cluster and every replica restart, "
            f"{_minutes(w.cold_start_s)} (a documented single point of failure)."
        )

    judged = [(w, *judge(w)) for w in ray]
    verdict = _worst([(v, t) for _, v, t in judged])
    return Cell(verdict, " ".join(f"{w.name}: {t}" for w, _, t in judged), _alerts(f, "RayServeNoHealthyReplica"))


def capacity_unavailable(f: EnvFacts) -> Cell:
    def judge(w: Workload) -> tuple[str, str]:
        options = []
        if len(w.instance_types) > 1:
            options.append(f"{len(w.instance_types)} instance types")
        if len(set(w.capacity_types)) > 1:
            options.append("Spot and on-demand")
        if w.fallback_pools:
            options.append(f"a fallback family ({', '.join(w.fallback_pools)})")
        if options:
            return SURVIVES, f"its pool may launch {', '.join(options)}."
        return DEGRADES, "one instance type, one capacity type: no replacement or scale-out until capacity returns."

    return _judged(*_per_workload(f, judge), _alerts(f, "GpuPodsPendingTooLong"))


def secrets_down(f: EnvFacts) -> Cell:
    return _start_dependency(
        f, lambda w: w.secrets, "Secrets Manager", "its secret volume does not mount until Secrets Manager is back"
    )


@dataclass(frozen=True)
class Fault:
    title: str
    cell: Callable[[EnvFacts], Cell]


FAULTS = (
    Fault("Spot reclaim of a GPU node", spot_reclaim),
    Fault("Zone loss (one of two)", zone_loss),
    Fault("One system node lost", system_node_lost),
    Fault("GPU Xid fatal", xid_fatal),
    Fault("GPU hang without an Xid", gpu_hang),
    Fault("Endpoint picker down", picker_down),
    Fault("Payload processor down (both replicas)", payload_processor_down),
    Fault("Prometheus down (one replica)", prometheus_down),
    Fault("Alertmanager down (one replica)", alertmanager_down),
    Fault("vLLM series missing under load", series_missing),
    Fault("KEDA metrics server down", metrics_server_down),
    Fault("Karpenter controller down during a reclaim", karpenter_down),
    Fault("S3 down during a cold start", s3_down),
    Fault("Hugging Face Hub down during a cold start", hub_down),
    Fault("A new staging key while the old version runs", new_staging_key),
    Fault("Crash-looping deploy", crash_looping_deploy),
    Fault("10x request flood", flood),
    Fault("Failed custom-resource Lambda", failed_lambda),
    Fault("Corrupt compile cache", corrupt_cache),
    Fault("API-server blip", api_blip),
    Fault("Ray head lost", ray_head_lost),
    Fault("GPU capacity unavailable for the pool", capacity_unavailable),
    Fault("Secrets Manager down during a cold start", secrets_down),
)


def matrix(facts: Mapping[str, EnvFacts]) -> list[tuple[Fault, dict[str, Cell]]]:
    return [(fault, {env: fault.cell(f) for env, f in facts.items()}) for fault in FAULTS]


def counts(rows: list[tuple[Fault, dict[str, Cell]]], env: str) -> dict[str, int]:
    verdicts = [cells[env].verdict for _, cells in rows]
    return {v: verdicts.count(v) for v in (SURVIVES, DEGRADES, FAILS)}


def markdown(facts: Mapping[str, EnvFacts]) -> str:
    """The page's generated block: the matrix, the counts, then each fault per environment."""
    rows = matrix(facts)
    envs = list(facts)
    out = [f"| # | Fault | {' | '.join(envs)} |", f"|---|---|{'---|' * len(envs)}"]
    for i, (fault, cells) in enumerate(rows, 1):
        out.append(f"| {i} | [{fault.title}](#{_anchor(i, fault)}) | {' | '.join(cells[e].verdict for e in envs)} |")
    out.append("")
    tallies = []
    for env in envs:
        c = counts(rows, env)
        tallies.append(f"{env} {c[SURVIVES]} S / {c[DEGRADES]} D / {c[FAILS]} F ({sum(c.values())})")
    out += [f"Counts (applicable cells): {'; '.join(tallies)}.", ""]
    for i, (fault, cells) in enumerate(rows, 1):
        out += [f"### {i}. {fault.title}", ""]
        for env in envs:
            cell = cells[env]
            alerts = f" Alerts: {', '.join(f'`{a}`' for a in cell.alerts)}." if cell.alerts else ""
            out.append(f"- **{env}** ({cell.verdict}): {cell.text}{alerts}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _anchor(i: int, fault: Fault) -> str:
    slug = re.sub(r"[^a-z0-9 -]", "", f"{i}. {fault.title}".lower()).strip().replace(" ", "-")
    return re.sub(r"-+", "-", slug)


# -- The page --------------------------------------------------------------------------------------------------------

PAGE = Path(__file__).resolve().parents[1] / "docs" / "concepts" / "faults.md"
START = "<!-- fault-matrix: start (generated by docgen/faults.py from the synthesized objects; make golden) -->"
END = "<!-- fault-matrix: end -->"


def planned_seconds(context: Mapping[str, Any]) -> dict[str, dict[str, tuple[int, int]]]:
    """Per environment, workload name -> (cold start on a new node, start-up on its node) seconds from the plan."""
    from llm_eks.config import parse_environment
    from llm_eks.config.plans import plan_workloads
    from llm_eks.infra.workloads import VllmWorkload, build_workloads

    out: dict[str, dict[str, tuple[int, int]]] = {}
    for env, body in context["environments"].items():
        config = parse_environment(env, body)
        plans = plan_workloads(config)
        built = build_workloads(config, plans)
        out[env] = {
            (w.vllm.name if isinstance(w, VllmWorkload) else w.ray.name): (
                round(p.cold_start.scale_out_s),
                round(p.cold_start.startup_s),
            )
            for w, p in zip(built, plans, strict=True)
        }
    return out


def block(outdir: Path, context: Mapping[str, Any]) -> str:
    plans = planned_seconds(context)
    facts = {env: EnvFacts.read(outdir, env, plans[env]) for env in ENVIRONMENTS}
    return markdown(facts)


def page_with(text: str, generated: str) -> str:
    """The page `text` with its generated block replaced by `generated`."""
    before, start, rest = text.partition(START)
    _, end, after = rest.partition(END)
    if not start or not end:
        raise ValueError(f"{PAGE}: the markers {START!r} and {END!r} are missing")
    return f"{before}{START}\n\n{generated}\n{END}{after}"


def write(outdir: Path, context: Mapping[str, Any]) -> None:
    PAGE.write_text(page_with(PAGE.read_text(), block(outdir, context)))
