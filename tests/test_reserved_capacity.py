"""Reserved capacity: capacity reservations per GPU family (ODCRs and Capacity Blocks) in config, the EC2NodeClass
selector terms, the NodePool's capacity types with and without fallback, the Capacity Block drain, and the plan
warning when replicas.max needs more nodes than the reservations hold."""

from __future__ import annotations

import dataclasses
from typing import Any

import cdk8s
import pytest

from llm_eks.config import parse_environment
from llm_eks.config.capacity import reservation_warnings
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.infra.workloads import VllmWorkload, build_workloads
from llm_eks.manifests.checks import catalog_instance_resources, check_objects
from llm_eks.manifests.disruption import GPU_DISRUPTION
from llm_eks.manifests.node_pools import NodePoolsChart, NodePoolsProps, ReservedCapacity
from llm_eks.manifests.node_pools.reserved import CAPACITY_BLOCK_DRAIN_SECONDS, duration_seconds
from llm_eks.manifests.pods import MAX_GRACE_SECONDS
from llm_eks.planner import WARN_RESERVATION, WARNING_IDS
from tests.chart_helpers import environment_objects
from tests.crd_cel import EC2_NODE_CLASS, failed_rules
from tests.kube_schema import assert_valid

SG = ("sg-0123456789abcdef0",)
BLOCK = {"ids": ["cr-0123456789abcdef0"], "nodes": 2, "reservation_type": "capacity-block", "usd_per_hour": 31.464}
# DeepSeek-V3 on 2 x p5.48xlarge (TP 8 x PP 2) in a two-node Capacity Block.
LARGEST = {
    "weights_bucket": {},
    "capacity_reservations": {"p5": BLOCK},
    "workload": {
        "model": "deepseek-ai/DeepSeek-V3",
        "accelerator": "p5.48xlarge",
        "tensor_parallel_size": 8,
        "pipeline_parallel_size": 2,
        "max_model_len": 8192,
        "replicas": {"min": 1, "max": 1},
        "weights": "staged",
    },
}
# One-node replicas on an ODCR of g6e.xlarge.
SMALL = {
    "capacity_reservations": {"g6e": {"tags": {"team": "ml"}, "owner_id": "123456789012", "nodes": 2}},
    "workload": {"model": "meta-llama/Llama-3.1-8B-Instruct", "accelerator": "g6e.xlarge", "max_model_len": 8192},
}


def _objects(body: dict[str, Any]) -> list[dict[str, Any]]:
    return environment_objects("qa", body)


def _gpu_pool(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (pool,) = [o for o in objects if o["kind"] == "NodePool" and o["metadata"]["name"].startswith("gpu-")]
    return pool


def _requirements(pool: dict[str, Any]) -> dict[str, list[str]]:
    return {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]}


def _with(body: dict[str, Any], family: str, **reservation: Any) -> dict[str, Any]:
    reservations = body["capacity_reservations"]
    return {**body, "capacity_reservations": {family: {**reservations[family], **reservation}}}


def test_a_capacity_block_pool_launches_only_into_the_reservation() -> None:
    objects = _objects(LARGEST)
    pool = _gpu_pool(objects)
    assert pool["metadata"]["name"] == "gpu-p5-efa32"
    assert _requirements(pool)["karpenter.sh/capacity-type"] == ["reserved"]
    node_class = next(o for o in objects if o["metadata"]["name"] == "gpu-nvidia-p5-efa32")
    terms = node_class["spec"]["capacityReservationSelectorTerms"]
    assert terms == [{"id": "cr-0123456789abcdef0"}]
    assert failed_rules(EC2_NODE_CLASS, "capacityReservationSelectorTerms", terms) == []
    # Karpenter deletes the block's NodeClaims 40 minutes before its end and EC2 starts 10 minutes later: the drain
    # (and every pod's own grace within it) ends before then, whatever the PodDisruptionBudget allows.
    grace = pool["spec"]["template"]["spec"]["terminationGracePeriod"]
    assert grace == "8m"
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    pod_grace = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["terminationGracePeriodSeconds"]
    assert pod_grace == MAX_GRACE_SECONDS < duration_seconds(grace) <= CAPACITY_BLOCK_DRAIN_SECONDS
    pdb = next(o for o in objects if o["kind"] == "PodDisruptionBudget" and o["metadata"]["name"].startswith("vllm"))
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert_valid(objects)
    assert check_objects(objects, instance_resources=catalog_instance_resources) == []


