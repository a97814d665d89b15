"""`llm-eks usage`: the input and output tokens each tenant used per model over a window, for billing and chargeback.

    llm-eks usage --env staging --from 2026-11-01 [--to 2026-12-01] [--kubeconfig PATH] [--context NAME]
                  [--csv | --json]

A table by default, `--csv` or `--json` for machines. Read from the environment's Prometheus through the kubeconfig,
as `llm-eks verify` reads it (llm_eks.verify.usage). Exit 0 with the figures, 2 on an error (one line: a bad window,
an environment without a gateway, no kubeconfig, Prometheus unreachable).
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from llm_eks.cli.environments import add_cluster_arguments, environment


def add_parser(commands: Any) -> None:
    """Register `usage` on the CLI's subcommands."""
    u = commands.add_parser(
        "usage",
        help="tokens each tenant of the gateway used per model over a window, for billing and chargeback",
        description="Read the environment's Prometheus through your kubeconfig (the API server's service proxy to "
        "Prometheus in namespace monitoring, as verify does) and print the input and output tokens each tenant used "
        "per model from --from to --to, as the gateway counted them from each response's usage. A declared tenant "
        "with no use shows a row of zeros. Exit 0 with the figures, 2 on an error.",
    )
    add_cluster_arguments(u)
    u.add_argument(
        "--from",
        dest="start",
        metavar="TIME",
        required=True,
        help="start of the window: an ISO 8601 time, 2026-11-01 or 2026-11-01T09:00:00Z (UTC unless it names an "
        "offset)",
    )
    u.add_argument("--to", dest="end", metavar="TIME", help="end of the window, as --from (default: now)")
    output = u.add_mutually_exclusive_group()
    output.add_argument("--csv", action="store_true", help="print CSV (from, to, tenant, model, tokens) instead")
    output.add_argument("--json", action="store_true", help="print JSON instead of a table")
    u.set_defaults(func=usage_command, starts_jsii=True)


def usage_command(args: argparse.Namespace) -> int:
    from llm_eks.verify.kube import Kube
    from llm_eks.verify.prometheus import Prometheus
    from llm_eks.verify.usage import declared_tenants, read_usage, table, to_csv, to_json, usage_window

    window = usage_window(args.start, args.end, datetime.now(UTC))
    config = environment(args)
    tenants = declared_tenants(config)
    usage = read_usage(Prometheus(Kube(args.kubeconfig, args.context)), config, window, tenants)
    print(to_csv(usage) if args.csv else to_json(usage) if args.json else table(usage))
    return 0
