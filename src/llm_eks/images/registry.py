"""Resolve an image tag to its digest through the OCI Distribution API, anonymously.

The flow (OCI distribution-spec "Pulling manifests", Docker's token authentication spec):
1. `GET https://<host>/v2/<name>/manifests/<tag>` with an Accept header listing the OCI image index, the Docker
   manifest list and both single-image manifest types, so a multi-arch image answers with its index.
2. A `401` carries `WWW-Authenticate: Bearer realm="...",service="...",scope="..."`: fetch an anonymous pull token
   from the realm (`?service=...&scope=...`; JSON `token` or `access_token`) and repeat the GET with
   `Authorization: Bearer <token>`. The header is read as RFC 9110 section 11.6.1 defines it: it may hold several
   challenges (`Basic realm="quay.io", Bearer realm="https://quay.io/v2/auth",service="quay.io"`) and come in
   several header lines (joined with ", ", RFC 9110 section 5.3), and parameter values are quoted strings or bare
   tokens (gcr.io sends `service=gcr.io` unquoted); the Bearer challenge is used wherever it is. A missing or empty
   `service` or `scope` (`scope=""`, reported of nvcr.io) is left out or, for the scope, replaced by
   `repository:<name>:pull`, the scope a pull needs.
3. The digest is `sha256` of the response body, exactly as served. `Docker-Content-Digest`, when present, must
   equal it; anything else is an error, never a guess.

GET rather than HEAD: HEAD returns the header only, and the point is to verify it against the bytes.

Why stdlib urllib and not a library: `oras` (0.2.43) is the maintained Python OCI client, but its `get_manifest`
returns the parsed JSON only (neither the raw bytes nor the digest header survive, so the digest cannot be
verified), and it pulls in requests and jsonschema for what is two HTTP GETs. The transport is injectable, so
tests replay recorded registry responses and never touch the network.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from llm_eks.error_codes import E701, E702
from llm_eks.errors import CodedError
from llm_eks.images.reference import ImageRef, is_digest, parse_ref

ACCEPT = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
# Enough for a slow registry; a lock run should fail fast when one is unreachable.
TIMEOUT_SECONDS = 15.0
# RFC 9110 section 11: challenge = auth-scheme [ 1*SP ( token68 / #auth-param ) ], auth-param = token BWS "=" BWS
# ( token / quoted-string ); challenges and params are separated by commas.
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_SEPARATORS = re.compile(r"[\s,]*")
_AUTH_PARAM = re.compile(rf"({_TOKEN})[ \t]*=[ \t]*({_TOKEN}|{_QUOTED})[ \t]*(?=,|$)")
_AUTH_SCHEME = re.compile(rf"({_TOKEN})(?=[ \t]|,|$)[ \t]*")
_TOKEN68 = re.compile(r"[A-Za-z0-9._~+/-]+=*[ \t]*(?=,|$)")


@dataclass(frozen=True)
class HttpResponse:
    status: int
    # Header names lower-cased.
    headers: Mapping[str, str]
    body: bytes


# (method, url, request headers) -> response. Raises RegistryUnreachable when there is no HTTP answer at all.
Transport = Callable[[str, str, Mapping[str, str]], HttpResponse]


class RegistryError(CodedError):
    """The registry answered, but not with a manifest we can trust."""


class RegistryUnreachable(RegistryError):
    """No HTTP answer (DNS, connection, TLS, timeout): every image on that host fails the same way."""


@dataclass(frozen=True)
class Resolved:
    digest: str
    # The manifest URL the digest was read from (goes into the lock entry's `source`).
    source: str
    media_type: str


def urllib_transport(method: str, url: str, headers: Mapping[str, str]) -> HttpResponse:
    """The real network, through urllib; HTTP error statuses come back as responses, not exceptions."""
    request = urllib.request.Request(url, method=method, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as answer:
            return HttpResponse(answer.status, _lower(answer.headers.items()), answer.read())
    except urllib.error.HTTPError as err:
        return HttpResponse(err.code, _lower(err.headers.items()), err.read())
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise RegistryUnreachable(E702, f"{urllib.parse.urlsplit(url).hostname} unreachable ({reason})") from None


def resolve(image: str, transport: Transport = urllib_transport) -> Resolved:
    """The digest `image`'s tag points at now, verified against the manifest bytes; RegistryError (a message
    without the image's name: the caller prefixes it) when it cannot be read or verified."""
    ref = parse_ref(image)
    url = ref.manifest_url()
    headers = {"Accept": ", ".join(ACCEPT)}
    answer = transport("GET", url, headers)
    if answer.status == 401:
        token = _anonymous_token(ref, answer.headers.get("www-authenticate", ""), transport)
        answer = transport("GET", url, {**headers, "Authorization": f"Bearer {token}"})
    if answer.status == 404:
        raise RegistryError(E701, f"not found at {url} (HTTP 404)")
    if answer.status != 200:
        raise RegistryError(E701, f"{url} answered HTTP {answer.status}")
    media_type = answer.headers.get("content-type", "").split(";")[0].strip()
    if media_type not in ACCEPT:
        raise RegistryError(E701, f"{url} served {media_type or 'no content type'}, not an OCI/Docker v2 manifest")
    digest = "sha256:" + hashlib.sha256(answer.body).hexdigest()
    claimed = answer.headers.get("docker-content-digest")
    if claimed is not None and claimed != digest:
        raise RegistryError(E701, f"Docker-Content-Digest {claimed} does not match the body's {digest}")
    try:
        body = json.loads(answer.body)
    except ValueError:
        raise RegistryError(E701, f"{url} served a manifest that is not JSON") from None
    if not isinstance(body, dict) or body.get("schemaVersion") != 2:
        raise RegistryError(E701, f"{url} served a manifest without schemaVersion 2")
    assert is_digest(digest)
    return Resolved(digest=digest, source=url, media_type=media_type)


