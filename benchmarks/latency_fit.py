"""Fitting the latency model's constants to published runs: robust least squares (soft-L1 loss, as scipy's
least_squares calls it) over the log errors of every run's decode figure and time to first token, by a small
Levenberg-Marquardt in pure Python (nothing here needs numpy or scipy, so the tests and the docs build fit the model
themselves). Deterministic: the same runs always give the same constants.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

# The constants fitted: the GPU model's LatencyConstants, or the Neuron model's (planner/neuron/latency.py).
C = TypeVar("C")

# What is fitted, with the bounds a physical reading allows (fractions of a peak; costs that cannot be negative).
BOUNDS: dict[str, tuple[float, float]] = {
    "eta_memory": (0.4, 0.95),
    "eta_compute": (0.1, 0.9),
    "step_ms": (0.0, 5.0),
    "moe_layer_us": (0.0, 500.0),
    "mla_layer_us": (0.0, 1000.0),
    "serving_ms": (0.0, 100.0),
}
# Soft-L1 scale: log errors well under 10 % count squared, larger ones about linearly (an outlier cannot dominate).
F_SCALE = 0.1
# Decimals the fitted constants are rounded to (fitted.py's defaults).
DECIMALS = 3


@dataclass(frozen=True)
class Target:
    """One measured figure: its source (the unit weights are shared by), and the model's estimate of it as a
    function of the constants."""

    source: str
    kind: str
    measured: float
    estimate: Callable[[Any], float]


def _weights(targets: Sequence[Target]) -> list[float]:
    """Every figure weighs the same: a plain (robust) least squares over runs, the default no choice of ours tilts."""
    return [1.0 for _ in targets]


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """a x = b by Gaussian elimination with partial pivoting (a small, symmetric positive definite system)."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        if abs(m[col][col]) < 1e-300:
            continue
        for r in range(col + 1, n):
            factor = m[r][col] / m[col][col]
            for k in range(col, n + 1):
                m[r][k] -= factor * m[col][k]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        if abs(m[r][r]) < 1e-300:
            continue
        x[r] = (m[r][n] - sum(m[r][k] * x[k] for k in range(r + 1, n))) / m[r][r]
    return x


def fit(
    targets: Sequence[Target],
    start: C,
    names: Sequence[str] | None = None,
    iterations: int = 200,
    bounds: Mapping[str, tuple[float, float]] = BOUNDS,
) -> C:
    """The constants `names` (default: every one `bounds` bounds) that minimize the soft-L1 loss of the weighted log
    errors of `targets`, from `start` (the others stay as in `start`), rounded to DECIMALS."""
    names = tuple(bounds) if names is None else names
    lows = [bounds[n][0] for n in names]
    spans = [bounds[n][1] - bounds[n][0] for n in names]
    weights = _weights(targets)

    def constants(u: Sequence[float]) -> C:
        values = {n: lows[i] + spans[i] * min(1.0, max(0.0, u[i])) for i, n in enumerate(names)}
        return dataclasses.replace(start, **values)  # type: ignore[type-var]

    def residuals(u: Sequence[float]) -> list[float]:
        c = constants(u)
        return [w * math.log(max(t.estimate(c), 1e-9) / t.measured) for t, w in zip(targets, weights, strict=True)]

    def loss(r: Sequence[float]) -> float:
        return sum(2 * (math.sqrt(1 + (x / F_SCALE) ** 2) - 1) for x in r) * F_SCALE**2

    u = [(getattr(start, n) - lows[i]) / spans[i] for i, n in enumerate(names)]
    r = residuals(u)
    cost = loss(r)
    damping = 1e-3
    step = 1e-5
    for _ in range(iterations):
        # Soft-L1 as iteratively reweighted least squares: each residual's weight is rho'(z).
        irls = [1 / math.sqrt(math.sqrt(1 + (x / F_SCALE) ** 2)) for x in r]
        jac = []
        for i in range(len(u)):
            shifted = list(u)
            h = step if u[i] + step <= 1 else -step
            shifted[i] += h
            jac.append([(a - b) / h for a, b in zip(residuals(shifted), r, strict=True)])
        jtj = [
            [sum(irls[k] ** 2 * jac[i][k] * jac[j][k] for k in range(len(r))) for j in range(len(u))]
            for i in range(len(u))
        ]
        jtr = [sum(irls[k] ** 2 * jac[i][k] * r[k] for k in range(len(r))) for i in range(len(u))]
        improved = False
        while damping < 1e12:
            a = [[jtj[i][j] + (damping * (jtj[i][i] + 1e-12) if i == j else 0.0) for j in range(len(u))]
                 for i in range(len(u))]  # fmt: skip
            delta = _solve(a, [-g for g in jtr])
            candidate = [min(1.0, max(0.0, x + d)) for x, d in zip(u, delta, strict=True)]
            new_r = residuals(candidate)
            new_cost = loss(new_r)
            if new_cost < cost:
                improved = cost - new_cost > 1e-12 * max(cost, 1e-12)
                u, r, cost = candidate, new_r, new_cost
                damping = max(damping / 3, 1e-9)
                break
            damping *= 4
        if not improved:
            break
    fitted = constants(u)
    return dataclasses.replace(fitted, **{n: round(getattr(fitted, n), DECIMALS) for n in names})  # type: ignore[type-var]
