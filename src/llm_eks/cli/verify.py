"""`llm-eks verify`: hold a deployed environment against its plan, through the kubeconfig alone.

    llm-eks verify --env prod [--kubeconfig PATH] [--context NAME] [--wait-ready 30m] [--window 1h] [--load]
                   [--json] [--record FILE] [--journal FILE]

A table by default (llm_eks.verify.report), `--json` for machines. Exit 0 when every check is ok, unknown or
insufficient (too few samples to judge), 1 on any drift or breach, 2 on an error (one line: no kubeconfig, API
server or Prometheus unreachable, unknown env). The cluster side (kubernetes client, cdk8s for the charts' props)
is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from llm_eks.cli.environments import add_cluster_arguments, environment


def add_parser(commands: Any) -> None:
    """Register `verify` on the CLI's subcommands."""
    v = commands.add_parser(
        "verify",
        help="check a deployed environment against its plan: nodes, pods, engine args, KV cache, latency, routes",
        description="Read the environment's cluster through your kubeconfig (the API server, and its service proxy "
        "to Prometheus in namespace monitoring) and compare it with the plan: NodePools and GPU nodes, serving pods "
        "and their vLLM arguments, the KV cache vLLM sized, TTFT and ITL over --window against the SLO and the "
        "planner's estimates at the load the window held, the gateway's routes, and each pod's start-up. Exit 0 "
        "when every check is ok, unknown or insufficient (too few samples for a percentile), 1 on any drift or "
        "breach, 2 on an error.",
    )
    add_cluster_arguments(v)
    v.add_argument(
        "--window",
        metavar="DURATION",
        help="Prometheus range the latency percentiles and rates cover (default: 1h; with --load, the minutes the "
        "load ran)",
    )
    v.add_argument(
        "--wait-ready",
        metavar="DURATION",
        help="first wait up to DURATION (30m) until every workload has rolled out and its pods are Ready, then "
        "verify; exit 1 naming what is still starting if it has not settled by then",
    )
    v.add_argument(
        "--load",
        action="store_true",
        help="first run each vLLM workload's benchmark Job (the plan's concurrency per Ready replica and typical "
        "request), wait for it, and judge its TTFT, ITL and throughput against the plan at that load; needs the "
        "llm-eks-load group as well",
    )
    v.add_argument("--json", action="store_true", help="print JSON instead of a table")
    v.add_argument(
        "--record",
        metavar="FILE",
        help="also write what was observed as calibration points (one per workload, the latency fixture's shape)",
    )
    v.add_argument(
        "--journal",
        metavar="FILE",
        help="append the verification (verdict, counts, rows) and the exit status to FILE, one JSON line each",
    )
    v.set_defaults(func=verify_command, starts_jsii=True)


def verify_command(args: argparse.Namespace) -> int:
    from llm_eks.errors import ConfigError
    from llm_eks.images.lock import LOCK_FILE, load_lock
    from llm_eks.verify.journal import Journal, rows_of
    from llm_eks.verify.prometheus import duration_seconds, window_seconds
    from llm_eks.verify.record import write_points
    from llm_eks.verify.report import table, to_json
    from llm_eks.verify.rows import exit_code
    from llm_eks.verify.run import LoadOptions, verify, wait_until_ready
    from llm_eks.verify.wait import summary

    if args.window is not None:
        window_seconds(args.window)
    wait_s = duration_seconds("--wait-ready", args.wait_ready) if args.wait_ready is not None else None
    config = environment(args)
    # The lock next to cdk.json, as `cdk synth` reads it: the images verify expects are the deployed ones.
    images = load_lock(Path(args.context_file).parent / LOCK_FILE)
    with Journal(args.journal, "verify", config.name) as journal:
        code = 2
        try:
            if wait_s is not None:

                def look(still: list[str]) -> None:
                    journal.write("wait-ready", ready=not still, starting=still)
                    if still:
                        _say(f"llm-eks verify {config.name}: waiting: " + "; ".join(still))

                still = wait_until_ready(
                    config,
                    kubeconfig=args.kubeconfig,
                    context=args.context,
                    images=images,
                    seconds=wait_s,
                    on_look=look,
                )
                if still:
                    message = f"llm-eks verify {config.name}: {summary(still, wait_s)}"
                    print(message, file=sys.stderr)
                    journal.write("exit", exit_status=1, message=message)
                    return 1
            result = verify(
                config,
                kubeconfig=args.kubeconfig,
                context=args.context,
                window=args.window,
                images=images,
                load=LoadOptions(say=_say) if args.load else None,
            )
            journal.write("verification", window=result.report.window, **rows_of(result.report.to_dict()))
            if args.record is not None:
                write_points(args.record, result.points)
            print(to_json(result.report) if args.json else table(result.report))
            code = exit_code(result.report.rows)
        except ConfigError as err:
            journal.write("exit", exit_status=2, message=" ".join(str(err).split()))
            raise
        journal.write("exit", exit_status=code)
        return code


def _say(line: str) -> None:
    """Progress of --load, on stderr: stdout holds only the report (a table, or JSON)."""
    print(line, file=sys.stderr, flush=True)
