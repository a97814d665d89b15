"""The latency estimates of a plan: inter-token latency, time per output token, time to first token and output
throughput at the planned batch (model.py), from the GPU's figures (hardware.py) and fitted constants
(fitted.py)."""

from llm_eks.planner.latency.fitted import FITTED, LatencyConstants
from llm_eks.planner.latency.hardware import PEAKS, collective_us, efa_link, link, peak_tflops, pipeline_hop_us
from llm_eks.planner.latency.model import LatencyEstimate, StepShape, estimate
from llm_eks.planner.latency.moe import experts_touched

__all__ = [
    "FITTED",
    "PEAKS",
    "LatencyConstants",
    "LatencyEstimate",
    "StepShape",
    "collective_us",
    "efa_link",
    "estimate",
    "experts_touched",
    "link",
    "peak_tflops",
    "pipeline_hop_us",
]
