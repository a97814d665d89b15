"""Karpenter's requirement sets (pkg/scheduling/requirements.go) and Kubernetes taint toleration: whether a pod's
node selection and tolerations admit a node."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_eks.manifests.checks.objects import list_at, mapping_at, mappings_at

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
NODE_CLASS_LABEL = "karpenter.k8s.aws/ec2nodeclass"


@dataclass(frozen=True)
class Requirement:
    """Karpenter's Requirement: a value set (or its complement) with optional integer bounds (Gt/Lt as Gte/Lte)."""

    key: str
    complement: bool
    values: frozenset[str]
    gte: int | None = None
    lte: int | None = None

    @staticmethod
    def of(key: str, operator: str, values: Sequence[Any] = ()) -> Requirement:
        key = _NORMALIZED.get(key, key)
        vals = [str(v) for v in values or ()]
        if operator == "In":
            return Requirement(key, False, frozenset(vals))
        if operator == "NotIn":
            return Requirement(key, True, frozenset(vals))
        if operator == "Exists":
            return Requirement(key, True, frozenset())
        if operator in ("Gt", "Lt", "Gte", "Lte"):
            try:
                bound = int(vals[0])
            except (IndexError, ValueError):
                return Requirement(key, False, frozenset())
            if operator == "Gt":
                return Requirement(key, True, frozenset(), gte=bound + 1)
            if operator == "Gte":
                return Requirement(key, True, frozenset(), gte=bound)
            if operator == "Lt":
                return Requirement(key, True, frozenset(), lte=bound - 1)
            return Requirement(key, True, frozenset(), lte=bound)
        # DoesNotExist, and anything unknown (which the API server would reject) matches no value.
        return Requirement(key, False, frozenset())

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

    def intersection(self, other: Requirement) -> Requirement:
        gte = max((b for b in (self.gte, other.gte) if b is not None), default=None)
        lte = min((b for b in (self.lte, other.lte) if b is not None), default=None)
        if gte is not None and lte is not None and gte > lte:
            return Requirement(self.key, False, frozenset())
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
        return Requirement(self.key, complement, values, gte, lte)

    def has_intersection(self, other: Requirement) -> bool:
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


Requirements = dict[str, Requirement]


def with_requirements(reqs: Requirements, *more: Requirement) -> Requirements:
    """The requirements with more added, intersecting any key already constrained."""
    out = dict(reqs)
    for req in more:
        out[req.key] = out[req.key].intersection(req) if req.key in out else req
    return out


def is_negative(req: Requirement) -> bool:
    """NotIn or DoesNotExist: a pod requirement a node without the key satisfies."""
    return req.operator in ("NotIn", "DoesNotExist")


@dataclass(frozen=True)
class Mismatch:
    """Why requirements do not match: an undefined key, or two requirements without common values."""

    key: str
    pod: Requirement
    node: Requirement | None


def compatible(node: Requirements, pod: Requirements, allow_undefined: frozenset[str]) -> Mismatch | None:
    """Karpenter's Requirements.Compatible (pkg/scheduling/requirements.go): undefined custom keys are denied unless
    the pod's operator is NotIn/DoesNotExist; keys both define must intersect (two negative operators always do)."""
    for key in sorted(pod):
        if key in allow_undefined or key in node or is_negative(pod[key]):
            continue
        return Mismatch(key, pod[key], None)
    for key in sorted(set(node) & set(pod)):
        if not node[key].has_intersection(pod[key]) and not (is_negative(pod[key]) and is_negative(node[key])):
            return Mismatch(key, pod[key], node[key])
    return None


def pod_terms(spec: Mapping[str, Any]) -> list[Requirements]:
    """The pod's requirement alternatives: nodeSelector plus each required nodeSelectorTerm (ORed)."""
    base: Requirements = {}
    for key, value in mapping_at(spec, "nodeSelector").items():
        base = with_requirements(base, Requirement.of(str(key), "In", [value]))
    required = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    terms = mappings_at(spec, *required)
    if not terms:
        return [base]
    out = []
    for term in terms:
        reqs = base
        for expr in mappings_at(term, "matchExpressions"):
            reqs = with_requirements(
                reqs, Requirement.of(str(expr.get("key", "")), str(expr.get("operator", "")), list_at(expr, "values"))
            )
        out.append(reqs)
    return out


def taint_text(taint: Mapping[str, Any]) -> str:
    """`key=value:Effect`, as kubectl prints a taint."""
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


def untolerated_taints(spec: Mapping[str, Any], taints: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pool's NoSchedule/NoExecute taints the pod does not tolerate."""
    tolerations = mappings_at(spec, "tolerations")
    return [
        t
        for t in taints
        if t.get("effect") in ("NoSchedule", "NoExecute") and not any(_tolerates(tol, t) for tol in tolerations)
    ]
