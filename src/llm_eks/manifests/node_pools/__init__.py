"""Karpenter capacity for inference as a cdk8s chart: EC2NodeClasses and NodePools (Karpenter v1 API, 1.14).

One EC2NodeClass per node role in use (`gpu-nvidia`, `neuron`, `default` for CPU), one NodePool per accelerator
family the plan uses, and a small CPU NodePool (`cpu`) for workloads that are neither GPU nor controllers (Ray
head, benchmark job). Workload charts place their pods with `workload_placement(pool)`, so they select exactly the
labels and tolerate exactly the taints the pools advertise.

AMI: Bottlerocket by default (`ami_family="bottlerocket"`), for three reasons:
- cold start: containerd keeps images on Bottlerocket's separate data volume (/dev/xvdb), which can be restored from
  an EBS snapshot that already holds the inference images (`image_snapshot_id`), so a new GPU node does not pull
  ~10 GB of vLLM image; AL2023 keeps images on the root volume, which always comes from the AMI;
- the NVIDIA variant (aws-k8s-1.35-nvidia) ships driver, container toolkit and the NVIDIA device plugin as a host
  service: no device-plugin DaemonSet to run (one would double-advertise `nvidia.com/gpu`, see GpuDeviceSoftware);
- a minimal, immutable OS whose updates arrive as AMI drift, rate-limited by the disruption budget.
Karpenter resolves the variant from the alias per instance type: NVIDIA types get the -nvidia variant, inf2/trn the
standard x86_64 variant, which carries the Neuron driver (the Neuron device plugin still runs as a DaemonSet).
AL2023 remains selectable (`ami_family="al2023"`); GpuDeviceSoftware then installs the NVIDIA device plugin.

No aws_cdk import here: GitOps users synthesize this chart with cdk8s alone. `cluster_name`, `node_role_name` and
`security_group_ids` may be CDK tokens at synth time; they are copied as opaque text and resolved when the stack
applies the chart.

The package: `specs` (pool specs, props and their validation, the labels and taints, `workload_placement`),
`efa` (the network interfaces of EFA node classes), `reserved` (capacity reservations) and `chart` (the
EC2NodeClasses and NodePools built from them).
"""

from __future__ import annotations

from llm_eks.manifests.disruption import Disruption
from llm_eks.manifests.node_pools.chart import NodePoolsChart
from llm_eks.manifests.node_pools.efa import EFA_RESOURCE, LABEL_EFA, network_interfaces
from llm_eks.manifests.node_pools.reserved import CAPACITY_BLOCK_DRAIN, RESERVED, ReservedCapacity
from llm_eks.manifests.node_pools.specs import (
    ACCELERATOR_RESOURCE,
    AL2023,
    AMI_FAMILIES,
    BOTTLEROCKET,
    CAPACITY_TYPE_LABEL,
    CAPACITY_TYPES,
    CPU_NODE_CLASS,
    DEFAULT_AMI_FAMILY,
    DEFAULT_AMI_VERSIONS,
    DISCOVERY_TAG,
    LABEL_ACCELERATOR,
    LABEL_AMI_FAMILY,
    LABEL_NODE_POOL,
    NEURON,
    NODE_CLASS_FOR_VENDOR,
    NVIDIA,
    POOL_CAPACITY_TYPES,
    UNSUPPORTED_FAMILIES,
    VENDORS,
    CpuPoolSpec,
    GpuPoolSpec,
    NodePoolsProps,
    supported_families,
    workload_placement,
)

__all__ = [
    "ACCELERATOR_RESOURCE",
    "AL2023",
    "AMI_FAMILIES",
    "BOTTLEROCKET",
    "CAPACITY_BLOCK_DRAIN",
    "CAPACITY_TYPES",
    "CAPACITY_TYPE_LABEL",
    "CPU_NODE_CLASS",
    "DEFAULT_AMI_FAMILY",
    "DEFAULT_AMI_VERSIONS",
    "DISCOVERY_TAG",
    "EFA_RESOURCE",
    "LABEL_ACCELERATOR",
    "LABEL_AMI_FAMILY",
    "LABEL_EFA",
    "LABEL_NODE_POOL",
    "NEURON",
    "NODE_CLASS_FOR_VENDOR",
    "NVIDIA",
    "POOL_CAPACITY_TYPES",
    "RESERVED",
    "UNSUPPORTED_FAMILIES",
    "VENDORS",
    "CpuPoolSpec",
    "Disruption",
    "GpuPoolSpec",
    "NodePoolsChart",
    "NodePoolsProps",
    "ReservedCapacity",
    "network_interfaces",
    "supported_families",
    "workload_placement",
]
