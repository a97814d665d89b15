"""Production refuses model and adapter revisions that can move: what a pod fetches at start must be a commit.

A branch or tag name is resolved when the staging Job (or, for weights "hf", the engine) runs, so two replicas of
one environment, or a replica and its rollback, can serve different checkpoints. `production: true` turns that
into a one-line error naming the field, unless `accepted_risks` holds "revisions-by-name". Weights "s3" (a bucket
the user fills) are the user's to pin.
"""

from __future__ import annotations

from collections.abc import Sequence

from llm_eks.config import COMMIT, EnvironmentConfig
from llm_eks.error_codes import E118
from llm_eks.errors import fail
from llm_eks.infra.workloads.props import checkpoint_revision
from llm_eks.planner import Plan

RISK = "revisions-by-name"


def require_pinned_revisions(config: EnvironmentConfig, plans: Sequence[Plan]) -> None:
    """In production, the first revision that is not a commit, as a one-line error naming its field."""
    if not config.production or RISK in config.accepted_risks:
        return
    accept = f'or accept the risk: accepted_risks {{"{RISK}": "<why>"}}'
    for s, plan in zip(config.served, plans, strict=True):
        if s.config.weights == "s3":
            continue
        revision = checkpoint_revision(s, plan)
        if not COMMIT.match(revision):
            raise fail(
                E118,
                f"{s.path}.revision",
                revision,
                "production needs a commit, and a branch or tag name can move under running replicas: run "
                f"`llm-eks models add {plan.checkpoint}` (it records the commit), or set revision to the 40-hex "
                f"commit; {accept}",
            )
        for name, repo, adapter_revision in s.config.adapters:
            if not COMMIT.match(adapter_revision):
                raise fail(
                    E118,
                    f"{s.path}.lora_adapters.{name}",
                    f"{repo}@{adapter_revision}",
                    f"production needs a commit: write {repo}@<40-hex commit>; {accept}",
                )
