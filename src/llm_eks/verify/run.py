"""One verification: the plan (derive), what the API server and Prometheus hold (kube, prometheus), the checks, the
report and, when asked, the calibration points; with `load`, the benchmark Jobs run first (load) and the window
covers them."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from llm_eks.config import EnvironmentConfig
from llm_eks.config.plans import plan_workloads
from llm_eks.error_codes import E505
from llm_eks.images.lock import ImageLock
from llm_eks.planner import Plan
from llm_eks.planner.at_load import LoadEstimate, ObservedLoad, estimate_at_load
from llm_eks.verify.checks import evaluate
from llm_eks.verify.checks_load import load_rows
from llm_eks.verify.derive import environment_plan, load_specs
from llm_eks.verify.kube import ClusterError, Kube
from llm_eks.verify.load import run_loads
from llm_eks.verify.observed import ClusterState, WorkloadMetrics, status
from llm_eks.verify.prometheus import Prometheus, read_metrics
from llm_eks.verify.record import calibration_points
from llm_eks.verify.report import Report
from llm_eks.verify.rows import Row
from llm_eks.verify.wait import wait_ready


@dataclass(frozen=True)
class LoadOptions:
    """`--load`: run the benchmark Jobs first and judge their results too."""

    say: Callable[[str], None]
    sleep: Callable[[float], None] = time.sleep
    # Only these workloads (object names); None: every vLLM workload with a Ready replica.
    only: Collection[str] | None = None


@dataclass(frozen=True)
class Verification:
    report: Report
    # One calibration point per workload (what --record writes).
    points: list[dict[str, Any]]


def ready_replicas(state: ClusterState) -> dict[str, int]:
    """Ready replicas (LeaderWorkerSet: groups) of each workload's owner, by object name."""
    return {
        name: int(status(objs.owner).get("readyReplicas") or 0) if objs.owner is not None else 0
        for name, objs in state.workloads.items()
    }


def observed_estimate(plan: Plan, m: WorkloadMetrics) -> LoadEstimate | None:
    """The planner's estimate at the load the window held; None without the running sequences and request sizes (no
    request finished in it). verify reads the sequences per engine (a server's, or each data-parallel rank's); the
    planner takes a replica's, its DP ranks' together."""
    if m.running_mean is None or m.mean_input_tokens is None or m.mean_output_tokens is None:
        return None
    running = m.running_mean * plan.data_parallel_size
    return estimate_at_load(plan, ObservedLoad(running, m.mean_input_tokens, m.mean_output_tokens))


def run_load(
    config: EnvironmentConfig,
    kube: Kube,
    plans: Sequence[Plan],
    images: ImageLock | None,
    load: LoadOptions,
) -> tuple[list[Row], float]:
    """Run the load Jobs of `config`'s vLLM workloads (`load.only`) with a Ready replica: their rows and the longest
    run's seconds. ClusterError when there is none to run."""
    specs = load_specs(
        config, plans, ready_replicas(kube.read(environment_plan(config, plans, images))), images, load.only
    )
    if not specs:
        which = ", ".join(sorted(load.only)) if load.only is not None else "vLLM workload"
        raise ClusterError(E505, f"load: no {which} with a Ready replica to send load to")
    results = run_loads(kube, specs, say=load.say, sleep=load.sleep)
    rows = [row for spec in specs for row in load_rows(spec, results[spec.workload])]
    return rows, max(r.seconds for r in results.values())


def wait_until_ready(
    config: EnvironmentConfig,
    *,
    kubeconfig: str | None,
    context: str | None,
    images: ImageLock | None,
    seconds: float,
    on_look: Callable[[list[str]], None],
) -> list[str]:
    """--wait-ready: wait until `config`'s workloads have settled; what is still starting when `seconds` run out."""
    kube = Kube(kubeconfig, context)
    return wait_ready(kube, environment_plan(config, plan_workloads(config), images), seconds, on_look=on_look)


def verify(
    config: EnvironmentConfig,
    *,
    kubeconfig: str | None,
    context: str | None,
    window: str | None,
    images: ImageLock | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    load: LoadOptions | None = None,
) -> Verification:
    """Hold `config`'s deployed cluster against its plan over `window` (None: 1h, or with `load` the minutes the
    load ran). ClusterError (one line) when the kubeconfig, the API server or Prometheus cannot be read; a planned
    object that is missing is a breach row, not an error."""
    kube = Kube(kubeconfig, context)  # a kubeconfig problem first: it needs no plan
    plans = plan_workloads(config)
    plan = environment_plan(config, plans, images)
    loaded: list[Row] = []
    if load is not None:
        loaded, seconds = run_load(config, kube, plans, images, load)
        window = window or f"{max(1, math.ceil(seconds / 60))}m"
    window = window or "1h"
    state = kube.read(plan)
    metrics = read_metrics(Prometheus(kube), plan, window)
    now = clock().astimezone(UTC).replace(microsecond=0)
    at_load = {w.name: observed_estimate(p, metrics[w.name]) for w, p in zip(plan.workloads, plans, strict=True)}
    rows = evaluate(plan, state, metrics, window, now, at_load) + loaded
    stamp = now.isoformat().replace("+00:00", "Z")
    report = Report(config.name, state.context, state.server, window, stamp, tuple(rows))
    return Verification(report, calibration_points(plan, state, metrics, now, window))
