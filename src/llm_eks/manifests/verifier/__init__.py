"""What `llm-eks verify` reads from a cluster (`reads`), the RBAC that lets it read exactly that (`rbac`) and the
admission policy that holds `--load` to its own Jobs (`load_policy`): plain Kubernetes objects, applied by the stack
(and the workloads' charts) and used by the verify command alike."""

from llm_eks.manifests.verifier.load_policy import load_policy
from llm_eks.manifests.verifier.rbac import (
    GROUP,
    LOAD_GROUP,
    NAME,
    cluster_role,
    cluster_role_binding,
    load_rbac,
    rbac_objects,
    workload_rbac,
)
from llm_eks.manifests.verifier.reads import PROMETHEUS_PROXY_NAME, READS, Read

__all__ = [
    "GROUP",
    "LOAD_GROUP",
    "NAME",
    "PROMETHEUS_PROXY_NAME",
    "READS",
    "Read",
    "cluster_role",
    "cluster_role_binding",
    "load_policy",
    "load_rbac",
    "rbac_objects",
    "workload_rbac",
]
