"""Synth-time checks over Kubernetes objects: will the pods schedule, fit the GPU limits, drain within a Spot notice,
and does every PromQL string use current vLLM metrics in a shape KEDA can read?

Pure Python over plain object dicts (no aws_cdk, no cdk8s), so a GitOps user runs the same checks on YAML:

    objects = [o for p in paths for o in yaml.safe_load_all(open(p)) if o]
    for finding in check_objects(objects, instance_resources=catalog_instance_resources):
        print(finding)

`llm_eks.infra.checks.LlmEksChecks` runs them on every Kubernetes manifest of a CDK app at `cdk synth`.

Rules (each finding is one line: the object, the problem, and the fix):

SCHEDULING  Every pod template (Deployment, StatefulSet, ReplicaSet, Job, CronJob, Pod, RayCluster/RayService/RayJob
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
GPU_LIMIT   A workload's accelerators at its maximum scale must fit the `spec.limits` of the NodePool(s) it can land
            on: max replicas (ScaledObject maxReplicaCount, KEDA's default 100 when unset; else an HPA's maxReplicas;
            else spec.replicas; Ray worker groups maxReplicas x numOfHosts; LeaderWorkerSet replicas x size) x
            accelerators per pod, counted as whole nodes when the pool's instance types are known (Karpenter limits
            count node capacity: 3-GPU pods on 4-GPU nodes use 4 each). Workloads pinned to the same pool are summed.
            Rolling-update surge and RayService upgrades (a second cluster) need extra headroom on top; not checked.
DRAIN       A container running vLLM (`vllm serve` or vllm.entrypoints.openai.api_server in command/args, or the
            vllm/vllm-openai image with its `vllm serve` entrypoint not overridden by `command`) must set
            `--shutdown-timeout N` (N > 0; vLLM's default 0 aborts in-flight requests on SIGTERM), and preStop
            (lifecycle.preStop.sleep.seconds, or an exec `sleep N`) + N must be below terminationGracePeriodSeconds
            (default 30), which must be at most 110 s (the 2-minute Spot notice minus Karpenter's reaction time). A
            timeout set only through `--config FILE` is not seen; one given as a shell variable is skipped.
PROMQL      Every PromQL string (KEDA prometheus triggers' metadata.query, PrometheusRule rule exprs, every `expr` in
            Grafana dashboards of ConfigMaps labelled grafana_dashboard) may use only current vLLM series names
            (llm_eks.manifests.promql.check_promql is the one source of the name lists). A KEDA query must also
            return at most one element of an instant vector: KEDA fails on more than one ("returned multiple
            elements") and cannot decode a scalar result (its promQueryResult reads data.result as a list of
            samples; kedacore/keda pkg/scalers/prometheus_scaler.go), so `scalar(...)` or a bare number at the top is
            a finding too. The shape is proved by a small PromQL parser: aggregations without `by` (or `by` only
            labels that are already gone) give one element, histogram_quantile drops `le` (so
            `histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m])))` is one element), element-wise functions and
            arithmetic with numbers keep the shape, one-to-one matching against a single label-free element (without
            on/ignoring) stays single, `or vector(0)` keeps it single; a query the parser cannot read is a finding.
            Alerts and dashboards may return many series; only their metric names are checked.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from llm_eks.catalog.accelerators import INSTANCE_TYPES
from llm_eks.manifests.promql import check_promql

SCHEDULING = "SCHEDULING"
GPU_LIMIT = "GPU_LIMIT"
DRAIN = "DRAIN"
PROMQL = "PROMQL"
RULES = (SCHEDULING, GPU_LIMIT, DRAIN, PROMQL)

# The 2-minute Spot interruption notice minus the time Karpenter needs to receive the event and start evicting.
MAX_GRACE_SECONDS = 110
# Kubernetes' default terminationGracePeriodSeconds.
DEFAULT_GRACE_SECONDS = 30
# KEDA's default ScaledObject maxReplicaCount.
KEDA_DEFAULT_MAX_REPLICAS = 100

# Extended resources that are accelerators (what a GPU pool offers and a limit counts).
ACCELERATOR_RESOURCES = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "habana.ai/gaudi",
)


@dataclass(frozen=True)
class Finding:
    """One problem: which rule, which object ("Kind/namespace/name"), what is wrong, and how to fix it."""

    rule: str
    object: str
    problem: str
    fix: str

    @property
    def message(self) -> str:
        """The one line a user reads: `<object>: <problem>. Fix: <fix>`."""
        return f"{self.object}: {self.problem}. Fix: {self.fix}"

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message}"


@dataclass(frozen=True)
class InstanceResources:
    """What scheduling needs to know about one instance type.

    Allocatable figures are what the kubelet offers to pods. None derives them with Karpenter's formula (AWS provider
    v1.14 pkg/providers/instancetype/types.go): CPU less kube-reserved (6 % of the first core, 1 % of the second,
    0.5 % of cores 3-4, 0.25 % of the rest); memory less the 7.5 % VM overhead, kube-reserved (255 MiB + 11 MiB per
    pod, at 110 pods) and the 100 MiB eviction threshold.
    """

    vcpus: int
    memory_gib: float
    # Extended resource -> count per instance, e.g. {"nvidia.com/gpu": 4}; any other accelerator resource is 0.
    accelerators: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    allocatable_cpu_millicores: int | None = None
    allocatable_memory_mib: int | None = None
    # Instance-store NVMe (GB); with instanceStorePolicy RAID0 it is the node's ephemeral storage.
    local_nvme_gb: int = 0
    # Karpenter's instance labels beyond those derived from the name and shape (GPU name, manufacturer, memory...);
    # None means Karpenter gives this type no such label.
    labels: Mapping[str, str | None] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def allocatable_cpu(self) -> Fraction:
        if self.allocatable_cpu_millicores is not None:
            return Fraction(self.allocatable_cpu_millicores, 1000)
        cores = self.vcpus
        reserved = Fraction(60 + (10 if cores > 1 else 0)) + 5 * min(max(cores - 2, 0), 2)
        reserved += Fraction(5, 2) * max(cores - 4, 0)
        return (cores * 1000 - reserved) / 1000

    @property
    def allocatable_memory(self) -> Fraction:
        """Bytes."""
        if self.allocatable_memory_mib is not None:
            return Fraction(self.allocatable_memory_mib * 2**20)
        capacity = int(self.memory_gib * 1024)
        mib = capacity - math.ceil(capacity * 0.075) - (255 + 11 * 110) - 100
        return Fraction(mib * 2**20)


@dataclass(frozen=True)
class StaticNodeGroup:
    """A fixed node group (EKS managed node group): its nodes' labels and taints, in Kubernetes form."""

    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # {"key": ..., "value": ..., "effect": "NoSchedule" | "NoExecute" | "PreferNoSchedule"}
    taints: tuple[Mapping[str, str], ...] = ()
    # Empty: unknown (resources are then not checked).
    instance_types: tuple[str, ...] = ()
    # "ON_DEMAND" or "SPOT" (the eks.amazonaws.com/capacityType label); None: unknown.
    capacity_type: str | None = None
    # kubernetes.io/arch of its nodes; None: unknown.
    arch: str | None = "amd64"


InstanceLookup = Callable[[str], InstanceResources | None]


# ------------------------------------------------------------------------------------------- reading objects
# Objects come from charts and from users' YAML: a field of the wrong type is read as absent, never a crash.


def _at(node: Any, *keys: str) -> Any:
    """The value at a path of mapping keys, or None."""
    for key in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _map(node: Any, *keys: str) -> Mapping[str, Any]:
    value = _at(node, *keys)
    return value if isinstance(value, Mapping) else {}


def _maps(node: Any, *keys: str) -> list[Mapping[str, Any]]:
    value = _at(node, *keys)
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _list(node: Any, *keys: str) -> list[Any]:
    value = _at(node, *keys)
    return value if isinstance(value, list) else []


