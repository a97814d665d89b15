"""Where a workload's plan meets the environment's GPU capacity: EFA between the nodes of a replica, and the capacity
reservations (On-Demand Capacity Reservations, Capacity Blocks for ML) of its instance family.

`validate_capacity` runs with the config's other checks, before any plan. The rest runs once the plans exist, where
they become node pools (infra/workloads), still before anything is synthesized: `efa_interfaces` decides a pool's
EFA interfaces, `check_reservations` refuses a reservation no plan can use, `reservation_warnings` says when
replicas.max needs more nodes than a family's reservations hold. Pure Python.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from llm_eks import aws_ids
from llm_eks.catalog.accelerators import FAMILIES, INSTANCE_TYPES
from llm_eks.config.environment import (
    CapacityReservationConfig,
    EnvironmentConfig,
    ServedWorkload,
    WorkloadConfig,
)
from llm_eks.error_codes import E122, E123, E124, E136, E139
from llm_eks.errors import did_you_mean, fail
from llm_eks.images.reference import parse_ref
from llm_eks.planner import WARN_NO_EFA, WARN_RESERVATION, PlanWarning
from llm_eks.planner.kv_cache import cdiv

if TYPE_CHECKING:
    from llm_eks.planner import Plan


ON_DEMAND = "on-demand"


def validate_capacity(c: EnvironmentConfig, path: str) -> None:
    """Each workload's `efa`, `image`, on-demand floor and fallback accelerator, and each capacity reservation,
    before anything is planned."""
    for served in c.served:
        _validate_workload(served.config, served.path)
        _validate_floor(served.config, served.path)
    families = sorted(FAMILIES)
    for family, reservation in c.capacity_reservations.items():
        if family not in families:
            raise fail(
                E123, f"{path}.capacity_reservations", family, f"must be an instance family: {', '.join(families)}"
            )
        _validate_reservation(reservation, f"{path}.capacity_reservations.{family}")


def _validate_workload(w: WorkloadConfig, path: str) -> None:
    inst = INSTANCE_TYPES.get(w.accelerator)
    if w.efa is True and inst is not None and not inst.efa_interfaces:
        raise fail(E124, f"{path}.efa", True, _no_efa(inst.instance_type, inst.family))
    if w.image is not None:
        try:
            parse_ref(w.image)
        except ValueError as err:
            raise fail(E139, f"{path}.image", w.image, str(err)) from None


def _validate_floor(w: WorkloadConfig, path: str) -> None:
    if w.on_demand_floor:
        if w.engine != "vllm":
            raise fail(
                E122,
                f"{path}.on_demand_floor",
                True,
                "needs engine vllm (Ray Serve scales its own workers inside one RayCluster)",
            )
        if w.replicas.min < 1:
            raise fail(
                E122,
                f"{path}.on_demand_floor",
                True,
                "needs replicas.min of at least 1: the floor is the minimum replicas, kept on on-demand capacity",
            )
        if ON_DEMAND not in w.capacity_types:
            raise fail(E122, f"{path}.on_demand_floor", True, "needs 'on-demand' among capacity_types")
        if w.replicas.max <= w.replicas.min:
            raise fail(
                E122,
                f"{path}.on_demand_floor",
                True,
                f"needs replicas.max above replicas.min ({w.replicas.min}): the replicas above the floor scale out "
                "from the Spot pool",
            )
    if w.fallback_accelerator is not None:
        if w.engine != "vllm":
            raise fail(E122, f"{path}.fallback_accelerator", w.fallback_accelerator, "needs engine vllm")
        if w.fallback_accelerator not in INSTANCE_TYPES:
            raise fail(
                E122,
                f"{path}.fallback_accelerator",
                w.fallback_accelerator,
                f"{did_you_mean(w.fallback_accelerator, INSTANCE_TYPES)}must be a GPU instance type of the catalog "
                "(llm_eks.catalog.accelerators), such as p5.48xlarge",
            )


def floor_replicas(c: EnvironmentConfig, s: ServedWorkload) -> int:
    """The replicas of workload `s`'s on-demand floor: replicas.min where on_demand_floor is on (by default in a
    production environment, or where capacity_types lists on-demand first), else 0. A workload's next version
    (canary) gets none: it runs on the Spot pool until it replaces the current version. Ray Serve, a workload
    without a minimum, without room above it or without on-demand, and an environment with capacity reservations
    (they are its floor) get none unless asked (which validate_capacity refuses where it cannot work)."""
    w = s.config
    if s.canary_of is not None or w.on_demand_floor is False:
        return 0
    if w.on_demand_floor is None:
        wanted = c.production or (bool(w.capacity_types) and w.capacity_types[0] == ON_DEMAND)
        possible = w.engine == "vllm" and 1 <= w.replicas.min < w.replicas.max and ON_DEMAND in w.capacity_types
        if not (wanted and possible) or c.capacity_reservations:
            return 0
    return w.replicas.min


def _no_efa(instance_type: str, family: str) -> str:
    with_efa = [row.instance_type for row in FAMILIES[family] if row.efa_interfaces]
    sizes = f"{family} sizes with EFA: {', '.join(with_efa)}" if with_efa else f"no {family} size has EFA"
    return f"{instance_type} has no EFA interface ({sizes}); choose an instance type with EFA, or leave efa unset"


# Karpenter 1.14.1 adds an `owner-id` filter to DescribeCapacityReservations only for a term with ownerID
# (pkg/providers/capacityreservation/types.go); without one, a tag selector also matches what other accounts share.
OWNER_REQUIRED = (
    "with tags, name the account that owns the reservations (12 digits; your own for reservations you made): "
    "without it the tags also match reservations other accounts share with this one"
)


def _validate_reservation(r: CapacityReservationConfig, path: str) -> None:
    if r.nodes < 1:
        raise fail(E123, f"{path}.nodes", r.nodes, "must be the number of instances the reservations hold, at least 1")
    if not r.ids and not r.tags:
        raise fail(E123, f"{path}.ids", [], "list the reservations (cr-...) or select them by tags")
    for i, reservation_id in enumerate(r.ids):
        if not aws_ids.CAPACITY_RESERVATION_ID.match(reservation_id):
            raise fail(
                E123,
                f"{path}.ids[{i}]",
                reservation_id,
                "must be a capacity reservation id such as cr-0123456789abcdef0",
            )
        if reservation_id in r.ids[:i]:
            raise fail(E123, f"{path}.ids[{i}]", reservation_id, "must not repeat a reservation")
    if len(r.ids) + (1 if r.tags else 0) > aws_ids.MAX_RESERVATION_TERMS:
        raise fail(
            E123,
            f"{path}.ids",
            len(r.ids),
            f"Karpenter takes at most {aws_ids.MAX_RESERVATION_TERMS} selector terms (each id is one)",
        )
    if len(r.tags) > aws_ids.MAX_RESERVATION_TAGS:
        raise fail(E123, f"{path}.tags", dict(r.tags), f"must hold at most {aws_ids.MAX_RESERVATION_TAGS} tags")
    for key, value in r.tags.items():
        if not key or not value:
            raise fail(
                E123, f"{path}.tags.{key}", value, "tag keys and values must not be empty ('*' matches any value)"
            )
    if r.owner_id is not None:
        if not r.tags:
            raise fail(
                E123, f"{path}.owner_id", r.owner_id, "only allowed with tags (an id names one reservation already)"
            )
        if not aws_ids.ACCOUNT.match(r.owner_id):
            raise fail(E123, f"{path}.owner_id", r.owner_id, "must be a 12-digit AWS account id")
    elif r.tags:
        raise fail(E123, f"{path}.owner_id", None, OWNER_REQUIRED)
    if r.reservation_type not in aws_ids.RESERVATION_TYPES:
        raise fail(
            E123,
            f"{path}.reservation_type",
            r.reservation_type,
            f"must be one of {', '.join(aws_ids.RESERVATION_TYPES)}",
        )
    if r.usd_per_hour is not None and not r.usd_per_hour > 0:
        raise fail(E123, f"{path}.usd_per_hour", r.usd_per_hour, "must be a positive price per instance-hour")
    if r.reservation_type == aws_ids.CAPACITY_BLOCK and r.usd_per_hour is None:
        raise fail(
            E123,
            f"{path}.usd_per_hour",
            None,
            "a Capacity Block is paid up front: give its price per instance-hour (what you paid / instances / hours)",
        )


# -- once the plans exist ---------------------------------------------------------------------------------------


def efa_interfaces(s: ServedWorkload, plan: Plan) -> int:
    """EFA interfaces each pod of workload `s` requests and each node of its pool carries: all of the instance's
    (Karpenter's `vpc.amazonaws.com/efa` capacity) when a replica spans nodes and efa is not false, else 0. An
    `efa: true` the plan cannot meet, and `efa: false` on a replica spanning nodes unless the no-EFA warning is
    acknowledged, and `efa: false` on a disaggregated plan moving its KV cache over EFA, are one-line errors."""
    w, inst = s.config, plan.instance
    if w.efa is True:
        if not inst.efa_interfaces:
            raise fail(E124, f"{s.path}.efa", True, _no_efa(inst.instance_type, inst.family))
        if plan.nodes_per_replica == 1 and not plan.efa_interfaces_per_pod:
            raise fail(
                E124,
                f"{s.path}.efa",
                True,
                f"a replica of {plan.model.id} fits one {inst.instance_type}: nothing crosses nodes; leave efa unset",
            )
    if w.efa is False:
        if plan.disaggregation is not None and plan.disaggregation.kv_over_efa:
            # NIXL's libfabric backend finds no EFA device in a pod without one: the engine would not start, and the
            # plan's TTFT counts the transfer at EFA's rate, which TCP is orders of magnitude below.
            raise fail(
                E124,
                f"{s.path}.efa",
                False,
                f"the plan disaggregates prefill and decode on {inst.instance_type}, moving the KV cache over EFA "
                "(NIXL's libfabric backend), which needs EFA in every pod: leave efa unset, or use disaggregation off",
            )
        if plan.nodes_per_replica > 1 and WARN_NO_EFA not in w.acknowledged_warnings:
            raise fail(
                E124,
                f"{s.path}.efa",
                False,
                f"a replica spans {plan.nodes_per_replica} {inst.instance_type} nodes, which would then talk over TCP: "
                f"accept that with acknowledged_warnings {WARN_NO_EFA}, or leave efa unset",
            )
        return 0
    return plan.efa_interfaces_per_pod


def compile_writer(w: WorkloadConfig, plan: Plan) -> bool:
    """Whether the compile cache's writer Job runs a server of its own on the workload's pool (one node's worth)."""
    return w.weights == "staged" and w.compile_cache and plan.nodes_per_replica == 1


def replica_nodes(plan: Plan, replicas: int) -> int:
    """Whole nodes of the planned instance type that `replicas` replicas take."""
    if plan.nodes_per_replica > 1:
        return replicas * plan.nodes_per_replica
    return cdiv(replicas, max(plan.replicas_per_node, 1))


def workload_nodes(w: WorkloadConfig, plan: Plan, replicas: int) -> int:
    """`replica_nodes`, and the compile cache's writer Job (one server of its own) when the workload has one."""
    return replica_nodes(plan, replicas) + (1 if compile_writer(w, plan) else 0)


def nodes_at_max(w: WorkloadConfig, plan: Plan) -> int:
    """Whole nodes of the planned instance type the workload runs at replicas.max (of a disaggregated plan, its
    prefill pool at its largest too), the compile cache's writer included."""
    return workload_nodes(w, plan, w.replicas.max + prefill_max_replicas(w, plan))


def prefill_max_replicas(w: WorkloadConfig, plan: Plan) -> int:
    """The prefill pool's largest size (0 when the plan serves aggregated): the planner's prefill:decode ratio
    carried to replicas.max decode replicas, rounded up, never below the planned prefill replicas."""
    d = plan.disaggregation
    if d is None or d.disaggregated is None or d.kv_transfer_configs() is None:
        return 0
    prefill, decode = d.disaggregated.pools
    return int(max(prefill.replicas, cdiv(prefill.replicas * w.replicas.max, max(decode.replicas, 1))))


def reservation(config: EnvironmentConfig, plan: Plan) -> CapacityReservationConfig | None:
    """The capacity reservations of the plan's instance family, if the environment has some."""
    return config.capacity_reservations.get(plan.instance.family)


def check_reservations(config: EnvironmentConfig, plans: Sequence[Plan]) -> None:
    """Every family with reservations is one a plan runs on (a NodePool exists to launch into them)."""
    used = sorted({plan.instance.family for plan in plans})
    for family in config.capacity_reservations:
        if family not in used:
            raise fail(
                E123,
                f"environments.{config.name}.capacity_reservations",
                family,
                f"no workload's plan runs on {family} (the plans use {', '.join(used)}): name a family a plan "
                f"uses, or set workload.accelerator to a {family} size",
            )


def reservation_warnings(
    config: EnvironmentConfig, plans: Sequence[Plan]
) -> Mapping[str | None, tuple[PlanWarning, ...]]:
    """Per workload key (None for the one-model shorthand): WARN_RESERVATION when the environment's workloads on a
    family need more nodes at replicas.max than the family's reservations hold."""
    need: dict[str, int] = {}
    for s, plan in zip(config.served, plans, strict=True):
        need[plan.instance.family] = need.get(plan.instance.family, 0) + nodes_at_max(s.config, plan)
    out: dict[str | None, tuple[PlanWarning, ...]] = {}
    for s, plan in zip(config.served, plans, strict=True):
        family = plan.instance.family
        r = config.capacity_reservations.get(family)
        if r is None or need[family] <= r.nodes:
            continue
        beyond = need[family] - r.nodes
        then = (
            f"the other {beyond} launch as {' or '.join(s.config.capacity_types)} at their own price (fallback true)"
            if r.fallback
            else f"with fallback false the other {beyond} never launch, and their replicas stay Pending"
        )
        message = (
            f"replicas.max needs {need[family]} {family} node(s) in this environment and its capacity reservations "
            f"hold {r.nodes}: {then}"
        )
        out[s.key] = (PlanWarning(WARN_RESERVATION, message),)
    return out


def replica_price(s: ServedWorkload, plan: Plan, reserved: CapacityReservationConfig | None = None) -> float:
    """The plan's $/h per replica, or with the family's reservations their price per instance-hour (a Capacity
    Block's is paid up front) for the nodes a replica takes; a ConfigError when neither has a price."""
    if reserved is not None and reserved.usd_per_hour is not None:
        return reserved.usd_per_hour * plan.nodes_per_replica / max(plan.replicas_per_node, 1)
    if plan.cost_per_replica_hour is None:
        # No price means no on-demand or Spot offer (Capacity Blocks only), which these node pools cannot launch;
        # the cost panels and the plan's $/h would be empty too.
        raise fail(
            E136,
            f"{s.path}.accelerator",
            plan.instance.instance_type,
            f"{plan.instance.note or 'it has no on-demand price'}; pick an instance type with an on-demand price",
        )
    return plan.cost_per_replica_hour
