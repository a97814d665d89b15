"""An environment's `compute`, and what EKS Auto Mode (`compute: auto-mode`) does not allow, each refused in one line
naming the field and why, before anything is planned or synthesized:

- an image snapshot: Auto Mode's NodeClass takes no block device mappings and no user data, so no node restores a
  data volume (EKS User Guide, create-node-class: the NodeClass fields; automode: AMIs chosen by AWS, read-only root);
- a system node group: the controllers run on Auto Mode's built-in `system` node pool instead (set-builtin-node-pools);
- Karpenter's Alpha node repair: Auto Mode repairs nodes itself ("Node repair: Enabled by default, EKS node
  monitoring agent included", ml-node-pools);
- the gateway: its endpoint picker and router select the system node group's label (`llm-eks.io/node-role`), and
  its NLB asks the AWS Load Balancer Controller (loadBalancerClass service.k8s.aws/nlb), which Auto Mode replaces
  with its own (eks.amazonaws.com/nlb): the gateway charts do not place or expose themselves on Auto Mode yet.
"""

from __future__ import annotations

from dataclasses import asdict

from llm_eks.config.environment import COMPUTE, EnvironmentConfig, SystemNodesConfig
from llm_eks.errors import fail
from llm_eks.planner.compute_mode import AUTO_MODE


def validate_compute(c: EnvironmentConfig, path: str) -> None:
    """`compute`, and on Auto Mode every setting it cannot honour."""
    if c.compute not in COMPUTE:
        raise fail(
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
                f"{served.path}.image_snapshot_id",
                snapshot,
                "needs a node data volume restored from the snapshot, which EKS Auto Mode cannot give (its NodeClass "
                "takes no block device mappings or user data); remove it (Auto Mode nodes pull the image with its "
                "own parallel pull) or use compute karpenter",
            )
    if c.system_nodes != SystemNodesConfig():
        raise fail(
            f"{path}.system_nodes",
            asdict(c.system_nodes),
            "with compute auto-mode the controllers run on EKS Auto Mode's built-in system node pool (no node group "
            "of llm-eks's): remove system_nodes",
        )
    if "node-repair" in c.alpha_features:
        raise fail(
            f"{path}.alpha_features.node-repair",
            c.alpha_features["node-repair"],
            "it is self-managed Karpenter's feature gate, and with compute auto-mode EKS Auto Mode repairs nodes "
            "itself: remove it",
        )
    if c.gateway is not None:
        raise fail(
            f"{path}.gateway",
            {"expose": c.gateway.expose},
            "the gateway is not built for compute auto-mode yet: its pods are placed by the system node group's "
            "label and its NLB asks the AWS Load Balancer Controller, neither of which EKS Auto Mode has; reach "
            "each workload through its Service (or workload.alb), or use compute karpenter",
        )
