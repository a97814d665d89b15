"""What a workload of an environment survives at its minimum replicas, as `llm-eks plan --env` prints it: the outage
(or lost capacity) a Spot reclaim and a zone loss cost, and what its on-demand floor costs an hour. The fault matrix
(docs/concepts/faults.md) says the same per environment, from the synthesized objects.

- A Spot reclaim takes a replica for the plan's cold start on a new node (Karpenter launches the replacement at the
  interruption notice; the pod leaves its endpoints at once), unless the minimum replicas run on on-demand capacity
  of their own (the on-demand floor).
- A lost zone's pods are replaced once their node is evicted as unreachable: the default toleration of
  `node.kubernetes.io/unreachable` (300 s) plus the node monitor's grace period (about 40 s), then the cold start.
- The floor's price is the plan's on-demand price per replica. Against all-Spot it costs the difference to the Spot
  price of the same capacity, which varies by zone and hour and which llm-eks does not know: the plan says so rather
  than guess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llm_eks.config.capacity import floor_replicas, replica_price, reservation
from llm_eks.config.environment import EnvironmentConfig, ServedWorkload
from llm_eks.planner import Plan

# Seconds until the pods of a node that stopped answering are replaced: the default unreachable toleration (300 s)
# plus the node monitor's grace period (about 40 s).
UNREACHABLE_SECONDS = 340


@dataclass(frozen=True)
class Resilience:
    """One workload's exposure at its minimum replicas."""

    key: str | None
    min_replicas: int
    # Replicas kept on on-demand capacity of their own, spread over zones as a requirement (0: none).
    floor: int
    # The replicas outside the floor may run on Spot.
    spot: bool
    cold_start_s: int
    # $ per hour of the floor at the on-demand (or reservation) price.
    floor_usd_per_hour: float
    ray_head: bool = False

    def spot_reclaim(self) -> str:
        if self.floor >= self.min_replicas:
            return f"survived: the {self.floor} minimum replicas run on on-demand capacity"
        if not self.spot:
            return "survived: no Spot capacity"
        if self.min_replicas == 1:
            return f"an outage of {self.cold_start_s} s (its only replica, on a new node)"
        return f"one replica of {self.min_replicas} fewer for {self.cold_start_s} s"

    def zone_loss(self) -> str:
        seconds = UNREACHABLE_SECONDS + self.cold_start_s
        if self.ray_head:
            return f"an outage of ≈{_minutes(seconds)} if the Ray head or its only worker was there"
        if self.min_replicas == 1:
            return f"an outage of ≈{_minutes(seconds)} if its only replica was there"
        if self.floor >= 2:
            return f"half the minimum replicas for ≈{_minutes(seconds)} (the floor runs in every zone)"
        return (
            f"the replicas of that zone for ≈{_minutes(seconds)} (spread over zones as a preference: all of them if "
            "the scheduler put them together)"
        )

    def floor_cost(self) -> str:
        if not self.floor:
            return "no on-demand floor"
        replicas = f"{self.floor} replica{'s' if self.floor > 1 else ''}"
        return (
            f"on-demand floor of {replicas}: ${self.floor_usd_per_hour:.2f}/h; against all-Spot it costs the "
            "difference to Spot's price, which varies by zone and hour (not known here)"
        )

    def line(self) -> str:
        """`llm-eks plan --env`'s line."""
        who = f"workload {self.key}" if self.key else "this workload"
        return (
            f"resilience of {who} at {self.min_replicas} replica{'s' if self.min_replicas > 1 else ''}: Spot reclaim "
            f"{self.spot_reclaim()}; zone loss {self.zone_loss()}; {self.floor_cost()}"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "min_replicas": self.min_replicas,
            "on_demand_floor": self.floor,
            "floor_usd_per_hour": round(self.floor_usd_per_hour, 2),
            "spot_reclaim": self.spot_reclaim(),
            "zone_loss": self.zone_loss(),
        }


def _minutes(seconds: float) -> str:
    return f"{math.ceil(seconds / 60)} min"


def resilience(config: EnvironmentConfig, s: ServedWorkload, plan: Plan) -> Resilience:
    """Workload `s` of `config`, planned as `plan`."""
    floor = floor_replicas(config, s)
    price = replica_price(s, plan, reservation(config, plan)) if floor else 0.0
    return Resilience(
        key=s.key,
        min_replicas=max(s.config.replicas.min, 1),
        floor=floor,
        spot="spot" in s.config.capacity_types,
        cold_start_s=round(plan.cold_start.scale_out_s),
        floor_usd_per_hour=price * floor,
        ray_head=s.config.engine == "ray-serve",
    )
