"""`llm-eks usage`: the input and output tokens each tenant used per model over a window, for billing and chargeback,
read from the environment's Prometheus through the API server's service proxy (the path and RBAC `llm-eks verify`
uses: llm_eks.verify.prometheus). One instant query, evaluated at the window's end, whose range is the window
(llm_eks.manifests.gateway.usage: the AI Gateway's token counter, per tenant header and requested model).

Figures are `increase()` of counters, rounded to whole tokens: exact for the scrapes inside the window, extrapolated
to its edges (at most a scrape interval's tokens at each end), and bounded by what the query endpoint holds (a window
older than its retention reads as no use).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from llm_eks.config import EnvironmentConfig
from llm_eks.error_codes import E507, E508
from llm_eks.errors import fail
from llm_eks.manifests.gateway.props import GATEWAY_NAMESPACE
from llm_eks.manifests.gateway.usage import INPUT, MODEL, OUTPUT, TENANT, TOKEN_TYPE, usage_query
from llm_eks.verify.prometheus import Prometheus

TIME_ALLOWED = "an ISO 8601 time such as 2026-11-01 or 2026-11-01T09:00:00Z (UTC unless it names an offset)"
# The shortest window: below the scrape interval increase() has fewer than two samples to read.
MIN_WINDOW_S = 60
COLUMNS = ("tenant", "model", "input_tokens", "output_tokens")


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime

    @property
    def seconds(self) -> int:
        return int((self.end - self.start).total_seconds())


@dataclass(frozen=True)
class UsageRow:
    tenant: str
    # The model the tenant asked for; "" for a declared tenant with no use in the window.
    model: str
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Usage:
    environment: str
    window: Window
    rows: tuple[UsageRow, ...]


def _time(field: str, text: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise fail(E507, field, text, TIME_ALLOWED) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).replace(microsecond=0)


def usage_window(start: str, end: str | None, now: datetime) -> Window:
    """The window --from .. --to (default: now), in whole UTC seconds."""
    begin = _time("--from", start)
    finish = _time("--to", end) if end is not None else now.astimezone(UTC).replace(microsecond=0)
    if finish > now:
        raise fail(E507, "--to", end, f"must not be after now ({stamp(now)}): the tokens are not counted yet")
    if (finish - begin).total_seconds() < MIN_WINDOW_S:
        raise fail(E507, "--from", start, f"must be at least a minute before --to ({stamp(finish)})")
    return Window(begin, finish)


def stamp(t: datetime) -> str:
    return t.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def declared_tenants(config: EnvironmentConfig) -> tuple[str, ...]:
    """The environment's tenants by name (none declared: one per workload, named by the gateway); E508 without a
    gateway, where no request carries a tenant."""
    if config.gateway is None:
        raise fail(
            E508,
            "--env",
            config.name,
            "it has no gateway, and tokens are counted per tenant at the gateway: name an environment with "
            "gateway.tenants",
        )
    return tuple(sorted(config.gateway.tenants))


def read_usage(prometheus: Prometheus, config: EnvironmentConfig, window: Window, tenants: Sequence[str] = ()) -> Usage:
    """Tokens per (tenant, model) over the window, and a zero row for each of `tenants` with none."""
    found: dict[tuple[str, str], dict[str, float]] = {}
    samples = prometheus.query(usage_query(GATEWAY_NAMESPACE, window.seconds), at=window.end.timestamp())
    for labels, value in samples:
        if not math.isfinite(value):
            continue
        key = (labels.get(TENANT, ""), labels.get(MODEL, ""))
        found.setdefault(key, {})[labels.get(TOKEN_TYPE, "")] = value
    rows = [
        UsageRow(tenant, model, round(kinds.get(INPUT, 0.0)), round(kinds.get(OUTPUT, 0.0)))
        for (tenant, model), kinds in found.items()
    ]
    used = {r.tenant for r in rows}
    rows += [UsageRow(t, "", 0, 0) for t in tenants if t not in used]
    return Usage(config.name, window, tuple(sorted(rows, key=lambda r: (r.tenant, r.model))))


def _cells(r: UsageRow) -> tuple[str, str, int, int]:
    return (r.tenant or "-", r.model or "-", r.input_tokens, r.output_tokens)


def table(u: Usage) -> str:
    """A heading naming the window, then one aligned row per (tenant, model), numbers right-aligned."""
    head = f"usage of {u.environment} from {stamp(u.window.start)} to {stamp(u.window.end)}"
    rows = [tuple(c.upper() for c in COLUMNS), *(tuple(str(c) for c in _cells(r)) for r in u.rows)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = [
        f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:>{widths[2]}}  {row[3]:>{widths[3]}}" for row in rows
    ]
    return "\n".join([head, "", *lines])


def to_csv(u: Usage) -> str:
    """One line per (tenant, model), with the window on each line so files from several runs concatenate."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("from", "to", *COLUMNS))
    start, end = stamp(u.window.start), stamp(u.window.end)
    writer.writerows((start, end, r.tenant, r.model, r.input_tokens, r.output_tokens) for r in u.rows)
    return out.getvalue().rstrip("\n")


def to_json(u: Usage) -> str:
    rows = [
        {"tenant": r.tenant, "model": r.model or None, "input_tokens": r.input_tokens, "output_tokens": r.output_tokens}
        for r in u.rows
    ]
    body = {"environment": u.environment, "from": stamp(u.window.start), "to": stamp(u.window.end), "rows": rows}
    return json.dumps(body, indent=2)
