"""PinnedCrds: the installer Lambda against loopback servers (downloads, a fake Kubernetes API, over TLS too), its
bearer token, the construct in a synthesized template, its validation, and the pins against the vendored upstream
copies (tests/fixtures/upstream).

The handler is loaded from its file the way Lambda loads it (module `index`), not through the package. Nothing here
touches the network beyond 127.0.0.1.
"""

from __future__ import annotations

import ast
import base64
import datetime
import hashlib
import http.server
import importlib.util
import ipaddress
import json
import re
import ssl
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import aws_cdk as cdk
import boto3
import pytest

from llm_eks.constructs.crds import (
    GAIE_COMMIT,
    GATEWAY_API_COMMIT,
    GATEWAY_API_CRDS,
    HANDLER_DIR,
    INFERENCE_POOL_CRD,
    RESOURCE_TYPE,
    CrdSource,
    PinnedCrds,
    PinnedCrdsProps,
)
from llm_eks.errors import ConfigError
from llm_eks.versions import GAIE_VERSION, GATEWAY_API_VERSION
from tests.kube_schema import assert_valid
from tests.upstream import CRDS, sources


def _load_handler() -> ModuleType:
    spec = importlib.util.spec_from_file_location("crd_index", HANDLER_DIR / "index.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    # Registered first, as Lambda's import does: dataclasses look their module up while the class is built.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


handler = _load_handler()
CrdError = handler.CrdError
ALL_CRDS = (*GATEWAY_API_CRDS, INFERENCE_POOL_CRD)
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def crd_text(name: str) -> bytes:
    """A small CRD shaped like upstream's (same top-level layout the handler's text check reads)."""
    plural, _, group = name.partition(".")
    return (
        "apiVersion: apiextensions.k8s.io/v1\n"
        "kind: CustomResourceDefinition\n"
        "metadata:\n"
        "  annotations:\n"
        "    example.com/bundle-version: v0.0.1\n"
        f"  name: {name}\n"
        "spec:\n"
        f"  group: {group}\n"
        "  names:\n"
        f"    plural: {plural}\n"
        "  scope: Namespaced\n"
    ).encode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- loopback servers --------------------------------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


Reply = tuple[int, dict[str, str], bytes]


@dataclass
class Loopback:
    """A threaded HTTP(S) server on 127.0.0.1 that records every request and answers with `respond`."""

    respond: Callable[[Seen], Reply]
    tls: ssl.SSLContext | None = None
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                url = urllib.parse.urlsplit(self.path)
                request = Seen(
                    self.command,
                    url.path,
                    urllib.parse.parse_qs(url.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length),
                )
                outer.seen.append(request)
                status, headers, body = outer.respond(request)
                self.send_response(status)
                for key, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PATCH = do_DELETE = do_POST = _any

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if self.tls is not None:
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[..., Loopback]]:
    started: list[Loopback] = []

    def start(respond: Callable[[Seen], Reply], tls: ssl.SSLContext | None = None) -> Loopback:
        server = Loopback(respond, tls)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def files(routes: dict[str, list[Reply] | bytes]) -> Callable[[Seen], Reply]:
    """Static files by path; a list answers one entry per request (the last one repeats)."""

    def respond(request: Seen) -> Reply:
        route = routes.get(request.path)
        if route is None:
            return 404, {}, b"not found"
        if isinstance(route, bytes):
            return 200, {}, route
        return route.pop(0) if len(route) > 1 else route[0]

    return respond


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


# Captured before test_on_event_create_applies_every_pin puts loopback_download in its place.
REAL_DOWNLOAD = handler.download


def loopback_download(url: str, sha256: str, **kwargs: Any) -> bytes:
    result: bytes = REAL_DOWNLOAD(url, sha256, allow_http_host="127.0.0.1", sleep=Sleeps(), **kwargs)
    return result


def test_handler_imports_only_the_standard_library_and_the_sdk() -> None:
    """The Lambda runtime has boto3/botocore and nothing else (no PyYAML): the asset is index.py, unbundled."""
    tree = ast.parse((HANDLER_DIR / "index.py").read_text())
    roots = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    roots |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert roots - sys.stdlib_module_names == {"boto3", "botocore"}


# -- downloads ---------------------------------------------------------------------------------------------------


def test_download_returns_the_bytes_whose_hash_is_pinned(serve: Callable[..., Loopback]) -> None:
    body = crd_text("widgets.example.com")
    server = serve(files({"/w.yaml": body}))
    assert loopback_download(f"{server.base}/w.yaml", sha(body)) == body
    assert server.seen[0].headers["user-agent"] == "llm-eks-pinned-crds"


def test_download_with_a_wrong_hash_fails_naming_url_expected_and_actual(serve: Callable[..., Loopback]) -> None:
    body = b"changed upstream"
    server = serve(files({"/w.yaml": body}))
    url, pinned = f"{server.base}/w.yaml", "0" * 64
    with pytest.raises(CrdError) as error:
        loopback_download(url, pinned)
    assert str(error.value) == f"download of {url}: sha256 is {sha(body)}, expected the pinned {pinned}"
    assert len(server.seen) == 1  # a mismatch is never retried


