"""The planner's accuracy tables, from the same code the tests and `make bench` run over the published
measurements: the KV cache and memory figures against vLLM start-up logs (benchmarks/kv_error_table.py), and the
latency estimates against published `vllm bench serve` runs (benchmarks/latency_error_table.py), and the
prefill/decode estimate against published P/D benchmarks (benchmarks/pd_error_table.py)."""

from __future__ import annotations

import dataclasses
import re
import statistics

from benchmarks import latency_error_table as latency
from benchmarks import latency_rules as rules
from benchmarks import pd_error_table as pd
from benchmarks import pd_rules
from benchmarks.kv_error_table import rows
from docgen.markdown import cell
from llm_eks.planner.latency import FITTED, FIXTURE_SHA256


def _figure(value: float, figure: str) -> str:
    return f"{value:,.2f}" if "GiB" in figure else f"{value:,.0f}"


# The fixtures record where a log was found when its repository is unknown (a search tool's file id): provenance for
# whoever maintains them, nothing a reader can follow: the page marks the cell (¹) for its footnote instead.
_FOUND_BY = re.compile(r" \(our search index's file id \d+\)")
FOOTNOTE = "\N{SUPERSCRIPT ONE}"


def _source(source: str) -> str:
    """A link where the source is a URL; the text as given otherwise."""
    if source.startswith("https://"):
        url = source.split()[0]
        label = url.removeprefix("https://").removeprefix("github.com/").split("#")[0]
        return f"[{label[:48]}]({url})"
    return cell(_FOUND_BY.sub(FOOTNOTE, source))


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


def _pct(value: float) -> str:
    return f"{value:.1%}"


def _signed(value: float | None) -> str:
    return "" if value is None else f"{value:+.1%}"


def latency_rules() -> str:
    """The scoring rules as benchmarks/latency_rules.py holds them, and what each excluded."""
    result = latency.scores()
    out = [f"- **{r.id}.** {r.text}" for r in rules.RULES]
    counts: dict[str, int] = {}
    for _, rule, _why in result.excluded:
        counts[rule] = counts.get(rule, 0) + 1
    if result.excluded:
        by_rule = ", ".join(f"{n} by {rule}" for rule, n in sorted(counts.items()))
        out += ["", f"Of {len(result.rows) + len(result.excluded)} runs in the fixture, {len(result.excluded)} are "
                f"excluded ({by_rule}):", "", "| run | rule | the source shows |", "|---|---|---|"]  # fmt: skip
        out += [f"| `{run_id}` | {rule} | {why} |" for run_id, rule, why in result.excluded]
    return "\n".join(out)


def latency_summary() -> str:
    """The numbers the latency section's prose states, from the fixture and the fit."""
    result = latency.scores()
    table = result.rows
    gens = sorted({r.generation for r in table})
    tps = sorted({int(r.setting.split(",")[0].removeprefix("TP")) for r in table})
    seqs = sorted({int(r.setting.split(", ")[1].split()[0]) for r in table})
    prompts = sorted({int(r.setting.split(", ")[2].split("/")[0]) for r in table})
    ttft = [r for r in table if r.ttft_error is not None and r.ttft_rule is None]
    fields = dataclasses.fields(FITTED)
    constants = ", ".join(f"`{f.name}` {getattr(FITTED, f.name):g}" for f in fields)
    lines = [
        f"{len(table)} runs from {len(result.folds)} sources are scored ({len(ttft)} of them with a TTFT the rules "
        f"admit), on {len(gens)} GPU generations ({', '.join(gens)}), TP {tps[0]} to {tps[-1]}, {seqs[0]} to "
        f"{seqs[-1]} sequences, prompts of {prompts[0]:,} to {prompts[-1]:,} tokens. The {len(fields)} "
        f"fitted constants (`latency/fitted.py`, fitted on every admitted run; the fixture's sha256 "
        f"`{FIXTURE_SHA256[:12]}...` is recorded beside them): {constants}.",
        "",
        "| goal, on sources left out of the fit | figure | goal | |",
        "|---|---|---|---|",
    ]
    for name, (value, limit, met) in latency.goals(table).items():
        lines.append(f"| {name} \\|error\\| | {_pct(value)} | ≤ {limit:.0%} | {'met' if met else '**not met**'} |")
    worst = max(table, key=lambda r: abs(r.error))
    worst_ttft = max(ttft, key=lambda r: abs(r.ttft_error or 0))
    lines += [
        "",
        f"The worst decode figure is `{worst.id}` ({_signed(worst.error)}); the worst TTFT `{worst_ttft.id}` "
        f"({_signed(worst_ttft.ttft_error)}). The fixed serving overhead the fit finds, {FITTED.serving_ms:g} ms, is "
        "what the published TTFTs hold beyond what the engine computes; it varies between deployments more than "
        "anything the model computes, and is the largest single term of a short prompt's TTFT.",
    ]
    return "\n".join(lines)


