"""The Kubernetes side of verify: the user's kubeconfig through the `kubernetes` client (its exec plugins, tokens,
client certificates and CA handling), raw GETs that return the objects as the API server sends them, and the
workload objects one environment's plan names.

Every failure is one line (`ClusterError`): a kubeconfig that is missing or unreadable, an unknown context, an API
server that cannot be reached or refuses the credentials. A 404 is an answer, not an error: the object (or its kind)
is missing, which the checks report as a breach.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llm_eks.error_codes import E500, E501
from llm_eks.errors import ConfigError, fail
from llm_eks.manifests.verifier import reads
from llm_eks.verify.expected import EnvironmentPlan, WorkloadPlan
from llm_eks.verify.observed import ClusterState, Object, WorkloadObjects

# Seconds to connect and to read one answer: the API server answers a GET in milliseconds; the proxy waits for
# Prometheus, whose instant queries over an hour of a few series are well under this.
CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_S = 30
# One retry of a failed connection (urllib3's default would make four attempts before giving up).
RETRIES = 1
# Where the kubernetes client looks when no kubeconfig is named (kubernetes.config.kube_config, KUBECONFIG may list
# several files joined by the OS path separator).
DEFAULT_KUBECONFIG = "~/.kube/config"
HELP = "docs/how-to/verify.md"
ROLLOUT_HELP = "docs/how-to/promote.md"


class ClusterError(ConfigError):
    """The cluster cannot be read (one line; the CLI exits 2)."""


def kubeconfig_contexts(field: str, path: str) -> tuple[list[str], str | None]:
    """(context names, current-context) of a kubeconfig path list, merged as the kubernetes client merges them (a
    later file's current-context wins). One-line errors for a missing file or one that is not a kubeconfig."""
    import yaml

    files = [Path(p).expanduser() for p in path.split(os.pathsep) if p]
    existing = [f for f in files if f.is_file()]
    if not existing:
        raise fail(E500, field, path, "no such file: name a kubeconfig (aws eks update-kubeconfig writes one)")
    names: list[str] = []
    current = None
    for f in existing:
        try:
            body = yaml.safe_load(f.read_text())
        except OSError as err:
            raise fail(E500, field, path, f"cannot be read ({err.strerror or err})") from None
        except yaml.MarkedYAMLError as err:
            where = (
                f" at line {err.problem_mark.line + 1}, column {err.problem_mark.column + 1}"
                if err.problem_mark
                else ""
            )
            raise fail(E500, field, path, f"cannot be read as a kubeconfig: {err.problem}{where}") from None
        except yaml.YAMLError as err:
            raise fail(E500, field, path, f"cannot be read as a kubeconfig: {_one_line(err)}") from None
        if not isinstance(body, dict) or not isinstance(body.get("contexts") or [], list):
            raise fail(E500, field, path, f"cannot be read as a kubeconfig: {f} is not a Config mapping with contexts")
        names += [str(c.get("name")) for c in body.get("contexts") or () if isinstance(c, dict)]
        current = body.get("current-context") or current
    return list(dict.fromkeys(names)), current


def kubeconfig_path(given: str | None) -> tuple[str, str]:
    """(what names it, the path or path list) of the kubeconfig: --kubeconfig, else $KUBECONFIG, else the default."""
    if given is not None:
        return "--kubeconfig", given
    env = os.environ.get("KUBECONFIG")
    if env:
        return "KUBECONFIG", env
    return "--kubeconfig", DEFAULT_KUBECONFIG


class Kube:
    """An API client for one kubeconfig context, and raw JSON GETs through it."""

    def __init__(
        self, kubeconfig: str | None = None, context: str | None = None, *, allow_insecure: bool = True
    ) -> None:
        """`allow_insecure` False: refuse a context whose cluster sets insecure-skip-tls-verify (the commands that
        change the cluster send their credentials only to a server they can authenticate)."""
        from kubernetes import client, config

        field, path = kubeconfig_path(kubeconfig)
        names, current = kubeconfig_contexts(field, path)
        if context is not None and context not in names:
            raise fail(E500, "--context", context, f"must be a context of {path}: {', '.join(names) or 'none'}")
        if context is None and not current:
            raise fail(E500, field, path, "has no current-context: pass --context")
        self.context = context if context is not None else str(current)
        configuration = client.Configuration()
        try:
            config.load_kube_config(
                config_file=path, context=self.context, client_configuration=configuration, persist_config=False
            )
        except Exception as err:  # ConfigException, a failing exec plugin, a bad certificate path
            raise fail(E500, field, path, f"context {self.context!r} cannot be used ({_one_line(err)})") from None
        if not configuration.verify_ssl and not allow_insecure:
            raise fail(
                E500,
                "--context",
                self.context,
                "sets insecure-skip-tls-verify: a command that changes the cluster sends no credentials to an API "
                "server it cannot authenticate; give the cluster its certificate-authority-data, or pass "
                "--allow-insecure-tls",
            )
        configuration.retries = RETRIES
        self.server = str(configuration.host)
        self.api = client.ApiClient(configuration=configuration)

    def get(self, path: str, query: Sequence[tuple[str, str]] = ()) -> Object | None:
        """The JSON object at `path` (None on 404). ClusterError when the server cannot be reached or refuses."""
        status, body = self.raw(path, query)
        if status == 404:
            return None
        if 200 <= status < 300:
            return json.loads(body)  # type: ignore[no-any-return]
        raise ClusterError(E501, self._refused(path, status, body))

    def patch(self, path: str, body: Mapping[str, Any]) -> Object:
        """A JSON merge patch (RFC 7386: a list in it replaces the object's list whole) of the object at `path`; the
        object as the API server stored it. ClusterError when refused, or the object is not there."""
        status, answer = self.raw(path, method="PATCH", body=body)
        if 200 <= status < 300:
            return json.loads(answer)  # type: ignore[no-any-return]
        raise ClusterError(E501, self._refused(path, status, answer, "PATCH"))

    def create(self, path: str, body: Mapping[str, Any]) -> tuple[int, Object]:
        """POST `body` to the collection at `path`: (201, the object stored) or (409, the Status) when an object of
        that name exists. ClusterError when refused otherwise."""
        status, answer = self.raw(path, method="POST", body=body)
        if 200 <= status < 300 or status == 409:
            return status, json.loads(answer)
        raise ClusterError(E501, self._refused(path, status, answer, "POST"))

    def delete(self, path: str) -> None:
        """Delete the object at `path` with its dependents in the background (a Job's pods); gone already is fine."""
        status, answer = self.raw(path, method="DELETE", body={"propagationPolicy": "Background"})
        if not (200 <= status < 300 or status == 404):
            raise ClusterError(E501, self._refused(path, status, answer, "DELETE"))

    def text(self, path: str, query: Sequence[tuple[str, str]] = ()) -> str | None:
        """The text at `path` (a pod's log; None on 404). ClusterError when refused."""
        status, body = self.raw(path, query, accept="text/plain")
        if status == 404:
            return None
        if 200 <= status < 300:
            return body.decode(errors="replace")
        raise ClusterError(E501, self._refused(path, status, body))

    def raw(
        self,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        *,
        method: str = "GET",
        body: Mapping[str, Any] | None = None,
        accept: str = "application/json",
    ) -> tuple[int, bytes]:
        """(HTTP status, body) of a GET (or a merge PATCH, a POST or a DELETE with `body`); ClusterError only when
        the API server cannot be reached at all."""
        import urllib3
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = "application/merge-patch+json" if method == "PATCH" else "application/json"
        try:
            response = self.api.call_api(
                path,
                method,
                query_params=list(query),
                header_params=headers,
                body=dict(body) if body is not None else None,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
            )
        except ApiException as err:
            if err.status == 0:  # TLS failure: the client reports it with status 0
                raise ClusterError(
                    E501, f"kubernetes API: {self.server} refused TLS: {_one_line(err.reason)}"
                ) from None
            return int(err.status), err.body if isinstance(err.body, bytes) else str(err.body or "").encode()
        except urllib3.exceptions.HTTPError as err:
            raise ClusterError(
                E501, f"kubernetes API: {self.server} (context {self.context}) is unreachable: {_reason(err)}"
            ) from None
        return int(response.status), bytes(response.data)

    def _refused(self, path: str, status: int, body: bytes, method: str = "GET") -> str:
        message = status_message(body)
        if status == 401:
            return f"kubernetes API: {self.server} refused the credentials of context {self.context} (401 Unauthorized)"
        if status == 403:
            needs = {
                "PATCH": f"moving a next version's share needs the llm-eks-rollout group's Role ({ROLLOUT_HELP})",
                "POST": f"--load needs the llm-eks-load group's Role ({HELP})",
                "DELETE": f"--load needs the llm-eks-load group's Role ({HELP})",
            }.get(method, f"verify needs the llm-eks-verify group's ClusterRole and Roles ({HELP})")
            if path.endswith("/log"):
                needs = f"--load needs the llm-eks-load group's Role ({HELP})"
            return f"kubernetes API: 403 Forbidden on {method} {path}: {message}; {needs}"
        return f"kubernetes API: {method} {path} answered {status}: {message}"

    def read(self, plan: EnvironmentPlan) -> ClusterState:
        """Everything the plan names: its GPU NodePools, Karpenter's nodes, each workload's owner, pods and route."""
        nodes = self.get(reads.NODES.path(), [("labelSelector", "karpenter.sh/nodepool")])
        pools = {pool.name: self.get(reads.NODE_POOLS.path(pool.name)) for pool in plan.pools}
        return ClusterState(
            context=self.context,
            server=self.server,
            node_pools=pools,
            nodes=tuple((nodes or {}).get("items") or ()),
            workloads={w.name: self._workload(w) for w in plan.workloads},
        )

    def _workload(self, w: WorkloadPlan) -> WorkloadObjects:
        kind = {
            "Deployment": reads.DEPLOYMENTS,
            "LeaderWorkerSet": reads.LEADER_WORKER_SETS,
            "RayService": reads.RAY_SERVICES,
        }[w.owner_kind]
        owner = self.get(kind.path(w.name, w.namespace))
        pods = self.get(reads.PODS.path(namespace=w.namespace), [("labelSelector", selector(w.pod_selector))])
        route = pool = None
        if w.route is not None:
            route = self.get(reads.HTTP_ROUTES.path(w.route.name, w.route.namespace))
            if w.route.backend_kind == "InferencePool":
                namespace = w.route.pool_namespace or w.route.namespace
                pool = self.get(reads.INFERENCE_POOLS.path(w.route.backend_name, namespace))
        prefill = None
        if w.phases is not None:
            # The prefill pool is the same kind as the decode pool (a LeaderWorkerSet where a replica spans nodes).
            prefill = self.get(kind.path(w.phases.prefill_job, w.namespace))
        return WorkloadObjects(owner, tuple((pods or {}).get("items") or ()), route, pool, prefill)


def selector(labels: Mapping[str, str]) -> str:
    """A label selector of equalities (`a=b,c=d`)."""
    return ",".join(f"{key}={value}" for key, value in labels.items())


def status_message(body: bytes) -> str:
    """The `message` of a Kubernetes Status body, else the body's first line."""
    text = body.decode(errors="replace").strip()
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and parsed.get("message"):
        return _one_line(parsed["message"])
    return _one_line(text[:200]) or "(empty body)"


def _reason(err: Exception) -> str:
    """The root cause of a urllib3 failure (connection refused, timed out, name not known), without the connection
    object urllib3 puts first ("HTTPConnection(host=..., port=...): Failed to establish a new connection: ...")."""
    cause: Any = getattr(err, "reason", None) or err
    text = _one_line(cause)
    head, sep, rest = text.partition("): ")
    return rest if sep and "Connection(" in head else text


def _one_line(value: Any) -> str:
    return " ".join(str(value).split())
