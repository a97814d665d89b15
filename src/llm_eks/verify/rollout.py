"""Moving a workload's traffic to its next version (`llm-eks canary`) and back (`llm-eks rollback`).

The split is a pool share (manifests/gateway/routes.py, `traffic_split`): the next version's pods are in the current
version's InferencePool, so its share of the requests is its share of the pool's replicas. Both commands set the
share through that one function: they scale the next version (its `scale` subresource) to the replicas that give it
the asked share beside the current version's replicas now, and wait until those replicas are ready. The smallest
step is one pod of the pool, so a small share beside few current replicas is rounded up (`shares` says so before a
walk). `canary` raises the share through `canary.steps`, holds each step `hold_minutes`, then verifies the
environment over that window; a drift or breach of either version, or of their route, sets it back to 0 and stops.
The replicas a command sets stay until a deploy applies the next version's Deployment again, so the config's
`canary.weight` is the share a deploy restores (docs/how-to/promote.md).

A step passes only on evidence: every row of the next version ok over the hold (a row with too few samples, or none,
fails the step when its hold ends), and no drift or breach of either version. Any exception or signal (SIGINT,
SIGTERM) once the walk has begun sets the weight back to 0 before the command ends, and says so; each step is a line
of the journal (llm_eks.verify.journal).

Scaling needs the route's `<route>-rollout` Role (Kubernetes group llm-eks-rollout: get both versions, patch only the
next version's scale); the readiness and the verification read what `llm-eks verify` reads (group llm-eks-verify).
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import FrameType
from typing import Any

from llm_eks.config import EnvironmentConfig
from llm_eks.config.canary import canary_key
from llm_eks.config.plans import plan_workloads
from llm_eks.error_codes import E506
from llm_eks.errors import CodedError, fail
from llm_eks.infra.workloads import VllmWorkload, build_workloads
from llm_eks.manifests.gateway import GatewayProps, ModelRoute, traffic_split
from llm_eks.manifests.gateway.routes import TrafficSplit
from llm_eks.manifests.verifier import reads
from llm_eks.verify.journal import Journal, rows_of
from llm_eks.verify.kube import ClusterError, Kube
from llm_eks.verify.report import Report
from llm_eks.verify.rows import FAILING, Row


@dataclass(frozen=True)
class Pair:
    """A workload and its next version, as the environment's gateway routes them."""

    environment: str
    key: str
    gateway: GatewayProps
    # The current version's route, whose pool holds both versions' pods.
    route: ModelRoute
    # The next version's workload object (a Deployment, or a LeaderWorkerSet across nodes).
    canary_name: str
    canary_namespace: str
    canary_owner: reads.Read
    steps: tuple[int, ...]
    hold_minutes: int
    # The next version's replicas at any share above 0 (canary.replicas).
    canary_min: int = 1
    canary_max: int = 1
    # How long its new replicas may take to become ready (a cold start on a new node, with a margin).
    start_seconds: int = 900

    @property
    def split(self) -> TrafficSplit:
        return traffic_split(self.route)

    @property
    def workloads(self) -> tuple[str, str]:
        """The object names of both versions (verify's WORKLOAD column)."""
        return self.route.name, self.canary_name

    def _path(self, name: str, subresource: str = "") -> str:
        path = self.canary_owner.path(name, self.canary_namespace)
        return f"{path}/{subresource}" if subresource else path


def pair(config: EnvironmentConfig, key: str) -> Pair:
    """The workload `key` of `config.workloads` and its next version; a one-line error when it has none."""
    with_canary = [k for k, w in config.workloads.items() if w.canary is not None]
    if key not in with_canary:
        where = f"environments.{config.name}.workloads"
        raise fail(
            E506, "--workload", key, f"must be a workload of {where} with a canary: {', '.join(with_canary) or 'none'}"
        )
    plans = plan_workloads(config)
    workloads = build_workloads(config, plans)
    gateway = workloads[0].gateway
    assert gateway is not None  # a canary needs the gateway (config validation)
    keys = [s.key for s in config.served]
    by_key = dict(zip(keys, gateway.routes, strict=True))
    canary = config.workloads[key].canary
    assert canary is not None
    nxt = by_key[canary_key(key)]
    index = keys.index(canary_key(key))
    served = workloads[index]
    assert isinstance(served, VllmWorkload)  # a canary is for engine vllm (config validation)
    replicas = config.served[index].config.replicas
    return Pair(
        environment=config.name,
        key=key,
        gateway=gateway,
        route=by_key[key],
        canary_name=nxt.name,
        canary_namespace=nxt.namespace,
        canary_owner=reads.LEADER_WORKER_SETS if served.vllm.nodes_per_replica > 1 else reads.DEPLOYMENTS,
        steps=canary.steps,
        hold_minutes=canary.hold_minutes,
        canary_min=replicas.min,
        canary_max=replicas.max,
        start_seconds=math.ceil(plans[index].cold_start.scale_out_s * 1.5) + 60,
    )


