"""What a Neuron engine compiles ahead of time: the pod's chips and tensor parallelism, the heads each core holds, and
the compiled shape (batch, sequence length, buckets, KV blocks) that `max_model_len`, `max_num_seqs` and the Neuron
settings must match.

- Chips per pod: one, or all of the node's, are always schedulable; a pod of some but not all chips needs the Neuron
  scheduler extension, which hands out contiguous chips: any count on Inferentia2's ring, 1, 4, 8 or 16 on Trainium's
  2D torus, and on Trainium2 no partial count it documents (aws-neuron/aws-neuron-sdk deploy/infrastructure/
  scheduler.rst at 81ce03ae: "requesting one or all Neuron cores or devices is always valid"). The planner packs a
  node evenly, so a partial count divides the node's chips.
- Heads per core, as NxD Inference shards grouped-query attention (modules/attention/gqa.py at
  aws-neuron/neuronx-distributed-inference@ef2731ef, `get_shardable_head_counts`): query heads are padded up to a
  multiple of the tensor-parallel size; KV heads that TP does not divide are replicated to TP (when TP is a multiple
  of them) or to the padded query heads. The vLLM-native plugin's own model code is assumed to shard alike (its
  source at the pinned tag is not readable here).
- Buckets: NxD Inference's default buckets are powers of two from 128 up to the length, the last one the length
  itself (modules/autobucketing.py `generate_buckets`: `[2**i for i in range(log2(min), round(log2(max)))] +
  [max]`); vllm-neuron's decode batch buckets default to powers of two up to max_num_seqs (vllm-neuron/docs/guides/
  reference-configuration.md at 81ce03ae). The planner renders them explicitly, so the compiled shape, and with it
  the compile cache's key, never depends on a default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llm_eks.catalog.accelerators import InstanceType
from llm_eks.catalog.model_spec import ModelSpec
from llm_eks.planner.kv_cache import cdiv

# NxD Inference's smallest default bucket.
NXDI_MIN_BUCKET = 128
# vllm-neuron: the KV block size it defaults to (reference-configuration.md: "`block_size` ... 32"), rendered.
VLLM_NEURON_BLOCK_SIZE = 32
# vllm-neuron's largest prefill segment: kv_segment_size_buckets values "must be in {512, 1024, 2048, 4096, 8192}";
# prefix caching needs segmented prefill, and a segment bucket must equal the token budget (features guide).
SEGMENT_SIZES = (512, 1024, 2048, 4096, 8192)
# Trainium's 2D torus: the device counts the scheduler extension hands out (scheduler.rst).
TORUS_DEVICE_COUNTS = (1, 4, 8, 16)


def power_buckets(low: int, high: int) -> tuple[int, ...]:
    """NxD Inference's bucket rule: powers of two from `low` below round(log2(high)), then `high` itself."""
    if high <= low:
        return (high,)
    return (*(2**i for i in range(int(math.log2(low)), round(math.log2(high)))), high)


def pod_chip_counts(inst: InstanceType) -> tuple[int, ...]:
    """Chips a pod may take on `inst`, smallest first: counts that pack the node evenly and that the device plugin
    (one or all) or the scheduler extension (contiguous partial counts) can hand out."""
    n = inst.accelerators
    if inst.family in ("trn1", "trn1n"):
        partial = [c for c in TORUS_DEVICE_COUNTS if c < n]
    elif inst.family == "inf2":
        partial = list(range(1, n))
    else:
        partial = [1]
    return tuple(sorted({c for c in partial if n % c == 0} | {1, n}))


def needs_scheduler_extension(inst: InstanceType, chips: int) -> bool:
    """A pod of more than one but fewer than all of the node's chips: only the Neuron scheduler extension hands it
    contiguous ones."""
    return 1 < chips < inst.accelerators


@dataclass(frozen=True)
class ShardedHeads:
    """Attention heads after NxD Inference's sharding for one tensor-parallel size."""

    query_heads: int
    kv_heads: int
    tensor_parallel_size: int

    @property
    def kv_heads_per_core(self) -> int:
        return self.kv_heads // self.tensor_parallel_size