def test_with_fallback_the_pool_also_launches_the_workloads_capacity_types() -> None:
    pool = _gpu_pool(_objects(_with(LARGEST, "p5", fallback=True)))
    assert _requirements(pool)["karpenter.sh/capacity-type"] == ["reserved", "spot", "on-demand"]
    on_demand = {**LARGEST["workload"], "capacity_types": ["on-demand"]}
    objects = _objects({**_with(LARGEST, "p5", fallback=True), "workload": on_demand})
    assert _requirements(_gpu_pool(objects))["karpenter.sh/capacity-type"] == ["reserved", "on-demand"]
    # No capacity-type pin on the pods: it would keep them off the reserved nodes.
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    assert (
        "karpenter.sh/capacity-type"
        not in lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["nodeSelector"]
    )


def test_an_odcr_by_tags_gets_its_own_node_class_and_keeps_the_ten_minute_drain() -> None:
    objects = _objects(SMALL)
    pool = _gpu_pool(objects)
    assert pool["metadata"]["name"] == "gpu-g6e"
    assert pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "gpu-nvidia-g6e"
    assert pool["spec"]["template"]["spec"]["terminationGracePeriod"] == "10m"
    node_class = next(o for o in objects if o["metadata"]["name"] == "gpu-nvidia-g6e")
    assert "networkInterfaces" not in node_class["spec"]
    # The tag term carries its owner: Karpenter then filters DescribeCapacityReservations by owner-id too.
    terms = node_class["spec"]["capacityReservationSelectorTerms"]
    assert terms == [{"tags": {"team": "ml"}, "ownerID": "123456789012"}]
    assert failed_rules(EC2_NODE_CLASS, "capacityReservationSelectorTerms", terms) == []
    assert_valid(objects)


def test_the_reservation_price_costs_the_replica() -> None:
    config = parse_environment("qa", LARGEST)
    (workload,) = build_workloads(config, plan_workloads(config))
    assert isinstance(workload, VllmWorkload)
    # $31.464 per instance-hour of the block, 2 nodes per replica.
    assert workload.monitoring.targets.cost_per_hour_per_replica == pytest.approx(62.928)


def test_replicas_beyond_the_reservation_raise_a_plan_warning() -> None:
    assert WARNING_IDS[-1] == WARN_RESERVATION == "llm-eks:plan-reservation"
    body = {**LARGEST, "workload": {**LARGEST["workload"], "replicas": {"min": 1, "max": 2}}}
    config = parse_environment("qa", body)
    ((key, (warning,)),) = reservation_warnings(config, plan_workloads(config)).items()
    assert (key, warning.id) == (None, WARN_RESERVATION)
    assert warning.message == (
        "replicas.max needs 4 p5 node(s) in this environment and its capacity reservations hold 2: with fallback "
        "false the other 2 never launch, and their replicas stay Pending"
    )
    config = parse_environment("qa", _with(body, "p5", fallback=True))
    ((_, (warning,)),) = reservation_warnings(config, plan_workloads(config)).items()
    assert warning.message.endswith("the other 2 launch as spot or on-demand at their own price (fallback true)")
    within = parse_environment("qa", LARGEST)
    assert reservation_warnings(within, plan_workloads(within)) == {}
    # Acknowledged like the planner's own warnings.
    acknowledged = {**body["workload"], "acknowledged_warnings": {WARN_RESERVATION: "a second block is on order"}}
    assert parse_environment("qa", {**body, "workload": acknowledged}).workload.acknowledged_warnings