def challenges(header: str) -> list[tuple[str, dict[str, str]]]:
    """The challenges of a WWW-Authenticate value, in order: (scheme lower-cased, {param lower-cased: value}), quoted
    values unescaped. A token68 challenge (`Negotiate abc==`) has no params; parsing stops at the first text that
    is neither a scheme nor a param, keeping the challenges before it."""
    found: list[tuple[str, dict[str, str]]] = []
    pos = _skip_separators(header, 0)
    while pos < len(header):
        param = _AUTH_PARAM.match(header, pos) if found else None
        if param is not None:
            name, value = param.groups()
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            found[-1][1].setdefault(name.lower(), value)
            pos = param.end()
        elif scheme := _AUTH_SCHEME.match(header, pos):
            found.append((scheme.group(1).lower(), {}))
            pos = scheme.end()
            if token68 := _TOKEN68.match(header, pos):
                pos = token68.end()
        else:
            break
        pos = _skip_separators(header, pos)
    return found


def _skip_separators(header: str, pos: int) -> int:
    separators = _SEPARATORS.match(header, pos)
    return separators.end() if separators else pos


def _anonymous_token(ref: ImageRef, challenge: str, transport: Transport) -> str:
    bearer = next((params for scheme, params in challenges(challenge) if scheme == "bearer"), None)
    realm = (bearer or {}).get("realm", "")
    if bearer is None or not realm.startswith("https://"):
        raise RegistryError(
            E701,
            f"{ref.api_host} wants {challenge or 'credentials'!r}; only anonymous bearer tokens from an https realm "
            "are supported",
        )
    # An empty value is no value: `scope=""` would ask for a token that may pull nothing.
    query = {key: bearer[key] for key in ("service", "scope") if bearer.get(key)}
    query.setdefault("scope", f"repository:{ref.repository}:pull")
    url = f"{realm}{'&' if '?' in realm else '?'}{urllib.parse.urlencode(query)}"
    answer = transport("GET", url, {"Accept": "application/json"})
    if answer.status != 200:
        raise RegistryError(E701, f"token endpoint {realm} answered HTTP {answer.status}")
    try:
        body = json.loads(answer.body)
    except ValueError:
        body = None
    token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
    if not isinstance(token, str) or not token:
        raise RegistryError(E701, f"token endpoint {realm} returned no token")
    return token


def _lower(items: Iterable[tuple[object, object]]) -> dict[str, str]:
    """Header names lower-cased; a header sent on several lines becomes one value joined with ", " (RFC 9110
    section 5.3), so a second WWW-Authenticate line is kept rather than overwritten."""
    headers: dict[str, str] = {}
    for key, value in items:
        name = str(key).lower()
        headers[name] = f"{headers[name]}, {value}" if name in headers else str(value)
    return headers
