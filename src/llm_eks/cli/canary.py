"""`llm-eks canary` and `llm-eks rollback`: move a workload's traffic to its next version step by step, verifying
each step, or send all of it back to the current version.

    llm-eks canary   --env prod --workload chat [--steps 5,25,50,100] [--kubeconfig PATH] [--context NAME]
    llm-eks rollback --env prod --workload chat [--kubeconfig PATH] [--context NAME]

Exit 0 when done, 1 when a step failed its verification (the next version is then back at 0%), 2 on an error.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from llm_eks.cli.environments import add_cluster_arguments, environment
from llm_eks.errors import fail


def _common(p: argparse.ArgumentParser) -> None:
    add_cluster_arguments(p)
    p.add_argument("--workload", metavar="KEY", required=True, help="the workload of `workloads` with a canary")


def add_parser(commands: Any) -> None:
    """Register `canary` and `rollback` on the CLI's subcommands."""
    c = commands.add_parser(
        "canary",
        help="move a workload's traffic to its next version step by step, verifying each step",
        description="Raise the next version's share of the workload's route through canary.steps, holding each "
        "step canary.hold_minutes and then verifying the environment over that window (llm-eks verify's checks). "
        "A drift or breach of either version or their route sets the share back to 0 and exits 1. Needs the "
        "llm-eks-rollout and llm-eks-verify groups (docs/how-to/promote.md).",
    )
    _common(c)
    c.add_argument("--steps", metavar="W,W,...", help="the weights to walk through instead of canary.steps")
    c.set_defaults(func=canary_command, starts_jsii=True)
    r = commands.add_parser(
        "rollback",
        help="send every request of a workload back to its current version",
        description="Set the next version's share of the workload's route to 0 (its pods keep running). Needs "
        "the llm-eks-rollout and llm-eks-verify groups (docs/how-to/promote.md).",
    )
    _common(r)
    r.set_defaults(func=rollback_command, starts_jsii=True)


def steps(text: str) -> tuple[int, ...]:
    """--steps: weights that rise strictly from at least 1 to at most 100."""
    try:
        weights = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise fail("--steps", text, "must be weights separated by commas, e.g. 5,25,50,100") from None
    if list(weights) != sorted(set(weights)) or weights[0] < 1 or weights[-1] > 100:
        raise fail("--steps", text, "must rise strictly from at least 1 to at most 100")
    return weights


def canary_command(args: argparse.Namespace) -> int:
    from llm_eks.images.lock import LOCK_FILE, load_lock
    from llm_eks.verify.kube import Kube
    from llm_eks.verify.rollout import canary, pair
    from llm_eks.verify.run import verify

    walk = steps(args.steps) if args.steps is not None else None
    config = environment(args)
    p = pair(config, args.workload)
    kube = Kube(args.kubeconfig, args.context)
    images = load_lock(Path(args.context_file).parent / LOCK_FILE)

    def check(window: str) -> Any:
        return verify(config, kubeconfig=args.kubeconfig, context=args.context, window=window, images=images).report

    return canary(kube, p, check=check, sleep=time.sleep, say=lambda line: print(line, flush=True), steps=walk)


def rollback_command(args: argparse.Namespace) -> int:
    from llm_eks.verify.kube import Kube
    from llm_eks.verify.rollout import pair, rollback

    config = environment(args)
    return rollback(Kube(args.kubeconfig, args.context), pair(config, args.workload), say=print)
