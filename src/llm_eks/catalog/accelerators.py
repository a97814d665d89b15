"""Catalog of the AWS instance types a user would pick for LLM inference, one frozen row per instance size.

Where the numbers come from (each family block below repeats its own source):
- Per-size shape (accelerator count, accelerator memory, vCPU, RAM, local NVMe, baseline network and EBS bandwidth,
  EFA, and the allocatable CPU/memory a node offers to pods): Karpenter's generated instance-type reference
  (aws/karpenter-provider-aws website/content/en/docs/reference/instance-types.md, release v1.14.0, commit 692ccdd,
  2026-07-11), which is produced from EC2 DescribeInstanceTypes. Accelerator memory is EC2's GpuInfo MiB figure, the
  number the planner does arithmetic with (AWS marketing pages round it: "24 GB" is 22,888 MiB on an A10G or L4).
  Allocatable CPU/memory is capacity minus kube-reserved, system-reserved, eviction threshold and Karpenter's default
  7.5 % VM memory overhead.
- On-demand prices: us-east-1, from the AWS Price List snapshot Karpenter generated on 2026-07-20
  (pkg/providers/pricing/zz_generated.pricing_aws.go, commit 6fc13b5); read here on 2026-11-29.
- EFA interfaces per instance (`efa_interfaces`): the same reference's Resources row `vpc.amazonaws.com/efa` (EC2's
  EfaInfo.MaximumEfaInterfaces, which Karpenter advertises as the node's capacity of that resource; pods of a replica
  spanning nodes request that many). The v1.14.1 tag's copy of the file (commit bde0065) gives the same count for
  every row it lists; it lists no g7 size, which v1.14.0's does.
- Not in the catalog: p6e-gb200, which Karpenter 1.14.1 neither lists in that reference nor prices
  (zz_generated.pricing_aws.go); only its bandwidth table (zz_generated.bandwidth.go) names it.
- Memory bandwidth per accelerator: the vendor's datasheet (cited per family).
- Neuron chips (inf2, trn1, trn1n, trn2): NeuronCores per chip, their generation, HBM and its bandwidth from the Neuron
  SDK's hardware pages (aws-neuron/aws-neuron-sdk about-neuron/arch/neuron-hardware/{inferentia2,trainium,trainium2,
  trn2-arch}.rst and about-neuron/arch/neuron-features/logical-neuroncore-config.rst at commit 81ce03ae, the 2.32.0
  documentation sync, read 2026-12-03); shapes, allocatable figures and prices as for the GPU rows (the Karpenter
  reference's v1.14.1 copy, commit 1d927085, lists the same trn rows as v1.14.0's).
- CUDA compute capability per GPU: NVIDIA's "CUDA GPU Compute Capability" table (developer.nvidia.com/cuda-gpus,
  read 2026-11-30): A10 (the A10G is AWS's A10) 8.6, L4 and L40S 8.9, H100 and H200 9.0, B200 10.0, B300 10.3,
  RTX PRO 4500 and 6000 Blackwell Server Edition 12.0. A100 8.0: the stored copy of that page is cut before its
  8.0 row; deviceQuery on an A100-SXM4-80GB reports "CUDA Capability Major/Minor version number: 8.0" (gist
  gengwg/3520df2ebf8872e5ee4818367e3a4122) and NVIDIA's forum lists A100 as 8.0.

Pure Python: the `llm-eks plan` CLI imports this and must start in well under a second.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from llm_eks.error_codes import E201, ErrorCode
from llm_eks.errors import ConfigError, did_you_mean, fail

# Date of the AWS Price List snapshot the on-demand prices below come from (us-east-1).
PRICES_READ = "2026-07-20"
PRICE_REGION = "us-east-1"

VENDORS = ("nvidia", "neuron")
_EXTENDED_RESOURCE = {"nvidia": "nvidia.com/gpu", "neuron": "aws.amazon.com/neuron"}

# Karpenter's Resources table assumes these when it computes allocatable memory; used only for rows that do not
# carry their own allocatable figures (see allocatable_memory_mib below).
_VM_MEMORY_OVERHEAD = 0.075
_EVICTION_MIB = 100
_ASSUMED_MAX_PODS = 110


@dataclass(frozen=True)
class InstanceType:
    """One EC2 instance size with accelerators."""

    instance_type: str
    family: str
    # Ray's accelerator_type constant where Ray has one (ray/util/accelerators/accelerators.py), else a plain name.
    accelerator_name: str
    # "nvidia" or "neuron": decides the Kubernetes extended resource (nvidia.com/gpu or aws.amazon.com/neuron).
    accelerator_vendor: str
    accelerators: int
    # Per accelerator, as EC2 DescribeInstanceTypes reports it (GpuInfo.Gpus[].MemoryInfo.SizeInMiB).
    accelerator_memory_mib: int
    # GB/s per accelerator, vendor datasheet.
    memory_bandwidth_gbps: float
    vcpus: int
    memory_gib: float
    # Instance-store NVMe in GB (0: EBS only).
    local_nvme_gb: int
    # How accelerators of one instance talk to each other ("none" for a single accelerator).
    interconnect: str
    # Whether the instance has any EFA interface (efa_interfaces > 0).
    efa: bool
    # Baseline network bandwidth in Gbit/s (burstable sizes can exceed it for a while).
    network_gbps: float
    # Dedicated EBS bandwidth in Mbit/s.
    ebs_bandwidth_mbps: int
    # On-demand $/h in PRICE_REGION as of PRICES_READ; None when the size has no on-demand price there.
    on_demand_usd_per_hour: float | None
    # Value of Karpenter's karpenter.k8s.aws/instance-gpu-name (or instance-accelerator-name) label.
    karpenter_name: str
    # The Ray `accelerator_type` for this accelerator, or None when Ray has no constant for it.
    ray_accelerator_type: str | None
    # What the kubelet offers to pods (Karpenter's Resources table); None: derived with Karpenter's formula.
    allocatable_cpu_millicores: int | None = None
    allocatable_memory_mib: int | None = None
    # The cores one accelerator offers to the engine's tensor parallelism: NeuronCores per Neuron chip as the runtime
    # presents them (logical cores: 4 per Trainium2 chip at the default LNC=2, 2 per Inferentia2/Trainium chip); 1
    # for GPUs.
    cores_per_accelerator: int = 1
    # Anything about this row's price or facts a reader should know.
    note: str = ""
    # CUDA compute capability (major, minor) of an NVIDIA GPU, which decides the kernels vLLM can use
    # (catalog/formats.py); None for Inferentia2.
    compute_capability: tuple[int, int] | None = None
    # EFA interfaces the instance takes (Karpenter's `vpc.amazonaws.com/efa` capacity); 0: no EFA.
    efa_interfaces: int = 0
    # Neuron chips: the NeuronCore generation ("NeuronCore-v2" on Inferentia2 and Trainium, "NeuronCore-v3" on
    # Trainium2), and the logical NeuronCore configuration (physical cores per logical core: 2 on Trainium2 by
    # default, 1 where the chip has no such setting). None and 1 for GPUs.
    neuron_core: str | None = None
    logical_core_config: int = 1

    @property
    def accelerator_memory_gib(self) -> float:
        return self.accelerator_memory_mib / 1024

    @property
    def accelerator_memory_bytes(self) -> int:
        return self.accelerator_memory_mib * 1024 * 1024

    @property
    def memory_per_core_bytes(self) -> int:
        """Accelerator memory one core (a logical NeuronCore on Neuron, the GPU itself otherwise) addresses."""
        return self.accelerator_memory_bytes // self.cores_per_accelerator

    @property
    def cores(self) -> int:
        """Cores of the whole instance as the engine's tensor parallelism counts them."""
        return self.accelerators * self.cores_per_accelerator

    @property
    def extended_resource(self) -> str:
        """The Kubernetes extended resource a pod requests for these accelerators."""
        return _EXTENDED_RESOURCE[self.accelerator_vendor]

    @property
    def allocatable_cpu(self) -> int:
        """Millicores the kubelet offers to pods (EKS AMI reserve: 6 % of the first core, 1 % of the second,
        0.5 % of cores 3-4, 0.25 % of the rest), when the row does not carry Karpenter's figure."""
        if self.allocatable_cpu_millicores is not None:
            return self.allocatable_cpu_millicores
        cores = self.vcpus
        reserved = 60 + (10 if cores > 1 else 0) + 5 * min(max(cores - 2, 0), 2) + 2.5 * max(cores - 4, 0)
        return int(cores * 1000 - reserved)

    @property
    def allocatable_memory(self) -> int:
        """MiB the kubelet offers to pods, when the row does not carry Karpenter's figure: capacity less Karpenter's
        VM overhead, kube-reserved (255 MiB + 11 MiB per pod, at 110 pods) and the 100 MiB eviction threshold."""
        if self.allocatable_memory_mib is not None:
            return self.allocatable_memory_mib
        capacity = self.memory_gib * 1024 * (1 - _VM_MEMORY_OVERHEAD)
        return int(capacity - (255 + 11 * _ASSUMED_MAX_PODS) - _EVICTION_MIB)


