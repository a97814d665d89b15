"""Install pinned, hash-checked CustomResourceDefinitions into an EKS cluster at deploy time.

Runs as the on_event handler of the `PinnedCrds` custom resource (CDK Provider framework). ResourceProperties:
ClusterName, Crds (a list of {Name, Url, Sha256}) and RemoveOnDelete ("true"/"false").

Create and Update: download every URL (https only, redirects followed only to https, size cap, retries), compare its
sha256 with the pin, check the text is one CustomResourceDefinition of the pinned name (a comment-only document
before it, a licence header, is dropped); only when every download checks out, server-side apply each CRD (field
manager `llm-eks`, force) and wait until each is Established.
CRDs dropped from the list on an Update are left in the cluster.
Delete: nothing, unless RemoveOnDelete; then each CRD is deleted (deleting a CRD deletes every object of its kind).

Kubernetes is reached with the standard library alone (no kubectl, no awscli): endpoint and CA from
eks:DescribeCluster, a bearer token made the way aws-iam-authenticator expects (`eks_token`), TLS verified against
the cluster CA and nothing else. Errors are raised as one line; the Provider framework reports them to
CloudFormation as FAILED with that message.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import logging
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.signers import RequestSigner  # type: ignore[import-untyped]

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

# The largest upstream CRD we pin (Gateway API v1.6.1 httproutes) is 429 KB; anything past 2 MiB is not a CRD.
MAX_BYTES = 2 * 1024 * 1024
DOWNLOAD_TIMEOUT_SECONDS = 20
ATTEMPTS = 3
# Sleep before retry n (1-based): BACKOFF_SECONDS * 2 ** (n - 1), so 2 s then 4 s.
BACKOFF_SECONDS = 2.0
# HTTP statuses worth another try: rate limits and server-side failures.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
FIELD_MANAGER = "llm-eks"
APPLY_PATCH = "application/apply-patch+yaml"
API_TIMEOUT_SECONDS = 30
# A new CRD is usually Established within seconds; two minutes means something is wrong.
ESTABLISH_TIMEOUT_SECONDS = 120
POLL_SECONDS = 2.0
# Left for answering the Provider framework after the last wait.
RESERVE_SECONDS = 30

# aws-iam-authenticator's token format (kubernetes-sigs/aws-iam-authenticator pkg/token/token.go): "k8s-aws-v1." +
# unpadded URL-safe base64 (Go's RawURLEncoding) of a presigned STS GetCallerIdentity URL whose signed headers
# include x-k8s-aws-id: <cluster name>, X-Amz-Expires 60.
TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
TOKEN_EXPIRES_SECONDS = 60


class CrdError(RuntimeError):
    """A download, check or Kubernetes call failed; the message is one line naming what and why."""


@dataclass(frozen=True)
class Pin:
    """One entry of ResourceProperties.Crds (llm_eks.constructs.crds.CrdSource, which this file cannot import)."""

    name: str
    url: str
    sha256: str


# -- download ---------------------------------------------------------------------------------------------------


def _check_url(url: str, allow_http_host: str | None) -> None:
    """https only; plain http only to `allow_http_host` (tests pass 127.0.0.1; production code never does)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if allow_http_host is not None and parts.scheme == "http" and parts.hostname == allow_http_host:
        return
    raise CrdError(f"download of {url} refused: only https:// URLs are allowed")


class _HttpsRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects, but never away from https (urllib's own handler would follow https -> http)."""

    def __init__(self, allow_http_host: str | None) -> None:
        super().__init__()
        self.allow_http_host = allow_http_host

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        _check_url(newurl, self.allow_http_host)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _retry_later(error: Exception) -> bool:
    """Network trouble and 429/5xx are retried; a 404, a refused URL or a TLS failure never is."""
    if isinstance(error, urllib.error.HTTPError):
        return error.code in RETRY_STATUSES
    if isinstance(error, urllib.error.URLError):
        return not isinstance(error.reason, ssl.SSLError)
    return isinstance(error, (TimeoutError, ConnectionError, http.client.HTTPException))


def _fetch(opener: urllib.request.OpenerDirector, url: str, timeout: float, max_bytes: int) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "llm-eks-pinned-crds"})
    with opener.open(request, timeout=timeout) as response:
        length = response.headers.get("Content-Length")
        if length is not None and length.isdigit() and int(length) > max_bytes:
            raise CrdError(f"download of {url}: {length} bytes is more than the {max_bytes}-byte limit")
        data: bytes = response.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise CrdError(f"download of {url}: more than the {max_bytes}-byte limit")
    return data


