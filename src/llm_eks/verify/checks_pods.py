"""Checks 2 and 6: each workload's pods are Ready, within its replica bounds, running the arguments and image the
chart renders; and each serving pod started within its planned cold start."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import yaml

from llm_eks.verify.args_diff import args_difference, config_difference
from llm_eks.verify.expected import PREFILL_ROLE, WorkloadPlan, prefill_role
from llm_eks.verify.observed import (
    EMPTY,
    Object,
    WorkloadObjects,
    condition,
    container,
    created,
    is_true,
    name,
    restarts,
    status,
    terminating,
    timestamp,
    why_not_ready,
)
from llm_eks.verify.rows import Row
from llm_eks.verify.text import count, image_tag, secs

# A start slower than the plan's cold start by more than this share is drift. The vLLM chart's startup probe allows
# 1.5x the planned container start (VllmProps.startup_margin) before it kills the pod: a replica slower than that
# multiple of its whole planned path is starting outside what the plan (and its probe) were sized for.
STARTUP_MARGIN = 0.5
# LeaderWorkerSet v0.10 labels each pod of a group with its index (0: the leader that serves).
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
VLLM_CONTAINER = "vllm"
RAY_WORKER_CONTAINER = "ray-worker"


def _live(pods: Sequence[Object]) -> list[Object]:
    return [p for p in pods if not terminating(p)]


def _role(w: WorkloadPlan, pod: Object) -> str:
    """The pod's `args` role: server, leader or worker; of a prefill pod, prefill_role of that."""
    pod_labels = (pod.get("metadata") or EMPTY).get("labels") or EMPTY
    if w.owner_kind != "LeaderWorkerSet":
        role = "server"
    else:
        role = "leader" if pod_labels.get(LWS_WORKER_INDEX_LABEL) == "0" else "worker"
    if w.phases is not None and all(pod_labels.get(k) == v for k, v in w.phases.prefill_pod_labels.items()):
        return prefill_role(role)
    return role


def _prefills(w: WorkloadPlan, pod: Object) -> bool:
    return _role(w, pod).startswith(PREFILL_ROLE)


def _owner_ref(w: WorkloadPlan) -> str:
    return f"{w.owner_kind} {w.namespace}/{w.name}"


def _not_ready(pods: Sequence[Object]) -> str:
    return "; ".join(f"{name(p)}: {why_not_ready(p)}" for p in pods if not is_true(p, "Ready"))


def serving_rows(w: WorkloadPlan, objs: WorkloadObjects) -> list[Row]:
    """The workload's `pods` row; a disaggregated workload's, one per pool, each against its own bounds."""
    if w.phases is None:
        return [serving_row(w, objs)]
    prefill = [p for p in objs.pods if _prefills(w, p)]
    decode = replace(objs, pods=tuple(p for p in objs.pods if not _prefills(w, p)))
    bounds = (w.phases.prefill_replicas_min, w.phases.prefill_replicas_max)
    pool = replace(objs, owner=objs.prefill_owner, pods=tuple(prefill))
    groups = w.owner_kind == "LeaderWorkerSet"
    return [
        serving_row(w, decode),
        _pool_row(w, pool, w.phases.prefill_job, bounds, " (prefill pool)", 0, groups=groups),
    ]


def serving_row(w: WorkloadPlan, objs: WorkloadObjects) -> Row:
    """The owner exists, its pods are Ready, and the replica count is within replicas.min..max."""
    if w.owner_kind != "Deployment":
        return _owner_row(w, objs)
    return _pool_row(w, objs, w.name, (w.replicas_min, w.replicas_max), "", w.floor_replicas, groups=False)


def _pool_row(
    w: WorkloadPlan,
    objs: WorkloadObjects,
    owner: str,
    bounds: tuple[int, int],
    pool: str,
    floor_replicas: int,
    *,
    groups: bool,
) -> Row:
    """Deployment `owner`, or (`groups`) LeaderWorkerSet `owner` counted in groups Ready (its readyReplicas), and
    its on-demand floor's `floor_replicas`: its pods Ready, its count within `bounds`."""
    kind, unit = ("LeaderWorkerSet", "groups") if groups else ("Deployment", "replicas")
    low, high = bounds
    floor = f" ({floor_replicas} on the on-demand floor)" if floor_replicas else ""
    planned = f"{kind}, {low}-{high} {unit}{floor}{pool}"
    if objs.owner is None:
        return Row("pods", owner, planned, "not found", "breach", f"no {kind} {w.namespace}/{owner}")
    pods = _live(objs.pods)
    ready = [p for p in pods if is_true(p, "Ready")]
    # The on-demand floor's replicas are fixed: the plan's, beside what KEDA asks of the owner.
    desired = int((objs.owner.get("spec") or EMPTY).get("replicas") or 0) + floor_replicas
    if groups:
        ready_units = int(status(objs.owner).get("readyReplicas") or 0)
        observed = f"{ready_units}/{desired} groups Ready ({count(len(ready), 'pod')} of {len(pods)})"
    else:
        ready_units, observed = len(ready), f"{len(ready)}/{desired} Ready"
    return _count_row(owner, planned, observed, pods, ready_units, desired, bounds, unit)


