"""Reproducing a vLLM deployment: explicit tensor_parallel_size, pipeline_parallel_size and max_num_seqs, through
PlanRequest, `llm-eks plan` and a cdk.json workload; each value that cannot work is one line saying why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_eks.cli import main
from llm_eks.config import parse_environment
from llm_eks.errors import ConfigError
from llm_eks.planner import PlanRequest, plan

X = "\N{MULTIPLICATION SIGN}"
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_70B = "meta-llama/Llama-3.3-70B-Instruct"


def error(**kwargs) -> str:
    with pytest.raises(ConfigError) as err:
        plan(PlanRequest(**kwargs))
    assert "\n" not in str(err.value)
    return str(err.value)


# --- Validation of the request ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"tensor_parallel_size": 3},
            "workload.tensor_parallel_size: 3 is not allowed; valid sizes for meta-llama/Llama-3.1-8B-Instruct (up "
            "to 8 GPUs): 1, 2, 4, 8 (its 32 attention heads and 8 KV heads must split evenly, and tensor parallelism "
            "stays inside one node; span nodes with pipeline_parallel_size) [LLMEKS-E206]",
        ),
        (
            {"tensor_parallel_size": 8, "accelerator": "g6e.12xlarge"},
            "workload.tensor_parallel_size: 8 is not allowed; valid sizes for meta-llama/Llama-3.1-8B-Instruct on "
            "g6e.12xlarge (4 GPUs per node): 1, 2, 4 (its 32 attention heads and 8 KV heads must split evenly, and "
            "tensor parallelism stays inside one node; span nodes with pipeline_parallel_size) [LLMEKS-E206]",
        ),
        (
            {"tensor_parallel_size": True},
            "workload.tensor_parallel_size: True is not allowed; valid sizes for meta-llama/Llama-3.1-8B-Instruct (up "
            "to 8 GPUs): 1, 2, 4, 8 (its 32 attention heads and 8 KV heads must split evenly, and tensor parallelism "
            "stays inside one node; span nodes with pipeline_parallel_size) [LLMEKS-E206]",
        ),
        (
            {"pipeline_parallel_size": 40},
            "workload.pipeline_parallel_size: 40 is not allowed; must be an integer from 1 to 32 (each stage holds "
            "at least one of meta-llama/Llama-3.1-8B-Instruct's 32 layers) [LLMEKS-E206]",
        ),
        (
            {"pipeline_parallel_size": 0},
            "workload.pipeline_parallel_size: 0 is not allowed; must be an integer from 1 to 32 (each stage holds "
            "at least one of meta-llama/Llama-3.1-8B-Instruct's 32 layers) [LLMEKS-E206]",
        ),
        (
            {"tensor_parallel_size": 2, "pipeline_parallel_size": 3},
            f"workload.pipeline_parallel_size: 3 is not allowed; TP2 {X} PP3 = 6 GPUs; with accelerator auto a "
            f"replica fills whole nodes, so TP {X} PP must be one of 1, 2, 4, 8, 16 (GPUs per node of a catalog "
            "instance type, times up to max_nodes_per_replica 2 nodes); or name an accelerator [LLMEKS-E206]",
        ),
        (
            {"tensor_parallel_size": 4, "pipeline_parallel_size": 3, "accelerator": "p4d.24xlarge"},
            f"workload.pipeline_parallel_size: 3 is not allowed; TP4 {X} PP3 = 12 GPUs must fit one p4d.24xlarge "
            "node (8 GPUs) or span whole nodes (a multiple of 8) [LLMEKS-E206]",
        ),
        (
            {"tensor_parallel_size": 4, "pipeline_parallel_size": 4, "accelerator": "g6e.12xlarge"},
            f"workload.pipeline_parallel_size: 4 is not allowed; TP4 {X} PP4 = 16 GPUs spans 4 g6e.12xlarge nodes; "
            "max_nodes_per_replica is 2: raise it or use fewer stages [LLMEKS-E206]",
        ),
        (
            {"max_num_seqs": 0},
            "workload.max_num_seqs: 0 is not allowed; must be an integer from 1 to 16384 [LLMEKS-E202]",
        ),
        (
            {"max_num_seqs": 8},
            "workload.max_num_seqs: 8 is not allowed; must be at least target_concurrency (16): a replica never runs "
            "more than max_num_seqs sequences at once; lower target_concurrency and scale out with replicas instead"
            " [LLMEKS-E206]",
        ),
    ],
)
def test_bad_sizes_are_one_line(kwargs: dict, message: str) -> None:
    assert error(model=LLAMA_8B, max_model_len=8192, **kwargs) == message


# --- The search tries only the given shape ---------------------------------------------------------------------------


def test_given_shape_is_the_plan_even_when_the_planner_would_split_less() -> None:
    chosen = plan(PlanRequest(model=LLAMA_8B, accelerator="p4d.24xlarge", max_model_len=8192))
    assert (chosen.tensor_parallel_size, chosen.pipeline_parallel_size) == (1, 1)
    p = plan(PlanRequest(model=LLAMA_8B, accelerator="p4d.24xlarge", max_model_len=8192, tensor_parallel_size=2,
                         pipeline_parallel_size=3))  # fmt: skip
    # 6 of the node's 8 GPUs: one replica per node, and the pod asks for the 6.
    assert (p.tensor_parallel_size, p.pipeline_parallel_size, p.nodes_per_replica) == (2, 3, 1)
    assert (p.replicas_per_node, p.gpus_per_pod) == (1, 6)
    assert p.engine_args[:4] == ("--tensor-parallel-size", "2", "--pipeline-parallel-size", "3")
    assert "parallelism: tensor_parallel_size 2 and pipeline_parallel_size 3 as given; the planner chose the rest" in (
        p.assumptions
    )


def test_given_tp_lets_the_planner_choose_the_stages() -> None:
    # TP1 alone cannot hold Llama 70B bf16 on an H100 (131.4 GiB of weights on one 80 GiB GPU): the planner adds
    # the fewest stages that fit.
    p = plan(PlanRequest(model=LLAMA_70B, accelerator="p5.48xlarge", max_model_len=8192, tensor_parallel_size=1))
    assert (p.tensor_parallel_size, p.pipeline_parallel_size, p.nodes_per_replica) == (1, 2, 1)


def test_given_shape_spans_whole_nodes() -> None:
    p = plan(PlanRequest(model=LLAMA_70B, accelerator="g6e.12xlarge", max_model_len=8192, tensor_parallel_size=4,
                         pipeline_parallel_size=2))  # fmt: skip
    assert (p.nodes_per_replica, p.gpus_per_pod) == (2, 4)
    assert "--nnodes" in p.engine_args


def test_auto_with_a_given_shape_only_considers_nodes_it_fills() -> None:
    p = plan(PlanRequest(model=LLAMA_8B, max_model_len=8192, tensor_parallel_size=4))
    assert p.instance.accelerators == 4 and (p.tensor_parallel_size, p.pipeline_parallel_size) == (4, 1)


def test_given_shape_that_does_not_fit_memory_says_why_with_numbers() -> None:
    message = error(model=LLAMA_70B, accelerator="p5.48xlarge", max_model_len=8192, tensor_parallel_size=1,
                    pipeline_parallel_size=1)  # fmt: skip
    # 141.1 GB of bf16 weights = 131.4 GiB on one GPU; 80 GiB x 0.99 visible x 0.92 less vLLM's deductions: 69.9 GiB.
    assert message == (
        "workload.tensor_parallel_size: 1 is not allowed; meta-llama/Llama-3.3-70B-Instruct at bf16 does not fit "
        f"max_model_len 8192 with TP1 {X} PP1 on p5.48xlarge (80.0 GiB H100): each GPU has 69.9 GiB for weights and "
        "KV cache (gpu_memory_utilization 0.92 less what vLLM deducts besides weights) but its share of the weights "
        "alone is "
        "131.4 GiB; split wider, quantize (weight_format, kv_cache_dtype) or shorten max_model_len [LLMEKS-E209]"
    )


def test_given_shape_that_leaves_too_little_kv_cache_says_how_much() -> None:
    # Llama 8B bf16 at TP1 on an A10G (22.4 GiB): 16.06 GB = 15.0 GiB of weights fit, but one 131,072-token sequence
    # x 128 KiB per token = 16 GiB of KV cache does not.
    message = error(model=LLAMA_8B, accelerator="g5.xlarge", tensor_parallel_size=1, pipeline_parallel_size=1,
                    max_nodes_per_replica=1)  # fmt: skip
    assert message == (
        "workload.tensor_parallel_size: 1 is not allowed; meta-llama/Llama-3.1-8B-Instruct at bf16 does not fit "
        f"max_model_len 131072 with TP1 {X} PP1 on g5.xlarge (22.4 GiB A10G): each GPU has 19.0 GiB for weights "
        "and KV cache (gpu_memory_utilization 0.92 less what vLLM deducts besides weights); its 15.0 GiB of weights "
        "leave 4.04 GiB, "
        "and one 131072-token sequence needs 16.00 GiB of KV cache; split wider, quantize (weight_format, "
        "kv_cache_dtype) or shorten max_model_len [LLMEKS-E209]"
    )


def test_auto_with_a_shape_nothing_holds_names_the_closest_instance() -> None:
    # One-GPU instance types only (the replica fills its node); the 96 GiB RTX PRO 6000 comes closest.
    assert error(model=LLAMA_70B, max_model_len=8192, tensor_parallel_size=1, pipeline_parallel_size=1) == (
        "workload.tensor_parallel_size: 1 is not allowed; meta-llama/Llama-3.3-70B-Instruct at bf16 does not fit "
        f"max_model_len 8192 with TP1 {X} PP1 on g7e.2xlarge (96.0 GiB RTX-PRO-6000): each GPU has 84.5 GiB for "
        "weights and KV cache (gpu_memory_utilization 0.92 less what vLLM deducts besides weights) but its share of "
        "the weights alone is 131.4 GiB; split wider, quantize (weight_format, kv_cache_dtype) or shorten max_model_len"
        " [LLMEKS-E209]"
    )


def test_given_pp_that_no_node_split_takes_is_one_line() -> None:
    # PP3 on a 1-GPU node needs 3 whole nodes, one more than max_nodes_per_replica allows.
    assert error(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192, pipeline_parallel_size=3) == (
        "workload.pipeline_parallel_size: 3 is not allowed; no split with PP3 fits one g6e.xlarge node (1 GPU) "
        "or whole nodes up to max_nodes_per_replica (2) [LLMEKS-E209]"
    )
    # The same stages on a 4-GPU node: TP1 x PP3 uses 3 of its GPUs.
    p = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.12xlarge", max_model_len=8192, pipeline_parallel_size=3))
    assert (p.tensor_parallel_size, p.pipeline_parallel_size, p.gpus_per_pod) == (1, 3, 3)


# --- max_num_seqs ----------------------------------------------------------------------------------------------------


def test_given_max_num_seqs_replaces_the_chosen_one_and_sizes_the_profiling_peak() -> None:
    base = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192))
    assert base.max_num_seqs == 16
    p = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192, max_num_seqs=256))
    assert p.max_num_seqs == 256 and "--max-num-seqs 256" in " ".join(p.engine_args)
    # vLLM's dummy sampler run holds fp32 logits for max_num_seqs rows, twice (240 more rows x 128,256 x 4 B x 2),
    # and its penalty state keeps int32 token counts and a prompt bitmask per request slot (240 x (128,256 + 4,008)).
    assert p.reserve_bytes_per_gpu - base.reserve_bytes_per_gpu == 240 * 128_256 * 4 * 2 + 240 * (128_256 + 4008) * 4
    assert p.kv_cache_tokens < base.kv_cache_tokens
    assert "max_num_seqs 256 as given: vLLM's profiling run (the activation peak above) uses it" in p.assumptions


def test_given_max_num_seqs_raises_the_batched_tokens_vllm_requires() -> None:
    # vLLM requires max_num_batched_tokens >= max_num_seqs (SchedulerConfig); the L40S default is 2048.
    p = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192, max_num_seqs=4096))
    assert p.max_num_batched_tokens == 4096


def test_given_max_num_seqs_above_what_fits_warns_without_capping() -> None:
    p = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192, target_concurrency=200,
                         max_num_seqs=256))  # fmt: skip
    assert p.max_num_seqs == 256
    assert [w.message for w in p.warnings] == [
        f"only {p.max_concurrency_typical} of the 200 target sequences of 1280 tokens fit one replica on g6e.xlarge; "
        "beyond them vLLM preempts sequences (max_num_seqs 256 as given)"
    ]


# --- Through the CLI and cdk.json ------------------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_flags_are_spelled_as_vllm_serve(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "plan", "--model", LLAMA_8B, "--accelerator", "p4d.24xlarge", "--max-model-len",
                         "8192", "--tensor-parallel-size", "4", "--pipeline-parallel-size", "2", "--max-num-seqs",
                         "64", "--json")  # fmt: skip
    assert (code, err) == (0, "")
    body = json.loads(out)
    assert body["parallelism"]["tensor_parallel_size"] == 4 and body["parallelism"]["pipeline_parallel_size"] == 2
    assert body["engine_args"][body["engine_args"].index("--max-num-seqs") + 1] == "64"


def test_cli_bad_size_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "plan", "--model", LLAMA_8B, "--tensor-parallel-size", "3") == (
        2,
        "",
        "llm-eks: error: workload.tensor_parallel_size: 3 is not allowed; valid sizes for "
        "meta-llama/Llama-3.1-8B-Instruct (up to 8 GPUs): 1, 2, 4, 8 (its 32 attention heads and 8 KV heads must "
        "split evenly, and tensor parallelism stays inside one node; span nodes with pipeline_parallel_size)"
        " [LLMEKS-E206]\n",
    )
    assert run(capsys, "plan", "--model", LLAMA_8B, "--max-num-seqs", "0")[2] == (
        "llm-eks: error: workload.max_num_seqs: 0 is not allowed; must be an integer from 1 to 16384 [LLMEKS-E202]\n"
    )
    assert run(capsys, "plan", "--model", LLAMA_8B, "--pipeline-parallel-size", "x")[2] == (
        "llm-eks: error: argument --pipeline-parallel-size: invalid int value: 'x' [LLMEKS-E600]\n"
    )


def test_cdk_json_workload_carries_the_sizes() -> None:
    config = parse_environment("dev", {"workload": {"accelerator": "p4d.24xlarge", "tensor_parallel_size": 2,
                                                     "pipeline_parallel_size": 2, "max_num_seqs": 32}})  # fmt: skip
    request = config.workload.plan_request()
    assert (request.tensor_parallel_size, request.pipeline_parallel_size, request.max_num_seqs) == (2, 2, 32)
    p = plan(request)
    assert (p.tensor_parallel_size, p.pipeline_parallel_size, p.max_num_seqs) == (2, 2, 32)


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        (
            {"tensor_parallel_size": "2"},
            "environments.dev.workload.tensor_parallel_size: '2' is not allowed; must be an integer [LLMEKS-E105]",
        ),
        (
            {"tensor_parallel_size": 5},
            "environments.dev.workload.tensor_parallel_size: 5 is not allowed; valid sizes for "
            "meta-llama/Llama-3.1-8B-Instruct (up to 8 GPUs): 1, 2, 4, 8 (its 32 attention heads and 8 KV heads must "
            "split evenly, and tensor parallelism stays inside one node; span nodes with pipeline_parallel_size)"
            " [LLMEKS-E206]",
        ),
        (
            {"max_num_seqs": 4},
            "environments.dev.workload.max_num_seqs: 4 is not allowed; must be at least target_concurrency (16): a "
            "replica never runs more than max_num_seqs sequences at once; lower target_concurrency and scale out "
            "with replicas instead [LLMEKS-E206]",
        ),
    ],
)
def test_cdk_json_bad_sizes_name_the_environment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, workload: dict, message: str
) -> None:
    context = tmp_path / "cdk.json"
    context.write_text(json.dumps({"context": {"environments": {"dev": {"workload": workload}}}}))
    code, out, err = run(capsys, "plan", "--env", "dev", "--context-file", str(context))
    assert (code, out, err) == (2, "", f"llm-eks: error: {message}\n")
