"""Property tests: any valid request gives a consistent plan or a one-line ConfigError; any invalid one, a ConfigError
naming the field, never another exception."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_eks.catalog.accelerators import CATALOG as INSTANCES
from llm_eks.catalog.models import MODELS, ModelSpec, estimate_parameters
from llm_eks.errors import ConfigError
from llm_eks.planner import PlanRequest, plan
from llm_eks.planner.kv_cache import kv_layout

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GPU_TYPES = [i.instance_type for i in INSTANCES if i.accelerator_vendor == "nvidia"]
STALE = ("VLLM_USE_V1", "--enable-chunked-prefill", "--enable-prefix-caching", "--quantization awq")


@st.composite
def model_specs(draw: st.DrawFn) -> ModelSpec:
    """Llama-style decoders from 1B-ish to a few hundred B parameters, dense or MoE."""
    kv_heads = draw(st.sampled_from([1, 2, 3, 4, 5, 8, 16]))
    heads = kv_heads * draw(st.integers(1, 8))
    head_dim = draw(st.sampled_from([64, 96, 128]))
    hidden = heads * head_dim
    layers = draw(st.integers(1, 96))
    intermediate = 128 * draw(st.integers(hidden // 128 or 1, 4 * hidden // 128 or 1))
    vocab = draw(st.integers(1000, 200_000))
    tied = draw(st.booleans())
    experts = draw(st.sampled_from([0, 0, 0, 8]))
    parameters = estimate_parameters(
        layers=layers, hidden_size=hidden, attention_heads=heads, kv_heads=kv_heads, head_dim=head_dim,
        intermediate_size=intermediate, vocab_size=vocab, tie_word_embeddings=tied, num_experts=experts,
    )  # fmt: skip
    return ModelSpec(
        id="acme/random-model",
        parameters=parameters,
        layers=layers,
        hidden_size=hidden,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        max_position_embeddings=draw(st.sampled_from([4096, 8192, 32768, 131072])),
        vocab_size=vocab,
        intermediate_size=intermediate,
        tie_word_embeddings=tied,
        num_experts=experts,
        experts_per_token=2 if experts else 0,
        awq_checkpoint=draw(st.sampled_from([None, "acme/random-model-awq"])),
    )


@st.composite
def valid_requests(draw: st.DrawFn) -> PlanRequest:
    spec = draw(st.one_of(st.sampled_from(list(MODELS.values())), model_specs()))
    if spec.quantization:
        formats = ["auto", spec.quantization]
    else:
        formats = ["auto", "bf16", "fp8"] + (["awq-int4"] if spec.awq_checkpoint else [])
    typical_in = draw(st.integers(1, min(4096, spec.max_position_embeddings // 2)))
    typical_out = draw(st.integers(1, min(2048, spec.max_position_embeddings // 2)))
    max_len = draw(st.one_of(st.none(), st.integers(typical_in + typical_out, spec.max_position_embeddings)))
    ep = draw(st.sampled_from([None, None, None, True, False] if spec.is_moe else [None, False]))
    return PlanRequest(
        model=draw(st.sampled_from([spec, spec.id])) if spec.id in MODELS else spec,
        weight_format=draw(st.sampled_from(formats)),
        kv_cache_dtype=draw(st.sampled_from(["auto", "fp8"])),
        max_model_len=max_len,
        gpu_memory_utilization=draw(st.floats(0.5, 0.98)),
        accelerator=draw(st.sampled_from(["auto", "auto", *GPU_TYPES])),
        target_concurrency=draw(st.integers(1, 256)),
        typical_input_tokens=typical_in,
        typical_output_tokens=typical_out,
        weights_source=draw(st.sampled_from(["nvme", "s3", "ebs"])),
        max_nodes_per_replica=draw(st.integers(1, 4)),
        max_itl_ms=draw(st.one_of(st.none(), st.floats(5, 500))),
        # Mostly the planner's choice; for a MoE model sometimes a fixed DP x EP or TP x PP layout.
        enable_expert_parallel=ep,
        data_parallel_size=draw(st.sampled_from([None, None, None, 2, 4, 8]))
        if spec.is_moe and ep is not False
        else None,
    )


@FAST
@given(valid_requests())
def test_valid_requests_give_a_consistent_plan_or_a_clear_error(request: PlanRequest) -> None:
    try:
        p = plan(request)
    except ConfigError as err:
        message = str(err)
        assert "\n" not in message and message.startswith("workload.")
        return
    spec, inst = p.model, p.instance
    # Weights and the KV cache (whole blocks) fit in what vLLM may use on each GPU.
    assert p.weight_bytes_per_gpu + p.kv_cache_bytes_per_gpu <= p.usable_bytes_per_gpu
    dtype = 1 if p.kv_cache_dtype == "fp8" else 2
    pp = p.pipeline_parallel_size
    in_flight = (2 if pp == 1 else pp + 1) * p.max_num_batched_tokens  # async scheduling's batches in flight
    layout = kv_layout(spec, p.tensor_parallel_size, pp, dtype, in_flight)
    blocks, remainder = divmod(p.kv_cache_bytes_per_gpu, layout.bytes_per_block)
    assert remainder == 0 and p.kv_bytes_per_token_per_gpu == layout.bytes_per_token
    budget = math.ceil(int(p.gpu_memory_bytes * 0.99) * request.gpu_memory_utilization)  # memory.requested_bytes
    assert p.usable_bytes_per_gpu == budget - p.reserve_bytes_per_gpu
    # At least one sequence fits at full context; the counts follow from the blocks, as vLLM reports them.
    if spec.attention_kind != "hybrid":  # one group: a request holds cdiv(tokens, 16) blocks
        assert layout.blocks_per_request(p.max_model_len) == -(-p.max_model_len // 16)
    per_request = layout.blocks_per_request(p.max_model_len)
    dp = p.data_parallel_size  # each data-parallel rank holds a KV cache of its own
    assert p.kv_cache_tokens == dp * int(blocks / per_request * p.max_model_len) >= p.max_model_len
    assert p.max_concurrency_full_context == dp * (blocks // per_request) >= 1
    assert p.max_concurrency_typical == dp * (blocks // layout.blocks_per_request(request.typical_tokens))
    assert p.max_concurrency_typical >= p.max_concurrency_full_context
    # MLA caches one latent per layer on every TP rank; other layers split or replicate their KV heads.
    if spec.is_mla:
        assert (
            p.kv_bytes_per_token_per_gpu
            == -(-spec.layers // p.pipeline_parallel_size) * (spec.kv_lora_rank + spec.qk_rope_head_dim) * dtype
        )
    # vLLM's TP rule: heads divide by TP; KV heads split (TP <= kv) or replicate (TP a multiple of kv).
    tp, pp = p.tensor_parallel_size, p.pipeline_parallel_size
    assert spec.attention_heads % tp == 0
    assert (spec.kv_heads % tp == 0) if tp <= spec.kv_heads else (tp % spec.kv_heads == 0)
    assert p.gpus_per_replica == tp * pp * dp and 1 <= pp <= spec.layers
    assert p.expert_parallel_size == (tp * dp if p.expert_parallel else 1) and (dp == 1 or p.expert_parallel)
    assert spec.is_moe or not p.expert_parallel
    if p.nodes_per_replica == 1:
        assert p.replicas_per_node * p.gpus_per_replica <= inst.accelerators and p.gpus_per_pod == tp * pp * dp
    else:
        assert p.gpus_per_replica == p.nodes_per_replica * inst.accelerators == p.nodes_per_replica * p.gpus_per_pod
        assert p.nodes_per_replica <= request.max_nodes_per_replica
    assert tp <= inst.accelerators
    # Engine arguments match the plan and carry no stale switch.
    args = " ".join(p.engine_args)
    assert f"--tensor-parallel-size {tp}" in args and f"--max-model-len {p.max_model_len}" in args
    assert ("--pipeline-parallel-size" in args) == (pp > 1)
    assert ("--data-parallel-size" in args) == (dp > 1)
    assert ("--enable-expert-parallel" in args) == p.expert_parallel
    assert p.nodes_per_replica == 1 or p.instance.efa or request.allow_without_efa
    assert not any(flag in args for flag in STALE)
    # Per data-parallel rank, as vLLM applies them (a TP x PP replica is one rank).
    assert 1 <= p.max_num_seqs <= -(-request.target_concurrency // dp) <= p.max_num_batched_tokens * dp
    assert p.max_num_seqs <= p.max_num_batched_tokens
    assert p.cost_per_replica_hour is None or p.cost_per_replica_hour > 0
    assert p.cold_start.total_s == p.cold_start.image_pull_s + p.cold_start.startup_s or math.isclose(
        p.cold_start.total_s, p.cold_start.image_pull_s + p.cold_start.startup_s, abs_tol=1
    )
    assert p.pod_resources.cpu_millicores > 0 and p.pod_resources.memory_mib > 0
    if request.accelerator == "auto":
        assert p.meets_target and inst.on_demand_usd_per_hour is not None
    assert p == plan(request), "deterministic"


JUNK = st.one_of(st.none(), st.booleans(), st.text(max_size=12), st.lists(st.integers(), max_size=2), st.floats())
BAD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "model": st.one_of(JUNK, st.integers()).filter(lambda v: not (isinstance(v, str) and v in MODELS)),
    "weight_format": JUNK.filter(lambda v: v not in ("auto", "bf16", "fp8", "awq-int4")),
    "kv_cache_dtype": JUNK.filter(lambda v: v not in ("auto", "fp8")),
    "max_model_len": st.one_of(st.integers(max_value=0), st.integers(min_value=131_073), st.floats(), st.text()),
    "gpu_memory_utilization": st.one_of(
        st.floats().filter(lambda v: not 0 < v <= 1), st.text(), st.booleans(), st.integers(min_value=2)
    ),
    # inf2.xlarge: 16 GiB of host memory compiles no 8B checkpoint (planner/neuron/sizing.py).
    "accelerator": st.one_of(JUNK.filter(lambda v: v != "auto"), st.just("inf2.xlarge")),
    "target_concurrency": st.one_of(st.integers(max_value=0), st.integers(min_value=4097), st.floats(), st.booleans()),
    "typical_input_tokens": st.one_of(st.integers(max_value=0), st.floats(), st.text()),
    "typical_output_tokens": st.one_of(st.integers(max_value=0), st.floats(), st.none()),
    "weights_source": JUNK.filter(lambda v: v not in ("nvme", "s3", "ebs")),
    "max_nodes_per_replica": st.one_of(st.integers(max_value=0), st.integers(min_value=17), st.floats()),
    "max_itl_ms": st.one_of(st.floats().filter(lambda v: not 0 < v <= 600_000), st.text(), st.just(True)),
    # A dense model: any data parallelism or expert parallelism is refused, as is junk.
    "data_parallel_size": st.one_of(st.integers(min_value=2), st.integers(max_value=0), st.floats(), st.text()),
    "enable_expert_parallel": st.one_of(st.just(True), st.text(), st.integers(), st.floats()),
    "allow_without_efa": st.one_of(st.none(), st.text(), st.integers(), st.floats()),
}


@FAST
@given(st.sampled_from(sorted(BAD_VALUES)).flatmap(lambda name: st.tuples(st.just(name), BAD_VALUES[name])))
def test_invalid_requests_raise_one_line_config_errors(bad: tuple[str, Any]) -> None:
    name, value = bad
    kwargs: dict[str, Any] = {"model": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 8192, name: value}
    try:
        plan(PlanRequest(**kwargs))
    except ConfigError as err:
        message = str(err)
        assert "\n" not in message and message.startswith("workload.")
    else:
        raise AssertionError(f"{name}={value!r} was accepted")


SPEC_FIELDS = [
    "id", "parameters", "layers", "hidden_size", "attention_heads", "kv_heads", "head_dim",
    "max_position_embeddings", "vocab_size", "intermediate_size", "native_dtype", "tie_word_embeddings",
    "num_experts", "experts_per_token", "active_parameters", "quantization", "awq_checkpoint", "bogus",
]  # fmt: skip


@FAST
@given(st.dictionaries(st.sampled_from(SPEC_FIELDS), st.one_of(JUNK, st.integers(-10, 200_000)), max_size=12))
def test_model_spec_from_mapping_never_crashes(data: dict[str, Any]) -> None:
    try:
        spec = ModelSpec.from_mapping(data)
    except ConfigError as err:
        assert "\n" not in str(err) and str(err).startswith("workload.model_spec")
    else:
        assert spec.validate() is spec


HF_KEYS = [
    "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
    "max_position_embeddings", "vocab_size", "intermediate_size", "torch_dtype", "tie_word_embeddings",
    "num_local_experts", "num_experts_per_tok", "quantization_config", "kv_lora_rank", "text_config",
]  # fmt: skip
HF_VALUES = st.one_of(
    JUNK,
    st.integers(-4, 70_000),
    st.sampled_from(["bfloat16", "float16"]),
    st.dictionaries(st.sampled_from(["quant_method", "bits", "config_groups"]), st.one_of(JUNK, st.integers())),
)


VISION_KEYS = [
    "model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "patch_size", "image_size",
    "num_channels", "projector_input_dim", "projector_output_dim", "vision_output_dim", "depth", "in_channels",
    "temporal_patch_size", "spatial_merge_size", "out_hidden_size", "num_position_embeddings",
    "deepstack_visual_indexes",
]  # fmt: skip
# A vision_config with every required size valid, so the draws reach the optional keys and the projector.
VALID_VISION = {
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "patch_size": 14, "image_size": 224,
    "projector_input_dim": 64, "projector_output_dim": 64, "vision_output_dim": 64,
}  # fmt: skip
TEXT_CONFIG = {"num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "max_position_embeddings": 4096,
               "vocab_size": 32000, "intermediate_size": 1024}  # fmt: skip


@FAST
@given(
    st.dictionaries(
        st.sampled_from(VISION_KEYS),
        st.one_of(
            HF_VALUES,
            st.sampled_from(["siglip_vision_model", "pixtral", "llama4_vision_model", "qwen2_5_vl", "qwen3_vl"]),
        ),
        max_size=10,
    )
)
def test_a_vision_config_is_counted_or_refused_in_one_line(vision: dict[str, Any]) -> None:
    for base in ({}, VALID_VISION):
        _count_or_refuse({**base, **vision})


def _count_or_refuse(vision: dict[str, Any]) -> None:
    try:
        spec = ModelSpec.from_hf_config({"text_config": TEXT_CONFIG, "vision_config": vision}, id="acme/mm")
    except ConfigError as err:
        assert "\n" not in str(err) and str(err).startswith("model_config.vision_config")
    else:
        assert 0 < spec.vision_parameters < spec.parameters


@FAST
@given(st.dictionaries(st.sampled_from(HF_KEYS), HF_VALUES, max_size=15))
def test_hf_config_reader_never_crashes(config: dict[str, Any]) -> None:
    try:
        ModelSpec.from_hf_config(config, id="acme/from-config")
    except ConfigError as err:
        assert "\n" not in str(err) and str(err).startswith("model_config")
