"""The planner's accuracy tables, from the same code the tests and `make bench` run over the published
measurements: here the KV cache and memory figures against vLLM start-up logs (benchmarks/kv_error_table.py)."""

from __future__ import annotations

import statistics

from benchmarks.kv_error_table import rows


def _figure(value: float, figure: str) -> str:
    return f"{value:,.2f}" if "GiB" in figure else f"{value:,.0f}"


def _source(source: str) -> str:
    """A link where the source is a URL; the text as given otherwise."""
    if source.startswith("https://"):
        url = source.split()[0]
        label = url.removeprefix("https://").removeprefix("github.com/").split("#")[0]
        return f"[{label[:48]}]({url})"
    return source


def kv_accuracy_table() -> str:
    table = rows()
    out = [
        "| model | GPU, TP, vLLM | source | figure | vLLM logged | planned | error |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in table:
        logged, planned = _figure(r.logged, r.figure), _figure(r.planned, r.figure)
        out.append(
            f"| {r.model} | {r.where} | {_source(r.source)} | {r.figure} | {logged} | {planned} | {r.error:+.1%} |"
        )
    groups: dict[tuple[str, str], list[float]] = {}
    for r in table:
        groups.setdefault((r.figure, r.accounting), []).append(abs(r.error))
    out += ["", "| figure | vLLM accounting | median \\|error\\| | worst | figures |", "|---|---|---|---|---|"]
    for (figure, accounting), errors in sorted(groups.items()):
        out.append(f"| {figure} | {accounting} | {statistics.median(errors):.1%} | {max(errors):.1%} | {len(errors)} |")
    return "\n".join(out)
