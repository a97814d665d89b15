"""Moving a workload's traffic to its next version (`llm-eks canary`) and back (`llm-eks rollback`).

The current version's HTTPRoute is the one switch: both commands JSON-merge-patch its `spec.rules` with the rules
the gateway chart renders (`http_route`) at the new weight, so a patched route is exactly what a deploy at that
`canary.weight` would apply. `canary` raises the weight through `canary.steps`, holds each step `hold_minutes`,
then verifies the environment over that window; a drift or breach of either version, or of their route, sets the
weight back to 0 and stops. The weight a command sets stays until a deploy changes that HTTPRoute's manifest, so
the config's `canary.weight` is the weight a deploy restores (docs/how-to/promote.md).

A step passes only on evidence: every row of the next version ok over the hold (a row with too few samples, or none,
fails the step when its hold ends), and no drift or breach of either version. Any exception or signal (SIGINT,
SIGTERM) once the walk has begun sets the weight back to 0 before the command ends, and says so; each step is a line
of the journal (llm_eks.verify.journal).

The patch needs the route's `<route>-rollout` Role (Kubernetes group llm-eks-rollout); the readiness and the
verification read what `llm-eks verify` reads (group llm-eks-verify).
"""

from __future__ import annotations

import math
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import FrameType
from typing import Any

from llm_eks.config import EnvironmentConfig
from llm_eks.config.canary import canary_key
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import fail
from llm_eks.infra.workloads import VllmWorkload, build_workloads
from llm_eks.manifests.gateway import GatewayProps, ModelRoute
from llm_eks.manifests.gateway.pool import http_route
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
    # The current version's route, whose rules carry both pools.
    route: ModelRoute
    # The next version's workload object (a Deployment, or a LeaderWorkerSet across nodes).
    canary_name: str
    canary_namespace: str
    canary_owner: reads.Read
    steps: tuple[int, ...]
    hold_minutes: int

    @property
    def route_path(self) -> str:
        return reads.HTTP_ROUTES.path(self.route.name, self.route.namespace)

    @property
    def workloads(self) -> tuple[str, str]:
        """The object names of both versions (verify's WORKLOAD column)."""
        return self.route.name, self.canary_name

    def rules(self, weight: int) -> list[dict[str, Any]]:
        """The route's rules with the next version at `weight` percent, as the gateway chart renders them."""
        assert self.route.next_version is not None
        at = replace(self.route, next_version=replace(self.route.next_version, weight=weight))
        rules: list[dict[str, Any]] = http_route(self.gateway, at)["spec"]["rules"]
        return rules


def pair(config: EnvironmentConfig, key: str) -> Pair:
    """The workload `key` of `config.workloads` and its next version; a one-line error when it has none."""
    with_canary = [k for k, w in config.workloads.items() if w.canary is not None]
    if key not in with_canary:
        where = f"environments.{config.name}.workloads"
        raise fail(
            "--workload", key, f"must be a workload of {where} with a canary: {', '.join(with_canary) or 'none'}"
        )
    workloads = build_workloads(config, plan_workloads(config))
    gateway = workloads[0].gateway
    assert gateway is not None  # a canary needs the gateway (config validation)
    by_key = dict(zip([s.key for s in config.served], gateway.routes, strict=True))
    canary = config.workloads[key].canary
    assert canary is not None
    nxt = by_key[canary_key(key)]
    served = next(w for w in workloads if w.key == canary_key(key))
    assert isinstance(served, VllmWorkload)  # a canary is for engine vllm (config validation)
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
    )


def live_weight(kube: Kube, p: Pair) -> int:
    """The next version's share (percent) of the route's requests now."""
    route = kube.get(p.route_path)
    if route is None:
        raise ClusterError(f"no HTTPRoute {p.route.namespace}/{p.route.name}: deploy the environment first")
    refs = [ref for rule in (route.get("spec") or {}).get("rules") or () for ref in rule.get("backendRefs") or ()]
    weights = {(ref.get("namespace") or p.route.namespace, ref.get("name")): int(ref.get("weight", 1)) for ref in refs}
    total = sum(weights.values())
    share = weights.get((p.canary_namespace, p.canary_name), 0)
    return round(100 * share / total) if total else 0


def set_weight(kube: Kube, p: Pair, weight: int) -> None:
    """The one place a weight is set: the next version's share of the route's requests, in percent."""
    kube.patch(p.route_path, {"spec": {"rules": p.rules(weight)}})


def ready_replicas(kube: Kube, p: Pair) -> int:
    owner = kube.get(p.canary_owner.path(p.canary_name, p.canary_namespace))
    if owner is None:
        raise ClusterError(
            f"no {p.canary_owner.resource} {p.canary_namespace}/{p.canary_name}: deploy the environment with the "
            "canary first"
        )
    return int((owner.get("status") or {}).get("readyReplicas") or 0)


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
    return " ".join(str(err).split()) or type(err).__name__


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
    """Walk the next version through `steps` (default: the config's): 0 when it takes all of the traffic, 1 when a
    step failed or could not be judged and the weight went back to 0. `check(window)` verifies the environment over
    that window. `load()` (--load) sends the next version the benchmark's load during each hold and returns its rows
    and seconds; the hold lasts at least as long. An exception or Interrupted in a step sets the weight back to 0, is
    journaled, and propagates."""
    journal = journal or Journal(None, "canary", p.environment)
    ready = ready_replicas(kube, p)
    if ready < 1:
        say(
            f"{p.canary_namespace}/{p.canary_name} has no ready replica: the route sends it nothing until it serves "
            "(Istio 1.30.3 fails a rule whose picker's pool has no ready pod, istio/istio#61594)"
        )
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
        f"{p.key}: the next version serves every request. Promote it in cdk.json (docs/how-to/promote.md): set "
        "canary.weight 100 and deploy, move the canary's changes into the workload and deploy, then remove canary "
        "and deploy"
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
    """Every request back to the current version (the next version keeps running at weight 0)."""
    was = live_weight(kube, p)
    set_weight(kube, p, 0)
    say(
        f"{p.key}: the next version is at 0% (was {was}%); the current version serves every request. Set "
        "canary.weight 0 in cdk.json so a deploy keeps it there"
    )
    return 0
