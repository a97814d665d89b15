"""`llm-eks plan --compare`: the comparison of every instance type as a table, JSON and an SVG chart."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from llm_eks.catalog.accelerators import PRICE_REGION, PRICES_READ
from llm_eks.cli.compare_chart import Point, write_chart
from llm_eks.cli.plan_table import decision_lines
from llm_eks.error_codes import E603
from llm_eks.errors import ConfigError
from llm_eks.planner import TIMES, PlanRequest, plan
from llm_eks.planner.compare import COST_FORMULA, Comparison, compare, neuron_refusals
from llm_eks.planner.compute_mode import AUTO_MODE

# Column title and width of the table, in order.
COLUMNS = (
    ("instance type", 18),
    ("GPU", 17),
    ("layout", 16),
    ("nodes", 5),
    ("KV tokens", 10),
    ("seqs", 6),
    ("TTFT ms", 8),
    ("ITL ms", 7),
    ("TPOT ms", 7),
    ("tok/s", 7),
    ("$/h/replica", 11),
    ("replicas", 8),
    ("$/M out tok", 11),
    ("targets", 7),
)


def print_comparison(request: PlanRequest, *, as_json: bool, chart: str | None) -> int:
    """Print the comparison (and write the chart); nothing can serve the request: the planner's own one-line why."""
    rows = compare(request)
    if not rows:
        plan(request)  # raises the one-line error that says why nothing fits
        raise ConfigError(E603, "workload.model: no catalog instance type can serve this request")
    if chart is not None:
        write_comparison_chart(Path(chart), request, rows)
    refused = neuron_refusals(request)
    # Both serving modes on the plan's own choice (the first row's layout when auto picks it).
    decision = plan(request).disaggregation
    if as_json:
        body = comparison_dict(request, rows, refused)
        body["disaggregation"] = None if decision is None else decision.to_dict()
        print(json.dumps(body, indent=2, ensure_ascii=False))
    else:
        print(comparison_table(request, rows, refused))
        if decision is not None:
            print("\nPrefill/decode on the plan's choice:")
            print("\n".join(f"  {line}" for line in decision_lines(decision)))
        if chart is not None:
            print(f"Chart: {chart}")
    return 0


def describe(request: PlanRequest) -> str:
    """The request in one line: what the rows were sized for."""
    itl = "" if request.max_itl_ms is None else f", inter-token latency <= {request.max_itl_ms:g} ms"
    if request.max_ttft_ms is not None:
        itl += f", time to first token <= {request.max_ttft_ms:g} ms"
    # On EKS Auto Mode its management fee comes on top of every $/h (unknown unless AWS's page was read).
    fee = "" if request.compute != AUTO_MODE else "; EKS Auto Mode families only, each $/h + Auto Mode fee: unknown"
    return (
        f"{request.spec.id} at {request.resolved_weight_format} (KV cache {request.kv_cache_dtype}), max_model_len "
        f"{request.resolved_max_model_len}: target {request.target_concurrency} sequences of "
        f"{request.typical_tokens} tokens per replica{itl}{fee}"
    )


