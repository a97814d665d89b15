"""SCHEDULING: Every pod template (Deployment, StatefulSet, ReplicaSet, Job, CronJob, Pod, RayCluster/RayService/RayJob
head and worker groups, LeaderWorkerSet leader and workers; DaemonSets are exempt) must be runnable by at
least one Karpenter NodePool (karpenter.sh/v1) or static node group. Karpenter v1.14 semantics
(kubernetes-sigs/karpenter pkg/scheduling, aws/karpenter-provider-aws pkg/apis/v1/labels.go):
- requirements: the pod's nodeSelector plus one of its required nodeSelectorTerms (terms are ORed, as
  Karpenter relaxes them) against the pool's template labels, `karpenter.sh/nodepool`, the node-class label
  and spec.template.spec.requirements (In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte). A key both
  sides constrain must have overlapping values; a key only the pod constrains matches only if it is one of
  Karpenter's well-known labels (zone, instance type, arch, capacity type, karpenter.k8s.aws/instance-*...)
  or the pod's operator is NotIn/DoesNotExist. Deprecated beta label keys are normalized as Karpenter does.
- taints: every NoSchedule/NoExecute taint of the pool must be tolerated (PreferNoSchedule is relaxed by
  Karpenter; startupTaints are ignored). Tolerations: Equal, Exists, and the numeric Gt/Lt of 1.35.
- instance types: when the pod's and pool's requirements enumerate `node.kubernetes.io/instance-type`,
  at least one of those types (looked up through `instance_resources`) must match the instance labels
  Karpenter derives for it (family, size, category, generation, cpu, memory, GPU/accelerator name, count,
  manufacturer and memory, local NVMe, arch), and must fit the pod's requests (cpu, memory, accelerators,
  and ephemeral-storage, as Karpenter estimates it from the pool's EC2NodeClass when that is among the
  objects: the RAID0 instance store, else the root volume) plus the requests of the
  DaemonSets among the objects that would run on it, within the node's allocatable capacity (capacity
  minus kube-reserved, the eviction threshold and Karpenter's 7.5 % VM memory overhead; see
  InstanceResources). A type `instance_resources` does not know is assumed to fit.
- a pool that does not enumerate instance types is only checked for offering the accelerator resources
  the pod requests, judged from its instance-family / instance-category / GPU-manufacturer
  requirements (a `c, m, r` pool offers no nvidia.com/gpu); cpu and memory are not checked there.
Static node groups (EKS managed node groups) use kube-scheduler semantics: a label their nodes do not
carry never matches In/Exists; nodes carry the group's labels, its instance types, arch, os,
eks.amazonaws.com/nodegroup and eks.amazonaws.com/capacityType (zone, region, hostname: any value).
Simplifications: preferred affinities, pod (anti-)affinity, topology spread, zones, capacity-type
availability, minValues, static NodePools (spec.replicas), pod overhead and DaemonSets not among the
objects (e.g. installed by Helm: CNI, kube-proxy, exporters) are not modelled. The check is skipped when
no NodePool or node group is known. A finding names the pools that came closest (instances fit, then
labels and taints pass), so a forgotten toleration is reported against the GPU pool, not the CPU pool.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from llm_eks.manifests.checks.capacity import Capacity, StaticNodeGroup, ephemeral_capacity, node_pools, static_capacity
from llm_eks.manifests.checks.findings import SCHEDULING, Finding
from llm_eks.manifests.checks.instances import (
    ACCELERATOR_RESOURCES,
    CATEGORY_ACCELERATORS,
    GPU_MAKERS,
    INSTANCE_TYPE_LABEL,
    InstanceLookup,
    InstanceResources,
    family_accelerators,
    instance_labels,
)
from llm_eks.manifests.checks.objects import (
    PodTemplate,
    amount,
    group_kind,
    mapping_at,
    object_ref,
    part_prefix,
    pod_requests,
)
from llm_eks.manifests.checks.requirements import (
    Mismatch,
    Requirements,
    compatible,
    is_negative,
    pod_terms,
    taint_text,
    untolerated_taints,
    with_requirements,
)


@dataclass(frozen=True)
class _Miss:
    """Why one pool cannot run a pod, the fix, and how close it came: (its instances fit, labels and taints passed)."""

    pool: Capacity
    score: tuple[bool, int]
    reason: str
    fix: str


@dataclass(frozen=True)
class _Why:
    """Why a pool's instances cannot take a pod, and the fix."""

    reason: str
    fix: str


@dataclass(frozen=True)
class _Shortfall:
    resource: str
    need: Fraction
    have: Fraction
    instance: str


