"""Expert parallelism (issue 24/25): vLLM 0.33's data-parallel attention with the routed experts spread over
DP x TP GPUs, as the planner sizes, costs, chooses and renders it; and the one-line errors of a layout it refuses."""

from __future__ import annotations

import dataclasses

import pytest

from llm_eks.catalog.accelerators import instance_type
from llm_eks.catalog.models import MODELS
from llm_eks.errors import ConfigError
from llm_eks.planner import PlanRequest, plan
from llm_eks.planner.compare import compare
from llm_eks.planner.latency import StepShape, estimate
from llm_eks.planner.latency.hardware import EFA_ALL_REDUCE_US, collective_us
from llm_eks.planner.sizing import Context

DEEPSEEK = "deepseek-ai/DeepSeek-V3"
QWEN_CODER = "Qwen/Qwen3-Coder-480B-A35B-Instruct"
KIMI = "moonshotai/Kimi-K2-Instruct"
# DeepSeek-V3 FP8 on two p5.48xlarge: 16 data-parallel ranks of one GPU, its 256 experts over 16 GPUs.
DP16 = PlanRequest(model=DEEPSEEK, accelerator="p5.48xlarge", max_model_len=32768, data_parallel_size=16,
                   tensor_parallel_size=1)  # fmt: skip


# --- Memory, as vLLM builds it (fused_moe/config.py FusedMoEParallelConfig.make) ------------------------------------


def test_each_gpu_holds_whole_experts_and_all_of_the_attention() -> None:
    p = plan(DP16)
    spec, ctx = p.model, Context(DP16)
    expert = 3 * spec.hidden_size * spec.expert_width  # one expert of one layer: gate, up, down
    routed = (spec.layers - spec.dense_layers) * spec.num_experts * expert * ctx.bytes_per_param
    final_norm = spec.hidden_size * 2
    # TP 1: the attention, dense layers, shared expert and embeddings whole, and 256 / 16 = 16 experts.
    assert p.weight_bytes_per_gpu == pytest.approx(ctx.weight_bytes - final_norm - routed * 15 / 16, abs=4)
    assert 59e9 < p.weight_bytes_per_gpu < 61e9  # 671 B parameters at ~1 byte: 15 GB dense + 41 GB of experts
    assert (p.data_parallel_size, p.data_parallel_size_local, p.expert_parallel_size) == (16, 8, 16)


def test_shared_experts_are_replicated_at_tp_above_one() -> None:
    """With TP > 1 the default all2all makes the MoE sequence-parallel and vLLM builds the shared experts with
    disable_tp (models/deepseek_v2.py): each GPU holds them whole, unlike a TP8 plan's 1/8."""
    tp8 = plan(PlanRequest(model=DEEPSEEK, accelerator="p5en.48xlarge", max_model_len=32768, tensor_parallel_size=8,
                           enable_expert_parallel=False))  # fmt: skip
    ep8 = plan(PlanRequest(model=DEEPSEEK, accelerator="p5en.48xlarge", max_model_len=32768, tensor_parallel_size=8,
                           enable_expert_parallel=True))  # fmt: skip
    spec = tp8.model
    shared = (spec.layers - spec.dense_layers) * 3 * spec.hidden_size * spec.expert_width * (1 + 4 / 128**2)
    assert (ep8.data_parallel_size, ep8.expert_parallel_size) == (1, 8)
    assert ep8.weight_bytes_per_gpu - tp8.weight_bytes_per_gpu == pytest.approx(shared * 7 / 8, rel=1e-6)


