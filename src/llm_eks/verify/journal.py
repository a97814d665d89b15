"""`--journal FILE`: what `llm-eks verify` and `llm-eks canary` did, one JSON object per line (JSON Lines), appended
and flushed as each step ends, so a command that is stopped leaves every line it wrote whole and a pipeline keeps
the file as an artifact.

Every line has `command`, `event`, `environment` and `at` (UTC, ISO 8601); the rest depends on the event:

    verify:  {"event": "wait-ready", "ready": bool, "starting": [str, ...]}         each readiness poll (--wait-ready)
             {"event": "verification", "window", "verdict", "counts", "rows": [...]}  the report, as --json writes it
             {"event": "exit", "exit_status": int}                                  last
    canary:  {"event": "step", "workload", "step": int, "weight": int, "window", "outcome", "weight_after": int,
              "verdict", "counts", "rows": [...], "message": str}                   each step
             {"event": "exit", "workload", "exit_status": int, "weight": int | null, "message": str}   last

A step's `outcome` is "held", "failed" (a drift or breach), "insufficient data" (the next version was not judged
over the hold), "error" (an exception stopped it) or "interrupted" (SIGINT or SIGTERM); `weight_after` is the next
version's share when the step ended (0 after any outcome but "held"), null when setting it back failed. Keys are only
ever added.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import IO, Any

from llm_eks.error_codes import E504
from llm_eks.errors import fail


def now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


class Journal:
    """Appends one JSON line per record to `path` (None: keeps nothing); a path that cannot be written is a one-line
    error before the command does anything."""

    def __init__(self, path: str | None, command: str, environment: str, field: str = "--journal") -> None:
        self.command, self.environment = command, environment
        self.records: list[dict[str, Any]] = []
        self._file: IO[str] | None = None
        if path is not None:
            try:
                self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())
            except OSError as err:
                raise fail(E504, field, path, f"cannot be written ({err.strerror or err})") from None

    def write(self, event: str, **fields: Any) -> None:
        record = {"command": self.command, "event": event, "environment": self.environment, "at": now(), **fields}
        self.records.append(record)
        if self._file is not None:
            self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def rows_of(report_dict: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict, counts and rows of a report's JSON form, as a journal line carries them."""
    return {key: report_dict[key] for key in ("verdict", "counts", "rows")}
