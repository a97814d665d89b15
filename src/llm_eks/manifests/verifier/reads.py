"""Every API resource verify reads, with its verbs and where: the one list the reader (`kube`) and the RBAC it needs
(`rbac`) are both written from, so the ClusterRole and the Roles grant exactly what verify reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from llm_eks.manifests import query_endpoint

# The environment's one query endpoint: the Thanos Querier in front of both Prometheus replicas, Service
# `thanos-query` in `monitoring`, port 10902 (llm_eks.manifests.query_endpoint), the same Prometheus HTTP API
# whichever replica is up.
PROMETHEUS_NAMESPACE = query_endpoint.MONITORING_NAMESPACE
PROMETHEUS_SERVICE = query_endpoint.NAME
PROMETHEUS_PORT = query_endpoint.HTTP_PORT
# The service-proxy name segment `<service>:<port>` (kubernetes/website access-cluster-services.md: "You can also use
# the port number in place of the port_name"). The API server authorizes the request as `get` on `services/proxy`
# with this exact string as the resource name, so RBAC's resourceNames must list it as written here.
PROMETHEUS_PROXY_NAME = f"{PROMETHEUS_SERVICE}:{PROMETHEUS_PORT}"


@dataclass(frozen=True)
class Read:
    """One API resource verify reads."""

    group: str  # "" for the core API
    version: str
    resource: str
    namespaced: bool
    verbs: tuple[str, ...]
    # Only these objects (services/proxy: the Prometheus proxy name); empty: any.
    resource_names: tuple[str, ...] = ()
    # Where it is read: cluster-scoped, in each workload's namespace, or in the monitoring namespace.
    where: Literal["workload", "monitoring"] = "workload"

    @property
    def scope(self) -> Literal["cluster", "workload", "monitoring"]:
        """The RBAC object that grants it: the ClusterRole, or the Role of a workload's or the monitoring namespace."""
        return self.where if self.namespaced else "cluster"

    @property
    def prefix(self) -> str:
        """The API path prefix: /api/v1 or /apis/<group>/<version>."""
        return f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"

    def path(self, name: str | None = None, namespace: str | None = None) -> str:
        where = f"/namespaces/{namespace}" if self.namespaced and namespace is not None else ""
        return f"{self.prefix}{where}/{self.resource}" + (f"/{name}" if name is not None else "")


NODES = Read("", "v1", "nodes", namespaced=False, verbs=("list",))
PODS = Read("", "v1", "pods", namespaced=True, verbs=("list",))
NODE_POOLS = Read("karpenter.sh", "v1", "nodepools", namespaced=False, verbs=("get",))
DEPLOYMENTS = Read("apps", "v1", "deployments", namespaced=True, verbs=("get",))
LEADER_WORKER_SETS = Read("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", namespaced=True, verbs=("get",))
RAY_SERVICES = Read("ray.io", "v1", "rayservices", namespaced=True, verbs=("get",))
HTTP_ROUTES = Read("gateway.networking.k8s.io", "v1", "httproutes", namespaced=True, verbs=("get",))
INFERENCE_POOLS = Read("inference.networking.k8s.io", "v1", "inferencepools", namespaced=True, verbs=("get",))
# GET through the service proxy is verb `get` on the subresource (the API server maps a proxied GET to get).
PROMETHEUS_PROXY = Read(
    "",
    "v1",
    "services/proxy",
    namespaced=True,
    verbs=("get",),
    resource_names=(PROMETHEUS_PROXY_NAME,),
    where="monitoring",
)

READS = (
    NODES,
    PODS,
    NODE_POOLS,
    DEPLOYMENTS,
    LEADER_WORKER_SETS,
    RAY_SERVICES,
    HTTP_ROUTES,
    INFERENCE_POOLS,
    PROMETHEUS_PROXY,
)


def prometheus_query_path() -> str:
    """The Prometheus instant-query API through the API server's service proxy."""
    return f"/api/v1/namespaces/{PROMETHEUS_NAMESPACE}/services/{PROMETHEUS_PROXY_NAME}/proxy/api/v1/query"