def _api(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(API group, kind) of an object; the core group is ""."""
    api_version = str(obj.get("apiVersion") or "")
    return (api_version.rsplit("/", 1)[0] if "/" in api_version else ""), str(obj.get("kind") or "")


# --------------------------------------------------------------------------------------------------- quantities

_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:[eE]([+-]?\d+))?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_SUFFIX = {
    None: Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_BYTES = ("memory", "ephemeral-storage")


def quantity(value: Any) -> Fraction | None:
    """A Kubernetes quantity ("8", "500m", "32Gi", 4) as an exact number; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(value)
    match = _QUANTITY.match(value) if isinstance(value, str) else None
    if not match:
        return None
    number = Fraction(match.group(1)) * _SUFFIX[match.group(3)]
    if match.group(2):
        number *= Fraction(10) ** int(match.group(2))
    return number


def _amount(resource: str, value: Fraction) -> str:
    """A readable amount: 4 nvidia.com/gpu, 3.92 cpu, 28.6Gi memory."""
    if resource in _BYTES:
        gib = float(value / 2**30)
        text = f"{gib:.1f}".removesuffix(".0")
        return f"{text}Gi {resource}"
    if value.denominator == 1:
        return f"{value.numerator} {resource}"
    return f"{float(value):.3f}".rstrip("0").rstrip(".") + f" {resource}"


def _pod_requests(spec: Mapping[str, Any]) -> dict[str, Fraction]:
    """Effective requests of a pod, as the scheduler computes them: containers and sidecars summed, each regular init
    container (plus the sidecars started before it) as a floor. A missing request defaults to the limit."""

    def requests(container: Mapping[str, Any]) -> dict[str, Fraction]:
        merged = {**_map(container, "resources", "limits"), **_map(container, "resources", "requests")}
        out = {}
        for name, raw in merged.items():
            value = quantity(raw)
            if value is not None:
                out[str(name)] = value
        return out

    def add(into: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
        for name, value in more.items():
            into[name] = into.get(name, Fraction(0)) + value

    total: dict[str, Fraction] = {}
    for container in _maps(spec, "containers"):
        add(total, requests(container))
    sidecars: dict[str, Fraction] = {}
    floor: dict[str, Fraction] = {}
    for container in _maps(spec, "initContainers"):
        if container.get("restartPolicy") == "Always":
            add(sidecars, requests(container))
            continue
        step = dict(sidecars)
        add(step, requests(container))
        for name, value in step.items():
            floor[name] = max(floor.get(name, Fraction(0)), value)
    add(total, sidecars)
    for name, value in floor.items():
        total[name] = max(total.get(name, Fraction(0)), value)
    return total


# ----------------------------------------------------------------------------------- Karpenter requirement sets

# Karpenter's well-known labels (core + AWS provider v1.14): a pod may constrain them even when a pool does not.
WELL_KNOWN_LABELS = frozenset(
    {
        "karpenter.sh/nodepool",
        "karpenter.sh/capacity-type",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "node.kubernetes.io/windows-build",
        "topology.k8s.aws/zone-id",
        *(
            f"karpenter.k8s.aws/{suffix}"
            for suffix in (
                "capacity-reservation-id",
                "capacity-reservation-type",
                "capacity-reservation-interruptible",
                "instance-hypervisor",
                "instance-encryption-in-transit-supported",
                "instance-category",
                "instance-capability-flex",
                "instance-family",
                "instance-generation",
                "instance-size",
                "instance-local-nvme",
                "instance-cpu",
                "instance-cpu-manufacturer",
                "instance-cpu-sustained-clock-speed-mhz",
                "instance-memory",
                "instance-ebs-bandwidth",
                "instance-network-bandwidth",
                "instance-gpu-name",
                "instance-gpu-manufacturer",
                "instance-gpu-count",
                "instance-gpu-memory",
                "instance-accelerator-name",
                "instance-accelerator-manufacturer",
                "instance-accelerator-count",
                "instance-tenancy",
                "placement-group-id",
                "placement-group-partition",
            )
        ),
    }
)
# Deprecated keys Karpenter translates (pkg/apis/v1/labels.go NormalizedLabels).
_NORMALIZED = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
    "beta.kubernetes.io/os": "kubernetes.io/os",
    "beta.kubernetes.io/instance-type": "node.kubernetes.io/instance-type",
}
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
_NODE_CLASS_LABEL = "karpenter.k8s.aws/ec2nodeclass"


@dataclass(frozen=True)
class _Req:
    """Karpenter's Requirement: a value set (or its complement) with optional integer bounds (Gt/Lt as Gte/Lte)."""

    key: str
    complement: bool
    values: frozenset[str]
    gte: int | None = None
    lte: int | None = None

    @staticmethod
    def of(key: str, operator: str, values: Sequence[Any] = ()) -> _Req:
        key = _NORMALIZED.get(key, key)
        vals = [str(v) for v in values or ()]
        if operator == "In":
            return _Req(key, False, frozenset(vals))
        if operator == "NotIn":
            return _Req(key, True, frozenset(vals))
        if operator == "Exists":
            return _Req(key, True, frozenset())
        if operator in ("Gt", "Lt", "Gte", "Lte"):
            try:
                bound = int(vals[0])
            except (IndexError, ValueError):
                return _Req(key, False, frozenset())
            if operator == "Gt":
                return _Req(key, True, frozenset(), gte=bound + 1)
            if operator == "Gte":
                return _Req(key, True, frozenset(), gte=bound)
            if operator == "Lt":
                return _Req(key, True, frozenset(), lte=bound - 1)
            return _Req(key, True, frozenset(), lte=bound)
        # DoesNotExist, and anything unknown (which the API server would reject) matches no value.
        return _Req(key, False, frozenset())

    @property
    def operator(self) -> str:
        if self.complement:
            return "NotIn" if self.values else "Exists"
        return "In" if self.values else "DoesNotExist"

    def _within(self, value: str, gte: int | None, lte: int | None) -> bool:
        if gte is None and lte is None:
            return True
        try:
            number = int(value)
        except ValueError:
            return False
        return (gte is None or number >= gte) and (lte is None or number <= lte)

    def has(self, value: str) -> bool:
        inside = value in self.values
        return (not inside if self.complement else inside) and self._within(value, self.gte, self.lte)

    def intersection(self, other: _Req) -> _Req:
        gte = max((b for b in (self.gte, other.gte) if b is not None), default=None)
        lte = min((b for b in (self.lte, other.lte) if b is not None), default=None)
        if gte is not None and lte is not None and gte > lte:
            return _Req(self.key, False, frozenset())
        complement = self.complement and other.complement
        if complement:
            values = self.values | other.values
        elif self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        values = frozenset(v for v in values if self._within(v, gte, lte))
        if not complement:
            gte = lte = None
        return _Req(self.key, complement, values, gte, lte)

    def has_intersection(self, other: _Req) -> bool:
        gte = max((b for b in (self.gte, other.gte) if b is not None), default=None)
        lte = min((b for b in (self.lte, other.lte) if b is not None), default=None)
        if gte is not None and lte is not None and gte > lte:
            return False
        if self.complement and other.complement:
            return True
        if self.complement:
            return any(v not in self.values and self._within(v, gte, lte) for v in other.values)
        if other.complement:
            return any(v not in other.values and self._within(v, gte, lte) for v in self.values)
        return any(v in other.values and self._within(v, gte, lte) for v in self.values)

    def __str__(self) -> str:
        text = f"{self.key} {self.operator}"
        if self.operator in ("In", "NotIn"):
            text += " [" + ", ".join(sorted(self.values)) + "]"
        if self.gte is not None:
            text += f" >={self.gte}"
        if self.lte is not None:
            text += f" <={self.lte}"
        return text


_Reqs = dict[str, _Req]


def _add(reqs: _Reqs, *more: _Req) -> _Reqs:
    out = dict(reqs)
    for req in more:
        out[req.key] = out[req.key].intersection(req) if req.key in out else req
    return out


def _negative(req: _Req) -> bool:
    return req.operator in ("NotIn", "DoesNotExist")


@dataclass(frozen=True)
class _Mismatch:
    """Why requirements do not match: an undefined key, or two requirements without common values."""

    key: str
    pod: _Req
    node: _Req | None


def _compatible(node: _Reqs, pod: _Reqs, allow_undefined: frozenset[str]) -> _Mismatch | None:
    """Karpenter's Requirements.Compatible (pkg/scheduling/requirements.go): undefined custom keys are denied unless
    the pod's operator is NotIn/DoesNotExist; keys both define must intersect (two negative operators always do)."""
    for key in sorted(pod):
        if key in allow_undefined or key in node or _negative(pod[key]):
            continue
        return _Mismatch(key, pod[key], None)
    for key in sorted(set(node) & set(pod)):
        if not node[key].has_intersection(pod[key]) and not (_negative(pod[key]) and _negative(node[key])):
            return _Mismatch(key, pod[key], node[key])
    return None


def _pod_terms(spec: Mapping[str, Any]) -> list[_Reqs]:
    """The pod's requirement alternatives: nodeSelector plus each required nodeSelectorTerm (ORed)."""
    base: _Reqs = {}
    for key, value in _map(spec, "nodeSelector").items():
        base = _add(base, _Req.of(str(key), "In", [value]))
    required = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    terms = _maps(spec, *required)
    if not terms:
        return [base]
    out = []
    for term in terms:
        reqs = base
        for expr in _maps(term, "matchExpressions"):
            reqs = _add(reqs, _Req.of(str(expr.get("key", "")), str(expr.get("operator", "")), _list(expr, "values")))
        out.append(reqs)
    return out


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    return f"{taint.get('key', '')}{'=' + str(value) if value else ''}:{taint.get('effect', '')}"


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' Toleration.ToleratesTaint (k8s.io/api/core/v1, comparison operators enabled as in Karpenter)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return str(toleration.get("value") or "") == str(taint.get("value") or "")
    if operator in ("Gt", "Lt"):
        try:
            tol, node = int(str(toleration.get("value"))), int(str(taint.get("value")))
        except ValueError:
            return False
        return node > tol if operator == "Gt" else node < tol
    return False


def _untolerated(spec: Mapping[str, Any], taints: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    tolerations = _maps(spec, "tolerations")
    return [
        t
        for t in taints
        if t.get("effect") in ("NoSchedule", "NoExecute") and not any(_tolerates(tol, t) for tol in tolerations)
    ]


# ------------------------------------------------------------------------------------------- instance catalog

# Instance family prefix -> the accelerator resource its instances carry ("" for none). Karpenter's
# instance-category is the leading letters of the family (instanceTypeScheme `(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.`).
_CATEGORY_ACCELERATORS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "g": frozenset({"nvidia.com/gpu"}),
        "p": frozenset({"nvidia.com/gpu"}),
        "inf": frozenset({"aws.amazon.com/neuron", "aws.amazon.com/neuroncore"}),
        "trn": frozenset({"aws.amazon.com/neuron", "aws.amazon.com/neuroncore"}),
        "dl": frozenset({"habana.ai/gaudi"}),
        **{cpu: frozenset() for cpu in ("a", "c", "d", "h", "hpc", "i", "im", "is", "m", "r", "t", "u", "x", "z")},
    }
)
_FAMILY_ACCELERATORS: Mapping[str, frozenset[str]] = MappingProxyType({"g4ad": frozenset({"amd.com/gpu"})})
_GPU_MAKERS: Mapping[str, frozenset[str]] = MappingProxyType(
    {"nvidia": frozenset({"nvidia.com/gpu"}), "amd": frozenset({"amd.com/gpu"})}
)
_INSTANCE_SCHEME = re.compile(r"^([a-z]+)(-[0-9]+tb)?([0-9]+)")


