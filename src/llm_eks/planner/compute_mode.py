"""Where a plan's nodes come from, and what that changes in the plan: self-managed Karpenter (llm-eks runs it and owns
the nodes' AMI, user data and volumes) or EKS Auto Mode (AWS runs Karpenter, picks the AMI and runs the drivers and
device plugins, for a management fee per instance-hour). Pure Python.

Three things differ for a plan:
- the image path: Auto Mode takes no user data and no data volume of ours, so a node never restores an image
  snapshot; its G, P and Trn nodes pull with Auto Mode's own SOCI parallel pull, its Inferentia nodes plainly
  (catalog/auto_mode.py has the sources);
- how often a node, and so every replica on it, is replaced: Karpenter's pools expire at 720 h and drift only when a
  deploy changes llm-eks's pinned AMI; Auto Mode drifts every node with each weekly AMI and never lets one live past
  21 days;
- the fee: Auto Mode's per instance-hour, unknown where AWS's pricing page has not been read (catalog/auto_mode.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_eks.catalog import auto_mode

KARPENTER = "karpenter"
AUTO_MODE = "auto-mode"
COMPUTE_MODES = (KARPENTER, AUTO_MODE)

# Karpenter's default expireAfter, which llm-eks's GPU and CPU pools keep (manifests/disruption.py).
KARPENTER_EXPIRE_AFTER_HOURS = 720
# On Auto Mode the pools expire at 20 days, a day inside Auto Mode's own cap: the pool's expiry (with its grace
# period, sized to hold one replica's restart) decides how an old node leaves, not Auto Mode's backstop.
AUTO_MODE_EXPIRE_AFTER_HOURS = (auto_mode.MAX_NODE_LIFETIME_DAYS - 1) * 24
# A month, for restarts per month.
MONTH_DAYS = 30


def image_source_on(compute: str, requested: str, family: str) -> str:
    """The image path a node of `family` takes: the requested one with self-managed Karpenter; on Auto Mode its own
    parallel pull on G, P and Trn families and a plain pull elsewhere (a snapshot is refused before planning)."""
    if compute != AUTO_MODE:
        return requested
    return "parallel-pull" if auto_mode.parallel_pull(family) else "pull"


@dataclass(frozen=True)
class NodeReplacement:
    """How often a replica's nodes are replaced, and what each replacement costs that replica."""

    # Days between replacements of one node.
    every_days: float
    # Why nodes are replaced that often.
    why: str
    # Replica restarts per replica in a 30-day month: every one of its nodes' replacements restarts it.
    restarts_per_replica_month: float
    # Seconds the replica is down per restart.
    restart_s: float

    @property
    def minutes_down_per_replica_month(self) -> float:
        return self.restarts_per_replica_month * self.restart_s / 60

    def line(self) -> str:
        return (
            f"~{self.restarts_per_replica_month:.1f} restart(s) per replica per month, each ~{self.restart_s:g} s "
            f"of that replica down (~{self.minutes_down_per_replica_month:.0f} min a month): {self.why}"
        )


def node_replacement(
    compute: str, nodes_per_replica: int, cold_start_s: float, node_provision_s: float
) -> NodeReplacement:
    """Node replacements of a plan's replicas. On Auto Mode each weekly AMI drifts every node: drift is graceful (a
    new node is launched first, one node at a time by the pool's disruption budget), so the replica is down for its
    cold start. With self-managed Karpenter a node expires after 30 days: expiry is forceful (Karpenter 1.14 docs,
    concepts/disruption.md: it drains at once, does not wait for a replacement, and disruption budgets do not limit
    it), so the replica is down for a node launch and its cold start."""
    if compute == AUTO_MODE:
        every = float(auto_mode.AMI_RELEASE_DAYS)
        restart = cold_start_s
        why = (
            f"each new Auto Mode AMI (about every {auto_mode.AMI_RELEASE_DAYS} days) drifts every node, one at a "
            "time by the pool's disruption budget and onto a node launched first; a node drift has not reached "
            f"expires at {AUTO_MODE_EXPIRE_AFTER_HOURS // 24} days (expireAfter {AUTO_MODE_EXPIRE_AFTER_HOURS}h, "
            f"inside Auto Mode's {auto_mode.MAX_NODE_LIFETIME_DAYS}-day cap)"
        )
    else:
        every = KARPENTER_EXPIRE_AFTER_HOURS / 24
        restart = node_provision_s + cold_start_s
        why = (
            f"expireAfter {KARPENTER_EXPIRE_AFTER_HOURS}h (Karpenter's default); llm-eks pins the AMI, so drift "
            "replaces nodes only when a deploy changes it"
        )
    restarts = max(1, nodes_per_replica) * MONTH_DAYS / every
    return NodeReplacement(every, why, round(restarts, 2), round(restart))


def compute_assumptions(compute: str, family: str) -> list[str]:
    """What Auto Mode changes in a plan, as its assumptions (nothing with self-managed Karpenter)."""
    if compute != AUTO_MODE:
        return []
    pull = (
        "Auto Mode's built-in SOCI parallel pull (G, P and Trn families; its settings are AWS's, and the figure is "
        "AWS's measurement with llm-eks's Bottlerocket settings, not measured on Auto Mode)"
        if auto_mode.parallel_pull(family)
        else f"a plain pull: Auto Mode's parallel pull covers G, P and Trn families, not {family}"
    )
    return [
        "compute auto-mode: Auto Mode picks the AMI and takes no user data or data volume, so no node restores an "
        f"image snapshot; the image comes by {pull}",
        f"node launch on Auto Mode: the same {family} boot as with Karpenter is assumed (not measured on Auto Mode)",
        "Auto Mode's management fee per instance-hour is not in the cost: no figure of AWS's pricing page was read "
        "(catalog/auto_mode.py)",
    ]
