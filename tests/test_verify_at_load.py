"""The planner's estimate at an observed load (llm_eks.verify.at_load.estimate_at_load): the plan's own figures at
the planned load, lower at a lighter one (far lower for an MoE), the deployment's layout and batch cap kept."""

from __future__ import annotations

import functools

import pytest

from llm_eks.planner import Plan, PlanRequest, plan
from llm_eks.verify.at_load import estimate_at_load


@functools.cache
def _plan(name: str) -> Plan:
    requests = {
        "dense": PlanRequest(model="meta-llama/Llama-3.1-8B-Instruct", accelerator="g5.xlarge", max_model_len=8192),
        "moe": PlanRequest(model="Qwen/Qwen3-30B-A3B", max_model_len=16384, target_concurrency=32),
        "dp-ep": PlanRequest(
            model="deepseek-ai/DeepSeek-V3",
            accelerator="p5.48xlarge",
            max_model_len=32768,
            data_parallel_size=16,
            tensor_parallel_size=1,
        ),
    }
    return plan(requests[name])


@pytest.mark.parametrize("name", ["dense", "moe", "dp-ep"])
def test_at_the_planned_load_it_is_the_plans_estimate(name: str) -> None:
    p = _plan(name)
    r = p.request
    per_engine = p.target_concurrency / p.data_parallel_size
    at = estimate_at_load(p, per_engine, r.typical_input_tokens, r.typical_output_tokens)
    assert (at.ttft_ms, at.itl_ms) == (p.ttft_estimate_ms, p.itl_estimate_ms)


def test_a_lighter_load_decodes_faster_and_an_moe_much_faster() -> None:
    dense, moe = _plan("dense"), _plan("moe")
    dense_one = estimate_at_load(dense, 1, 1024, 256)
    moe_one = estimate_at_load(moe, 1, 1024, 256)
    # One sequence reads the same weights as sixteen: a dense model's step barely changes.
    assert 0.8 < dense_one.itl_ms / dense.itl_estimate_ms < 1
    # An MoE's one sequence touches a few of its experts: well under the planned figure, beyond the 1/1.5 allowed.
    assert moe_one.itl_ms / moe.itl_estimate_ms < 1 / 1.5
    assert moe_one.ttft_ms < moe.ttft_estimate_ms
    itls = [estimate_at_load(moe, n, 1024, 256).itl_ms for n in (1, 2, 4, 8, 16, 32)]
    assert itls == sorted(itls)


def test_the_load_is_rounded_and_held_to_what_the_deployment_runs() -> None:
    p = _plan("dense")
    # A server idle most of the window still decodes one sequence at a time.
    assert estimate_at_load(p, 0.2, 1024, 256).sequences == 1
    # vLLM never batches more than max_num_seqs, whatever the running mean says.
    assert estimate_at_load(p, 40, 1024, 256).sequences == p.max_num_seqs
    long = estimate_at_load(p, 4, 100_000, 256)
    assert (long.prompt_tokens, long.output_tokens) == (p.max_model_len - 1, 1)
    assert estimate_at_load(p, 4.4, 900.4, 300.6).text() == "4 running, 900 → 301 tokens"


def test_data_parallel_ranks_each_run_the_observed_sequences() -> None:
    p = _plan("dp-ep")
    assert (p.data_parallel_size, p.max_num_seqs) == (16, 1)
    # vLLM's engine label is per data-parallel rank: one sequence per rank is the replica's sixteen.
    at = estimate_at_load(p, 1, 1024, 256)
    assert (at.sequences, at.itl_ms) == (1, p.itl_estimate_ms)
