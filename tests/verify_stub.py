"""A local stand-in for an EKS API server, for `llm-eks verify`'s tests: plain HTTP on 127.0.0.1 (port 0) in a
thread, answering the real kubernetes client with a StubCluster's objects (GET of one object, lists with label
selectors, 404 as a Kubernetes Status) and Prometheus's query API through the service-proxy path. It authenticates a
bearer token and authorizes every request against verify's own ClusterRole the way the API server's RBAC would
(request info as k8s.io/apiserver's RequestInfoFactory derives it), so the tests also prove that RBAC is enough.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from llm_eks.manifests.verifier.rbac import cluster_role
from tests.verify_cluster import StubCluster
from tests.verify_metrics import query, series

TOKEN = "verify-test-token"
# A context named as `aws eks update-kubeconfig` names one (the cluster ARN), of a cluster that is a stand-in.
CONTEXT = "arn:aws:eks:us-east-1:111122223333:cluster/llm-eks-stub"
PROXY = "/api/v1/namespaces/monitoring/services/thanos-query:10902/proxy"
# resource -> kind, for the paths verify reads.
KINDS = {
    "nodes": "Node",
    "pods": "Pod",
    "nodepools": "NodePool",
    "deployments": "Deployment",
    "leaderworkersets": "LeaderWorkerSet",
    "rayservices": "RayService",
    "httproutes": "HTTPRoute",
    "inferencepools": "InferencePool",
}


@dataclass(frozen=True)
class RequestInfo:
    group: str
    version: str
    namespace: str | None
    resource: str
    name: str | None
    subresource: str | None
    verb: str


def request_info(path: str, method: str = "GET") -> RequestInfo:
    """/api/v1/namespaces/ns/pods -> (core, v1, ns, pods, list); the name and subresource as the API server reads
    them (the proxy's name segment `service:port` is the resource name)."""
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    else:
        group, version, rest = parts[1], parts[2], parts[3:]
    namespace = None
    if rest and rest[0] == "namespaces" and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    verb = "patch" if method == "PATCH" else "get" if name else "list"
    return RequestInfo(group, version, namespace, rest[0], name, subresource, verb)


def allowed(info: RequestInfo, role: dict[str, Any]) -> bool:
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    for rule in role["rules"]:
        if info.group not in rule["apiGroups"] or resource not in rule["resources"] or info.verb not in rule["verbs"]:
            continue
        if "resourceNames" in rule and info.name not in rule["resourceNames"]:
            continue
        return True
    return False


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}  # fmt: skip


def _selected(obj: dict[str, Any], selector: str) -> bool:
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, selector.split(",")):
        key, eq, value = term.partition("=")
        if (eq and labels.get(key) != value) or (not eq and key not in labels):
            return False
    return True


@dataclass
class Faults:
    """What the stub gets wrong on purpose."""

    # An API server answer on the service proxy instead of Prometheus's (the proxy could not reach the pod).
    prometheus_unreachable: bool = False
    # The ClusterRole the caller holds (default: verify's own).
    role: dict[str, Any] = field(default_factory=cluster_role)
    # Roles the caller also holds, by namespace (e.g. a route's `<route>-rollout` Role).
    roles: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as the API server applies application/merge-patch+json."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class StubApiServer:
    def __init__(self, cluster: StubCluster, faults: Faults | None = None) -> None:
        self.cluster = cluster
        self.faults = faults or Faults()
        self.store = series(cluster)
        self.requests: list[RequestInfo] = []
        self.queries: list[str] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def _allowed(self, info: RequestInfo) -> bool:
        namespaced = self.faults.roles.get(info.namespace or "", []) if info.namespace else []
        return any(allowed(info, role) for role in [self.faults.role, *namespaced])

    def _patch(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        code, found = self._answer(path, {}, "PATCH")
        if code != 200:
            return code, found
        patched = merge_patch(found, body)
        patched["metadata"]["generation"] = int(found["metadata"].get("generation", 1)) + 1
        self.cluster.objects[self.cluster.objects.index(found)] = patched
        self.patches.append((path, body))
        return 200, patched

    def _answer(self, path: str, qs: dict[str, list[str]], method: str = "GET") -> tuple[int, dict[str, Any]]:
        info = request_info(path, method)
        self.requests.append(info)
        if not self._allowed(info):
            what = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
            return 403, status(403, "Forbidden", f'{what} "{info.name or ""}" is forbidden: User "verifier" cannot '
                               f'{info.verb} resource "{what}" in API group "{info.group}"')  # fmt: skip
        if path.startswith(PROXY):
            if self.faults.prometheus_unreachable:
                return 503, status(503, "ServiceUnavailable", "error trying to reach service: dial tcp "
                                   "10.0.3.17:10902: i/o timeout")  # fmt: skip
            if path != PROXY + "/api/v1/query":
                return 404, {"status": "error", "errorType": "not_found", "error": "404 page not found"}
            self.queries.append(qs["query"][0])
            answer = query(self.store, qs["query"][0], self.cluster.now.timestamp())
            return (200 if answer["status"] == "success" else 400), answer
        kind = KINDS[info.resource]
        found = [
            o
            for o in self.cluster.objects
            if o["kind"] == kind
            and o["apiVersion"] == (f"{info.group}/{info.version}" if info.group else info.version)
            and (info.namespace is None or o["metadata"].get("namespace") == info.namespace)
        ]
        if info.name is not None:
            one = [o for o in found if o["metadata"]["name"] == info.name]
            if not one:
                return 404, status(404, "NotFound", f'{info.resource} "{info.name}" not found')
            return 200, one[0]
        items = [o for o in found if _selected(o, qs.get("labelSelector", [""])[0])]
        if not info.group:  # core lists carry no apiVersion/kind per item
            items = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in items]
        list_kind = f"{kind}List"
        return 200, {"apiVersion": info.version if not info.group else f"{info.group}/{info.version}",
                     "kind": list_kind, "metadata": {"resourceVersion": "4711"}, "items": items}  # fmt: skip

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    code, body = 401, status(401, "Unauthorized", "Unauthorized")
                else:
                    code, body = stub._answer(url.path, parse_qs(url.query))
                self._send(code, body)

            def do_PATCH(self) -> None:
                sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    code, body = 401, status(401, "Unauthorized", "Unauthorized")
                elif self.headers.get("Content-Type") != "application/merge-patch+json":
                    code, body = (
                        415,
                        status(415, "UnsupportedMediaType", "the body of the request was in an unknown format"),
                    )
                else:
                    code, body = stub._patch(urlsplit(self.path).path, sent)
                self._send(code, body)

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    @contextmanager
    def running(self) -> Iterator[StubApiServer]:
        # A short poll: shutdown() waits for the loop to notice, 0.5 s by default.
        thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()
            thread.join()


def write_kubeconfig(path: Path, server: str, token: str = TOKEN, context: str = CONTEXT) -> Path:
    """A kubeconfig with one cluster, one token user and one context (current) pointing at `server`."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "stub", "cluster": {"server": server}}],
        "users": [{"name": "verifier", "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": "stub", "user": "verifier"}}],
        "current-context": context,
    }
    path.write_text(yaml.safe_dump(config))
    return path
