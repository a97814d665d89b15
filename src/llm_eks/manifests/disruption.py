"""When Karpenter may take a node pool's nodes away: one `Disruption` per pool (Karpenter v1 API, 1.14).

Consolidation and the disruption budget are the NodePool's `spec.disruption`; expiry and the drain limit sit on its
node template (`spec.template.spec.expireAfter`, `terminationGracePeriod`). All five are one decision about a pool,
so they live together and are validated once. No aws_cdk import (GitOps users build the node pools with cdk8s alone).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from llm_eks.error_codes import E409
from llm_eks.errors import fail
from llm_eks.planner.compute_mode import AUTO_MODE_EXPIRE_AFTER_HOURS

# Patterns from the Karpenter v1.14 NodePool CRD, checked here so a typo fails at synth, not at `kubectl apply`.
_DURATION = re.compile(r"^(([0-9]+(s|m|h))+|Never)$")
_FINITE_DURATION = re.compile(r"^([0-9]+(s|m|h))+$")
_BUDGET_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
# The CRD's consolidationPolicy enum.
CONSOLIDATION_POLICIES = ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced")


@dataclass(frozen=True)
class Disruption:
    """When Karpenter may take one pool's nodes away: the NodePool's `disruption` block, and the expiry and drain
    limit Karpenter v1 reads from the pool's node template. The defaults are a GPU pool's (GPU_DISRUPTION);
    CPU_DISRUPTION is a CPU pool's."""

    # WhenEmpty: Karpenter never evicts a running inference pod to repack GPUs (a restart costs minutes of weight
    # loading); a node goes only once its pods have scaled away.
    consolidation_policy: str = "WhenEmpty"
    # An empty GPU node lives 10 more minutes: a scale-in/scale-out bounce reuses it instead of paying minutes of
    # boot + image pull + weight load; it costs at most 10 idle GPU minutes.
    consolidate_after: str = "10m"
    # Never more than one node per pool draining at once for drift or consolidation, so a model loses at most one
    # replica's capacity at a time. (Expiry is not limited by budgets; terminationGracePeriod bounds it.)
    budget_nodes: str = "1"
    # Karpenter's default: nodes are replaced monthly, picking up the pinned AMI and fresh kernels/drivers.
    expire_after: str = "720h"
    # Longest a node may drain before Karpenter deletes its pods: a vLLM pod's own grace (preStop + --shutdown-timeout,
    # ~2 minutes to fit Spot's notice) always fits; a drain stuck on a PDB gives up instead of billing a GPU forever.
    termination_grace_period: str = "10m"

    def validate(self, path: str) -> None:
        if self.consolidation_policy not in CONSOLIDATION_POLICIES:
            raise fail(
                E409,
                f"{path}.consolidation_policy",
                self.consolidation_policy,
                "must be 'WhenEmpty', 'WhenEmptyOrUnderutilized' or 'Balanced'",
            )
        for name in ("consolidate_after", "expire_after"):
            value = getattr(self, name)
            if not _DURATION.match(value):
                raise fail(E409, f"{path}.{name}", value, "must be a duration like 30m, 720h, 1h30m, or Never")
        if not _BUDGET_NODES.match(self.budget_nodes):
            raise fail(
                E409,
                f"{path}.budget_nodes",
                self.budget_nodes,
                "must be a node count like '1' or a percentage like '10%'",
            )
        if not _FINITE_DURATION.match(self.termination_grace_period):
            raise fail(
                E409,
                f"{path}.termination_grace_period",
                self.termination_grace_period,
                "must be a duration like 10m or 1h",
            )

    def spec(self) -> dict[str, Any]:
        """The NodePool's `spec.disruption`."""
        return {
            "consolidationPolicy": self.consolidation_policy,
            "consolidateAfter": self.consolidate_after,
            "budgets": [{"nodes": self.budget_nodes}],
        }


GPU_DISRUPTION = Disruption()
# CPU pods are cheap to move (pods that must not, such as the Ray head, carry `karpenter.sh/do-not-disrupt`); 5 minutes
# lets short benchmark jobs come and go without a node being replaced under the next one; one CPU node at a time, so
# the Ray head and a benchmark run never lose their nodes together.
CPU_DISRUPTION = Disruption(consolidation_policy="WhenEmptyOrUnderutilized", consolidate_after="5m")
# EKS Auto Mode replaces every node at 21 days and drifts each one with its weekly AMI: the pools expire a day inside
# that cap (planner/compute_mode.py), so their own expiry and grace period decide how an old node leaves. A GPU pool's
# grace period is sized from its plan there (infra/workloads/pools.py): long enough for one replica to restart.
AUTO_MODE_GPU_DISRUPTION = replace(GPU_DISRUPTION, expire_after=f"{AUTO_MODE_EXPIRE_AFTER_HOURS}h")
AUTO_MODE_CPU_DISRUPTION = replace(CPU_DISRUPTION, expire_after=f"{AUTO_MODE_EXPIRE_AFTER_HOURS}h")
