"""Config + plan -> chart props: the numbers each chart and node pool gets, and the errors on impossible setups."""

from __future__ import annotations

import pytest

from llm_eks.config import parse_environment
from llm_eks.errors import ConfigError
from llm_eks.infra.workloads import (
    RayServeWorkload,
    VllmWorkload,
    Workload,
    build_workload,
    monitoring_props,
    ray_monitoring_props,
    slug,
)
from llm_eks.manifests.ray_serve import llm_config
from llm_eks.manifests.vllm import container_args
from llm_eks.planner.engine import EngineSettings
from tests.environments import plan_environment
from tests.test_config_inputs import SPEC

# A float32 checkpoint described by workload.model_spec (Llama 3.1 8B's shape): the planner serves it in bfloat16.
FP32_SPEC = {**SPEC, "native_dtype": "float32"}


def workload_of(body: dict) -> Workload:
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
    w = workload_of({})
    assert isinstance(w, VllmWorkload)
    args = container_args(w.vllm)
    for flag in ("--tensor-parallel-size", "--served-model-name", "--max-model-len", "--max-num-seqs"):
        assert args.count(flag) == 1, flag
    assert args[args.index("--max-model-len") + 1] == "8192"


def test_plan_shows_the_flags_the_vllm_chart_runs() -> None:
    config = parse_environment("dev", {"workload": {"weight_format": "fp8", "kv_cache_dtype": "fp8"}})
    plan = plan_environment(config)
    w = build_workload(config, plan)
    assert isinstance(w, VllmWorkload)
    assert w.vllm.engine == plan.engine
    args = container_args(w.vllm)
    # `llm-eks plan` prints every flag the pod gets from the plan, with the same values.
    for flag in ("--tensor-parallel-size", "--max-model-len", "--kv-cache-dtype", "--quantization", "--max-num-seqs"):
        assert args[args.index(flag) + 1] == plan.engine_args[plan.engine_args.index(flag) + 1], flag
    assert plan.engine.quantization == "fp8" and plan.engine.kv_cache_dtype == "fp8"


def test_each_engine_has_its_own_workload_type() -> None:
    vllm = workload_of({})
    ray = workload_of({"workload": {"engine": "ray-serve", "model": "Qwen/Qwen2.5-7B-Instruct"}})
    assert isinstance(vllm, VllmWorkload) and isinstance(ray, RayServeWorkload)
    assert vllm.api_key_secret == "llm-eks/dev/api-key" and ray.api_key_secret is None
    assert ray.service_account == ("inference", "ray-qwen2-5-7b-instruct")


def test_ray_serve_gets_the_planned_engine_settings() -> None:
    config = parse_environment(
        "dev",
        {"workload": {"engine": "ray-serve", "model": "Qwen/Qwen2.5-7B-Instruct", "weight_format": "fp8"}},
    )
    plan = plan_environment(config)
    w = build_workload(config, plan)
    assert isinstance(w, RayServeWorkload)
    kwargs = llm_config(w.ray)["engine_kwargs"]
    assert kwargs == {
        "tensor_parallel_size": plan.tensor_parallel_size,
        "pipeline_parallel_size": plan.pipeline_parallel_size,
        "max_model_len": 8192,
        "gpu_memory_utilization": 0.92,
        "quantization": "fp8",
        "max_num_batched_tokens": plan.max_num_batched_tokens,
        "max_num_seqs": plan.max_num_seqs,
    }


def test_float32_checkpoint_runs_in_bfloat16_on_both_engines() -> None:
    for engine in ("vllm", "ray-serve"):
        w = workload_of({"workload": {"engine": engine, "model": "acme/llama-fp32", "model_spec": FP32_SPEC}})
        if isinstance(w, RayServeWorkload):
            assert llm_config(w.ray)["engine_kwargs"]["dtype"] == "bfloat16"
        else:
            args = container_args(w.vllm)
            assert args[args.index("--dtype") + 1] == "bfloat16"


def test_engine_settings_default_to_vllms_own() -> None:
    settings = EngineSettings(max_model_len=4096)
    # vLLM 0.33.0's CacheConfig.gpu_memory_utilization is Field(default=0.92) (vllm/config/cache.py, line 215).
    assert (settings.gpu_memory_utilization, settings.kv_cache_dtype, settings.dtype) == (0.92, "auto", "auto")
    assert settings.max_num_seqs is None and settings.quantization is None


def test_accelerator_limit_below_one_node() -> None:
    assert error_of({"workload": {"accelerator": "g6e.12xlarge", "accelerator_limit": 2}}) == (
        "environments.dev.workload.accelerator_limit: 2 is not allowed; must be at least one g6e.12xlarge node's "
        "4 accelerators [LLMEKS-E137]"
    )


def test_accelerator_limit_below_max_replicas() -> None:
    body = {"workload": {"accelerator": "g6e.xlarge", "replicas": {"max": 4}, "accelerator_limit": 2}}
    assert error_of(body) == (
        "environments.dev.workload.accelerator_limit: 2 is not allowed; must be at least 4: replicas.max 4 needs 4 "
        "g6e.xlarge node(s) of 1; lower replicas.max or raise the limit [LLMEKS-E137]"
    )


def test_vllm_engine_spans_nodes_with_a_leader_worker_set() -> None:
    """A plan that needs several nodes per replica no longer refuses vLLM: its props ask for a LeaderWorkerSet
    (tests/test_multi_node.py checks the objects)."""
    body = {
        "workload": {
            "model": "meta-llama/Llama-3.3-70B-Instruct",
            "weight_format": "fp8",
            "accelerator": "g6e.2xlarge",
            "max_model_len": 8192,
            "target_concurrency": 1,
            # g6e.2xlarge has no EFA: the planner refuses a replica across such nodes unless TCP is accepted.
            "acknowledged_warnings": {"llm-eks:plan-no-efa": "a test of the LeaderWorkerSet objects, never deployed"},
        }
    }
    w = workload_of(body)
    assert isinstance(w, VllmWorkload)
    v = w.vllm
    assert v.nodes_per_replica > 1
    assert v.accelerators_per_pod * v.nodes_per_replica == v.tensor_parallel_size * v.pipeline_parallel_size


def test_instance_without_an_on_demand_offer() -> None:
    assert error_of({"workload": {"accelerator": "p5e.48xlarge"}}) == (
        "environments.dev.workload.accelerator: 'p5e.48xlarge' is not allowed; no on-demand price in us-east-1 in "
        "the 2026-07-20 Price List (Capacity Blocks); auto never picks it; pick an instance type with an on-demand "
        "price [LLMEKS-E136]"
    )


def test_monitoring_props_refuse_a_plan_without_a_price() -> None:
    # Called on their own (not through build_workload), they must not hand the dashboards a None $/h.
    config = parse_environment("dev", {"workload": {"accelerator": "p5e.48xlarge"}})
    plan = plan_environment(config)
    vllm = workload_of({})
    ray = workload_of({"workload": {"engine": "ray-serve"}})
    assert isinstance(vllm, VllmWorkload) and isinstance(ray, RayServeWorkload)
    for build in (
        lambda: monitoring_props(config.served[0], plan, vllm.vllm),
        lambda: ray_monitoring_props(config.served[0], plan, ray.ray),
    ):
        with pytest.raises(ConfigError) as info:
            build()
        assert str(info.value).startswith("environments.dev.workload.accelerator: 'p5e.48xlarge' is not allowed; ")
        assert str(info.value).endswith("pick an instance type with an on-demand price [LLMEKS-E136]")
