"""What one check reports: a `Row` (check, workload, planned, observed, verdict, detail) and the verdicts' order."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeAlias

# ok: as planned; unknown: nothing to compare (no pod yet, no series), never a pass in disguise; insufficient: too
# few observations in the window to judge a percentile (llm_eks.planner.drift.min_samples), never ok either; drift:
# it runs, but not as planned; breach: an SLO is broken or something planned is missing or refused.
Verdict: TypeAlias = Literal["ok", "unknown", "insufficient", "drift", "breach"]
VERDICTS: tuple[Verdict, ...] = ("ok", "unknown", "insufficient", "drift", "breach")
# The verdicts that make `llm-eks verify` exit 1.
FAILING: frozenset[Verdict] = frozenset({"drift", "breach"})


@dataclass(frozen=True)
class Row:
    """One line of the report: what was compared for whom, the two sides, the verdict and why."""

    check: str
    # The workload (its object name, e.g. vllm-llama), or the NodePool for the node checks.
    workload: str
    planned: str
    observed: str
    verdict: Verdict
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "check": self.check,
            "workload": self.workload,
            "planned": self.planned,
            "observed": self.observed,
            "verdict": self.verdict,
            "detail": self.detail,
        }


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The most severe verdict (ok when there is none)."""
    return max(verdicts, key=VERDICTS.index, default="ok")


def exit_code(rows: Iterable[Row]) -> int:
    """0 when every row is ok, unknown or insufficient, 1 on any drift or breach."""
    return 1 if any(row.verdict in FAILING for row in rows) else 0
