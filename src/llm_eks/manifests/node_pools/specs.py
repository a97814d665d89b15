"""What the node pools are made of: the pool specs (GPU and CPU), the chart's props, their validation, the labels and
taints pools advertise, and `workload_placement`, which makes a workload select exactly them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from llm_eks import aws_ids
from llm_eks.catalog import accelerators as catalog
from llm_eks.error_codes import E123, E124, E406, E407
from llm_eks.errors import fail
from llm_eks.manifests.disruption import CPU_DISRUPTION, GPU_DISRUPTION, Disruption
from llm_eks.manifests.node_pools.reserved import (
    CAPACITY_BLOCK_DRAIN,
    CAPACITY_BLOCK_DRAIN_SECONDS,
    RESERVED,
    ReservedCapacity,
    duration_seconds,
)
from llm_eks.planner.compute_mode import COMPUTE_MODES, KARPENTER
from llm_eks.versions import AL2023_AMI_VERSION, BOTTLEROCKET_AMI_VERSION

# Labels every pool puts on its nodes; workloads and DaemonSets select on them (never on instance types).
LABEL_NODE_POOL = "llm-eks.io/node-pool"
LABEL_ACCELERATOR = "llm-eks.io/accelerator"
# The AMI family of the node: the NVIDIA device plugin DaemonSet must stay off Bottlerocket nodes.
LABEL_AMI_FAMILY = "llm-eks.io/ami-family"
# Karpenter finds subnets and security groups by this tag (value: the cluster name); the cluster construct tags its
# private subnets with it (it imports this constant: constructs depend on manifests, never the reverse).
DISCOVERY_TAG = "karpenter.sh/discovery"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
CAPACITY_TYPES = ("spot", "on-demand")
# With capacity reservations a GPU pool may also launch `reserved` capacity (reserved.py), which Karpenter prefers.
POOL_CAPACITY_TYPES = (RESERVED, *CAPACITY_TYPES)

NVIDIA = "nvidia"
NEURON = "neuron"
VENDORS = (NEURON, NVIDIA)
# The extended resource each vendor's device plugin advertises; it is also the taint key of that vendor's nodes.
ACCELERATOR_RESOURCE: Mapping[str, str] = MappingProxyType({NVIDIA: "nvidia.com/gpu", NEURON: "aws.amazon.com/neuron"})
NODE_CLASS_FOR_VENDOR: Mapping[str, str] = MappingProxyType({NVIDIA: "gpu-nvidia", NEURON: "neuron"})
CPU_NODE_CLASS = "default"

BOTTLEROCKET = "bottlerocket"
AL2023 = "al2023"
AMI_FAMILIES = (AL2023, BOTTLEROCKET)
DEFAULT_AMI_FAMILY = BOTTLEROCKET
DEFAULT_AMI_VERSIONS: Mapping[str, str] = MappingProxyType(
    {BOTTLEROCKET: BOTTLEROCKET_AMI_VERSION, AL2023: AL2023_AMI_VERSION}
)
# Release tag formats the Karpenter alias accepts for each family (bottlerocket@v1.65.0, al2023@v20260903).
_AMI_VERSION_FORMAT: Mapping[str, tuple[re.Pattern[str], str]] = MappingProxyType(
    {
        BOTTLEROCKET: (re.compile(r"^v\d+\.\d+\.\d+$"), "a Bottlerocket release tag like v1.65.0"),
        AL2023: (re.compile(r"^v\d{8}$"), "an amazon-eks-ami release tag like v20260903"),
    }
)


# Catalog families the pinned AMIs cannot drive: G7's RTX PRO 4500 GPUs need NVIDIA driver 595, while the EKS AL2023
# and Bottlerocket NVIDIA AMIs ship the 580 branch (awslabs/amazon-eks-ami doc/usage/g7-ami.md; Bottlerocket's
# -nvidia-595 variants are not what the Karpenter alias resolves).
UNSUPPORTED_FAMILIES: Mapping[str, str] = MappingProxyType(
    {"g7": "its RTX PRO 4500 GPUs need NVIDIA driver 595 and the pinned EKS AMIs ship 580"}
)


def supported_families() -> tuple[str, ...]:
    """Accelerator families the planner's catalog lists and this chart can build capacity for (all x86_64)."""
    return tuple(sorted(f for f in catalog.FAMILIES if f not in UNSUPPORTED_FAMILIES))


