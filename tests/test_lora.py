"""LoRA adapters on a vLLM workload: the flags, the GPU memory the planner takes for their buffers, the errors."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import cdk8s
import pytest

from llm_eks.catalog.models import model
from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.infra.charts import build_charts
from llm_eks.infra.workloads import VllmWorkload, build_workload, build_workloads
from llm_eks.manifests.vllm import validate_vllm_props
from llm_eks.planner.memory import lora_bytes
from tests.environments import plan_environment

ADAPTERS = {"sql": "acme/llama-3.1-8b-sql-lora", "support-fr": "acme/llama-3.1-8b-support-fr-lora"}
STAGED = {"weights": "staged"}
LORA = {"weights_bucket": {}, "workload": {**STAGED, "lora_adapters": ADAPTERS, "max_lora_rank": 32}}


def test_lora_buffers_follow_vllms_stacked_a_and_b_layout() -> None:
    """Llama 3.1 8B, per layer and rank: qkv_proj A 3 x 4096 + B (4096 + 2 x 1024), o_proj A 4096 + B 4096,
    gate_up_proj A 2 x 4096 + B 2 x 14336, down_proj A 14336 + B 4096 = 81,920 values; x 32 layers x rank 32 x
    2 slots x 2 bytes."""
    spec = model("meta-llama/Llama-3.1-8B-Instruct")
    assert lora_bytes(spec, tp=1, max_loras=2, max_rank=32) == 81_920 * 32 * 32 * 2 * 2 == 335_544_320
    # Tensor parallelism shards one side of each buffer: B of column-parallel layers, A of row-parallel ones.
    per_layer_tp2 = 3 * 4096 + 6144 // 2 + 4096 // 2 + 4096 + 2 * 4096 + 2 * 14336 // 2 + 14336 // 2 + 4096
    assert lora_bytes(spec, tp=2, max_loras=1, max_rank=16) == per_layer_tp2 * 32 * 16 * 2


def test_the_plan_takes_the_buffers_from_the_kv_cache() -> None:
    with_lora = plan_environment(parse_environment("dev", LORA))
    without = plan_environment(parse_environment("dev", {}))
    assert with_lora.reserve_bytes_per_gpu - without.reserve_bytes_per_gpu == 335_544_320
    assert with_lora.kv_cache_tokens < without.kv_cache_tokens
    args = " ".join(with_lora.engine_args)
    assert (
        "--enable-lora --max-loras 2 --max-lora-rank 32 --lora-modules sql=acme/llama-3.1-8b-sql-lora "
        "support-fr=acme/llama-3.1-8b-support-fr-lora" in args
    )
    (line,) = [a for a in with_lora.assumptions if a.startswith("LoRA:")]
    assert line.startswith("LoRA: 2 adapter slot(s) at max rank 32: 0.31 GiB of A/B buffers per GPU")


def test_the_deployment_serves_the_adapters_it_restored() -> None:
    """Each adapter is fetched into the pod before vLLM starts, and --lora-modules points there: vLLM never
    downloads an adapter from the Hub at start."""
    config = parse_environment("dev", LORA)
    workload = build_workload(config, plan_environment(config))
    charts = build_charts(
        cdk8s.App(),
        config,
        [workload],
        node_role_name="r",
        security_group_ids=("sg-0123456789abcdef0",),
        weights_bucket="bucket",
    )
    (deployment,) = [o for c in charts for o in c.chart.to_json() if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    args: list[str] = pod["containers"][0]["args"]
    start = args.index("--lora-modules")
    assert args[start + 1 : start + 3] == [
        "sql=/cache/lora/sql",
        "support-fr=/cache/lora/support-fr",
    ]
    assert args.count("--enable-lora") == 1
    fetches = {c["name"]: c["args"] for c in pod["initContainers"] if c["name"].startswith("lora-")}
    assert [a[a.index("--prefix") + 1] for a in fetches.values()] == [
        "adapters/acme/llama-3.1-8b-sql-lora/main/",
        "adapters/acme/llama-3.1-8b-support-fr-lora/main/",
    ]
    assert [a[a.index("--fetch-to") + 1] for a in fetches.values()] == [
        "/cache/lora/sql",
        "/cache/lora/support-fr",
    ]
    # Nothing comes from the Hub at start, so the serving pods hold no Hub token.
    assert "HF_TOKEN" not in str(pod)


def test_extra_engine_args_cannot_set_lora_twice() -> None:
    config = parse_environment("dev", LORA)
    workload = build_workload(config, plan_environment(config))
    assert isinstance(workload, VllmWorkload)
    with pytest.raises(ConfigError) as info:
        validate_vllm_props(replace(workload.vllm, extra_engine_args=("--max-loras", "4")))
    assert (
        str(info.value)
        == "extra_engine_args: '--max-loras' is not allowed; the chart sets it from engine.lora_modules [LLMEKS-E402]"
    )


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        (
            {"engine": "ray-serve", **STAGED, "lora_adapters": ADAPTERS},
            "environments.dev.workload.lora_adapters: {'sql': 'acme/llama-3.1-8b-sql-lora', 'support-fr': "
            "'acme/llama-3.1-8b-support-fr-lora'} is not allowed; needs engine vllm (Ray Serve LLM loads LoRA from a "
            "dynamic path, which llm-eks does not configure) [LLMEKS-E127]",
        ),
        (
            {**STAGED, "lora_adapters": {"sql": "s3://acme-models/loras/sql/"}},
            "environments.dev.workload.lora_adapters.sql: 's3://acme-models/loras/sql/' is not allowed; vLLM 0.33 "
            "loads an adapter from a local path or the Hugging Face Hub only (vllm/lora/utils.py, "
            "get_adapter_absolute_path); publish it to the Hub (a private repo with hf_token_secret) [LLMEKS-E127]",
        ),
        (
            {**STAGED, "lora_adapters": {"sql=v2": "acme/sql"}},
            "environments.dev.workload.lora_adapters: 'sql=v2' is not allowed; adapter names are 1-64 letters, "
            "digits, '.', '_' and '-', starting with a letter or digit (clients send the name as `model`)"
            " [LLMEKS-E127]",
        ),
        (
            {**STAGED, "lora_adapters": {"sql": "not a repo"}},
            "environments.dev.workload.lora_adapters.sql: 'not a repo' is not allowed; must be a Hugging Face repo "
            "id, pinned with @<commit>, such as org/adapter@<40 hex> [LLMEKS-E127]",
        ),
        (
            {**STAGED, "lora_adapters": ADAPTERS, "max_lora_rank": 12},
            "environments.dev.workload.max_lora_rank: 12 is not allowed; must be one of 1, 8, 16, 32, 64, 128, 256, "
            "320, 512 [LLMEKS-E127]",
        ),
        (
            {"model": "deepseek-ai/DeepSeek-V3", **STAGED, "lora_adapters": {"sql": "acme/dsv3-sql"}},
            "environments.dev.workload.lora_adapters: {'sql': 'acme/dsv3-sql'} is not allowed; deepseek-ai/DeepSeek-V3 "
            "uses multi-head latent attention, whose LoRA buffers the planner does not model; serve the adapters "
            "merged into their own checkpoints instead [LLMEKS-E127]",
        ),
    ],
)
def test_bad_lora_config_is_one_line(workload: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        plan_environment(parse_environment("dev", {"weights_bucket": {}, "workload": workload}))
    assert str(info.value) == message


def test_an_adapter_name_is_unique_in_the_environment() -> None:
    body = {
        "workloads": {
            "llama": {**STAGED, "lora_adapters": {"sql": "acme/llama-3.1-8b-sql-lora"}},
            "qwen": {"model": "Qwen/Qwen3-8B", **STAGED, "lora_adapters": {"sql": "acme/qwen3-8b-sql-lora"}},
        },
        "weights_bucket": {},
    }
    config = parse_environment("dev", body)
    with pytest.raises(ConfigError) as info:
        build_workloads(config, plan_workloads(config))
    assert str(info.value) == (
        "environments.dev.workloads.qwen.lora_adapters: 'sql' is not allowed; is already served by "
        "environments.dev.workloads.llama; served model and adapter names must be unique in an environment (rename "
        "one, or drop one of the two) [LLMEKS-E120]"
    )
