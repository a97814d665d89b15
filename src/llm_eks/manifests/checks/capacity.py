"""The capacity pods may land on: Karpenter NodePools read from the objects, and static node groups."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from llm_eks.manifests.checks.instances import INSTANCE_TYPE_LABEL, InstanceResources
from llm_eks.manifests.checks.objects import group_kind, list_at, mapping_at, mappings_at, value_at
from llm_eks.manifests.checks.requirements import (
    NODE_CLASS_LABEL,
    WELL_KNOWN_LABELS,
    Requirement,
    Requirements,
    with_requirements,
)
from llm_eks.manifests.quantities import quantity


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


@dataclass
class Capacity:
    """A NodePool or a static node group, as the scheduling check sees it."""

    name: str
    karpenter: bool
    requirements: Requirements
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
    def auto_mode(self) -> bool:
        """An EKS Auto Mode NodePool (its node class is eks.amazonaws.com's): AWS runs the Karpenter behind it."""
        return bool(self.obj) and mapping_at(self.obj, "spec", "template", "spec", "nodeClassRef").get("group") == (
            "eks.amazonaws.com"
        )

    @property
    def allow_undefined(self) -> frozenset[str]:
        return WELL_KNOWN_LABELS if self.karpenter else frozenset()


def node_pools(objects: Sequence[Mapping[str, Any]]) -> list[Capacity]:
    """Every karpenter.sh NodePool among the objects, with its EC2NodeClass when that is there too."""
    classes = {
        str(value_at(obj, "metadata", "name")): mapping_at(obj, "spec")
        for obj in objects
        if group_kind(obj) == ("karpenter.k8s.aws", "EC2NodeClass")
    }
    pools = []
    for obj in objects:
        if group_kind(obj) != ("karpenter.sh", "NodePool"):
            continue
        name = str(value_at(obj, "metadata", "name") or "?")
        template = mapping_at(obj, "spec", "template")
        tspec = mapping_at(template, "spec")
        ref = mapping_at(tspec, "nodeClassRef")
        reqs: Requirements = {}
        for req in mappings_at(tspec, "requirements"):
            reqs = with_requirements(
                reqs, Requirement.of(str(req.get("key", "")), str(req.get("operator", "")), list_at(req, "values"))
            )
        labels = {**mapping_at(template, "metadata", "labels"), "karpenter.sh/nodepool": name}
        if ref.get("name"):
            labels[NODE_CLASS_LABEL] = ref["name"]
        reqs = with_requirements(reqs, *(Requirement.of(str(k), "In", [v]) for k, v in labels.items()))
        limits = {}
        for resource, raw in mapping_at(obj, "spec", "limits").items():
            value = quantity(raw)
            if value is not None:
                limits[str(resource)] = value
        node_class = classes.get(str(ref.get("name"))) if ref.get("kind", "EC2NodeClass") == "EC2NodeClass" else None
        pools.append(Capacity(name, True, reqs, mappings_at(tspec, "taints"), limits, node_class, obj=obj))
    return pools


def static_capacity(group: StaticNodeGroup) -> Capacity:
    """A static node group as the labels its nodes carry (zone, region and hostname: any value)."""
    reqs: Requirements = {}
    labels = {**group.labels, "eks.amazonaws.com/nodegroup": group.name, "kubernetes.io/os": "linux"}
    if group.capacity_type:
        labels["eks.amazonaws.com/capacityType"] = group.capacity_type
    if group.arch:
        labels["kubernetes.io/arch"] = group.arch
    reqs = with_requirements(reqs, *(Requirement.of(str(k), "In", [v]) for k, v in labels.items()))
    for key in (
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "topology.k8s.aws/zone-id",
        "kubernetes.io/hostname",
    ):
        reqs[key] = Requirement(key, True, frozenset())  # present on every node, value unknown here
    if group.instance_types:
        reqs = with_requirements(reqs, Requirement.of(INSTANCE_TYPE_LABEL, "In", group.instance_types))
    else:
        reqs[INSTANCE_TYPE_LABEL] = Requirement(INSTANCE_TYPE_LABEL, True, frozenset())
    return Capacity(group.name, False, reqs, [dict(t) for t in group.taints], {})


def ephemeral_capacity(node_class: Mapping[str, Any], res: InstanceResources) -> Fraction:
    """Karpenter's ephemeral-storage capacity (types.go ephemeralStorage): the RAID0 instance store if any, else the
    root volume of the EC2NodeClass, else the AMI family's data/root device; less 1Gi kube-reserved and 10 %."""
    if node_class.get("instanceStorePolicy") == "RAID0" and res.local_nvme_gb:
        capacity = Fraction(res.local_nvme_gb * 10**9)
    else:
        mappings = mappings_at(node_class, "blockDeviceMappings")
        root = next((m for m in mappings if m.get("rootVolume")), None)
        if root is None:
            alias = " ".join(str(t.get("alias", "")) for t in mappings_at(node_class, "amiSelectorTerms"))
            device = "/dev/xvdb" if alias.startswith("bottlerocket") else "/dev/xvda"
            root = next((m for m in mappings if m.get("deviceName") == device), None)
        size = quantity(value_at(root, "ebs", "volumeSize"))
        capacity = size if size is not None else Fraction(20 * 2**30)
    return capacity - 2**30 - capacity / 10