def _fetch_with_retries(
    opener: urllib.request.OpenerDirector,
    url: str,
    attempts: int,
    timeout: float,
    max_bytes: int,
    sleep: Callable[[float], None],
) -> bytes:
    for attempt in range(1, attempts + 1):
        try:
            return _fetch(opener, url, timeout, max_bytes)
        except CrdError:
            raise
        except Exception as error:
            if not _retry_later(error):
                raise CrdError(f"download of {url} failed: {_describe(error)}") from error
            if attempt == attempts:
                raise CrdError(f"download of {url} failed after {attempts} attempts: {_describe(error)}") from error
            LOG.info("download of %s failed (%s); retrying", url, _describe(error))
            sleep(BACKOFF_SECONDS * 2 ** (attempt - 1))
    raise CrdError(f"download of {url}: attempts must be at least 1, got {attempts}")


def download(
    url: str,
    sha256: str,
    *,
    allow_http_host: str | None = None,
    attempts: int = ATTEMPTS,
    timeout: float = DOWNLOAD_TIMEOUT_SECONDS,
    max_bytes: int = MAX_BYTES,
    sleep: Callable[[float], None] | None = None,
) -> bytes:
    """The bytes at `url`, only if their sha256 is `sha256`. Retries network errors and 429/5xx `attempts` times
    in all; a hash mismatch is never retried (the pin is wrong or the file changed: both need a person)."""
    _check_url(url, allow_http_host)
    opener = urllib.request.build_opener(_HttpsRedirects(allow_http_host))
    data = _fetch_with_retries(opener, url, attempts, timeout, max_bytes, time.sleep if sleep is None else sleep)
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise CrdError(f"download of {url}: sha256 is {actual}, expected the pinned {sha256}")
    return data


def _describe(error: Exception) -> str:
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code} {error.reason}"
    if isinstance(error, urllib.error.URLError):
        return str(error.reason)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _has_content(document: str) -> bool:
    """Whether a YAML document holds more than blank lines and comments (a licence header before `---` does not)."""
    return any(line.strip() and not line.lstrip().startswith("#") for line in document.splitlines())