# Patterns from the Karpenter v1.14 CRDs, checked here so a typo fails at synth, not at `kubectl apply`.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# EC2NodeClass.spec.tags keys Karpenter reserves for itself (CRD validation rules).
_RESERVED_TAG_PREFIXES = aws_ids.KARPENTER_RESERVED_TAG_PREFIXES
_RESERVED_TAGS = aws_ids.KARPENTER_RESERVED_TAGS


def _is_token(value: str) -> bool:
    """A CDK token stands for a value only known at deploy time: copy it, never validate its content."""
    return "${Token[" in value


def _check_capacity_types(path: str, values: tuple[str, ...], *, reserved: bool = False) -> None:
    """'spot' and/or 'on-demand'; with `reserved` (a pool with capacity reservations) 'reserved' too."""
    if not values:
        raise fail(
            E406,
            path,
            values,
            "must list 'reserved', 'spot' or 'on-demand'" if reserved else "must list 'spot', 'on-demand' or both",
        )
    allowed = POOL_CAPACITY_TYPES if reserved else CAPACITY_TYPES
    for i, value in enumerate(values):
        if value not in allowed:
            if reserved:
                raise fail(E406, f"{path}[{i}]", value, "must be 'reserved', 'spot' or 'on-demand'")
            extra = " (or 'reserved', with a reservation)" if value == RESERVED else ""
            raise fail(E406, f"{path}[{i}]", value, f"must be 'spot' or 'on-demand'{extra}")
    if len(set(values)) != len(values):
        raise fail(E406, path, values, "must not repeat a capacity type")


def _check_name(path: str, name: str) -> None:
    if not _DNS_LABEL.match(name):
        raise fail(E406, path, name, "must be a DNS label: lowercase letters, digits and '-', at most 63 characters")


