"""One verification: the plan (derive), what the API server and Prometheus hold (kube, prometheus), the checks, the
report and, when asked, the calibration points."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from llm_eks.config import EnvironmentConfig
from llm_eks.config.plans import plan_workloads
from llm_eks.images.lock import ImageLock
from llm_eks.verify.checks import evaluate
from llm_eks.verify.derive import environment_plan
from llm_eks.verify.kube import Kube
from llm_eks.verify.prometheus import Prometheus, read_metrics
from llm_eks.verify.record import calibration_points
from llm_eks.verify.report import Report


@dataclass(frozen=True)
class Verification:
    report: Report
    # One calibration point per workload (what --record writes).
    points: list[dict[str, Any]]


def verify(
    config: EnvironmentConfig,
    *,
    kubeconfig: str | None,
    context: str | None,
    window: str,
    images: ImageLock | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Verification:
    """Hold `config`'s deployed cluster against its plan. ClusterError (one line) when the kubeconfig, the API
    server or Prometheus cannot be read; a planned object that is missing is a breach row, not an error."""
    kube = Kube(kubeconfig, context)  # a kubeconfig problem first: it needs no plan
    plan = environment_plan(config, plan_workloads(config), images)
    state = kube.read(plan)
    metrics = read_metrics(Prometheus(kube), plan, window)
    now = clock().astimezone(UTC).replace(microsecond=0)
    rows = evaluate(plan, state, metrics, window, now)
    stamp = now.isoformat().replace("+00:00", "Z")
    report = Report(config.name, state.context, state.server, window, stamp, tuple(rows))
    return Verification(report, calibration_points(plan, state, metrics, now, window))
