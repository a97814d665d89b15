"""NetworkPolicy builder: one NetworkPolicy dict in, its cdk8s-plus NetworkPolicy out, reconciled.

cdk8s-plus-35 2.0.5 (lib/network-policy.js) models a policy as its selected pods, a default per direction (DENY puts
the direction into policyTypes) and rules of one peer each (`addIngressRule(peer, ports)`: a peer is a `Pods`
selection, optionally in `Namespaces`, or an `NetworkPolicyIpBlock`; a port a `NetworkPolicyPort`). Ours are rules of
several peers (one rule: any of them on any of its ports). So each of our rules is built through cdk8s-plus from its
first peer and its numeric ports, and reconcile adds the rule's other peers to that same rule (`add
/spec/ingress/<i>/from/-`); cdk8s-plus cannot put two peers into one rule. Also reconciled:
- a rule with no ports: cdk8s-plus renders `ports: []` (every port either way), which is removed;
- a named port (cdk8s-plus takes numbers), a selector's matchExpressions;
- a default-deny's empty rule list (`ingress: []`): cdk8s-plus renders none when there is no rule, so it is added,
  and a rule added to that policy later would be overwritten by it. A policy without rules is a deny: allow more
  with a policy of its own (the serving policies are the chart's `network_policies`).
Rules a user adds (`add_ingress_rule`) render after ours, so the patches, which name our rules by index, keep to ours.

Cost: one jsii call per peer, per namespace selection and per port, one for the policy, its selector and its peers'
scope, then the rendering and patches (`reconcile`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import cdk8s_plus_35 as kplus
from constructs import Construct

from llm_eks.manifests.plus.reconcile import reconciled

_DIRECTIONS = (("ingress", "from", "Ingress"), ("egress", "to", "Egress"))


def _selection(scope: Construct, construct_id: str, peer: Mapping[str, Any]) -> kplus.INetworkPolicyPeer | None:
    """The cdk8s-plus peer of `peer` (pods by labels, optionally in namespaces by labels; or an IP block), or None
    for one it cannot express (reconciled)."""
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        make = kplus.NetworkPolicyIpBlock.ipv6 if ":" in block["cidr"] else kplus.NetworkPolicyIpBlock.ipv4
        return make(scope, construct_id, block["cidr"], block.get("except"))
    if "podSelector" not in peer:
        return None
    namespaces = None
    if "namespaceSelector" in peer:
        labels = peer["namespaceSelector"].get("matchLabels") or {}
        namespaces = kplus.Namespaces.select(scope, f"{construct_id}-namespaces", labels=labels)
    labels = peer["podSelector"].get("matchLabels") or {}
    return kplus.Pods.select(scope, construct_id, labels=labels, namespaces=namespaces)


def _ports(ports: Sequence[Mapping[str, Any]]) -> list[kplus.NetworkPolicyPort]:
    """The numeric ports; a named one is reconciled."""
    return [
        kplus.NetworkPolicyPort.of(
            port=p["port"], end_port=p.get("endPort"), protocol=kplus.NetworkProtocol(p.get("protocol", "TCP"))
        )
        for p in ports
        if isinstance(p.get("port"), int)
    ]


def _traffic(
    scope: Construct, spec: Mapping[str, Any], key: str, peers_key: str, policy_type: str
) -> kplus.NetworkPolicyTraffic | None:
    """One direction of the policy: DENY by default when its type is listed, each rule from its first peer."""
    rules = []
    for index, rule in enumerate(spec.get(key) or ()):
        peers = rule.get(peers_key) or ()
        peer = _selection(scope, f"{key}-{index}", peers[0]) if peers else None
        if peer is not None:
            rules.append(kplus.NetworkPolicyRule(peer=peer, ports=_ports(rule.get("ports") or ())))
    if policy_type not in (spec.get("policyTypes") or ()):
        return None
    return kplus.NetworkPolicyTraffic(default=kplus.NetworkPolicyTrafficDefault.DENY, rules=rules)


def network_policy(scope: Construct, construct_id: str, obj: Mapping[str, Any]) -> kplus.NetworkPolicy:
    """The NetworkPolicy `obj` as a cdk8s-plus NetworkPolicy, in one constructor call, reconciled (the module
    docstring says what)."""
    spec = obj["spec"]
    peers = Construct(scope, f"{construct_id}-peers")
    selected = (spec.get("podSelector") or {}).get("matchLabels")
    return reconciled(
        kplus.NetworkPolicy,
        scope,
        construct_id,
        obj,
        {
            # None: every pod of the namespace (cdk8s-plus's Pods.all).
            "selector": kplus.Pods.select(peers, "selected", labels=selected) if selected else None,
            **{key: _traffic(peers, spec, key, peer_key, kind) for key, peer_key, kind in _DIRECTIONS},
        },
    )