def _family_accelerators(family: str) -> frozenset[str] | None:
    if family in _FAMILY_ACCELERATORS:
        return _FAMILY_ACCELERATORS[family]
    match = _INSTANCE_SCHEME.match(family)
    return _CATEGORY_ACCELERATORS.get(match.group(1)) if match else None


def _instance_labels(name: str, res: InstanceResources) -> dict[str, str | None]:
    """Karpenter's labels for an instance type that follow from its name and shape (types.go computeRequirements)."""
    family, _, size = name.partition(".")
    labels: dict[str, str | None] = {
        INSTANCE_TYPE_LABEL: name,
        "karpenter.k8s.aws/instance-family": family,
        "karpenter.k8s.aws/instance-size": size,
        "karpenter.k8s.aws/instance-cpu": str(res.vcpus),
        "karpenter.k8s.aws/instance-memory": str(int(res.memory_gib * 1024)),
        "karpenter.k8s.aws/instance-local-nvme": str(res.local_nvme_gb) if res.local_nvme_gb else None,
    }
    match = _INSTANCE_SCHEME.match(family)
    if match:
        labels["karpenter.k8s.aws/instance-category"] = match.group(1)
        labels["karpenter.k8s.aws/instance-generation"] = match.group(3)
    labels.update(res.labels)
    return labels


# Sizes of the general-purpose x86 families a system node group or CPU pool typically uses (AWS EC2 instance-type
# pages: m = 4 GiB per vCPU, c = 2, r = 8; 7th generation up to 48xlarge, 6th up to 32xlarge). Allocatable by
# Karpenter's formula (InstanceResources with no allocatable figures).
_SIZE_VCPUS = {"large": 2, "xlarge": 4, "2xlarge": 8, "4xlarge": 16, "8xlarge": 32, "12xlarge": 48, "16xlarge": 64}
_CPU_FAMILIES = {"m7i": 4, "c7i": 2, "r7i": 8, "m6i": 4, "c6i": 2, "r6i": 8}
_LARGEST = {"7": {"24xlarge": 96, "48xlarge": 192}, "6": {"24xlarge": 96, "32xlarge": 128}}


def _cpu_instance(name: str) -> InstanceResources | None:
    family, _, size = name.partition(".")
    if family not in _CPU_FAMILIES:
        return None
    vcpus = {**_SIZE_VCPUS, **_LARGEST[family[1]]}.get(size)
    if vcpus is None:
        return None
    return InstanceResources(
        vcpus=vcpus,
        memory_gib=vcpus * _CPU_FAMILIES[family],
        labels={
            "kubernetes.io/arch": "amd64",
            "karpenter.k8s.aws/instance-gpu-count": None,
            "karpenter.k8s.aws/instance-gpu-name": None,
            "karpenter.k8s.aws/instance-accelerator-count": None,
        },
    )


def catalog_instance_resources(name: str) -> InstanceResources | None:
    """Instance types from llm_eks.catalog.accelerators (with Karpenter's allocatable figures), plus the m/c/r 6i and 7i
    sizes; None for anything else (the scheduling check then assumes the type fits)."""
    row = INSTANCE_TYPES.get(name)
    if row is None:
        return _cpu_instance(name)
    accelerators = {row.extended_resource: row.accelerators}
    labels: dict[str, str | None] = {"kubernetes.io/arch": "amd64"}
    if row.accelerator_vendor == "nvidia":
        labels.update(
            {
                "karpenter.k8s.aws/instance-gpu-name": row.karpenter_name,
                "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
                "karpenter.k8s.aws/instance-gpu-count": str(row.accelerators),
                "karpenter.k8s.aws/instance-gpu-memory": str(row.accelerator_memory_mib),
                "karpenter.k8s.aws/instance-accelerator-name": None,
                "karpenter.k8s.aws/instance-accelerator-count": None,
            }
        )
    else:
        accelerators["aws.amazon.com/neuroncore"] = row.accelerators * row.cores_per_accelerator
        labels.update(
            {
                "karpenter.k8s.aws/instance-accelerator-name": row.karpenter_name,
                "karpenter.k8s.aws/instance-accelerator-manufacturer": "aws",
                "karpenter.k8s.aws/instance-accelerator-count": str(row.accelerators),
                "karpenter.k8s.aws/instance-gpu-name": None,
                "karpenter.k8s.aws/instance-gpu-count": None,
            }
        )
    return InstanceResources(
        vcpus=row.vcpus,
        memory_gib=row.memory_gib,
        accelerators=accelerators,
        allocatable_cpu_millicores=row.allocatable_cpu,
        allocatable_memory_mib=row.allocatable_memory,
        local_nvme_gb=row.local_nvme_gb,
        labels=labels,
    )


# ------------------------------------------------------------------------------------------------ the objects


def object_ref(obj: Mapping[str, Any]) -> str:
    """`Kind/namespace/name`, or `Kind/name` for an object without a namespace."""
    meta = _map(obj, "metadata")
    parts = [str(obj.get("kind", "?")), str(meta.get("namespace") or ""), str(meta.get("name", "?"))]
    return "/".join(p for p in parts if p)


def _int(value: Any, default: int) -> int:
    """An integer field; a deploy-time token (rendered null or as text) counts as the default."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _meta(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = _map(obj, "metadata")
    return str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", ""))


@dataclass(frozen=True)
class _Template:
    """One pod template of a workload, with how many such pods exist at the workload's maximum scale."""

    obj: Mapping[str, Any]
    # "" for single-template kinds; "head", "worker group gpu", "leader", "worker" otherwise.
    part: str
    spec: Mapping[str, Any]
    max_pods: int | None
    # How max_pods was worked out, for messages (e.g. "ScaledObject maxReplicaCount 6").
    scale: str
    # What to change to lower it.
    scale_fix: str
    # Pods per unit of that setting (Ray numOfHosts, LeaderWorkerSet size).
    unit_pods: int = 1


