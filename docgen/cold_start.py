"""The cold-start table of docs/how-to/cold-start.md: every way a replica of dev's and prod's workload can start,
seconds from a queue spike to a Ready replica, as `llm-eks plan --env NAME` prints them (the path table's labels)."""

from __future__ import annotations

import json
from pathlib import Path

from llm_eks.cli.plan_table import IMAGE_LABEL, WEIGHTS_LABEL
from llm_eks.config import load_environments
from llm_eks.config.plans import plan_workloads
from llm_eks.planner import Plan

ROOT = Path(__file__).resolve().parents[1]
# The two shipped environments with one workload each, small and large.
ENVIRONMENTS = ("dev", "prod")


def default_plans() -> dict[str, Plan]:
    """The plan of each of ENVIRONMENTS' workload, from the repository's cdk.json."""
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    environments = load_environments(context, ROOT / "models")
    return {name: plan_workloads(environments[name])[0] for name in ENVIRONMENTS}


def cold_start_table() -> str:
    plans = default_plans()
    heads = [f"{name} ({p.model.short_name}, {p.weight_format}, on {p.instance_type})" for name, p in plans.items()]
    out = ["| weights | image | node | " + " | ".join(heads) + " |", "|---|---|---|" + "---|" * len(plans)]
    first = next(iter(plans.values()))
    for path in first.cold_start_paths:
        key = (path.weights_source, path.image_source, path.warm_node)
        totals = [
            next(c for c in p.cold_start_paths if (c.weights_source, c.image_source, c.warm_node) == key)
            for p in plans.values()
        ]
        node = "warm" if path.warm_node else "new"
        cells = [WEIGHTS_LABEL[path.weights_source], IMAGE_LABEL[path.image_source], node]
        cells += [f"{c.total_s:g}" + (" (in use)" if c.in_use else "") for c in totals]
        if path.in_use:
            cells = [f"**{cell}**" for cell in cells]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)
