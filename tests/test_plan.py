"""The planner on figures anyone can check by hand (the arithmetic is in each test), its choices and its errors."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from llm_eks.catalog.accelerators import CATALOG as INSTANCES
from llm_eks.catalog.accelerators import instance_type
from llm_eks.catalog.models import CONFIG_MODELS, MODELS, ModelSpec, estimate_parameters
from llm_eks.errors import ConfigError
from llm_eks.planner import GIB, PlanRequest, PlanWarning, plan, valid_tensor_parallel_sizes
from llm_eks.planner.cold_start import ColdStart
from llm_eks.planner.sizing import Context

X = "\N{MULTIPLICATION SIGN}"  # the sign in "1x L40S"
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_70B = "meta-llama/Llama-3.3-70B-Instruct"
QWEN_7B = "Qwen/Qwen2.5-7B-Instruct"
STALE = ("VLLM_USE_V1", "--enable-chunked-prefill", "--enable-prefix-caching", "awq")


def error(**kwargs) -> str:
    with pytest.raises(ConfigError) as err:
        plan(PlanRequest(**kwargs))
    message = str(err.value)
    assert "\n" not in message
    return message


# --- Hand-checkable figures -----------------------------------------------------------------------------------------


def test_llama_8b_bf16_weights_and_kv_per_token() -> None:
    p = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192))
    # 8,030,261,248 parameters x 2 bytes = 16,060,522,496 B, about 16.1 GB.
    assert p.weight_bytes == 8_030_261_248 * 2 == 16_060_522_496
    assert round(p.weight_bytes / 1e9, 1) == 16.1
    # 2 (K and V) x 32 layers x 8 KV heads x 128 head dim x 2 bytes = 131,072 B = 128 KiB per token.
    assert p.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2 == 131_072 == 128 * 1024


def test_llama_70b_bf16_needs_at_least_two_80_gb_gpus() -> None:
    p = plan(PlanRequest(model=LLAMA_70B, accelerator="p5.48xlarge", max_model_len=8192, target_concurrency=1))
    # 70,553,706,496 x 2 = 141,107,412,992 B, about 141 GB: more than one 80 GiB (85.9 GB) H100 holds.
    assert p.weight_bytes == 70_553_706_496 * 2 == 141_107_412_992
    assert p.weight_bytes > instance_type("p5.48xlarge").accelerator_memory_bytes
    # 2 x 80 layers x 8 KV heads x 128 x 2 bytes = 327,680 B = 320 KiB per token.
    assert p.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2 == 327_680 == 320 * 1024
    assert p.tensor_parallel_size == 2 and p.gpus_per_replica == 2
    # TP2 splits the KV heads: 327,680 / 2 = 163,840 B per token on each GPU.
    assert p.kv_bytes_per_token_per_gpu == 163_840
    assert p.replicas_per_node == 8 // 2


def test_one_h100_cannot_hold_llama_70b_bf16() -> None:
    # No shorter context helps (131.4 GiB of weights alone); each change listed is planned, cheapest first.
    assert error(model=LLAMA_70B, accelerator="p5.4xlarge", max_model_len=8192, max_nodes_per_replica=1) == (
        "workload.accelerator: 'p5.4xlarge' is not allowed; meta-llama/Llama-3.3-70B-Instruct at bf16 "
        "(141.1 GB of weights, 320 KiB of KV cache per token) does not fit max_model_len 8192 on 1 node of "
        f"1{X} H100 (80.0 GiB each); what fits instead, cheapest first ($/h to hold target_concurrency 16 "
        "sequences of 1280 tokens): 1) weight_format awq-int4: p5.4xlarge, 84 sequences a replica, $6.88/h; "
        "2) accelerator g7e.12xlarge: 99 sequences a replica, $8.29/h; 3) weight_format fp8 and kv_cache_dtype "
        "fp8: p5.4xlarge, 11 sequences a replica, 2 replicas, $13.76/h; 4) max_nodes_per_replica 2: "
        f"2{X} p5.4xlarge over EFA, 21 sequences a replica, $13.76/h [LLMEKS-E209]"
    )


def test_quantized_weight_bytes() -> None:
    embeddings = 2 * 128_256 * 4096  # input embedding + output projection, kept 16-bit: 1,050,673,152 parameters
    rest = 8_030_261_248 - embeddings  # 6,979,588,096 quantized parameters
    fp8 = plan(PlanRequest(model=LLAMA_8B, weight_format="fp8", accelerator="g6e.xlarge", max_model_len=8192))
    assert fp8.weight_bytes == rest * 1 + embeddings * 2 == 9_080_934_400
    awq = plan(PlanRequest(model=LLAMA_8B, weight_format="awq-int4", accelerator="g6e.xlarge", max_model_len=8192))
    # 4-bit weights plus, per group of 128, a 2-byte scale and a 4-bit zero: 0.5 + 2.5 / 128 = 0.51953125 B.
    assert awq.weight_bytes == rest * 0.51953125 + embeddings * 2 == 5_727_460_432
    assert awq.checkpoint == "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"


def test_fp8_kv_cache_halves_bytes_per_token() -> None:
    auto = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192))
    fp8 = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192, kv_cache_dtype="fp8"))
    assert fp8.kv_bytes_per_token == 2 * 32 * 8 * 128 * 1 == auto.kv_bytes_per_token // 2
    assert fp8.kv_cache_tokens > 1.99 * auto.kv_cache_tokens
    assert fp8.engine_args[fp8.engine_args.index("--kv-cache-dtype") :][:2] == ("--kv-cache-dtype", "fp8")


def test_kv_cache_tokens_as_vllm_sizes_them() -> None:
    """vLLM 0.33's accounting by hand (memory.py, kv_cache.py): budget = ceil(CUDA's total x 0.92); less weights,
    the sampler's penalty state, non-torch workspaces, the profiling peak and the CUDA-graph estimate; blocks of 16
    tokens x 32 layers."""
    p = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192))
    gpu = 45_776 * 1024**2  # L40S as EC2 reports it: 47,999,614,976 B
    requested = math.ceil(int(gpu * 0.99) * 0.92)
    peak = 2048 * (4 * 4096 * 2 + 3 * 2 * 14336) + 16 * 128_256 * 4 * 2  # 2048 batched tokens, 16 sequences
    sampler = 16 * (128_256 + 4008) * 4  # int32 output-token counts and the prompt bitmask, 16 request slots
    reserve = sampler + int(0.67 * GIB) + peak + int(0.44 * GIB)
    assert p.reserve_bytes_per_gpu == reserve == 1_460_004_720
    assert p.usable_bytes_per_gpu == requested - reserve == 42_258_044_600
    kv_bytes = p.usable_bytes_per_gpu - p.weight_bytes_per_gpu
    block = 32 * 16 * 2 * 8 * 128 * 2  # 32 layers x 16 tokens x K and V x 8 KV heads x 128 x bf16
    assert p.kv_cache_tokens == kv_bytes // block * 16 == 199_856
    assert p.max_concurrency_typical == 12_495 // ((1024 + 256) // 16) == 156
    assert p.max_concurrency_full_context == 12_495 // (8192 // 16) == 24
    assert p.summary_line() == (
        f"Llama-3.1-8B-Instruct on g6e.xlarge (1{X} L40S): TP1 PP1, 1 replica/node, KV 200k tokens, $1.86/h per replica"
    )


# --- Tensor and pipeline parallelism --------------------------------------------------------------------------------


def test_tensor_parallel_sizes_follow_vllm_rule() -> None:
    assert valid_tensor_parallel_sizes(MODELS[LLAMA_8B], 8) == (1, 2, 4, 8)
    # Qwen2.5-7B has 28 attention heads: 28 % 8 != 0, so TP 8 is out.
    assert valid_tensor_parallel_sizes(MODELS[QWEN_7B], 8) == (1, 2, 4)
    base = MODELS[LLAMA_8B]
    # 16 heads, 2 KV heads: TP 4 and 8 replicate the KV heads (TP a multiple of 2) and are valid.
    gqa = dataclasses.replace(base, attention_heads=16, kv_heads=2)
    assert valid_tensor_parallel_sizes(gqa, 8) == (1, 2, 4, 8)
    # 12 heads, 3 KV heads: TP 2 cannot split 3 KV heads, TP 4 is no multiple of 3.
    odd = dataclasses.replace(base, attention_heads=12, kv_heads=3)
    assert valid_tensor_parallel_sizes(odd, 8) == (1,)
    assert valid_tensor_parallel_sizes(MODELS[LLAMA_8B], 4) == (1, 2, 4)


def test_heads_cap_tp_so_pipeline_stages_fill_the_node() -> None:
    # 28 heads cap TP at 4 on an 8-GPU node; to reach more KV cache the other 4 GPUs become a second stage.
    p = plan(PlanRequest(model=QWEN_7B, accelerator="g6e.48xlarge", max_model_len=32768, target_concurrency=4096))
    assert (p.tensor_parallel_size, p.pipeline_parallel_size, p.nodes_per_replica) == (4, 2, 1)
    assert p.gpus_per_pod == 8 and p.replicas_per_node == 1
    assert not p.meets_target and p.max_num_seqs == p.max_concurrency_typical


def test_pipeline_across_nodes_when_one_node_is_too_small() -> None:
    p = plan(PlanRequest(model=LLAMA_70B, accelerator="p5.4xlarge", max_model_len=8192, target_concurrency=32))
    assert (p.tensor_parallel_size, p.pipeline_parallel_size, p.nodes_per_replica) == (1, 2, 2)
    assert p.gpus_per_pod == 1 and p.replicas_per_node == 1
    args = " ".join(p.engine_args)
    assert "--pipeline-parallel-size 2" in args and "--nnodes 2" in args
    # Each stage holds 40 of the 80 layers: 2 x 40 x 8 x 128 x 2 = 163,840 B of KV per token per GPU.
    assert p.kv_bytes_per_token_per_gpu == 163_840
    # 21 sequences fit, short of the 32 asked for: the plan says so and caps max_num_seqs.
    assert not p.meets_target and p.max_num_seqs == p.max_concurrency_typical == 21
    assert p.warnings == (
        PlanWarning(
            "llm-eks:plan-concurrency",
            "only 21 of the 32 target sequences of 1280 tokens fit one replica on p5.4xlarge; "
            "max_num_seqs is capped at 21",
        ),
    )
    assert p.cost_per_replica_hour == round(6.88 * 2, 4)


def test_pipeline_stages_without_efa_are_refused_unless_accepted() -> None:
    request = PlanRequest(model="Qwen/Qwen2.5-72B-Instruct", weight_format="awq-int4", accelerator="g6e.xlarge",
                          max_model_len=8192)  # fmt: skip
    with pytest.raises(ConfigError) as err:
        plan(request)
    assert str(err.value) == (
        "workload.accelerator: 'g6e.xlarge' is not allowed; a replica of Qwen/Qwen2.5-72B-Instruct at max_model_len "
        f"8192 needs 2 g6e.xlarge nodes (2{X} g6e.xlarge, TP1 PP2) and g6e.xlarge has no EFA, so the nodes would "
        "exchange activations over TCP; what fits instead, cheapest first ($/h to hold target_concurrency 16 "
        "sequences of 1280 tokens): 1) accelerator g7e.2xlarge: 117 sequences a replica, $3.36/h; 2) max_model_len "
        "1536 (the longest round length that fits): g6e.xlarge, 1 sequence a replica, 16 replicas, $29.78/h; "
        f"3) accelerator g6e.8xlarge: 2{X} g6e.8xlarge over EFA, 101 sequences a replica, $9.06/h; "
        "4) acknowledged_warnings llm-eks:plan-no-efa (allow_without_efa): "
        f"2{X} g6e.xlarge over TCP, 101 sequences a replica, $3.72/h [LLMEKS-E209]"
    )
    p = plan(dataclasses.replace(request, allow_without_efa=True))
    assert p.nodes_per_replica == 2 and p.checkpoint == "Qwen/Qwen2.5-72B-Instruct-AWQ"
    assert p.efa_interfaces_per_pod == 0
    assert (
        PlanWarning("llm-eks:plan-no-efa", "g6e.xlarge has no EFA: pipeline stages exchange activations over TCP")
        in p.warnings
    )


# --- Choosing an instance -------------------------------------------------------------------------------------------


def test_auto_picks_the_cheapest_instance_that_meets_the_targets() -> None:
    p = plan(PlanRequest(model=LLAMA_8B, weight_format="bf16", max_model_len=8192, target_concurrency=16))
    assert p.instance_type == "g6.xlarge" and p.cost_per_replica_hour == 0.8048
    assert p.max_concurrency_typical >= 16 and p.max_concurrency_full_context >= 1
    # No cheaper single-GPU NVIDIA instance with a price exists in the catalog.
    cheaper = [i for i in INSTANCES if i.on_demand_usd_per_hour is not None and i.on_demand_usd_per_hour < 0.8048]
    assert all(i.accelerator_vendor == "neuron" for i in cheaper)


def test_auto_respects_a_latency_ceiling() -> None:
    # The L4 reads 16.06 GB of weights per token at 300 GB/s: ~82 ms. An A10G (600 GB/s) halves that.
    slow = plan(PlanRequest(model=LLAMA_8B, max_model_len=8192))
    assert slow.itl_estimate_ms > 60
    fast = plan(PlanRequest(model=LLAMA_8B, max_model_len=8192, max_itl_ms=60))
    assert fast.instance_type == "g5.xlarge" and fast.itl_estimate_ms <= 60


def test_auto_never_picks_gpus_without_a_price_or_neuron() -> None:
    for model_id in MODELS:
        p = plan(PlanRequest(model=model_id, max_model_len=8192, weight_format="auto"))
        assert p.instance.on_demand_usd_per_hour is not None and p.instance.accelerator_vendor == "nvidia"
        assert p.replicas_per_node == 1, "auto replicas fill their node"


def test_explicit_instance_packs_replicas_and_splits_the_node() -> None:
    p = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.12xlarge", max_model_len=8192))
    assert (p.tensor_parallel_size, p.replicas_per_node) == (1, 4)
    # (47,810m allocatable - 1,000m for DaemonSets) / 4 pods = 11,702m, rounded down to 10m.
    assert p.pod_resources.cpu == "11700m"
    # (360,157 MiB - 2,048 MiB) / 4 = 89,527 MiB.
    assert p.pod_resources.memory == "89527Mi"
    assert p.cost_per_replica_hour == round(10.49264 / 4, 4)
    assert p.extended_resource == "nvidia.com/gpu" and p.gpus_per_pod == 1


# --- Engine arguments and cold start --------------------------------------------------------------------------------


def test_engine_args_for_fp8_on_a_bf16_checkpoint() -> None:
    p = plan(PlanRequest(model=LLAMA_70B, weight_format="fp8", accelerator="p5.48xlarge", max_model_len=16384,
                         target_concurrency=32))  # fmt: skip
    assert p.engine_args == (
        "--tensor-parallel-size", str(p.tensor_parallel_size),
        "--max-model-len", "16384",
        "--gpu-memory-utilization", "0.92",
        "--quantization", "fp8",
        "--max-num-seqs", "32",
        "--max-num-batched-tokens", "8192",
        "--served-model-name", LLAMA_70B,
    )  # fmt: skip
    assert p.checkpoint_bytes == 141_107_412_992, "vLLM reads the 16-bit files and quantizes while loading"


def test_engine_args_never_carry_stale_switches() -> None:
    for fmt in ("bf16", "fp8", "awq-int4"):
        p = plan(PlanRequest(model=LLAMA_8B, weight_format=fmt, kv_cache_dtype="fp8", max_model_len=8192))
        joined = " ".join(p.engine_args)
        assert not any(flag in joined for flag in STALE), joined
        assert "--quantization" not in joined or fmt == "fp8"


def test_cold_start_by_weights_source() -> None:
    def weights(source: str) -> float:
        request = PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192, weights_source=source)
        return plan(request).cold_start.weights_s

    # nvme: download 16.06 GB at min(200 MB/s, 80 % of 2.5 Gbit/s = 250 MB/s) = 80.3 s, then read at 2 GB/s = 8.0 s.
    assert weights("nvme") == round(16_060_522_496 / 200e6 + 16_060_522_496 / 2e9) == 88
    # s3: Run:ai streamer at min(2 GB/s, 250 MB/s) = 64.2 s.
    assert weights("s3") == round(16_060_522_496 / 250e6) == 64
    # ebs: gp3 at min(1000 MiB/s, 90 % of 5000 Mbit/s = 562.5 MB/s) = 28.6 s.
    assert weights("ebs") == round(16_060_522_496 / 562.5e6) == 29
    cold = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192)).cold_start
    # 12 GB image in parallel (SOCI) at 240 MB/s = 50 s; warm-up 100 s for one GPU.
    assert (cold.image_pull_s, cold.warmup_s, cold.total_s, cold.startup_s) == (50, 100, 238, 188)


def test_cold_start_by_image_source_and_every_path_side_by_side() -> None:
    def cold(source: str) -> ColdStart:
        return plan(
            PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192, image_source=source)
        ).cold_start

    # containerd's default pull at 72 MB/s (AWS's measurement) = 166.7 s; a restored snapshot 5 s.
    assert (cold("pull").image_pull_s, cold("snapshot").image_pull_s) == (167, 5)
    # The startup probe (weights + warm-up) never includes the image; the scale-out (KEDA's stabilization) does.
    assert cold("pull").startup_s == cold("snapshot").startup_s == 188
    assert cold("pull").scale_out_s - cold("snapshot").scale_out_s == 167 - 5
    p = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192, weights_source="s3"))
    paths = p.cold_start_paths
    # Three image sources on a new node and the placeholder's pulled image on a warm one, for each of 3 weight paths.
    assert len(paths) == 12 and [c.in_use for c in paths].count(True) == 1
    first = paths[0]
    assert (first.weights_source, first.image_source, first.warm_node, first.in_use) == (
        "s3",
        "parallel-pull",
        False,
        True,
    )
    assert first.total_s == p.cold_start.scale_out_s
    fastest = min(paths, key=lambda c: c.total_s)
    # Staged S3 streaming with the compile cache restored on a warm node, whose placeholder pulled the image:
    # 0 + 0 + 64.3 + (20 + 60 x 9/19 + 20 = 68.4) = 132.7.
    assert (fastest.weights_source, fastest.image_source, fastest.warm_node, fastest.total_s) == (
        "staged",
        "headroom",
        True,
        133,
    )
    assert {c.image_s for c in paths if c.warm_node} == {0}
    # The cache takes 60 x 10/19 = 31.6 s off the warm-up; the startup probe still allows an empty cache.
    cached = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192, weights_source="staged"))
    assert (p.cold_start.warmup_s, cached.cold_start.warmup_s) == (100, 68)
    assert cached.cold_start.startup_s == p.cold_start.startup_s
    for c in paths:  # each term is rounded on its own, the total from the unrounded sum
        assert abs(c.total_s - (c.node_s + c.image_s + c.weights_s + c.warmup_s)) <= 1


def test_plan_is_json_ready_and_deterministic() -> None:
    request = PlanRequest(model=LLAMA_70B, weight_format="fp8", max_model_len=16384, target_concurrency=32)
    first, second = plan(request), plan(request)
    assert first == second
    body = json.loads(json.dumps(first.to_dict()))
    assert body["parallelism"]["gpus_per_replica"] == first.gpus_per_replica
    assert body["pod_resources"]["nvidia.com/gpu"] == first.gpus_per_pod
    assert body["summary"] == first.summary_line()


def test_model_spec_from_config_plans_like_the_catalog() -> None:
    spec = ModelSpec.from_mapping(
        {"id": "acme/llama-clone", "layers": 32, "hidden_size": 4096, "attention_heads": 32, "kv_heads": 8,
         "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072}
    )  # fmt: skip
    assert spec.parameters == 8_030_261_248  # estimated from the architecture, exactly the published count
    clone = plan(PlanRequest(model=spec, accelerator="g6e.xlarge", max_model_len=8192))
    real = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192))
    assert clone.kv_cache_tokens == real.kv_cache_tokens
    assert clone.served_model_name == "acme/llama-clone"


# --- Errors ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"weight_format": "int8"},
            "workload.weight_format: 'int8' is not allowed; did you mean 'w8a8-int8'? allowed: auto, bf16, fp8, "
            "fp8-block, mxfp4, nvfp4, gptq-int4, awq-int4, w4a16, w8a8-int8, w8a8-fp8, w4a16-experts [LLMEKS-E205]",
        ),
        (
            {"kv_cache_dtype": "fp16"},
            "workload.kv_cache_dtype: 'fp16' is not allowed; allowed: auto, fp8 [LLMEKS-E202]",
        ),
        (
            {"max_model_len": 200_000},
            "workload.max_model_len: 200000 is not allowed; must be an integer from 1 to 131072 [LLMEKS-E202]",
        ),
        (
            {"max_model_len": 1000},
            "workload.max_model_len: 1000 is not allowed; must hold the typical request "
            "(typical_input_tokens + typical_output_tokens = 1280) [LLMEKS-E202]",
        ),
        (
            {"gpu_memory_utilization": 0},
            "workload.gpu_memory_utilization: 0 is not allowed; must be a number above 0 and at most 1 [LLMEKS-E202]",
        ),
        (
            {"target_concurrency": 0},
            "workload.target_concurrency: 0 is not allowed; must be an integer from 1 to 4096 [LLMEKS-E202]",
        ),
        (
            {"weights_source": "efs"},
            "workload.weights_source: 'efs' is not allowed; did you mean 'ebs'? allowed: nvme, s3, staged, ebs"
            " [LLMEKS-E202]",
        ),
        (
            {"max_nodes_per_replica": 0},
            "workload.max_nodes_per_replica: 0 is not allowed; must be an integer from 1 to 16 [LLMEKS-E202]",
        ),
        (
            {"model": "mistralai/Mistral-7B-Instruct-v0.3", "accelerator": "inf2.8xlarge"},
            "workload.model: 'mistralai/Mistral-7B-Instruct-v0.3' is not allowed; MistralForCausalLM is not served on "
            "inf2.8xlarge: its engine path is nxd-inference (vllm-neuron 0.5.3 with NxD Inference 0.10.18399 on vLLM "
            "0.16.0, Neuron SDK 2.31.1), which serves Llama 2/3.1/3.3 (LlamaForCausalLM), Llama 4 "
            "(Llama4ForConditionalGeneration), Qwen 2.5 (Qwen2ForCausalLM), Qwen 3 (Qwen3ForCausalLM), Qwen2-VL "
            "(Qwen2VLForConditionalGeneration), Qwen3-VL (Qwen3VLForConditionalGeneration), Pixtral "
            "(LlavaForConditionalGeneration); GPU instance types (accelerator auto) can serve it [LLMEKS-E211]",
        ),
        (
            {"model": "meta-llama/Llama-3.1-8B"},
            "workload.model: 'meta-llama/Llama-3.1-8B' is not allowed; did you mean "
            f"'meta-llama/Llama-3.1-8B-Instruct'? catalog models: {', '.join(MODELS)} "
            "(describe any other model with workload.model_spec) [LLMEKS-E200]",
        ),
        (
            {"model": "mistralai/Mistral-7B-Instruct-v0.3", "weight_format": "awq-int4"},
            "workload.weight_format: 'awq-int4' is not allowed; no AWQ checkpoint of "
            "mistralai/Mistral-7B-Instruct-v0.3 is known; serve an AWQ repo as the model, described with "
            "workload.model_spec (quantization: awq-int4), or use bf16 or fp8 [LLMEKS-E205]",
        ),
        ({"model": 5}, "workload.model: 5 is not allowed; must be a catalog model id or a ModelSpec [LLMEKS-E202]"),
        (
            {"max_model_len": 8192, "max_itl_ms": 0.5},
            "workload.max_itl_ms: 0.5 is not allowed; the lowest time-per-output-token estimate at 16 concurrent "
            "sequences is 2.3 ms (on p6-b200.48xlarge, TP8 PP1); raise it, lower target_concurrency or use fp8 "
            "weights [LLMEKS-E210]",
        ),
    ],
)
def test_bad_requests_name_the_field(kwargs: dict, message: str) -> None:
    assert error(**{"model": LLAMA_8B, **kwargs}) == message


def test_quantized_checkpoint_keeps_its_format() -> None:
    fp8_repo = dataclasses.replace(MODELS[LLAMA_8B], id="acme/llama-fp8", quantization="fp8")
    assert error(model=fp8_repo, weight_format="bf16") == (
        "workload.weight_format: 'bf16' is not allowed; acme/llama-fp8 is already quantized (fp8); use auto or fp8"
        " [LLMEKS-E205]"
    )
    p = plan(PlanRequest(model=fp8_repo, accelerator="g6e.xlarge", max_model_len=8192))
    assert p.weight_format == "fp8" and "--quantization" not in p.engine_args


def test_instance_store_too_small_for_the_checkpoint() -> None:
    fp32 = dataclasses.replace(MODELS[LLAMA_70B], id="acme/llama-70b-fp32", native_dtype="float32")
    assert error(
        model=fp32, weight_format="fp8", accelerator="g6e.xlarge", max_nodes_per_replica=4, max_model_len=4096
    ) == (
        "workload.weights_source: 'nvme' is not allowed; the 282.2 GB checkpoint (plus 10 % headroom) does not fit "
        "the 250 GB instance store of g6e.xlarge; use s3 or ebs [LLMEKS-E209]"
    )


def test_nothing_fits_anywhere() -> None:
    huge = dataclasses.replace(MODELS[LLAMA_70B], id="acme/huge", parameters=4_000_000_000_000, awq_checkpoint=None)
    assert error(model=huge, max_nodes_per_replica=1) == (
        "workload.model: 'acme/huge' is not allowed; at bf16 (8000.0 GB of weights) it fits no catalog instance "
        "type at max_model_len 131072 across up to 1 node(s) per replica; what fits instead, cheapest first ($/h to "
        "hold target_concurrency 16 sequences of 1280 tokens): 1) max_nodes_per_replica 4: "
        f"4{X} p6-b300.48xlarge over EFA, 755 sequences a replica, $569.66/h [LLMEKS-E209]"
    )
    # 80 TB at bf16, 40 TB at fp8: more than 16 nodes of 8 B300s hold. The error says what it tried.
    larger = dataclasses.replace(huge, parameters=40_000_000_000_000)
    assert error(model=larger).endswith(
        "it fits no catalog instance type at max_model_len 131072 across up to 2 node(s) per replica; nothing the "
        "planner tried fits either (a shorter max_model_len, kv_cache_dtype fp8, weight_format fp8, more nodes per "
        "replica) [LLMEKS-E209]"
    )


def test_target_beyond_any_instance() -> None:
    assert error(
        model=LLAMA_8B,
        max_model_len=8192,
        target_concurrency=4096,
        max_nodes_per_replica=1,
        typical_input_tokens=8000,
        typical_output_tokens=192,
    ) == (
        "workload.target_concurrency: 4096 is not allowed; at most 1880 sequences of 8192 tokens fit one replica "
        "(on p6-b300.48xlarge, TP8 PP1); lower it, shorten the typical request or use kv_cache_dtype fp8, and "
        "scale out with replicas instead [LLMEKS-E210]"
    )


# --- Model catalog cross-checks -------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [s for s in MODELS.values() if s.id not in CONFIG_MODELS], ids=lambda s: s.id)
def test_catalog_parameter_counts_match_the_architecture(spec: ModelSpec) -> None:
    # The published totals follow exactly from config.json (Qwen2 adds q/k/v biases), a check on every row.
    qkv_bias = spec.id.startswith(("Qwen/", "deepseek-ai/DeepSeek-R1-Distill-Qwen"))
    assert spec.parameters == estimate_parameters(
        layers=spec.layers, hidden_size=spec.hidden_size, attention_heads=spec.attention_heads,
        kv_heads=spec.kv_heads, head_dim=spec.head_dim, intermediate_size=spec.intermediate_size,
        vocab_size=spec.vocab_size, tie_word_embeddings=spec.tie_word_embeddings, num_experts=spec.num_experts,
        qkv_bias=qkv_bias,
    )  # fmt: skip
    assert spec.validate() is spec


# Published totals (each model card; DeepSeek-V3's 671 B excludes its 14 B multi-token-prediction module, which vLLM
# loads only for speculative decoding) and the active parameters per token where the card gives them.
PUBLISHED = {
    "openai/gpt-oss-20b": (20.91e9, None),
    "openai/gpt-oss-120b": (116.83e9, None),
    "Qwen/Qwen3-8B": (8.2e9, None),
    "Qwen/Qwen3-32B": (32.8e9, None),
    "Qwen/Qwen3-30B-A3B": (30.5e9, 3.3e9),
    "Qwen/Qwen3-235B-A22B": (235e9, 22e9),
    "deepseek-ai/DeepSeek-V3": (671e9, 37e9),
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": (400e9, 17e9),
}
# Multimodal checkpoints, exactly: decoder plus the vision encoder and projector vLLM loads (catalog/vision.py), against
# the Hugging Face safetensors parameter counts (catalog/configs/SOURCES.md names where each was read).
MULTIMODAL = {
    "google/gemma-3-27b-it": (27_432_406_640, 423_060_336),
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503": (24_011_361_280, 438_958_080),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": (108_641_793_536, 871_932_416),
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": (401_583_781_376, 871_932_416),
}


# Vision-language configs outside the catalog (tests/fixtures/vl_configs/SOURCES.md names each copy and count).
VL_CONFIGS = {
    "Qwen/Qwen2.5-VL-7B-Instruct": (8_292_166_656, 676_550_144),
    "Qwen/Qwen3-VL-8B-Instruct": (8_767_123_696, 576_388_336),
    "Qwen/Qwen3-VL-30B-A3B-Instruct": (31_070_754_032, 538_631_408),
}


def _vl_spec(model_id: str) -> ModelSpec:
    """A vision-language model read from its config.json in tests/fixtures/vl_configs, as --model-config reads it."""
    path = Path(__file__).parent / "fixtures" / "vl_configs" / f"{model_id.replace('/', '__')}.json"
    return ModelSpec.from_hf_config(path, id=model_id)


@pytest.mark.parametrize(("model_id", "counts"), MULTIMODAL.items())
def test_multimodal_checkpoints_count_their_vision_encoder_exactly(model_id: str, counts: tuple[int, int]) -> None:
    spec = MODELS[model_id]
    assert (spec.parameters, spec.vision_parameters) == counts


@pytest.mark.parametrize(("model_id", "counts"), VL_CONFIGS.items())
def test_qwen_vision_language_configs_count_exactly(model_id: str, counts: tuple[int, int]) -> None:
    """Qwen2.5-VL (decoder at the top level, Qwen2 biases) and Qwen3-VL (decoder under text_config, q/k norms,
    deepstack mergers), read from their config.json as `llm-eks plan --model-config` does."""
    spec = _vl_spec(model_id)
    assert (spec.parameters, spec.vision_parameters) == counts
    assert spec.deepstack_levels == (3 if "Qwen3" in model_id else 0)
    assert plan(PlanRequest(model=spec, max_model_len=8192)).kv_cache_tokens > 0


def test_qwen3_vl_deepstack_buffers_load_with_the_weights() -> None:
    """Three max_num_batched_tokens x 4096 bf16 buffers on each GPU (models/qwen3_vl.py `deepstack_input_embeds`)."""
    spec = _vl_spec("Qwen/Qwen3-VL-8B-Instruct")
    without = dataclasses.replace(spec, deepstack_levels=0)
    request = {"accelerator": "p5.48xlarge", "max_model_len": 8192, "tensor_parallel_size": 2}
    with_buffers, plain = (plan(PlanRequest(model=m, **request)) for m in (spec, without))
    assert with_buffers.weight_bytes_per_gpu - plain.weight_bytes_per_gpu == 3 * 8192 * 4096 * 2


def test_the_vision_encoder_stays_16_bit_when_the_decoder_is_quantized() -> None:
    gemma = MODELS["google/gemma-3-27b-it"]
    fp8 = Context(PlanRequest(model=gemma.id, weight_format="fp8"))
    sixteen_bit = gemma.embedding_parameters + gemma.vision_parameters
    assert fp8.weight_bytes == (gemma.parameters - sixteen_bit) + sixteen_bit * 2


def test_an_unknown_vision_encoder_is_one_line() -> None:
    config = {"text_config": {"num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8,
              "max_position_embeddings": 4096, "vocab_size": 32000, "intermediate_size": 1024},
              "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024, "intermediate_size": 4096,
                                "num_hidden_layers": 24, "patch_size": 14, "image_size": 336}}  # fmt: skip
    with pytest.raises(ConfigError) as err:
        ModelSpec.from_hf_config(config, id="acme/llava")
    assert str(err.value) == (
        "model_config.vision_config.model_type: 'clip_vision_model' is not allowed; the planner counts these vision "
        "encoders: siglip_vision_model, pixtral, llama4_vision_model, qwen2_5_vl, qwen3_vl, qwen3_vl_moe, "
        "qwen3_vl_vision, qwen3_vl_moe_vision [LLMEKS-E203]"
    )


@pytest.mark.parametrize(("model_id", "published"), PUBLISHED.items())
def test_parameters_read_from_config_json_match_the_published_totals(
    model_id: str, published: tuple[float, float | None]
) -> None:
    spec = MODELS[model_id]
    total, active = published
    assert abs(spec.parameters - total) / total < 0.005
    if active is not None:
        assert spec.active_parameters is not None and abs(spec.active_parameters - active) / active < 0.05


def test_new_architecture_kinds_are_read_from_config_json() -> None:
    v3, oss, scout, gemma = (MODELS[m] for m in ("deepseek-ai/DeepSeek-V3", "openai/gpt-oss-120b",
                             "meta-llama/Llama-4-Scout-17B-16E-Instruct", "google/gemma-3-27b-it"))  # fmt: skip
    assert (v3.attention_kind, v3.kv_lora_rank, v3.qk_rope_head_dim, v3.quantization) == ("mla", 512, 64, "fp8-block")
    assert (v3.num_experts, v3.experts_per_token, v3.moe_intermediate_size, v3.shared_experts, v3.dense_layers) == (
        256,
        8,
        2048,
        1,
        3,
    )
    assert (oss.attention_kind, oss.sliding_window_layers, oss.sliding_window, oss.quantization) == (
        "hybrid",
        18,
        128,
        "mxfp4",
    )
    assert (scout.chunked_attention_layers, scout.attention_chunk_size, scout.num_experts) == (36, 8192, 16)
    assert (gemma.sliding_window_layers, gemma.sliding_window) == (52, 1024)


def test_hf_config_reader_matches_the_catalog() -> None:
    qwen = {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584,
        "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
        "max_position_embeddings": 32768, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
    }  # fmt: skip
    assert ModelSpec.from_hf_config(qwen, id=QWEN_7B) == dataclasses.replace(MODELS[QWEN_7B], awq_checkpoint=None)
    mixtral = {
        "model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "max_position_embeddings": 32768,
        "num_local_experts": 8, "num_experts_per_tok": 2, "dtype": "bfloat16",
    }  # fmt: skip
    spec = ModelSpec.from_hf_config(mixtral, id="mistralai/Mixtral-8x7B-Instruct-v0.1")
    assert spec.parameters == 46_702_792_704 and spec.is_moe
    awq = {**qwen, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}
    assert ModelSpec.from_hf_config(awq, id="Qwen/Qwen2.5-7B-Instruct-AWQ").quantization == "awq-int4"


def test_hf_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        ModelSpec.from_hf_config({"hidden_size": 4096}, id="acme/x")
    assert str(err.value) == "model_config.num_hidden_layers: missing; a decoder config.json must have it [LLMEKS-E203]"
    with pytest.raises(ConfigError) as err:
        ModelSpec.from_mapping({"id": "acme/x", "layers": 2, "hidden_size": 64, "attention_heads": 4,
                                "vocab_size": 100, "intermediate_size": 128, "max_position_embeddings": 512,
                                "kv_head": 2})  # fmt: skip
    assert str(err.value).startswith(
        "workload.model_spec: unknown key 'kv_head'; did you mean 'kv_heads'? allowed: id,"
    )


def test_a_format_the_gpu_cannot_run_is_one_line_naming_who_can() -> None:
    spec = dataclasses.replace(MODELS[LLAMA_8B], id="acme/llama-w8a8", quantization="w8a8-int8", awq_checkpoint=None)
    with pytest.raises(ConfigError) as err:
        plan(PlanRequest(model=spec, accelerator="p6-b200.48xlarge"))
    message = str(err.value)
    assert message.startswith("workload.weight_format: 'w8a8-int8' is not allowed on p6-b200.48xlarge (B200, sm100)")
    assert message.endswith("instance families that run it: g5, g6, gr6, g6e, p4d, p4de, p5, p5e, p5en [LLMEKS-E205]")
    # Left to choose, the planner skips the GPUs that cannot run it.
    assert plan(PlanRequest(model=spec, max_model_len=8192)).instance.compute_capability not in ((10, 0), (12, 0))


def test_a_weight_only_format_plans_and_says_so() -> None:
    p = plan(PlanRequest(model="deepseek-ai/DeepSeek-V3", accelerator="p4de.24xlarge", max_model_len=8192))
    (weights,) = [a for a in p.assumptions if a.startswith("weights:")]
    assert "at fp8-block" in weights and "on A100-80G vLLM 0.33 runs it weight-only" in weights
    assert p.nodes_per_replica == 2 and p.kv_bytes_per_token == 70_272


def test_mxfp4_plans_count_and_say_the_kernels_expert_padding() -> None:
    l4 = plan(PlanRequest(model="openai/gpt-oss-20b", accelerator="g6.xlarge", max_model_len=8192))
    (weights,) = [a for a in l4.assumptions if a.startswith("weights:")]
    assert weights.endswith(
        "that kernel pads the routed experts (hidden size to a multiple of 256, each GPU's slice of the expert width "
        "to 128): +9.0% of their bytes, counted in the weights"
    )
    h100 = plan(PlanRequest(model="openai/gpt-oss-20b", accelerator="p5.48xlarge", max_model_len=8192))
    assert "pads the routed experts" not in " ".join(h100.assumptions)  # OAI Triton: 2880 is a multiple of 64


def test_moe_plans_say_how_experts_are_split() -> None:
    """vLLM 0.33 splits experts across TP ranks unless --enable-expert-parallel; either way the bytes per GPU match."""
    moe = plan(PlanRequest(model="Qwen/Qwen3-235B-A22B-FP8", max_model_len=8192, enable_expert_parallel=False))
    assert moe.tensor_parallel_size > 1
    (line,) = [a for a in moe.assumptions if a.startswith("experts:")]
    assert "--enable-expert-parallel" in line and "the same checkpoint bytes per GPU" in line
    dense = plan(PlanRequest(model=LLAMA_70B, weight_format="fp8", max_model_len=8192))
    assert not [a for a in dense.assumptions if a.startswith("experts:")]
