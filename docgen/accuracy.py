"""The planner's accuracy tables, from the same code the tests and `make bench` run over the published
measurements: the KV cache and memory figures against vLLM start-up logs (benchmarks/kv_error_table.py), and the
latency estimates against published `vllm bench serve` runs (benchmarks/latency_error_table.py)."""

from __future__ import annotations

import re
import statistics

from benchmarks import latency_error_table as latency
from benchmarks.kv_error_table import rows
from docgen.markdown import cell


def _figure(value: float, figure: str) -> str:
    return f"{value:,.2f}" if "GiB" in figure else f"{value:,.0f}"


# The fixtures record where a log was found when its repository is unknown (a search tool's file id): provenance for
# whoever maintains them, nothing a reader can follow, so the page leaves it out.
_FOUND_BY = re.compile(r" \(our search index's file id \d+\)")


def _source(source: str) -> str:
    """A link where the source is a URL; the text as given otherwise."""
    if source.startswith("https://"):
        url = source.split()[0]
        label = url.removeprefix("https://").removeprefix("github.com/").split("#")[0]
        return f"[{label[:48]}]({url})"
    return cell(_FOUND_BY.sub("", source))


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


def latency_accuracy_table() -> str:
    table = latency.rows()
    out = [
        "| run | GPU | model, setting | metric | measured ms | estimated | error | TTFT ms | estimated | error |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        mark = " (held out)" if r.held_out else (" (unexplained²)" if r.unexplained else "")
        ttft = (
            "| | |"
            if r.ttft_error is None
            else f"{r.ttft_measured:,.0f} | {r.ttft_estimated:,.0f} | {r.ttft_error:+.1%} |"
        )
        out.append(
            f"| {_source(r.source)}{mark} | {r.gpu} | {r.model}, {r.setting} | {r.metric} | {r.measured:g} | "
            f"{r.estimated:.2f} | {r.error:+.1%} | {ttft}"
        )
    out += ["", "| figure | group | runs | median \\|error\\| | worst |", "|---|---|---|---|---|"]
    for key, ttft in (("part", False), ("generation", False), ("source", False), ("part", True)):
        for g in latency.summarize(table, key, ttft=ttft):
            figure = "TTFT" if ttft else "ITL / TPOT"
            out.append(f"| {figure} | {_source(g.group)} | {g.points} | {g.median:.1%} | {g.worst:.1%} |")
    explained = [r for r in table if r.unexplained is None]
    out += ["", "| ITL / TPOT without the unexplained runs | runs | median \\|error\\| | worst |", "|---|---|---|---|"]
    for g in latency.summarize(explained, "part"):
        out.append(f"| {g.group} | {g.points} | {g.median:.1%} | {g.worst:.1%} |")
    notes = [f"- `{r.id}`: {r.unexplained}" for r in table if r.unexplained]
    return "\n".join([*out, "", "² Runs the model does not reproduce, and why:", "", *notes])
