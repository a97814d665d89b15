"""The synth-time checks (llm_eks.manifests.checks) on a plain cdk8s app, before it writes any YAML.

A CDK app runs them through `LlmEksChecks` at `cdk synth` (on every manifest of each stack). A cdk8s app (a GitOps
user's, or one that extends the charts with cdk8s-plus) synthesizes without the CDK, so it calls this instead:

    app = cdk8s.App()
    ...  # llm-eks charts, extended with cdk8s-plus
    check_app(app)  # raises ChecksFailed, one line per finding, as `cdk synth` reports them
    app.synth()

The objects checked are the charts' synthesized objects (`Chart.to_json`, what `app.synth()` writes), all of the
app's charts together, as the CDK plugin checks one stack's manifests together: a pod's node pools, its namespace and
the DaemonSets beside it may come from other charts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import cdk8s

from llm_eks.error_codes import E412, E413
from llm_eks.errors import ConfigError
from llm_eks.manifests.checks import (
    POD_SECURITY,
    Finding,
    InstanceLookup,
    StaticNodeGroup,
    catalog_instance_resources,
    check_objects,
)


class ChecksFailed(ConfigError):
    """The findings of the synth-time checks; its message is one line per finding (`[RULE] object: problem. Fix:
    fix`), the text `cdk synth` reports for the same objects. Its code is LLMEKS-E413 when every finding is a Pod
    Security one, else LLMEKS-E412."""

    def __init__(self, findings: Sequence[Finding]) -> None:
        pod_security = all(f.rule == POD_SECURITY for f in findings)
        super().__init__(E413 if pod_security else E412, "\n".join(str(f) for f in findings))
        self.findings = tuple(findings)


def chart_objects(charts: Iterable[cdk8s.Chart]) -> list[dict[str, Any]]:
    """Every object the charts synthesize, in chart order."""
    return [obj for chart in charts for obj in chart.to_json()]


def check_app(
    app: cdk8s.App,
    *,
    instance_resources: InstanceLookup | None = catalog_instance_resources,
    static_nodes: Sequence[StaticNodeGroup] = (),
) -> None:
    """Run every check on all of `app`'s charts; raise ChecksFailed when any finds something. `instance_resources`
    and `static_nodes` as for check_objects (the defaults are LlmEksChecks')."""
    findings = check_objects(
        chart_objects(app.charts), instance_resources=instance_resources, static_nodes=static_nodes
    )
    if findings:
        raise ChecksFailed(findings)
