"""Inter-token latency estimate of one decode step."""

from __future__ import annotations

# Inter-token latency estimate: a decode step reads this GPU's weights plus the KV cache of every running sequence,
# at 75 % of datasheet bandwidth, plus two all-reduces per layer when TP > 1 (~10 us over NVLink/NVSwitch, ~30 us
# over PCIe) and ~0.2 ms per pipeline hand-off.
ACHIEVABLE_BANDWIDTH = 0.75

ALL_REDUCE_US_NVLINK = 10

ALL_REDUCE_US_PCIE = 30

PIPELINE_HOP_MS = 0.2
