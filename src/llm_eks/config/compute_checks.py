"""An environment's `compute`, and what EKS Auto Mode (`compute: auto-mode`) does not allow, each refused in one line
naming the field and why, before anything is planned or synthesized:

- an image snapshot: Auto Mode's NodeClass takes no block device mappings and no user data, so no node restores a
  data volume (EKS User Guide, create-node-class: the NodeClass fields; automode: AMIs chosen by AWS, read-only root);
- a system node group: the controllers run on Auto Mode's built-in `system` node pool instead (set-builtin-node-pools);
- Karpenter's Alpha node repair: Auto Mode repairs nodes itself ("Node repair: Enabled by default, EKS node
  monitoring agent included", ml-node-pools).

The gateway is allowed: on Auto Mode its pods run on the built-in system pool and its NLB is Auto Mode's
(infra/workloads/gateway.py).
"""

from __future__ import annotations

from dataclasses import asdict

from llm_eks.config.environment import COMPUTE, EnvironmentConfig, SystemNodesConfig
from llm_eks.error_codes import E114, E207
from llm_eks.errors import fail
from llm_eks.planner.compute_mode import AUTO_MODE


def validate_compute(c: EnvironmentConfig, path: str) -> None:
    """`compute`, and on Auto Mode every setting it cannot honour."""
    if c.compute not in COMPUTE:
        raise fail(
            E114,
            f"{path}.compute",
            c.compute,
            f"must be one of {', '.join(COMPUTE)} (self-managed Karpenter, or EKS Auto Mode's nodes)",
        )
    if c.compute != AUTO_MODE:
        return
    for served in c.served:
        snapshot = served.config.image_snapshot_id
        if snapshot is not None:
            raise fail(
                E207,
                f"{served.path}.image_snapshot_id",
                snapshot,
                "needs a node data volume restored from the snapshot, which EKS Auto Mode cannot give (its NodeClass "
                "takes no block device mappings or user data); remove it (Auto Mode nodes pull the image with its "
                "own parallel pull) or use compute karpenter",
            )
    if c.system_nodes != SystemNodesConfig():
        raise fail(
            E114,
            f"{path}.system_nodes",
            asdict(c.system_nodes),
            "with compute auto-mode the controllers run on EKS Auto Mode's built-in system node pool (no node group "
            "of llm-eks's): remove system_nodes",
        )
    if "node-repair" in c.alpha_features:
        raise fail(
            E114,
            f"{path}.alpha_features.node-repair",
            c.alpha_features["node-repair"],
            "it is self-managed Karpenter's feature gate, and with compute auto-mode EKS Auto Mode repairs nodes "
            "itself: remove it",
        )