@dataclass(frozen=True)
class _Family:
    family: str
    accelerator_name: str
    vendor: str
    memory_mib: int
    bandwidth_gbps: float
    interconnect: str
    karpenter_name: str
    ray_accelerator_type: str | None
    cores_per_accelerator: int = 1
    compute_capability: tuple[int, int] | None = None
    neuron_core: str | None = None
    logical_core_config: int = 1


def _sizes(f: _Family, *rows: tuple[Any, ...]) -> tuple[InstanceType, ...]:
    """Rows of one family: (instance type, accelerators, vCPU, RAM GiB, NVMe GB, EFA interfaces, network Gbps,
    EBS Mbps, $/h, allocatable millicores, allocatable MiB[, note[, interconnect override]])."""
    out = []
    for row in rows:
        name, count, vcpus, ram, nvme, efa, net, ebs, price, cpu_m, mem_mib, *rest = row
        note = rest[0] if rest else ""
        interconnect = rest[1] if len(rest) > 1 else (f.interconnect if count > 1 else "none")
        out.append(
            InstanceType(
                instance_type=name,
                family=f.family,
                accelerator_name=f.accelerator_name,
                accelerator_vendor=f.vendor,
                accelerators=count,
                accelerator_memory_mib=f.memory_mib,
                memory_bandwidth_gbps=f.bandwidth_gbps,
                vcpus=vcpus,
                memory_gib=ram,
                local_nvme_gb=nvme,
                interconnect=interconnect,
                efa=efa > 0,
                efa_interfaces=efa,
                network_gbps=net,
                ebs_bandwidth_mbps=ebs,
                on_demand_usd_per_hour=price,
                karpenter_name=f.karpenter_name,
                ray_accelerator_type=f.ray_accelerator_type,
                allocatable_cpu_millicores=cpu_m,
                allocatable_memory_mib=mem_mib,
                cores_per_accelerator=f.cores_per_accelerator,
                note=note,
                compute_capability=f.compute_capability,
                neuron_core=f.neuron_core,
                logical_core_config=f.logical_core_config,
            )
        )
    return tuple(out)