@dataclass(frozen=True)
class GpuPoolSpec:
    """One NodePool for one accelerator family; family, sizes and counts come from the plan and the catalog
    (llm_eks.catalog.accelerators), and are checked against it."""

    # NodePool name and the value of the llm-eks.io/node-pool label, e.g. "gpu-g6e".
    name: str
    vendor: str
    instance_family: str
    # The sizes the plan uses, e.g. ("g6e.xlarge",): the pool never launches a size nobody planned for.
    instance_types: tuple[str, ...]
    # Accelerators on the largest planned size; None: from the catalog. Given, it must agree with the catalog.
    accelerators_per_node: int | None = None
    # Spot first (cheaper); with both allowed Karpenter tries Spot and falls back to on-demand when Spot has no
    # capacity for the request (Karpenter v1 prioritizes reserved, then spot, then on-demand).
    capacity_types: tuple[str, ...] = CAPACITY_TYPES
    # Cap on accelerators the pool may launch: a runaway scale-out stops here, not at the account's quota.
    accelerator_limit: int = 8
    # None: from the catalog (every g5/g6/g6e/p* size has local NVMe; inf2 has none).
    has_nvme: bool | None = None
    # Never evicts a running inference pod; one node at a time (see Disruption).
    disruption: Disruption = GPU_DISRUPTION
    # EFA-only interfaces on each node, for replicas that span nodes (the instance's EFA count); 0: no EFA. Above 0
    # the pool gets an EC2NodeClass of its own listing them, in a cluster placement group (efa.py).
    efa_interfaces: int = 0
    # Capacity reservations the pool launches into first; "reserved" must then be among capacity_types (alone: the
    # pool launches nothing else). None: Spot and on-demand only.
    reservation: ReservedCapacity | None = None
    # Karpenter's NodePool weight (1-100): among the pools a pod may use, the heavier is tried first (an on-demand
    # floor above the Spot pool, above a fallback family's). None: unweighted.
    weight: int | None = None

    @property
    def resource(self) -> str:
        """The extended resource (and taint key) of the pool's accelerators."""
        return ACCELERATOR_RESOURCE[self.vendor]

    @property
    def node_class(self) -> str:
        """The vendor's shared EC2NodeClass, or one of the family's own: EFA interfaces (per family and count) or
        capacity reservations need one."""
        shared = NODE_CLASS_FOR_VENDOR[self.vendor]
        if self.efa_interfaces:
            return f"{shared}-{self.instance_family}-efa{self.efa_interfaces}"
        if self.reservation is not None:
            return f"{shared}-{self.instance_family}"
        return shared

    @property
    def accelerators(self) -> int:
        """Accelerators on the largest planned size."""
        if self.accelerators_per_node is not None:
            return self.accelerators_per_node
        return max(catalog.INSTANCE_TYPES[t].accelerators for t in self.instance_types)

    @property
    def nvme(self) -> bool:
        """Whether any planned size has local NVMe (RAID0 is a no-op on sizes without it)."""
        if self.has_nvme is not None:
            return self.has_nvme
        return any(catalog.INSTANCE_TYPES[t].local_nvme_gb > 0 for t in self.instance_types)

    def validate(self, path: str) -> None:
        _check_name(f"{path}.name", self.name)
        if self.vendor not in VENDORS:
            raise fail(E406, f"{path}.vendor", self.vendor, f"must be one of {', '.join(VENDORS)}")
        if self.instance_family in UNSUPPORTED_FAMILIES:
            raise fail(
                E406, f"{path}.instance_family", self.instance_family, UNSUPPORTED_FAMILIES[self.instance_family]
            )
        sizes = catalog.FAMILIES.get(self.instance_family)
        if sizes is None:
            raise fail(
                E406,
                f"{path}.instance_family",
                self.instance_family,
                f"must be a catalog family: {', '.join(supported_families())}",
            )
        if sizes[0].accelerator_vendor != self.vendor:
            raise fail(
                E406,
                f"{path}.vendor",
                self.vendor,
                f"must be {sizes[0].accelerator_vendor!r} for instance family {self.instance_family}",
            )
        if not self.instance_types:
            raise fail(
                E406,
                f"{path}.instance_types",
                self.instance_types,
                f"must list at least one {self.instance_family} size",
            )
        known = [row.instance_type for row in sizes]
        for i, instance_type in enumerate(self.instance_types):
            if instance_type not in known:
                raise fail(E406, f"{path}.instance_types[{i}]", instance_type, f"must be one of {', '.join(known)}")
        largest = max(catalog.INSTANCE_TYPES[t].accelerators for t in self.instance_types)
        if self.accelerators_per_node is not None and self.accelerators_per_node != largest:
            raise fail(
                E406,
                f"{path}.accelerators_per_node",
                self.accelerators_per_node,
                f"must be {largest}, the accelerators of the largest planned size (or None)",
            )
        _check_capacity_types(f"{path}.capacity_types", self.capacity_types, reserved=self.reservation is not None)
        if self.weight is not None and not 1 <= self.weight <= 100:
            raise fail(E406, f"{path}.weight", self.weight, "must be 1 to 100 (Karpenter's NodePool weight) or None")
        self._validate_reservation(path)
        self._validate_efa(path)
        if self.accelerator_limit < largest:
            raise fail(
                E406,
                f"{path}.accelerator_limit",
                self.accelerator_limit,
                f"must be at least {largest} (one {self._largest_size()} node), or no node can launch",
            )
        if self.has_nvme and not any(catalog.INSTANCE_TYPES[t].local_nvme_gb for t in self.instance_types):
            raise fail(
                E406,
                f"{path}.has_nvme",
                self.has_nvme,
                f"must be False or None: no planned {self.instance_family} size has instance-store NVMe",
            )
        self.disruption.validate(f"{path}.disruption")

    def _largest_size(self) -> str:
        return max(self.instance_types, key=lambda t: catalog.INSTANCE_TYPES[t].accelerators)

    def _validate_reservation(self, path: str) -> None:
        if self.reservation is None:
            return
        self.reservation.validate(f"{path}.reservation")
        if RESERVED not in self.capacity_types:
            raise fail(
                E123,
                f"{path}.capacity_types",
                self.capacity_types,
                "must include 'reserved' with a reservation (Karpenter launches into it only then)",
            )
        grace = self.disruption.termination_grace_period
        if self.reservation.capacity_block and duration_seconds(grace) > CAPACITY_BLOCK_DRAIN_SECONDS:
            raise fail(
                E123,
                f"{path}.disruption.termination_grace_period",
                grace,
                f"must be at most {CAPACITY_BLOCK_DRAIN} for a Capacity Block: Karpenter drains its nodes 40 minutes "
                "before the block ends and EC2 terminates them 10 minutes later",
            )

    def _validate_efa(self, path: str) -> None:
        if self.efa_interfaces < 0:
            raise fail(E124, f"{path}.efa_interfaces", self.efa_interfaces, "must be 0 (no EFA) or more")
        for instance_type in self.instance_types if self.efa_interfaces else ():
            offered = catalog.INSTANCE_TYPES[instance_type].efa_interfaces
            if offered < self.efa_interfaces:
                raise fail(
                    E124,
                    f"{path}.efa_interfaces",
                    self.efa_interfaces,
                    f"must be at most {offered}, the EFA interfaces of {instance_type} (Karpenter would drop the type)",
                )


