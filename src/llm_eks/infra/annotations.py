"""Plan warnings as CDK warning annotations: shown by `cdk synth`, fatal under `cdk synth --strict`, and
acknowledged by id with one line why (`cdk.Annotations.of(scope).acknowledge_warning(id, reason)` on the construct,
its stack or the app)."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct

from llm_eks.infra.plan import Plan


def annotate_plan_warnings(scope: IConstruct, plan: Plan) -> None:
    """Add each of the plan's warnings to `scope` (the construct that applies the planned workload) under its id."""
    for warning in plan.warnings:
        cdk.Annotations.of(scope).add_warning_v2(warning.id, warning.message)
