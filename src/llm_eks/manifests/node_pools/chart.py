"""The chart: node classes and NodePools (Karpenter v1 API) built from NodePoolsProps (specs.py): EC2NodeClasses for
self-managed Karpenter, or EKS Auto Mode's NodeClasses (auto_mode.py)."""

from __future__ import annotations

from typing import Any

import cdk8s
from constructs import Construct

from llm_eks.manifests.disruption import Disruption
from llm_eks.manifests.labels import plain_object
from llm_eks.manifests.node_pools import auto_mode
from llm_eks.manifests.node_pools.efa import LABEL_EFA, network_interfaces
from llm_eks.manifests.node_pools.specs import (
    AL2023,
    BOTTLEROCKET,
    CAPACITY_TYPE_LABEL,
    CPU_NODE_CLASS,
    DISCOVERY_TAG,
    LABEL_ACCELERATOR,
    LABEL_AMI_FAMILY,
    LABEL_NODE_POOL,
    NEURON,
    CpuPoolSpec,
    GpuPoolSpec,
    NodePoolsProps,
)
from llm_eks.planner.compute_mode import AUTO_MODE

# Bottlerocket's OS volume: Karpenter's own default for the family; it holds only the read-only OS image.
_BOTTLEROCKET_OS_VOLUME = "4Gi"
# gp3 well above its 3,000 IOPS / 125 MiB/s baseline for GPU nodes: unpacking a ~10 GB image at 125 MiB/s alone
# takes minutes of a GPU node's cold start. 1,000 MiB/s (gp3's maximum) and 16,000 IOPS are the volume AWS measured
# SOCI parallel pull on (aws-samples/karpenter-blueprints, blueprints/soci-snapshotter), and above the 600 MiB/s
# AWS names as the floor for fast pulls (awslabs/amazon-eks-ami nodeadm/doc/examples.md).
_GPU_VOLUME_IOPS = 16000
_GPU_VOLUME_THROUGHPUT = 1000
# SOCI snapshotter parallel pull-and-unpack on Bottlerocket (settings.container-runtime-plugins.soci-snapshotter,
# Bottlerocket >= 1.44; bottlerocket.dev 1.57.x settings pages). Values as AWS's Bottlerocket SOCI blueprint sets them
# (aws-samples/karpenter-blueprints@529b88cf blueprints/soci-snapshotter/soci-snapshotter.yaml): 20 parallel ranged
# downloads of 16 MB chunks and 12 parallel unpacks per image, and compressed layers discarded once unpacked (the
# ~12 GB of vLLM's layers would otherwise stay on disk beside the unpacked image). No SOCI index is needed in the
# registry for this mode.
_SOCI_PARALLEL_PULL = (
    "# Parallel image pull and unpack (SOCI snapshotter); takes effect at boot, so only new nodes use it.\n"
    "[settings.container-runtime]\n"
    'snapshotter = "soci"\n'
    "[settings.container-runtime-plugins.soci-snapshotter]\n"
    'pull-mode = "parallel-pull-unpack"\n'
    "[settings.container-runtime-plugins.soci-snapshotter.parallel-pull-unpack]\n"
    "max-concurrent-downloads-per-image = 20\n"
    'concurrent-download-chunk-size = "16mb"\n'
    "max-concurrent-unpacks-per-image = 12\n"
    "discard-unpacked-layers = true\n"
)
# A snapshot-restored volume fetches blocks from S3 lazily; hydrating at EBS's maximum provisioned rate (MiB/s)
# keeps the first image reads from stalling at S3 speed.
_SNAPSHOT_INITIALIZATION_RATE = 300
_METADATA_OPTIONS = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    # Hop limit 1: only host-network processes reach IMDS; a pod's extra network hop is dropped, so pods cannot
    # take the node role's credentials. Pods get their own credentials from EKS Pod Identity, not from IMDS.
    "httpPutResponseHopLimit": 1,
    "httpTokens": "required",
}


def _requirement(key: str, operator: str, values: list[str]) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": values}


