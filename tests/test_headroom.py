"""Warm headroom (workload.warm_replicas): replica-shaped placeholder pods that any serving replica pre-empts."""

from __future__ import annotations

from typing import Any

import cdk8s
import pytest

from llm_eks.cli import main
from llm_eks.cli.plan_table import table
from llm_eks.config import parse_environment
from llm_eks.errors import ConfigError
from llm_eks.infra.charts import build_charts
from llm_eks.infra.images import environment_images
from llm_eks.infra.workloads import VllmWorkload, build_workload
from llm_eks.manifests.checks import catalog_instance_resources, check_objects
from llm_eks.versions import PAUSE_IMAGE
from tests.environments import plan_environment
from tests.kube_schema import assert_valid

WARM = {"workload": {"warm_replicas": 2, "replicas": {"min": 1, "max": 3}}}


def _chart_objects(body: dict[str, Any]) -> list[dict[str, Any]]:
    config = parse_environment("dev", body)
    workload = build_workload(config, plan_environment(config))
    group = ("sg-0123456789abcdef0",)
    charts = build_charts(cdk8s.App(), config, [workload], node_role_name="r", security_group_ids=group)
    return [o for c in charts if c.apply for o in c.chart.to_json()]


def test_placeholders_are_shaped_like_a_replica_on_its_pool() -> None:
    objects = _chart_objects(WARM)
    (serving,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("vllm-")
                  and not o["metadata"]["name"].endswith("-headroom")]  # fmt: skip
    (warm,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-headroom")]
    (priority,) = [o for o in objects if o["kind"] == "PriorityClass"]
    assert (priority["value"], priority["preemptionPolicy"], priority["globalDefault"]) == (-10, "Never", False)
    pod, serving_pod = warm["spec"]["template"]["spec"], serving["spec"]["template"]["spec"]
    assert warm["spec"]["replicas"] == 2 and pod["priorityClassName"] == priority["metadata"]["name"]
    assert "priorityClassName" not in serving_pod  # priority 0: above the placeholders
    (pause,), (vllm,) = pod["containers"], serving_pod["containers"]
    assert pause["image"] == PAUSE_IMAGE
    # The serving image is pulled onto the node ahead of demand by an init container that exits at once.
    (pull,) = pod["initContainers"]
    assert (pull["image"], pull["imagePullPolicy"], pull["command"]) == (
        vllm["image"],
        "IfNotPresent",
        ["/bin/sh", "-c", "exit 0"],
    )
    assert pull["resources"]["requests"] == pull["resources"]["limits"] == {"cpu": "100m", "memory": "64Mi"}
    assert pause["resources"]["requests"] == vllm["resources"]["requests"] | {
        "cpu": vllm["resources"]["requests"]["cpu"]
    }
    assert (pod["nodeSelector"], pod["tolerations"]) == (serving_pod["nodeSelector"], serving_pod["tolerations"])
    assert_valid([warm, priority])
    # The synth-time checks schedule the placeholders on the same GPU pool, within its limit.
    assert check_objects(objects, instance_resources=catalog_instance_resources) == []


def test_off_by_default() -> None:
    assert not [o for o in _chart_objects({}) if o["kind"] == "PriorityClass"]


def test_the_plan_prices_the_headroom(capsys: pytest.CaptureFixture[str]) -> None:
    config = parse_environment("dev", WARM)
    plan = plan_environment(config)
    assert plan.cost_per_replica_hour is not None
    assert plan.warm_headroom_usd_per_hour == round(2 * plan.cost_per_replica_hour, 4)
    assert PAUSE_IMAGE in environment_images(config, [plan])
    # dev streams staged weights with the image pulled in parallel: the headroom saves the node and the pull.
    assert (
        f"Warm headroom  2 replica-shaped placeholder(s) keep node(s) up: ${plan.warm_headroom_usd_per_hour:.2f}/h; "
        "a scale-out then skips the 90 s node launch and the 50 s image pull"
    ) in table(plan)
    assert main(["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]) == 0
    assert "Warm headroom" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"workload": {"warm_replicas": 4, "replicas": {"min": 1, "max": 3}}},
            "environments.dev.workload.warm_replicas: 4 is not allowed; holds 4 accelerators, above the node pool's "
            "limit of 3 (workload.accelerator_limit, or what replicas.max needs): lower it or raise the limit"
            " [LLMEKS-E137]",
        ),
        (
            {"workload": {"engine": "ray-serve", "warm_replicas": 1}},
            "environments.dev.workload.warm_replicas: 1 is not allowed; needs engine vllm (Ray Serve scales its own "
            "workers inside the RayCluster); use 0 with ray-serve [LLMEKS-E121]",
        ),
        (
            {"workload": {"warm_replicas": -1}},
            "environments.dev.workload.warm_replicas: -1 is not allowed; must be an integer from 0 to 64 [LLMEKS-E202]",
        ),
    ],
)
def test_bad_headroom_is_one_line(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        config = parse_environment("dev", body)
        build_workload(config, plan_environment(config))
    assert str(err.value) == message


def test_workload_carries_the_headroom() -> None:
    config = parse_environment("dev", WARM)
    workload = build_workload(config, plan_environment(config))
    assert isinstance(workload, VllmWorkload) and workload.headroom is not None
    assert workload.headroom.replicas == 2
