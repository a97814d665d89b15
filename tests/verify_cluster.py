"""A deployed environment as the API server would return it, for `llm-eks verify`'s tests: the objects the charts
render for the environment (`build_charts`, as the stack applies them), made live the way their controllers make
them (metadata, status, the pods a Deployment / LeaderWorkerSet / RayService creates, the nodes Karpenter launches),
healthy by default. Each object is validated against its schema (tests/kube_schema.py), status included.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import cdk8s

from llm_eks.catalog.accelerators import INSTANCE_TYPES
from llm_eks.config import EnvironmentConfig
from llm_eks.config.plans import plan_workloads
from llm_eks.infra.charts import build_charts
from llm_eks.infra.workloads import build_workloads
from llm_eks.manifests.verifier.rbac import rbac_objects
from llm_eks.verify.derive import environment_plan
from llm_eks.verify.expected import EnvironmentPlan, WorkloadPlan
from tests.chart_helpers import placement_groups

if TYPE_CHECKING:
    from tests.prometheus_server import PrometheusServer

# The pod template label of a next version's pods (manifests/vllm VllmProps.pool_instance: name vllm-next).
NAME_LABEL, NEXT_VERSION_APP = "app.kubernetes.io/name", "vllm-next"
OIDC_ISSUER = "https://oidc.eks.us-east-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
GATEWAY_CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"
# Set by LeaderWorkerSet v0.10 on the pods of a group (api/leaderworkerset/v1/leaderworkerset_types.go).
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_GROUP_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
# How long ago the environment was deployed (pods are older than the Prometheus window).
AGE = timedelta(hours=3)
# A healthy start takes this share of its planned cold start.
HEALTHY_START = 0.8
# A new node joins this long after its pod was created (Karpenter launch and boot).
NODE_JOIN_S = 70


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _suffix(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:5]


@dataclass
class StubCluster:
    """Objects (as the API server holds them) and, per scrape target, what vLLM's /metrics would hold."""

    environment: str
    plan: EnvironmentPlan
    objects: list[dict[str, Any]]
    now: datetime
    # Per serving pod (namespace, pod): the metrics of that server (tests/verify_metrics.py fills them).
    metrics: dict[tuple[str, str], Any] = field(default_factory=dict)
    # The real Prometheus the stand-in API server proxies to (tests/prometheus_server.py); None: none.
    prometheus: PrometheusServer | None = None
    # A next version's pods beyond its replicas now, up to its canary.replicas.max: what a scale-up (`llm-eks
    # canary` moving the pool share) brings Ready, with their metrics; the stand-in API server moves them in and out.
    standby: list[dict[str, Any]] = field(default_factory=list)

    def find(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        (found,) = [
            o
            for o in self.objects
            if o["kind"] == kind
            and o["metadata"]["name"] == name
            and (namespace is None or o["metadata"].get("namespace") == namespace)
        ]
        return found

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def remove(self, kind: str, name: str) -> None:
        self.objects.remove(self.find(kind, name))

    def pods(self, w: WorkloadPlan) -> list[dict[str, Any]]:
        return [
            o
            for o in self.all("Pod")
            if o["metadata"]["namespace"] == w.namespace
            and all(o["metadata"]["labels"].get(k) == v for k, v in w.pod_selector.items())
        ]

    def standby_pods(self, w: WorkloadPlan) -> list[dict[str, Any]]:
        return [
            o
            for o in self.standby
            if o["metadata"]["namespace"] == w.namespace
            and all(o["metadata"]["labels"].get(k) == v for k, v in w.pod_selector.items())
        ]

    def scale(self, owner: dict[str, Any], replicas: int) -> None:
        """A Deployment scaled to `replicas`, its pods following at once (from standby, and back to it)."""
        w = self.workload(owner["metadata"]["name"])
        active = self.pods(w)
        for extra in active[replicas:]:
            self.objects.remove(extra)
            self.standby.append(extra)
        for _ in range(max(0, replicas - len(active))):
            pod = self.standby_pods(w)[0]
            self.standby.remove(pod)
            self.objects.append(pod)
        owner["spec"]["replicas"] = replicas
        status = owner.setdefault("status", {})
        for key in ("replicas", "readyReplicas", "availableReplicas", "updatedReplicas"):
            status[key] = replicas

    def workload(self, name: str) -> WorkloadPlan:
        (found,) = [w for w in self.plan.workloads if w.name == name]
        return found


def _live(obj: dict[str, Any], created: datetime, **status: Any) -> dict[str, Any]:
    live = copy.deepcopy(obj)
    meta = live["metadata"]
    meta.update(
        uid=f"{_suffix(obj['kind'], meta['name'])}-0000-4000-8000-000000000000",
        resourceVersion="4711",
        generation=1,
        creationTimestamp=rfc3339(created),
    )
    if status:
        live["status"] = status
    return live


def _condition(kind: str, at: datetime, status: str = "True", reason: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"type": kind, "status": status, "lastTransitionTime": rfc3339(at)}
    c["reason"] = reason or kind
    c["message"] = ""
    return c


def node(
    name: str, pool: str, instance_type: str, created: datetime, resource: str = "nvidia.com/gpu"
) -> dict[str, Any]:
    """A node Karpenter launched from `pool` (its labels, the accelerators its device plugin advertises)."""
    gpus = str(INSTANCE_TYPES[instance_type].accelerators)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"{_suffix('node', name)}-0000-4000-8000-000000000000",
            "resourceVersion": "4711",
            "creationTimestamp": rfc3339(created),
            "labels": {
                "karpenter.sh/nodepool": pool,
                "karpenter.sh/capacity-type": "on-demand",
                "node.kubernetes.io/instance-type": instance_type,
                "llm-eks.io/node-pool": pool,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
            },
        },
        "spec": {"providerID": f"aws:///us-east-1a/i-0{_suffix('i', name)}abcdef012"},
        "status": {
            "capacity": {resource: gpus, "cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {resource: gpus, "cpu": "3920m", "memory": "15Gi", "pods": "110"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": rfc3339(created + AGE),
                    "lastTransitionTime": rfc3339(created + timedelta(seconds=20)),
                }
            ],
        },
    }


