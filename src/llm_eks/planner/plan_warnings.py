"""What a plan warns of: stable warning ids a user can acknowledge, `PlanWarning`, and the latency targets an estimate
misses (`slo_warnings`)."""

from __future__ import annotations

from dataclasses import dataclass

# Plan warning ids: stable, so a user can acknowledge one (`cdk.Annotations.of(scope).acknowledge_warning(id, why)`)
# while the message keeps its numbers.
WARN_CONCURRENCY = "llm-eks:plan-concurrency"

WARN_ITL = "llm-eks:plan-itl"

WARN_TTFT = "llm-eks:plan-ttft"

WARN_NO_EFA = "llm-eks:plan-no-efa"

WARN_NO_PRICE = "llm-eks:plan-no-price"

# Raised where the plan meets the environment's capacity reservations (config/capacity.py), not by the planner:
# replicas.max needs more nodes of a family than its reservations hold.
WARN_RESERVATION = "llm-eks:plan-reservation"

WARNING_IDS = (WARN_CONCURRENCY, WARN_ITL, WARN_TTFT, WARN_NO_EFA, WARN_NO_PRICE, WARN_RESERVATION)


@dataclass(frozen=True)
class PlanWarning:
    """Something the plan could not meet or could not know; the stack turns it into a CDK warning annotation."""

    id: str
    message: str

    def __str__(self) -> str:
        return f"{self.message} [ack: {self.id}]"


def slo_warnings(
    max_itl_ms: float | None, max_ttft_ms: float | None, tpot_ms: float, ttft_ms: float
) -> list[PlanWarning]:
    """The latency targets an estimate misses: time per output token against max_itl_ms, TTFT against max_ttft_ms."""
    out = []
    if max_itl_ms is not None and tpot_ms > max_itl_ms:
        out.append(
            PlanWarning(WARN_ITL, f"time-per-output-token estimate {tpot_ms:g} ms exceeds max_itl_ms {max_itl_ms:g}")
        )
    if max_ttft_ms is not None and ttft_ms > max_ttft_ms:
        out.append(
            PlanWarning(WARN_TTFT, f"time-to-first-token estimate {ttft_ms:g} ms exceeds max_ttft_ms {max_ttft_ms:g}")
        )
    return out
