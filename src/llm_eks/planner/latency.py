"""Inter-token latency estimate of one decode step: the bytes a GPU reads, at achievable bandwidth, plus
communication."""

from __future__ import annotations

from llm_eks.catalog.accelerators import InstanceType
from llm_eks.catalog.models import ModelSpec

# A decode step reads this GPU's weights (for MoE: the shared part plus the experts the batch routes to) plus the KV
# cache of every running sequence (sliding and chunked layers only their window), at 75 % of datasheet bandwidth,
# plus two all-reduces per layer when TP > 1 (~10 us over NVLink/NVSwitch, ~30 us over PCIe) and ~0.2 ms per
# pipeline hand-off. Estimates, not measurements.
ACHIEVABLE_BANDWIDTH = 0.75
ALL_REDUCE_US_NVLINK = 10
ALL_REDUCE_US_PCIE = 30
PIPELINE_HOP_MS = 0.2


def experts_touched(spec: ModelSpec, batch: int) -> float:
    """Expected fraction of a layer's routed experts a decode batch of `batch` sequences touches (each picks
    experts_per_token of num_experts, uniformly): 1 - (1 - k/E)^batch. 1 for a dense model."""
    if not spec.is_moe:
        return 1.0
    return 1.0 - (1.0 - spec.experts_per_token / spec.num_experts) ** max(batch, 1)


def step_ms(inst: InstanceType, tp: int, pp: int, stage_layers: int, read_bytes: float) -> float:
    """One decode step: `read_bytes` per GPU per stage at achievable bandwidth, TP all-reduces, PP hand-offs."""
    stage_ms = read_bytes / (inst.memory_bandwidth_gbps * 1e9 * ACHIEVABLE_BANDWIDTH) * 1000
    if tp > 1:
        hop_us = ALL_REDUCE_US_NVLINK if "NVSwitch" in inst.interconnect else ALL_REDUCE_US_PCIE
        stage_ms += 2 * stage_layers * hop_us / 1000
    return round(stage_ms * pp + (pp - 1) * PIPELINE_HOP_MS, 1)
