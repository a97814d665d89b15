"""EKS Auto Mode's NodeClasses (`eks.amazonaws.com/v1`, kind NodeClass) for the node pools, the label keys its
NodePools select on, and what Auto Mode refuses of `NodePoolsProps`.

Read in the EKS User Guide (awsdocs/amazon-eks-user-guide at the commits named, 2026-12-04):
- create-node-class.adoc@0026c9df: the fields `role` (the IAM role's name), `subnetSelectorTerms` (`tags` | `id`),
  `securityGroupSelectorTerms` (`tags` | `id` | `name`), `snatPolicy`, `networkPolicy`, `networkPolicyEventLogs`,
  `ephemeralStorage` (`size`, `iops` 3000-16000, `throughput` 125-1000, `kmsKeyID`), `advancedNetworking`, `tags`
  (keys under kubernetes.io/cluster/, karpenter.sh/ and eks.amazonaws.com/ are Auto Mode's); "Do not name your
  custom node class `default`" (the built-in one is); a custom NodeClass's role needs an access entry of type EC2
  with AmazonEKSAutoNodePolicy (constructs/auto_mode.py makes it).
- device-management-efa.adoc@43d79bdb: EFA through `advancedNetworking.networkInterfaces` (`networkCardIndex`,
  `deviceIndex`, `interfaceType` interface | efa-only, `secondaryIPv4PrefixCount`) and `placementGroupSelector`
  (`name`); with static interfaces "EKS Auto Mode does not attach additional IPs, prefixes, or ENIs after instance
  launch", so the primary interface carries one /28 prefix for the node's pods; the EFA device plugin still runs
  as a DaemonSet ("EKS Compute: EKS Auto Mode, Karpenter, ...").
- auto-odcr.adoc@041ffa8b and ml-node-pools.adoc@80436be5: `capacityReservationSelectorTerms` of `id`, or `tags`
  with `owner` (the owning account; Karpenter's EC2NodeClass calls it `ownerID`), capacity type `reserved`; a
  Capacity Block's nodes drain 10 minutes before EC2 begins terminating them, as with Karpenter.
- auto-net-pol.adoc: NetworkPolicies are enforced on nodes whose NodeClass sets `networkPolicy` once the
  `kube-system/amazon-vpc-cni` ConfigMap enables the controller (constructs/cluster.py applies it).
- create-node-pool.adoc@01385604: NodePools are `karpenter.sh/v1` with `nodeClassRef {group: eks.amazonaws.com,
  kind: NodeClass}`; label keys `eks.amazonaws.com/instance-*`; `kubernetes.io/os` is not supported.
- automode-learn-instances: on instance types with local NVMe larger than `ephemeralStorage.size` Auto Mode puts
  ephemeral storage on the NVMe (RAID0) and keeps a 20 GiB EBS volume, so the model cache lives at NVMe speed there.

No CRD of NodeClass is published (it exists only inside an Auto Mode cluster): the tests validate against a schema
written from these pages (tests/fixtures/upstream/crds/eks.amazonaws.com_nodeclasses.yaml).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from llm_eks.catalog import auto_mode
from llm_eks.error_codes import E408
from llm_eks.errors import fail
from llm_eks.manifests.node_pools.efa import network_interfaces
from llm_eks.manifests.node_pools.reserved import ReservedCapacity, duration_seconds
from llm_eks.manifests.node_pools.specs import (
    BOTTLEROCKET,
    DISCOVERY_TAG,
    CpuPoolSpec,
    GpuPoolSpec,
    NodePoolsProps,
)

NODE_CLASS_GROUP = "eks.amazonaws.com"
NODE_CLASS_KIND = "NodeClass"
NODE_CLASS_API_VERSION = f"{NODE_CLASS_GROUP}/v1"
# Auto Mode's built-in NodeClass is `default`; the CPU pool's own gets another name.
CPU_NODE_CLASS = "cpu"
# Auto Mode's built-in `system` pool, where llm-eks's controllers (and a Ray head) run on Auto Mode: its nodes carry
# karpenter.sh/nodepool=system and the CriticalAddonsOnly taint (set-builtin-node-pools.adoc@01c16ed8,
# critical-workload.adoc@390223ef). It launches amd64 and arm64 nodes; some operator images are amd64 only.
SYSTEM_POOL = "system"
SYSTEM_POOL_SELECTOR = MappingProxyType({"karpenter.sh/nodepool": SYSTEM_POOL, "kubernetes.io/arch": "amd64"})
SYSTEM_POOL_TOLERATIONS = ({"key": "CriticalAddonsOnly", "operator": "Exists"},)
# Auto Mode's instance labels (Karpenter's karpenter.k8s.aws/instance-* under Auto Mode's prefix).
INSTANCE_FAMILY_LABEL = "eks.amazonaws.com/instance-family"
INSTANCE_CATEGORY_LABEL = "eks.amazonaws.com/instance-category"
INSTANCE_GENERATION_LABEL = "eks.amazonaws.com/instance-generation"
# One /28 (16 addresses) on an EFA node's primary interface: its pods (the vLLM pod, the DCGM exporter) need IPs,
# and Auto Mode attaches none after launch to a node with static interfaces.
POD_PREFIXES = 1
# Tag keys Auto Mode keeps for itself on what it launches (create-node-class.adoc).
_RESERVED_TAG_PREFIXES = ("kubernetes.io/cluster/", "karpenter.sh/", "eks.amazonaws.com/", "eks:")
# gp3 well above its baseline, as llm-eks's Karpenter GPU volumes (node_pools/chart.py): unpacking the vLLM image.
_GPU_IOPS = 16000
_GPU_THROUGHPUT = 1000
# Auto Mode replaces every node at 21 days, whatever expireAfter says.
MAX_EXPIRE_AFTER_SECONDS = auto_mode.MAX_NODE_LIFETIME_DAYS * 24 * 3600


def node_class_ref(name: str) -> dict[str, str]:
    """A NodePool's `nodeClassRef` to one of Auto Mode's NodeClasses."""
    return {"group": NODE_CLASS_GROUP, "kind": NODE_CLASS_KIND, "name": name}


def builtin_system_pool() -> dict[str, Any]:
    """Auto Mode's built-in `system` NodePool as the synth-time checks see it (AWS creates and owns it; llm-eks never
    applies it): on-demand amd64/arm64 Linux nodes of the `default` NodeClass with the CriticalAddonsOnly taint
    (set-builtin-node-pools.adoc@01c16ed8)."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": SYSTEM_POOL},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": node_class_ref("default"),
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                    "taints": [{"key": "CriticalAddonsOnly", "effect": "NoSchedule"}],
                }
            }
        },
    }


