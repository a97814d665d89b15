"""The rule names and the Finding every check returns."""

from __future__ import annotations

from dataclasses import dataclass

SCHEDULING = "SCHEDULING"
GPU_LIMIT = "GPU_LIMIT"
DRAIN = "DRAIN"
PROMQL = "PROMQL"
POD_SECURITY = "POD_SECURITY"
RULES = (SCHEDULING, GPU_LIMIT, DRAIN, PROMQL, POD_SECURITY)


@dataclass(frozen=True)
class Finding:
    """One problem: which rule, which object ("Kind/namespace/name"), what is wrong, and how to fix it."""

    rule: str
    object: str
    problem: str
    fix: str

    @property
    def message(self) -> str:
        """The one line a user reads: `<object>: <problem>. Fix: <fix>`."""
        return f"{self.object}: {self.problem}. Fix: {self.fix}"

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message}"
