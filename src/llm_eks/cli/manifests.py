"""`llm-eks manifests`: an environment's Kubernetes YAML for GitOps, written with cdk8s alone (no AWS CDK).

llm-eks manifests --env dev --node-role-name KarpenterNodeRole-dev --security-group-id sg-0123... --out k8s/
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from llm_eks import aws_ids
from llm_eks.cli.environments import environment
from llm_eks.error_codes import E601
from llm_eks.errors import fail

_HTTPS_URL = re.compile(r"^https://[A-Za-z0-9.-]+(/[\x21-\x7e]*)?$")


def add_parser(commands: Any) -> None:
    """Register `manifests` on the CLI's subcommands."""
    m = commands.add_parser(
        "manifests",
        help="write an environment's Kubernetes YAML for GitOps, with cdk8s alone (no AWS CDK)",
        description="Synthesize the charts the CDK stack would apply, for a GitOps tool. The node role name and "
        "the cluster security group come from your deployed cluster.",
    )
    m.add_argument("--env", metavar="NAME", required=True, help="environment in --context-file")
    m.add_argument("--context-file", default="cdk.json", metavar="PATH", help="CDK context file (default: cdk.json)")
    m.add_argument("--node-role-name", required=True, help="IAM role NAME Karpenter gives its nodes")
    m.add_argument(
        "--security-group-id", action="append", required=True, help="security group for Karpenter nodes (repeat)"
    )
    m.add_argument(
        "--weights-bucket",
        metavar="NAME",
        help="the weights bucket's name (the stack output WeightsBucketName) for staged weights; default: "
        "weights_bucket.name from the context file",
    )
    m.add_argument(
        "--oidc-issuer",
        metavar="URL",
        help="the cluster's OIDC issuer URL (aws eks describe-cluster --query cluster.identity.oidc.issuer), for a "
        "gateway whose auth trusts the cluster's service-account tokens (issuer eks-cluster)",
    )
    m.add_argument(
        "--region",
        metavar="REGION",
        help="the region whose Secrets Manager holds the gateway's tenant API keys; default: the environment's region "
        "(required with API-key tenants when the environment names none)",
    )
    m.add_argument(
        "--placement-group",
        action="append",
        default=[],
        metavar="NODECLASS=ID",
        help="the cluster placement group (pg-...) of an EFA node class such as gpu-nvidia-p5-efa32, for a replica "
        "spanning nodes (repeat per EFA node class)",
    )
    m.add_argument("--out", default="manifests", metavar="DIR", help="output folder (default: manifests)")
    m.set_defaults(func=manifests_command, starts_jsii=True)


def manifests_command(args: argparse.Namespace) -> int:
    from llm_eks.config.plans import plan_workloads
    from llm_eks.images.lock import LOCK_FILE, load_lock
    from llm_eks.infra.gitops import write_manifests

    if not aws_ids.ROLE_NAME.match(args.node_role_name):
        raise fail(
            E601,
            "--node-role-name",
            args.node_role_name,
            "must be an IAM role NAME (1-64 letters, digits and + = , . @ _ -), not its ARN",
        )
    for sg in args.security_group_id:
        if not aws_ids.SECURITY_GROUP_ID.match(sg):
            raise fail(E601, "--security-group-id", sg, "must be a security group id such as sg-0123456789abcdef0")
    if args.oidc_issuer is not None and not _HTTPS_URL.match(args.oidc_issuer):
        raise fail(E601, "--oidc-issuer", args.oidc_issuer, "must be the cluster's https OIDC issuer URL")
    if args.region is not None and not aws_ids.REGION.match(args.region):
        raise fail(E601, "--region", args.region, "must be an AWS region such as us-west-2")
    placement_groups = {}
    for given in args.placement_group:
        node_class, sep, group = given.partition("=")
        if not sep or not node_class or not aws_ids.PLACEMENT_GROUP_ID.match(group):
            raise fail(
                E601, "--placement-group", given, "must be NODECLASS=pg-... (an EFA node class and its placement group)"
            )
        placement_groups[node_class] = group
    config = environment(args)
    if args.weights_bucket is not None and aws_ids.s3_uri_problem(f"s3://{args.weights_bucket}/") is not None:
        raise fail(
            E601, "--weights-bucket", args.weights_bucket, "must be an S3 bucket name (3-63 lowercase letters, digits)"
        )
    written = write_manifests(
        config,
        plan_workloads(config),
        Path(args.out),
        node_role_name=args.node_role_name,
        security_group_ids=tuple(args.security_group_id),
        # The lock next to cdk.json, as `cdk synth` reads it.
        images=load_lock(Path(args.context_file).parent / LOCK_FILE),
        weights_bucket=args.weights_bucket,
        oidc_issuer=args.oidc_issuer,
        region=args.region,
        placement_groups=placement_groups,
    )
    for path in written:
        print(path)
    return 0
