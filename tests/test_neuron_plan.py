"""The planner on Neuron: each chip family's engine path, the models it serves and why others are refused, the
compiled shape and its KV cache per core, host memory, chips per pod, cost (or why it is unknown), `llm-eks plan`'s
Neuron table and `--compare`'s Neuron rows."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import replace

import pytest

from llm_eks.catalog.accelerators import instance_type
from llm_eks.catalog.models import MODELS
from llm_eks.catalog.neuron import NXD_INFERENCE, VLLM_NEURON, neuron_engine
from llm_eks.cli import main
from llm_eks.errors import ConfigError
from llm_eks.planner import LoraAdapters, PlanRequest, plan
from llm_eks.planner.compare import compare, neuron_refusals
from llm_eks.planner.neuron.shape import (
    compiled_shape,
    needs_scheduler_extension,
    pod_chip_counts,
    power_buckets,
    sharded_heads,
)

LLAMA_8B, LLAMA_70B = "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.3-70B-Instruct"
GIB = 1024**3


def error(**kwargs: object) -> str:
    with pytest.raises(ConfigError) as err:
        plan(PlanRequest(**kwargs))  # type: ignore[arg-type]
    message = str(err.value)
    assert "\n" not in message
    return message


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


# --- Engine paths --------------------------------------------------------------------------------------------------


def test_each_chip_family_has_its_engine_path() -> None:
    for name in ("inf2.xlarge", "inf2.48xlarge", "trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge"):
        assert neuron_engine(instance_type(name)) is NXD_INFERENCE
    assert neuron_engine(instance_type("trn2.48xlarge")) is VLLM_NEURON
    assert (NXD_INFERENCE.vllm_version, NXD_INFERENCE.neuron_sdk, NXD_INFERENCE.shutdown_timeout) == (
        "0.16.0",
        "2.31.1",
        False,
    )
    assert (VLLM_NEURON.vllm_version, VLLM_NEURON.neuron_sdk, VLLM_NEURON.shutdown_timeout) == (
        "0.29.0",
        "2.33.0",
        True,
    )
    assert NXD_INFERENCE.image.endswith(":0.16.0-neuronx-py312-sdk2.31.1-ubuntu24.04")
    assert VLLM_NEURON.image.endswith(":0.29.0.1.2.0-neuronx-py313-sdk2.33.0-ubuntu24.04")


def test_the_two_done_when_commands() -> None:
    # 8B on inf2.xlarge: 16 GiB of host memory cannot compile a 16 GB checkpoint; the error names the floor's source
    # and what serves it instead.
    assert error(model=LLAMA_8B, accelerator="inf2.xlarge") == (
        "workload.accelerator: 'inf2.xlarge' is not allowed; a pod's 12,114 MiB of host memory is not enough to "
        "compile and load the 16.1 GB checkpoint of meta-llama/Llama-3.1-8B-Instruct: compiling Llama-3.1-8B-Instruct "
        "with NxD Inference ran out of memory on a 32 GiB trn1.2xlarge (aws-neuron/aws-neuron-sdk#1222), so llm-eks "
        "asks for more than 2.14x the checkpoint (32.0 GiB); inf2.8xlarge (1\N{MULTIPLICATION SIGN} Inferentia2, 128 "
        "GiB RAM) serves it at max_model_len 118528 or less [LLMEKS-E209]"
    )
    code, out = cli("plan", "--model", LLAMA_70B, "--accelerator", "trn2.48xlarge")
    assert code == 0
    rows = dict(line.split(None, 1) for line in out.splitlines()[2:20] if line and not line.startswith(" "))
    assert "= 64 NeuronCore-v3s (logical NeuronCore configuration 2, 24.00 GiB HBM each)" in out
    assert out.count("TP 64 over 64 NeuronCores, 16 of 16 chip(s) per pod") == 1
    assert "Compiled shape  batch 1 x 131072 tokens, 4096 KV blocks of 32, prefix caching on" in out
    assert "KV cache        131,072 tokens per replica (max_num_seqs 1 x 131072)" in out
    assert (
        "Engine          vllm-neuron (vllm-neuron 0.29.0.1.2.0 (plugin 1.2.0) on vLLM 0.29.0, Neuron SDK 2.33.0)" in out
    )
    assert "Cost            cost unknown: no on-demand price for trn2.48xlarge in us-east-1" in out
    assert "[ack: llm-eks:plan-no-price]" in out and rows


def test_an_inf2_plan_by_hand() -> None:
    p = plan(PlanRequest(model=LLAMA_8B, accelerator="inf2.8xlarge", max_model_len=8192))
    assert p.neuron is not None
    # TP 2 on one chip; 8 KV heads split 4 per core; 32 query heads need no padding.
    assert (p.tensor_parallel_size, p.gpus_per_pod, p.gpus_per_replica) == (2, 1, 1)
    # Weights: 8,030,261,248 x 2 B / 2 cores; KV: 32 layers x 2 x 4 heads x 128 x 2 B per token per core.
    assert p.weight_bytes_per_gpu == 8_030_261_248
    assert p.kv_bytes_per_token_per_gpu == 32 * 2 * 4 * 128 * 2 == 65_536
    # 16 GiB x 0.92 = 14.72 GiB; less 7.48 GiB of weights leaves room for 14 sequences of 8192 tokens (512 MiB each).
    assert p.usable_bytes_per_gpu == int(16 * GIB * 0.92)
    assert (p.usable_bytes_per_gpu - p.weight_bytes_per_gpu) // (8192 * 65_536) == 14 == p.max_num_seqs
    assert p.kv_cache_bytes_per_gpu == 14 * 8192 * 65_536 and p.kv_cache_tokens == 14 * 8192
    shape = p.neuron.serving.shape
    assert (shape.engine, shape.block_size, shape.num_blocks, shape.prefix_caching) == (
        "nxd-inference",
        8192,
        14,
        False,
    )
    assert shape.context_encoding_buckets == shape.token_generation_buckets == (128, 256, 512, 1024, 2048, 4096, 8192)
    assert p.cost_per_replica_hour == 1.9679 and not p.neuron.scheduler_extension
    assert p.extended_resource == "aws.amazon.com/neuron"
    # 14 < 16 target sequences: said, with its acknowledgeable id.
    assert [w.id for w in p.warnings] == ["llm-eks:plan-concurrency"]


def test_a_trn2_plan_at_8k_holds_the_target_under_vllm_neurons_kv_cap() -> None:
    p = plan(PlanRequest(model=LLAMA_70B, accelerator="trn2.48xlarge", max_model_len=8192))
    assert p.neuron is not None
    shape = p.neuron.serving.shape
    # 8 KV heads replicated to TP 64: one per core, 80 x 2 x 1 x 128 x 2 B = 40 KiB per token per core.
    assert p.kv_bytes_per_token_per_gpu == 40_960
    # 16 sequences x 256 blocks of 32 tokens = 4096 blocks; 5 GiB of KV per core, under 30 % of 22.08 GiB.
    assert (shape.max_num_seqs, shape.num_blocks, shape.max_num_batched_tokens) == (16, 4096, 8192)
    assert p.kv_cache_bytes_per_gpu == 4096 * 32 * 40_960 <= 0.30 * p.usable_bytes_per_gpu
    assert (shape.num_seqs_buckets, shape.kv_segment_size_buckets) == ((1, 2, 4, 8, 16), (8192,))
    assert p.cost_per_replica_hour is None and [w.id for w in p.warnings] == ["llm-eks:plan-no-price"]


def test_engine_args_per_path() -> None:
    inf2 = plan(PlanRequest(model=LLAMA_8B, accelerator="inf2.8xlarge", max_model_len=4096, target_concurrency=4))
    assert inf2.engine_args == (
        "--tensor-parallel-size", "2", "--max-model-len", "4096", "--max-num-seqs", "4", "--dtype", "bfloat16",
        "--no-enable-prefix-caching", "--num-gpu-blocks-override", "4", "--additional-config",
        '{"override_neuron_config":{"context_encoding_buckets":[128,256,512,1024,2048,4096],'
        '"token_generation_buckets":[128,256,512,1024,2048,4096]}}',
        "--served-model-name", LLAMA_8B,
    )  # fmt: skip
    trn2 = plan(PlanRequest(model=LLAMA_70B, accelerator="trn2.48xlarge", max_model_len=16384, target_concurrency=8))
    assert trn2.engine_args == (
        "--tensor-parallel-size", "64", "--max-model-len", "16384", "--max-num-seqs", "8", "--dtype", "bfloat16",
        "--max-num-batched-tokens", "8192", "--enable-prefix-caching", "--block-size", "32",
        "--num-gpu-blocks-override", "4096", "--additional-config",
        '{"neuron_config":{"kv_segment_size_buckets":[8192],"num_batched_tokens_buckets":[8192],'
        '"num_seqs_buckets":[1,2,4,8]}}',
        "--served-model-name", LLAMA_70B,
    )  # fmt: skip
    for p in (inf2, trn2):
        assert not {"--quantization", "--gpu-memory-utilization", "--kv-cache-dtype", "--device"} & set(p.engine_args)


def test_json_carries_the_neuron_layout_and_gpu_plans_do_not() -> None:
    code, out = cli("plan", "--model", LLAMA_8B, "--accelerator", "inf2.8xlarge", "--max-model-len", "4096", "--json")
    body = json.loads(out)
    assert code == 0 and body["neuron"]["engine"] == "nxd-inference"
    assert body["neuron"]["vllm_version"] == "0.16.0" and body["neuron"]["compiled_shape"]["num_blocks"] == 16
    assert body["neuron"]["additional_config"]["override_neuron_config"]["token_generation_buckets"][-1] == 4096
    gpu = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192)).to_dict()
    assert "neuron" not in gpu


# --- Shapes --------------------------------------------------------------------------------------------------------


def test_buckets_follow_nxd_inference_rule() -> None:
    assert power_buckets(128, 4096) == (128, 256, 512, 1024, 2048, 4096)
    # round(log2(12800)) = 14, so 8192 is the last power below the length itself.
    assert power_buckets(128, 12800) == (128, 256, 512, 1024, 2048, 4096, 8192, 12800)
    assert power_buckets(128, 128) == (128,) and power_buckets(1, 14) == (1, 2, 4, 8, 14)
    # Below vllm-neuron's smallest segment: one unsegmented step of the whole length, prefix caching off.
    short = compiled_shape("vllm-neuron", 4, 384)
    assert (short.max_num_batched_tokens, short.kv_segment_size_buckets, short.prefix_caching) == (384, (), False)


def test_heads_are_sharded_as_nxd_inference_does() -> None:
    llama_70b, qwen_7b = MODELS[LLAMA_70B], MODELS["Qwen/Qwen2.5-7B-Instruct"]
    # 8 KV heads: kept at TP 8, replicated to TP 64 (64 % 8 == 0), converted to one per padded query head at TP 12.
    assert (sharded_heads(llama_70b, 8).kv_heads, sharded_heads(llama_70b, 64).kv_heads) == (8, 64)
    assert (sharded_heads(llama_70b, 12).query_heads, sharded_heads(llama_70b, 12).kv_heads) == (72, 72)
    # 28 query heads padded to 32 at TP 32 (and 4 KV heads replicated to 32).
    assert (sharded_heads(qwen_7b, 32).query_heads, sharded_heads(qwen_7b, 32).kv_heads_per_core) == (32, 1)


def test_chips_per_pod_per_family() -> None:
    counts = {name: pod_chip_counts(instance_type(name)) for name in
              ("inf2.xlarge", "inf2.24xlarge", "inf2.48xlarge", "trn1.32xlarge", "trn2.48xlarge")}  # fmt: skip
    assert counts == {
        "inf2.xlarge": (1,),
        # Inferentia2's ring: any contiguous count; the planner packs a node evenly.
        "inf2.24xlarge": (1, 2, 3, 6),
        "inf2.48xlarge": (1, 2, 3, 4, 6, 12),
        # Trainium's 2D torus: 1, 4, 8 or 16 devices.
        "trn1.32xlarge": (1, 4, 8, 16),
        # Trainium2: one or all (no partial count documented).
        "trn2.48xlarge": (1, 16),
    }
    assert needs_scheduler_extension(instance_type("inf2.48xlarge"), 4)
    assert not needs_scheduler_extension(instance_type("inf2.48xlarge"), 12)
    p = plan(PlanRequest(model=LLAMA_8B, accelerator="inf2.48xlarge", max_model_len=8192, tensor_parallel_size=4))
    assert p.neuron is not None and p.neuron.scheduler_extension and (p.gpus_per_pod, p.replicas_per_node) == (2, 6)


# --- Refusals ------------------------------------------------------------------------------------------------------


def test_a_model_the_path_does_not_serve_names_what_would() -> None:
    message = error(model="Qwen/Qwen2.5-7B-Instruct", accelerator="trn2.48xlarge", max_model_len=8192)
    assert message.startswith("workload.model: 'Qwen/Qwen2.5-7B-Instruct' is not allowed; Qwen2ForCausalLM is not "
                              "served on trn2.48xlarge: its engine path is vllm-neuron")  # fmt: skip
    assert message.endswith(
        "inf2, trn1, trn1n (another Neuron path) or GPU instance types (accelerator auto) can serve it [LLMEKS-E211]"
    )
    # Served by vllm-neuron, but not a model the planner sizes on Neuron.
    assert error(model="openai/gpt-oss-20b", accelerator="trn2.48xlarge", max_model_len=8192) == (
        "workload.model: 'openai/gpt-oss-20b' is not allowed; vllm-neuron serves GptOssForCausalLM on trn2.48xlarge, "
        "but llm-eks's Neuron planner sizes dense full-attention text decoders (LlamaForCausalLM, Qwen2ForCausalLM, "
        "Qwen3ForCausalLM) and openai/gpt-oss-20b has a mixture of experts; GPU instance types (accelerator auto) can "
        "serve it [LLMEKS-E211]"
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"weight_format": "fp8"}, "workload.weight_format"),
        ({"kv_cache_dtype": "fp8"}, "workload.kv_cache_dtype"),
        ({"lora": LoraAdapters((("sql", "acme/sql-lora"),))}, "workload.lora_adapters"),
        ({"pipeline_parallel_size": 2}, "workload.pipeline_parallel_size"),
        ({"tensor_parallel_size": 3}, "workload.tensor_parallel_size"),
        ({"max_num_seqs": 64}, "workload.max_num_seqs"),
    ],
)
def test_what_neuron_does_not_run_is_one_line_naming_the_field(kwargs: dict[str, object], field: str) -> None:
    message = error(model=LLAMA_8B, accelerator="inf2.8xlarge", max_model_len=8192, **kwargs)
    assert message.startswith(f"{field}: ")


def test_a_model_too_large_for_the_chips_names_a_size_that_holds_it() -> None:
    assert error(model=LLAMA_70B, accelerator="inf2.8xlarge", max_model_len=8192) == (
        "workload.accelerator: 'inf2.8xlarge' is not allowed; meta-llama/Llama-3.3-70B-Instruct's 141.1 GB of bf16 "
        "weights take 65.71 GiB on each of the 2 NeuronCore-v2s of 1 chip(s), above the 14.72 GiB each has for "
        "weights and KV cache (gpu_memory_utilization 0.92 of 16 GiB); inf2.24xlarge (6\N{MULTIPLICATION SIGN} "
        "Inferentia2, 384 GiB RAM) serves it [LLMEKS-E209]"
    )
    message = error(model=LLAMA_8B, accelerator="inf2.8xlarge")
    assert "max_model_len 118528 fits one sequence there" in message


def test_auto_never_picks_neuron() -> None:
    p = plan(PlanRequest(model=LLAMA_8B, max_model_len=8192))
    assert p.neuron is None and p.instance.accelerator_vendor == "nvidia"


# --- Compare -------------------------------------------------------------------------------------------------------


def test_compare_has_neuron_rows_and_says_why_not_elsewhere() -> None:
    request = PlanRequest(model=LLAMA_70B, max_model_len=8192)
    rows = {r.instance_type: r for r in compare(request)}
    assert rows["trn2.48xlarge"].engine == "vllm-neuron" and rows["trn2.48xlarge"].shape == "TP64 vllm-neuron"
    assert rows["inf2.48xlarge"].engine == "nxd-inference" and rows["inf2.48xlarge"].shape == "TP24 NxDI"
    assert rows["trn2.48xlarge"].usd_per_million_output_tokens is None
    refused = dict(neuron_refusals(request))
    assert set(refused) == {"inf2.xlarge", "inf2.8xlarge", "trn1.2xlarge"}
    assert refused["inf2.8xlarge"].startswith("meta-llama/Llama-3.3-70B-Instruct's 141.1 GB of bf16 weights take")
    code, out = cli("plan", "--model", "mistralai/Mistral-7B-Instruct-v0.3", "--max-model-len", "8192", "--compare")
    assert code == 0
    assert "Not served on Neuron:" in out and "MistralForCausalLM is not served on these types" in out


def test_on_auto_mode_a_neuron_pod_takes_one_chip_or_the_whole_node() -> None:
    """EKS Auto Mode's nodes run their own Neuron device plugin, without the scheduler extension: no partial sets."""
    request = PlanRequest(model="meta-llama/Llama-3.1-8B-Instruct", accelerator="inf2.24xlarge", max_model_len=8192)
    karpenter = plan(request)
    assert karpenter.neuron is not None and karpenter.neuron.scheduler_extension
    assert karpenter.gpus_per_pod == 2
    auto = plan(replace(request, compute="auto-mode"))
    assert auto.neuron is not None and not auto.neuron.scheduler_extension
    # Two chips no longer fit the node's allowed sets; the whole node (6 chips) does.
    assert (auto.gpus_per_pod, auto.replicas_per_node) == (6, 1)
    # Auto Mode's image path on inf2 is a plain pull (its parallel pull covers G, P and Trn), and the only one.
    assert (karpenter.node_image_source, auto.node_image_source) == ("parallel-pull", "pull")
    assert [(p.image_source, p.in_use) for p in auto.cold_start_paths] == [("pull", True), ("headroom", False)]
    assert auto.cold_start.image_pull_s > karpenter.cold_start.image_pull_s
    assert any(a.startswith("compute auto-mode: ") and a.endswith("not inf2") for a in auto.assumptions)
    assert not any(a.startswith("compute auto-mode: ") for a in karpenter.assumptions)
    with pytest.raises(ConfigError) as info:
        plan(replace(request, compute="auto-mode", tensor_parallel_size=4))
    assert str(info.value) == (
        "workload.tensor_parallel_size: 4 is not allowed; on inf2.24xlarge a pod takes 1, 6 chip(s) of 2 NeuronCores "
        "(EKS Auto Mode gives a pod one chip or the whole node: no Neuron scheduler extension for contiguous sets): "
        "tensor_parallel_size 2, 12 [LLMEKS-E209]"
    )
