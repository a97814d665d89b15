"""What the checks know about EC2 instance types: allocatable resources, accelerators, and the instance labels
Karpenter derives from a type's name and shape."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType

from llm_eks.catalog.accelerators import INSTANCE_TYPES

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"

# Extended resources that are accelerators (what a GPU pool offers and a limit counts).
ACCELERATOR_RESOURCES = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "habana.ai/gaudi",
)


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


InstanceLookup = Callable[[str], InstanceResources | None]


# Instance family prefix -> the accelerator resource its instances carry ("" for none). Karpenter's
# instance-category is the leading letters of the family (instanceTypeScheme `(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.`).
CATEGORY_ACCELERATORS: Mapping[str, frozenset[str]] = MappingProxyType(
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
GPU_MAKERS: Mapping[str, frozenset[str]] = MappingProxyType(
    {"nvidia": frozenset({"nvidia.com/gpu"}), "amd": frozenset({"amd.com/gpu"})}
)
_INSTANCE_SCHEME = re.compile(r"^([a-z]+)(-[0-9]+tb)?([0-9]+)")


def family_accelerators(family: str) -> frozenset[str] | None:
    """The accelerator resources an instance family offers; None for a family not known here."""
    if family in _FAMILY_ACCELERATORS:
        return _FAMILY_ACCELERATORS[family]
    match = _INSTANCE_SCHEME.match(family)
    return CATEGORY_ACCELERATORS.get(match.group(1)) if match else None


def instance_labels(name: str, res: InstanceResources) -> dict[str, str | None]:
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