def _count_row(
    owner: str,
    planned: str,
    observed: str,
    pods: Sequence[Object],
    ready_units: int,
    desired: int,
    bounds: tuple[int, int],
    unit: str,
) -> Row:
    low, high = bounds
    if desired == 0 and low == 0:
        return Row("pods", owner, planned, observed, "unknown", "scaled to zero: no pod to check")
    if ready_units == 0:
        why = _not_ready(pods) or "no pod exists"
        return Row("pods", owner, planned, observed, "breach", f"nothing serves: {why}")
    if not low <= desired <= high:
        return Row("pods", owner, planned, observed, "drift", f"{desired} {unit}, outside the planned bounds")
    ready = sum(1 for p in pods if is_true(p, "Ready"))
    if ready_units < desired or ready < len(pods):
        return Row("pods", owner, planned, observed, "drift", _not_ready(pods) or "not every pod is Ready")
    return Row("pods", owner, planned, observed, "ok")


def _owner_row(w: WorkloadPlan, objs: WorkloadObjects) -> Row:
    """A LeaderWorkerSet's groups or a RayService's workers."""
    if w.owner_kind == "LeaderWorkerSet":
        return _pool_row(w, objs, w.name, (w.replicas_min, w.replicas_max), "", w.floor_replicas, groups=True)
    floor = f" ({w.floor_replicas} on the on-demand floor)" if w.floor_replicas else ""
    planned = f"{w.owner_kind}, {w.replicas_min}-{w.replicas_max} replicas{floor}"
    if objs.owner is None:
        return Row("pods", w.name, planned, "not found", "breach", f"no {_owner_ref(w)}")
    pods = _live(objs.pods)
    return _ray_serving_row(w, objs.owner, pods, [p for p in pods if is_true(p, "Ready")], planned)


def _ray_serving_row(
    w: WorkloadPlan, owner: Object, pods: Sequence[Object], ready: Sequence[Object], planned: str
) -> Row:
    serving = condition(owner, "Ready")
    observed = f"RayService Ready {serving.get('status') if serving else 'unset'}, {len(ready)}/{len(pods)} workers"
    if serving is None or serving.get("status") != "True":
        why = (serving or {}).get("message") or (serving or {}).get("reason") or "no Ready condition yet"
        return Row("pods", w.name, planned, observed, "breach", f"the RayService does not serve: {why}")
    lo, hi = w.replicas_min * w.nodes_per_replica, w.replicas_max * w.nodes_per_replica
    if not ready:
        return Row("pods", w.name, planned, observed, "breach", _not_ready(pods) or "no GPU worker pod")
    if not lo <= len(pods) <= hi:
        return Row("pods", w.name, planned, observed, "drift", f"{len(pods)} workers, planned {lo}-{hi}")
    if len(ready) < len(pods):
        return Row("pods", w.name, planned, observed, "drift", _not_ready(pods))
    return Row("pods", w.name, planned, observed, "ok")


def args_row(w: WorkloadPlan, objs: WorkloadObjects) -> Row:
    """vLLM: every serving pod's `vllm` container runs the rendered arguments and the planned image. Ray Serve: the
    RayService's Serve config carries the planned LLMConfig and its GPU workers the planned image."""
    if w.engine == "ray-serve":
        return _ray_config_row(w, objs)
    args = w.args.get("server") or w.args.get("leader") or ()
    planned = f"{len(args)} vllm serve args, {image_tag(w.image)}"
    pods = _live(objs.pods)
    if not pods:
        return Row("args", w.name, planned, "no pods", "unknown", "no serving pod to read")
    differ = []
    for pod in pods:
        c = container(pod, VLLM_CONTAINER) or EMPTY
        diff = args_difference(w.args[_role(w, pod)], c.get("args") or ())
        if c.get("image") != w.image:
            diff = "; ".join(filter(None, [f"image {c.get('image')} (planned {w.image})", diff]))
        if diff:
            differ.append(f"{name(pod)}: {diff}")
    if differ:
        observed = f"differ on {len(differ)} of {count(len(pods), 'pod')}"
        return Row("args", w.name, planned, observed, "drift", "; ".join(differ[:2]))
    return Row("args", w.name, planned, f"as planned on {count(len(pods), 'pod')}", "ok")


def serve_llm_config(owner: Object) -> Mapping[str, Any] | None:
    """The first LLMConfig of the RayService's serveConfigV2 (a YAML string), None if it has none."""
    text = (owner.get("spec") or EMPTY).get("serveConfigV2")
    try:
        config: Any = yaml.safe_load(text) if isinstance(text, str) else None
        found = config["applications"][0]["args"]["llm_configs"][0]
    except (yaml.YAMLError, KeyError, IndexError, TypeError):
        return None
    return found if isinstance(found, Mapping) else None