def _replicas(kube: Kube, p: Pair, name: str, field: str = "spec") -> int:
    owner = kube.get(p._path(name))
    if owner is None:
        raise ClusterError(
            E506,
            f"no {p.canary_owner.resource} {p.canary_namespace}/{name}: deploy the environment with the canary first",
        )
    if field == "spec":
        return int((owner.get("spec") or {}).get("replicas") or 0)
    return int((owner.get("status") or {}).get("readyReplicas") or 0)


def live_weight(kube: Kube, p: Pair) -> int:
    """The next version's share (percent) of the pool's replicas now."""
    return TrafficSplit.share(_replicas(kube, p, p.canary_name), _replicas(kube, p, p.route.name))


def shares(kube: Kube, p: Pair, steps: Sequence[int], say: Callable[[str], None]) -> tuple[int, ...]:
    """The shares a walk through `steps` reaches beside the current version's replicas now: the smallest step is one
    pod of the pool, so an asked share is rounded up to the next whole pod (each rounding said in one line), and
    steps that come to the same replicas as the one before are dropped."""
    current = _replicas(kube, p, p.route.name)
    reached: list[int] = []
    for asked in steps:
        n = TrafficSplit.next_replicas(asked, current, p.canary_min, p.canary_max)
        share = TrafficSplit.share(n, current)
        if share != asked:
            say(
                f"{p.key}: step {asked}% is {share}% here: the smallest step is one pod of the pool ({n} of the next "
                f"version beside {current} of the current one)"
            )
        if share not in reached:
            reached.append(share)
    return tuple(reached)


def set_weight(
    kube: Kube, p: Pair, weight: int, *, sleep: Callable[[float], None] = time.sleep, poll: float = 5.0
) -> None:
    """The one place a share is set: scale the next version to the replicas that give it `weight` percent of the pool
    beside the current version's replicas now (`traffic_split`), then wait until they are ready (new replicas may need
    a node and a cold start; ClusterError past `start_seconds`). 0 is instant: the picker drops a terminating pod."""
    n = TrafficSplit.next_replicas(weight, _replicas(kube, p, p.route.name), p.canary_min, p.canary_max)
    kube.patch(p._path(p.canary_name, "scale"), {"spec": {"replicas": n}})
    waited = 0.0
    while _replicas(kube, p, p.canary_name, "status") < n:
        if waited >= p.start_seconds:
            raise ClusterError(
                E506, f"{p.canary_namespace}/{p.canary_name}: {n} replica(s) asked, not ready after {p.start_seconds} s"
            )
        sleep(poll)
        waited += poll


def ready_replicas(kube: Kube, p: Pair) -> int:
    """The pool's ready replicas of the current version (a walk starts only while the pool serves)."""
    return _replicas(kube, p, p.route.name, "status")


def failing(report: Report, p: Pair) -> list[Row]:
    """The rows of either version that drift or breach (their pods, args, KV cache, latency, route, start-up)."""
    return [row for row in report.rows if row.workload in p.workloads and row.verdict in FAILING]


def unjudged(report: Report, p: Pair) -> list[Row]:
    """The next version's rows that are neither ok nor failing: too few samples (no traffic reached it over the
    hold) or nothing to compare. A step does not pass on them."""
    return [row for row in report.rows if row.workload == p.canary_name and row.verdict not in {"ok", *FAILING}]


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived while a command that moves traffic ran."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


@contextmanager
def interrupts() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise Interrupted (in the main thread, where Python runs handlers), so
    the command can set the weight back before it ends; the previous handlers come back after."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _one_line(err: BaseException) -> str:
    # The progress line carries the sentence; the command's error line that follows carries the code.
    text = err.message if isinstance(err, CodedError) else str(err)
    return " ".join(text.split()) or type(err).__name__


def _back_to_zero(kube: Kube, p: Pair, say: Callable[[str], None], why: str) -> int | None:
    """Set the next version's weight to 0 (a second signal meanwhile retries once); 0, or None when it failed."""
    for _ in range(2):
        try:
            set_weight(kube, p, 0)
        except Interrupted:
            continue
        except Exception as err:
            say(
                f"{p.key}: {why}; the next version could NOT be set back to 0% ({_one_line(err)}): run llm-eks "
                f"rollback --env {p.environment} --workload {p.key}"
            )
            return None
        say(f"{p.key}: {why}; the next version is back at 0%")
        return 0
    say(f"{p.key}: {why}; interrupted again while setting the next version back to 0%: run llm-eks rollback")
    return None