def _ebs(gib: int, *, fast: bool, snapshot_id: str | None = None) -> dict[str, Any]:
    # encrypted also with a snapshot: a volume restored from an unencrypted snapshot is then encrypted (EC2 never
    # removes encryption), as Karpenter's EC2NodeClass reference shows (snapshotID beside encrypted: true).
    ebs: dict[str, Any] = {
        "volumeSize": f"{gib}Gi",
        "volumeType": "gp3",
        "encrypted": True,
        "deleteOnTermination": True,
    }
    if fast:
        ebs.update(iops=_GPU_VOLUME_IOPS, throughput=_GPU_VOLUME_THROUGHPUT)
    if snapshot_id is not None:
        ebs.update(snapshotID=snapshot_id, volumeInitializationRate=_SNAPSHOT_INITIALIZATION_RATE)
    return ebs


def _block_devices(ami_family: str, gib: int, *, fast: bool, snapshot_id: str | None) -> list[dict[str, Any]]:
    data = _ebs(gib, fast=fast, snapshot_id=snapshot_id)
    if ami_family == AL2023:
        return [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": data}]
    os_volume = {
        "volumeSize": _BOTTLEROCKET_OS_VOLUME,
        "volumeType": "gp3",
        "encrypted": True,
        "deleteOnTermination": True,
    }
    return [
        {"deviceName": "/dev/xvda", "ebs": os_volume},
        # Bottlerocket's data volume: containerd images, kubelet (emptyDir), pod logs.
        {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": data},
    ]


def _bottlerocket_user_data(*, neuron: bool, bind_instance_store: bool, parallel_pull: bool) -> str | None:
    """Bottlerocket settings (TOML) Karpenter merges with its own; None when nothing is needed."""
    sections: list[str] = [_SOCI_PARALLEL_PULL] if parallel_pull else []
    if neuron:
        sections.append(
            "# Neuron containers take ownership of their /dev/neuron* devices from runAsUser/runAsGroup\n"
            "# (Bottlerocket >= 1.30; Karpenter docs, 'Device ownership in Bottlerocket').\n"
            "[settings.kubernetes]\n"
            "device-ownership-from-security-context = true\n"
        )
    if bind_instance_store:
        sections.append(
            "# Instance-store NVMe (RAID0) for kubelet (emptyDir model cache) and pod logs, but NOT containerd:\n"
            "# its images come pre-pulled on the snapshot-restored data volume. Karpenter's instanceStorePolicy\n"
            "# RAID0 would bind /var/lib/containerd too and hide them. No NVMe: init and bind are no-ops.\n"
            "[settings.bootstrap-commands.010-llm-eks-instance-store]\n"
            'commands = [["apiclient", "ephemeral-storage", "init"], '
            '["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/kubelet", "/var/log/pods"]]\n'
            "essential = true\n"
            'mode = "always"\n'
        )
    return "\n".join(sections) or None


class NodePoolsChart(cdk8s.Chart):
    """Node classes and NodePools for the planned GPU families plus the CPU pool; objects keyed by name."""

    def __init__(self, scope: Construct, id: str, props: NodePoolsProps) -> None:
        props.validate()
        self.auto_mode = props.compute == AUTO_MODE
        if self.auto_mode:
            auto_mode.validate_auto_mode(props)
        super().__init__(scope, id, disable_resource_name_hashes=True)
        self.props = props
        self.node_classes: dict[str, cdk8s.ApiObject] = {}
        self.node_pools: dict[str, cdk8s.ApiObject] = {}
        # One node class per vendor, and one of its own for each family with EFA (per EFA count) or reservations.
        for node_class in sorted({pool.node_class for pool in props.gpu_pools}):
            pools = [pool for pool in props.gpu_pools if pool.node_class == node_class]
            spec = (
                auto_mode.gpu_node_class(props, node_class, pools)
                if self.auto_mode
                else self._gpu_node_class(node_class, pools)
            )
            self._add_node_class(node_class, spec)
        if props.cpu_pool is not None:
            cpu = props.cpu_pool
            spec = auto_mode.cpu_node_class(props, cpu) if self.auto_mode else self._cpu_node_class(cpu)
            self._add_node_class(self.cpu_node_class, spec)
        for pool in props.gpu_pools:
            self._add_node_pool(pool.name, self._gpu_node_pool(pool))
        if props.cpu_pool is not None:
            self._add_node_pool(props.cpu_pool.name, self._cpu_node_pool(props.cpu_pool))

    @property
    def cpu_node_class(self) -> str:
        """The CPU pool's node class: `default` for Karpenter; on Auto Mode that name is its built-in one's."""
        return auto_mode.CPU_NODE_CLASS if self.auto_mode else CPU_NODE_CLASS

    def _add_node_class(self, name: str, spec: dict[str, Any]) -> None:
        if self.auto_mode:
            kind, api_version = auto_mode.NODE_CLASS_KIND, auto_mode.NODE_CLASS_API_VERSION
        else:
            kind, api_version = "EC2NodeClass", "karpenter.k8s.aws/v1"
        self.node_classes[name] = self._object(kind, api_version, name, spec)

    def _add_node_pool(self, name: str, spec: dict[str, Any]) -> None:
        self.node_pools[name] = self._object("NodePool", "karpenter.sh/v1", name, spec)

    def _object(self, kind: str, api_version: str, name: str, spec: dict[str, Any]) -> cdk8s.ApiObject:
        return plain_object(
            self,
            f"{kind}-{name}",
            api_version=api_version,
            kind=kind,
            metadata={"name": name, "labels": {"app.kubernetes.io/part-of": "llm-eks"}},
            body={"spec": spec},
            source=__name__,
        )

    def _node_class_base(self, name: str) -> dict[str, Any]:
        p = self.props
        discovery = {DISCOVERY_TAG: p.cluster_name}
        security_groups: list[dict[str, Any]] = [{"id": sg} for sg in p.security_group_ids] or [{"tags": discovery}]
        return {
            # An alias pins one release of the EKS-optimized AMIs; Karpenter picks the variant (NVIDIA, Neuron,
            # standard) per instance type. A new pinned version drifts nodes, paced by the disruption budget.
            "amiSelectorTerms": [{"alias": p.ami_alias}],
            "role": p.node_role_name,
            "subnetSelectorTerms": [{"id": subnet} for subnet in p.subnet_ids] or [{"tags": discovery}],
            "securityGroupSelectorTerms": security_groups,
            "metadataOptions": dict(_METADATA_OPTIONS),
            "tags": {"llm-eks.io/node-class": name, **p.tags},
        }

    def _gpu_node_class(self, name: str, pools: list[GpuPoolSpec]) -> dict[str, Any]:
        p = self.props
        vendor, efa, reservation = pools[0].vendor, pools[0].efa_interfaces, pools[0].reservation
        nvme = any(pool.nvme for pool in pools)
        spec = self._node_class_base(name)
        if efa:
            # ENA on card 0, EFA-only everywhere else (efa.py); every node in the pool's cluster placement group.
            spec["networkInterfaces"] = network_interfaces(efa)
            spec["placementGroupSelector"] = {"id": p.placement_groups[name]}
            # EC2 refuses a public IP on an instance with several interfaces (nodes are in private subnets anyway).
            spec["associatePublicIPAddress"] = False
        if reservation is not None:
            # Only the reservations listed here: Karpenter never matches "open" ODCRs by itself.
            spec["capacityReservationSelectorTerms"] = reservation.selector_terms()
        spec["blockDeviceMappings"] = _block_devices(
            p.ami_family, p.root_volume_gib, fast=True, snapshot_id=p.image_snapshot_id
        )
        if nvme and p.image_snapshot_id is None:
            # Local NVMe becomes the node's ephemeral storage (containerd, kubelet, logs): the model cache lives
            # on emptyDir at NVMe speed, and Karpenter counts its size when scheduling. Sizes without NVMe ignore it.
            spec["instanceStorePolicy"] = "RAID0"
        if p.ami_family == BOTTLEROCKET:
            user_data = _bottlerocket_user_data(
                neuron=vendor == NEURON,
                bind_instance_store=nvme and p.image_snapshot_id is not None,
                # Never over a restored image volume: a snapshotter change wipes /var/lib/containerd at boot
                # ("existing images ... will be re-pulled", Bottlerocket's container-runtime settings docs).
                parallel_pull=p.parallel_image_pull and p.image_snapshot_id is None,
            )
            if user_data is not None:
                spec["userData"] = user_data
        return spec

    def _cpu_node_class(self, cpu: CpuPoolSpec) -> dict[str, Any]:
        spec = self._node_class_base(CPU_NODE_CLASS)
        # CPU nodes pull their (smaller) images over the network: no snapshot, baseline gp3.
        spec["blockDeviceMappings"] = _block_devices(
            self.props.ami_family, cpu.volume_gib, fast=False, snapshot_id=None
        )
        return spec

    def _template(
        self, node_class: str, labels: dict[str, str], requirements: list[dict[str, Any]], disruption: Disruption
    ) -> dict[str, Any]:
        p = self.props
        requirements = [*requirements, _requirement("kubernetes.io/arch", "In", ["amd64"])]
        if self.auto_mode:
            # Auto Mode runs Linux only and does not accept kubernetes.io/os as a requirement (create-node-pool).
            ref = auto_mode.node_class_ref(node_class)
        else:
            ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class}
            requirements.append(_requirement("kubernetes.io/os", "In", ["linux"]))
        return {
            "metadata": {"labels": {**labels, LABEL_AMI_FAMILY: p.ami_family}},
            "spec": {
                "nodeClassRef": ref,
                "requirements": requirements,
                "expireAfter": disruption.expire_after,
                "terminationGracePeriod": disruption.termination_grace_period,
            },
        }

    def _label(self, name: str) -> str:
        """An instance label (`instance-family`, ...): Karpenter's karpenter.k8s.aws/ or Auto Mode's own prefix."""
        return f"{auto_mode.NODE_CLASS_GROUP if self.auto_mode else 'karpenter.k8s.aws'}/{name}"

    def _gpu_node_pool(self, pool: GpuPoolSpec) -> dict[str, Any]:
        labels = {LABEL_NODE_POOL: pool.name, LABEL_ACCELERATOR: pool.vendor}
        if pool.efa_interfaces:
            # The EFA device plugin runs on these nodes only.
            labels[LABEL_EFA] = "true"
        template = self._template(
            pool.node_class,
            labels,
            [
                _requirement(self._label("instance-family"), "In", [pool.instance_family]),
                _requirement("node.kubernetes.io/instance-type", "In", list(pool.instance_types)),
                # Spot and on-demand: Karpenter launches Spot first and falls back to on-demand within milliseconds
                # when EC2 reports no Spot capacity for every planned size in every zone. With "reserved" it tries
                # the node class's reservations before either; "reserved" alone launches nothing else.
                _requirement(CAPACITY_TYPE_LABEL, "In", list(pool.capacity_types)),
            ],
            pool.disruption,
        )
        # Only pods that tolerate the accelerator taint (workload_placement) land here; nothing else wastes a GPU.
        template["spec"]["taints"] = [{"key": pool.resource, "value": "true", "effect": "NoSchedule"}]
        spec: dict[str, Any] = {
            "template": template,
            "disruption": pool.disruption.spec(),
            "limits": {pool.resource: pool.accelerator_limit},
        }
        if pool.weight is not None:
            # kubernetes-sigs/karpenter@v1.14.1 pkg/apis/v1/nodepool.go: a higher weight is ordered ahead.
            spec["weight"] = pool.weight
        return spec

    def _cpu_node_pool(self, cpu: CpuPoolSpec) -> dict[str, Any]:
        template = self._template(
            self.cpu_node_class,
            {LABEL_NODE_POOL: cpu.name},
            [
                _requirement(self._label("instance-category"), "In", list(cpu.instance_categories)),
                _requirement(self._label("instance-generation"), "Gt", [str(cpu.min_generation - 1)]),
                _requirement(CAPACITY_TYPE_LABEL, "In", list(cpu.capacity_types)),
            ],
            cpu.disruption,
        )
        return {
            "template": template,
            "disruption": cpu.disruption.spec(),
            "limits": {"cpu": cpu.cpu_limit},
        }