def _base(p: NodePoolsProps, name: str) -> dict[str, Any]:
    discovery = {DISCOVERY_TAG: p.cluster_name}
    return {
        "role": p.node_role_name,
        "subnetSelectorTerms": [{"id": subnet} for subnet in p.subnet_ids] or [{"tags": discovery}],
        "securityGroupSelectorTerms": [{"id": sg} for sg in p.security_group_ids] or [{"tags": discovery}],
        # Enforce the environment's NetworkPolicies on these nodes; pods no policy selects stay open, as in Kubernetes.
        "networkPolicy": "DefaultAllow",
        "networkPolicyEventLogs": "Disabled",
        # EC2 tags of what Auto Mode launches (the cluster role carries the tagging permission Auto Mode needs).
        "tags": {"llm-eks.io/node-class": name, **p.tags},
    }


def _reservation_terms(reservation: ReservedCapacity) -> list[dict[str, Any]]:
    """Karpenter's terms (reserved.py) in Auto Mode's spelling: the owning account is `owner`."""
    terms = reservation.selector_terms()
    return [{("owner" if key == "ownerID" else key): value for key, value in term.items()} for term in terms]


def gpu_node_class(p: NodePoolsProps, name: str, pools: list[GpuPoolSpec]) -> dict[str, Any]:
    """The NodeClass of GPU (or Neuron) pools: fast ephemeral storage, and the pools' EFA interfaces, placement group
    and capacity reservations."""
    efa, reservation = pools[0].efa_interfaces, pools[0].reservation
    spec = _base(p, name)
    # Containerd, the kubelet's emptyDir model cache and logs; on sizes whose NVMe is larger, Auto Mode puts them there.
    spec["ephemeralStorage"] = {"size": f"{p.root_volume_gib}Gi", "iops": _GPU_IOPS, "throughput": _GPU_THROUGHPUT}
    if efa:
        interfaces = network_interfaces(efa)
        interfaces[0] = {**interfaces[0], "secondaryIPv4PrefixCount": POD_PREFIXES}
        # EC2 refuses a public IP on an instance with several interfaces (nodes are in private subnets anyway).
        spec["advancedNetworking"] = {"associatePublicIPAddress": False, "networkInterfaces": interfaces}
        spec["placementGroupSelector"] = {"name": p.placement_groups[name]}
    if reservation is not None:
        spec["capacityReservationSelectorTerms"] = _reservation_terms(reservation)
    return spec