def test_download_retries_server_errors_with_backoff(serve: Callable[..., Loopback]) -> None:
    body = crd_text("widgets.example.com")
    server = serve(files({"/w.yaml": [(503, {}, b"busy"), (429, {}, b"slow down"), (200, {}, body)]}))
    sleeps = Sleeps()
    got = handler.download(f"{server.base}/w.yaml", sha(body), allow_http_host="127.0.0.1", sleep=sleeps)
    assert got == body
    assert len(server.seen) == 3
    assert sleeps == [2.0, 4.0]


def test_download_gives_up_after_three_attempts(serve: Callable[..., Loopback]) -> None:
    server = serve(files({"/w.yaml": [(503, {}, b"busy")]}))
    url = f"{server.base}/w.yaml"
    with pytest.raises(CrdError) as error:
        loopback_download(url, "0" * 64)
    assert str(error.value) == f"download of {url} failed after 3 attempts: HTTP 503 Service Unavailable"
    assert len(server.seen) == 3


def test_download_does_not_retry_not_found(serve: Callable[..., Loopback]) -> None:
    server = serve(files({}))
    url = f"{server.base}/missing.yaml"
    with pytest.raises(CrdError) as error:
        loopback_download(url, "0" * 64)
    assert str(error.value) == f"download of {url} failed: HTTP 404 Not Found"
    assert len(server.seen) == 1


def test_download_retries_a_refused_connection(serve: Callable[..., Loopback]) -> None:
    server = serve(files({}))
    url = f"{server.base}/w.yaml"
    server.close()
    with pytest.raises(CrdError, match=r"^download of .* failed after 3 attempts: .*refused"):
        loopback_download(url, "0" * 64)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:1/w.yaml", "http://example.com/w.yaml", "ftp://example.com/w.yaml", "file:///etc/passwd"]
)
def test_production_download_refuses_anything_but_https(url: str) -> None:
    with pytest.raises(CrdError) as error:
        handler.download(url, "0" * 64)
    assert str(error.value) == f"download of {url} refused: only https:// URLs are allowed"


def test_download_follows_redirects_but_never_off_https(serve: Callable[..., Loopback]) -> None:
    body = crd_text("widgets.example.com")
    routes: dict[str, list[Reply] | bytes] = {"/final.yaml": body}
    server = serve(files(routes))
    routes["/moved.yaml"] = [(302, {"Location": f"{server.base}/final.yaml"}, b"")]
    # localhost is not the allowed host: to the handler it is plain http, which production refuses.
    routes["/downgrade.yaml"] = [(302, {"Location": f"http://localhost:{server.server.server_address[1]}/f"}, b"")]
    assert loopback_download(f"{server.base}/moved.yaml", sha(body)) == body
    with pytest.raises(CrdError) as error:
        loopback_download(f"{server.base}/downgrade.yaml", sha(body))
    assert str(error.value).endswith("refused: only https:// URLs are allowed")


def test_download_caps_the_size(serve: Callable[..., Loopback]) -> None:
    server = serve(files({"/big.yaml": b"x" * 100}))
    url = f"{server.base}/big.yaml"
    with pytest.raises(CrdError) as error:
        loopback_download(url, sha(b"x" * 100), max_bytes=64)
    assert str(error.value) == f"download of {url}: 100 bytes is more than the 64-byte limit"


def test_crd_text_check() -> None:
    name = "widgets.example.com"
    handler.check_crd_text(name, "u", crd_text(name))
    with pytest.raises(CrdError, match=r"^u does not define a CRD named gadgets\.example\.com "):
        handler.check_crd_text("gadgets.example.com", "u", crd_text(name))
    with pytest.raises(CrdError, match=r"^u holds 2 YAML documents; expected exactly one"):
        handler.check_crd_text(name, "u", crd_text(name) + b"---\n" + crd_text(name))
    with pytest.raises(CrdError, match=r"^u is not an apiextensions\.k8s\.io/v1 CustomResourceDefinition$"):
        handler.check_crd_text(name, "u", crd_text(name).replace(b"CustomResourceDefinition", b"ConfigMap"))


# -- the Kubernetes side -----------------------------------------------------------------------------------------