# G5: NVIDIA A10G, 24 GB GDDR6 (22,888 MiB per EC2), 600 GB/s (NVIDIA A10 datasheet; the A10G is AWS's variant).
# No NVLink: multi-GPU sizes talk over PCIe. Shape: Karpenter reference; prices: AWS Price List 2026-07-20.
_G5 = _Family("g5", "A10G", "nvidia", 22888, 600, "PCIe", "a10g", "A10G", compute_capability=(8, 6))
# G6: NVIDIA L4, 24 GB GDDR6 (22,888 MiB), 300 GB/s (NVIDIA L4 datasheet); PCIe. Sources as above.
_G6 = _Family("g6", "L4", "nvidia", 22888, 300, "PCIe", "l4", "L4", compute_capability=(8, 9))
# Gr6: the same L4 with twice the RAM per vCPU (graphics/memory-heavy hosts). Sources as above.
_GR6 = _Family("gr6", "L4", "nvidia", 22888, 300, "PCIe", "l4", "L4", compute_capability=(8, 9))
# G6e: NVIDIA L40S, 48 GB GDDR6 (45,776 MiB), 864 GB/s (NVIDIA L40S datasheet); PCIe. Sources as above.
_G6E = _Family("g6e", "L40S", "nvidia", 45776, 864, "PCIe", "l40s", "L40S", compute_capability=(8, 9))
# G7 (launched 2026-06): NVIDIA RTX PRO 4500 Blackwell Server Edition, 32 GB GDDR7 (32,768 MiB), 800 GB/s (Exxact's
# RTX PRO 4500 Blackwell Server Edition benchmark, 2026-05-20); PCIe Gen5. Ray has no constant for it (Ray's
# auto-detected name would be "RTX"). Shape: Karpenter reference; prices: AWS Price List 2026-07-20.
_G7 = _Family("g7", "RTX-PRO-4500", "nvidia", 32768, 800, "PCIe Gen5", "rtx-pro-4500", None, compute_capability=(12, 0))
# G7e: NVIDIA RTX PRO 6000 Blackwell Server Edition, 96 GB GDDR7 (98,304 MiB), 1,597 GB/s (NVIDIA datasheet);
# PCIe Gen5. No Ray constant. Shape: Karpenter reference; prices: AWS Price List 2026-07-20.
_G7E = _Family(
    "g7e", "RTX-PRO-6000", "nvidia", 98304, 1597, "PCIe Gen5", "rtx-pro-server-6000", None, compute_capability=(12, 0)
)
# P4d: 8x NVIDIA A100 40 GB HBM2 SXM (40,960 MiB), 1,555 GB/s (NVIDIA A100 datasheet), NVLink 3 through NVSwitch
# (600 GB/s per GPU). Ray: "A100-40G" is not auto-detected (Ray labels every A100 "A100"); a Ray cluster must
# declare the resource itself (rayStartParams resources) to use it.
_P4D = _Family(
    "p4d", "A100-40G", "nvidia", 40960, 1555, "NVSwitch 600 GB/s", "a100", "A100-40G", compute_capability=(8, 0)
)
# P4de: 8x NVIDIA A100 80 GB HBM2e SXM (81,920 MiB), 2,039 GB/s (NVIDIA A100 datasheet); NVSwitch 600 GB/s.
_P4DE = _Family(
    "p4de", "A100-80G", "nvidia", 81920, 2039, "NVSwitch 600 GB/s", "a100", "A100-80G", compute_capability=(8, 0)
)
# P5: NVIDIA H100 80 GB HBM3 SXM (81,920 MiB), 3,350 GB/s (NVIDIA H100 datasheet), NVLink 4 via NVSwitch 900 GB/s.
_P5 = _Family("p5", "H100", "nvidia", 81920, 3350, "NVSwitch 900 GB/s", "h100", "H100", compute_capability=(9, 0))
# P5e and P5en: NVIDIA H200 141 GB HBM3e (144,384 MiB), 4,800 GB/s (NVIDIA H200 datasheet); NVSwitch 900 GB/s.
_P5E = _Family("p5e", "H200", "nvidia", 144384, 4800, "NVSwitch 900 GB/s", "h200", "H200", compute_capability=(9, 0))
_P5EN = _Family("p5en", "H200", "nvidia", 144384, 4800, "NVSwitch 900 GB/s", "h200", "H200", compute_capability=(9, 0))
# P6-B200: 8x NVIDIA B200 (183,359 MiB, "179 GB" HBM3e), 8,000 GB/s (NVIDIA HGX B200: 64 TB/s per 8 GPUs),
# NVLink 5 via NVSwitch 1,800 GB/s per GPU.
_P6_B200 = _Family(
    "p6-b200", "B200", "nvidia", 183359, 8000, "NVSwitch 1800 GB/s", "b200", "B200", compute_capability=(10, 0)
)
# P6-B300: 8x NVIDIA B300 (275,040 MiB, "288 GB" HBM3e), 8,000 GB/s (NVIDIA HGX B300); NVSwitch 1,800 GB/s.
# No Ray constant for B300.
_P6_B300 = _Family(
    "p6-b300", "B300", "nvidia", 275040, 8000, "NVSwitch 1800 GB/s", "b300", None, compute_capability=(10, 3)
)
# Inf2: AWS Inferentia2, 32 GiB HBM per chip with 820 GB/s, 2 NeuronCore-v2 per chip (inferentia2.rst: "32GiB of
# high-bandwidth device memory ... with 820 GiB/sec of bandwidth"; the Inf2 page's 9.8 TB/s is 12 chips' 820); chips
# linked by NeuronLink-v2 in a ring (inf2-arch.rst). The device plugin advertises chips as aws.amazon.com/neuron.
# Ray's constant is per NeuronCore ("aws-neuron-core").
_INF2 = _Family(
    "inf2", "Inferentia2", "neuron", 32768, 820, "NeuronLink-v2 ring", "inferentia2", "aws-neuron-core", 2,
    neuron_core="NeuronCore-v2",
)  # fmt: skip
# Trn1 and Trn1n: AWS Trainium, 2 NeuronCore-v2 per chip, 32 GiB with 820 GiB/s per chip (trainium.rst), NeuronLink-v2
# in a 2D torus on the 32xlarge sizes (trn1-arch.rst). Trn1n differs in network only (1,600 Gbps, 16 EFA).
_TRN1 = _Family(
    "trn1", "Trainium", "neuron", 32768, 820, "NeuronLink-v2 2D torus", "trainium", "aws-neuron-core", 2,
    neuron_core="NeuronCore-v2",
)  # fmt: skip
_TRN1N = dataclasses.replace(_TRN1, family="trn1n")
# Trn2: AWS Trainium2, 8 NeuronCore-v3 per chip, 96 GiB of HBM with 2.9 TB/s per chip, 667 dense BF16 TFLOPS
# (trainium2.rst); logical NeuronCore configuration 2 by default, so the runtime presents 4 logical cores of 24 GiB
# per chip (logical-neuroncore-config.rst: "With LNC=2 (default), these are grouped into 4 Logical NeuronCores").
# Changing LNC needs node-level runtime configuration llm-eks does not make, so the catalog states LNC=2. 16 chips
# on NeuronLink-v3, 46.4 TB/s for the instance (trn2-arch.rst).
_TRN2 = _Family(
    "trn2", "Trainium2", "neuron", 98304, 2900, "NeuronLink-v3 4x4 torus", "trainium2", "aws-neuron-core", 4,
    neuron_core="NeuronCore-v3", logical_core_config=2,
)  # fmt: skip
# Not in the catalog: trn2.3xlarge (absent from Karpenter v1.14's instance-types reference, so no allocatable figures
# and no price), trn2u.48xlarge (UltraServer capacity, bought as a unit of four), trn3 (neither in that reference nor
# in the pinned price list), inf1 (NeuronCore-v1, no vLLM path).
_TRN2_NO_PRICE = (
    "no on-demand price for trn2.48xlarge in us-east-1 in the AWS Price List data of 2026-07-20 (Karpenter's "
    "zz_generated.pricing_aws.go lists none); EC2 sells it through Capacity Blocks for ML in US East (Ohio)"
)

