"""Modelled cold start of every default workload against llm-eks's cold-start goals (prints numbers; not a test):
the path in use, the fastest path on a new node and the fastest on a warm node, each with the preparation it needs.

    .venv/bin/python benchmarks/cold_start_table.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The cold-start goals (seconds from a queue spike to a Ready replica, docs/how-to/cold-start.md): (new node, warm
# node) for 8B-class and 70B FP8.
GOALS = {"8B": (180, 60), "70B": (300, 120)}


def _goal(parameters: int) -> tuple[int, int] | None:
    """The goal of the model's class: dense 8B-class (up to 15B) or 70B-class (60-80B); others have none."""
    if parameters <= 15e9:
        return GOALS["8B"]
    if 60e9 <= parameters <= 80e9:
        return GOALS["70B"]
    return None


def main() -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from llm_eks.config import load_environments
    from llm_eks.config.plans import plan_workloads

    environments = load_environments(json.loads((ROOT / "cdk.json").read_text())["context"], ROOT / "models")
    print("cold start, seconds from a queue spike to a Ready replica (planner-modelled; README 'Cold start by path')")
    print(f"{'workload':16} {'model':34} {'in use':>7} {'best new':>9} {'best warm':>10}  goal new/warm  fastest path")
    for config in environments.values():
        for served, plan in zip(config.served, plan_workloads(config), strict=True):
            paths = plan.cold_start_paths
            in_use = next(p for p in paths if p.in_use)
            new = min((p for p in paths if not p.warm_node), key=lambda p: p.total_s)
            warm = min((p for p in paths if p.warm_node), key=lambda p: p.total_s)
            goal = _goal(plan.model.parameters)
            name = config.name if served.key is None else f"{config.name}/{served.key}"
            goal_text = f"{goal[0]}/{goal[1]}" if goal else "-"
            print(
                f"{name:16} {plan.model.id[:34]:34} {in_use.total_s:7g} {new.total_s:9g} {warm.total_s:10g}  "
                f"{goal_text:>13}  {warm.weights_source} weights, {warm.image_source} image"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
