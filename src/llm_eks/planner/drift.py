"""When a measured latency has drifted from the plan: one definition, used by `llm-eks verify`'s checks and by the
drift alerts the monitoring charts render (manifests/monitoring_drift.py), so the two never disagree.

The drift ratio is observed / estimate, both medians in ms, the estimate the plan's at the load observed where the
caller has one (at_load.py), else at the plan's target. Its thresholds, and why:
- inter-token latency above 1.5x (or, for verify, below 1/1.5). vLLM's ITL histogram buckets between 25 and 200 ms
  are 33-100 % wide (0.025, 0.05, 0.075, 0.1, 0.15, 0.2) and histogram_quantile interpolates linearly inside a
  bucket, so a median sitting at the plan can read up to ~25 % off from the buckets alone; 50 % is above that noise
  and below the errors worth re-planning for (a slower kernel than planned, a GPU at reduced clocks). A median far
  below the estimate is the latency model being wrong too, and a calibration point worth recording.
- time to first token above 2x. TTFT buckets are coarser still (0.1, 0.25, 0.5, 0.75, 1, 2.5 s: up to 150 % wide), so
  a median at the plan can read ~60 % high; only twice the estimate is clearly the prefill being wrong rather than
  the histogram's resolution. Only above: a lighter load than the estimate's starts first tokens sooner.

A percentile q is judged on at least 5 / (1 - q) observations, so that five of them lie above it: 10 for the median,
500 for the p99 (`min_samples`). Fewer is "insufficient data", never a pass: a p99 of 100 observations is their
slowest one, and a median of three is any of them. The alerts' 10-minute window holds thousands at any real load;
`llm-eks verify` judges windows (and load runs) that may hold fewer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class DriftRatios:
    """The largest observed / estimate ratio of a median that is not drift (see the module docstring)."""

    itl: float = 1.5
    ttft: float = 2.0


DRIFT_RATIOS = DriftRatios()
# Observations that must lie above a percentile for it to be judged (see the module docstring).
ABOVE_THE_PERCENTILE = 5


def min_samples(quantile: float) -> int:
    """The fewest observations a `quantile` (0.5, 0.99) is judged on: 5 / (1 - quantile), rounded up."""
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be between 0 and 1 (exclusive), not {quantile!r}")
    return math.ceil(round(ABOVE_THE_PERCENTILE / (1 - quantile), 6))


MEDIAN_MIN_SAMPLES = min_samples(0.5)
P99_MIN_SAMPLES = min_samples(0.99)


def drift_ratio(observed_ms: float, estimate_ms: float) -> float:
    """observed / estimate (both positive, ms)."""
    if estimate_ms <= 0 or observed_ms < 0:
        raise ValueError(
            f"drift ratio needs a positive estimate and a measurement >= 0, not {observed_ms}/{estimate_ms}"
        )
    return observed_ms / estimate_ms


def drifted(kind: str, ratio: float, ratios: DriftRatios = DRIFT_RATIOS) -> bool:
    """Whether `ratio` (drift_ratio) of a median `kind` ("itl" or "ttft") is drift: an ITL outside 1/limit..limit,
    a TTFT above its limit."""
    if kind == "itl":
        return ratio > ratios.itl or ratio < 1 / ratios.itl
    if kind == "ttft":
        return ratio > ratios.ttft
    raise ValueError(f"drift kind must be 'itl' or 'ttft', not {kind!r}")
