"""`llm-eks`: the command line, thin over the library. One module per command:

    plan       size a deployment (planner), with --compare to rank every instance type
    manifests  an environment's Kubernetes YAML for GitOps (infra's charts, cdk8s alone)
    images     lock images to digests, or snapshot them onto a Bottlerocket data volume
    models     record a Hugging Face model's config and checkpoint size into the app
    verify     hold a deployed environment against its plan, through the kubeconfig
    canary     move a workload's traffic to its next version step by step, verifying each step
    rollback   send a workload's traffic back to its current version
    usage      tokens each gateway tenant used per model over a window (billing, chargeback)

Bad input exits 2 with one line on stderr, never a traceback. A command imports what it needs when it runs, so
`llm-eks plan` never loads aws_cdk, cdk8s or jsii; the commands that do (`starts_jsii`) first check the Node.js jsii
will run on (cli/node.py). `llm-eks --version` prints the installed distribution's version.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from llm_eks import __version__
from llm_eks.cli import canary, images, manifests, models, plan, usage, verify
from llm_eks.cli.parsing import Parser, UsageError
from llm_eks.error_codes import E600
from llm_eks.errors import ConfigError


def parser() -> Parser:
    """The `llm-eks` parser with every command registered."""
    top = Parser(prog="llm-eks", description="Plan and check LLM deployments on Amazon EKS.")
    top.add_argument("--version", action="version", version=f"llm-eks {__version__}")
    commands = top.add_subparsers(dest="command", metavar="COMMAND")
    plan.add_parser(commands)
    manifests.add_parser(commands)
    images.add_snapshot_parser(images.add_parser(commands))
    models.add_parser(commands)
    verify.add_parser(commands)
    canary.add_parser(commands)
    usage.add_parser(commands)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `llm-eks` console script; returns the exit code."""
    top = parser()
    try:
        args = top.parse_args(argv)
        if args.command is None:
            raise UsageError(E600, "a command is required: plan (see llm-eks --help)")
        if getattr(args, "starts_jsii", False):
            from llm_eks.cli.node import require_supported_node  # imported here: `python -m llm_eks.cli.node`

            require_supported_node()
        code: int = args.func(args)
        return code
    except SystemExit as done:  # --help
        return int(done.code or 0)
    except (UsageError, ConfigError) as err:
        message = " ".join(str(err).split())  # one line, whatever the message held
        print(f"llm-eks: error: {message}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `llm-eks plan ... | head`: stop quietly, as other CLI tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