def check_crd_text(name: str, url: str, body: bytes) -> bytes:
    """The one CustomResourceDefinition named `name` in `body`, as the bytes to apply: read from the text (the Lambda
    runtime has no YAML parser; the hash already fixes the bytes, this catches a pin whose name and URL belong to
    different CRDs). Comment-only documents (a licence header followed by `---`) are dropped, so only the CRD is
    sent to the API server."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CrdError(f"{url} is not UTF-8 text: {error}") from error
    documents = [d for d in re.split(r"(?m)^---[ \t]*$", text) if _has_content(d)]
    if len(documents) != 1:
        raise CrdError(f"{url} holds {len(documents)} YAML documents; expected exactly one CustomResourceDefinition")
    (document,) = documents
    if not re.search(r"(?m)^apiVersion: apiextensions\.k8s\.io/v1[ \t]*$", document) or not re.search(
        r"(?m)^kind: CustomResourceDefinition[ \t]*$", document
    ):
        raise CrdError(f"{url} is not an apiextensions.k8s.io/v1 CustomResourceDefinition")
    # metadata's keys are the only top-level children indented two spaces that can be `name:`.
    if not re.search(rf"(?m)^  name: {re.escape(name)}[ \t]*$", document):
        raise CrdError(f"{url} does not define a CRD named {name} (metadata.name differs)")
    return document.strip("\n").encode("utf-8") + b"\n"


# -- Kubernetes API ---------------------------------------------------------------------------------------------


def eks_token(cluster: str, session: Any) -> str:
    """A bearer token for `cluster`, as `aws eks get-token` makes it: presigned locally, no network call."""
    sts = session.client("sts")
    region = sts.meta.region_name
    signer = RequestSigner(
        sts.meta.service_model.service_id, region, "sts", "v4", session.get_credentials(), sts.meta.events
    )
    url: str = signer.generate_presigned_url(
        {
            "method": "GET",
            "url": f"{sts.meta.endpoint_url}/?Action=GetCallerIdentity&Version=2011-06-15",
            "body": {},
            "headers": {CLUSTER_ID_HEADER: cluster},
            "context": {},
        },
        region_name=region,
        expires_in=TOKEN_EXPIRES_SECONDS,
        operation_name="",
    )
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def cluster_ssl_context(certificate_authority_data: str) -> ssl.SSLContext:
    """TLS that trusts the cluster's CA (base64 PEM, as DescribeCluster returns it) and nothing else."""
    pem = base64.b64decode(certificate_authority_data).decode("ascii")
    return ssl.create_default_context(cadata=pem)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """The API server never redirects; a redirect must not carry the bearer token anywhere else."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class KubeApi:
    """Just enough of a Kubernetes client: JSON requests with a fresh bearer token each (tokens live 15 minutes)."""

    def __init__(
        self,
        endpoint: str,
        *,
        token: Callable[[], str],
        ssl_context: ssl.SSLContext | None,
        timeout: float = API_TIMEOUT_SECONDS,
        attempts: int = ATTEMPTS,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.attempts = attempts
        self.sleep = time.sleep if sleep is None else sleep
        handlers: list[urllib.request.BaseHandler] = [_NoRedirects()]
        if ssl_context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=ssl_context))
        self.opener = urllib.request.build_opener(*handlers)

    def request(
        self, method: str, path: str, body: bytes | None = None, content_type: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON reply or {}). Network errors and 429/5xx are retried; other statuses are returned."""
        where = f"{method} {path.split('?')[0]}"
        for attempt in range(1, self.attempts + 1):
            headers = {"Authorization": f"Bearer {self.token()}", "Accept": "application/json"}
            if content_type:
                headers["Content-Type"] = content_type
            request = urllib.request.Request(self.endpoint + path, data=body, headers=headers, method=method)
            try:
                with self.opener.open(request, timeout=self.timeout) as response:
                    return response.status, _json(response.read())
            except urllib.error.HTTPError as error:
                status, reply = error.code, _json(error.read())
                if status not in RETRY_STATUSES or attempt == self.attempts:
                    return status, reply
                LOG.info("%s: HTTP %s; retrying", where, status)
            except Exception as error:
                if not _retry_later(error) or attempt == self.attempts:
                    raise CrdError(f"{where} on {self.endpoint} failed: {_describe(error)}") from error
                LOG.info("%s failed (%s); retrying", where, _describe(error))
            self.sleep(BACKOFF_SECONDS * 2 ** (attempt - 1))
        raise AssertionError("unreachable")


