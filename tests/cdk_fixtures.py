"""Scaffolding for the construct tests: a minimal aws_eks_v2 cluster and a synth with cdk-nag attached."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer
from cdk_nag import AwsSolutionsChecks


def minimal_cluster(stack: cdk.Stack, *, cluster_name: str | None = None) -> eks.Cluster:
    """Construct id `Cluster`: Kubernetes 1.35, no default capacity, the v35 kubectl layer. Its own cdk-nag findings
    are the test's scaffolding, not ours (InferenceCluster acknowledges them)."""
    return eks.Cluster(
        stack,
        "Cluster",
        cluster_name=cluster_name,
        version=eks.KubernetesVersion.V1_35,
        default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
        default_capacity=0,
        kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(stack, "KubectlLayer")),
    )


def synth_with_nag(app: cdk.App) -> dict[str, Any]:
    """Synthesize `app` with cdk-nag's AwsSolutions checks and return `validation-report.json`.

    The minimal cluster's own findings fail validation after the report is written; the tests judge the findings
    from the report. Any other synth error is raised.
    """
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    try:
        app.synth()
    except RuntimeError as error:  # jsii surfaces CDK's ValidationError as a RuntimeError
        if "ValidationFailed" not in str(error):
            raise
    return json.loads((Path(app.outdir) / "validation-report.json").read_text())


def nag_findings(report: dict[str, Any], scaffolding: str) -> list[str]:
    """`rule at construct path` for every cdk-nag finding outside `scaffolding` (a construct path prefix, e.g. the
    minimal cluster's); fails when cdk-nag did not run."""
    assert report["pluginReports"], "cdk-nag did not run"
    return [
        f"{v['ruleName']} at {c['constructPath']}"
        for plugin in report["pluginReports"]
        for v in plugin["violations"]
        for c in v["violatingConstructs"]
        if not c["constructPath"].startswith(scaffolding)
    ]