@dataclass(frozen=True)
class CpuPoolSpec:
    """The small general-purpose pool for non-GPU workloads that are not controllers (Ray head, benchmark job)."""

    name: str = "cpu"
    # Compute, general-purpose and memory-optimized families; no burstable t-types (CPU credits run out under load).
    instance_categories: tuple[str, ...] = ("c", "m", "r")
    # Generation 6 and newer: Nitro, current price/performance, no previous-generation instance types.
    min_generation: int = 6
    # Spot first, on-demand as the fallback; a pod that must not be interrupted selects on-demand via
    # workload_placement(pool, capacity_type="on-demand").
    capacity_types: tuple[str, ...] = CAPACITY_TYPES
    # 64 vCPUs: a Ray head and a benchmark client need a few each; a runaway stops at a handful of nodes.
    cpu_limit: int = 64
    # Ray's LLM image is as large as vLLM's (~10 GB compressed); 100 GiB holds it unpacked plus logs.
    volume_gib: int = 100
    # Consolidates underused CPU nodes, one at a time (see CPU_DISRUPTION).
    disruption: Disruption = CPU_DISRUPTION

    def validate(self, path: str) -> None:
        _check_name(f"{path}.name", self.name)
        if not self.instance_categories:
            raise fail(
                E406, f"{path}.instance_categories", self.instance_categories, "must list at least one of c, m, r"
            )
        for i, category in enumerate(self.instance_categories):
            if category not in ("c", "m", "r"):
                raise fail(E406, f"{path}.instance_categories[{i}]", category, "must be 'c', 'm' or 'r'")
        if not 1 <= self.min_generation <= 10:
            raise fail(E406, f"{path}.min_generation", self.min_generation, "must be between 1 and 10")
        _check_capacity_types(f"{path}.capacity_types", self.capacity_types)
        if self.cpu_limit < 2:
            raise fail(E406, f"{path}.cpu_limit", self.cpu_limit, "must be at least 2 vCPUs (the smallest c/m/r size)")
        if not 20 <= self.volume_gib <= 16384:
            raise fail(E406, f"{path}.volume_gib", self.volume_gib, "must be between 20 and 16384 GiB")
        self.disruption.validate(f"{path}.disruption")


