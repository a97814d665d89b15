"""Modelled cold start: image by source, weights by source and instance bandwidth, warm-up, node launch; and the
same terms for every path side by side (`cold_start_paths`). Each figure names where it comes from; where no
published measurement exists, it says so."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llm_eks.planner.compute_mode import AUTO_MODE, image_source_on
from llm_eks.planner.request import IMAGE_SOURCES

if TYPE_CHECKING:
    from llm_eks.planner.sizing import Context, Fit


@dataclass(frozen=True)
class ColdStart:
    """Modelled time from a pod being scheduled to serving, and its parts (seconds)."""

    image_pull_s: float
    weights_s: float
    warmup_s: float
    # Image pull + weights + warm-up, on a node that is already up.
    total_s: float
    # Container start to serving (weights + warm-up): what the startup probe must allow.
    startup_s: float
    # Karpenter launch to a Ready GPU node.
    node_provision_s: float
    # A replica that needs a new node: node provisioning + total.
    scale_out_s: float


@dataclass(frozen=True)
class ColdStartPath:
    """One way a replica can start (weights source, image source, new or warm node) and its modelled seconds."""

    weights_source: str
    image_source: str
    # True: warm headroom keeps the node up (no node launch; the image is still pulled or restored).
    warm_node: bool
    node_s: float
    image_s: float
    weights_s: float
    warmup_s: float
    total_s: float
    # The path the request (config) uses.
    in_use: bool


# Cold start. The vLLM OpenAI image is ~12 GB compressed (28.6 GB unpacked, vllm-project/vllm#22377, #27154).
IMAGE_COMPRESSED_BYTES = 12e9

# pull: containerd's default pull (one layer after another, single-threaded gunzip). AWS measured a vLLM Deep
# Learning Container image on gp3 at 1,000 MiB/s: 10.78 GB in 112.3 s (96 MB/s, 2025) and 9.35 GB in 130.8 s
# (72 MB/s, 2026) (aws-samples/karpenter-blueprints, blueprints/soci-snapshotter README); the slower figure.
IMAGE_PULL_BYTES_PER_S = 72e6

# parallel-pull: the SOCI snapshotter's parallel pull-and-unpack on Bottlerocket, same image and volume: 10.78 GB in
# 45.0 s (240 MB/s, 2025) and 9.35 GB in 23.2 s (403 MB/s, 2026) (same README); the slower figure.
IMAGE_PARALLEL_PULL_BYTES_PER_S = 240e6

# snapshot: the node's data volume is restored from an EBS snapshot that already holds the image, so nothing is
# pulled. The one published figure: a 9.5 GB image cached this way started in under 5 s, against 334 s pulled
# (aws-ia/terraform-aws-eks-blueprints@db5c59c patterns/ml-container-cache, g6e.xlarge, Fast Snapshot Restore on).
# Without Fast Snapshot Restore blocks come from S3 on first read; llm-eks asks EC2 to initialize the volume at
# 300 MiB/s (volumeInitializationRate), and AWS publishes no first-read figure below that: 5 s is optimistic there.
IMAGE_SNAPSHOT_S = 5.0

# nvme: a fresh node downloads the checkpoint from the Hugging Face Hub into the instance-store cache (capped at 80 %
# of the instance's baseline network bandwidth), then vLLM reads it from NVMe. 200 MB/s and 2 GB/s are our
# assumptions: no published measurement of Hub download speed into EC2 was found (the Hub is unreachable from where
# this was written, so it is not measured here either).
HF_DOWNLOAD_BYTES_PER_S = 200e6

NVME_READ_BYTES_PER_S = 2e9

# s3: the Run:ai Model Streamer reads safetensors from S3 with many concurrent ranged GETs straight into GPU memory.
# Run:ai's benchmark (runai-model-streamer docs/src/benchmarks.md; g5.12xlarge, Llama-3-8B 15 GB, same-Region S3)
# loads in 4.88 s at concurrency 32 (~3.1 GB/s), 8.45 s at 16; the vLLM chart sets RUNAI_STREAMER_CONCURRENCY 32
# (the library's default for object storage is 8). We model 2 GB/s, capped at 80 % of the instance's baseline network
# bandwidth.
S3_STREAM_BYTES_PER_S = 2e9

# ebs: weights on an initialized gp3 volume provisioned at 1,000 MiB/s (a snapshot-restored volume is lazily loaded
# and far slower unless Fast Snapshot Restore is on), capped at 90 % of the instance's dedicated EBS bandwidth.
EBS_GP3_BYTES_PER_S = 1000 * 1024**2

NETWORK_SHARE = 0.8

EBS_SHARE = 0.9

# Engine warm-up: process start, model init and tokenizer (20 s), torch.compile with an empty cache on a fresh node
# (60 s), CUDA-graph capture (20 s), plus NCCL set-up and slower compile per doubling of GPUs (10 s each) and worker
# start-up per extra node (30 s). Published vLLM figures are lower: Meta-Llama-3-8B engine init 14 s, first compile
# 19 s, graph capture 15 s with compile (vllm-project/vllm#11005); Llama-3.1-70B first compile 24 s (#33641); graph
# capture "more than 10 s" for the default 67 graphs (#20098), up to a minute in the newer model runner (#29275);
# none names the GPU. We keep about twice their sum: the startup probe is sized from this, and an estimate below the
# real start kills a loading pod.
WARMUP_INIT_S = 20
WARMUP_COMPILE_S = 60
WARMUP_GRAPHS_S = 20
WARMUP_BASE_S = WARMUP_INIT_S + WARMUP_COMPILE_S + WARMUP_GRAPHS_S
# A warm torch.compile cache (staged weights: restored from the weights bucket before vLLM starts) replaces the
# compile by tracing and loading: 5 s + 4 s instead of 19 s in vllm#16848, the one published pair, so the compile
# term scales by 9/19. CUDA graphs are captured at every start (no cache holds them).
WARMUP_CACHED_COMPILE_S = WARMUP_COMPILE_S * 9 / 19
WARMUP_PER_GPU_DOUBLING_S = 10

WARMUP_PER_EXTRA_NODE_S = 30

# The CPU KV tier (planner/kv_offload.py) is pre-faulted before the engine serves: vLLM 0.33 maps it from /dev/shm and
# each worker writes its share of the pages in (MADV_POPULATE_WRITE; v1/kv_offload/cpu/shared_offload_region.py:
# 189-200), the region split into 32 files (v1/kv_offload/cpu/spec.py:25-27) because "Page-cache inserts are
# serialized per shm file, capping pre-faulting of one file near 10 GiB/s" (shared_offload_region.py:28-29). That
# comment's figure, for one file on hardware it does not name, is the only published one, and llm-eks has not
# measured it: we use it for the whole region (the workers' shards run in parallel but share the host's memory
# bandwidth), so the term is an upper bound, as the startup probe sized from the warm-up needs. Each data-parallel
# rank pre-faults a region of its own at the same time.
KV_OFFLOAD_PREFAULT_BYTES_PER_S = 10 * 2**30

# On a warm node the placeholder's init container has pulled the serving image, so the replica's container starts
# from the node's image store at once, whatever the image source.
WARM_NODE_IMAGE_S = 0.0
HEADROOM_IMAGE_SOURCE = "headroom"

# Karpenter launch to a Ready node with GPUs advertised by the device plugin. No published figure exists for GPU
# instances (the nearest: 24-30 s from instance request to Node Ready for c6a.large, awslabs/node-latency-for-k8s;
# a Karpenter maintainer notes GPU instances "often take much longer to boot", awslabs/amazon-eks-ami#1099): 90 s is
# our assumption, to be measured.
NODE_PROVISION_S = 90


def image_seconds(source: str) -> float:
    """Seconds from a pod being bound to its node until the serving image is ready to start."""
    if source == "snapshot":
        return IMAGE_SNAPSHOT_S
    rate = IMAGE_PARALLEL_PULL_BYTES_PER_S if source == "parallel-pull" else IMAGE_PULL_BYTES_PER_S
    return IMAGE_COMPRESSED_BYTES / rate


def weights_seconds(ctx: Context, fit: Fit, source: str | None = None) -> float:
    """Seconds to bring the weights into GPU memory from `source` (default the request's)."""
    inst = fit.instance
    source = source or ctx.request.weights_source
    network = inst.network_gbps * 1e9 / 8 * NETWORK_SHARE
    # Each node reads its own pipeline stages; under expert parallelism every rank loads the attention and walks every
    # file for its experts (vLLM skips the others only with --enable-ep-weight-filter, which the plan does not set).
    per_node = ctx.checkpoint_bytes if fit.expert_parallel else ctx.checkpoint_bytes / fit.nodes
    if source == "nvme":
        # hf download fetches the whole repo on every node (in parallel), then each node reads its stages.
        return ctx.checkpoint_bytes / min(HF_DOWNLOAD_BYTES_PER_S, network) + per_node / NVME_READ_BYTES_PER_S
    if source in ("s3", "staged"):
        return per_node / min(S3_STREAM_BYTES_PER_S, network)
    ebs = inst.ebs_bandwidth_mbps * 1e6 / 8 * EBS_SHARE
    return per_node / min(EBS_GP3_BYTES_PER_S, ebs)


def kv_offload_prefault_seconds(fit: Fit) -> float:
    """The CPU KV tier's pre-fault at engine start (0 without a tier)."""
    if fit.kv_offload_gib is None:
        return 0.0
    return fit.kv_offload_gib * 2**30 / KV_OFFLOAD_PREFAULT_BYTES_PER_S


def warmup_seconds(fit: Fit, compile_cache: bool = False) -> float:
    """Engine start to serving; with `compile_cache` the torch.compile term is the cached one."""
    compile_s = WARMUP_CACHED_COMPILE_S if compile_cache else WARMUP_COMPILE_S
    return (
        kv_offload_prefault_seconds(fit)
        + WARMUP_INIT_S
        + compile_s
        + WARMUP_GRAPHS_S
        + WARMUP_PER_GPU_DOUBLING_S * math.log2(fit.gpus)
        + WARMUP_PER_EXTRA_NODE_S * (fit.nodes - 1)
    )


def node_image_source(ctx: Context, fit: Fit) -> str:
    """The image path a new node of the plan takes (on EKS Auto Mode, Auto Mode's: planner/compute_mode.py)."""
    r = ctx.request
    return image_source_on(r.compute, r.image_source, fit.instance.family)


def estimate_cold_start(ctx: Context, fit: Fit) -> ColdStart:
    pull = image_seconds(node_image_source(ctx, fit))
    weights = weights_seconds(ctx, fit)
    warmup = warmup_seconds(fit, compile_cache=ctx.request.weights_source == "staged")
    total = pull + weights + warmup
    return ColdStart(
        image_pull_s=round(pull),
        weights_s=round(weights),
        warmup_s=round(warmup),
        total_s=round(total),
        # The startup probe allows an empty cache: a new model's first replica compiles from scratch.
        startup_s=round(weights + warmup_seconds(fit)),
        node_provision_s=NODE_PROVISION_S,
        scale_out_s=round(NODE_PROVISION_S + total),
    )


def cold_start_paths(ctx: Context, fit: Fit) -> tuple[ColdStartPath, ...]:
    """Queue spike to a Ready replica for every path (weights from the Hub or S3; image pulled, pulled in parallel,
    or on a restored snapshot on a new node; on a warm node, the image its placeholder pulled), the request's own
    first. On EKS Auto Mode a new node has one image path, Auto Mode's own (no snapshot, no choice of pull)."""
    node_source = node_image_source(ctx, fit)
    mine = (ctx.request.weights_source, node_source, False)
    sources = (node_source,) if ctx.request.compute == AUTO_MODE else IMAGE_SOURCES
    rows = []
    for weights_source in ("nvme", "s3", "staged"):
        weights = weights_seconds(ctx, fit, weights_source)
        warmup = warmup_seconds(fit, compile_cache=weights_source == "staged")
        rows += image_paths(weights_source, weights, warmup, sources, mine)
    return tuple(sorted(rows, key=lambda row: not row.in_use))


def image_paths(
    weights_source: str, weights_s: float, warmup_s: float, sources: Sequence[str], in_use: tuple[str, str, bool]
) -> list[ColdStartPath]:
    """One weights source's paths: a new node with each image source in `sources`, and a warm node; `in_use` is the
    (weights source, image source, warm node) the plan takes."""
    images = {source: image_seconds(source) for source in sources} | {HEADROOM_IMAGE_SOURCE: WARM_NODE_IMAGE_S}
    rows = []
    for image_source, image in images.items():
        warm = image_source == HEADROOM_IMAGE_SOURCE
        node = 0 if warm else NODE_PROVISION_S
        rows.append(
            ColdStartPath(
                weights_source=weights_source,
                image_source=image_source,
                warm_node=warm,
                node_s=node,
                image_s=round(image),
                weights_s=round(weights_s),
                warmup_s=round(warmup_s),
                total_s=round(node + image + weights_s + warmup_s),
                in_use=(weights_source, image_source, warm) == in_use,
            )
        )
    return rows


def image_assumption(source: str) -> str:
    if source == "snapshot":
        return f"image (snapshot): already on the restored data volume, ~{IMAGE_SNAPSHOT_S:g} s to start"
    if source == "parallel-pull":
        return (
            f"image (parallel-pull): {IMAGE_COMPRESSED_BYTES / 1e9:.0f} GB compressed vLLM image, SOCI parallel pull "
            f"and unpack at {IMAGE_PARALLEL_PULL_BYTES_PER_S / 1e6:.0f} MB/s (AWS's measurement on Bottlerocket)"
        )
    return (
        f"image (pull): {IMAGE_COMPRESSED_BYTES / 1e9:.0f} GB compressed vLLM image, containerd's default pull at "
        f"{IMAGE_PULL_BYTES_PER_S / 1e6:.0f} MB/s (AWS's measurement)"
    )


def weights_assumption(source: str) -> str:
    if source == "nvme":
        return (
            f"weights (nvme): Hugging Face download at {HF_DOWNLOAD_BYTES_PER_S / 1e6:.0f} MB/s "
            f"(at most {NETWORK_SHARE:.0%} of baseline network) into the instance store, read at "
            f"{NVME_READ_BYTES_PER_S / 1e9:.0f} GB/s"
        )
    if source in ("s3", "staged"):
        cache = (
            f"; torch.compile cache restored from the bucket ({WARMUP_CACHED_COMPILE_S:.0f} s instead of "
            f"{WARMUP_COMPILE_S} s of compiling, vllm#16848)"
            if source == "staged"
            else ""
        )
        return (
            f"weights ({source}): Run:ai Model Streamer at {S3_STREAM_BYTES_PER_S / 1e9:.0f} GB/s "
            f"(at most {NETWORK_SHARE:.0%} of baseline network){cache}"
        )
    return (
        f"weights (ebs): initialized gp3 volume at {EBS_GP3_BYTES_PER_S / 1024**2:.0f} MiB/s "
        f"(at most {EBS_SHARE:.0%} of the instance's EBS bandwidth)"
    )
