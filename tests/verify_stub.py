"""A local stand-in for an EKS API server, for `llm-eks verify`'s tests: plain HTTP on 127.0.0.1 (port 0) in a
thread, answering the real kubernetes client with a StubCluster's objects (GET of one object, lists with label
selectors, 404 as a Kubernetes Status) and, through the service-proxy path, a real Prometheus holding the cluster's
vLLM series (tests/prometheus_server.py, evaluated at the end of the cluster's scenario hour). It authenticates a
bearer token and authorizes every request the way the API server's RBAC would: the caller's groups, the
ClusterRoleBindings and RoleBindings among the cluster's objects (the ones the charts and the stack apply), and the
rules of the roles they bind (request info as k8s.io/apiserver's RequestInfoFactory derives it). So the tests also
prove that the RBAC llm-eks applies is enough, and that a command holding only its groups gets no further.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from llm_eks.manifests.verifier.rbac import GROUP
from tests.prometheus_server import PrometheusServer
from tests.verify_cluster import StubCluster, rfc3339
from tests.verify_metrics import series

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
    "jobs": "Job",
}
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


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
    verbs = {"PATCH": "patch", "POST": "create", "DELETE": "delete"}
    verb = verbs.get(method) or ("get" if name else "list")
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


RBAC_KINDS = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}


def authorized(info: RequestInfo, objects: list[dict[str, Any]], groups: frozenset[str]) -> bool:
    """Whether a caller in `groups` may make the request: a binding of one of its groups to a role whose rules allow
    it (a RoleBinding only in its own namespace)."""
    by_key = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objects}
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(sub["kind"] == "Group" and sub["name"] in groups for sub in binding.get("subjects") or ()):
            continue
        namespace = binding["metadata"].get("namespace")
        if binding["kind"] == "RoleBinding" and namespace != info.namespace:
            continue
        ref = binding["roleRef"]
        role = by_key.get((ref["kind"], namespace if ref["kind"] == "Role" else None, ref["name"]))
        if role is not None and allowed(info, role):
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
    # The Kubernetes groups the caller's credentials map to (an access entry's kubernetesGroups).
    groups: frozenset[str] = frozenset({GROUP})
    # RBAC objects missing from the cluster, by (kind, namespace, name).
    missing: frozenset[tuple[str, str | None, str]] = frozenset()
    # What a load Job's pod logs, by Job name (a Job not named here logs nothing), and the Jobs that fail.
    logs: dict[str, str] = field(default_factory=dict)
    failing_jobs: frozenset[str] = frozenset()
    # Called with the cluster before each request is answered (a test's way to change it while a command runs).
    before: Callable[[StubCluster, RequestInfo], None] | None = None


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
    def __init__(
        self, cluster: StubCluster, faults: Faults | None = None, prometheus: PrometheusServer | None = None
    ) -> None:
        """`prometheus`: the real server behind the service proxy (default: the cluster's; None: the proxy answers
        that nothing is there)."""
        self.cluster = cluster
        self.faults = faults or Faults()
        prometheus = prometheus if prometheus is not None else cluster.prometheus
        self.prometheus = prometheus
        # When this cluster's series are held: the scenario's time (loaded into the server now if it is new).
        self.at = prometheus.at(series(cluster)) if prometheus is not None else 0.0
        self.requests: list[RequestInfo] = []
        self.queries: list[str] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []
        # Jobs created (as sent) and paths deleted; a Job finishes at the first look after the one that saw it run.
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self._looks: dict[str, int] = {}
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def _allowed(self, info: RequestInfo) -> bool:
        rbac = [
            o
            for o in self.cluster.objects
            if o["kind"] in RBAC_KINDS
            and (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) not in self.faults.missing
        ]
        return authorized(info, rbac, self.faults.groups)

    def _patch(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        code, found = self._answer(path, {}, "PATCH")
        if code != 200:
            return code, found
        self.patches.append((path, body))
        if request_info(path, "PATCH").subresource == "scale":
            # The scale subresource: the owner's replicas, its pods following (the stand-in's controllers are quick).
            self.cluster.scale(found, int(body["spec"]["replicas"]))
            return 200, {
                "apiVersion": "autoscaling/v1",
                "kind": "Scale",
                "spec": {"replicas": body["spec"]["replicas"]},
            }
        patched = merge_patch(found, body)
        patched["metadata"]["generation"] = int(found["metadata"].get("generation", 1)) + 1
        self.cluster.objects[self.cluster.objects.index(found)] = patched
        return 200, patched

    def _create(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """POST of a Job: stored running, with the pod the Job controller would create."""
        code, refused = self._authorize(path, "POST")
        if code != 200:
            return code, refused
        info = request_info(path, "POST")
        name = body["metadata"]["name"]
        if any(o["kind"] == "Job" and o["metadata"]["name"] == name for o in self.cluster.objects):
            return 409, status(409, "AlreadyExists", f'jobs.batch "{name}" already exists')
        self.created.append(copy.deepcopy(body))
        now = rfc3339(self.cluster.now)
        job = copy.deepcopy(body)
        job["metadata"].update(namespace=info.namespace, uid=f"{name}-uid", creationTimestamp=now)
        job["status"] = {"active": 1, "startTime": now}
        template = job["spec"]["template"]
        labels = {**template["metadata"]["labels"], JOB_NAME_LABEL: name, "job-name": name}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-x7k2p", "namespace": info.namespace,
               "labels": labels, "creationTimestamp": now}, "spec": template["spec"],
               "status": {"phase": "Running"}}  # fmt: skip
        self.cluster.objects += [job, pod]
        return 201, job

    def _delete(self, path: str) -> tuple[int, dict[str, Any]]:
        code, refused = self._authorize(path, "DELETE")
        if code != 200:
            return code, refused
        info = request_info(path, "DELETE")
        self.deleted.append(path)
        gone = [o for o in self.cluster.objects if (o["kind"] == "Job" and o["metadata"]["name"] == info.name)
                or o["metadata"].get("labels", {}).get(JOB_NAME_LABEL) == info.name]  # fmt: skip
        if not gone:
            return 404, status(404, "NotFound", f'jobs.batch "{info.name}" not found')
        for o in gone:
            self.cluster.objects.remove(o)
        return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}

    def _finish(self, job: dict[str, Any]) -> None:
        """A Job runs for one look, then completes (or fails, in faults.failing_jobs)."""
        name = job["metadata"]["name"]
        self._looks[name] = self._looks.get(name, 0) + 1
        if self._looks[name] < 2 or "conditions" in job["status"]:
            return
        failed = name in self.faults.failing_jobs
        kind = "Failed" if failed else "Complete"
        at = rfc3339(self.cluster.now)
        job["status"] = {"startTime": job["status"]["startTime"], **({"failed": 1} if failed else {"succeeded": 1}),
                         "conditions": [{"type": kind, "status": "True", "lastTransitionTime": at}]}  # fmt: skip
        for o in self.cluster.objects:
            if o["kind"] == "Pod" and o["metadata"]["labels"].get(JOB_NAME_LABEL) == name:
                o["status"]["phase"] = "Failed" if failed else "Succeeded"

    def _log(self, info: RequestInfo) -> tuple[int, str]:
        pods = [o for o in self.cluster.objects if o["kind"] == "Pod" and o["metadata"]["name"] == info.name]
        if not pods:
            return 404, json.dumps(status(404, "NotFound", f'pods "{info.name}" not found'))
        job = pods[0]["metadata"]["labels"].get(JOB_NAME_LABEL, "")
        return 200, self.faults.logs.get(job, "")

    def _authorize(self, path: str, method: str) -> tuple[int, dict[str, Any]]:
        info = request_info(path, method)
        self.requests.append(info)
        if self.faults.before is not None:
            self.faults.before(self.cluster, info)
        if not self._allowed(info):
            what = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
            return 403, status(403, "Forbidden", f'{what} "{info.name or ""}" is forbidden: User "verifier" cannot '
                               f'{info.verb} resource "{what}" in API group "{info.group}"')  # fmt: skip
        return 200, {}

    def _answer(self, path: str, qs: dict[str, list[str]], method: str = "GET") -> tuple[int, dict[str, Any]]:
        info = request_info(path, method)
        code, refused = self._authorize(path, method)
        if code != 200:
            return code, refused
        if path.startswith(PROXY):
            if self.faults.prometheus_unreachable or self.prometheus is None:
                return 503, status(503, "ServiceUnavailable", "error trying to reach service: dial tcp "
                                   "10.0.3.17:10902: i/o timeout")  # fmt: skip
            if path != PROXY + "/api/v1/query":
                return 404, {"status": "error", "errorType": "not_found", "error": "404 page not found"}
            self.queries.append(qs["query"][0])
            # Without `time` Prometheus evaluates now: here, the end of the cluster's scenario; with it (usage), then.
            at = float(qs["time"][0]) if "time" in qs else self.at
            return self.prometheus.query(qs["query"][0], at)
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
            if kind == "Job" and method == "GET":
                self._finish(one[0])
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
                elif url.path.endswith("/log"):
                    code, body = stub._authorize(url.path, "GET")
                    if code == 200:
                        code, text = stub._log(request_info(url.path))
                        return self._send_text(code, text)
                else:
                    code, body = stub._answer(url.path, parse_qs(url.query))
                self._send(code, body)

            def do_POST(self) -> None:
                sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    code, body = 401, status(401, "Unauthorized", "Unauthorized")
                else:
                    code, body = stub._create(urlsplit(self.path).path, sent)
                self._send(code, body)

            def do_DELETE(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    code, body = 401, status(401, "Unauthorized", "Unauthorized")
                else:
                    code, body = stub._delete(urlsplit(self.path).path)
                self._send(code, body)

            def _send_text(self, code: int, text: str) -> None:
                data = text.encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

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


def write_kubeconfig(
    path: Path, server: str, token: str = TOKEN, context: str = CONTEXT, *, insecure: bool = False
) -> Path:
    """A kubeconfig with one cluster, one token user and one context (current) pointing at `server` (`insecure`:
    the cluster sets insecure-skip-tls-verify)."""
    cluster: dict[str, Any] = {"server": server}
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "stub", "cluster": cluster}],
        "users": [{"name": "verifier", "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": "stub", "user": "verifier"}}],
        "current-context": context,
    }
    path.write_text(yaml.safe_dump(config))
    return path
