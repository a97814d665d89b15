"""What verify holds a window's latency against: the planner's estimate at the load the window held
(llm_eks.verify.run.observed_estimate over llm_eks.planner.at_load). verify reads the running sequences per engine;
the estimate is the plan's own figures at the planned load, lower at a lighter one (far lower for an MoE), with the
deployment's layout and batch cap kept."""

from __future__ import annotations

import functools

import pytest

from llm_eks.planner import Plan, PlanRequest, plan
from llm_eks.planner.at_load import LoadEstimate
from llm_eks.verify.observed import WorkloadMetrics
from llm_eks.verify.run import observed_estimate
from llm_eks.verify.text import load_text


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


def _at(p: Plan, running_per_engine: float, prompt: float = 1024, output: float = 256) -> LoadEstimate:
    metrics = WorkloadMetrics(running_mean=running_per_engine, mean_input_tokens=prompt, mean_output_tokens=output)
    estimate = observed_estimate(p, metrics)
    assert estimate is not None
    return estimate


@pytest.mark.parametrize("name", ["dense", "moe", "dp-ep"])
def test_at_the_planned_load_it_is_the_plans_estimate(name: str) -> None:
    p = _plan(name)
    r = p.request
    at = _at(p, p.target_concurrency / p.data_parallel_size, r.typical_input_tokens, r.typical_output_tokens)
    assert at.batch == p.target_concurrency
    assert at.itl_ms == pytest.approx(p.itl_estimate_ms, abs=0.05)
    # The plan's TTFT is a closed loop's: batch - 1 others on the engine, busy whenever there is one. An observed mean
    # of as many running finds one more (dense, MoE: within 2 %); under DP x EP the plan's one sequence per rank has
    # no other, while a mean of one per rank finds its rank busy with probability 1 - e^-1 (13 % more here).
    assert at.ttft_ms == pytest.approx(p.ttft_estimate_ms, rel=0.15 if name == "dp-ep" else 0.02)
    assert at.ttft_ms >= p.ttft_estimate_ms
    assert at.output_tokens_per_s == pytest.approx(p.output_tokens_per_s, rel=0.01)


def test_a_lighter_load_decodes_faster_and_an_moe_much_faster() -> None:
    dense, moe = _plan("dense"), _plan("moe")
    dense_one = _at(dense, 1)
    moe_one = _at(moe, 1)
    # One sequence reads the same weights as sixteen: a dense model's step barely changes.
    assert 0.8 < dense_one.itl_ms / dense.itl_estimate_ms < 1
    # An MoE's one sequence touches a few of its experts: well under the planned figure, beyond the 1/1.5 allowed.
    assert moe_one.itl_ms / moe.itl_estimate_ms < 1 / 1.5
    assert moe_one.ttft_ms < moe.ttft_estimate_ms
    itls = [_at(moe, n).itl_ms for n in (1, 2, 4, 8, 16, 32)]
    assert itls == sorted(itls)


def test_the_load_is_rounded_and_held_to_what_the_deployment_runs() -> None:
    p = _plan("dense")
    # A server idle most of the window still decodes one sequence at a time.
    assert _at(p, 0.2).batch == 1
    # vLLM never batches more than max_num_seqs, whatever the running mean says.
    assert _at(p, 40).batch == p.max_num_seqs
    long = _at(p, 4, 100_000, 256)
    assert (long.prompt_tokens, long.output_tokens) == (p.max_model_len - 1, 1)
    assert load_text(_at(p, 4.4, 900.4, 300.6)) == "4 running, 900 → 301 tokens"


def test_data_parallel_ranks_each_run_the_observed_sequences() -> None:
    p = _plan("dp-ep")
    assert (p.data_parallel_size, p.max_num_seqs) == (16, 1)
    # vLLM's engine label is per data-parallel rank: one sequence per rank is the replica's sixteen.
    at = _at(p, 1)
    assert at.batch == 16
    assert at.itl_ms == pytest.approx(p.itl_estimate_ms, abs=0.05)


def test_no_estimate_without_a_finished_request() -> None:
    assert observed_estimate(_plan("dense"), WorkloadMetrics(running_mean=0.0)) is None
