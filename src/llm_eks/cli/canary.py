"""`llm-eks canary` and `llm-eks rollback`: move a workload's traffic to its next version step by step, verifying
each step, or send all of it back to the current version.

    llm-eks canary   --env prod --workload chat [--steps 5,25,50] [--load] [--journal FILE]
                     [--kubeconfig PATH] [--context NAME]
    llm-eks rollback --env prod --workload chat [--kubeconfig PATH] [--context NAME]

Exit 0 when done, 1 when a step failed its verification or could not be judged (the next version is then back at
0%), 2 on an error, 128 + the signal's number when SIGINT or SIGTERM stopped it; after an error or a signal in a
step the next version is back at 0% too, and the command says so.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from llm_eks.cli.environments import add_cluster_arguments, environment
from llm_eks.error_codes import E601
from llm_eks.errors import fail


def _common(p: argparse.ArgumentParser) -> None:
    add_cluster_arguments(p)
    p.add_argument("--workload", metavar="KEY", required=True, help="the workload of `workloads` with a canary")
    p.add_argument(
        "--allow-insecure-tls",
        action="store_true",
        help="use a kubeconfig context that sets insecure-skip-tls-verify (refused otherwise: this command changes "
        "the cluster)",
    )


def add_parser(commands: Any) -> None:
    """Register `canary` and `rollback` on the CLI's subcommands."""
    c = commands.add_parser(
        "canary",
        help="move a workload's traffic to its next version step by step, verifying each step",
        description="Raise the next version's share of the workload's pool (its share of the replicas, so of the "
        "requests; the smallest step is one pod) through canary.steps, holding each "
        "step canary.hold_minutes and then verifying the environment over that window (llm-eks verify's checks). "
        "A drift or breach of either version or their route, or a next version not judged over the hold (too few "
        "samples), sets the share back to 0 and exits 1; an error or SIGINT/SIGTERM during a step sets it back to "
        "0 too. Needs the llm-eks-rollout and llm-eks-verify groups (docs/how-to/promote.md).",
    )
    _common(c)
    c.add_argument("--steps", metavar="W,W,...", help="the shares to walk through instead of canary.steps")
    c.add_argument(
        "--journal",
        metavar="FILE",
        help="append a JSON line per step (its weight, outcome and rows) and one with the exit status to FILE",
    )
    c.add_argument(
        "--load",
        action="store_true",
        help="during each step's hold, run the next version's benchmark Job against it (the plan's concurrency and "
        "typical request) and judge its results too; needs the llm-eks-load group as well",
    )
    c.set_defaults(func=canary_command, starts_jsii=True)
    r = commands.add_parser(
        "rollback",
        help="send every request of a workload back to its current version",
        description="Set the next version's share of the workload's pool to 0 (it is scaled to zero). Needs "
        "the llm-eks-rollout and llm-eks-verify groups (docs/how-to/promote.md).",
    )
    _common(r)
    r.set_defaults(func=rollback_command, starts_jsii=True)


def steps(text: str) -> tuple[int, ...]:
    """--steps: shares of the pool that rise strictly from at least 1 to at most 99 (all of it is a promotion)."""
    try:
        weights = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise fail(E601, "--steps", text, "must be shares separated by commas, e.g. 5,25,50") from None
    if list(weights) != sorted(set(weights)) or weights[0] < 1 or weights[-1] > 99:
        raise fail(
            E601, "--steps", text, "must rise strictly from at least 1 to at most 99 (100 is the promotion, a deploy)"
        )
    return weights


def canary_command(args: argparse.Namespace) -> int:
    from llm_eks.config.plans import plan_workloads
    from llm_eks.errors import ConfigError
    from llm_eks.images.lock import LOCK_FILE, load_lock
    from llm_eks.verify.journal import Journal
    from llm_eks.verify.kube import Kube
    from llm_eks.verify.rollout import Interrupted, canary, interrupts, pair, shares
    from llm_eks.verify.run import LoadOptions, run_load, verify

    walk = steps(args.steps) if args.steps is not None else None
    config = environment(args)
    p = pair(config, args.workload)
    with Journal(args.journal, "canary", config.name) as journal:
        kube: Kube | None = None
        code, message = 1, ""
        try:
            kube = Kube(args.kubeconfig, args.context, allow_insecure=args.allow_insecure_tls)
            images = load_lock(Path(args.context_file).parent / LOCK_FILE)

            def check(window: str) -> Any:
                return verify(
                    config, kubeconfig=args.kubeconfig, context=args.context, window=window, images=images
                ).report

            def say(line: str) -> None:
                print(line, flush=True)

            plans = plan_workloads(config)

            def load() -> Any:
                options = LoadOptions(say=say, sleep=time.sleep, only={p.canary_name})
                return run_load(config, kube, plans, images, options)

            # The smallest step is one pod of the pool: the shares this pool can take, each rounding said.
            walk = shares(kube, p, walk or p.steps, say)
            with interrupts():
                code = canary(
                    kube,
                    p,
                    check=check,
                    sleep=time.sleep,
                    say=say,
                    steps=walk,
                    journal=journal,
                    load=load if args.load else None,
                )
            message = "the next version serves every request" if code == 0 else "stopped before the last step"
        except Interrupted as stop:
            code, message = 128 + stop.signum, str(stop)
        except ConfigError as err:
            code, message = 2, " ".join(str(err).split())
            raise
        except BaseException as err:
            code, message = 1, " ".join(str(err).split()) or type(err).__name__
            raise
        finally:
            journal.write("exit", workload=p.key, exit_status=code, weight=_weight(kube, p), message=message)
        return code


def _weight(kube: Any, p: Any) -> int | None:
    """The next version's share now, for the journal's last line (None when the route cannot be read)."""
    from llm_eks.verify.rollout import live_weight

    if kube is None:
        return None
    try:
        return live_weight(kube, p)
    except Exception:
        return None


def rollback_command(args: argparse.Namespace) -> int:
    from llm_eks.verify.kube import Kube
    from llm_eks.verify.rollout import pair, rollback

    config = environment(args)
    kube = Kube(args.kubeconfig, args.context, allow_insecure=args.allow_insecure_tls)
    return rollback(kube, pair(config, args.workload), say=print)
