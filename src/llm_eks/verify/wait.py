"""`llm-eks verify --wait-ready DURATION`: before verifying, wait until every workload has settled (a deploy that
restarts pods would otherwise fail its own verification), or give up naming what is still starting.

Settled, per workload: its owner exists and has rolled out (a Deployment's observedGeneration caught up and every
replica updated and Ready, no old one left; a LeaderWorkerSet's groups updated and Ready; a RayService Ready), and
every pod it selects is Ready and none is terminating. A workload scaled to zero is settled. Pure but for the loop:
`starting` reads the ClusterState `kube.read` returns.
"""

from __future__ import annotations

from collections.abc import Callable
from time import monotonic, sleep

from llm_eks.verify.expected import EnvironmentPlan, WorkloadPlan
from llm_eks.verify.kube import Kube
from llm_eks.verify.observed import EMPTY, ClusterState, WorkloadObjects, is_true, meta, name, status, terminating
from llm_eks.verify.observed import why_not_ready as why
from llm_eks.verify.text import secs

# Seconds between two looks: a pod's start takes minutes, and each look is a few GETs.
POLL_SECONDS = 15.0


def _owner_starting(w: WorkloadPlan, objs: WorkloadObjects) -> list[str]:
    owner = objs.owner
    if owner is None:
        return [f"{w.name}: no {w.owner_kind} yet"]
    if w.owner_kind == "RayService":
        return [] if is_true(owner, "Ready") else [f"{w.name}: the RayService is not Ready"]
    desired = int((owner.get("spec") or EMPTY).get("replicas") or 0)
    s = status(owner)
    ready, updated = int(s.get("readyReplicas") or 0), int(s.get("updatedReplicas") or 0)
    unit = "groups" if w.owner_kind == "LeaderWorkerSet" else "replicas"
    problems = []
    if int(s.get("observedGeneration") or meta(owner).get("generation") or 0) < int(meta(owner).get("generation") or 0):
        problems.append(f"{w.name}: its {w.owner_kind} change is not rolled out yet")
    if updated < desired or ready < desired:
        problems.append(f"{w.name}: {ready}/{desired} {unit} Ready, {updated}/{desired} updated")
    elif w.owner_kind == "Deployment" and int(s.get("replicas") or 0) > desired:
        problems.append(f"{w.name}: {int(s.get('replicas') or 0) - desired} old replicas still running")
    return problems


def starting(plan: EnvironmentPlan, state: ClusterState) -> list[str]:
    """What has not settled yet, one phrase each (empty: everything has)."""
    out = []
    for w in plan.workloads:
        objs = state.workloads.get(w.name) or WorkloadObjects(owner=None)
        out += _owner_starting(w, objs)
        for pod in objs.pods:
            if terminating(pod):
                out.append(f"{name(pod)}: terminating")
            elif not is_true(pod, "Ready"):
                out.append(f"{name(pod)}: {why(pod)}")
    return out


def wait_ready(
    kube: Kube,
    plan: EnvironmentPlan,
    seconds: float,
    *,
    on_look: Callable[[list[str]], None],
) -> list[str]:
    """Look every POLL_SECONDS until nothing is starting (returns []) or `seconds` have passed (returns what is
    still starting); `on_look(starting)` after each look."""
    deadline = monotonic() + seconds
    while True:
        still = starting(plan, kube.read(plan))
        on_look(still)
        if not still:
            return []
        if monotonic() >= deadline:
            return still
        sleep(min(POLL_SECONDS, max(0.0, deadline - monotonic())))


def summary(still: list[str], seconds: float) -> str:
    """`still starting after 1,800 s: a; b`."""
    return f"still starting after {secs(seconds)}: " + "; ".join(still)
