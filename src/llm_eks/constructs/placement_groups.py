"""`ClusterPlacementGroups`: one EC2 cluster placement group per EFA node class, for its EC2NodeClass to select.

A cluster placement group puts its instances "in a single AZ on the same network segment for low-latency,
high-throughput networking (e.g., EFA workloads)" (Karpenter 1.14.1 website/content/en/docs/concepts/nodeclasses.md,
spec.placementGroupSelector), and "Each EC2NodeClass maps to exactly one placement group". Karpenter only selects a
group, it never creates one (designs/placement-groups-support.md, non-goals), so the stack does: AWS::EC2::
PlacementGroup with strategy cluster. CloudFormation names it; Karpenter's EC2NodeClass selects it by id (GroupId),
EKS Auto Mode's NodeClass by name (its Ref).
Karpenter's IAM already allows it (ec2:DescribePlacementGroups and the placement-group/* resource of RunInstances
and CreateFleet in its 1.14.1 CloudFormation).

Delete order: a group cannot be deleted while instances are in it, so each waits for the node pools' removal and for
Karpenter's teardown safety net (`Karpenter.teardown.run_before_deleting`, which the stack calls).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from llm_eks.error_codes import E300
from llm_eks.errors import fail, named_errors

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class ClusterPlacementGroups(Construct):
    """`groups[node_class]` and `ids[node_class]` (a GroupId token) for each EC2NodeClass name in `node_classes`."""

    @named_errors
    def __init__(self, scope: Construct, id: str, *, node_classes: Sequence[str]) -> None:
        for name in node_classes:
            if not _NAME.match(name):
                raise fail(E300, "node_classes", name, "must be EC2NodeClass names (DNS labels)")
        if len(set(node_classes)) != len(node_classes):
            raise fail(E300, "node_classes", list(node_classes), "must not repeat a node class")
        super().__init__(scope, id)
        self.groups: dict[str, ec2.CfnPlacementGroup] = {}
        for name in node_classes:
            group = ec2.CfnPlacementGroup(self, name, strategy="cluster")
            cdk.Tags.of(group).add("llm-eks.io/node-class", name)
            self.groups[name] = group

    @property
    def ids(self) -> dict[str, str]:
        """Node class name -> placement group id (resolved at deploy), for EC2NodeClass placementGroupSelector."""
        return {name: group.attr_group_id for name, group in self.groups.items()}

    @property
    def names(self) -> dict[str, str]:
        """Node class name -> placement group name (its Ref: the resource's primary identifier is GroupName in the
        AWS::EC2::PlacementGroup schema cfn-lint 1.58.0 ships), for EKS Auto Mode's NodeClass, whose
        placementGroupSelector selects by name (EKS User Guide, device-management-efa)."""
        return {name: group.ref for name, group in self.groups.items()}
