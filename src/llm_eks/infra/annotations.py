"""Plan warnings as CDK warning annotations: shown by `cdk synth`, fatal under `cdk synth --strict`, and
acknowledged by id with one line why, which the cloud assembly records beside the construct."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from constructs import IConstruct

from llm_eks.planner import Plan, PlanWarning


def acknowledge_plan_warning(scope: IConstruct, warning_id: str, reason: str) -> None:
    """Accept one plan warning on `scope` and everything under it (the id `cdk synth` prints: `Annotation::<id>`)."""
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"Annotation::{warning_id}", reason=reason))


def annotate_plan_warnings(
    scope: IConstruct,
    plan: Plan,
    acknowledged: Mapping[str, str] | None = None,
    extra: Sequence[PlanWarning] = (),
) -> None:
    """Add each of the plan's warnings, and `extra` ones raised where the plan meets the environment (its capacity
    reservations), to `scope` (the construct that applies the planned workload) under its id; `acknowledged`
    (id -> why) accepts some of them."""
    for warning_id, reason in (acknowledged or {}).items():
        acknowledge_plan_warning(scope, warning_id, reason)
    for warning in (*plan.warnings, *extra):
        cdk.Annotations.of(scope).add_warning_v2(warning.id, warning.message)
