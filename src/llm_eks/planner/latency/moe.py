"""Which experts a decode batch reads."""

from __future__ import annotations

from llm_eks.catalog.models import ModelSpec


def experts_touched(spec: ModelSpec, batch: int) -> float:
    """Expected fraction of a layer's routed experts a decode batch of `batch` sequences touches (each picks
    experts_per_token of num_experts, uniformly): 1 - (1 - k/E)^batch. 1 for a dense model."""
    if not spec.is_moe:
        return 1.0
    return 1.0 - (1.0 - spec.experts_per_token / spec.num_experts) ** max(batch, 1)