CATALOG: tuple[InstanceType, ...] = (
    # name, accelerators, vCPU, RAM GiB, NVMe GB, EFA interfaces, network Gbps, EBS Mbps, $/h, alloc millicores,
    # alloc MiB
    *_sizes(
        _G5,
        ("g5.xlarge", 1, 4, 16, 250, 0, 2.5, 3500, 1.006, 3920, 14162),
        ("g5.2xlarge", 1, 8, 32, 450, 0, 5, 3500, 1.212, 7910, 29317),
        ("g5.4xlarge", 1, 16, 64, 600, 0, 10, 4750, 1.624, 15890, 57691),
        ("g5.8xlarge", 1, 32, 128, 900, 1, 25, 16000, 2.448, 31850, 118312),
        ("g5.12xlarge", 4, 48, 192, 3800, 1, 40, 16000, 5.672, 47810, 173400),
        ("g5.16xlarge", 1, 64, 256, 1900, 1, 25, 16000, 4.096, 63770, 239554),
        ("g5.24xlarge", 4, 96, 384, 3800, 1, 50, 19000, 8.144, 95690, 355262),
        ("g5.48xlarge", 8, 192, 768, 7600, 1, 100, 19000, 16.288, 191450, 723299),
    ),
    *_sizes(
        _G6,
        ("g6.xlarge", 1, 4, 16, 250, 0, 2.5, 5000, 0.8048, 3920, 14162),
        ("g6.2xlarge", 1, 8, 32, 450, 0, 5, 5000, 0.9776, 7910, 29317),
        ("g6.4xlarge", 1, 16, 64, 600, 0, 10, 8000, 1.3232, 15890, 57691),
        ("g6.8xlarge", 1, 32, 128, 900, 1, 25, 16000, 2.0144, 31850, 118312),
        ("g6.12xlarge", 4, 48, 192, 3760, 1, 40, 20000, 4.6016, 47810, 178933),
        ("g6.16xlarge", 1, 64, 256, 1880, 1, 25, 20000, 3.3968, 63770, 234021),
        ("g6.24xlarge", 4, 96, 384, 3760, 1, 50, 30000, 6.6752, 95690, 355262),
        ("g6.48xlarge", 8, 192, 768, 7520, 1, 100, 60000, 13.3504, 191450, 718987),
    ),
    *_sizes(
        _GR6,
        ("gr6.4xlarge", 1, 16, 128, 600, 0, 10, 8000, 1.5392, 15890, 118312),
        ("gr6.8xlarge", 1, 32, 256, 900, 1, 25, 16000, 2.4464, 31850, 239554),
    ),
    *_sizes(
        _G6E,
        ("g6e.xlarge", 1, 4, 32, 250, 0, 2.5, 5000, 1.861, 3920, 29317),
        ("g6e.2xlarge", 1, 8, 64, 450, 0, 5, 5000, 2.24208, 7910, 59627),
        ("g6e.4xlarge", 1, 16, 128, 600, 0, 20, 8000, 3.00424, 15890, 118312),
        ("g6e.8xlarge", 1, 32, 256, 900, 1, 25, 16000, 4.52856, 31850, 239554),
        ("g6e.12xlarge", 4, 48, 384, 3800, 1, 100, 20000, 10.49264, 47810, 360157),
        ("g6e.16xlarge", 1, 64, 512, 1900, 1, 35, 20000, 7.57719, 63770, 476504),
        ("g6e.24xlarge", 4, 96, 768, 3800, 2, 200, 30000, 15.06559, 95690, 721682),
        ("g6e.48xlarge", 8, 192, 1536, 7600, 4, 400, 60000, 30.13118, 191450, 1449132),
    ),
    *_sizes(
        _G7,
        ("g7.2xlarge", 1, 8, 32, 440, 0, 60, 8000, 2.52, 7910, 27161),
        ("g7.4xlarge", 1, 16, 64, 875, 0, 60, 8000, 3.04208, 15890, 54699),
        ("g7.8xlarge", 1, 32, 128, 930, 1, 80, 16000, 4.08624, 31850, 113934),
        ("g7.12xlarge", 2, 48, 192, 1900, 1, 175, 20000, 7.12832, 47810, 173169),
        ("g7.24xlarge", 4, 96, 384, 3800, 1, 350, 40000, 14.25664, 95690, 346715),
        ("g7.48xlarge", 8, 192, 768, 7600, 2, 700, 80000, 28.51328, 191450, 718756),
    ),
    *_sizes(
        _G7E,
        ("g7e.2xlarge", 1, 8, 64, 1900, 0, 50, 5000, 3.36312, 7910, 57471),
        ("g7e.4xlarge", 1, 16, 128, 1900, 0, 50, 8000, 3.99816, 15890, 115320),
        ("g7e.8xlarge", 1, 32, 256, 1900, 1, 100, 16000, 5.26824, 31850, 236562),
        ("g7e.12xlarge", 2, 48, 512, 3800, 1, 400, 25000, 8.28608, 47810, 477659),
        ("g7e.24xlarge", 4, 96, 1024, 7600, 2, 800, 50000, 16.57216, 95690, 962625),
        ("g7e.48xlarge", 8, 192, 2048, 15200, 4, 1600, 100000, 33.14432, 191450, 1932558),
    ),
    *_sizes(_P4D, ("p4d.24xlarge", 8, 96, 1152, 8000, 4, 400, 19000, 21.957642, 95690, 1082712)),
    *_sizes(_P4DE, ("p4de.24xlarge", 8, 96, 1152, 8000, 4, 400, 19000, 27.44705, 95690, 1082712)),
    *_sizes(
        _P5,
        ("p5.4xlarge", 1, 16, 256, 3800, 1, 100, 10000, 6.88, 15890, 240830),
        ("p5.48xlarge", 8, 192, 2048, 30400, 32, 3200, 80000, 55.04, 191450, 1938410),
    ),
    *_sizes(
        _P5E,
        (
            "p5e.48xlarge",
            8,
            192,
            2048,
            30400,
            32,
            3200,
            80000,
            None,
            191450,
            1938410,
            "no on-demand price in us-east-1 in the 2026-07-20 Price List (Capacity Blocks); auto never picks it",
        ),
    ),
    # p5en.48xlarge, Karpenter reference v1.14.0 (commit 692ccdd): instance-cpu 192, instance-memory 2,097,152 MiB,
    # instance-gpu-memory 144,384, instance-local-nvme 30,400, instance-network-bandwidth 3,200,000 Mbps,
    # instance-ebs-bandwidth 100,000, 16 EFA interfaces; Resources cpu 191450m, memory 1937332Mi. Price: us-east-1
    # 63.296000 in zz_generated.pricing_aws.go "generated at 2026-07-20T13:44:30Z for us-east-1" (commit 6fc13b5).
    *_sizes(_P5EN, ("p5en.48xlarge", 8, 192, 2048, 30400, 16, 3200, 100000, 63.296, 191450, 1937332)),
    # p6-b200.48xlarge, same Karpenter reference: instance-cpu 192, instance-memory 2,097,152 MiB, instance-gpu-memory
    # 183,359, instance-local-nvme 30,400, network 3,200,000 Mbps, EBS 100,000, 8 EFA interfaces; Resources cpu
    # 191450m, memory 1937332Mi. Price: us-east-1 113.932800 in the same 2026-07-20 Price List snapshot.
    *_sizes(_P6_B200, ("p6-b200.48xlarge", 8, 192, 2048, 30400, 8, 3200, 100000, 113.9328, 191450, 1937332)),
    *_sizes(_P6_B300, ("p6-b300.48xlarge", 8, 192, 4096, 30400, 16, 6400, 100000, 142.416, 191450, 3877198)),
    *_sizes(
        _INF2,
        ("inf2.xlarge", 1, 4, 16, 0, 0, 2.083, 10000, 0.7582, 3920, 14162),
        ("inf2.8xlarge", 1, 32, 128, 0, 0, 16.667, 10000, 1.96786, 31850, 118312),
        ("inf2.24xlarge", 6, 96, 384, 0, 0, 50, 30000, 6.49063, 95690, 355262),
        ("inf2.48xlarge", 12, 192, 768, 0, 0, 100, 60000, 12.98127, 191450, 718987),
    ),
    # Karpenter reference (v1.14.1 copy, 1d927085): trn1.2xlarge instance-cpu 8, instance-memory 32,768 MiB,
    # local-nvme 474, network 3,125 Mbps, EBS 20,000, neuron 1, neuroncore 2, no vpc.amazonaws.com/efa; Resources
    # cpu 7910m, memory 29317Mi. trn1.32xlarge: 128 vCPU, 524,288 MiB, NVMe 7,600, network 800,000 Mbps, EBS 80,000,
    # neuron 16, neuroncore 32, efa 8; cpu 127610m, memory 481894Mi. Prices: us-east-1 1.343750 and 21.500000 in the
    # 2026-07-20 Price List snapshot.
    *_sizes(
        _TRN1,
        ("trn1.2xlarge", 1, 8, 32, 474, 0, 3.125, 20000, 1.34375, 7910, 29317),
        ("trn1.32xlarge", 16, 128, 512, 7600, 8, 800, 80000, 21.5, 127610, 481894),
    ),
    # trn1n.32xlarge: as trn1.32xlarge with network 1,600,000 Mbps and efa 16; us-east-1 24.780000.
    *_sizes(_TRN1N, ("trn1n.32xlarge", 16, 128, 512, 7600, 16, 1600, 80000, 24.78, 127610, 481894)),
    # trn2.48xlarge: 192 vCPU, 2,097,152 MiB, NVMe 7,600, network 3,200,000 Mbps, EBS 80,000, neuron 16, neuroncore
    # 128 (physical cores), efa 16; cpu 191450m, memory 1938410Mi. No us-east-1 price (see _TRN2_NO_PRICE).
    *_sizes(_TRN2, ("trn2.48xlarge", 16, 192, 2048, 7600, 16, 3200, 80000, None, 191450, 1938410, _TRN2_NO_PRICE)),
)

