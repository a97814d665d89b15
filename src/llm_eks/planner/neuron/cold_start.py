"""Cold start on Neuron: the image, the staged weights fetched onto the node, the engine loading the compiled
artefacts the compile cache's writer published, and the ahead-of-time compile itself (in the writer Job only).

A Neuron server never streams weights from S3 (NxD Inference and vllm-neuron load a local checkpoint directory): the
pod's init container copies the staged checkpoint from the environment's bucket onto the node, verified file by file,
and restores the signed compiled artefacts beside it. Figures and assumptions:
- image: AWS's Neuron vLLM containers publish no size; the vLLM image's 12 GB compressed stands in (planner/
  cold_start.py), pulled as the GPU nodes pull.
- fetch: S3 to local disk at the same 2 GB/s (at most 80 % of the baseline network) the GPU stream assumes, then the
  engine reads the files from the instance store (2 GB/s) or, on inf2 (no instance store), from the gp3 volume the
  node class provisions (1,000 MiB/s, at most 90 % of the instance's EBS bandwidth).
- load: the engine's start (20 s, the GPU figure) and its load of the restored artefacts; no published figure for a
  Neuron server's start from a warm compile cache was found.
- compile (writer Job): NxD Inference's user guide, "a small-ish model of 15GB might take around 15min to compile"
  (vllm-user-guide-v1.rst), 60 s per GB of checkpoint; vllm-neuron's Llama 3.3 70B tutorial, "roughly 15-20 minutes
  for the 70B model" (tutorial-llama3-70b.md, a 70 GB FP8 checkpoint), 17 s per GB at the upper figure.
A serving pod on vllm-neuron treats a missing artefact as fatal (VLLM_NEURON_DISABLE_WARMUP_COMPILE, the chart sets
it); on NxD Inference a missing one is compiled in the pod (NEURON_COMPILED_ARTIFACTS, vllm-user-guide-v1.rst), so
its startup probe allows the compile too.
"""

from __future__ import annotations

from llm_eks.catalog.accelerators import InstanceType
from llm_eks.planner.cold_start import (
    EBS_GP3_BYTES_PER_S,
    EBS_SHARE,
    NETWORK_SHARE,
    NODE_PROVISION_S,
    NVME_READ_BYTES_PER_S,
    S3_STREAM_BYTES_PER_S,
    WARMUP_INIT_S,
    ColdStart,
    ColdStartPath,
    image_paths,
    image_seconds,
)
from llm_eks.planner.request import IMAGE_SOURCES

# Seconds of ahead-of-time compile per GB of checkpoint, per engine path (module docstring).
COMPILE_S_PER_GB = {"nxd-inference": 15 * 60 / 15, "vllm-neuron": 20 * 60 / 70}
# The one weights path on Neuron.
NEURON_WEIGHTS_SOURCE = "staged"


def compile_seconds(engine: str, checkpoint_bytes: int) -> int:
    return round(COMPILE_S_PER_GB[engine] * checkpoint_bytes / 1e9)


def fetch_seconds(inst: InstanceType, checkpoint_bytes: int) -> float:
    """The staged checkpoint onto the node and read back by the engine."""
    network = inst.network_gbps * 1e9 / 8 * NETWORK_SHARE
    download = checkpoint_bytes / min(S3_STREAM_BYTES_PER_S, network)
    if inst.local_nvme_gb:
        read = NVME_READ_BYTES_PER_S
    else:
        read = min(EBS_GP3_BYTES_PER_S, inst.ebs_bandwidth_mbps * 1e6 / 8 * EBS_SHARE)
    return download + checkpoint_bytes / read


def neuron_cold_start(inst: InstanceType, engine: str, checkpoint_bytes: int, image_source: str) -> ColdStart:
    image = image_seconds(image_source)
    weights = fetch_seconds(inst, checkpoint_bytes)
    warmup = float(WARMUP_INIT_S)
    total = image + weights + warmup
    # NxD Inference compiles a missing artefact in the serving pod: its probe allows that compile.
    miss = compile_seconds(engine, checkpoint_bytes) if engine == "nxd-inference" else 0
    return ColdStart(
        image_pull_s=round(image),
        weights_s=round(weights),
        warmup_s=round(warmup),
        total_s=round(total),
        startup_s=round(weights + warmup + miss),
        node_provision_s=NODE_PROVISION_S,
        scale_out_s=round(NODE_PROVISION_S + total),
    )


def neuron_cold_start_paths(
    inst: InstanceType, checkpoint_bytes: int, image_source: str, *, auto_mode: bool = False
) -> tuple[ColdStartPath, ...]:
    """Queue spike to a Ready replica by image source and warm node (the weights always staged), the request's own
    first. On EKS Auto Mode a new node has one image path, Auto Mode's own (`image_source`, planner/compute_mode.py)."""
    weights = round(fetch_seconds(inst, checkpoint_bytes))
    sources = (image_source,) if auto_mode else IMAGE_SOURCES
    rows = image_paths(
        NEURON_WEIGHTS_SOURCE, weights, WARMUP_INIT_S, sources, (NEURON_WEIGHTS_SOURCE, image_source, False)
    )
    return tuple(sorted(rows, key=lambda row: not row.in_use))
