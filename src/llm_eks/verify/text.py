"""How verify writes numbers and lists in its rows (one style for the table and the JSON)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from llm_eks.planner.at_load import LoadEstimate

# The multiplication sign of "2x g5.xlarge", as an escape so linters do not mistake it for an x.
TIMES = "\N{MULTIPLICATION SIGN}"


def ms(seconds: float) -> str:
    """A latency in milliseconds: one decimal below 100 ms, whole above; `+Inf` for the top bucket."""
    if math.isinf(seconds):
        return "+Inf ms"
    value = seconds * 1000
    return f"{value:.1f} ms" if value < 100 else f"{value:,.0f} ms"


def planned_ms(value: float) -> str:
    return f"{value:.1f} ms" if value < 100 else f"{value:,.0f} ms"


def secs(value: float) -> str:
    return f"{value:,.0f} s"


def tokens(value: int) -> str:
    return f"{value:,} tokens"


def percent(ratio: float) -> str:
    """A signed deviation, `+4.2%` for 1.042."""
    return f"{(ratio - 1) * 100:+.1f}%"


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def load_text(estimate: LoadEstimate) -> str:
    """The load an estimate was made at: `8 running, 1,024 -> 256 tokens` (a replica's sequences)."""
    return (
        f"{estimate.batch} running, {estimate.prompt_tokens:,} \N{RIGHTWARDS ARROW} {estimate.output_tokens:,} tokens"
    )


def joined(items: Iterable[str]) -> str:
    return ", ".join(items)


def image_tag(image: str) -> str:
    """`vllm/vllm-openai:v0.33.0@sha256:...` -> `v0.33.0` (the digest, when pinned, is compared in full)."""
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else "latest"
