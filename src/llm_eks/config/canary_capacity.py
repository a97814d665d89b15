"""The capacity a canary adds while both versions serve: what the overlap costs (`llm-eks plan` prints it) and the
refusal of a next version that would not fit the current version's `accelerator_limit`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llm_eks.config.capacity import nodes_at_max, replica_price, reservation, workload_nodes
from llm_eks.config.environment import EnvironmentConfig, ServedWorkload
from llm_eks.error_codes import E133
from llm_eks.errors import fail
from llm_eks.planner import Plan


@dataclass(frozen=True)
class CanaryOverlap:
    """What a next version adds beside its current version, at its replicas.min and replicas.max."""

    key: str
    current: str
    # Accelerators its nodes hold (whole nodes of its planned instance type).
    accelerators_min: int
    accelerators_max: int
    # $ per hour of its replicas (on-demand, or the reservation's price).
    usd_per_hour_min: float
    usd_per_hour_max: float

    def to_dict(self) -> dict[str, object]:
        return {
            "current": self.current,
            "accelerators": [self.accelerators_min, self.accelerators_max],
            "usd_per_hour": [self.usd_per_hour_min, self.usd_per_hour_max],
        }

    def line(self) -> str:
        """`llm-eks plan`'s and synth's line: the extra accelerators and $/h (at replicas.min-replicas.max)."""
        gpus = _span(str(self.accelerators_min), str(self.accelerators_max))
        usd = _span(f"{self.usd_per_hour_min:.2f}", f"{self.usd_per_hour_max:.2f}")
        return (
            f"canary {self.key} (next version of {self.current}): +{gpus} accelerator"
            f"{'' if gpus == '1' else 's'}, +${usd}/h while both versions serve"
        )


def _span(low: str, high: str) -> str:
    return low if low == high else f"{low}-{high}"


def _accelerators(s: ServedWorkload, plan: Plan, replicas: int) -> int:
    """Accelerators of the whole nodes `replicas` replicas of `s` take (its compile-cache writer included)."""
    return workload_nodes(s.config, plan, replicas) * plan.instance.accelerators


def canary_overlap(config: EnvironmentConfig, s: ServedWorkload, plan: Plan) -> CanaryOverlap:
    """What the next version `s` (planned as `plan`) adds beside its current version."""
    assert s.canary_of is not None
    price = replica_price(s, plan, reservation(config, plan))
    r = s.config.replicas
    return CanaryOverlap(
        key=s.key or "",
        current=s.canary_of,
        accelerators_min=_accelerators(s, plan, r.min),
        accelerators_max=_accelerators(s, plan, r.max),
        usd_per_hour_min=round(price * r.min, 4),
        usd_per_hour_max=round(price * r.max, 4),
    )


def canary_overlaps(config: EnvironmentConfig, plans: Sequence[Plan]) -> tuple[CanaryOverlap, ...]:
    """Every next version's extra capacity, `plans` in `config.served` order."""
    served = zip(config.served, plans, strict=True)
    return tuple(canary_overlap(config, s, plan) for s, plan in served if s.canary_of is not None)


def check_canary_capacity(config: EnvironmentConfig, plans: Sequence[Plan]) -> None:
    """A current version's `accelerator_limit` bounds both versions: the next version at its replicas.max beside
    the current one at its replicas.max must fit, or the config is refused (one line, naming the canary's
    replicas)."""
    by_key = {s.key: (s, plan) for s, plan in zip(config.served, plans, strict=True)}
    for s, plan in zip(config.served, plans, strict=True):
        if s.canary_of is None:
            continue
        current, current_plan = by_key[s.canary_of]
        limit = current.config.accelerator_limit
        if limit is None:
            continue
        held = nodes_at_max(current.config, current_plan) * current_plan.instance.accelerators
        extra = _accelerators(s, plan, s.config.replicas.max)
        if held + extra > limit:
            raise fail(
                E133,
                f"{s.path}.replicas.max",
                s.config.replicas.max,
                f"needs {extra} accelerators ({plan.instance.instance_type}) beside the current version's {held}, "
                f"above {current.path}.accelerator_limit {limit}: lower canary.replicas.max or raise the limit",
            )