class Scheduler:
    """Matches pod specs against the known capacity."""

    def __init__(
        self, objects: Sequence[Mapping[str, Any]], lookup: InstanceLookup | None, static: Sequence[StaticNodeGroup]
    ) -> None:
        self.lookup = lookup
        # id(spec) -> (spec, ok, misses); the spec is kept so its id stays unique while cached.
        self._cache: dict[int, tuple[Mapping[str, Any], list[Capacity], list[_Miss]]] = {}
        self.capacity = node_pools(objects) + [static_capacity(g) for g in static]
        daemonsets = [o for o in objects if group_kind(o) == ("apps", "DaemonSet")]
        for pool in self.capacity:
            for ds in daemonsets:
                spec = mapping_at(ds, "spec", "template", "spec")
                if untolerated_taints(spec, pool.taints):
                    continue
                if any(compatible(pool.requirements, t, pool.allow_undefined) is None for t in pod_terms(spec)):
                    for name, value in pod_requests(spec).items():
                        pool.daemon_requests[name] = pool.daemon_requests.get(name, Fraction(0)) + value

    def resources(self, name: str) -> InstanceResources | None:
        return self.lookup(name) if self.lookup is not None else None

    def evaluate(self, spec: Mapping[str, Any], pool: Capacity) -> _Miss | None:
        """None when the pool can run the pod, else why not (labels, then taints, then instance types).

        All three are judged even after one fails, so a message can point at the pool the pod was meant for: one
        whose instances fit but whose taint the pod forgot to tolerate beats one that has no GPU at all.
        """
        untolerated = untolerated_taints(spec, pool.taints)
        mismatch: Mismatch | None = None
        combined: Requirements | None = None
        for term in pod_terms(spec):
            found = compatible(pool.requirements, term, pool.allow_undefined)
            if found is None:
                combined = with_requirements(pool.requirements, *term.values())
                break
            mismatch = mismatch or found
        sized = self._instances(spec, pool, combined if combined is not None else pool.requirements)
        if combined is not None and not untolerated and sized is None:
            return None
        score = (sized is None, (combined is not None) + (not untolerated))
        if mismatch is not None and combined is None:
            return _Miss(pool, score, *self._mismatch_text(pool, mismatch))
        if untolerated:
            text = ", ".join(taint_text(t) for t in untolerated)
            fix = f"add a toleration for {text} (llm_eks.manifests.node_pools.workload_placement returns it)"
            return _Miss(pool, score, f"does not tolerate taint {text}", fix)
        assert sized is not None
        return _Miss(pool, score, sized.reason, sized.fix)

    @staticmethod
    def _mismatch_text(pool: Capacity, m: Mismatch) -> tuple[str, str]:
        if m.node is None:
            if pool.karpenter:
                reason = f"the pod requires {m.pod} but the pool neither sets nor requires {m.key}"
            else:
                reason = f"the pod requires {m.pod} but its nodes have no label {m.key}"
            fix = f"remove {m.key} from the pod's nodeSelector/affinity or add it to {pool.label}'s labels"
            return reason, fix
        reason = f"the pod requires {m.pod} but the {'pool' if pool.karpenter else 'group'} has {m.node}"
        return reason, f"make the pod's {m.key} requirement overlap {pool.label}'s ({m.node})"

    def _instances(self, spec: Mapping[str, Any], pool: Capacity, combined: Requirements) -> _Why | None:
        requests = pod_requests(spec)
        wanted = [r for r in ACCELERATOR_RESOURCES if requests.get(r, 0) > 0]
        type_req = combined.get(INSTANCE_TYPE_LABEL)
        types = sorted(type_req.values) if type_req is not None and not type_req.complement else None
        if types is None:
            return self._offers(pool, combined, wanted)
        if not types:
            return _Why(
                f"no instance type satisfies {combined[INSTANCE_TYPE_LABEL]}",
                f"make the pod's {INSTANCE_TYPE_LABEL} requirement overlap {pool.label}'s",
            )
        label_misses: list[str] = []
        shortfalls: dict[str, list[_Shortfall]] = {}
        for name in types:
            res = self.resources(name)
            if res is None:
                return None  # unknown type: assume it fits
            if pool.karpenter:
                labels = instance_labels(name, res)
                bad = next(
                    (
                        req
                        for key, req in sorted(combined.items())
                        if key in labels
                        and not (is_negative(req) if labels[key] is None else req.has(str(labels[key])))
                    ),
                    None,
                )
                if bad is not None:
                    value = labels[bad.key]
                    label_misses.append(
                        f"{name} has {bad.key}={value}" if value is not None else f"{name} has no {bad.key}"
                    )
                    continue
            short = self._shortfalls(name, res, requests, pool)
            if not short:
                return None
            shortfalls[name] = short
        if not shortfalls:
            return _Why(
                "no allowed instance type matches the requirements (" + "; ".join(label_misses) + ")",
                f"relax the pod's instance label requirements or allow a matching instance type in {pool.label}",
            )
        return self._short_text(pool, shortfalls)

    def _shortfalls(
        self, name: str, res: InstanceResources, requests: Mapping[str, Fraction], pool: Capacity
    ) -> list[_Shortfall]:
        allocatable: dict[str, Fraction] = {"cpu": res.allocatable_cpu, "memory": res.allocatable_memory}
        for resource in ACCELERATOR_RESOURCES:
            allocatable[resource] = Fraction(res.accelerators.get(resource, 0))
        if pool.node_class is not None:
            allocatable["ephemeral-storage"] = ephemeral_capacity(pool.node_class, res)
        out = []
        for resource, need in requests.items():
            if resource not in allocatable or need <= 0:
                continue  # a resource we cannot size (hugepages, EFA, pod ENIs...) is assumed available
            total = need + pool.daemon_requests.get(resource, Fraction(0))
            if total > allocatable[resource]:
                out.append(_Shortfall(resource, need, allocatable[resource], name))
        return out

    def _short_text(self, pool: Capacity, shortfalls: Mapping[str, list[_Shortfall]]) -> _Why:
        common = set.intersection(*({s.resource for s in short} for short in shortfalls.values()))
        if common:
            resource = next(r for r in (*ACCELERATOR_RESOURCES, "cpu", "memory", "ephemeral-storage") if r in common)
            best = max(
                (s for short in shortfalls.values() for s in short if s.resource == resource), key=lambda s: s.have
            )
            need = best.need
            daemons = pool.daemon_requests.get(resource, Fraction(0))
            extra = f" plus {amount(resource, daemons)} for DaemonSets" if daemons else ""
            where = best.instance if len(shortfalls) == 1 else f"the largest allowed type, {best.instance},"
            unit = "has" if resource in ACCELERATOR_RESOURCES else "has allocatable"
            have = amount(resource, best.have).removesuffix(f" {resource}")
            reason = f"needs {amount(resource, need)}{extra} but {where} {unit} {have}"
            if resource in ACCELERATOR_RESOURCES:
                fix = (
                    f"set workload.accelerator to an instance type with at least {need} {resource} "
                    f"(and allow it in {pool.label}) or lower the tensor-parallel size"
                )
            else:
                room = max(best.have - daemons, Fraction(0))
                fix = (
                    f"lower the pod's {resource} request to at most {amount(resource, room)} "
                    f"or allow a larger instance type in {pool.label}"
                )
            return _Why(reason, fix)
        parts = [
            f"{name} "
            + ", ".join(f"needs {amount(s.resource, s.need)}, has {amount(s.resource, s.have)}" for s in short)
            for name, short in shortfalls.items()
        ]
        return _Why(
            "no allowed instance type fits the requests (" + "; ".join(parts) + ")",
            f"lower the pod's requests or allow a larger instance type in {pool.label}",
        )

    @staticmethod
    def _offers(pool: Capacity, combined: Requirements, wanted: Sequence[str]) -> _Why | None:
        """For a pool that does not enumerate instance types: does what it selects offer the accelerators at all?"""
        if not wanted:
            return None
        family = combined.get("karpenter.k8s.aws/instance-family")
        category = combined.get("karpenter.k8s.aws/instance-category")
        maker = combined.get("karpenter.k8s.aws/instance-gpu-manufacturer")
        if family is not None and not family.complement:
            basis, found = family, [family_accelerators(f) for f in family.values]
        elif category is not None and not category.complement:
            basis, found = category, [CATEGORY_ACCELERATORS.get(c) for c in category.values]
        elif maker is not None and not maker.complement:
            basis, found = maker, [GPU_MAKERS.get(m) for m in maker.values]
        else:
            return None
        known = [offer for offer in found if offer is not None]
        if not known or len(known) != len(found):
            return None  # a family we do not know might offer it
        offered = frozenset().union(*known)
        missing = [r for r in wanted if r not in offered]
        if not missing:
            return None
        return _Why(f"offers no {missing[0]} ({basis})", f"select a NodePool whose instance types provide {missing[0]}")

    def matches(self, spec: Mapping[str, Any]) -> tuple[list[Capacity], list[_Miss]]:
        """The pools that can run the pod, and why each other one cannot."""
        key = id(spec)
        if key not in self._cache:
            ok, misses = [], []
            for pool in self.capacity:
                miss = self.evaluate(spec, pool)
                if miss is None:
                    ok.append(pool)
                else:
                    misses.append(miss)
            self._cache[key] = (spec, ok, misses)
        _, ok, misses = self._cache[key]
        return ok, misses


def check_scheduling(templates: Sequence[PodTemplate], sched: Scheduler) -> Iterator[Finding]:
    """SCHEDULING findings: pod templates no NodePool or node group can run."""
    if not sched.capacity:
        return
    static = any(not c.karpenter for c in sched.capacity)
    # Auto Mode's users run no Karpenter of their own: name what they do run.
    provisioner = "EKS Auto Mode" if any(c.auto_mode for c in sched.capacity) else "Karpenter"
    for template in templates:
        ok, misses = sched.matches(template.spec)
        if ok or template.max_pods == 0:
            continue
        best = max(m.score for m in misses)
        closest = [m for m in misses if m.score == best]
        reasons = "; ".join(f"{m.pool.short}: {m.reason}" for m in closest)
        who = "no NodePool or node group" if static else "no NodePool"
        then = "it would stay Pending" if static else f"{provisioner} would leave it Pending"
        yield Finding(
            SCHEDULING,
            object_ref(template.obj),
            f"{part_prefix(template)}{who} can run this pod ({reasons}); {then}",
            closest[0].fix,
        )
