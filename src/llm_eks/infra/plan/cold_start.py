"""Modelled cold start: image pull, weights by source and instance bandwidth, warm-up, node launch."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from llm_eks.infra.plan.result import ColdStart

if TYPE_CHECKING:
    from llm_eks.infra.plan.sizing import Context, Fit

# Cold start. The vLLM OpenAI image is ~12 GB compressed (28.6 GB unpacked, vllm-project/vllm#22377, #27154); pull
# and unpack run at ~100 MB/s effective (layer download plus single-threaded gzip extraction by containerd).
IMAGE_COMPRESSED_BYTES = 12e9

IMAGE_PULL_BYTES_PER_S = 100e6

# nvme: a fresh node downloads the checkpoint from the Hugging Face Hub (~200 MB/s with hf-xet's parallel
# downloads, capped at 80 % of the instance's baseline network bandwidth) into the instance-store cache, then vLLM
# reads it from NVMe at ~2 GB/s.
HF_DOWNLOAD_BYTES_PER_S = 200e6

NVME_READ_BYTES_PER_S = 2e9

# s3: the Run:ai Model Streamer reads safetensors from S3 with many concurrent ranged GETs straight into GPU memory:
# ~2 GB/s, capped at 80 % of the instance's baseline network bandwidth.
S3_STREAM_BYTES_PER_S = 2e9

# ebs: weights on an initialized gp3 volume provisioned at 1,000 MiB/s (a snapshot-restored volume is lazily loaded
# and far slower unless Fast Snapshot Restore is on), capped at 90 % of the instance's dedicated EBS bandwidth.
EBS_GP3_BYTES_PER_S = 1000 * 1024**2

NETWORK_SHARE = 0.8

EBS_SHARE = 0.9

# Engine warm-up: process start, model init and tokenizer (20 s), torch.compile with an empty cache on a fresh node
# (60 s), CUDA-graph capture (20 s), plus NCCL set-up and slower compile per doubling of GPUs (10 s each) and Ray
# worker start-up per extra node (30 s). Conservative figures from vLLM start-up logs, not measurements of ours.
WARMUP_BASE_S = 20 + 60 + 20

WARMUP_PER_GPU_DOUBLING_S = 10

WARMUP_PER_EXTRA_NODE_S = 30

# Karpenter launch to a Ready node with GPUs advertised by the device plugin (EKS-optimized GPU AMI).
NODE_PROVISION_S = 90


def weights_seconds(ctx: Context, fit: Fit) -> float:
    inst, source = fit.instance, ctx.request.weights_source
    network = inst.network_gbps * 1e9 / 8 * NETWORK_SHARE
    per_node = ctx.checkpoint_bytes / fit.nodes  # each node reads its own stages
    if source == "nvme":
        # hf download fetches the whole repo on every node (in parallel), then each node reads its stages.
        return ctx.checkpoint_bytes / min(HF_DOWNLOAD_BYTES_PER_S, network) + per_node / NVME_READ_BYTES_PER_S
    if source == "s3":
        return per_node / min(S3_STREAM_BYTES_PER_S, network)
    ebs = inst.ebs_bandwidth_mbps * 1e6 / 8 * EBS_SHARE
    return per_node / min(EBS_GP3_BYTES_PER_S, ebs)


def estimate_cold_start(ctx: Context, fit: Fit) -> ColdStart:
    pull = IMAGE_COMPRESSED_BYTES / IMAGE_PULL_BYTES_PER_S
    weights = weights_seconds(ctx, fit)
    warmup = WARMUP_BASE_S + WARMUP_PER_GPU_DOUBLING_S * math.log2(fit.gpus) + WARMUP_PER_EXTRA_NODE_S * (fit.nodes - 1)
    total = pull + weights + warmup
    return ColdStart(
        image_pull_s=round(pull),
        weights_s=round(weights),
        warmup_s=round(warmup),
        total_s=round(total),
        startup_s=round(weights + warmup),
        node_provision_s=NODE_PROVISION_S,
        scale_out_s=round(NODE_PROVISION_S + total),
    )


def weights_assumption(source: str) -> str:
    if source == "nvme":
        return (
            f"weights (nvme): Hugging Face download at {HF_DOWNLOAD_BYTES_PER_S / 1e6:.0f} MB/s "
            f"(at most {NETWORK_SHARE:.0%} of baseline network) into the instance store, read at "
            f"{NVME_READ_BYTES_PER_S / 1e9:.0f} GB/s"
        )
    if source == "s3":
        return (
            f"weights (s3): Run:ai Model Streamer at {S3_STREAM_BYTES_PER_S / 1e9:.0f} GB/s "
            f"(at most {NETWORK_SHARE:.0%} of baseline network)"
        )
    return (
        f"weights (ebs): initialized gp3 volume at {EBS_GP3_BYTES_PER_S / 1024**2:.0f} MiB/s "
        f"(at most {EBS_SHARE:.0%} of the instance's EBS bandwidth)"
    )
