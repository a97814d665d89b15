"""The admission policy that holds the EKS node monitoring agent's ServiceAccount to its own node's status.

The eks-node-monitoring-agent add-on grants its ServiceAccount `patch` on `nodes/status` of every node, beside
get/list/watch on nodes, create/patch on events and its nodediagnostics (aws/eks-node-monitoring-agent v1.7.0,
charts/eks-node-monitoring-agent/templates/clusterrole.yaml). Since v1.6.0 the agent sets its node's conditions with
the kubelet's own credentials read from the host (cmd/eks-node-monitoring-agent/main.go and restconfig.go: "the
legacy permission model involves broader access to patch node/status resources"), which the NodeRestriction
admission plugin already holds to that node; the ServiceAccount's grant is used only when the host's kubeconfig
cannot be found, or with `--legacy-node-rbac`. The ClusterRole is the managed add-on's (EKS would restore it), so
this policy narrows what it allows: an update of a node's status by that ServiceAccount is refused unless the node is
the one its token is bound to. A pod's ServiceAccount token names its node in the user info the API server sees
(`authentication.kubernetes.io/node-name`: ServiceAccountTokenPodNodeInfo, on since Kubernetes 1.30, GA in 1.32,
kubernetes pkg/features/kube_features.go). Events and nodediagnostics stay as the add-on grants them.

The ServiceAccount is matched by name in any namespace (`eks-node-monitoring-agent`, the chart's fullnameOverride).
"""

from __future__ import annotations

import json
from typing import Any

from llm_eks.manifests.admission import deny_binding
from llm_eks.manifests.labels import PART_OF
from llm_eks.manifests.source import builds_objects

POLICY = "llm-eks-node-status-own-node"
AGENT_SERVICE_ACCOUNT = "eks-node-monitoring-agent"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"


@builds_objects
def node_status_guard() -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its binding (Deny)."""
    labels = {"app.kubernetes.io/part-of": PART_OF}
    extra = json.dumps(NODE_NAME_EXTRA)
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["nodes/status"], "operations": ["UPDATE"]}
                ]
            },
            "matchConditions": [
                {
                    "name": "the-node-monitoring-agent",
                    "expression": (
                        "request.userInfo.username.startsWith('system:serviceaccount:') && "
                        f"request.userInfo.username.endsWith(':{AGENT_SERVICE_ACCOUNT}')"
                    ),
                }
            ],
            "validations": [
                {
                    "expression": (
                        f"has(request.userInfo.extra) && {extra} in request.userInfo.extra && "
                        f"request.userInfo.extra[{extra}].exists(n, n == object.metadata.name)"
                    ),
                    "message": (
                        f"the {AGENT_SERVICE_ACCOUNT} ServiceAccount may update the status of the node its pod runs "
                        "on only"
                    ),
                    "reason": "Forbidden",
                }
            ],
        },
    }
    return [policy, deny_binding(POLICY, labels)]
