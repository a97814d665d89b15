"""The report: an aligned plain-text table (one row per check) or one JSON object of a stable shape.

JSON (`llm-eks verify --json`):

    {"environment": str, "context": str, "server": str, "window": str, "observed_at": UTC ISO 8601,
     "verdict": "ok" | "unknown" | "insufficient" | "drift" | "breach"   (the worst row's),
     "counts": {"ok": int, "unknown": int, "insufficient": int, "drift": int, "breach": int},
     "rows": [{"check", "workload", "planned", "observed", "verdict", "detail"}, ...]}

Keys are only ever added, never renamed or removed; rows keep the table's order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llm_eks.verify.rows import VERDICTS, Row, worst

COLUMNS = ("CHECK", "WORKLOAD", "PLANNED", "OBSERVED", "VERDICT", "DETAIL")


@dataclass(frozen=True)
class Report:
    environment: str
    context: str
    server: str
    window: str
    observed_at: str
    rows: tuple[Row, ...]

    @property
    def verdict(self) -> str:
        return worst(row.verdict for row in self.rows)

    def counts(self) -> dict[str, int]:
        return {v: sum(1 for row in self.rows if row.verdict == v) for v in VERDICTS}

    def to_dict(self) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "context": self.context,
            "server": self.server,
            "window": self.window,
            "observed_at": self.observed_at,
            "verdict": self.verdict,
            "counts": self.counts(),
            "rows": [row.to_dict() for row in self.rows],
        }


def table(report: Report) -> str:
    """The rows as aligned columns under a header line, then a one-line summary."""
    cells = [COLUMNS] + [(r.check, r.workload, r.planned, r.observed, r.verdict, r.detail) for r in report.rows]
    return "\n".join(
        [
            f"llm-eks verify {report.environment}: context {report.context}, window {report.window}, "
            f"{report.observed_at}",
            "",
            *_aligned(cells),
            "",
            summary(report),
        ]
    )


def _aligned(cells: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]).rstrip() for row in cells]


def summary(report: Report) -> str:
    counts = ", ".join(f"{n} {v}" for v, n in report.counts().items() if n)
    return f"{len(report.rows)} checks: {counts}; verdict {report.verdict}"


def to_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
