"""Fit the latency model's constants (src/llm_eks/planner/latency/fitted.py) to the calibration part of the
published runs, and print them with the error table they give. Robust least squares (scipy's soft-L1 loss) over
the log errors of every run's ITL or TPOT and, at the same weight, of every measured TTFT; the held-out quarter and
the runs marked unexplained are left out of the fit.

scipy is not a dependency of llm-eks (nothing else needs it); run this in a throwaway environment:

    python -m venv /tmp/fit && /tmp/fit/bin/pip install scipy numpy
    PYTHONPATH=src:.venv/lib/python3.11/site-packages /tmp/fit/bin/python -m benchmarks.calibrate_latency
"""

from __future__ import annotations

import dataclasses
import math
import sys

from benchmarks.latency_error_table import estimate_run as _estimate
from benchmarks.latency_error_table import held_out, load, measured
from llm_eks.planner.latency import FITTED, LatencyConstants

# What is fitted, with the bounds a physical reading allows (fractions of a peak; costs that cannot be negative).
BOUNDS = {
    "eta_memory": (0.4, 0.95),
    "eta_compute": (0.1, 0.9),
    "step_ms": (0.0, 5.0),
    "layer_us": (0.0, 100.0),
    "moe_layer_us": (0.0, 300.0),
    "mla_layer_us": (0.0, 500.0),
    "tp_layer_us": (0.0, 200.0),
    "serving_ms": (0.0, 100.0),
}


def main() -> int:
    from scipy.optimize import least_squares  # type: ignore[import-not-found]

    runs = [r for r in load() if not held_out(r["id"]) and "unexplained" not in r["llm_eks"]]
    names = list(BOUNDS)

    def residuals(x: list[float]) -> list[float]:
        constants = dataclasses.replace(FITTED, **dict(zip(names, (float(v) for v in x), strict=True)))
        out = []
        for run in runs:
            metric, value = measured(run)
            est = _estimate(run, constants)
            out.append(math.log((est.itl_ms if metric == "itl" else est.tpot_ms) / value))
            ttft = (run.get("ttft_ms") or {}).get("median")
            if ttft:
                out.append(math.log(est.ttft_ms / ttft))
        return out

    result = least_squares(
        residuals,
        [getattr(FITTED, n) for n in names],
        bounds=([BOUNDS[n][0] for n in names], [BOUNDS[n][1] for n in names]),
        loss="soft_l1",
        f_scale=0.1,
    )
    fitted = LatencyConstants(**{n: round(float(v), 3) for n, v in zip(names, result.x, strict=True)})
    print(f"{len(runs)} calibration runs; fitted constants:")
    print(fitted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
