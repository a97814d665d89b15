"""An on-demand floor and a fallback family: where the minimum replicas run (on-demand, zone by zone, a NodePool
weighted above the Spot one), where the rest scale out, and the one-line errors of both settings."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from llm_eks.config import parse_environment
from llm_eks.config.capacity import floor_replicas
from llm_eks.config.plans import fallback_plan, plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.infra.workloads import VllmWorkload, build_workloads
from tests.conftest import CDK_JSON, Synthesized

PROD = CDK_JSON["context"]["environments"]["prod"]


def _env(name: str, **workload: Any) -> dict[str, Any]:
    body = copy.deepcopy(CDK_JSON["context"]["environments"][name])
    body["workload"].update(workload)
    return body


def test_production_gets_a_floor_and_development_does_not() -> None:
    environments = {name: parse_environment(name, body) for name, body in CDK_JSON["context"]["environments"].items()}
    floors = {name: [floor_replicas(c, s) for s in c.served] for name, c in environments.items()}
    # prod: production true and on-demand listed first; dev and staging list Spot first.
    assert floors == {"dev": [0], "staging": [0, 0], "prod": [2]}


def test_on_demand_first_alone_gets_a_floor_and_false_turns_it_off() -> None:
    dev = parse_environment("dev", _env("dev", capacity_types=["on-demand", "spot"]))
    assert [floor_replicas(dev, s) for s in dev.served] == [1]
    prod = parse_environment("prod", _env("prod", on_demand_floor=False))
    assert [floor_replicas(prod, s) for s in prod.served] == [0]


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        (
            {"on_demand_floor": True, "capacity_types": ["spot"]},
            "environments.prod.workload.on_demand_floor: True is not allowed; needs 'on-demand' among capacity_types"
            " [LLMEKS-E122]",
        ),
        (
            {"on_demand_floor": True, "replicas": {"min": 2, "max": 2}},
            "environments.prod.workload.on_demand_floor: True is not allowed; needs replicas.max above replicas.min "
            "(2): the replicas above the floor scale out from the Spot pool [LLMEKS-E122]",
        ),
        (
            {"fallback_accelerator": "p5.48xlarg"},
            "environments.prod.workload.fallback_accelerator: 'p5.48xlarg' is not allowed; did you mean "
            "'p5.48xlarge'? must be a GPU instance type of the catalog (llm_eks.catalog.accelerators), such as "
            "p5.48xlarge [LLMEKS-E122]",
        ),
    ],
)
def test_floor_and_fallback_errors_before_planning(workload: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_environment("prod", _env("prod", **workload))
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("accelerator", "message"),
    [
        (
            "p4d.24xlarge",
            "environments.prod.workload.fallback_accelerator: 'p4d.24xlarge' is not allowed; must be of another "
            "family than the planned p4d.24xlarge [LLMEKS-E135]",
        ),
        (
            "p5.48xlarge",
            "environments.prod.workload.fallback_accelerator: 'p5.48xlarge' is not allowed; a replica there needs "
            "other engine arguments (--max-num-batched-tokens 8192 instead of 2048) than on p4d.24xlarge, and one "
            "pod template serves both; choose a type the same arguments fit [LLMEKS-E135]",
        ),
    ],
)
def test_a_fallback_family_must_run_the_same_pod(accelerator: str, message: str) -> None:
    config = parse_environment("prod", _env("prod", fallback_accelerator=accelerator))
    (s,) = config.served
    (plan,) = plan_workloads(config)
    with pytest.raises(ConfigError) as err:
        fallback_plan(s, plan)
    assert str(err.value) == message


def test_prods_fallback_family_runs_the_same_engine_arguments() -> None:
    config = parse_environment("prod", PROD)
    (s,) = config.served
    (plan,) = plan_workloads(config)
    fallback = fallback_plan(s, plan)
    assert fallback is not None
    # A100 80 GB instead of 40 GB: the same TP8 replica and engine arguments (the planner refuses p5.48xlarge and
    # g6e.48xlarge's ITL at this load misses the SLO).
    assert (fallback.instance.instance_type, fallback.tensor_parallel_size) == ("p4de.24xlarge", 8)
    assert fallback.meets_target and not fallback.warnings
    assert fallback.pod_resources.cpu_millicores >= plan.pod_resources.cpu_millicores
    (workload,) = build_workloads(config, (plan,))
    assert isinstance(workload, VllmWorkload)
    pools = {p.name: p for p in workload.pools}
    assert {name: (p.weight, p.capacity_types, p.accelerator_limit) for name, p in pools.items()} == {
        # 6 replicas of one p4d.24xlarge each, and the compile cache's writer one more.
        "gpu-p4d": (50, ("on-demand", "spot"), 56),
        # The floor: exactly its 2 replicas' nodes, on-demand only, tried first.
        "gpu-p4d-floor": (100, ("on-demand",), 16),
        # 6 replicas of one p4de.24xlarge each.
        "gpu-p4de-fallback": (10, ("on-demand", "spot"), 48),
    }
    assert workload.vllm.pools == ("gpu-p4d", "gpu-p4de-fallback")
    assert workload.vllm.floor_pools == ("gpu-p4d-floor", "gpu-p4d", "gpu-p4de-fallback")
    # KEDA scales the rest from 0 above the floor, up to replicas.max in all.
    assert (workload.autoscaling.min_replicas, workload.autoscaling.max_replicas) == (0, 4)


def test_prod_synthesizes_the_floor_on_its_own_pool(synthesized: Synthesized) -> None:
    objects = synthesized.objects("prod")
    pools = {o["metadata"]["name"]: o for o in objects if o["kind"] == "NodePool"}
    assert pools["gpu-p4d-floor"]["spec"]["weight"] == 100
    assert pools["gpu-p4d"]["spec"]["weight"] == 50
    assert pools["gpu-p4de-fallback"]["spec"]["weight"] == 10
    floor = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-floor"))
    spec = floor["spec"]["template"]["spec"]
    assert floor["spec"]["replicas"] == 2
    assert spec["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "DoNotSchedule"
    (scaled,) = [o for o in objects if o["kind"] == "ScaledObject"]
    assert scaled["spec"]["scaleTargetRef"]["name"] == floor["metadata"]["name"].removesuffix("-floor")
    assert [t["metadata"]["activationThreshold"] for t in scaled["spec"]["triggers"]] == ["4", "0.8"]