def _row_line(row: Row) -> str:
    detail = f" ({row.detail})" if row.detail else ""
    return f"  {row.check} {row.workload}: {row.verdict}: {row.observed}{detail}"


def canary(
    kube: Kube,
    p: Pair,
    *,
    check: Callable[[str], Report],
    sleep: Callable[[float], None],
    say: Callable[[str], None],
    steps: Sequence[int] | None = None,
    journal: Journal | None = None,
    load: Callable[[], tuple[list[Row], float]] | None = None,
) -> int:
    """Walk the next version through `steps` (default: the config's): 0 when every step held, 1 when a
    step failed or could not be judged and the weight went back to 0. `check(window)` verifies the environment over
    that window. `load()` (--load) sends the next version the benchmark's load during each hold and returns its rows
    and seconds; the hold lasts at least as long. An exception or Interrupted in a step sets the weight back to 0, is
    journaled, and propagates."""
    journal = journal or Journal(None, "canary", p.environment)
    ready = ready_replicas(kube, p)
    if ready < 1:
        say(f"{p.canary_namespace}/{p.route.name} has no ready replica: the pool must serve before a share moves")
        return 1
    start = live_weight(kube, p)
    step: dict[str, Any] = {}
    try:
        for number, weight in enumerate([w for w in (steps or p.steps) if w > start], 1):
            step = {"workload": p.key, "step": number, "weight": weight, "window": f"{p.hold_minutes}m"}
            report = _hold(kube, p, step, check=check, sleep=sleep, say=say, load=load)
            judged = rows_of(report.to_dict())
            bad, thin = failing(report, p), unjudged(report, p)
            if bad or thin:
                if bad:
                    why = f"step {weight}% failed"
                else:
                    why = (
                        f"step {weight}% held {p.hold_minutes} min without enough evidence on the next version (run "
                        "with --load to send it traffic, or hold longer: canary.hold_minutes)"
                    )
                after = _back_to_zero(kube, p, say, why)
                for row in bad or thin:
                    say(_row_line(row))
                outcome = "failed" if bad else "insufficient data"
                journal.write("step", **step, outcome=outcome, weight_after=after, message=why, **judged)
                return 1
            judged_ok = sum(1 for row in report.rows if row.workload == p.canary_name)
            say(f"{p.key}: {weight}% held: the next version's {judged_ok} checks ok over {step['window']}")
            journal.write("step", **step, outcome="held", weight_after=weight, message="held", **judged)
            step = {}
    except BaseException as err:
        # Anywhere in the walk (a step's patch, hold or check, or between steps): back to 0, said and journaled.
        reason = "interrupted by SIGINT" if isinstance(err, KeyboardInterrupt) else _one_line(err)
        why = f"{reason} at step {step['weight']}%" if step else f"{reason} between steps"
        after = _back_to_zero(kube, p, say, why)
        outcome = "interrupted" if isinstance(err, Interrupted | KeyboardInterrupt) else "error"
        journal.write("step", **step, outcome=outcome, weight_after=after, message=why)
        raise
    say(
        f"{p.key}: the next version holds its last share of the pool. Promote it in cdk.json (docs/how-to/promote.md): "
        "move the canary's changes into the workload and deploy (the current version rolls to them), then remove "
        "canary and deploy"
    )
    return 0


def _hold(
    kube: Kube,
    p: Pair,
    step: dict[str, Any],
    *,
    check: Callable[[str], Report],
    sleep: Callable[[float], None],
    say: Callable[[str], None],
    load: Callable[[], tuple[list[Row], float]] | None,
) -> Report:
    """One step: the weight set, the hold (with the load run during it, when given), the verification over it."""
    weight = step["weight"]
    set_weight(kube, p, weight)
    hold = p.hold_minutes * 60
    loaded: list[Row] = []
    if load is None:
        say(f"{p.key}: next version at {weight}%; holding {p.hold_minutes} min")
        sleep(hold)
    else:
        say(f"{p.key}: next version at {weight}%; sending it the load, holding at least {p.hold_minutes} min")
        loaded, seconds = load()
        sleep(max(0.0, hold - seconds))
        step["window"] = f"{max(p.hold_minutes, math.ceil(seconds / 60))}m"
    report = check(step["window"])
    return replace(report, rows=(*report.rows, *loaded))


def rollback(kube: Kube, p: Pair, *, say: Callable[[str], None]) -> int:
    """Every request back to the current version: the next version scaled to 0 (the picker drops its pods at
    once)."""
    was = live_weight(kube, p)
    set_weight(kube, p, 0)
    say(
        f"{p.key}: the next version is at 0% (was {was}%); the current version serves every request. Set "
        "canary.weight 0 in cdk.json so a deploy keeps it there"
    )
    return 0
