"""Config + plan -> chart props: the numbers each chart and node pool gets, and the errors on impossible setups."""

from __future__ import annotations

import pytest

from llm_eks.errors import ConfigError
from llm_eks.infra.app import plan_environment
from llm_eks.infra.config import parse_environment
from llm_eks.infra.workloads import build_workload, engine_args, slug


def workload_of(body: dict) -> object:
    config = parse_environment("dev", body)
    return build_workload(config, plan_environment(config))


def error_of(body: dict) -> str:
    config = parse_environment("dev", body)
    with pytest.raises(ConfigError) as info:
        build_workload(config, plan_environment(config))
    return str(info.value)


def test_slug_names() -> None:
    assert slug("meta-llama/Llama-3.1-8B-Instruct") == "llama-3-1-8b-instruct"
    assert slug("Qwen/Qwen2.5-72B-Instruct") == "qwen2-5-72b-instruct"


def test_pool_limit_covers_max_replicas_in_whole_nodes() -> None:
    w = workload_of({"workload": {"accelerator": "g6e.xlarge", "replicas": {"min": 1, "max": 3}}})
    assert w.gpu_pool.name == "gpu-g6e"
    # The planned size, plus g6e.2xlarge: same GPU, more CPU/RAM, $2.24/h <= 1.5 x $1.86/h ($2.79);
    # g6e.4xlarge ($3.00/h) is over that cap.
    assert w.gpu_pool.instance_types == ("g6e.xlarge", "g6e.2xlarge")
    assert w.gpu_pool.accelerator_limit == 3  # 3 replicas x 1 GPU, one replica per node


def test_chart_owned_flags_are_not_passed_twice() -> None:
    config = parse_environment("dev", {})
    plan = plan_environment(config)
    args = engine_args(plan)
    assert "--tensor-parallel-size" in plan.engine_args
    assert "--tensor-parallel-size" not in args and "--served-model-name" not in args
    assert args[args.index("--max-model-len") + 1] == "8192"


def test_accelerator_limit_below_one_node() -> None:
    assert error_of({"workload": {"accelerator": "g6e.12xlarge", "accelerator_limit": 2}}) == (
        "environments.dev.workload.accelerator_limit: 2 is not allowed; must be at least one g6e.12xlarge node's "
        "4 accelerators"
    )


def test_accelerator_limit_below_max_replicas() -> None:
    body = {"workload": {"accelerator": "g6e.xlarge", "replicas": {"max": 4}, "accelerator_limit": 2}}
    assert error_of(body) == (
        "environments.dev.workload.accelerator_limit: 2 is not allowed; must be at least 4: replicas.max 4 needs 4 "
        "g6e.xlarge node(s) of 1; lower replicas.max or raise the limit"
    )


def test_vllm_engine_cannot_span_nodes() -> None:
    body = {
        "workload": {
            "model": "meta-llama/Llama-3.3-70B-Instruct",
            "weight_format": "fp8",
            "accelerator": "g6e.2xlarge",
            "max_model_len": 8192,
            "target_concurrency": 1,
        }
    }
    message = error_of(body)
    assert message.startswith("environments.dev.workload.engine: 'vllm' is not allowed; meta-llama/Llama-3.3-70B")
    assert message.endswith("use engine 'ray-serve', quantization, or a bigger instance")


def test_instance_without_an_on_demand_offer() -> None:
    assert error_of({"workload": {"accelerator": "p5e.48xlarge"}}) == (
        "environments.dev.workload.accelerator: 'p5e.48xlarge' is not allowed; no on-demand price in us-east-1 in "
        "the 2026-07-20 Price List (Capacity Blocks); auto never picks it; pick an instance type with an on-demand "
        "price"
    )
