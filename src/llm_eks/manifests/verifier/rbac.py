"""The Kubernetes RBAC `llm-eks verify` needs, as plain objects, each bound to Group `llm-eks-verify`: map an IAM
role to that group with an EKS access entry (`kubernetesGroups: [llm-eks-verify]`) and a verifier reads what verify
reads and nothing else: no Secret, no ConfigMap, no pod logs or exec, no write, and nothing in a namespace that is
not one of the environment's workloads' or `monitoring`.

- ClusterRole `llm-eks-verify`: the cluster-scoped reads (nodes, Karpenter's NodePools), with its binding;
- Role `llm-eks-verify` in `monitoring`: `get` on the Prometheus service proxy by its exact name, with its binding
  (`rbac_objects`: what the stack applies once the monitoring namespace exists);
- Role `llm-eks-verify` in each workload's namespace: its pods, its Deployment / LeaderWorkerSet / RayService, its
  HTTPRoute and InferencePool, with its binding (`workload_rbac`: each workload's chart carries it).

`llm-eks verify --load` and `llm-eks canary --load` also run the workload's benchmark Job: Role `llm-eks-load`
(`load_rbac`, bound to Group `llm-eks-load`, in each vLLM workload's namespace) creates Jobs, reads and deletes the
one load Job by name, and reads its pod's log (where the result is). RBAC cannot limit what a created Job holds: the
namespace's admission policy (`load_policy`) admits from that group only the load Jobs verify builds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from llm_eks.manifests.source import builds_objects
from llm_eks.manifests.verifier.reads import PROMETHEUS_NAMESPACE, READS, Read

NAME = "llm-eks-verify"
GROUP = "llm-eks-verify"
LOAD_NAME = "llm-eks-load"
LOAD_GROUP = "llm-eks-load"
LABELS = {"app.kubernetes.io/part-of": "llm-eks"}
_RBAC = "rbac.authorization.k8s.io"


def _rules(reads: Iterable[Read]) -> list[dict[str, Any]]:
    rules = []
    for read in reads:
        rule: dict[str, Any] = {"apiGroups": [read.group], "resources": [read.resource], "verbs": list(read.verbs)}
        if read.resource_names:
            rule["resourceNames"] = list(read.resource_names)
        rules.append(rule)
    return rules


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(LABELS)}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _group(group: str) -> list[dict[str, str]]:
    return [{"apiGroup": _RBAC, "kind": "Group", "name": group}]


@builds_objects
def cluster_role() -> dict[str, Any]:
    """ClusterRole llm-eks-verify: the cluster-scoped resources verify reads, with the verbs it uses."""
    return {
        "apiVersion": f"{_RBAC}/v1",
        "kind": "ClusterRole",
        "metadata": _meta(NAME),
        "rules": _rules(r for r in READS if r.scope == "cluster"),
    }


@builds_objects
def cluster_role_binding(group: str = GROUP) -> dict[str, Any]:
    """ClusterRoleBinding llm-eks-verify: the ClusterRole to Group `group`."""
    return {
        "apiVersion": f"{_RBAC}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": _meta(NAME),
        "roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": NAME},
        "subjects": _group(group),
    }


@builds_objects
def role(namespace: str, rules: Sequence[dict[str, Any]], name: str = NAME) -> dict[str, Any]:
    """Role `name` in `namespace` with `rules`."""
    return {"apiVersion": f"{_RBAC}/v1", "kind": "Role", "metadata": _meta(name, namespace), "rules": list(rules)}


@builds_objects
def role_binding(namespace: str, group: str = GROUP, name: str = NAME) -> dict[str, Any]:
    """RoleBinding `name` in `namespace`: Role `name` to Group `group`."""
    return {
        "apiVersion": f"{_RBAC}/v1",
        "kind": "RoleBinding",
        "metadata": _meta(name, namespace),
        "roleRef": {"apiGroup": _RBAC, "kind": "Role", "name": name},
        "subjects": _group(group),
    }


def monitoring_role() -> dict[str, Any]:
    """Role llm-eks-verify in `monitoring`: `get` on the Prometheus service proxy, by its exact name."""
    return role(PROMETHEUS_NAMESPACE, _rules(r for r in READS if r.scope == "monitoring"))


def workload_role(namespace: str) -> dict[str, Any]:
    """Role llm-eks-verify in a workload's namespace: the namespaced objects verify reads there."""
    return role(namespace, _rules(r for r in READS if r.scope == "workload"))


def rbac_objects(group: str = GROUP) -> list[dict[str, Any]]:
    """The ClusterRole and the monitoring namespace's Role, each with its binding, in apply order."""
    return [
        cluster_role(),
        cluster_role_binding(group),
        monitoring_role(),
        role_binding(PROMETHEUS_NAMESPACE, group),
    ]


def workload_rbac(namespace: str, group: str = GROUP) -> list[dict[str, Any]]:
    """Role llm-eks-verify in a workload's namespace and its binding."""
    return [workload_role(namespace), role_binding(namespace, group)]


def load_rbac(namespace: str, job_names: Sequence[str], group: str = LOAD_GROUP) -> list[dict[str, Any]]:
    """Role llm-eks-load in a vLLM workload's namespace and its binding: create Jobs (the API cannot limit a create
    to a name), get and delete only the load Jobs named, and read pod logs there (the benchmark prints its result
    last)."""
    rules = [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": list(job_names), "verbs": ["get", "delete"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    ]
    return [role(namespace, rules, LOAD_NAME), role_binding(namespace, group, LOAD_NAME)]