def latency_accuracy_table() -> str:
    result = latency.scores()
    table = result.rows
    out = [
        "| run | GPU | model, setting | metric | measured ms | estimated (left out) | error | TTFT ms | estimated | "
        "error | p99 ITL ms | estimated | p99 TTFT ms | estimated |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        if r.ttft_measured is None:
            ttft = "| | |"
        elif r.ttft_rule is not None:
            ttft = f"{r.ttft_measured:,.0f} | not scored ({r.ttft_rule.split(':')[0]}) | |"
        else:
            ttft = f"{r.ttft_measured:,.0f} | {r.ttft_held_out or 0:,.0f} | {_signed(r.ttft_error)} |"
        itl99 = "| |" if r.itl_p99_measured is None else f"{r.itl_p99_measured:g} | {r.itl_p99_held_out:.1f} |"
        ttft99 = (
            "| |"
            if r.ttft_p99_measured is None or r.ttft_rule is not None
            else f"{r.ttft_p99_measured:,.0f} | {r.ttft_p99_held_out:,.0f} |"
        )
        out.append(
            f"| {_source(r.source)} | {r.gpu} | {r.model}, {r.setting} | {r.metric} | {r.measured:g} | "
            f"{r.held_out:.2f} | {_signed(r.error)} | {ttft} {itl99} {ttft99}"
        )
    names = {"decode": "ITL / TPOT", "ttft": "TTFT", "itl_p99": "p99 ITL", "ttft_p99": "p99 TTFT"}
    for key, title in (("generation", "GPU generation"), ("source", "source")):
        out += ["", f"| figure | {title} | runs | median \\|error\\| | worst |", "|---|---|---|---|---|"]
        for figure, name in names.items():
            for g in latency.summarize(table, "all", figure) + latency.summarize(table, key, figure):
                group = "all" if g.group == "all" else _source(g.group)
                out.append(f"| {name} | {group} | {g.points} | {_pct(g.median)} | {_pct(g.worst)} |")
    return "\n".join(out)


def neuron_latency_accuracy() -> str:
    """The Neuron latency model's summary and its table, each run scored by the constants fitted without its source
    (benchmarks/neuron_latency.py)."""
    from benchmarks import neuron_latency as neuron
    from llm_eks.planner.neuron.latency import FITTED as NEURON_FITTED
    from llm_eks.planner.neuron.latency import FIXTURE_SHA256 as NEURON_FIXTURE_SHA256

    result = neuron.scores()
    table = result.rows
    figures = neuron.summary(table)
    constants = ", ".join(f"`{f.name}` {getattr(NEURON_FITTED, f.name):g}" for f in dataclasses.fields(NEURON_FITTED))
    instances = sorted({r.instance_type for r in table})
    lines = [
        f"{len(table)} runs from {len(result.folds)} sources on {', '.join(instances)}. The "
        f"{len(dataclasses.fields(NEURON_FITTED))} constants (`planner/neuron/latency.py`, fitted on every run; the "
        f"fixture's sha256 `{NEURON_FIXTURE_SHA256[:12]}...` beside them): {constants}.",
        "",
        "| on sources left out of the fit | median \\|error\\| | worst |",
        "|---|---|---|",
    ]
    names = {"decode": "decode step", "ttft": "TTFT", "bandwidth-only decode": "decode, weights over bandwidth alone"}
    for key, (median, worst) in figures.items():
        lines.append(f"| {names[key]} | {_pct(median)} | {_pct(worst)} |")
    lines += [
        "",
        "| run | source | instance | model, setting | decode ms | estimated (left out) | error | TTFT ms | estimated "
        "| error |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(
            f"| {cell(r.id)} | {cell(r.source)} | {r.instance_type} | {cell(r.setting)} | {r.decode_measured:g} | "
            f"{r.decode_held_out:.2f} | {_signed(r.decode_error)} | {r.ttft_measured:,.0f} | {r.ttft_held_out:,.0f} | "
            f"{_signed(r.ttft_error)} |"
        )
    return "\n".join(lines)


def pd_rules_section() -> str:
    """The P/D scoring rules as benchmarks/pd_rules.py holds them, every rule each excluded benchmark breaks, and the
    published benchmarks looked at that hold no row."""
    result = pd.scores()
    out = [f"- **{r.id}.** {r.text}" for r in pd_rules.RULES]
    total = len(result.rows) + len(result.excluded)
    out += ["", f"Of {total} benchmark(s) in the fixture, {len(result.excluded)} excluded:", ""]
    out += ["| benchmark | source | rules it breaks |", "|---|---|---|"]
    for run_id, source, breaches in result.excluded:
        why = "; ".join(f"{rule}: {text}" for rule, text in breaches)
        out.append(f"| `{run_id}` | {_source(source)} | {cell(why)} |")
    out += ["", "Published P/D benchmarks looked at that hold no row of the fixture:", ""]
    out += ["| source | what it states, and why it holds no row |", "|---|---|"]
    out += [f"| {_source(url)} | {cell(why)} |" for url, why in pd_rules.SOURCES_LOOKED_AT]
    return "\n".join(out)


def pd_accuracy_table() -> str:
    """The scored P/D benchmarks: published vs estimated TTFT and time per output token, and the decision."""
    result = pd.scores()
    summary = {s.figure: s for s in pd.summarize(result.rows)}
    if not result.rows:
        return (
            f"No published benchmark in the fixture (sha256 `{pd.digest()[:12]}...`) passes the rules above, so the "
            "planner's P/D TTFT, time per output token and decision are **not scored**: there is no error figure "
            "to state, and none is claimed."
        )
    agree = [r.agrees for r in result.rows if r.agrees is not None]
    lines = [
        "| benchmark | setting | TTFT ms | estimated | error | decode metric | ms | estimated | error | "
        "source found better | planner recommends |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result.rows:
        est = "" if r.ttft_estimated is None else f"{r.ttft_estimated:,.0f}"
        ttft_err = f"not scored ({r.ttft_rule.split(':')[0]})" if r.ttft_rule else _signed(r.ttft_error)
        dec = "" if r.decode_estimated is None else f"{r.decode_estimated:g}"
        lines.append(
            f"| {_source(r.source)} | {cell(r.setting)} | {r.ttft_measured:,.0f} | {est} | {ttft_err} | "
            f"{r.decode_metric} | {r.decode_measured:g} | {dec} | {_signed(r.decode_error)} | "
            f"{r.published_better or ''} | {r.recommended or cell(r.refused or '')} |"
        )
    lines += ["", "| figure | benchmarks | median \\|error\\| | worst |", "|---|---|---|---|"]
    for s in summary.values():
        if s.median is not None and s.worst is not None:
            lines.append(f"| {s.figure} | {s.points} | {_pct(s.median)} | {_pct(s.worst)} |")
    lines += ["", f"The decision agrees with the source's finding on {sum(agree)} of {len(agree)} benchmark(s)."]
    return "\n".join(lines)