def _ray_config_row(w: WorkloadPlan, objs: WorkloadObjects) -> Row:
    assert w.llm_config is not None
    engine = w.llm_config.get("engine_kwargs") or {}
    planned = f"LLMConfig ({len(engine)} engine_kwargs), {image_tag(w.image)}"
    if objs.owner is None:
        return Row("args", w.name, planned, "not found", "unknown", f"no {_owner_ref(w)}")
    config = serve_llm_config(objs.owner)
    if config is None:
        return Row("args", w.name, planned, "no LLMConfig", "drift", "serveConfigV2 holds no llm_configs")
    problems = [d for d in [config_difference(w.llm_config, config)] if d]
    images = {(container(p, RAY_WORKER_CONTAINER) or EMPTY).get("image") for p in _live(objs.pods)}
    problems += [f"worker image {image} (planned {w.image})" for image in sorted(map(str, images - {w.image}))]
    if problems:
        return Row("args", w.name, planned, "differs", "drift", "; ".join(problems))
    return Row("args", w.name, planned, "as planned", "ok")


def _node_created(pod: Object, nodes: Mapping[str, Object]) -> datetime | None:
    node = nodes.get(str((pod.get("spec") or EMPTY).get("nodeName")))
    return created(node) if node is not None else None


@dataclass(frozen=True)
class Start:
    """One serving pod's start: creation to Ready, and whether it waited for a new node."""

    pod: str
    seconds: float
    new_node: bool
    # Of `seconds`, the wait for the node to join (new node only).
    node_wait_s: float | None = None


def pod_starts(
    w: WorkloadPlan, objs: WorkloadObjects, nodes: Mapping[str, Object], now: datetime
) -> tuple[list[Start], list[str], int]:
    """(starts measured, pods still starting past their budget, pods left out because they restarted): a pod on a
    node that joined after the pod was created waited for that node (the scale-out path)."""
    starts, slow, skipped = [], [], 0
    for pod in _live(objs.pods):
        began = created(pod)
        if _role(w, pod).endswith("worker") or began is None:
            continue
        node_at = _node_created(pod, nodes)
        new_node = node_at is not None and node_at > began
        budget = w.start_new_node_s if new_node else w.start_warm_s
        ready = condition(pod, "Ready")
        if ready is None or ready.get("status") != "True":
            waited = (now - began).total_seconds()
            if waited > budget * (1 + STARTUP_MARGIN):
                slow.append(f"{name(pod)} not Ready after {secs(waited)} (planned {secs(budget)})")
            continue
        if restarts(pod):
            skipped += 1  # its Ready time is the last restart's, not its start
            continue
        at = timestamp(ready.get("lastTransitionTime"))
        if at is None:
            continue
        wait = (node_at - began).total_seconds() if new_node and node_at is not None else None
        starts.append(Start(name(pod), (at - began).total_seconds(), new_node, wait))
    return starts, slow, skipped


def startup_row(w: WorkloadPlan, objs: WorkloadObjects, nodes: Mapping[str, Object], now: datetime) -> Row:
    """Pod creation to Ready against the plan's cold start: on a new node (the node joined after the pod was
    created, so the pod waited for it) the scale-out path, else the warm-node path."""
    planned = f"{secs(w.start_warm_s)} warm node, {secs(w.start_new_node_s)} new node"
    if w.engine == "ray-serve":
        why = "a Ray worker pod is Ready when its raylet is, before Serve loads the model (no Kubernetes timestamp)"
        return Row("startup", w.name, planned, "not measurable", "unknown", why)
    starts, slow, skipped = pod_starts(w, objs, nodes, now)
    if slow:
        return Row("startup", w.name, planned, "still starting", "drift", "; ".join(slow))
    if not starts:
        why = f"{count(skipped, 'pod')} restarted since" if skipped else "no Ready serving pod"
        return Row("startup", w.name, planned, "no start to measure", "unknown", why)

    def budget(s: Start) -> float:
        return w.start_new_node_s if s.new_node else w.start_warm_s

    slowest = max(starts, key=lambda s: s.seconds / budget(s))
    where = "a new node" if slowest.new_node else "a warm node"
    wait = f", {secs(slowest.node_wait_s)} of it for the node" if slowest.node_wait_s is not None else ""
    detail = f"{slowest.pod} {secs(slowest.seconds)} on {where}{wait} (planned {secs(budget(slowest))})"
    if skipped:
        detail += f"; {count(skipped, 'restarted pod')} left out"
    observed = f"slowest {secs(slowest.seconds)}"
    if slowest.seconds > budget(slowest) * (1 + STARTUP_MARGIN):
        return Row("startup", w.name, planned, observed, "drift", f"{detail}; beyond +{STARTUP_MARGIN:.0%}")
    return Row("startup", w.name, planned, observed, "ok", detail)