def test_mla_kv_is_whole_on_every_rank_and_each_rank_has_its_own_pool() -> None:
    p = plan(dataclasses.replace(DP16, data_parallel_size=4, tensor_parallel_size=4))
    assert p.kv_bytes_per_token_per_gpu == 61 * (512 + 64) * 2  # not divided by TP 4
    per_rank_blocks = p.kv_cache_bytes_per_gpu // (16 * p.kv_bytes_per_token_per_gpu)
    assert p.kv_cache_tokens == 4 * int(per_rank_blocks / (32768 // 16) * 32768)
    assert p.max_concurrency_typical == 4 * (per_rank_blocks // (1280 // 16))


def test_max_num_seqs_and_the_token_budget_are_per_rank() -> None:
    p = plan(dataclasses.replace(DP16, target_concurrency=64))
    # 64 sequences over 16 ranks: 4 each. vLLM's 8192-token default on H100 shared over the 16 ranks (every rank's
    # tokens meet in each MoE layer): 512 per rank.
    assert (p.max_num_seqs, p.max_num_batched_tokens) == (4, 512)
    args = " ".join(p.engine_args)
    assert "--max-num-seqs 4 " in args and "--max-num-batched-tokens 512 " in args


def test_an_ep_size_that_does_not_divide_the_experts_plans() -> None:
    """vLLM 0.33 spreads experts as evenly as it can (expert_map_manager.determine_expert_map) and requires EP to
    divide them only with EPLB, which the plan leaves off: 160 experts over 24 GPUs put 7 on the heaviest."""
    p = plan(PlanRequest(model=QWEN_CODER, accelerator="p5en.48xlarge", max_model_len=32768, data_parallel_size=3,
                         tensor_parallel_size=8, max_nodes_per_replica=3))  # fmt: skip
    assert (p.nodes_per_replica, p.expert_parallel_size) == (3, 24)
    (line,) = [a for a in p.assumptions if a.startswith("expert parallelism")]
    assert "unevenly (16 GPUs hold one more): 7 on the heaviest" in line
    even = plan(PlanRequest(model=QWEN_CODER, accelerator="p5en.48xlarge", max_model_len=32768, data_parallel_size=2,
                            tensor_parallel_size=8))  # fmt: skip
    spec, ctx = even.model, Context(even.request)
    per_expert = (spec.layers - spec.dense_layers) * 3 * spec.hidden_size * spec.expert_width * ctx.bytes_per_param
    assert p.weight_bytes_per_gpu - even.weight_bytes_per_gpu == pytest.approx((7 - 10) * per_expert, abs=4)


# --- Latency -------------------------------------------------------------------------------------------------------


def test_tp_pp_steps_carry_no_expert_collectives() -> None:
    tp = plan(PlanRequest(model=DEEPSEEK, accelerator="p5.48xlarge", max_model_len=32768,
                          enable_expert_parallel=False))  # fmt: skip
    assert (tp.tensor_parallel_size, tp.pipeline_parallel_size, tp.nodes_per_replica) == (8, 2, 2)
    shape = StepShape(batch=16, input_tokens=1024, output_tokens=256, layers_per_stage=31, pipeline_stages=2,
                      tensor_parallel_size=8, dense_bytes=4e10, expert_bytes=0.0, experts_per_token=8,
                      num_experts=256, kv_bytes_per_sequence=6e7, linear_flops_per_token=1e10,
                      decode_attention_flops_per_token=1e9,
                      prefill_attention_flops_per_token=1e9, hidden_size=7168, is_moe=True, is_mla=True,
                      memory_bandwidth_gbps=3350, peak_tflops=1979, interconnect="nvlink", pipeline_hop_us=70.0,
                      token_budget=8192)  # fmt: skip
    with_zero_terms = dataclasses.replace(shape, moe_layers_per_stage=0, moe_collective_us=0.0)
    assert estimate(shape) == estimate(with_zero_terms) and estimate(shape).collectives_ms == 0


def test_expert_collectives_cross_nodes_at_the_measured_efa_cost() -> None:
    """Two p5.48xlarge: each MoE layer all-gathers 16 tokens of hidden state and router logits and reduce-scatters
    16 hidden states; costed from NCCL's all-reduce measured between two p5.48xlarge, linear between 8 B and 1 MiB."""
    p = plan(DP16)
    (sizes, times) = zip(*EFA_ALL_REDUCE_US["p5.48xlarge"][:2], strict=True)

    def measured(size: float) -> float:
        return times[0] + (times[1] - times[0]) * (size - sizes[0]) / (sizes[1] - sizes[0])

    dispatch, combine = 16 * (7168 * 2 + 256 * 4), 16 * 7168 * 2
    per_layer = measured(dispatch) + measured(combine)
    assert per_layer == pytest.approx(2 * 81.8, abs=1.0)  # about 82 us each, near the 69 us floor
    assert collective_us(p.instance, 2, dispatch, 16) == pytest.approx(measured(dispatch))
    (line,) = [a for a in p.assumptions if a.startswith("expert-parallel collectives")]
    assert f"{round(58 * per_layer / 1e3, 1):g} ms of each decode step" in line
    assert "NCCL all-reduce measured between two p5.48xlarge" in line
    # Within one node the same collectives ride NVLink: an order of magnitude cheaper.
    one_node = plan(PlanRequest(model=DEEPSEEK, accelerator="p5en.48xlarge", max_model_len=32768,
                                data_parallel_size=8, tensor_parallel_size=1))  # fmt: skip
    assert collective_us(one_node.instance, 1, dispatch, 8) < 10 < collective_us(p.instance, 2, dispatch, 16)


def test_a_rank_steps_its_share_and_the_replica_produces_all_of_it() -> None:
    p = plan(dataclasses.replace(DP16, target_concurrency=64))
    # 4 sequences per rank, 64 per replica: one output token per sequence each time per output token.
    assert p.output_tokens_per_s == pytest.approx(64 * 1000 / p.tpot_estimate_ms, rel=0.005)


# --- Choosing between TP x PP and DP x EP --------------------------------------------------------------------------


def test_two_pipeline_stages_lose_to_expert_parallelism_for_qwen3_coder_on_p5() -> None:
    """Qwen3-Coder-480B (bf16, 960 GB) needs two p5.48xlarge: TP8 x PP2 runs its two stages one after the other, DP2 x
    TP8 runs both ranks at once with the experts over 16 GPUs, and costs less per million output tokens."""
    p = plan(PlanRequest(model=QWEN_CODER, accelerator="p5.48xlarge", max_model_len=32768))
    assert (p.layout, p.data_parallel_size, p.tensor_parallel_size, p.nodes_per_replica) == ("dp-ep", 2, 8, 2)
    rows = {r.shape: r for r in compare(PlanRequest(model=QWEN_CODER, max_model_len=32768))
            if r.instance_type == "p5.48xlarge"}  # fmt: skip
    assert set(rows) == {"TP8 PP2", "DP2 TP8 EP16"}
    ep, pp = rows["DP2 TP8 EP16"], rows["TP8 PP2"]
    assert ep.usd_per_million_output_tokens is not None and pp.usd_per_million_output_tokens is not None
    assert ep.usd_per_million_output_tokens < pp.usd_per_million_output_tokens and ep.tpot_ms < pp.tpot_ms
    assert (ep.tpot_ms, ep.usd_per_million_output_tokens) == (p.tpot_estimate_ms, 56.5689)


def test_tensor_parallelism_stays_when_it_is_cheaper_per_token() -> None:
    """DeepSeek-V3 on one p5en.48xlarge at 16 sequences: TP8 costs less per token than any DP x EP split (which adds
    its collectives and reads the attention on every rank), so the plan keeps TP8; asking for EP gets it."""
    request = PlanRequest(model=DEEPSEEK, accelerator="p5en.48xlarge", max_model_len=32768)
    assert plan(request).layout == "tp-pp"
    ep = plan(dataclasses.replace(request, enable_expert_parallel=True))
    assert ep.layout == "dp-ep" and ep.gpus_per_replica == 8


def test_deepseek_on_two_p5_and_one_p5en_side_by_side() -> None:
    rows = compare(PlanRequest(model=DEEPSEEK, max_model_len=32768))
    seen = {(r.instance_type, r.layout): r for r in rows}
    for key in (("p5.48xlarge", "tp-pp"), ("p5.48xlarge", "dp-ep"), ("p5en.48xlarge", "tp-pp"),
                ("p5en.48xlarge", "dp-ep")):  # fmt: skip
        row = seen[key]
        assert row.meets_targets and row.usd_per_million_output_tokens is not None and row.tpot_ms > 0
    assert seen[("p5.48xlarge", "tp-pp")].nodes_per_replica == seen[("p5.48xlarge", "dp-ep")].nodes_per_replica == 2
    assert seen[("p5en.48xlarge", "tp-pp")].nodes_per_replica == 1
    # The one-node H200 replica costs less per token than two H100 nodes.
    assert (seen[("p5en.48xlarge", "tp-pp")].usd_per_million_output_tokens or 0) < (
        seen[("p5.48xlarge", "tp-pp")].usd_per_million_output_tokens or 0
    )


def test_high_concurrency_favours_expert_parallelism_for_kimi_k2() -> None:
    """At 512 sequences Kimi-K2's latent cache, whole on every TP rank, outgrows what TP8 holds cheaply: one B200
    node with 8 data-parallel ranks holds 3.5M tokens against TP8's 1.9M on a B300."""
    p = plan(PlanRequest(model=KIMI, max_model_len=32768, target_concurrency=512))
    assert (p.instance_type, p.layout, p.data_parallel_size, p.tensor_parallel_size) == ("p6-b200.48xlarge", "dp-ep",
                                                                                          8, 1)  # fmt: skip
    assert p.meets_target and p.kv_cache_tokens > 3_000_000


def test_auto_plans_of_the_catalog_moe_models_keep_tp_at_the_default_load() -> None:
    for model_id, spec in MODELS.items():
        if spec.is_moe and spec.max_position_embeddings >= 8192:
            request = PlanRequest(model=model_id, max_model_len=8192)
            auto, tp_pp = plan(request), plan(dataclasses.replace(request, enable_expert_parallel=False))
            assert (auto.summary_line(), auto.engine_args) == (tp_pp.summary_line(), tp_pp.engine_args), model_id


# --- Engine arguments of a multi-node data-parallel replica --------------------------------------------------------


def test_every_pod_of_a_two_node_replica_gets_its_data_parallel_flags() -> None:
    p = plan(DP16)
    common = ("--tensor-parallel-size 1 --data-parallel-size 16 --data-parallel-size-local 8 "
              "--data-parallel-rpc-port 29550 --enable-expert-parallel --max-model-len 32768 "
              "--gpu-memory-utilization 0.92 --max-num-seqs 1 --max-num-batched-tokens 512 "
              "--served-model-name deepseek-ai/DeepSeek-V3")  # fmt: skip
    assert " ".join(p.engine_args) == common
    assert "--nnodes" not in common  # data parallelism spans nodes with its own flags, not torch's --nnodes
    leader = "$(LWS_LEADER_ADDRESS)"
    assert " ".join(p.pod_engine_args(0, leader)) == f"{common} --data-parallel-address {leader}"
    assert " ".join(p.pod_engine_args(1, leader)) == (
        f"{common} --headless --data-parallel-start-rank 8 --data-parallel-address {leader}"
    )
    with pytest.raises(ValueError):
        p.pod_engine_args(2, leader)
    body = p.to_dict()
    assert body["pod_resources"] == {"cpu": p.pod_resources.cpu, "memory": p.pod_resources.memory,
                                     "nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}  # fmt: skip
    assert body["parallelism"]["layout"] == "dp-ep" and body["parallelism"]["data_parallel_size_local"] == 8


def test_one_node_data_parallelism_needs_no_per_pod_flags() -> None:
    p = plan(PlanRequest(model=DEEPSEEK, accelerator="p5en.48xlarge", max_model_len=32768, data_parallel_size=8,
                         tensor_parallel_size=1))  # fmt: skip
    args = " ".join(p.engine_args)
    assert args.startswith("--tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel ")
    assert "--data-parallel-size-local" not in args and p.pod_engine_args(0, "x") == p.engine_args
    assert p.efa_interfaces_per_pod == 0 and "vpc.amazonaws.com/efa" not in p.to_dict()["pod_resources"]
    assert p.summary_line().split(": ")[1].startswith("DP8 TP1 EP8, 1 replica/node")


# --- What is refused, in one line ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"model": "meta-llama/Llama-3.1-8B-Instruct", "enable_expert_parallel": True},
            "workload.enable_expert_parallel: True is not allowed; meta-llama/Llama-3.1-8B-Instruct is dense: it has "
            "no experts to spread; leave it out or set it false [LLMEKS-E206]",
        ),
        (
            {"model": "meta-llama/Llama-3.1-8B-Instruct", "data_parallel_size": 2},
            "workload.data_parallel_size: 2 is not allowed; the planner models data parallelism for MoE models "
            "(attention per DP rank, experts over DP x TP); meta-llama/Llama-3.1-8B-Instruct is dense: scale it out "
            "with replicas [LLMEKS-E206]",
        ),
        (
            {"model": DEEPSEEK, "data_parallel_size": 2, "enable_expert_parallel": False},
            "workload.data_parallel_size: 2 is not allowed; without expert parallelism vLLM shards every expert over "
            "DP x TP GPUs (FusedMoEParallelConfig.make), which the planner does not model; set enable_expert_parallel "
            "true or leave data_parallel_size out [LLMEKS-E206]",
        ),
        (
            {"model": DEEPSEEK, "enable_expert_parallel": True, "pipeline_parallel_size": 2},
            "workload.pipeline_parallel_size: 2 is not allowed; the planner models expert parallelism without "
            "pipeline stages: use 1 (or leave it out) with data_parallel_size or enable_expert_parallel [LLMEKS-E206]",
        ),
        (
            {
                "model": "Qwen/Qwen3-30B-A3B",
                "enable_expert_parallel": True,
                "data_parallel_size": 1,
                "tensor_parallel_size": 1,
            },
            "workload.data_parallel_size: 1 is not allowed; expert parallelism needs more than one GPU: vLLM turns it "
            "off unless data_parallel_size x tensor_parallel_size > 1 (FusedMoEParallelConfig.make); raise either"
            " [LLMEKS-E206]",
        ),
        (
            {"model": DEEPSEEK, "accelerator": "p5.48xlarge", "data_parallel_size": 12, "tensor_parallel_size": 1},
            "workload.data_parallel_size: 12 is not allowed; DP12 \N{MULTIPLICATION SIGN} TP1 = 12 GPUs must fit one "
            "p5.48xlarge node (8 GPUs) or whole nodes (a multiple of 8, at most max_nodes_per_replica 2 of them)"
            " [LLMEKS-E206]",
        ),
        (
            {"model": DEEPSEEK, "data_parallel_size": 16, "max_num_seqs": 1, "target_concurrency": 32},
            "workload.max_num_seqs: 1 is not allowed; times data_parallel_size 16 (vLLM applies it per DP rank) must "
            "be at least target_concurrency (32): a replica never runs more than max_num_seqs sequences at once; "
            "lower target_concurrency and scale out with replicas instead [LLMEKS-E206]",
        ),
        (
            {
                "model": DEEPSEEK,
                "accelerator": "p5.48xlarge",
                "max_model_len": 32768,
                "data_parallel_size": 8,
                "tensor_parallel_size": 1,
            },
            "workload.data_parallel_size: 8 is not allowed; deepseek-ai/DeepSeek-V3 at fp8-block does not fit "
            "max_model_len 32768 with DP8 \N{MULTIPLICATION SIGN} TP1 (EP8) on p5.48xlarge (80.0 GiB H100): each GPU "
            "has 70.9 GiB for weights and KV cache (gpu_memory_utilization 0.92 less what vLLM deducts besides "
            "weights) but its share of the weights alone is 93.8 GiB; use more nodes, quantize (weight_format, "
            "kv_cache_dtype) or shorten max_model_len [LLMEKS-E209]",
        ),
        (
            {
                "model": "Qwen/Qwen3-30B-A3B",
                "accelerator": "g6e.xlarge",
                "max_model_len": 8192,
                "data_parallel_size": 2,
                "tensor_parallel_size": 1,
            },
            "workload.data_parallel_size: 2 is not allowed; a replica of Qwen/Qwen3-30B-A3B needs 2 g6e.xlarge nodes "
            "(2\N{MULTIPLICATION SIGN} g6e.xlarge, DP2 TP1 EP2) and g6e.xlarge has no EFA, so the nodes would "
            "exchange activations over TCP; choose an instance type with EFA (such as g6e.8xlarge, g6e.12xlarge, "
            "g6e.16xlarge, g6e.24xlarge, g6e.48xlarge), or accept TCP with acknowledged_warnings llm-eks:plan-no-efa "
            "(allow_without_efa) [LLMEKS-E124]",
        ),
        (
            {"model": DEEPSEEK, "enable_expert_parallel": "yes"},
            "workload.enable_expert_parallel: 'yes' is not allowed; must be true, false or null (the planner chooses)"
            " [LLMEKS-E206]",
        ),
        (
            {"model": DEEPSEEK, "data_parallel_size": 0},
            "workload.data_parallel_size: 0 is not allowed; must be an integer from 1 to 128 [LLMEKS-E202]",
        ),
    ],
)
def test_bad_expert_parallel_requests_are_one_line(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        plan(PlanRequest(**kwargs))  # type: ignore[arg-type]
    assert str(err.value) == message


def test_tcp_between_nodes_is_planned_when_accepted() -> None:
    request = PlanRequest(model="Qwen/Qwen3-30B-A3B", accelerator="g6e.xlarge", max_model_len=8192,
                          data_parallel_size=2, tensor_parallel_size=1, allow_without_efa=True)  # fmt: skip
    p = plan(request)
    assert (p.nodes_per_replica, p.layout, p.efa_interfaces_per_pod) == (2, "dp-ep", 0)
    assert [w.id for w in p.warnings] == ["llm-eks:plan-no-efa"]
    assert p.warnings[0].message == (
        "g6e.xlarge has no EFA: the experts' all-gather and reduce-scatter cross nodes over TCP"
    )


def test_the_efa_counts_are_what_the_pods_request() -> None:
    assert instance_type("p5.48xlarge").efa_interfaces == plan(DP16).efa_interfaces_per_pod == 32