def sharded_heads(spec: ModelSpec, tp: int) -> ShardedHeads:
    """Query heads padded to a multiple of TP; KV heads kept, replicated to TP, or converted to one per query head."""
    query = cdiv(spec.attention_heads, tp) * tp
    kv = spec.kv_heads
    if spec.attention_heads == spec.kv_heads:
        kv = query
    elif kv < tp or kv % tp:
        kv = tp if tp % kv == 0 else query
    return ShardedHeads(query, kv, tp)


@dataclass(frozen=True)
class CompiledShape:
    """The shape a Neuron engine compiles: batch, length, buckets and KV allocation; part of the plan."""

    # "nxd-inference" or "vllm-neuron" (catalog/neuron.py).
    engine: str
    max_num_seqs: int
    max_model_len: int
    # KV blocks (vLLM's --num-gpu-blocks-override) of block_size tokens.
    block_size: int
    num_blocks: int
    prefix_caching: bool
    # nxd-inference: prompt (context encoding) and decode (token generation) length buckets.
    context_encoding_buckets: tuple[int, ...] = ()
    token_generation_buckets: tuple[int, ...] = ()
    # vllm-neuron: the token budget of a prefill step (--max-num-batched-tokens), its buckets, the prefill segment
    # buckets (segmented prefill) and the decode batch buckets.
    max_num_batched_tokens: int | None = None
    num_batched_tokens_buckets: tuple[int, ...] = ()
    kv_segment_size_buckets: tuple[int, ...] = ()
    num_seqs_buckets: tuple[int, ...] = ()

    @property
    def kv_tokens(self) -> int:
        """Tokens the compiled KV allocation holds."""
        return self.num_blocks * self.block_size

    def summary(self) -> str:
        """One line: `batch 4 x 4096 tokens, buckets ...`."""
        text = f"batch {self.max_num_seqs} x {self.max_model_len} tokens"
        if self.engine == "nxd-inference":
            text += (
                f", contiguous KV ({self.num_blocks} block(s) of {self.block_size}); context buckets "
                f"{_list(self.context_encoding_buckets)}, token-generation buckets "
                f"{_list(self.token_generation_buckets)}"
            )
        else:
            text += (
                f", {self.num_blocks} KV blocks of {self.block_size}, prefix caching "
                f"{'on' if self.prefix_caching else 'off'}; prefill {self.max_num_batched_tokens} tokens a step "
                f"(buckets {_list(self.num_batched_tokens_buckets)}, segments "
                f"{_list(self.kv_segment_size_buckets) if self.kv_segment_size_buckets else 'none'}), decode batch "
                f"buckets {_list(self.num_seqs_buckets)}"
            )
        return text


def _list(values: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, values)) + "]"


def compiled_shape(engine: str, max_num_seqs: int, max_model_len: int) -> CompiledShape:
    """The shape the plan compiles for `max_num_seqs` sequences of up to `max_model_len` tokens.

    nxd-inference: the contiguous KV layout (prefix caching off; the plugin then sets the block size to max_model_len
    and needs exactly max_num_seqs blocks, vllm-user-guide-v1.rst "Known Issues"), NxD Inference's default buckets
    written out. vllm-neuron: blocks of 32 tokens, enough for every sequence to reach max_model_len; prefill in steps
    of the largest segment size up to max_model_len (8192 at most), with prefix caching (on by default there) when a
    segment size fits, else one unsegmented step of the whole length and prefix caching off."""
    if engine == "nxd-inference":
        buckets = power_buckets(NXDI_MIN_BUCKET, max_model_len)
        return CompiledShape(
            engine=engine,
            max_num_seqs=max_num_seqs,
            max_model_len=max_model_len,
            block_size=max_model_len,
            num_blocks=max_num_seqs,
            prefix_caching=False,
            context_encoding_buckets=buckets,
            token_generation_buckets=buckets,
        )
    block = VLLM_NEURON_BLOCK_SIZE
    segments = [s for s in SEGMENT_SIZES if s <= max_model_len]
    # Without segments the one prefill step holds the whole length, and vLLM wants it to hold the batch too.
    budget = segments[-1] if segments else max(max_model_len, max_num_seqs)
    return CompiledShape(
        engine=engine,
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
        block_size=block,
        num_blocks=max_num_seqs * cdiv(max_model_len, block),
        prefix_caching=bool(segments),
        max_num_batched_tokens=budget,
        num_batched_tokens_buckets=(budget,),
        kv_segment_size_buckets=(budget,) if segments else (),
        num_seqs_buckets=power_buckets(1, max_num_seqs),
    )