def comparison_dict(
    request: PlanRequest, rows: list[Comparison], refused: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    return {
        "request": describe(request),
        "cost_formula": COST_FORMULA,
        "prices_read": PRICES_READ,
        "price_region": PRICE_REGION,
        "rows": [r.to_dict() for r in rows],
        "not_served_on_neuron": [{"instance_type": name, "reason": why} for name, why in refused or []],
    }


def _money(v: float | None, digits: int) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def comparison_table(request: PlanRequest, rows: list[Comparison], refused: list[tuple[str, str]] | None = None) -> str:
    types = len({r.instance_type for r in rows})
    count = f"{types} instance types" if types == len(rows) else f"{len(rows)} layouts on {types} instance types"
    lines = [describe(request), f"{count} can serve it, best first:", ""]
    lines.append("  ".join(f"{title:<{w}}" if i < 3 else f"{title:>{w}}" for i, (title, w) in enumerate(COLUMNS)))
    for r in rows:
        cells = (
            r.instance_type,
            f"{r.gpus_per_node}{TIMES} {r.accelerator_name}",
            r.shape,
            str(r.nodes_per_replica),
            f"{r.kv_cache_tokens:,}",
            str(r.concurrency_typical),
            f"{r.ttft_ms:.0f}",
            f"{r.itl_ms:.1f}",
            f"{r.tpot_ms:.1f}",
            f"{r.output_tokens_per_s:.0f}",
            _money(r.usd_per_replica_hour, 2),
            str(r.replicas),
            _money(r.usd_per_million_output_tokens, 3),
            "met" if r.meets_targets else "missed",
        )
        lines.append(
            "  ".join(
                f"{c:<{w}}" if i < 3 else f"{c:>{w}}" for i, (c, (_, w)) in enumerate(zip(cells, COLUMNS, strict=True))
            )
        )
    lines += [
        "",
        "seqs: sequences of the typical size one replica's KV cache holds. At the target, estimates: TTFT (median time",
        "to first token), ITL (median inter-token latency), TPOT (mean time per output token, chunked prefill",
        "included), tok/s (output tokens per second per replica).",
        *(
            [
                "layout: TPn PPn (tensor x pipeline parallel) or DPn TPn EPn (data-parallel ranks of TP GPUs, the "
                "experts spread",
                "over EP = DP x TP GPUs: vLLM --data-parallel-size --enable-expert-parallel).",
            ]
            if any(r.layout == "dp-ep" for r in rows)
            else []
        ),
        *(
            [
                "TPn NxDI / TPn vllm-neuron: tensor parallelism over NeuronCores on that Neuron engine path (NxD "
                "Inference on",
                "vLLM 0.16 for inf2/trn1, vllm-neuron on vLLM 0.29 for trn2); seqs is the compiled batch.",
            ]
            if any(r.engine != "vllm" for r in rows)
            else []
        ),
        *textwrap.wrap(f"{COST_FORMULA}.", width=118),
        f"Prices: on-demand {PRICE_REGION}, AWS Price List of {PRICES_READ}.",
    ]
    if refused:
        lines += ["", "Not served on Neuron:", *_refusal_lines(refused)]
    return "\n".join(line.rstrip() for line in lines)


def _refusal_lines(refused: list[tuple[str, str]]) -> list[str]:
    """One line per reason: instance types whose reasons differ only in their own name share a line."""
    groups: dict[str, list[str]] = {}
    for name, why in refused:
        groups.setdefault(why.replace(name, "\0"), []).append(name)
    return [
        f"  {names[0]}: {key.replace(chr(0), names[0])}"
        if len(names) == 1
        else f"  {', '.join(names)}: {key.replace(chr(0), 'these types')}"
        for key, names in groups.items()
    ]


def write_comparison_chart(path: Path, request: PlanRequest, rows: list[Comparison]) -> None:
    """Cost per million output tokens against the time-per-output-token estimate, one point per priced row."""
    priced = [r for r in rows if r.usd_per_million_output_tokens is not None]
    if not priced:
        raise ConfigError(E603, "--chart: no instance type that can serve this request has an on-demand price to plot")
    unpriced = [r.instance_type for r in rows if r.usd_per_million_output_tokens is None]
    note = (
        f"{request.target_concurrency} sequences of {request.typical_tokens} tokens; {request.resolved_weight_format} "
        f"weights, max_model_len {request.resolved_max_model_len}; on-demand {PRICE_REGION}, {PRICES_READ}"
    )
    if unpriced:
        note += f"; no price, not plotted: {', '.join(unpriced)}"
    points = [
        Point(
            r.instance_type if r.layout == "tp-pp" else f"{r.instance_type} {r.shape}",
            r.tpot_ms,
            r.usd_per_million_output_tokens or 0.0,
            r.meets_targets,
        )
        for r in priced
    ]
    write_chart(
        path,
        points,
        title=f"{request.spec.short_name}: cost per million output tokens vs time per output token",
        x_title="time per output token estimate (ms)",
        y_title="$ per million output tokens",
        note=note,
    )
