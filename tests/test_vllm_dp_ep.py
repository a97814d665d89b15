"""A data-parallel, expert-parallel replica across nodes as the vLLM chart renders it: every pod's `vllm serve`
command line, run through the container's own shell with LeaderWorkerSet's env, is the plan's pod_engine_args."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import cdk8s
import pytest

from llm_eks.config import parse_environment
from llm_eks.errors import ConfigError
from llm_eks.infra.charts import build_charts
from llm_eks.infra.workloads import VllmWorkload, build_workload
from llm_eks.manifests.vllm import VllmProps, validate_vllm_props
from llm_eks.planner import Plan
from tests.chart_helpers import placement_groups
from tests.environments import plan_environment
from tests.kube_schema import assert_valid

# DeepSeek-V3 (FP8) on two p5.48xlarge: 16 data-parallel ranks of one GPU, 8 per node, its experts over 16 GPUs.
DP16 = {"workload": {"model": "deepseek-ai/DeepSeek-V3", "accelerator": "p5.48xlarge", "max_model_len": 32768,
                     "data_parallel_size": 16, "tensor_parallel_size": 1, "api_key": False,
                     "replicas": {"min": 1, "max": 1}}}  # fmt: skip
LEADER = "deepseek-v3-0.deepseek-v3.llm.svc"


@pytest.fixture(scope="module")
def built() -> tuple[Plan, VllmWorkload, list[dict[str, Any]]]:
    config = parse_environment("big", DP16)
    plan = plan_environment(config)
    workload = build_workload(config, plan)
    assert isinstance(workload, VllmWorkload)
    charts = build_charts(
        cdk8s.App(),
        config,
        [workload],
        node_role_name="r",
        security_group_ids=("sg-0123456789abcdef0",),
        placement_groups=placement_groups([workload]),
    )
    return plan, workload, [o for c in charts if c.apply for o in c.chart.to_json()]


def _kubelet(arg: str, env: dict[str, str]) -> str:
    """The kubelet's $(VAR) expansion of a container argument."""
    return re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], arg)


def _command_line(container: dict[str, Any], env: dict[str, str], tmp: Path) -> list[str]:
    """What `vllm` receives when the container starts: its command run by /bin/sh with a `vllm` on PATH that prints
    its arguments."""
    fake = tmp / "vllm"
    fake.write_text("#!/usr/bin/env python3\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    argv = [*container["command"], *(_kubelet(a, env) for a in container["args"])]
    if argv[0] == "vllm":
        argv[0] = str(fake)
    run_env = {**os.environ, **env, "PATH": f"{tmp}:{os.environ['PATH']}"}
    out = subprocess.run(argv, env=run_env, capture_output=True, text=True, check=True).stdout
    served: list[str] = json.loads(out)
    assert served[0] == "serve"
    return served[1:]


def _flags(args: list[str] | tuple[str, ...]) -> dict[str, str | None]:
    """Flag -> value (None for a switch), the order vLLM's parser ignores."""
    out: dict[str, str | None] = {}
    i = 0
    while i < len(args):
        flag = args[i]
        has_value = i + 1 < len(args) and not args[i + 1].startswith("--")
        out[flag] = args[i + 1] if has_value else None
        i += 2 if has_value else 1
    return out


def test_the_plan_is_dp16_ep16_on_two_nodes(built: tuple[Plan, VllmWorkload, list[dict[str, Any]]]) -> None:
    plan, workload, _ = built
    assert (plan.nodes_per_replica, plan.data_parallel_size, plan.data_parallel_size_local) == (2, 16, 8)
    assert (workload.vllm.data_parallel_size, workload.vllm.expert_parallel) == (16, True)


@pytest.mark.parametrize(("role", "index"), [("leaderTemplate", 0), ("workerTemplate", 1)])
def test_each_pod_runs_the_plans_engine_args(
    built: tuple[Plan, VllmWorkload, list[dict[str, Any]]], role: str, index: int, tmp_path: Path
) -> None:
    plan, _, objects = built
    (lws,) = [o for o in objects if o["kind"] == "LeaderWorkerSet"]
    assert_valid([lws])
    container = lws["spec"]["leaderWorkerTemplate"][role]["spec"]["containers"][0]
    env = {"LWS_LEADER_ADDRESS": LEADER, "LWS_WORKER_INDEX": str(index)}
    served = _command_line(container, env, tmp_path)
    model, chart_flags = served[0], _flags(served[1:])
    assert model == plan.checkpoint
    # The chart's own: where it listens, how long it drains, and on the leader the API server that workers lack.
    for flag in ("--host", "--port", "--shutdown-timeout"):
        chart_flags.pop(flag)
    assert chart_flags == _flags(plan.pod_engine_args(index, LEADER))


def test_the_worker_computes_its_first_rank_in_its_shell(
    built: tuple[Plan, VllmWorkload, list[dict[str, Any]]],
) -> None:
    _, _, objects = built
    (lws,) = [o for o in objects if o["kind"] == "LeaderWorkerSet"]
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert worker["command"] == [
        "/bin/sh", "-c", 'exec vllm serve "$@" --data-parallel-start-rank $((LWS_WORKER_INDEX * 8))', "vllm",
    ]  # fmt: skip
    assert leader["command"] == ["vllm", "serve"]
    for container in (leader, worker):
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"


def test_data_parallel_ranks_must_fill_the_pods(built: tuple[Plan, VllmWorkload, list[dict[str, Any]]]) -> None:
    _, workload, _ = built
    props: VllmProps = workload.vllm

    with pytest.raises(ConfigError) as info:
        validate_vllm_props(replace(props, data_parallel_size=8))
    assert str(info.value) == (
        "accelerators_per_pod: 8 is not allowed; must equal tensor_parallel_size x pipeline_parallel_size x "
        "data_parallel_size / nodes_per_replica (8 / 2), a whole number (vLLM splits the ranks evenly over the nodes)"
        " [LLMEKS-E401]"
    )
    with pytest.raises(ConfigError) as info:
        validate_vllm_props(replace(props, pipeline_parallel_size=2, data_parallel_size=8))
    assert str(info.value) == (
        "data_parallel_size: 8 is not allowed with pipeline_parallel_size 2; data-parallel ranks here are "
        "tensor-parallel only (use 1 for either) [LLMEKS-E401]"
    )


@pytest.mark.parametrize(("name", "value"), [("data_parallel_size", 16), ("enable_expert_parallel", True)])
def test_ray_serve_refuses_data_and_expert_parallelism(name: str, value: object) -> None:
    body = {"workload": {**DP16["workload"], "engine": "ray-serve", "data_parallel_size": None, name: value}}
    with pytest.raises(ConfigError) as info:
        parse_environment("big", body)
    assert str(info.value) == (
        f"environments.big.workload.{name}: {value!r} is not allowed; engine 'ray-serve' serves tensor x pipeline "
        "parallelism only; data and expert parallelism need engine 'vllm' [LLMEKS-E121]"
    )
