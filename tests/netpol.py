"""A pure-Python evaluator of Kubernetes NetworkPolicy ingress (networking.k8s.io/v1), for the tests.

Semantics (kubernetes.io/docs/concepts/services-networking/network-policies, and the API reference):
- a policy selects the pods of ITS namespace that match its podSelector ({} selects all) and applies to ingress
  when policyTypes lists Ingress (or policyTypes is absent: Ingress is then always implied);
- a pod that no ingress policy selects accepts everything; a selected pod accepts a connection only when some
  rule of some selecting policy allows it (policies and rules are ORed);
- a rule with no `from` (or an empty one) allows every source; with peers, any peer may match:
  podSelector alone = pods of the policy's namespace; namespaceSelector alone = every pod of the matching
  namespaces; both in ONE peer = matching pods in matching namespaces; ipBlock = a CIDR minus its `except`s;
- a rule with no `ports` (or an empty list) allows every port; a port is a number or the name of a container port
  of the destination pod (with its protocol; TCP when omitted), `endPort` makes a range.

ipBlock and pods: the VPC CNI's agent enforces by IP, so a source pod that is given an IP matches ipBlocks that
hold it (Kubernetes leaves this implementation-defined); a source pod without an IP never matches an ipBlock.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: Mapping[str, str]
    # name -> (port, protocol) of the pod's container ports, for named ports in rules.
    ports: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    ip: str | None = None


@dataclass(frozen=True)
class External:
    """A source outside the pod network (an ALB ENI, the EKS control plane)."""

    ip: str


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector: matchLabels AND every matchExpression; an empty selector matches everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"unknown selector operator {op!r}")
    return True


class Cluster:
    """Namespaces with their labels, and the NetworkPolicies applied to them."""

    def __init__(self, policies: Iterable[Mapping[str, Any]], namespaces: Mapping[str, Mapping[str, str]]) -> None:
        self.policies = [p for p in policies if p.get("kind") == "NetworkPolicy"]
        # Kubernetes labels every namespace with its own name.
        self.namespaces = {name: {**labels, NAMESPACE_NAME_LABEL: name} for name, labels in namespaces.items()}

    def _ingress_policies(self, dest: Pod) -> list[Mapping[str, Any]]:
        out = []
        for policy in self.policies:
            spec = policy["spec"]
            types = spec.get("policyTypes") or ["Ingress"]
            if (
                policy["metadata"]["namespace"] == dest.namespace
                and "Ingress" in types
                and selector_matches(spec.get("podSelector", {}), dest.labels)
            ):
                out.append(policy)
        return out

    def _peer_matches(self, peer: Mapping[str, Any], policy_ns: str, source: Pod | External) -> bool:
        if "ipBlock" in peer:
            ip = source.ip
            if ip is None:
                return False
            address = ipaddress.ip_address(ip)
            block = peer["ipBlock"]
            if address not in ipaddress.ip_network(block["cidr"]):
                return False
            return not any(address in ipaddress.ip_network(e) for e in block.get("except") or [])
        if isinstance(source, External):
            return False
        if "namespaceSelector" in peer:
            ns_labels = self.namespaces.get(source.namespace, {NAMESPACE_NAME_LABEL: source.namespace})
            if not selector_matches(peer["namespaceSelector"], ns_labels):
                return False
        elif source.namespace != policy_ns:
            return False
        return "podSelector" not in peer or selector_matches(peer["podSelector"], source.labels)

    @staticmethod
    def _port_matches(entry: Mapping[str, Any], dest: Pod, port: int, protocol: str) -> bool:
        if entry.get("protocol", "TCP") != protocol:
            return False
        wanted = entry.get("port")
        if wanted is None:
            return True
        if isinstance(wanted, str):
            named = dest.ports.get(wanted)
            return named is not None and named == (port, protocol)
        return wanted <= port <= entry.get("endPort", wanted)

    def allows(self, source: Pod | External, dest: Pod, port: int, protocol: str = "TCP") -> bool:
        """Whether a connection from `source` to `dest` on `port` is let in."""
        policies = self._ingress_policies(dest)
        if not policies:
            return True
        for policy in policies:
            for rule in policy["spec"].get("ingress") or []:
                peers = rule.get("from") or []
                ports = rule.get("ports") or []
                if peers and not any(self._peer_matches(p, policy["metadata"]["namespace"], source) for p in peers):
                    continue
                if ports and not any(self._port_matches(e, dest, port, protocol) for e in ports):
                    continue
                return True
        return False

    def allowed_by(self, source: Pod | External, dest: Pod, port: int, protocol: str = "TCP") -> list[str]:
        """The names of the policies whose rules let the connection in (for the flows table)."""
        names = []
        for policy in self._ingress_policies(dest):
            single = Cluster([policy], self.namespaces)
            if single.allows(source, dest, port, protocol):
                names.append(policy["metadata"]["name"])
        return names
