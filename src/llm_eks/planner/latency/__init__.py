"""The latency estimates of a plan: inter-token latency, time per output token and time to first token (median and
p99) and output throughput at a load (model.py), from the GPU's figures (hardware.py), the kernels a layer launches
(kernels.py) and fitted constants (fitted.py)."""

from llm_eks.planner.latency.fitted import FITTED, FIXTURE_SHA256, LatencyConstants
from llm_eks.planner.latency.hardware import (
    PEAKS,
    all_reduce_us,
    collective_us,
    efa_link,
    link,
    peak_tflops,
    pipeline_hop_us,
)
from llm_eks.planner.latency.model import LatencyEstimate, StepShape, StepTime, estimate, step_time

__all__ = [
    "FITTED",
    "FIXTURE_SHA256",
    "PEAKS",
    "LatencyConstants",
    "LatencyEstimate",
    "StepShape",
    "StepTime",
    "all_reduce_us",
    "collective_us",
    "efa_link",
    "estimate",
    "link",
    "peak_tflops",
    "pipeline_hop_us",
    "step_time",
]