def pod(
    name: str,
    namespace: str,
    labels: dict[str, str],
    spec: dict[str, Any],
    node_name: str,
    created: datetime,
    ready_at: datetime | None,
    owner: tuple[str, str, str],
) -> dict[str, Any]:
    """A running pod of a workload's template, Ready at `ready_at` (None: still starting)."""
    spec = {**copy.deepcopy(spec), "nodeName": node_name}
    started = created + timedelta(seconds=30)
    ready = ready_at is not None
    conditions = [
        _condition("PodScheduled", created),
        _condition("Initialized", started),
        _condition("ContainersReady", ready_at or started, "True" if ready else "False"),
        _condition("Ready", ready_at or started, "True" if ready else "False"),
    ]

    def status_of(c: dict[str, Any], init: bool) -> dict[str, Any]:
        state = (
            {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": rfc3339(created)}}
            if init
            else {"running": {"startedAt": rfc3339(started)}}
        )
        return {
            "name": c["name"],
            "image": c["image"],
            "imageID": f"docker.io/{c['image'].split('@')[0]}@sha256:{'ab' * 32}",
            "ready": ready and not init,
            "restartCount": 0,
            "started": not init,
            "state": state,
        }

    api_version, kind, owner_name = owner
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"{_suffix('pod', name)}-0000-4000-8000-000000000000",
            "resourceVersion": "4711",
            "creationTimestamp": rfc3339(created),
            "labels": labels,
            "ownerReferences": [
                {"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": "owner", "controller": True}
            ],
        },
        "spec": spec,
        "status": {
            "phase": "Running",
            "podIP": f"10.0.{int(_suffix(name), 16) % 200}.{int(_suffix(name, 'ip'), 16) % 250 + 2}",
            "conditions": conditions,
            "initContainerStatuses": [status_of(c, True) for c in spec.get("initContainers") or ()],
            "containerStatuses": [status_of(c, False) for c in spec["containers"]],
        },
    }


def rendered_objects(config: EnvironmentConfig) -> list[dict[str, Any]]:
    """Every object the charts the stack applies render for `config` (as `build_charts` builds them in the stack)."""
    plans = plan_workloads(config)
    workloads = build_workloads(config, plans)
    charts = build_charts(
        cdk8s.App(),
        config,
        list(workloads),
        node_role_name=f"KarpenterNodeRole-{config.name}",
        security_group_ids=("sg-0123456789abcdef0",),
        weights_bucket=f"llm-eks-{config.name}-weights",
        cluster_oidc_issuer=OIDC_ISSUER,
        placement_groups=placement_groups(workloads),
        region="us-west-2",
    )
    return [o for c in charts if c.apply for o in c.chart.to_json()]