def cpu_node_class(p: NodePoolsProps, cpu: CpuPoolSpec) -> dict[str, Any]:
    """The CPU pool's NodeClass: its images on a baseline gp3 volume."""
    spec = _base(p, CPU_NODE_CLASS)
    spec["ephemeralStorage"] = {"size": f"{cpu.volume_gib}Gi"}
    return spec


def validate_auto_mode(p: NodePoolsProps) -> None:
    """What Auto Mode cannot do of `p`: one-line errors naming the field."""
    why_ami = "EKS Auto Mode picks the node AMI (Bottlerocket) and takes no user data"
    if p.ami_family != BOTTLEROCKET:
        raise fail(E408, "ami_family", p.ami_family, f"{why_ami}: leave ami_family at {BOTTLEROCKET}")
    if p.ami_version is not None:
        raise fail(E408, "ami_version", p.ami_version, f"{why_ami}: leave ami_version unset")
    if p.image_snapshot_id is not None:
        raise fail(
            E408,
            "image_snapshot_id",
            p.image_snapshot_id,
            "EKS Auto Mode's NodeClass takes no block device mappings, so no node restores a data volume from it",
        )
    if not p.parallel_image_pull:
        raise fail(
            E408, "parallel_image_pull", False, "EKS Auto Mode configures image pulls itself (its SOCI parallel pull)"
        )
    for i, pool in enumerate(p.gpu_pools):
        reason = auto_mode.unsupported_reason(pool.instance_family)
        if reason is not None:
            raise fail(E408, f"gpu_pools[{i}].instance_family", pool.instance_family, reason)
    disruptions = [(f"gpu_pools[{i}]", pool.disruption) for i, pool in enumerate(p.gpu_pools)]
    if p.cpu_pool is not None:
        disruptions.append(("cpu_pool", p.cpu_pool.disruption))
    for path, disruption in disruptions:
        expire = disruption.expire_after
        if expire == "Never" or duration_seconds(expire) > MAX_EXPIRE_AFTER_SECONDS:
            raise fail(
                E408,
                f"{path}.disruption.expire_after",
                expire,
                f"EKS Auto Mode replaces every node at {auto_mode.MAX_NODE_LIFETIME_DAYS} days: at most "
                f"{MAX_EXPIRE_AFTER_SECONDS // 3600}h",
            )
    for key in p.tags:
        if key.startswith(_RESERVED_TAG_PREFIXES):
            raise fail(E408, f"tags.{key}", p.tags[key], "uses a tag key EKS Auto Mode reserves for what it launches")