@pytest.mark.parametrize(
    ("reservation", "message"),
    [
        (
            {"ids": ["cr_1"], "nodes": 2},
            "environments.qa.capacity_reservations.g6e.ids[0]: 'cr_1' is not allowed; must be a capacity reservation "
            "id such as cr-0123456789abcdef0 [LLMEKS-E123]",
        ),
        (
            {"nodes": 2},
            "environments.qa.capacity_reservations.g6e.ids: [] is not allowed; list the reservations (cr-...) or "
            "select them by tags [LLMEKS-E123]",
        ),
        (
            {"ids": ["cr-1"], "nodes": 0},
            "environments.qa.capacity_reservations.g6e.nodes: 0 is not allowed; must be the number of instances the "
            "reservations hold, at least 1 [LLMEKS-E123]",
        ),
        (
            {"ids": ["cr-1"], "nodes": 2, "reservation_type": "capacity-block"},
            "environments.qa.capacity_reservations.g6e.usd_per_hour: None is not allowed; a Capacity Block is paid "
            "up front: give its price per instance-hour (what you paid / instances / hours) [LLMEKS-E123]",
        ),
        (
            {"ids": ["cr-1"], "nodes": 2, "reservation_type": "block"},
            "environments.qa.capacity_reservations.g6e.reservation_type: 'block' is not allowed; must be one of "
            "default, capacity-block [LLMEKS-E123]",
        ),
        (
            {"ids": ["cr-1"], "nodes": 2, "owner_id": "123456789012"},
            "environments.qa.capacity_reservations.g6e.owner_id: '123456789012' is not allowed; only allowed with "
            "tags (an id names one reservation already) [LLMEKS-E123]",
        ),
        (
            {"tags": {"team": "ml"}, "nodes": 2},
            "environments.qa.capacity_reservations.g6e.owner_id: None is not allowed; with tags, name the account "
            "that owns the reservations (12 digits; your own for reservations you made): without it the tags also "
            "match reservations other accounts share with this one [LLMEKS-E123]",
        ),
        (
            {"tags": {"team": ""}, "owner_id": "123456789012", "nodes": 2},
            "environments.qa.capacity_reservations.g6e.tags.team: '' is not allowed; tag keys and values must not "
            "be empty ('*' matches any value) [LLMEKS-E123]",
        ),
        (
            {"ids": ["cr-1", "cr-1"], "nodes": 2},
            "environments.qa.capacity_reservations.g6e.ids[1]: 'cr-1' is not allowed; must not repeat a reservation"
            " [LLMEKS-E123]",
        ),
        (
            {"ids": ["cr-1"], "nodes": 2, "usd_per_hour": 0},
            "environments.qa.capacity_reservations.g6e.usd_per_hour: 0.0 is not allowed; must be a positive price "
            "per instance-hour [LLMEKS-E123]",
        ),
    ],
)
def test_bad_reservations_are_one_line(reservation: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_environment("qa", {**SMALL, "capacity_reservations": {"g6e": reservation}})
    assert str(err.value) == message


def test_a_reservation_of_an_unknown_or_unplanned_family_is_one_line() -> None:
    with pytest.raises(ConfigError) as err:
        parse_environment("qa", {**SMALL, "capacity_reservations": {"p9": {"ids": ["cr-1"], "nodes": 1}}})
    assert str(err.value).startswith("environments.qa.capacity_reservations: 'p9' is not allowed; must be an instance")
    config = parse_environment("qa", {**SMALL, "capacity_reservations": {"p5": {"ids": ["cr-1"], "nodes": 1}}})
    with pytest.raises(ConfigError) as err:
        build_workloads(config, plan_workloads(config))
    assert str(err.value) == (
        "environments.qa.capacity_reservations: 'p5' is not allowed; no workload's plan runs on p5 (the plans use "
        "g6e): name a family a plan uses, or set workload.accelerator to a p5 size [LLMEKS-E123]"
    )


def test_the_chart_refuses_a_capacity_block_pool_that_drains_too_long() -> None:
    config = parse_environment("qa", LARGEST)
    (workload,) = build_workloads(config, plan_workloads(config))
    pool = dataclasses.replace(workload.gpu_pool, disruption=GPU_DISRUPTION)
    props = NodePoolsProps(
        cluster_name="c",
        node_role_name="r",
        gpu_pools=(pool,),
        placement_groups={pool.node_class: "pg-0123456789abcdef0"},
    )
    with pytest.raises(ConfigError) as err:
        NodePoolsChart(cdk8s.App(), "pools", props)
    assert str(err.value) == (
        "gpu_pools[0].disruption.termination_grace_period: '10m' is not allowed; must be at most 8m for a Capacity "
        "Block: Karpenter drains its nodes 40 minutes before the block ends and EC2 terminates them 10 minutes later"
        " [LLMEKS-E123]"
    )
    spot = dataclasses.replace(workload.gpu_pool, capacity_types=("spot",))
    with pytest.raises(ConfigError) as err:
        NodePoolsChart(cdk8s.App(), "pools", dataclasses.replace(props, gpu_pools=(spot,)))
    assert str(err.value) == (
        "gpu_pools[0].capacity_types: ('spot',) is not allowed; must include 'reserved' with a reservation "
        "(Karpenter launches into it only then) [LLMEKS-E123]"
    )
    unreserved = dataclasses.replace(workload.gpu_pool, reservation=None)
    with pytest.raises(ConfigError) as err:
        NodePoolsChart(cdk8s.App(), "pools", dataclasses.replace(props, gpu_pools=(unreserved,)))
    assert str(err.value).startswith("gpu_pools[0].capacity_types[0]: 'reserved' is not allowed")
    assert ReservedCapacity(ids=("cr-1",)).selector_terms() == [{"id": "cr-1"}]
    with pytest.raises(ConfigError) as err:
        ReservedCapacity(tags={"team": "ml"}).validate("gpu_pools[0].reservation")
    assert str(err.value) == (
        "gpu_pools[0].reservation.owner_id: None is not allowed; required with tags: without it they also match "
        "reservations other accounts share [LLMEKS-E123]"
    )