class _Builder:
    def __init__(self, config: EnvironmentConfig, now: datetime) -> None:
        self.plan = environment_plan(config, plan_workloads(config))
        self.rendered = rendered_objects(config)
        self.now = now
        self.deployed = now - AGE
        self.objects: list[dict[str, Any]] = []
        self.standby: list[dict[str, Any]] = []

    def rendered_one(self, kind: str, name: str) -> dict[str, Any]:
        (found,) = [o for o in self.rendered if o["kind"] == kind and o["metadata"]["name"] == name]
        return found

    def build(self) -> list[dict[str, Any]]:
        # The RBAC the stack applies (verify's ClusterRole and monitoring Role) and the charts carry (each workload's
        # Roles, a route's rollout Role), as the stand-in API server authorizes requests with.
        rbac = [o for o in self.rendered if o["kind"] in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")]
        self.objects += [_live(o, self.deployed) for o in [*rbac_objects(), *rbac]]
        for p in self.plan.pools:
            obj = self.rendered_one("NodePool", p.name)
            self.objects.append(
                _live(obj, self.deployed, conditions=[_condition("Ready", self.deployed)], nodes=0, resources={})
            )
        for w in self.plan.workloads:
            if w.owner_kind == "RayService":
                self._ray(w)
            else:
                self._vllm(w)
            if w.route is not None:
                self._route(w)
        return self.objects

    def _place(self, w: WorkloadPlan, index: int, tag: str, pool: str | None = None) -> tuple[str, datetime, datetime]:
        """(node, pod created, pod Ready): even pods on a node that was up (warm), odd ones wait for a new node."""
        created = self.deployed + timedelta(minutes=5 + 10 * index)
        name = f"ip-10-0-{index + 1}-{int(_suffix(w.name, tag), 16) % 250}.ec2.internal"
        if index % 2 == 0:
            node_at, ready = created - timedelta(minutes=3), created + timedelta(seconds=HEALTHY_START * w.start_warm_s)
        else:
            node_at = created + timedelta(seconds=NODE_JOIN_S)
            ready = created + timedelta(seconds=HEALTHY_START * w.start_new_node_s)
        self.objects.append(node(name, pool or w.pool, w.instance_type, node_at))
        return name, created, ready

    def _deployment(self, w: WorkloadPlan, name: str, first: int = 0, pool: str | None = None) -> None:
        """Deployment `name` made live, with its ready pods (numbered from `first`, on nodes of `pool`)."""
        obj = self.rendered_one("Deployment", name)
        replicas = int(obj["spec"]["replicas"])
        template = obj["spec"]["template"]
        self.objects.append(
            _live(
                obj,
                self.deployed,
                observedGeneration=1,
                replicas=replicas,
                readyReplicas=replicas,
                availableReplicas=replicas,
                updatedReplicas=replicas,
                conditions=[_condition("Available", self.deployed, reason="MinimumReplicasAvailable")],
            )
        )
        hash_ = _suffix(name, "template")[:4] + "5d9f"
        # A next version (pool share) keeps pods up to its maximum on standby for `llm-eks canary`'s scale-ups.
        standby = w.replicas_max if template["metadata"]["labels"].get(NAME_LABEL) == NEXT_VERSION_APP else 0
        for i in range(first, first + max(replicas, standby)):
            node_name, created, ready = self._place(w, i, f"pod{i}", pool)
            labels = {**template["metadata"]["labels"], "pod-template-hash": hash_}
            pod_name = f"{name}-{hash_}-{_suffix(name, str(i))}"
            made = pod(
                pod_name,
                w.namespace,
                labels,
                template["spec"],
                node_name,
                created,
                ready,
                ("apps/v1", "ReplicaSet", f"{name}-{hash_}"),
            )
            (self.objects if i < first + replicas else self.standby).append(made)

    def _vllm(self, w: WorkloadPlan) -> None:
        obj = self.rendered_one(w.owner_kind, w.name)
        replicas = int(obj["spec"]["replicas"])
        if w.owner_kind == "Deployment":
            self._deployment(w, w.name)
            if w.floor_replicas:
                # The on-demand floor: a Deployment of its own, on its own pool's nodes.
                self._deployment(w, f"{w.name}-floor", first=replicas, pool=f"{w.pool}-floor")
            if w.phases is not None:
                # Disaggregated: the prefill pool's Deployment, on the workload's GPU pool too.
                self._deployment(w, w.phases.prefill_job, first=replicas + w.floor_replicas)
            return
        self._leader_worker_set(w, w.name)
        if w.phases is not None:
            # Disaggregated: the prefill pool's LeaderWorkerSet, its pods numbered after the decode pool's.
            self._leader_worker_set(
                w, w.phases.prefill_job, first=replicas * int(obj["spec"]["leaderWorkerTemplate"]["size"])
            )

    def _leader_worker_set(self, w: WorkloadPlan, name: str, first: int = 0) -> None:
        """LeaderWorkerSet `name` made live, every group Ready, its pods (numbered from `first`) as LWS v0.10 labels
        them."""
        obj = self.rendered_one("LeaderWorkerSet", name)
        replicas = int(obj["spec"]["replicas"])
        lws = obj["spec"]["leaderWorkerTemplate"]
        self.objects.append(
            _live(
                obj,
                self.deployed,
                replicas=replicas,
                readyReplicas=replicas,
                updatedReplicas=replicas,
                conditions=[_condition("Available", self.deployed, reason="AllGroupsReady")],
            )
        )
        for group in range(replicas):
            for index in range(int(lws["size"])):
                template = lws["leaderTemplate"] if index == 0 else lws["workerTemplate"]
                at = first + group * int(lws["size"]) + index
                tag = f"g{group}-{index}" if name == w.name else f"prefill-g{group}-{index}"
                node_name, created, ready = self._place(w, at, tag)
                labels = {
                    **template["metadata"]["labels"],
                    LWS_NAME_LABEL: name,
                    LWS_INDEX_LABEL: str(index),
                    LWS_GROUP_LABEL: _suffix(name, str(group)) * 8,
                }
                pod_name = f"{name}-{group}" if index == 0 else f"{name}-{group}-{index}"
                self.objects.append(
                    pod(
                        pod_name,
                        w.namespace,
                        labels,
                        template["spec"],
                        node_name,
                        created,
                        ready,
                        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", name),
                    )
                )

    def _ray(self, w: WorkloadPlan) -> None:
        obj = self.rendered_one("RayService", w.name)
        cluster = f"{w.name}-x7k2p"
        group = obj["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
        ready_at = self.deployed + timedelta(seconds=w.start_new_node_s)
        self.objects.append(
            _live(
                obj,
                self.deployed,
                conditions=[_condition("Ready", ready_at, reason="NonZeroServeEndpoints")],
                serviceStatus="Running",
                numServeEndpoints=1,
                observedGeneration=1,
                activeServiceStatus={
                    "rayClusterName": cluster,
                    "applicationStatuses": {"llm": {"status": "RUNNING", "serveDeploymentStatuses": {}}},
                },
            )
        )
        for i in range(int(group["replicas"])):
            node_name, created, ready = self._place(w, i, f"worker{i}")
            # What KubeRay 1.7.0 sets (common/pod.go labelPod): its labels, the template's, then the three it keeps.
            labels = {
                "ray.io/is-ray-node": "yes",
                "app.kubernetes.io/name": "kuberay",
                "app.kubernetes.io/created-by": "kuberay-operator",
                **group["template"]["metadata"]["labels"],
                "ray.io/cluster": cluster,
                "ray.io/node-type": "worker",
                "ray.io/group": group["groupName"],
            }
            name = f"{cluster}-{group['groupName']}-worker-{_suffix(w.name, str(i))}"
            self.objects.append(
                pod(
                    name,
                    w.namespace,
                    labels,
                    group["template"]["spec"],
                    node_name,
                    created,
                    ready,
                    ("ray.io/v1", "RayCluster", cluster),
                )
            )

    def _route(self, w: WorkloadPlan) -> None:
        r = w.route
        assert r is not None
        # The HTTPRoute the AI Gateway's controller writes from the AIGatewayRoute (same name and namespace).
        parent = {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": r.gateway,
            "namespace": r.gateway_namespace,
        }
        obj = {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": r.name, "namespace": r.namespace},
            "spec": {"parentRefs": [dict(parent)], "rules": [dict(rule) for rule in r.rules]},
        }
        conditions = [
            {**_condition("Accepted", self.deployed), "observedGeneration": 1},
            {**_condition("ResolvedRefs", self.deployed), "observedGeneration": 1},
        ]
        # A next version is routed by its current version's route and pool: one object of each for both.
        if [o for o in self.objects if o["kind"] == "HTTPRoute" and (o["metadata"]["name"], o["metadata"].get(
                "namespace")) == (r.name, r.namespace)]:  # fmt: skip
            return
        self.objects.append(
            _live(
                obj,
                self.deployed,
                parents=[{"parentRef": parent, "controllerName": GATEWAY_CONTROLLER, "conditions": conditions}],
            )
        )
        if r.backend_kind == "InferencePool":
            pool = self.rendered_one("InferencePool", r.backend_name)
            pool_parent = {
                "group": "gateway.networking.k8s.io",
                "kind": "Gateway",
                "name": r.gateway,
                "namespace": r.gateway_namespace,
            }
            self.objects.append(
                _live(
                    pool,
                    self.deployed,
                    parents=[
                        {"parentRef": pool_parent, "controllerName": GATEWAY_CONTROLLER, "conditions": conditions}
                    ],
                )
            )


def healthy_cluster(
    config: EnvironmentConfig, now: datetime | None = None, prometheus: PrometheusServer | None = None
) -> StubCluster:
    """`config`'s environment deployed as planned, every pod Ready, with vLLM's metrics of a light, healthy load
    (held by `prometheus`, when given)."""
    from tests.verify_metrics import healthy_metrics

    at = (now or datetime.now(UTC)).replace(microsecond=0)
    builder = _Builder(config, at)
    cluster = StubCluster(config.name, builder.plan, builder.build(), at, prometheus=prometheus)
    cluster.standby = builder.standby
    healthy_metrics(cluster)
    return cluster