def _json(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data) if data else {}
    except ValueError:
        return {"message": data[:200].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {}


def _message(reply: dict[str, Any]) -> str:
    """The one-line message of a Kubernetes Status reply."""
    return " ".join(str(reply.get("message") or reply.get("reason") or "no message").split())


class ClusterGone(CrdError):
    """DescribeCluster found no such cluster."""


def cluster_api(cluster: str, session: Any) -> KubeApi:
    """The API server of `cluster` (endpoint and CA from eks:DescribeCluster), authenticated as this Lambda's role."""
    eks = session.client("eks")
    try:
        info = eks.describe_cluster(name=cluster)["cluster"]
    except eks.exceptions.ResourceNotFoundException as error:
        raise ClusterGone(f"cluster {cluster} does not exist") from error
    endpoint = info.get("endpoint") or ""
    if not endpoint.startswith("https://"):
        raise CrdError(f"cluster {cluster} has no https endpoint yet (status {info.get('status')})")
    context = cluster_ssl_context(info["certificateAuthority"]["data"])
    return KubeApi(endpoint, token=lambda: eks_token(cluster, session), ssl_context=context)


def _crd_path(name: str) -> str:
    return f"{CRD_PATH}/{urllib.parse.quote(name, safe='')}"


def apply_crd(api: KubeApi, name: str, body: bytes) -> None:
    """Server-side apply: no last-applied annotation (httproutes' 429 KB would not fit its 256 KiB limit), and the
    fields are taken over from whoever set them before (force), so a CRD Helm or kubectl installed is upgraded."""
    query = urllib.parse.urlencode({"fieldManager": FIELD_MANAGER, "force": "true"})
    status, reply = api.request("PATCH", f"{_crd_path(name)}?{query}", body, APPLY_PATCH)
    if status not in (200, 201):
        raise CrdError(f"applying CRD {name} failed: HTTP {status}: {_message(reply)}")
    LOG.info("applied CRD %s (HTTP %s)", name, status)


def _conditions(reply: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c.get("type", ""): c for c in (reply.get("status") or {}).get("conditions") or []}


def wait_established(
    api: KubeApi,
    name: str,
    *,
    deadline: float,
    sleep: Callable[[float], None] | None = None,
    now: Callable[[], float] | None = None,
) -> None:
    """Poll the CRD until its Established condition is True; fail at once if its names are not accepted."""
    sleep = time.sleep if sleep is None else sleep
    now = time.monotonic if now is None else now
    last = "no conditions yet"
    while True:
        status, reply = api.request("GET", _crd_path(name))
        if status != 200:
            raise CrdError(f"reading CRD {name} failed: HTTP {status}: {_message(reply)}")
        conditions = _conditions(reply)
        names = conditions.get("NamesAccepted", {})
        if names.get("status") == "False":
            raise CrdError(f"CRD {name} names not accepted: {_message(names)}")
        established = conditions.get("Established", {})
        if established.get("status") == "True":
            LOG.info("CRD %s is Established", name)
            return
        if established:
            last = f"Established={established.get('status')} ({_message(established)})"
        if now() + POLL_SECONDS > deadline:
            raise CrdError(f"CRD {name} was not Established in time; last seen: {last}")
        sleep(POLL_SECONDS)


def delete_crd(api: KubeApi, name: str) -> None:
    """Delete the CRD (and with it every object of its kind); already gone is fine."""
    status, reply = api.request("DELETE", _crd_path(name))
    if status not in (200, 202, 404):
        raise CrdError(f"deleting CRD {name} failed: HTTP {status}: {_message(reply)}")
    LOG.info("deleted CRD %s (HTTP %s)", name, status)


# -- entry point ------------------------------------------------------------------------------------------------


def pins(props: dict[str, Any]) -> list[Pin]:
    return [Pin(c["Name"], c["Url"], c["Sha256"]) for c in props["Crds"]]


def install(
    api: Callable[[], KubeApi],
    crds: Sequence[Pin],
    *,
    deadline: float,
    fetch: Callable[[str, str], bytes] | None = None,
    sleep: Callable[[float], None] | None = None,
    now: Callable[[], float] | None = None,
) -> list[str]:
    """Download and check every pin first, then apply them in order, then wait for each to be Established.
    `api` is called only once every download checked out: a bad pin fails before the cluster is contacted.
    `fetch` defaults to `download` (looked up at call time, so tests can replace it)."""
    fetch = download if fetch is None else fetch
    bodies = []
    for pin in crds:
        body = fetch(pin.url, pin.sha256)
        bodies.append((pin.name, check_crd_text(pin.name, pin.url, body)))
    client = api()
    for name, body in bodies:
        apply_crd(client, name, body)
    clock = time.monotonic if now is None else now
    wait_until = min(deadline, clock() + ESTABLISH_TIMEOUT_SECONDS)
    for name, _ in bodies:
        wait_established(client, name, deadline=wait_until, sleep=sleep, now=now)
    return [name for name, _ in bodies]


def on_event(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Provider-framework entry point."""
    request = event["RequestType"]
    props = event["ResourceProperties"]
    cluster = props["ClusterName"]
    crds = pins(props)
    physical_id = event.get("PhysicalResourceId") or f"pinned-crds-{cluster}"
    session = boto3.session.Session()
    if request == "Delete":
        if str(props.get("RemoveOnDelete", "false")).lower() != "true":
            LOG.info("Delete: leaving CRDs %s in cluster %s (RemoveOnDelete is off)", [p.name for p in crds], cluster)
            return {"PhysicalResourceId": physical_id}
        try:
            api = cluster_api(cluster, session)
        except ClusterGone:
            LOG.info("Delete: cluster %s is gone, and its CRDs with it", cluster)
            return {"PhysicalResourceId": physical_id}
        for pin in crds:
            delete_crd(api, pin.name)
        return {"PhysicalResourceId": physical_id}
    deadline = time.monotonic() + context.get_remaining_time_in_millis() / 1000 - RESERVE_SECONDS
    applied = install(lambda: cluster_api(cluster, session), crds, deadline=deadline)
    LOG.info("%s: applied %s to cluster %s", request, applied, cluster)
    return {"PhysicalResourceId": physical_id, "Data": {"Count": str(len(applied))}}
