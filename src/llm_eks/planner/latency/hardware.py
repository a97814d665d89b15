"""What the latency model takes from the hardware: each GPU's dense tensor-core peak, the cost of a
tensor-parallel all-reduce and a pipeline hand-off on each interconnect, and of the all-gather / reduce-scatter
that expert parallelism adds, within a node and across nodes over EFA. Every figure says where it was read;
the ones no source here confirms say so (docs: What is not verified).

Dense = half the datasheet's "with sparsity" figure where NVIDIA lists only that.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from llm_eks.catalog.accelerators import InstanceType


@dataclass(frozen=True)
class Peak:
    """Dense tensor-core TFLOPS of one GPU by the dtype its matrix multiplies run in; None: no such unit."""

    bf16: float
    fp8: float | None
    fp4: float | None
    source: str
    verified: bool = True


# Per accelerator_name of the catalog (catalog/accelerators.py).
PEAKS: dict[str, Peak] = {
    "A100-40G": Peak(312, None, None, "NVIDIA A100 datasheet (BF16 312 dense / 624 sparse), via glennklockwood.com"),
    "A100-80G": Peak(312, None, None, "NVIDIA A100 datasheet (BF16 312 dense / 624 sparse), via glennklockwood.com"),
    "H100": Peak(989.5, 1979, None, "NVIDIA H100 SXM table (BF16 1,979*, FP8 3,958*, * with sparsity; dense half)"),
    "H200": Peak(989.5, 1979, None, "NVIDIA H200 SXM table (compute identical to H100: FP8 3,958* with sparsity)"),
    "B200": Peak(2250, 4500, 9000, "HGX B200 per GPU (BF16 2,250 / FP8 4,500 / FP4 9,000 dense), glennklockwood.com"),
    "B300": Peak(2250, 4500, 13125, "HGX B300 per GPU (BF16 2,250 / FP8 4,500 / FP4 13,125 dense), glennklockwood.com"),
    "L4": Peak(121, 242.5, None, "NVIDIA L4 datasheet (FP16 242*, FP8 485*, * with sparsity; dense half)"),
    "L40S": Peak(362.05, 733, None, "NVIDIA L40S datasheet (BF16 362.05 dense, FP8 733 dense)"),
    # The A10's datasheet figure: AWS's A10G is an A10 variant whose tensor throughput differs (Baseten), and no
    # A10G figure was found; prefill on g5 may be slower than this says.
    "A10G": Peak(125, None, None, "NVIDIA A10 datasheet (BF16 125 dense); the A10G's own figure not found", False),
    # Third-party figures computed from the boost clock (hmc-tech.com), not an NVIDIA datasheet.
    "RTX-PRO-6000": Peak(503.8, 1007.6, 2015, "hmc-tech.com, derived from the 2,617 MHz boost clock", False),
    # Scaled from the RTX PRO 6000's by CUDA cores (10,496 / 24,064, Exxact): no published figure was found.
    "RTX-PRO-4500": Peak(219.7, 439.5, 878.9, "the RTX PRO 6000's figure x 10,496 / 24,064 CUDA cores", False),
}


def peak_tflops(inst: InstanceType, compute: str) -> float:
    """The dense peak of `inst`'s GPU for matrix multiplies in `compute` ("16-bit", "fp8" or "fp4"), falling back to
    the next wider unit the GPU has (vLLM runs FP8 weights as W8A16 where there is no FP8 unit)."""
    peak = PEAKS[inst.accelerator_name]
    if compute == "fp4" and peak.fp4 is not None:
        return peak.fp4
    if compute in ("fp4", "fp8") and peak.fp8 is not None:
        return peak.fp8
    return peak.bf16


# One tensor-parallel all-reduce of a decode step's activations: latency (us) plus bytes over bus bandwidth (GB/s).
# NVLink: NCCL with NVLS on 8x H100 is about 6 us for 128 B-64 KB (NVIDIA/nccl#1259); bus bandwidth 480 GB/s
# for H100 NVLink4 SHARP (NVIDIA/nccl#1374, GTC S62129). PCIe: NCCL on PCIe-only GPUs takes 19-45 us for 4-16 KB
# (V100 behind a PLX switch 19-24 us, sglang-V100#2; 8x RTX 6000D 45 us for 4 KB, sglang#32479; 16x RTX PRO 6000
# 36 us, b12x#139), and vLLM 0.33 runs its custom all-reduce on PCIe at TP 2 only (custom_all_reduce.py); bus
# bandwidth 28 GB/s on 8x RTX 5090 over PCIe (NVIDIA/nccl#1639). No AWS g-instance measurement was found.
ALL_REDUCE_US = {"nvlink": 6.0, "pcie": 30.0}
ALL_REDUCE_BUS_GBPS = {"nvlink": 480.0, "pcie": 28.0}


def all_reduce_us(interconnect: str, size_bytes: float, ranks: int) -> float:
    """One all-reduce of `size_bytes` over `ranks` GPUs of one node: the latency (ALL_REDUCE_US) plus the bytes a
    ring moves, 2 (ranks - 1) / ranks of them, over the bus bandwidth (NCCL's busbw is defined that way). 0 at one
    rank; `interconnect` "nvlink" or anything else for PCIe."""
    if ranks <= 1:
        return 0.0
    kind = "nvlink" if interconnect == "nvlink" else "pcie"
    return ALL_REDUCE_US[kind] + size_bytes * 2 * (ranks - 1) / ranks / (ALL_REDUCE_BUS_GBPS[kind] * 1e3)


# A pipeline hand-off between stages: within a node over NVLink it is an all-reduce's latency; across nodes over
# EFA, NCCL's small-message floor between two p5.48xlarge is about 70 us (aws-samples/awsome-distributed-training
# micro-benchmarks/nccl-tests); elsewhere (PCIe nodes over ENA) an estimate, not measured.
PIPELINE_HOP_US = {"nvlink": 6.0, "efa": 70.0, "other": 200.0}


def link(inst: InstanceType) -> str:
    """The GPUs' interconnect within one node: "nvlink" (NVSwitch), "pcie", or "none" (one GPU)."""
    if "NVSwitch" in inst.interconnect:
        return "nvlink"
    return "pcie" if inst.interconnect.startswith("PCIe") else "none"


def pipeline_hop_us(inst: InstanceType, nodes: int) -> float:
    """One pipeline hand-off of a replica spanning `nodes` node(s) of `inst`."""
    if nodes == 1:
        return ALL_REDUCE_US["nvlink" if link(inst) == "nvlink" else "pcie"]
    return PIPELINE_HOP_US["efa" if inst.efa else "other"]


# NCCL all-reduce across two nodes over EFA, as nccl-tests measured it (out-of-place time, us, by message bytes):
# aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/README.md @39c17d60, 16 GPUs on 2 nodes.
# 2x p5.48xlarge: "8 ... 69.12", "1048576 ... 123.2", "16777216 ... 298.1", "2147483648 ... 9074.5";
# 2x p4de.24xlarge: "8 ... 164.3", "1048576 ... 309.4", "16777216 ... 1191.8", "2147483648 ... 51406".
# 2x p6-b200.48xlarge, small messages only: "8 ... 50.58", "128 ... 56.27" (dstackai/dstack#3961); its larger
# sizes were not found, so p5's points (the same 3,200 Gbps of EFA) continue the curve there.
EFA_ALL_REDUCE_US: dict[str, tuple[tuple[float, float], ...]] = {
    "p5.48xlarge": ((8, 69.12), (1048576, 123.2), (16777216, 298.1), (2147483648, 9074.5)),
    "p4de.24xlarge": ((8, 164.3), (1048576, 309.4), (16777216, 1191.8), (2147483648, 51406.0)),
    "p6-b200.48xlarge": ((8, 50.58), (128, 56.27), (1048576, 123.2), (16777216, 298.1), (2147483648, 9074.5)),
}


@dataclass(frozen=True)
class EfaLink:
    """The measured curve an instance type's inter-node collectives are costed with, and how close it is."""

    measured_on: str
    # False: measured on another instance type (named in `note`), not on this one.
    verified: bool
    note: str


# Which measurement stands for each EFA instance type. Unverified rows borrow the nearest measured network: the same
# EFA bandwidth (p5e/p5en/p6-b300 from p5, 3,200+ Gbps; p4d from p4de, 400 Gbps, 4 EFA), else p4de's 400 Gbps,
# the slowest EFA network measured (optimistic for the g sizes with 1-2 interfaces of 100-200 Gbps).
EFA_LINKS: dict[str, EfaLink] = {
    "p5.48xlarge": EfaLink("p5.48xlarge", True, "nccl-tests all-reduce, 2x p5.48xlarge"),
    "p4de.24xlarge": EfaLink("p4de.24xlarge", True, "nccl-tests all-reduce, 2x p4de.24xlarge"),
    "p6-b200.48xlarge": EfaLink(
        "p6-b200.48xlarge", False, "measured up to 128 B on 2x p6-b200.48xlarge; larger sizes as p5.48xlarge"
    ),
    "p5e.48xlarge": EfaLink("p5.48xlarge", False, "not measured: p5.48xlarge's (the same 3,200 Gbps EFA)"),
    "p5en.48xlarge": EfaLink("p5.48xlarge", False, "not measured: p5.48xlarge's (the same 3,200 Gbps EFA)"),
    "p6-b300.48xlarge": EfaLink("p5.48xlarge", False, "not measured: p5.48xlarge's (3,200 Gbps, half of its 6,400)"),
    "p4d.24xlarge": EfaLink("p4de.24xlarge", False, "not measured: p4de.24xlarge's (the same 400 Gbps EFA)"),
}
_SLOWEST_MEASURED = EfaLink("p4de.24xlarge", False, "not measured: p4de.24xlarge's 400 Gbps EFA, the slowest measured")


def efa_link(inst: InstanceType) -> EfaLink:
    """The measurement an EFA instance type's inter-node collectives are costed with."""
    return EFA_LINKS.get(inst.instance_type, _SLOWEST_MEASURED)


def _interpolate(points: tuple[tuple[float, float], ...], size: float) -> float:
    """Time at `size` bytes on a measured curve, linear in bytes between points (a latency plus bytes over a
    bandwidth, segment by segment); below the first point its time, beyond the last the last segment's slope."""
    if size <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in pairwise(points):
        if size <= x1:
            return y0 + (y1 - y0) * (size - x0) / (x1 - x0)
    (x0, y0), (x1, y1) = points[-2], points[-1]
    return y1 + (y1 - y0) * (size - x1) / (x1 - x0)


def collective_us(inst: InstanceType, nodes: int, size_bytes: float, ranks: int) -> float:
    """One all-gather or reduce-scatter of `size_bytes` (the gathered tensor) over `ranks` GPUs on `nodes` nodes of
    `inst`: the dispatch or combine of vLLM 0.33's default expert-parallel all2all backend, allgather_reducescatter
    (vllm/distributed/device_communicators/all2all.py AgRsAll2AllManager: all_gatherv, reduce_scatterv).

    Within a node: an all-reduce's latency (ALL_REDUCE_US) plus (ranks - 1) / ranks of the bytes over its bus
    bandwidth. Across nodes over EFA: NCCL's measured all-reduce time for the same bytes (EFA_ALL_REDUCE_US), an
    upper bound (a ring all-reduce moves twice an all-gather's bytes) measured on 2 nodes, so optimistic beyond.
    Across nodes without EFA: the estimated TCP hand-off (PIPELINE_HOP_US "other", not measured) plus the bytes
    over the instance's baseline network bandwidth."""
    if ranks <= 1:
        return 0.0
    if nodes == 1:
        kind = "nvlink" if link(inst) == "nvlink" else "pcie"
        return ALL_REDUCE_US[kind] + size_bytes * (ranks - 1) / ranks / (ALL_REDUCE_BUS_GBPS[kind] * 1e3)
    if inst.efa:
        return _interpolate(EFA_ALL_REDUCE_US[efa_link(inst).measured_on], size_bytes)
    return PIPELINE_HOP_US["other"] + size_bytes / (inst.network_gbps * 1e3 / 8)
