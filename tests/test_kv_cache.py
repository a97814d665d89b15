"""KV cache per layer type as vLLM 0.33 lays it out (infra/plan/kv_cache.py), and the configs the issue named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_eks.catalog.models import CONFIGS, MODELS, ModelSpec
from llm_eks.infra.cli import main
from llm_eks.infra.plan import PlanRequest, plan
from llm_eks.infra.plan.kv_cache import kv_layout
from llm_eks.infra.plan.memory import GIB

LOGS = json.loads((Path(__file__).parent / "fixtures" / "vllm_startup_logs.json").read_text())["records"]
IN_FLIGHT = 2 * 8192  # async scheduling: two batches of max_num_batched_tokens


@pytest.mark.parametrize("tp", [1, 8])
def test_mla_caches_one_latent_on_every_tensor_parallel_rank(tp: int) -> None:
    v3 = MODELS["deepseek-ai/DeepSeek-V3"]
    assert kv_layout(v3, tp, 1, 2, IN_FLIGHT).bytes_per_token == (512 + 64) * 61 * 2 == 70_272
    assert kv_layout(v3, tp, 1, 1, IN_FLIGHT).bytes_per_token == (512 + 64) * 61 == 35_136


def test_gpt_oss_groups_sliding_and_full_layers_as_vllm_does() -> None:
    layout = kv_layout(MODELS["openai/gpt-oss-120b"], 1, 1, 2, IN_FLIGHT)
    assert [(t.kind, t.layers, t.span) for t in layout.types] == [("full", 18, 0), ("sliding", 18, 128)]
    assert (layout.groups, layout.group_layers) == ((1, 1), 18)
    assert layout.bytes_per_block == 18 * 16 * 2 * 8 * 64 * 2
    # cdiv(L, 16) for the full group + cdiv(min(127 + in-flight, L), 16) + 1 for the sliding one.
    assert layout.blocks_per_request(131_072) == 8192 + 1032 + 1


def test_gemma3_and_llama4_windows() -> None:
    gemma = kv_layout(MODELS["google/gemma-3-27b-it"], 1, 1, 2, IN_FLIGHT)
    assert (gemma.groups, gemma.group_layers) == ((1, 6), 10)  # 10 global layers; 52 local in 6 groups of <= 10
    assert gemma.blocks_per_request(131_072) == 8192 + 6 * (-(-(1023 + IN_FLIGHT) // 16) + 1)
    scout = kv_layout(MODELS["meta-llama/Llama-4-Scout-17B-16E-Instruct"], 4, 1, 2, IN_FLIGHT)
    assert [(t.kind, t.layers) for t in scout.types] == [("full", 12), ("chunked", 36)]
    assert scout.blocks_per_request(131_072) == 8192 + 3 * ((8192 + IN_FLIGHT) // 16)
    # Short requests hold only their own tokens in every group.
    assert scout.blocks_per_request(1280) == 4 * 80


def test_logged_kv_tokens_follow_from_the_logged_memory() -> None:
    """vLLM's "GPU KV cache size" from its "Available KV cache memory", for the published logs that give both."""
    qwen14, qwen235 = LOGS[0], LOGS[1]
    spec = ModelSpec(id=qwen14["model"], parameters=14_768_307_200, layers=40, hidden_size=5120, attention_heads=40,
                     kv_heads=8, head_dim=128, max_position_embeddings=40960, vocab_size=151936,
                     intermediate_size=17408)  # fmt: skip
    layout = kv_layout(spec, 1, 1, 2, IN_FLIGHT)
    assert layout.logged_tokens(layout.num_blocks(int(6.51 * GIB)), 32768) == qwen14["kv_cache_tokens"] == 42_656
    layout = kv_layout(MODELS[qwen235["model"]], 4, 1, 2, IN_FLIGHT)
    tokens = layout.logged_tokens(layout.num_blocks(int(8.11 * GIB)), 40960)
    assert abs(tokens - 178_880) / 178_880 < 0.015  # the log rounds the memory to 0.01 GiB


@pytest.mark.parametrize(
    ("config", "kind"),
    [("deepseek-ai__DeepSeek-V3", "mla"), ("openai__gpt-oss-120b", "hybrid"), ("Qwen__Qwen3-30B-A3B", "full")],
)
def test_the_configs_the_planner_used_to_refuse_now_plan(
    capsys: pytest.CaptureFixture[str], config: str, kind: str
) -> None:
    path = CONFIGS / f"{config}.json"
    assert main(["plan", "--model", "org/x", "--model-config", str(path), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    spec = ModelSpec.from_hf_config(path, id="org/x")
    assert spec.attention_kind == kind
    assert body["memory"]["kv_bytes_per_token"] == plan(PlanRequest(model=spec)).kv_bytes_per_token
