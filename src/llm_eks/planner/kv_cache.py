"""The KV cache of one GPU as vLLM 0.33's v1 engine lays it out, per attention-layer type.

Mirrors, in vLLM 0.33.0 (the pinned image):
- vllm/v1/kv_cache_interface.py: each layer's spec. A page holds `block_size` tokens of
  `num_kv_heads x (head_size + head_size_v) x dtype` bytes; KV heads are split across TP ranks and replicated when
  TP exceeds them (`ModelConfig.get_num_kv_heads`). MLA caches one latent of `kv_lora_rank + qk_rope_head_dim` values
  (`MLAAttentionSpec`: one "head", no separate V, `max_tp_shards=1`, so every TP rank holds the whole latent).
  What one request may hold (`max_memory_usage_bytes` / `max_admission_blocks_per_request`): full and MLA layers
  `cdiv(len, block)` blocks; sliding-window layers `cdiv(min(window - 1 + in_flight, len), block) + 1`;
  chunked-local layers `cdiv(min(chunk + in_flight, len), block)`, where in_flight is
  `max_concurrent_batches x max_num_batched_tokens` (`VllmConfig.max_in_flight_tokens`).
- vllm/v1/core/kv_cache_planning.py (`_get_kv_cache_groups_uniform_page_size`): layers of one type form a bucket;
  group size = the smallest bucket (the largest when it is under 1.5x the smallest); each bucket splits into
  cdiv(layers, group size) groups, all drawing blocks from one pool of `group size x page` bytes per block.
- vllm/v1/core/kv_cache_utils.py (`get_max_concurrency_for_kv_cache_config`): blocks per request = the sum over
  groups of what one max_model_len request holds; "GPU KV cache size: N tokens" is
  `int(num_blocks / blocks_per_request x max_model_len)`.

Block size: 16 (`CacheConfig.DEFAULT_BLOCK_SIZE`). Some MLA backends raise it to 32, 64 or 128 tokens, which only
moves the rounding of each request by at most one block.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_eks.catalog.models import ModelSpec

BLOCK_TOKENS = 16


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class LayerType:
    """One kind of attention layer on one GPU: how many, its bytes per token per layer, its window or chunk."""

    kind: str  # full | mla | sliding | chunked
    layers: int
    bytes_per_token: int
    span: int = 0

    @property
    def page_bytes(self) -> int:
        return BLOCK_TOKENS * self.bytes_per_token

    def blocks_per_request(self, tokens: int, in_flight: int) -> int:
        """Blocks one request of `tokens` tokens holds in one group of this type (vLLM's admission worst case)."""
        if self.kind == "sliding":
            return cdiv(min(self.span - 1 + in_flight, tokens), BLOCK_TOKENS) + 1
        if self.kind == "chunked":
            return cdiv(min(self.span + in_flight, tokens), BLOCK_TOKENS)
        return cdiv(tokens, BLOCK_TOKENS)


@dataclass(frozen=True)
class KvLayout:
    """The KV cache of the heaviest GPU of a replica: its layer types, grouped as vLLM groups them."""

    types: tuple[LayerType, ...]
    # Groups per layer type (same order as `types`) and layers per group.
    groups: tuple[int, ...]
    group_layers: int
    # In-flight tokens a sliding or chunked layer keeps beyond its window.
    in_flight_tokens: int

    @property
    def bytes_per_token(self) -> int:
        """KV bytes one token takes on this GPU across all its layers (the per-layer spec summed)."""
        return sum(t.layers * t.bytes_per_token for t in self.types)

    @property
    def bytes_per_block(self) -> int:
        """One block ID's bytes: the largest page times the layers of a group (all groups share the block pool)."""
        return self.group_layers * max(t.page_bytes for t in self.types)

    def blocks_per_request(self, tokens: int) -> int:
        return sum(
            g * t.blocks_per_request(tokens, self.in_flight_tokens)
            for t, g in zip(self.types, self.groups, strict=True)
        )

    def num_blocks(self, available_bytes: int) -> int:
        return max(available_bytes, 0) // self.bytes_per_block

    def logged_tokens(self, num_blocks: int, max_model_len: int) -> int:
        """What vLLM logs as "GPU KV cache size: N tokens" for `num_blocks` blocks."""
        return int(num_blocks / self.blocks_per_request(max_model_len) * max_model_len)

    def requests_that_fit(self, num_blocks: int, tokens: int) -> int:
        """Requests of `tokens` tokens that fit at once."""
        return num_blocks // self.blocks_per_request(tokens)


def kv_bytes_per_token_per_layer(spec: ModelSpec, tp: int, dtype_bytes: int) -> int:
    """One layer's KV bytes per token on one GPU: the MLA latent (whole on every TP rank), or K and V of this GPU's
    KV heads."""
    if spec.is_mla:
        return (spec.kv_lora_rank + spec.qk_rope_head_dim) * dtype_bytes
    return max(1, spec.kv_heads // tp) * 2 * spec.head_dim * dtype_bytes


def kv_layout(spec: ModelSpec, tp: int, pp: int, dtype_bytes: int, in_flight_tokens: int) -> KvLayout:
    """The KV layout of the heaviest pipeline stage (ceil(layers / pp) layers, each type in proportion)."""
    per_layer = kv_bytes_per_token_per_layer(spec, tp, dtype_bytes)
    stage = cdiv(spec.layers, pp)
    sliding = cdiv(spec.sliding_window_layers * stage, spec.layers)
    chunked = cdiv(spec.chunked_attention_layers * stage, spec.layers)
    counts = [
        LayerType("mla" if spec.is_mla else "full", max(stage - sliding - chunked, 0), per_layer),
        LayerType("sliding", sliding, per_layer, spec.sliding_window),
        LayerType("chunked", chunked, per_layer, spec.attention_chunk_size),
    ]
    types = tuple(t for t in counts if t.layers > 0)
    sizes = [t.layers for t in types]
    group = min(sizes)
    if max(sizes) < 1.5 * group:
        group = max(sizes)
    return KvLayout(
        types=types,
        groups=tuple(cdiv(n, group) for n in sizes),
        group_layers=group,
        in_flight_tokens=in_flight_tokens,
    )
