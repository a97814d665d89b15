"""EFA node classes: the network interfaces an EC2NodeClass lists for replicas that span nodes (Karpenter 1.14.1).

Karpenter attaches EFA in one of two ways (aws/karpenter-provider-aws@bde0065):
- with no `networkInterfaces` on the node class, a NodeClaim that requests `vpc.amazonaws.com/efa` gets one
  interface of type `efa` (EFA with ENA, each taking IP addresses) per network card
  (pkg/providers/launchtemplate/launchtemplate.go, generateNetworkInterfaces);
- with `networkInterfaces`, exactly those, and the node's `vpc.amazonaws.com/efa` capacity is the number of
  `efa-only` entries (pkg/providers/instancetype/types.go, efas(): "If the network interface field is specified on
  the NodeClass, this overrides the EFAs that the instance type supports").

llm-eks lists them, as Karpenter's design doc (designs/efa-for-static-capacity.md: "use ENA on one device index and
EFA-only on others") and EC2's EFA guide describe: ENA on network card 0 device 0 (the node's and the pods' IP
traffic), EFA-only on card 0 device 1, and EFA-only on device 0 of every other card. EFA-only interfaces take no IP
address, so a p5.48xlarge holds 32 EFA devices without 32 ENIs' worth of addresses. One list applies to every
instance type of a node class, so an EFA node class is per family and EFA count (`gpu-nvidia-p5-efa32`); Karpenter
drops an instance type whose cards or EFA count are fewer (pkg/providers/instancetype/compatibility, checks 2 and 5).
Changing the list drifts the pool's nodes (the design doc: "Karpenter will drift existing nodes").

Each EFA node class also selects one cluster placement group (`placementGroupSelector`, created by the stack):
"instances are placed in a single AZ on the same network segment" (website/content/en/docs/concepts/nodeclasses.md),
and Karpenter filters a non-empty cluster group's offerings to its zone (designs/placement-groups-support.md).
"""

from __future__ import annotations

from typing import Any

# The extended resource the EFA device plugin advertises and Karpenter sizes nodes by (pkg/apis/v1/labels.go,
# ResourceEFA: "vpc.amazonaws.com/efa"); a pod of a replica spanning nodes requests all of its node's. The planner
# names it in the plan's pod requests.
from llm_eks.planner.result import EFA_RESOURCE

__all__ = ["EFA_RESOURCE", "LABEL_EFA", "network_interfaces"]
# On the nodes of EFA pools: the EFA device plugin's DaemonSet selects it, so it runs nowhere else.
LABEL_EFA = "llm-eks.io/efa"


def network_interfaces(efa: int) -> list[dict[str, Any]]:
    """The EC2NodeClass `networkInterfaces` for `efa` EFA devices: ENA on card 0 device 0, EFA-only on card 0
    device 1, EFA-only on device 0 of cards 1 to efa - 1 (so `efa` EFA-only entries in all)."""
    if efa < 1:
        raise ValueError(f"efa: {efa} is not allowed; an EFA node class needs at least 1 interface")
    primary = {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}
    second = {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"}
    others = [{"networkCardIndex": card, "deviceIndex": 0, "interfaceType": "efa-only"} for card in range(1, efa)]
    return [primary, second, *others]