def _max_replicas(obj: Mapping[str, Any], objects: Sequence[Mapping[str, Any]]) -> tuple[int, str, str]:
    kind, ns, name = _meta(obj)
    for other in objects:
        o_kind, o_ns, _ = _meta(other)
        spec = _map(other, "spec")
        if o_ns != ns:
            continue
        if _api(other) == ("keda.sh", "ScaledObject"):
            target = _map(spec, "scaleTargetRef")
            if target.get("name") == name and (target.get("kind") or "Deployment") == kind:
                count = spec.get("maxReplicaCount")
                source = f"ScaledObject maxReplicaCount {count}"
                if count is None:
                    count = KEDA_DEFAULT_MAX_REPLICAS
                    source = f"ScaledObject maxReplicaCount unset: KEDA's {count}"
                return (
                    _int(count, KEDA_DEFAULT_MAX_REPLICAS),
                    source,
                    "the ScaledObject's maxReplicaCount (workload.replicas.max)",
                )
        if o_kind == "HorizontalPodAutoscaler":
            target = _map(spec, "scaleTargetRef")
            if target.get("name") == name and target.get("kind") == kind:
                count = _int(spec.get("maxReplicas"), 1)
                return count, f"HorizontalPodAutoscaler maxReplicas {count}", "the HPA's maxReplicas"
    count = _int(_at(obj, "spec", "replicas"), 1)
    return count, f"spec.replicas {count}", "spec.replicas"


def _ray_templates(obj: Mapping[str, Any], cluster: Mapping[str, Any]) -> Iterator[_Template]:
    if _map(cluster, "headGroupSpec", "template"):
        yield _Template(obj, "head", _map(cluster, "headGroupSpec", "template", "spec"), 1, "1 head", "")
    for group in _maps(cluster, "workerGroupSpecs"):
        hosts = _int(group.get("numOfHosts"), 1)
        if group.get("maxReplicas") is not None:
            replicas = _int(group["maxReplicas"], 0)
            source = f"maxReplicas {replicas}"
        else:
            replicas = _int(group.get("replicas"), 0)
            source = f"replicas {replicas}"
        scale = f"{source} x numOfHosts {hosts}" if hosts != 1 else source
        part = f"worker group {group.get('groupName', '?')}"
        yield _Template(
            obj, part, _map(group, "template", "spec"), replicas * hosts, scale, f"the {part}'s maxReplicas", hosts
        )


def _templates(objects: Sequence[Mapping[str, Any]]) -> Iterator[_Template]:
    """Every pod template the objects would create, except DaemonSets'."""
    for obj in objects:
        group, kind = _api(obj)
        spec = _map(obj, "spec")
        if kind in ("Deployment", "StatefulSet", "ReplicaSet") and group == "apps":
            count, source, fix = _max_replicas(obj, objects)
            yield _Template(obj, "", _map(spec, "template", "spec"), count, source, fix)
        elif kind == "Job" and group == "batch":
            count = _int(spec.get("parallelism"), 1)
            yield _Template(obj, "", _map(spec, "template", "spec"), count, f"parallelism {count}", "")
        elif kind == "CronJob" and group == "batch":
            job = _map(spec, "jobTemplate", "spec")
            count = _int(job.get("parallelism"), 1)
            yield _Template(obj, "", _map(job, "template", "spec"), count, f"parallelism {count}", "")
        elif kind == "Pod" and group == "":
            yield _Template(obj, "", spec, 1, "1 pod", "")
        elif group == "ray.io" and kind in ("RayCluster", "RayService", "RayJob"):
            cluster = {
                "RayCluster": spec,
                "RayService": spec.get("rayClusterConfig"),
                "RayJob": spec.get("rayClusterSpec"),
            }
            yield from _ray_templates(obj, _map(cluster, kind))
        elif group == "leaderworkerset.x-k8s.io" and kind == "LeaderWorkerSet":
            lwt = _map(spec, "leaderWorkerTemplate")
            groups, size = _int(spec.get("replicas"), 1), _int(lwt.get("size"), 1)
            worker = _map(lwt, "workerTemplate", "spec")
            if _map(lwt, "leaderTemplate"):
                leader = _map(lwt, "leaderTemplate", "spec")
                yield _Template(obj, "leader", leader, groups, f"replicas {groups}", "spec.replicas")
                yield _Template(
                    obj,
                    "worker",
                    worker,
                    groups * (size - 1),
                    f"replicas {groups} x (size {size} - 1)",
                    "spec.replicas",
                    max(size - 1, 1),
                )
            else:
                scale = f"replicas {groups} x size {size}"
                yield _Template(obj, "", worker, groups * size, scale, "spec.replicas", size)


def _where(template: _Template) -> str:
    return f"{template.part}: " if template.part else ""


# ------------------------------------------------------------------------------------------- capacity (pools)


@dataclass
class _Capacity:
    """A NodePool or a static node group, as the scheduling check sees it."""

    name: str
    karpenter: bool
    requirements: _Reqs
    taints: list[Mapping[str, Any]]
    limits: dict[str, Fraction]
    node_class: Mapping[str, Any] | None = None
    obj: Mapping[str, Any] | None = None
    daemon_requests: dict[str, Fraction] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"NodePool {self.name}" if self.karpenter else f"node group {self.name}"

    @property
    def short(self) -> str:
        return self.name if self.karpenter else f"node group {self.name}"

    @property
    def allow_undefined(self) -> frozenset[str]:
        return WELL_KNOWN_LABELS if self.karpenter else frozenset()


def _node_pools(objects: Sequence[Mapping[str, Any]]) -> list[_Capacity]:
    classes = {
        str(_at(obj, "metadata", "name")): _map(obj, "spec")
        for obj in objects
        if _api(obj) == ("karpenter.k8s.aws", "EC2NodeClass")
    }
    pools = []
    for obj in objects:
        if _api(obj) != ("karpenter.sh", "NodePool"):
            continue
        name = str(_at(obj, "metadata", "name") or "?")
        template = _map(obj, "spec", "template")
        tspec = _map(template, "spec")
        ref = _map(tspec, "nodeClassRef")
        reqs: _Reqs = {}
        for req in _maps(tspec, "requirements"):
            reqs = _add(reqs, _Req.of(str(req.get("key", "")), str(req.get("operator", "")), _list(req, "values")))
        labels = {**_map(template, "metadata", "labels"), "karpenter.sh/nodepool": name}
        if ref.get("name"):
            labels[_NODE_CLASS_LABEL] = ref["name"]
        reqs = _add(reqs, *(_Req.of(str(k), "In", [v]) for k, v in labels.items()))
        limits = {}
        for resource, raw in _map(obj, "spec", "limits").items():
            value = quantity(raw)
            if value is not None:
                limits[str(resource)] = value
        node_class = classes.get(str(ref.get("name"))) if ref.get("kind", "EC2NodeClass") == "EC2NodeClass" else None
        pools.append(_Capacity(name, True, reqs, _maps(tspec, "taints"), limits, node_class, obj=obj))
    return pools


def _static_capacity(group: StaticNodeGroup) -> _Capacity:
    reqs: _Reqs = {}
    labels = {**group.labels, "eks.amazonaws.com/nodegroup": group.name, "kubernetes.io/os": "linux"}
    if group.capacity_type:
        labels["eks.amazonaws.com/capacityType"] = group.capacity_type
    if group.arch:
        labels["kubernetes.io/arch"] = group.arch
    reqs = _add(reqs, *(_Req.of(str(k), "In", [v]) for k, v in labels.items()))
    for key in (
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "topology.k8s.aws/zone-id",
        "kubernetes.io/hostname",
    ):
        reqs[key] = _Req(key, True, frozenset())  # present on every node, value unknown here
    if group.instance_types:
        reqs = _add(reqs, _Req.of(INSTANCE_TYPE_LABEL, "In", group.instance_types))
    else:
        reqs[INSTANCE_TYPE_LABEL] = _Req(INSTANCE_TYPE_LABEL, True, frozenset())
    return _Capacity(group.name, False, reqs, [dict(t) for t in group.taints], {})


def _ephemeral_capacity(node_class: Mapping[str, Any], res: InstanceResources) -> Fraction:
    """Karpenter's ephemeral-storage capacity (types.go ephemeralStorage): the RAID0 instance store if any, else the
    root volume of the EC2NodeClass, else the AMI family's data/root device; less 1Gi kube-reserved and 10 %."""
    if node_class.get("instanceStorePolicy") == "RAID0" and res.local_nvme_gb:
        capacity = Fraction(res.local_nvme_gb * 10**9)
    else:
        mappings = _maps(node_class, "blockDeviceMappings")
        root = next((m for m in mappings if m.get("rootVolume")), None)
        if root is None:
            alias = " ".join(str(t.get("alias", "")) for t in _maps(node_class, "amiSelectorTerms"))
            device = "/dev/xvdb" if alias.startswith("bottlerocket") else "/dev/xvda"
            root = next((m for m in mappings if m.get("deviceName") == device), None)
        size = quantity(_at(root, "ebs", "volumeSize"))
        capacity = size if size is not None else Fraction(20 * 2**30)
    return capacity - 2**30 - capacity / 10


