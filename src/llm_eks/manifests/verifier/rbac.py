"""The Kubernetes RBAC `llm-eks verify` needs, as plain objects: ClusterRole `llm-eks-verify` (get or list on exactly
the resources verify reads, `reads.READS`, and `get` on the Prometheus service proxy by its exact name) and a
ClusterRoleBinding of it to Group `llm-eks-verify`. Map an IAM role to that group with an EKS access entry
(`kubernetesGroups: [llm-eks-verify]`) and a verifier can read what verify reads and nothing else: no Secret, no
ConfigMap, no pod logs or exec, no write.

A ClusterRole, not Roles per namespace: nodes and NodePools are cluster-scoped, and the workload namespaces are the
environment's (`inference`, `inference-<key>`).
"""

from __future__ import annotations

from typing import Any

from llm_eks.manifests.source import builds_objects
from llm_eks.manifests.verifier.reads import READS

NAME = "llm-eks-verify"
GROUP = "llm-eks-verify"
_LABELS = {"app.kubernetes.io/part-of": "llm-eks"}


@builds_objects
def cluster_role() -> dict[str, Any]:
    """ClusterRole llm-eks-verify: one rule per resource verify reads, with the verbs it uses."""
    rules = []
    for read in READS:
        rule: dict[str, Any] = {"apiGroups": [read.group], "resources": [read.resource], "verbs": list(read.verbs)}
        if read.resource_names:
            rule["resourceNames"] = list(read.resource_names)
        rules.append(rule)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": NAME, "labels": dict(_LABELS)},
        "rules": rules,
    }


@builds_objects
def cluster_role_binding(group: str = GROUP) -> dict[str, Any]:
    """ClusterRoleBinding llm-eks-verify: the ClusterRole to Group `group`."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": NAME, "labels": dict(_LABELS)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
    }


def rbac_objects(group: str = GROUP) -> list[dict[str, Any]]:
    """The ClusterRole and its binding, in apply order."""
    return [cluster_role(), cluster_role_binding(group)]
