"""The environment a command names with --env, read from --context-file as strictly as `cdk synth` reads it; and the
options of the commands that reach its cluster through a kubeconfig (verify, canary, rollback)."""

from __future__ import annotations

import argparse
from pathlib import Path

from llm_eks.config import EnvironmentConfig, load_environments, select_environments
from llm_eks.hub.records import MODELS_DIR
from llm_eks.strict_json import read_context_file


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    """--env and --context-file, and the kubeconfig (--kubeconfig, --context) through which its cluster is read."""
    p.add_argument("--env", metavar="NAME", required=True, help="environment in --context-file")
    p.add_argument("--context-file", default="cdk.json", metavar="PATH", help="CDK context file (default: cdk.json)")
    p.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig file (default: the kubernetes client's: $KUBECONFIG, else ~/.kube/config)",
    )
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current-context)")


def environment(args: argparse.Namespace) -> EnvironmentConfig:
    """The environment named by --env in --context-file, validated."""
    # Read strictly: an environment written twice, or 1e400, is an error here too, not a silent loss.
    context = read_context_file(Path(args.context_file), "--context-file")
    # Recorded models are read where synth reads them: the models folder beside cdk.json.
    given = getattr(args, "models_dir", None)  # `manifests` has no --models-dir: beside cdk.json, as synth reads
    models_dir = Path(given) if given is not None else Path(args.context_file).parent / MODELS_DIR
    (environment,) = select_environments(load_environments(context, models_dir), args.env)
    return environment