@dataclass
class FakeApiServer:
    """Just the customresourcedefinitions endpoints: PATCH stores, GET reports Established after `pending` reads."""

    pending: int = 1
    status_for: dict[str, int] = field(default_factory=dict)
    conditions: list[dict[str, str]] | None = None
    stored: dict[str, bytes] = field(default_factory=dict)
    reads: dict[str, int] = field(default_factory=dict)

    def __call__(self, request: Seen) -> Reply:
        name = request.path.removeprefix(f"{CRD_PATH}/")
        if request.path == name or request.headers.get("authorization") != "Bearer test-token":
            return 401, {}, b'{"kind":"Status","message":"Unauthorized"}'
        if name in self.status_for:
            message = f'customresourcedefinitions.apiextensions.k8s.io "{name}" is forbidden: no'
            return self.status_for[name], {}, json.dumps({"kind": "Status", "message": message}).encode()
        if request.method == "PATCH":
            created = name not in self.stored
            self.stored[name] = request.body
            return (201 if created else 200), {}, json.dumps({"metadata": {"name": name}}).encode()
        if request.method == "DELETE":
            return (200, {}, b"{}") if self.stored.pop(name, None) else (404, {}, b'{"reason":"NotFound"}')
        if name not in self.stored:
            return 404, {}, b'{"reason":"NotFound"}'
        self.reads[name] = self.reads.get(name, 0) + 1
        established = "True" if self.reads[name] > self.pending else "False"
        conditions = self.conditions or [
            {"type": "NamesAccepted", "status": "True"},
            {"type": "Established", "status": established, "message": "waiting for the API to serve it"},
        ]
        return 200, {}, json.dumps({"status": {"conditions": conditions}}).encode()


def api_for(server: Loopback, **kwargs: Any) -> Any:
    return handler.KubeApi(server.base, token=lambda: "test-token", ssl_context=None, sleep=Sleeps(), **kwargs)


def pins_served_by(files_server: Loopback, names: list[str]) -> list[Any]:
    return [handler.Pin(n, f"{files_server.base}/{n}.yaml", sha(crd_text(n))) for n in names]


NAMES = ["widgets.example.com", "gadgets.example.com"]


def test_install_server_side_applies_each_crd_and_waits_until_established(serve: Callable[..., Loopback]) -> None:
    downloads = serve(files({f"/{n}.yaml": crd_text(n) for n in NAMES}))
    fake = FakeApiServer(pending=2)
    api = serve(fake)
    sleeps = Sleeps()
    applied = handler.install(
        lambda: api_for(api), pins_served_by(downloads, NAMES), deadline=1e12, fetch=loopback_download, sleep=sleeps
    )
    assert applied == NAMES
    patches = [r for r in api.seen if r.method == "PATCH"]
    assert [r.path for r in patches] == [f"{CRD_PATH}/{n}" for n in NAMES]
    for request, name in zip(patches, NAMES, strict=True):
        assert request.query == {"fieldManager": ["llm-eks"], "force": ["true"]}
        assert request.headers["content-type"] == "application/apply-patch+yaml"
        assert request.body == crd_text(name)
    # All applies first, then the waits: two not-yet-Established reads each, 2 s apart.
    assert [r.method for r in api.seen] == ["PATCH", "PATCH"] + ["GET"] * 6
    assert sleeps == [2.0] * 4


def test_nothing_is_applied_unless_every_download_checks_out(serve: Callable[..., Loopback]) -> None:
    downloads = serve(files({f"/{n}.yaml": crd_text(n) for n in NAMES}))
    pins = pins_served_by(downloads, NAMES)
    pins[1] = replace(pins[1], sha256="f" * 64)
    contacted: list[bool] = []

    def api() -> Any:
        contacted.append(True)
        raise AssertionError("the cluster must not be contacted")

    with pytest.raises(CrdError, match=r"sha256 is [0-9a-f]{64}, expected the pinned f{64}$"):
        handler.install(api, pins, deadline=1e12, fetch=loopback_download)
    assert not contacted


def test_apply_failure_is_one_line_with_the_api_message(serve: Callable[..., Loopback]) -> None:
    api = serve(FakeApiServer(status_for={"widgets.example.com": 403}))
    with pytest.raises(CrdError) as error:
        handler.apply_crd(api_for(api), "widgets.example.com", crd_text("widgets.example.com"))
    assert str(error.value) == (
        "applying CRD widgets.example.com failed: HTTP 403: "
        'customresourcedefinitions.apiextensions.k8s.io "widgets.example.com" is forbidden: no'
    )


def test_api_retries_server_errors(serve: Callable[..., Loopback]) -> None:
    fake = FakeApiServer(pending=0)
    answers = [(503, {}, b"{}")]

    def flaky(request: Seen) -> Reply:
        return answers.pop() if answers else fake(request)

    api = serve(flaky)
    handler.apply_crd(api_for(api), "widgets.example.com", crd_text("widgets.example.com"))
    assert [r.method for r in api.seen] == ["PATCH", "PATCH"]


def test_wait_times_out_with_the_last_condition() -> None:
    clock = iter(range(0, 1000, 1))

    class NeverEstablished:
        def request(self, method: str, path: str) -> tuple[int, dict[str, Any]]:
            return 200, {"status": {"conditions": [{"type": "Established", "status": "False", "message": "not yet"}]}}

    with pytest.raises(CrdError) as error:
        handler.wait_established(
            NeverEstablished(), "widgets.example.com", deadline=10, sleep=Sleeps(), now=lambda: next(clock)
        )
    assert (
        str(error.value)
        == "CRD widgets.example.com was not Established in time; last seen: Established=False (not yet)"
    )