@dataclass(frozen=True)
class _Miss:
    """Why one pool cannot run a pod, the fix, and how close it came: (its instances fit, labels and taints passed)."""

    pool: _Capacity
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


class _Scheduler:
    """Matches pod specs against the known capacity."""

    def __init__(
        self, objects: Sequence[Mapping[str, Any]], lookup: InstanceLookup | None, static: Sequence[StaticNodeGroup]
    ) -> None:
        self.lookup = lookup
        # id(spec) -> (spec, ok, misses); the spec is kept so its id stays unique while cached.
        self._cache: dict[int, tuple[Mapping[str, Any], list[_Capacity], list[_Miss]]] = {}
        self.capacity = _node_pools(objects) + [_static_capacity(g) for g in static]
        daemonsets = [o for o in objects if _api(o) == ("apps", "DaemonSet")]
        for pool in self.capacity:
            for ds in daemonsets:
                spec = _map(ds, "spec", "template", "spec")
                if _untolerated(spec, pool.taints):
                    continue
                if any(_compatible(pool.requirements, t, pool.allow_undefined) is None for t in _pod_terms(spec)):
                    for name, value in _pod_requests(spec).items():
                        pool.daemon_requests[name] = pool.daemon_requests.get(name, Fraction(0)) + value

    def resources(self, name: str) -> InstanceResources | None:
        return self.lookup(name) if self.lookup is not None else None

    def evaluate(self, spec: Mapping[str, Any], pool: _Capacity) -> _Miss | None:
        """None when the pool can run the pod, else why not (labels, then taints, then instance types).

        All three are judged even after one fails, so a message can point at the pool the pod was meant for: one
        whose instances fit but whose taint the pod forgot to tolerate beats one that has no GPU at all.
        """
        untolerated = _untolerated(spec, pool.taints)
        mismatch: _Mismatch | None = None
        combined: _Reqs | None = None
        for term in _pod_terms(spec):
            found = _compatible(pool.requirements, term, pool.allow_undefined)
            if found is None:
                combined = _add(pool.requirements, *term.values())
                break
            mismatch = mismatch or found
        sized = self._instances(spec, pool, combined if combined is not None else pool.requirements)
        if combined is not None and not untolerated and sized is None:
            return None
        score = (sized is None, (combined is not None) + (not untolerated))
        if mismatch is not None and combined is None:
            return _Miss(pool, score, *self._mismatch_text(pool, mismatch))
        if untolerated:
            text = ", ".join(_taint_text(t) for t in untolerated)
            fix = f"add a toleration for {text} (llm_eks.manifests.node_pools.workload_placement returns it)"
            return _Miss(pool, score, f"does not tolerate taint {text}", fix)
        assert sized is not None
        return _Miss(pool, score, sized.reason, sized.fix)

    @staticmethod
    def _mismatch_text(pool: _Capacity, m: _Mismatch) -> tuple[str, str]:
        if m.node is None:
            if pool.karpenter:
                reason = f"the pod requires {m.pod} but the pool neither sets nor requires {m.key}"
            else:
                reason = f"the pod requires {m.pod} but its nodes have no label {m.key}"
            fix = f"remove {m.key} from the pod's nodeSelector/affinity or add it to {pool.label}'s labels"
            return reason, fix
        reason = f"the pod requires {m.pod} but the {'pool' if pool.karpenter else 'group'} has {m.node}"
        return reason, f"make the pod's {m.key} requirement overlap {pool.label}'s ({m.node})"

    def _instances(self, spec: Mapping[str, Any], pool: _Capacity, combined: _Reqs) -> _Why | None:
        requests = _pod_requests(spec)
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
                labels = _instance_labels(name, res)
                bad = next(
                    (
                        req
                        for key, req in sorted(combined.items())
                        if key in labels and not (_negative(req) if labels[key] is None else req.has(str(labels[key])))
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
        self, name: str, res: InstanceResources, requests: Mapping[str, Fraction], pool: _Capacity
    ) -> list[_Shortfall]:
        allocatable: dict[str, Fraction] = {"cpu": res.allocatable_cpu, "memory": res.allocatable_memory}
        for resource in ACCELERATOR_RESOURCES:
            allocatable[resource] = Fraction(res.accelerators.get(resource, 0))
        if pool.node_class is not None:
            allocatable["ephemeral-storage"] = _ephemeral_capacity(pool.node_class, res)
        out = []
        for resource, need in requests.items():
            if resource not in allocatable or need <= 0:
                continue  # a resource we cannot size (hugepages, EFA, pod ENIs...) is assumed available
            total = need + pool.daemon_requests.get(resource, Fraction(0))
            if total > allocatable[resource]:
                out.append(_Shortfall(resource, need, allocatable[resource], name))
        return out

    def _short_text(self, pool: _Capacity, shortfalls: Mapping[str, list[_Shortfall]]) -> _Why:
        common = set.intersection(*({s.resource for s in short} for short in shortfalls.values()))
        if common:
            resource = next(r for r in (*ACCELERATOR_RESOURCES, "cpu", "memory", "ephemeral-storage") if r in common)
            best = max(
                (s for short in shortfalls.values() for s in short if s.resource == resource), key=lambda s: s.have
            )
            need = best.need
            daemons = pool.daemon_requests.get(resource, Fraction(0))
            extra = f" plus {_amount(resource, daemons)} for DaemonSets" if daemons else ""
            where = best.instance if len(shortfalls) == 1 else f"the largest allowed type, {best.instance},"
            unit = "has" if resource in ACCELERATOR_RESOURCES else "has allocatable"
            have = _amount(resource, best.have).removesuffix(f" {resource}")
            reason = f"needs {_amount(resource, need)}{extra} but {where} {unit} {have}"
            if resource in ACCELERATOR_RESOURCES:
                fix = (
                    f"set workload.accelerator to an instance type with at least {need} {resource} "
                    f"(and allow it in {pool.label}) or lower the tensor-parallel size"
                )
            else:
                room = max(best.have - daemons, Fraction(0))
                fix = (
                    f"lower the pod's {resource} request to at most {_amount(resource, room)} "
                    f"or allow a larger instance type in {pool.label}"
                )
            return _Why(reason, fix)
        parts = [
            f"{name} "
            + ", ".join(f"needs {_amount(s.resource, s.need)}, has {_amount(s.resource, s.have)}" for s in short)
            for name, short in shortfalls.items()
        ]
        return _Why(
            "no allowed instance type fits the requests (" + "; ".join(parts) + ")",
            f"lower the pod's requests or allow a larger instance type in {pool.label}",
        )

    @staticmethod
    def _offers(pool: _Capacity, combined: _Reqs, wanted: Sequence[str]) -> _Why | None:
        """For a pool that does not enumerate instance types: does what it selects offer the accelerators at all?"""
        if not wanted:
            return None
        family = combined.get("karpenter.k8s.aws/instance-family")
        category = combined.get("karpenter.k8s.aws/instance-category")
        maker = combined.get("karpenter.k8s.aws/instance-gpu-manufacturer")
        if family is not None and not family.complement:
            basis, found = family, [_family_accelerators(f) for f in family.values]
        elif category is not None and not category.complement:
            basis, found = category, [_CATEGORY_ACCELERATORS.get(c) for c in category.values]
        elif maker is not None and not maker.complement:
            basis, found = maker, [_GPU_MAKERS.get(m) for m in maker.values]
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

    def matches(self, spec: Mapping[str, Any]) -> tuple[list[_Capacity], list[_Miss]]:
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


def _check_scheduling(templates: Sequence[_Template], sched: _Scheduler) -> Iterator[Finding]:
    if not sched.capacity:
        return
    static = any(not c.karpenter for c in sched.capacity)
    for template in templates:
        ok, misses = sched.matches(template.spec)
        if ok or template.max_pods == 0:
            continue
        best = max(m.score for m in misses)
        closest = [m for m in misses if m.score == best]
        reasons = "; ".join(f"{m.pool.short}: {m.reason}" for m in closest)
        who = "no NodePool or node group" if static else "no NodePool"
        then = "it would stay Pending" if static else "Karpenter would leave it Pending"
        yield Finding(
            SCHEDULING,
            object_ref(template.obj),
            f"{_where(template)}{who} can run this pod ({reasons}); {then}",
            closest[0].fix,
        )


# ------------------------------------------------------------------------------------------------- GPU limits


def _pods_per_node(res: InstanceResources, requests: Mapping[str, Fraction], pool: _Capacity) -> int:
    """How many of these pods one node of this type holds (accelerators, cpu, memory)."""
    allocatable = {"cpu": res.allocatable_cpu, "memory": res.allocatable_memory}
    for resource in ACCELERATOR_RESOURCES:
        allocatable[resource] = Fraction(res.accelerators.get(resource, 0))
    counts = []
    for resource, need in requests.items():
        if need > 0 and resource in allocatable:
            room = allocatable[resource] - pool.daemon_requests.get(resource, Fraction(0))
            counts.append(math.floor(room / need) if room > 0 else 0)
    return min(counts, default=0)


def _demand(
    sched: _Scheduler, template: _Template, pool: _Capacity, resource: str, pods: int, per_pod: Fraction
) -> tuple[Fraction, str, Callable[[Fraction], int]]:
    """Accelerators of the nodes Karpenter must launch for `pods` pods (Karpenter limits count node capacity, not pod
    requests): the tightest packing among the instance types the pool allows, or pods x per-pod when unknown.
    Also returns how many pods fit within a given limit."""

    def simple(limit: Fraction) -> int:
        return math.floor(limit / per_pod)

    if len(sched.matches(template.spec)[0]) != 1:
        return pods * per_pod, "", simple
    type_req = pool.requirements.get(INSTANCE_TYPE_LABEL)
    if type_req is None or type_req.complement:
        return pods * per_pod, "", simple
    requests = _pod_requests(template.spec)
    best: tuple[Fraction, str, Callable[[Fraction], int]] | None = None
    for name in sorted(type_req.values):
        res = sched.resources(name)
        if res is None:
            return pods * per_pod, "", simple
        per_node = _pods_per_node(res, requests, pool)
        if per_node <= 0:
            continue
        nodes = math.ceil(pods / per_node)
        node_accelerators = res.accelerators.get(resource, 0)
        need = Fraction(nodes * node_accelerators)
        if best is None or need < best[0]:

            def within(limit: Fraction, per_node: int = per_node, each: int = node_accelerators) -> int:
                return math.floor(limit / each) * per_node if each else 0

            text = f"{nodes} {name} node{'s' if nodes != 1 else ''}, {per_node} pod{'s' if per_node != 1 else ''} each"
            best = (need, text, within)
    return best if best is not None else (pods * per_pod, "", simple)


def _check_gpu_limits(templates: Sequence[_Template], sched: _Scheduler) -> Iterator[Finding]:
    pinned: dict[tuple[str, str], list[tuple[_Template, Fraction]]] = {}
    for template in templates:
        pods = template.max_pods or 0
        ok, _ = sched.matches(template.spec)
        if pods <= 0 or not ok or any(not pool.karpenter for pool in ok):
            continue  # unschedulable (reported above) or able to use fixed capacity, which has no limit
        requests = _pod_requests(template.spec)
        for resource in ACCELERATOR_RESOURCES:
            per_pod = requests.get(resource, Fraction(0))
            if per_pod <= 0 or any(resource not in pool.limits for pool in ok):
                continue  # a pool without a limit on it can grow without bound
            limit = sum((pool.limits[resource] for pool in ok), Fraction(0))
            need, nodes, within = _demand(sched, template, ok[0], resource, pods, per_pod)
            if need > limit:
                yield _limit_finding(template, ok, resource, pods, per_pod, need, nodes, limit, within(limit))
            elif len(ok) == 1:
                pinned.setdefault((ok[0].name, resource), []).append((template, need))
    for (pool_name, resource), users in pinned.items():
        pool = next(p for p in sched.capacity if p.karpenter and p.name == pool_name)
        total = sum((need for _, need in users), Fraction(0))
        if len(users) > 1 and total > pool.limits[resource]:
            parts = ", ".join(f"{object_ref(t.obj)}{' ' + t.part if t.part else ''} {need}" for t, need in users)
            limit = _amount(resource, pool.limits[resource]).removesuffix(" " + resource)
            yield Finding(
                GPU_LIMIT,
                object_ref(pool.obj or {}),
                f"the workloads it runs need {total} {resource} at their maximum scale ({parts}) but its limit is "
                f"{limit}; the last pods stay Pending",
                f'raise spec.limits["{resource}"] to at least {total} (workload.accelerator_limit) or lower the '
                "workloads' maximum replicas",
            )


def _limit_finding(
    template: _Template,
    pools: Sequence[_Capacity],
    resource: str,
    pods: int,
    per_pod: Fraction,
    need: Fraction,
    nodes: str,
    limit: Fraction,
    fit_pods: int,
) -> Finding:
    names = " + ".join(p.name for p in pools)
    what = "replicas" if template.part == "" and template.unit_pods == 1 else "pods"
    per = _amount(resource, per_pod).removesuffix(" " + resource)
    counted = f" ({nodes})" if nodes and need != pods * per_pod else ""
    allowed = _amount(resource, limit).removesuffix(" " + resource)
    fit_units = fit_pods // template.unit_pods
    scale_fix = f" or lower {template.scale_fix} to {fit_units}" if template.scale_fix and fit_units > 0 else ""
    target = f"NodePool {names}" if len(pools) == 1 else f"NodePools {names}"
    return Finding(
        GPU_LIMIT,
        object_ref(template.obj),
        f"{_where(template)}{pods} {what} ({template.scale}) x {per} {resource} need {need} {resource}{counted} but "
        f"{target} allow{'s' if len(pools) == 1 else ''} {allowed} (spec.limits); "
        f"{what} beyond {fit_pods} stay Pending",
        f'raise {target}\'s spec.limits["{resource}"] to at least {need} (workload.accelerator_limit){scale_fix}',
    )


# ------------------------------------------------------------------------------------------------------ drain

_VLLM_IMAGE = re.compile(r"(^|/)vllm/vllm-openai(:|@|$)")
_SLEEP = re.compile(r"(?:^|[;&|\s])sleep\s+(\d+(?:\.\d+)?)s?(?:$|[;&|\s])")


def _words(items: Sequence[Any]) -> list[str]:
    """Command/args as words; an element with spaces (a shell script) is split the way a shell would."""
    out: list[str] = []
    for item in items:
        text = str(item)
        if any(c.isspace() for c in text):
            try:
                out.extend(shlex.split(text))
            except ValueError:
                out.extend(text.split())
        else:
            out.append(text)
    return out


def _runs_vllm(container: Mapping[str, Any]) -> bool:
    words = _words([*_list(container, "command"), *_list(container, "args")])
    if any(a == "vllm" and b == "serve" for a, b in itertools.pairwise(words)):
        return True
    if any("vllm.entrypoints.openai.api_server" in w for w in words):
        return True
    # The image's ENTRYPOINT is `vllm serve`; an explicit command replaces it.
    return bool(_VLLM_IMAGE.search(str(container.get("image", "")))) and not _list(container, "command")


def _shutdown_timeout(container: Mapping[str, Any]) -> int | str | None:
    """vLLM's --shutdown-timeout (argparse also takes `=value` and vLLM accepts underscores); None when absent, the
    text when it is not a number (e.g. `$TIMEOUT` in a shell script: unknown here)."""
    words = _words([*_list(container, "command"), *_list(container, "args")])
    value: str | None = None
    for i, word in enumerate(words):
        flag, eq, inline = word.partition("=")
        if flag.replace("_", "-") == "--shutdown-timeout":
            value = inline if eq else (words[i + 1] if i + 1 < len(words) else "")
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return value


def _pre_stop_seconds(container: Mapping[str, Any]) -> int:
    pre_stop = _map(container, "lifecycle", "preStop")
    if "sleep" in pre_stop:
        return _int(_at(pre_stop, "sleep", "seconds"), 0)
    command = _list(pre_stop, "exec", "command")
    match = _SLEEP.search(" ".join(str(c) for c in command))
    return math.ceil(float(match.group(1))) if match else 0


def _check_drain(templates: Sequence[_Template]) -> Iterator[Finding]:
    for template in templates:
        grace = _int(template.spec.get("terminationGracePeriodSeconds"), DEFAULT_GRACE_SECONDS)
        for container in _maps(template.spec, "containers"):
            if not _runs_vllm(container):
                continue
            where = f"{_where(template)}container {container.get('name', '?')}"
            pre_stop = _pre_stop_seconds(container)
            timeout = _shutdown_timeout(container)
            if isinstance(timeout, str):
                continue  # set at run time; nothing to add up here
            if not timeout:
                shown = "without --shutdown-timeout" if timeout is None else "with --shutdown-timeout 0"
                yield Finding(
                    DRAIN,
                    object_ref(template.obj),
                    f"{where} runs vLLM {shown}, so SIGTERM aborts in-flight requests (vLLM's default 0 = abort)",
                    f"pass --shutdown-timeout N with preStop {pre_stop} s + N below terminationGracePeriodSeconds "
                    f"(at most {MAX_GRACE_SECONDS} s), e.g. {max(MAX_GRACE_SECONDS - pre_stop - 5, 1)}",
                )
                continue
            drain = pre_stop + timeout
            if grace > MAX_GRACE_SECONDS:
                yield Finding(
                    DRAIN,
                    object_ref(template.obj),
                    f"{where}: terminationGracePeriodSeconds {grace} s is above {MAX_GRACE_SECONDS} s, longer than a "
                    "Spot interruption leaves (2-minute notice); the node goes away mid-drain",
                    f"set terminationGracePeriodSeconds to at most {MAX_GRACE_SECONDS} and keep preStop + "
                    "--shutdown-timeout below it",
                )
            if drain >= grace:
                yield Finding(
                    DRAIN,
                    object_ref(template.obj),
                    f"{where}: preStop {pre_stop} s + --shutdown-timeout {timeout} s = {drain} s is not below "
                    f"terminationGracePeriodSeconds {grace} s; the kubelet kills vLLM before in-flight requests finish",
                    f"lower --shutdown-timeout to at most {max(min(grace, MAX_GRACE_SECONDS) - pre_stop - 1, 0)} "
                    f"or raise terminationGracePeriodSeconds above {drain} (at most {MAX_GRACE_SECONDS})",
                )


# ---------------------------------------------------------------------------------------------------- PromQL


class PromQLError(ValueError):
    """The text is not PromQL this parser understands."""


_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<duration>(?:\d+(?:ms|s|m|h|d|w|y))+(?![A-Za-z0-9_:]))
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>==|!=|<=|>=|=~|!~|[-+*/%^<>=(),@{}\[\]])
    """,
    re.VERBOSE,
)
_AGGREGATIONS = frozenset(
    {"sum", "avg", "min", "max", "count", "group", "stddev", "stdvar", "quantile", "topk", "bottomk", "limitk"}
    | {"limit_ratio", "count_values"}
)
_SET_OPS = frozenset({"and", "or", "unless"})
_PRECEDENCE = {
    "or": 1,
    "and": 2,
    "unless": 2,
    "==": 3,
    "!=": 3,
    "<=": 3,
    ">=": 3,
    "<": 3,
    ">": 3,
    "+": 4,
    "-": 4,
    "*": 5,
    "/": 5,
    "%": 5,
    "atan2": 5,
    "^": 6,
}
# Functions whose result has one element per element of their (first) vector argument.
_ELEMENTWISE = frozenset(
    {
        *("abs", "ceil", "floor", "exp", "ln", "log2", "log10", "sqrt", "sgn", "round", "clamp", "clamp_min"),
        *("clamp_max", "deg", "rad", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "sin"),
        *("sinh", "tan", "tanh", "timestamp", "sort", "sort_desc", "sort_by_label", "sort_by_label_desc"),
        *("label_replace", "label_join", "rate", "irate", "increase", "delta", "idelta", "deriv", "resets"),
        *("predict_linear", "changes", "holt_winters", "double_exponential_smoothing", "avg_over_time"),
        *("min_over_time", "max_over_time", "sum_over_time", "count_over_time", "quantile_over_time"),
        *("stddev_over_time", "stdvar_over_time", "last_over_time", "first_over_time", "present_over_time"),
        *("mad_over_time", "ts_of_min_over_time", "ts_of_max_over_time", "ts_of_last_over_time", "info"),
        *("histogram_count", "histogram_sum", "histogram_avg", "histogram_stddev", "histogram_stdvar"),
        *("histogram_fraction", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "hour", "minute"),
        *("month", "year"),
    }
)


@dataclass(frozen=True)
class _Shape:
    """What an expression returns: a scalar/string, or a (range) vector whose elements are told apart by at most
    `labels` (None: by any labels, i.e. one element per series)."""

    kind: str  # "scalar", "string", "vector", "matrix"
    labels: frozenset[str] | None = None

    @property
    def single(self) -> bool:
        return self.kind == "vector" and self.labels == frozenset()


_SCALAR = _Shape("scalar")
_ONE = _Shape("vector", frozenset())


class _PromQL:
    """A small recursive-descent PromQL parser that computes the result shape, never the values."""

    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            if text[pos] in "{[":
                end = self._closing(text, pos)
                self.tokens.append(("matchers" if text[pos] == "{" else "range", text[pos + 1 : end]))
                pos = end + 1
                continue
            match = _TOKEN.match(text, pos)
            if not match:
                raise PromQLError(f"unexpected character {text[pos]!r} at offset {pos}")
            if match.lastgroup != "space":
                self.tokens.append((str(match.lastgroup), match.group()))
            pos = match.end()
        self.i = 0

    @staticmethod
    def _closing(text: str, start: int) -> int:
        """Index of the bracket closing text[start], skipping quoted strings (label values may hold any bracket)."""
        close = "}" if text[start] == "{" else "]"
        pos = start + 1
        while pos < len(text):
            c = text[pos]
            if c in "\"'`":
                match = _TOKEN.match(text, pos)
                if not match or match.lastgroup != "string":
                    raise PromQLError(f"unterminated string at offset {pos}")
                pos = match.end()
                continue
            if c == close:
                return pos
            if c in "{[":
                raise PromQLError(f"unexpected {c!r} at offset {pos}")
            pos += 1
        raise PromQLError(f"missing {close!r} for {text[start]!r} at offset {start}")

    def peek(self, offset: int = 0) -> tuple[str, str]:
        j = self.i + offset
        return self.tokens[j] if j < len(self.tokens) else ("eof", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token[0] == "eof" or (value is not None and token[1] != value):
            raise PromQLError(f"expected {value or 'more'} but found {token[1] or 'the end'}")
        self.i += 1
        return token

    def parse(self) -> _Shape:
        shape = self.expr(0)
        if self.peek()[0] != "eof":
            raise PromQLError(f"unexpected {self.peek()[1]!r}")
        return shape

    def expr(self, min_precedence: int) -> _Shape:
        left = self.unary()
        while True:
            kind, value = self.peek()
            op = value if kind in ("op", "ident") else ""
            precedence = _PRECEDENCE.get(op)
            if precedence is None or precedence < min_precedence:
                return left
            self.take()
            if self.peek()[1] == "bool":
                self.take()
            matching, group = self.modifiers()
            right = self.expr(precedence if op == "^" else precedence + 1)
            left = self.binary(op, left, right, matching, group)

    def modifiers(self) -> tuple[str | None, str | None]:
        matching = group = None
        if self.peek()[1] in ("on", "ignoring"):
            matching = self.take()[1]
            self.labels()
        if self.peek()[1] in ("group_left", "group_right"):
            group = self.take()[1]
            if self.peek()[1] == "(":
                self.labels()
        return matching, group

    def labels(self) -> frozenset[str]:
        self.take("(")
        names: set[str] = set()
        while self.peek()[1] != ")":
            kind, value = self.take()
            if kind not in ("ident", "string"):
                raise PromQLError(f"expected a label name but found {value!r}")
            names.add(value.strip("\"'`"))
            if self.peek()[1] == ",":
                self.take()
        self.take(")")
        return frozenset(names)

    @staticmethod
    def binary(op: str, left: _Shape, right: _Shape, matching: str | None, group: str | None) -> _Shape:
        if left.kind == "scalar" and right.kind == "scalar" and op not in _SET_OPS:
            return _SCALAR
        if left.kind not in ("scalar", "vector") or right.kind not in ("scalar", "vector"):
            raise PromQLError(f"operator {op} needs scalars or instant vectors")
        if op in _SET_OPS:
            if op != "or":
                return left
            if left.labels is None or right.labels is None:
                return _Shape("vector")
            return _Shape("vector", left.labels | right.labels)
        if left.kind == "scalar":
            return right
        if right.kind == "scalar":
            return left
        if group == "group_left":
            return left
        if group == "group_right":
            return right
        if left.single and right.single:
            return _ONE
        # One-to-one matching on full label sets: a single, label-free element pairs with at most one element of the
        # other side. With on()/ignoring() several elements of the other side can share its signature, which
        # Prometheus rejects ("many-to-one matching must be explicit"), so that shape is not proved single.
        if matching is None and (left.single or right.single):
            return _ONE
        if left.single:
            return right
        return left if left.labels is not None or right.single else right

    def unary(self) -> _Shape:
        if self.peek()[1] in ("-", "+"):
            self.take()
            return self.unary()
        return self.postfix(self.primary())

    def postfix(self, shape: _Shape) -> _Shape:
        while True:
            kind, value = self.peek()
            if kind == "range":
                self.take()
                if shape.kind != "vector" and ":" not in value:
                    raise PromQLError("a range selector needs an instant vector")
                shape = _Shape("matrix", shape.labels)
            elif value == "offset":
                self.take()
                if self.peek()[1] in ("-", "+"):
                    self.take()
                self.take()
            elif value == "@":
                self.take()
                if self.peek()[1] in ("-", "+"):
                    self.take()
                token = self.take()
                if token[1] in ("start", "end"):
                    self.take("(")
                    self.take(")")
            else:
                return shape

    def primary(self) -> _Shape:
        kind, value = self.take()
        if kind in ("number", "duration"):
            return _SCALAR
        if kind == "string":
            return _Shape("string")
        if kind == "matchers":
            return _Shape("vector")
        if value == "(":
            inner = self.expr(0)
            self.take(")")
            return inner
        if kind == "ident":
            lowered = value.lower()
            if lowered in ("inf", "nan"):
                return _SCALAR
            if value in _AGGREGATIONS and self.peek()[1] in ("(", "by", "without"):
                return self.aggregation(value)
            if self.peek()[1] == "(":
                return self.function(value)
            if self.peek()[0] == "matchers":
                self.take()
            return _Shape("vector")
        raise PromQLError(f"unexpected {value!r}")

    def arguments(self) -> list[_Shape]:
        self.take("(")
        args: list[_Shape] = []
        while self.peek()[1] != ")":
            args.append(self.expr(0))
            if self.peek()[1] == ",":
                self.take()
            elif self.peek()[1] != ")":
                raise PromQLError(f"expected ',' or ')' but found {self.peek()[1] or 'the end'}")
        self.take(")")
        return args

    def aggregation(self, op: str) -> _Shape:
        clause = grouping = None
        if self.peek()[1] in ("by", "without"):
            clause = self.take()[1]
            grouping = self.labels()
        # topk(1, v) keeps one element per group, like sum; a larger k keeps up to k.
        k_is_one = self.peek(1)[0] == "number" and float(self.peek(1)[1]) == 1 and self.peek(2)[1] == ","
        args = self.arguments()
        if clause is None and self.peek()[1] in ("by", "without"):
            clause = self.take()[1]
            grouping = self.labels()
        if not args or args[-1].kind != "vector":
            raise PromQLError(f"{op}() needs an instant vector")
        inner = args[-1]
        if op == "count_values":
            return _Shape("vector")
        if op == "limit_ratio" or (op in ("topk", "bottomk", "limitk") and not k_is_one):
            return inner if inner.single else _Shape("vector")
        return _Shape("vector", self._grouped(inner, clause, grouping))

    @staticmethod
    def _grouped(inner: _Shape, clause: str | None, grouping: frozenset[str] | None) -> frozenset[str] | None:
        if inner.single or clause is None:
            return frozenset()
        assert grouping is not None
        if clause == "by":
            return grouping if inner.labels is None else grouping & inner.labels
        return None if inner.labels is None else inner.labels - grouping

    def function(self, name: str) -> _Shape:
        args = self.arguments()
        vectors = [a for a in args if a.kind in ("vector", "matrix")]
        if name in ("scalar", "time", "pi"):
            return _SCALAR
        if name in ("vector", "absent", "absent_over_time"):
            return _ONE
        if name == "histogram_quantile":
            if len(args) != 2 or args[1].kind != "vector":
                raise PromQLError("histogram_quantile(φ, v) needs a number and an instant vector")
            labels = args[1].labels
            return _Shape("vector", None if labels is None else labels - {"le"})
        if name in _ELEMENTWISE:
            if not vectors:
                return _ONE  # minute(), hour()... default to vector(time())
            return _Shape("vector", vectors[0].labels)
        return _Shape("vector")


def _keda_shape(query: str) -> tuple[str, str] | None:
    """(problem, fix) when a KEDA Prometheus query may not return at most one element of an instant vector."""
    try:
        shape = _PromQL(query).parse()
    except PromQLError as err:
        return f"cannot be parsed as PromQL ({err})", "correct the query's syntax"
    if shape.single:
        return None
    if shape.kind in ("scalar", "string"):
        return (
            f"returns a {shape.kind}, which KEDA cannot decode (it reads the result as a list of vector samples); "
            "KEDA reports an error instead of a value",
            "return a one-element vector: sum(...) instead of scalar(...), or vector(<scalar>)",
        )
    if shape.kind == "matrix":
        return (
            "returns a range vector, which KEDA reads as empty (0)",
            "reduce it over time (rate, max_over_time...) and wrap it in sum(...)",
        )
    per = "series" if shape.labels is None else ", ".join(sorted(shape.labels))
    return (
        f"can return one element per {per}; KEDA fails with 'returned multiple elements' when more than one exists",
        "wrap it in sum(...) (or another aggregation without by)",
    )


def promql_shape_problem(query: str) -> str | None:
    """Why a KEDA Prometheus query may not return at most one element of an instant vector; None when it always does."""
    found = _keda_shape(query)
    return found[0] if found else None


def _name_findings(ref: str, where: str, expr: str) -> Iterator[Finding]:
    for line in check_promql(expr):
        problem, sep, fix = line.partition("; ")
        if not sep:
            fix = "use a current vLLM series name (llm_eks.manifests.promql.CURRENT_VLLM_METRICS)"
        yield Finding(PROMQL, ref, f"{where} {problem}", fix)


def _exprs(node: Any) -> Iterator[str]:
    """Every `expr` string in a Grafana dashboard (panels, nested rows, targets)."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            else:
                yield from _exprs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _exprs(value)