@dataclass(frozen=True)
class NodePoolsProps:
    """Everything the node classes and pools are built from; every default is the production-right one."""

    # May be CDK tokens (e.g. the cluster's and node role's names): copied as text, resolved at deploy time.
    cluster_name: str
    # The IAM role NAME (not ARN) the nodes get: Karpenter builds instance profiles for it (it needs an EC2_LINUX
    # access entry); on EKS Auto Mode the NodeClasses name it (an EC2 access entry with AmazonEKSAutoNodePolicy).
    node_role_name: str
    gpu_pools: tuple[GpuPoolSpec, ...]
    # None: no CPU pool (non-GPU workloads then need somewhere else to run).
    cpu_pool: CpuPoolSpec | None = field(default_factory=CpuPoolSpec)
    # karpenter: EC2NodeClasses for self-managed Karpenter; auto-mode: EKS Auto Mode's NodeClasses (eks.amazonaws.com),
    # which pick no AMI and take no user data (node_pools/auto_mode.py says what that refuses).
    compute: str = KARPENTER
    # Bottlerocket: snapshot-restored image volume, device plugin built in (see the module docstring).
    ami_family: str = DEFAULT_AMI_FAMILY
    # None: the release pinned in llm_eks.versions for the family. Never "latest" (every AWS release would drift
    # and replace every GPU node at once).
    ami_version: str | None = None
    # The volume containerd and kubelet use (AL2023: root /dev/xvda; Bottlerocket: data /dev/xvdb). vLLM's image
    # (~10 GB compressed) takes ~30 GB in containerd (layers + unpacked snapshot); 200 GiB holds two versions during
    # a rollout plus model weights on instances without NVMe (inf2).
    root_volume_gib: int = 200
    # Bottlerocket only: restore every GPU node's data volume from this EBS snapshot, which already holds the
    # inference images (e.g. built with aws-samples/bottlerocket-images-cache). It must be encrypted: a volume
    # restored from a snapshot takes the snapshot's encryption (EC2 refuses an encryption flag with a snapshot).
    image_snapshot_id: str | None = None
    # Bottlerocket GPU nodes without image_snapshot_id pull with the SOCI snapshotter's parallel pull-and-unpack
    # mode (Bottlerocket >= 1.44): AWS measured a vLLM image pull 60-82 % faster than containerd's default (see
    # node_pools/chart.py). False keeps containerd's overlayfs pull.
    parallel_image_pull: bool = True
    # Empty: select security groups by the discovery tag. Pass the EKS cluster security group id (may be a token)
    # when it does not carry `karpenter.sh/discovery: <cluster>`.
    security_group_ids: tuple[str, ...] = ()
    # Empty: select subnets by the discovery tag (subnets the cluster construct created). An existing VPC's subnets
    # carry no tag of ours: pass their ids.
    subnet_ids: tuple[str, ...] = ()
    # Extra EC2 tags for every node Karpenter launches (cost allocation); Karpenter adds its own ownership tags.
    tags: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # The cluster placement group of each EFA node class, by node class name (GpuPoolSpec.node_class): every EFA
    # pool's nodes in one AZ and network segment. Its id (pg-...) for Karpenter, its name for EKS Auto Mode (what
    # each selects by), or a CDK token for either. The stack creates them.
    placement_groups: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def efa_node_classes(self) -> tuple[str, ...]:
        """The EC2NodeClasses of the EFA pools, each of which needs a placement group."""
        return tuple(sorted({pool.node_class for pool in self.gpu_pools if pool.efa_interfaces}))

    @property
    def resolved_ami_version(self) -> str:
        return self.ami_version if self.ami_version is not None else DEFAULT_AMI_VERSIONS[self.ami_family]

    @property
    def ami_alias(self) -> str:
        return f"{self.ami_family}@{self.resolved_ami_version}"

    def validate(self) -> None:
        if not self.cluster_name:
            raise fail(E407, "cluster_name", self.cluster_name, "must be the EKS cluster name (or a CDK token for it)")
        if self.compute not in COMPUTE_MODES:
            raise fail(E407, "compute", self.compute, f"must be one of {', '.join(COMPUTE_MODES)}")
        if not self.node_role_name or self.node_role_name.startswith("arn:"):
            raise fail(E407, "node_role_name", self.node_role_name, "must be the node IAM role's NAME, not its ARN")
        if not self.gpu_pools:
            raise fail(E407, "gpu_pools", self.gpu_pools, "must list at least one GPU pool")
        for i, pool in enumerate(self.gpu_pools):
            pool.validate(f"gpu_pools[{i}]")
        if self.cpu_pool is not None:
            self.cpu_pool.validate("cpu_pool")
        self._validate_pool_names_and_classes()
        self._validate_ami()
        if not 40 <= self.root_volume_gib <= 16384:
            raise fail(
                E407,
                "root_volume_gib",
                self.root_volume_gib,
                "must be between 40 and 16384 GiB (a vLLM image alone takes ~30 GB)",
            )
        self._validate_ids()
        self._validate_placement_groups()

    def _validate_pool_names_and_classes(self) -> None:
        """Pools sharing a node class launch from one reservation; pool names are unique."""
        classes: dict[str, GpuPoolSpec] = {}
        for i, pool in enumerate(self.gpu_pools):
            first = classes.setdefault(pool.node_class, pool)
            if first.reservation != pool.reservation:
                raise fail(
                    E123,
                    f"gpu_pools[{i}].reservation",
                    pool.reservation,
                    f"must equal that of {first.name}: both launch from node class {pool.node_class}",
                )
        seen = {self.cpu_pool.name} if self.cpu_pool is not None else set()
        for i, pool in enumerate(self.gpu_pools):
            if pool.name in seen:
                raise fail(E407, f"gpu_pools[{i}].name", pool.name, "must be unique across gpu_pools and cpu_pool")
            seen.add(pool.name)

    def _validate_ids(self) -> None:
        """The image snapshot, security groups, subnets and tags as AWS spells them."""
        if self.image_snapshot_id is not None:
            if not aws_ids.SNAPSHOT_ID.match(self.image_snapshot_id):
                raise fail(
                    E407,
                    "image_snapshot_id",
                    self.image_snapshot_id,
                    "must be an EBS snapshot id like snap-0123456789abcdef0",
                )
            if self.ami_family != BOTTLEROCKET:
                raise fail(
                    E407,
                    "image_snapshot_id",
                    self.image_snapshot_id,
                    f"needs ami_family 'bottlerocket' (ami_family is {self.ami_family!r}: "
                    "images live on its root volume)",
                )
        for i, sg in enumerate(self.security_group_ids):
            if not _is_token(sg) and not aws_ids.SECURITY_GROUP_ID.match(sg):
                raise fail(
                    E407, f"security_group_ids[{i}]", sg, "must be a security group id like sg-0123456789abcdef0"
                )
        for i, subnet in enumerate(self.subnet_ids):
            if not _is_token(subnet) and not aws_ids.SUBNET_ID.match(subnet):
                raise fail(E407, f"subnet_ids[{i}]", subnet, "must be a subnet id like subnet-0123456789abcdef0")
        for key in self.tags:
            if not key or key in _RESERVED_TAGS or key.startswith(_RESERVED_TAG_PREFIXES):
                raise fail(E407, f"tags.{key}", self.tags[key], "uses a tag key Karpenter reserves for node ownership")

    def _validate_placement_groups(self) -> None:
        wanted = self.efa_node_classes
        for node_class in wanted:
            group = self.placement_groups.get(node_class)
            if group is None:
                raise fail(
                    E407,
                    "placement_groups",
                    dict(self.placement_groups),
                    f"must name the cluster placement group (pg-...) of EFA node class {node_class}",
                )
            # Karpenter selects the group by id; Auto Mode's NodeClass by name (node_pools/auto_mode.py).
            if self.compute == KARPENTER and not _is_token(group) and not aws_ids.PLACEMENT_GROUP_ID.match(group):
                raise fail(
                    E407,
                    f"placement_groups.{node_class}",
                    group,
                    "must be a placement group id like pg-0123456789abcdef0",
                )
        for node_class in self.placement_groups:
            if node_class not in wanted:
                raise fail(
                    E407,
                    "placement_groups",
                    node_class,
                    f"must be an EFA node class of the pools: {', '.join(wanted) or 'none has EFA'}",
                )

    def _validate_ami(self) -> None:
        if self.ami_family not in AMI_FAMILIES:
            raise fail(E407, "ami_family", self.ami_family, f"must be one of {', '.join(AMI_FAMILIES)}")
        if self.ami_version is None:
            return
        if self.ami_version == "latest":
            raise fail(
                E407,
                "ami_version",
                self.ami_version,
                "pin a release (latest drifts and replaces every node whenever AWS publishes an AMI)",
            )
        pattern, example = _AMI_VERSION_FORMAT[self.ami_family]
        if not pattern.match(self.ami_version):
            raise fail(E407, "ami_version", self.ami_version, f"must be {example}")


def workload_placement(
    pool: GpuPoolSpec | CpuPoolSpec, *, capacity_type: str | None = None
) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The nodeSelector and tolerations a pod needs to land on `pool` (and only there).

    `capacity_type` pins the pod to "on-demand" (or "spot") within the pool, e.g. a Ray head that must not be
    interrupted; it must be one the pool allows.
    """
    node_selector = {LABEL_NODE_POOL: pool.name}
    tolerations: list[dict[str, str]] = []
    if isinstance(pool, GpuPoolSpec):
        node_selector[LABEL_ACCELERATOR] = pool.vendor
        tolerations.append({"key": pool.resource, "operator": "Equal", "value": "true", "effect": "NoSchedule"})
    if capacity_type is not None:
        if capacity_type not in pool.capacity_types:
            raise fail(
                E407,
                "capacity_type",
                capacity_type,
                f"must be one pool {pool.name} allows: {', '.join(pool.capacity_types)}",
            )
        node_selector[CAPACITY_TYPE_LABEL] = capacity_type
    return node_selector, tolerations
