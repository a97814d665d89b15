"""One DP x EP candidate (instance, TP, DP, nodes) evaluated against a request, as vLLM 0.33 builds it with
`--data-parallel-size DP --tensor-parallel-size TP --enable-expert-parallel`.

What runs (vLLM 0.33.0 wheel):
- each of the DP ranks is an engine of its own (a scheduler, `max_num_seqs`, `max_num_batched_tokens` and a KV cache
  each), its attention, dense MLPs, embeddings and lm_head split over its TP GPUs and replicated across ranks;
- the routed experts are spread whole over EP = DP x TP GPUs (fused_moe/config.py `FusedMoEParallelConfig.make`:
  "In EP, each device owns a set of experts fully", tp_size 1 inside the MoE layer), as evenly as vLLM can: the first
  E mod EP ranks take one more (fused_moe/expert_map_manager.py `determine_expert_map`), so the heaviest holds
  ceil(E / EP);
- with TP > 1 the default all2all backend makes the MoE sequence-parallel (config/parallel.py
  `use_sequence_parallel_moe`), and the shared experts are then replicated on every GPU (models/deepseek_v2.py,
  qwen2_moe.py, llama4.py: `disable_tp=is_sequence_parallel`); at TP 1 each GPU holds them whole anyway;
- multi-head latent attention caches one latent per token on every TP rank (`MLAAttentionSpec`, max_tp_shards 1);
- every MoE layer gathers the tokens of all ranks (all-gather dispatch) and reduce-scatters the result
  (distributed/device_communicators/all2all.py `AgRsAll2AllManager`, the default `allgather_reducescatter`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from llm_eks.catalog.accelerators import InstanceType
from llm_eks.planner.kv_cache import KvLayout, cdiv, kv_layout
from llm_eks.planner.latency import StepShape, collective_us
from llm_eks.planner.memory import budget, expert_parallel_batched_tokens, expert_parallel_peak_bytes
from llm_eks.planner.sizing import Context, Fit, deepstack_bytes, expert_padding, fit_of, step_shape

# Bytes per token the dispatch gathers: the hidden state in bf16 and the router logits (fp32 at most,
# models/deepseek_v2.py `_get_moe_router_dtype`) per routed expert; the combine reduce-scatters the bf16 output.
HIDDEN_BYTES = 2
ROUTER_LOGIT_BYTES = 4


@dataclass(frozen=True)
class ExpertSplit:
    """A checkpoint's weight bytes by how expert parallelism places them."""

    # Attention, dense MLPs, routers and norms of every decoder layer (split over TP within a DP rank).
    dense_bytes: float
    # Shared experts of every MoE layer (whole on every GPU).
    shared_bytes: float
    # One routed expert across all MoE layers.
    per_expert_bytes: float


def expert_split(ctx: Context) -> ExpertSplit:
    """The weights of `ctx` split as DP x EP places them: routed experts at the format's bytes, shared experts at
    them too unless the format quantizes only the routed experts (16-bit then), the rest of the decoder."""
    spec = ctx.spec
    routed = spec.expert_parameters * ctx.bytes_per_param
    shared_params = (spec.layers - spec.dense_layers) * spec.shared_experts * 3 * spec.hidden_size * spec.expert_width
    shared = shared_params * (2 if ctx.format.quantized_layers == "moe-experts" else ctx.bytes_per_param)
    decoder = ctx.weight_bytes - spec.embedding_parameters * 2 - spec.hidden_size * 2 - ctx.vision_bytes
    return ExpertSplit(
        dense_bytes=decoder - routed - shared,
        shared_bytes=shared,
        per_expert_bytes=routed / spec.num_experts,
    )


def evaluate_expert_parallel(ctx: Context, inst: InstanceType, tp: int, dp: int, nodes: int) -> Fit:
    """One DP x EP layout on `inst`: the heaviest GPU's memory as vLLM accounts it, each rank's KV cache, and the
    latency of one rank's step with the all-gather and reduce-scatter of every MoE layer."""
    spec, r = ctx.spec, ctx.request
    ep = tp * dp
    split = expert_split(ctx)
    local_experts = cdiv(spec.num_experts, ep)
    # Each GPU's experts are whole, so the MoE kernel pads them as at TP 1.
    expert_bytes = local_experts * split.per_expert_bytes * expert_padding(ctx, inst, 1)
    weight_per_gpu = (
        math.ceil((split.dense_bytes + spec.embedding_parameters * 2 + ctx.vision_bytes) / tp)
        + math.ceil(split.shared_bytes)
        + math.ceil(expert_bytes)
    )
    # max_num_seqs is per DP rank in vLLM: given, else the rank's share of the target.
    rank_seqs = r.max_num_seqs if r.max_num_seqs is not None else cdiv(r.target_concurrency, dp)
    batched = expert_parallel_batched_tokens(inst, dp, rank_seqs)
    weights = weight_per_gpu + deepstack_bytes(ctx, batched)
    peak = expert_parallel_peak_bytes(spec, dp, batched, rank_seqs)
    memory = budget(inst, r.gpu_memory_utilization, weights, peak, rank_seqs, spec.vocab_size)
    layout = kv_layout(spec, tp, 1, ctx.kv_dtype_bytes, 2 * batched)
    step = expert_parallel_step(ctx, inst, tp, dp, nodes, weight_per_gpu, expert_bytes, layout, batched)
    return fit_of(ctx, inst, (tp, 1, dp, nodes), memory, layout, step, True, local_experts)


def expert_parallel_step(
    ctx: Context,
    inst: InstanceType,
    tp: int,
    dp: int,
    nodes: int,
    weight_per_gpu: int,
    expert_bytes: float,
    layout: KvLayout,
    token_budget: int,
) -> StepShape:
    """A decode step of one DP rank (its share of target_concurrency) on one of its GPUs: its weight share, the
    shared experts, the local experts the whole replica's batch routes to, its own sequences' KV (sizing.step_shape
    at PP 1); and the dispatch and combine of every MoE layer over the EP group of all DP x TP GPUs."""
    spec, r = ctx.spec, ctx.request
    batch = cdiv(r.target_concurrency, dp)
    ep = tp * dp
    dispatch_per_token = spec.hidden_size * HIDDEN_BYTES + spec.num_experts * ROUTER_LOGIT_BYTES
    combine_per_token = spec.hidden_size * HIDDEN_BYTES

    def collectives(tokens: int) -> float:
        return collective_us(inst, nodes, tokens * dispatch_per_token, ep) + collective_us(
            inst, nodes, tokens * combine_per_token, ep
        )

    # Ranks step in lockstep, padded to the same batch (the gathered tensor holds dp x batch rows).
    decode_us = collectives(dp * batch)
    # A step whose ranks each carry a full chunk of prompt tokens, per prompt token of one rank.
    per_token_us = (collectives(dp * (batch + token_budget)) - decode_us) / token_budget
    # Per GPU and token the rank's dense share is over TP, and the experts' compute over EP for the replica's
    # dp x batch tokens is the same per rank token (2 FLOPs per active parameter over TP): step_shape's at PP 1.
    step = step_shape(ctx, inst, tp, 1, batch, spec.layers, weight_per_gpu, expert_bytes, layout, token_budget, 0.0)
    return dataclasses.replace(
        step,
        # Every rank's tokens reach the experts: the replica's whole batch decides which are read.
        expert_token_scale=dp,
        moe_layers_per_stage=spec.layers - spec.dense_layers,
        moe_collective_us=decode_us,
        moe_collective_us_per_token=per_token_us,
        replica_sequences=r.target_concurrency,
    )