def _check_promql(objects: Sequence[Mapping[str, Any]]) -> Iterator[Finding]:
    for obj in objects:
        group, kind = _api(obj)
        ref = object_ref(obj)
        spec = _map(obj, "spec")
        if group == "keda.sh" and kind in ("ScaledObject", "ScaledJob"):
            for i, trigger in enumerate(_maps(spec, "triggers")):
                query = _at(trigger, "metadata", "query")
                if trigger.get("type") != "prometheus" or not isinstance(query, str):
                    continue
                where = f"trigger {trigger.get('name') or i} query {query!r}:"
                yield from _name_findings(ref, where, query)
                shape = _keda_shape(query)
                if shape is not None:
                    yield Finding(PROMQL, ref, f"{where} {shape[0]}", shape[1])
        elif group == "monitoring.coreos.com" and kind == "PrometheusRule":
            for rule_group in _maps(spec, "groups"):
                for rule in _maps(rule_group, "rules"):
                    expr = rule.get("expr")
                    if isinstance(expr, str):
                        name = rule.get("alert") or rule.get("record") or "?"
                        yield from _name_findings(ref, f"rule {name}:", expr)
        elif (group, kind) == ("", "ConfigMap") and "grafana_dashboard" in _map(obj, "metadata", "labels"):
            for key, text in _map(obj, "data").items():
                if not str(key).endswith(".json"):
                    continue
                try:
                    dashboard = json.loads(text)
                except (TypeError, ValueError) as err:
                    yield Finding(PROMQL, ref, f"dashboard {key} is not valid JSON ({err})", "fix the dashboard JSON")
                    continue
                for expr in dict.fromkeys(_exprs(dashboard)):
                    yield from _name_findings(ref, f"dashboard {key}:", expr)


# ------------------------------------------------------------------------------------------------------ entry


def check_objects(
    objects: Sequence[Mapping[str, Any]],
    *,
    instance_resources: InstanceLookup | None = None,
    static_nodes: Sequence[StaticNodeGroup] = (),
) -> list[Finding]:
    """Every finding of every rule (see the module docstring), in rule order then object order.

    `instance_resources` sizes instance types (e.g. `catalog_instance_resources`); None skips sizing. `static_nodes`
    are node groups outside Karpenter that pods may also land on.
    """
    objects = [o for o in objects if isinstance(o, Mapping)]
    templates = list(_templates(objects))
    scheduler = _Scheduler(objects, instance_resources, static_nodes)
    return [
        *_check_scheduling(templates, scheduler),
        *_check_gpu_limits(templates, scheduler),
        *_check_drain(templates),
        *_check_promql(objects),
    ]