INSTANCE_TYPES: dict[str, InstanceType] = {row.instance_type: row for row in CATALOG}
FAMILIES: dict[str, tuple[InstanceType, ...]] = {}
for _row in CATALOG:
    FAMILIES[_row.family] = (*FAMILIES.get(_row.family, ()), _row)
del _row


def unknown_name(code: ErrorCode, field: str, value: object, choices: list[str]) -> ConfigError:
    """`<field>: <value> is not allowed; did you mean ...? allowed: a, b, c`."""
    hint = did_you_mean(value, choices) if isinstance(value, str) else ""
    return fail(code, field, value, f"{hint}allowed: {', '.join(choices)}")


def instance_type(name: str, field: str = "workload.accelerator") -> InstanceType:
    """The catalog row for an instance type; unknown names raise ConfigError with a did-you-mean hint."""
    if isinstance(name, str) and name in INSTANCE_TYPES:
        return INSTANCE_TYPES[name]
    raise unknown_name(E201, field, name, list(INSTANCE_TYPES))


def family(name: str, field: str = "workload.accelerator_family") -> tuple[InstanceType, ...]:
    """Every size of one family (e.g. "g6e"), smallest first; unknown names raise ConfigError."""
    if isinstance(name, str) and name in FAMILIES:
        return FAMILIES[name]
    raise unknown_name(E201, field, name, list(FAMILIES))
