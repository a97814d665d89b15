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
from llm_eks.planner import Plan
from llm_eks.verify.at_load import LoadEstimate, estimate_at_load
from llm_eks.verify.checks import evaluate
from llm_eks.verify.derive import environment_plan
from llm_eks.verify.kube import Kube
from llm_eks.verify.observed import WorkloadMetrics
from llm_eks.verify.prometheus import Prometheus, read_metrics
from llm_eks.verify.record import calibration_points
from llm_eks.verify.report import Report


@dataclass(frozen=True)
class Verification:
    report: Report
    # One calibration point per workload (what --record writes).
    points: list[dict[str, Any]]


def observed_estimate(plan: Plan, m: WorkloadMetrics) -> LoadEstimate | None:
    """The planner's estimate at the load the window held; None without the running sequences and request sizes (no
    request finished in it)."""
    if m.running_mean is None or m.mean_input_tokens is None or m.mean_output_tokens is None:
        return None
    return estimate_at_load(plan, m.running_mean, m.mean_input_tokens, m.mean_output_tokens)


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
    plans = plan_workloads(config)
    plan = environment_plan(config, plans, images)
    state = kube.read(plan)
    metrics = read_metrics(Prometheus(kube), plan, window)
    now = clock().astimezone(UTC).replace(microsecond=0)
    at_load = {w.name: observed_estimate(p, metrics[w.name]) for w, p in zip(plan.workloads, plans, strict=True)}
    rows = evaluate(plan, state, metrics, window, now, at_load)
    stamp = now.isoformat().replace("+00:00", "Z")
    report = Report(config.name, state.context, state.server, window, stamp, tuple(rows))
    return Verification(report, calibration_points(plan, state, metrics, now, window))