def test_wait_fails_at_once_when_names_are_not_accepted(serve: Callable[..., Loopback]) -> None:
    conflict = {"type": "NamesAccepted", "status": "False", "message": '"widget" is already in use'}
    fake = FakeApiServer(conditions=[conflict])
    fake.stored["widgets.example.com"] = b""
    api = serve(fake)
    with pytest.raises(CrdError) as error:
        handler.wait_established(api_for(api), "widgets.example.com", deadline=1e12, sleep=Sleeps())
    assert str(error.value) == 'CRD widgets.example.com names not accepted: "widget" is already in use'


def test_delete_accepts_an_already_deleted_crd(serve: Callable[..., Loopback]) -> None:
    fake = FakeApiServer()
    fake.stored["widgets.example.com"] = b""
    api = serve(fake)
    handler.delete_crd(api_for(api), "widgets.example.com")
    handler.delete_crd(api_for(api), "widgets.example.com")
    assert [r.method for r in api.seen] == ["DELETE", "DELETE"]
    assert not fake.stored


# -- TLS against the cluster CA, token -------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    ca_pem: bytes
    other_ca_pem: bytes
    server: ssl.SSLContext


def _ca(name: str) -> tuple[Any, Any]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # keyCertSign, cRLSign
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


@pytest.fixture(scope="module")
def pki() -> Pki:
    """A cluster CA and an API server certificate for 127.0.0.1 signed by it (what EKS's endpoint presents)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_key, ca_cert = _ca("kubernetes")
    _, other_cert = _ca("someone-else")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory(prefix="crds-pki-") as tmp:
        folder = Path(tmp)
        (folder / "server.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (folder / "server.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        server.load_cert_chain(folder / "server.pem", folder / "server.key")
    pem = serialization.Encoding.PEM
    return Pki(ca_cert.public_bytes(pem), other_cert.public_bytes(pem), server)


# Captured before any test replaces boto3.session.Session for the handler.
REAL_SESSION = boto3.session.Session
CREDENTIALS = {"aws_access_key_id": "AKIAIOSFODNN7EXAMPLE", "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCY"}


class FakeEks:
    class exceptions:  # the shape of a boto3 client's `exceptions`
        class ResourceNotFoundException(Exception):
            pass

    def __init__(self, endpoint: str | None, ca_pem: bytes = b"") -> None:
        self.endpoint, self.ca_pem = endpoint, ca_pem
        self.calls: list[str] = []

    def describe_cluster(self, name: str) -> dict[str, Any]:
        self.calls.append(name)
        if self.endpoint is None:
            raise self.exceptions.ResourceNotFoundException(name)
        ca = base64.b64encode(self.ca_pem).decode()
        return {"cluster": {"endpoint": self.endpoint, "certificateAuthority": {"data": ca}, "status": "ACTIVE"}}


class FakeSession:
    """A real boto3 session (fake credentials: presigning is local) whose EKS client is `eks`."""

    def __init__(self, eks: FakeEks | None) -> None:
        self.real = REAL_SESSION(region_name="us-west-2", **CREDENTIALS)
        self.eks = eks

    def client(self, name: str) -> Any:
        if name == "eks":
            if self.eks is None:
                raise AssertionError("no AWS call expected")
            return self.eks
        return self.real.client(name)

    def get_credentials(self) -> Any:
        return self.real.get_credentials()


def test_cluster_api_verifies_tls_against_the_cluster_ca_only(serve: Callable[..., Loopback], pki: Pki) -> None:
    fake = FakeApiServer(pending=0)
    fake.stored["widgets.example.com"] = b""
    seen_tokens: list[str] = []

    def respond(request: Seen) -> Reply:
        seen_tokens.append(request.headers["authorization"])
        request.headers["authorization"] = "Bearer test-token"
        return fake(request)

    server = serve(respond, tls=pki.server)
    api = handler.cluster_api("llm-test", FakeSession(FakeEks(server.base, pki.ca_pem)))
    handler.wait_established(api, "widgets.example.com", deadline=1e12, sleep=Sleeps())
    assert seen_tokens and seen_tokens[0].startswith("Bearer k8s-aws-v1.")

    untrusted = handler.cluster_api("llm-test", FakeSession(FakeEks(server.base, pki.other_ca_pem)))
    with pytest.raises(
        CrdError,
        match=r"^GET /apis/.*/widgets\.example\.com on https://127\.0\.0\.1:\d+ failed: .*CERTIFICATE_VERIFY_FAILED",
    ):
        untrusted.request("GET", f"{CRD_PATH}/widgets.example.com")
    assert len(seen_tokens) == 1  # the untrusted attempt was not retried, and never reached the handler


def test_eks_token_is_a_presigned_get_caller_identity_url() -> None:
    token = handler.eks_token("llm-test", FakeSession(None))
    assert token.startswith("k8s-aws-v1.")
    encoded = token.removeprefix("k8s-aws-v1.")
    assert "=" not in encoded and re.fullmatch(r"[A-Za-z0-9_-]+", encoded)
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    parts = urllib.parse.urlsplit(url)
    assert (parts.scheme, parts.hostname, parts.path) == ("https", "sts.us-west-2.amazonaws.com", "/")
    query = dict(urllib.parse.parse_qsl(parts.query))
    assert query["Action"] == "GetCallerIdentity" and query["Version"] == "2011-06-15"
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert query["X-Amz-Expires"] == "60"
    assert query["X-Amz-Credential"].startswith("AKIAIOSFODNN7EXAMPLE/")
    assert query["X-Amz-Credential"].endswith("/us-west-2/sts/aws4_request")
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"].split(";")
    assert re.fullmatch(r"[0-9a-f]{64}", query["X-Amz-Signature"])


# -- on_event ----------------------------------------------------------------------------------------------------


class FakeContext:
    def get_remaining_time_in_millis(self) -> int:
        return 600_000


def event(request: str, crds: tuple[CrdSource, ...], **props: Any) -> dict[str, Any]:
    return {
        "RequestType": request,
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:x",
            "ClusterName": "llm-test",
            "Crds": [{"Name": c.name, "Url": c.url, "Sha256": c.sha256} for c in crds],
            **props,
        },
    }


def test_on_event_create_applies_every_pin(serve: Callable[..., Loopback], monkeypatch: pytest.MonkeyPatch) -> None:
    downloads = serve(files({f"/{n}.yaml": crd_text(n) for n in NAMES}))
    api = serve(FakeApiServer(pending=0))
    crds = tuple(CrdSource(p.name, p.url, p.sha256) for p in pins_served_by(downloads, NAMES))
    monkeypatch.setattr(handler, "download", loopback_download)
    monkeypatch.setattr(handler, "cluster_api", lambda cluster, session: api_for(api))
    reply = handler.on_event(event("Create", crds, RemoveOnDelete="false"), FakeContext())
    assert reply == {"PhysicalResourceId": "pinned-crds-llm-test", "Data": {"Count": "2"}}
    assert sorted(r.path for r in api.seen if r.method == "PATCH") == sorted(f"{CRD_PATH}/{n}" for n in NAMES)


def test_on_event_delete_leaves_crds_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handler.boto3.session, "Session", lambda: FakeSession(None))
    reply = handler.on_event(
        {**event("Delete", ALL_CRDS, RemoveOnDelete="false"), "PhysicalResourceId": "pinned-crds-llm-test"},
        FakeContext(),
    )
    assert reply == {"PhysicalResourceId": "pinned-crds-llm-test"}


def test_on_event_delete_of_a_gone_cluster_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    eks = FakeEks(None)
    monkeypatch.setattr(handler.boto3.session, "Session", lambda: FakeSession(eks))
    reply = handler.on_event(
        {**event("Delete", ALL_CRDS, RemoveOnDelete="true"), "PhysicalResourceId": "p"}, FakeContext()
    )
    assert reply == {"PhysicalResourceId": "p"}
    assert eks.calls == ["llm-test"]


def test_on_event_delete_removes_the_crds_when_asked(
    serve: Callable[..., Loopback], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeApiServer()
    fake.stored.update({n: b"" for n in NAMES})
    api = serve(fake)
    monkeypatch.setattr(handler, "cluster_api", lambda cluster, session: api_for(api))
    crds = tuple(CrdSource(n, f"https://example.com/{n}.yaml", "0" * 64) for n in NAMES)
    handler.on_event({**event("Delete", crds, RemoveOnDelete="true"), "PhysicalResourceId": "p"}, FakeContext())
    assert [(r.method, r.path) for r in api.seen] == [("DELETE", f"{CRD_PATH}/{n}") for n in NAMES]


# -- the construct -----------------------------------------------------------------------------------------------


@dataclass
class Synth:
    template: dict[str, Any]
    findings: list[tuple[str, str]]
    acknowledged: dict[tuple[str, str], str]
    asset_files: list[str]

    def resources(self, type_: str, under: str = "Crds") -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.template["Resources"].items() if r["Type"] == type_ and k.startswith(under)}

    def one(self, type_: str, under: str = "Crds") -> tuple[str, dict[str, Any]]:
        ((logical_id, resource),) = self.resources(type_, under).items()
        return logical_id, resource


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Synth]:
    from llm_eks.constructs.cluster import InferenceCluster, InferenceClusterProps
    from tests.cdk_fixtures import minimal_cluster, synth_with_nag

    outdir = tmp_path_factory.mktemp("crds")
    app = cdk.App(outdir=str(outdir))
    env = cdk.Environment(account="123456789012", region="us-west-2")
    inference = cdk.Stack(app, "Inference", env=env)
    cluster = InferenceCluster(inference, "Cluster", InferenceClusterProps(cluster_name="llm-test"))
    PinnedCrds(inference, "Crds", PinnedCrdsProps(cluster=cluster.cluster, sources=ALL_CRDS))
    # A bare aws_eks_v2 cluster, CRDs removed with the stack, and a name of its own.
    bare = cdk.Stack(app, "Bare", env=env)
    PinnedCrds(
        bare,
        "Crds",
        PinnedCrdsProps(
            cluster=minimal_cluster(bare, cluster_name="bare"),
            sources=(INFERENCE_POOL_CRD,),
            remove_on_delete=True,
            name="inference-crds",
        ),
    )
    report = synth_with_nag(app)
    built = {}
    for name in ("Inference", "Bare"):
        template = json.loads((outdir / f"{name}.template.json").read_text())
        findings = [
            (construct["constructPath"], violation["ruleName"])
            for plugin in report["pluginReports"]
            for violation in plugin["violations"]
            for construct in violation["violatingConstructs"]
            if construct["constructPath"].startswith(f"{name}/Crds/")
        ]
        metadata = json.loads((outdir / f"{name}.metadata.json").read_text())
        acknowledged = {
            (path, rule): reason
            for path, entries in metadata.items()
            if path.startswith(f"/{name}/Crds/")
            for entry in entries
            if entry["type"] == "aws:cdk:acknowledged-rules"
            for rule, reason in entry["data"].items()
        }
        _, function = next(
            (k, r)
            for k, r in template["Resources"].items()
            if r["Type"] == "AWS::Lambda::Function" and "CrdsHandler" in k
        )
        asset = outdir / f"asset.{function['Properties']['Code']['S3Key'].removesuffix('.zip')}"
        built[name] = Synth(template, findings, acknowledged, sorted(p.name for p in asset.iterdir()))
    return built


@pytest.fixture(scope="session")
def inference(synthesized: dict[str, Synth]) -> Synth:
    return synthesized["Inference"]


def manifest_objects(resource: dict[str, Any]) -> list[dict[str, Any]]:
    manifest = resource["Properties"]["Manifest"]
    assert isinstance(manifest, str), "the RBAC manifest holds no deploy-time values"
    objects: list[dict[str, Any]] = json.loads(manifest)
    return objects


def test_custom_resource_carries_every_pin(inference: Synth) -> None:
    _, resource = inference.one(RESOURCE_TYPE)
    props = resource["Properties"]
    assert props["Crds"] == [{"Name": c.name, "Url": c.url, "Sha256": c.sha256} for c in ALL_CRDS]
    assert len(props["Crds"]) == 7
    assert props["RemoveOnDelete"] is False
    (cluster_id,) = [k for k, r in inference.template["Resources"].items() if r["Type"] == "AWS::EKS::Cluster"]
    assert props["ClusterName"] == {"Ref": cluster_id}
    gateway = [c["Url"] for c in props["Crds"][:6]]
    assert all(
        u.startswith(f"https://raw.githubusercontent.com/kubernetes-sigs/gateway-api/{GATEWAY_API_COMMIT}/")
        for u in gateway
    )
    assert props["Crds"][6]["Url"].startswith(
        f"https://raw.githubusercontent.com/kubernetes-sigs/gateway-api-inference-extension/{GAIE_COMMIT}/"
    )


def test_custom_resource_waits_for_access_rbac_and_the_network_path(inference: Synth) -> None:
    _, resource = inference.one(RESOURCE_TYPE)
    entry_id, _ = inference.one("AWS::EKS::AccessEntry")
    rbac_id, _ = inference.one("Custom::AWSCDK-EKS-KubernetesResource")
    ingress_id, _ = inference.one("AWS::EC2::SecurityGroupIngress")
    assert set(resource["DependsOn"]) >= {entry_id, rbac_id, ingress_id}


def test_handler_may_only_describe_its_cluster(inference: Synth) -> None:
    _, function = inference.one("AWS::Lambda::Function", "CrdsHandler")
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    policies = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in inference.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    (cluster_id,) = [k for k, r in inference.template["Resources"].items() if r["Type"] == "AWS::EKS::Cluster"]
    assert policies == [
        [
            {
                "Sid": "DescribeThisCluster",
                "Action": "eks:DescribeCluster",
                "Effect": "Allow",
                "Resource": {"Fn::GetAtt": [cluster_id, "Arn"]},
            }
        ]
    ]
    role = inference.template["Resources"][role_id]["Properties"]
    managed = [json.dumps(arn) for arn in role["ManagedPolicyArns"]]
    assert len(managed) == 2
    assert any("AWSLambdaBasicExecutionRole" in m for m in managed)
    assert any("AWSLambdaVPCAccessExecutionRole" in m for m in managed)


def test_access_entry_is_a_group_with_no_access_policy(inference: Synth) -> None:
    _, entry = inference.one("AWS::EKS::AccessEntry")
    _, function = inference.one("AWS::Lambda::Function", "CrdsHandler")
    props = entry["Properties"]
    assert props["Type"] == "STANDARD"
    assert props["KubernetesGroups"] == ["llm-eks:crd-installer"]
    assert "AccessPolicies" not in props
    assert props["PrincipalArn"] == {"Fn::GetAtt": [function["Properties"]["Role"]["Fn::GetAtt"][0], "Arn"]}


def test_cluster_role_allows_only_the_pinned_crds(synthesized: dict[str, Synth]) -> None:
    names = [c.name for c in ALL_CRDS]
    for stack, group, crds, verbs in (
        ("Inference", "llm-eks:crd-installer", names, ["get", "create", "patch"]),
        ("Bare", "llm-eks:inference-crds", [INFERENCE_POOL_CRD.name], ["get", "create", "patch", "delete"]),
    ):
        _, rbac = synthesized[stack].one("Custom::AWSCDK-EKS-KubernetesResource")
        role, binding = manifest_objects(rbac)
        assert (role["kind"], role["metadata"]["name"]) == ("ClusterRole", group)
        assert role["rules"] == [
            {
                "apiGroups": ["apiextensions.k8s.io"],
                "resources": ["customresourcedefinitions"],
                "resourceNames": crds,
                "verbs": verbs,
            }
        ]
        assert binding["kind"] == "ClusterRoleBinding"
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": group}
        assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]
        assert_valid([role, binding])
        _, entry = synthesized[stack].one("AWS::EKS::AccessEntry")
        assert entry["Properties"]["KubernetesGroups"] == [group]


def test_handler_runs_in_private_subnets_with_https_out_only(inference: Synth) -> None:
    _, function = inference.one("AWS::Lambda::Function", "CrdsHandler")
    props = function["Properties"]
    assert props["Runtime"] == "python3.14"
    assert props["Handler"] == "index.on_event"
    assert props["Timeout"] == 600
    assert props["Environment"]["Variables"] == {"AWS_STS_REGIONAL_ENDPOINTS": "regional"}
    private = sorted(
        k
        for k, r in inference.template["Resources"].items()
        if r["Type"] == "AWS::EC2::Subnet" and "privateSubnet" in k
    )
    assert sorted(s["Ref"] for s in props["VpcConfig"]["SubnetIds"]) == private
    sg_id, sg = inference.one("AWS::EC2::SecurityGroup")
    assert props["VpcConfig"]["SecurityGroupIds"] == [{"Fn::GetAtt": [sg_id, "GroupId"]}]
    assert [
        (e["CidrIp"], e["IpProtocol"], e["FromPort"], e["ToPort"]) for e in sg["Properties"]["SecurityGroupEgress"]
    ] == [("0.0.0.0/0", "tcp", 443, 443)]
    assert "SecurityGroupIngress" not in sg["Properties"]
    _, ingress = inference.one("AWS::EC2::SecurityGroupIngress")
    (cluster_id,) = [k for k, r in inference.template["Resources"].items() if r["Type"] == "AWS::EKS::Cluster"]
    assert ingress["Properties"]["GroupId"] == {"Fn::GetAtt": [cluster_id, "ClusterSecurityGroupId"]}
    assert ingress["Properties"]["SourceSecurityGroupId"] == {"Fn::GetAtt": [sg_id, "GroupId"]}
    assert (ingress["Properties"]["FromPort"], ingress["Properties"]["ToPort"]) == (443, 443)


def test_provider_framework_stays_outside_the_vpc_and_logs_are_encrypted(inference: Synth) -> None:
    _, framework = inference.one("AWS::Lambda::Function", "CrdsProviderframeworkonEvent")
    assert "VpcConfig" not in framework["Properties"]
    groups = inference.resources("AWS::Logs::LogGroup")
    assert len(groups) == 2
    assert all("KmsKeyId" in g["Properties"] for g in groups.values())


def test_lambda_asset_is_the_handler_file_alone(synthesized: dict[str, Synth]) -> None:
    assert synthesized["Inference"].asset_files == ["index.py"]


def test_cdk_nag_passes_with_one_line_acknowledgements(synthesized: dict[str, Synth]) -> None:
    for synth in synthesized.values():
        assert synth.findings == []
        assert synth.acknowledged
        for (path, rule), reason in synth.acknowledged.items():
            assert rule.startswith("AwsSolutions::AwsSolutions-IAM"), (path, rule)
            assert reason and "\n" not in reason and len(reason) <= 160, (path, rule, reason)


# -- validation --------------------------------------------------------------------------------------------------

CLUSTER = object()
GOOD = CrdSource("widgets.example.com", "https://example.com/w.yaml", "a" * 64)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sources": ()}, "sources: () is not allowed; list at least one CrdSource [LLMEKS-E309]"),
        (
            {"sources": (replace(GOOD, url="http://example.com/w.yaml"),)},
            "sources[0].url: 'http://example.com/w.yaml' is not allowed; must be an https:// URL [LLMEKS-E309]",
        ),
        (
            {"sources": (GOOD, replace(GOOD, name="gadgets.example.com", url="https:///w.yaml"))},
            "sources[1].url: 'https:///w.yaml' is not allowed; must be an https:// URL [LLMEKS-E309]",
        ),
        (
            {"sources": (replace(GOOD, sha256="A" * 64),)},
            f"sources[0].sha256: {'A' * 64!r} is not allowed; must be 64 lowercase hex digits (sha256sum of the file)"
            " [LLMEKS-E309]",
        ),
        (
            {"sources": (replace(GOOD, sha256="abc"),)},
            "sources[0].sha256: 'abc' is not allowed; must be 64 lowercase hex digits (sha256sum of the file)"
            " [LLMEKS-E309]",
        ),
        (
            {"sources": (GOOD, replace(GOOD, url="https://example.com/other.yaml"))},
            "sources[1].name: 'widgets.example.com' is not allowed; each CRD may be listed once (also sources[0])"
            " [LLMEKS-E309]",
        ),
        (
            {"sources": (replace(GOOD, name="widgets"),)},
            "sources[0].name: 'widgets' is not allowed; must be the CRD's metadata.name, <plural>.<group> (a DNS "
            "subdomain with a dot, e.g. httproutes.gateway.networking.k8s.io) [LLMEKS-E309]",
        ),
        (
            {"sources": (replace(GOOD, name="Widgets.example.com"),)},
            "sources[0].name: 'Widgets.example.com' is not allowed; must be the CRD's metadata.name, <plural>.<group> "
            "(a DNS subdomain with a dot, e.g. httproutes.gateway.networking.k8s.io) [LLMEKS-E309]",
        ),
        (
            {"name": "CRD_installer"},
            "name: 'CRD_installer' is not allowed; must be a DNS label of 1-40 lowercase letters, digits and '-'"
            " [LLMEKS-E309]",
        ),
        (
            {"timeout_minutes": 15},
            "timeout_minutes: 15 is not allowed; must be between 2 and 14 "
            "(the Provider framework's Lambda stops at 15) [LLMEKS-E309]",
        ),
    ],
)
def test_validation_messages(change: dict[str, Any], message: str) -> None:
    props = replace(PinnedCrdsProps(cluster=CLUSTER, sources=(GOOD,)), **change)
    with pytest.raises(ConfigError) as error:
        props.validate()
    assert str(error.value) == message
    assert "\n" not in message


def test_the_pinned_constants_are_valid() -> None:
    PinnedCrdsProps(cluster=CLUSTER, sources=ALL_CRDS).validate()


def test_a_construct_error_names_the_construct() -> None:
    stack = cdk.Stack(cdk.App(), "Errors")
    with pytest.raises(ConfigError) as error:
        PinnedCrds(stack, "Crds", PinnedCrdsProps(cluster=CLUSTER, sources=()))
    assert str(error.value) == "Errors/Crds: sources: () is not allowed; list at least one CrdSource [LLMEKS-E309]"


# -- the pins against the byte-exact upstream copies in tests/fixtures/upstream ----------------------------------


@pytest.mark.parametrize("source", ALL_CRDS, ids=lambda s: s.name)
def test_pinned_sha256_matches_the_upstream_file(source: CrdSource) -> None:
    path = CRDS / source.url.rsplit("/", 1)[1]
    data = path.read_bytes()
    assert sha(data) == source.sha256, path
    # The handler's own checks accept the real file, and the file is the release versions.py names.
    handler.check_crd_text(source.name, source.url, data)
    group = source.name.split(".", 1)[1]
    version = GAIE_VERSION if group == "inference.networking.k8s.io" else GATEWAY_API_VERSION
    assert f"    {group}/bundle-version: {version}\n" in data.decode()


def test_every_pin_is_below_the_download_cap() -> None:
    sizes = {s.name: (CRDS / s.url.rsplit("/", 1)[1]).stat().st_size for s in ALL_CRDS}
    assert max(sizes.values()) < handler.MAX_BYTES / 4, sizes


def test_the_vendored_sources_name_the_pinned_commits() -> None:
    """The URL each pin downloads is the repository, commit and path SOURCES.md records for the vendored copy."""
    rows = sources()
    for source, commit, tag in (
        *((s, GATEWAY_API_COMMIT, GATEWAY_API_VERSION) for s in GATEWAY_API_CRDS),
        (INFERENCE_POOL_CRD, GAIE_COMMIT, GAIE_VERSION),
    ):
        row = rows[f"crds/{source.url.rsplit('/', 1)[1]}"]
        assert (row.commit, row.release) == (commit, tag)
        assert source.url == f"https://raw.githubusercontent.com/{row.repository}/{commit}/{row.path}"
