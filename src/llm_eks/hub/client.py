"""Read a model's config and exact checkpoint size from the Hugging Face Hub, for `llm-eks models add`.

The requests (Hub API docs, https://huggingface.co/docs/hub/api, and huggingface_hub's HfApi, which these mirror):
1. `GET {endpoint}/api/models/{id}/revision/{revision}?blobs=true`: the commit the revision points at (`sha`) and
   the repository's files (`siblings`, each with its `size` when `blobs` is set; HfApi.model_info(files_metadata=
   True) sends the same parameter).
2. `GET {endpoint}/{id}/resolve/{commit}/config.json`, then `model.safetensors.index.json` (its `metadata.total_size`
   is the bytes of every stored tensor) and any quantization config kept beside config.json. Pinned to the commit
   from step 1, so every file comes from the same snapshot.
3. A single-file checkpoint has no index: its first 8 bytes (a Range request) give the safetensors header length,
   and the tensors are the file's size minus those 8 bytes and the header (the safetensors format,
   https://huggingface.co/docs/safetensors/index#format).

`HF_ENDPOINT` replaces https://huggingface.co as huggingface_hub's does (its constants.ENDPOINT), so a mirror, a
proxy or a test server can stand in. `HF_TOKEN` is sent as a bearer token, and only to the Hub's own host: a
redirect to another host (the CDN that serves large files) goes without it. Errors are one line (HubError), never
a traceback. The transport is injectable; tests serve recorded responses from a local server.
"""

from __future__ import annotations

import json
import os
import struct
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llm_eks.error_codes import E705, E706, E707
from llm_eks.errors import CodedError
from llm_eks.hub.records import QUANTIZATION_FILES, TOTAL_SIZE_FROM, ModelRecord, recorded_config

DEFAULT_ENDPOINT = "https://huggingface.co"
# Enough for the Hub's API; `models add` should fail fast when the Hub cannot be reached.
TIMEOUT_SECONDS = 20.0
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
# A config.json is a few kB; anything this large is not one (and is not read into memory whole).
MAX_JSON_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class HttpResponse:
    status: int
    # Header names lower-cased.
    headers: Mapping[str, str]
    body: bytes


# (url, request headers) -> response for a GET. Raises HubUnreachable when there is no HTTP answer at all.
Transport = Callable[[str, Mapping[str, str]], HttpResponse]


class HubError(CodedError):
    """The Hub answered, but not with what `models add` needs; the message is one line."""


class HubUnreachable(HubError):
    """No HTTP answer: DNS, connection refused, TLS, timeout."""


def endpoint() -> str:
    """The Hub's base URL: HF_ENDPOINT when set (as huggingface_hub reads it), else https://huggingface.co."""
    base = (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
    parts = urllib.parse.urlsplit(base)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise HubError(E707, f"HF_ENDPOINT: {base!r} is not allowed; must be a URL such as https://huggingface.co")
    return base


class _SameHostAuthRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but never carry the Authorization header to another host."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc:
            new.headers.pop("Authorization", None)
        return new


def urllib_transport(url: str, headers: Mapping[str, str]) -> HttpResponse:
    """The real network, through urllib; HTTP error statuses come back as responses, not exceptions."""
    opener = urllib.request.build_opener(_SameHostAuthRedirects)
    request = urllib.request.Request(url, headers=dict(headers))
    try:
        with opener.open(request, timeout=TIMEOUT_SECONDS) as answer:
            return HttpResponse(answer.status, _lower(answer.headers.items()), answer.read(MAX_JSON_BYTES + 1))
    except urllib.error.HTTPError as err:
        return HttpResponse(err.code, _lower(err.headers.items()), err.read(MAX_JSON_BYTES + 1))
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        host = urllib.parse.urlsplit(url).netloc
        raise HubUnreachable(
            E705,
            f"{host} unreachable ({reason}); `llm-eks models add` needs the Hugging Face Hub (or a mirror in "
            "HF_ENDPOINT); synth and `llm-eks plan` then read the recorded file offline",
        ) from None


class HubClient:
    """GETs against one Hub endpoint with the user's token."""

    def __init__(self, base: str, token: str | None, transport: Transport) -> None:
        self.base = base
        self.token = token
        self.transport = transport

    def get(self, url: str, model_id: str, extra: Mapping[str, str] | None = None) -> HttpResponse:
        headers = {"Accept": "application/json", "User-Agent": "llm-eks"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        answer = self.transport(url, {**headers, **(extra or {})})
        if answer.status in (200, 206):
            return answer
        raise HubError(E706, self._refusal(answer, url, model_id))

    def _refusal(self, answer: HttpResponse, url: str, model_id: str) -> str:
        """One line for a refused request; the Hub names the reason in X-Error-Code (huggingface_hub's
        hf_raise_for_status reads the same header: GatedRepo, RepoNotFound, RevisionNotFound, EntryNotFound)."""
        code = answer.headers.get("x-error-code", "")
        page = f"{self.base}/{model_id}"
        if code == "GatedRepo" or (answer.status == 403 and "/resolve/" in url):
            held = "the token in HF_TOKEN has no access" if self.token else "HF_TOKEN is not set"
            return (
                f"{model_id} is a gated model and {held} (HTTP {answer.status}): accept the model's licence at "
                f"{page} with your Hugging Face account, then set HF_TOKEN to a read token of that account"
            )
        if code == "RevisionNotFound":
            return f"{model_id}: revision not found on {self.base} (HTTP {answer.status}); give a branch, tag or commit"
        if code == "RepoNotFound" or (answer.status in (401, 404) and "/api/models/" in url):
            hint = "check the id" if self.token else "check the id; a private model needs HF_TOKEN"
            return f"{model_id}: no such model on {self.base} (HTTP {answer.status}); {hint}"
        if code == "EntryNotFound" or answer.status == 404:
            return f"{url}: not found (HTTP 404)"
        if answer.status == 401:
            return (
                f"{url}: HTTP 401; set HF_TOKEN to a read token of an account that accepted {model_id}'s licence at "
                f"{page}"
            )
        return f"{url} answered HTTP {answer.status}"

    def json(self, url: str, model_id: str) -> Any:
        answer = self.get(url, model_id)
        if len(answer.body) > MAX_JSON_BYTES:
            raise HubError(E706, f"{url}: larger than {MAX_JSON_BYTES // 2**20} MiB, not a JSON config")
        try:
            return json.loads(answer.body)
        except ValueError:
            raise HubError(E706, f"{url}: not JSON") from None


def fetch_record(
    model_id: str,
    revision: str,
    fetched_at: str,
    *,
    transport: Transport = urllib_transport,
    token: str | None = None,
) -> ModelRecord:
    """config.json, the exact weight bytes and the quantization config of `model_id` at `revision`, as the record
    `llm-eks models add` writes (`fetched_at`: the UTC time stamp it carries)."""
    base = endpoint()
    hub = HubClient(base, token, transport)
    info_url = f"{base}/api/models/{model_id}/revision/{urllib.parse.quote(revision, safe='')}?blobs=true"
    info = hub.json(info_url, model_id)
    commit = info.get("sha") if isinstance(info, Mapping) else None
    siblings = info.get("siblings") if isinstance(info, Mapping) else None
    if not isinstance(commit, str) or not isinstance(siblings, list):
        raise HubError(
            E706, f"{info_url}: the answer has no commit sha and file list; is HF_ENDPOINT a Hugging Face Hub?"
        )
    files = {s["rfilename"]: s for s in siblings if isinstance(s, Mapping) and isinstance(s.get("rfilename"), str)}

    def file_url(name: str) -> str:
        return f"{base}/{model_id}/resolve/{commit}/{name}"

    sources = {"model_info": info_url}
    if "config.json" not in files:
        raise HubError(E706, f"{model_id}@{commit} has no config.json; llm-eks sizes transformers-format models")
    config = hub.json(file_url("config.json"), model_id)
    if not isinstance(config, Mapping):
        raise HubError(E706, f"{file_url('config.json')}: not a JSON object")
    sources["config.json"] = file_url("config.json")

    quantization = None
    for name in QUANTIZATION_FILES:
        if name in files:
            content = hub.json(file_url(name), model_id)
            if not isinstance(content, Mapping):
                raise HubError(E706, f"{file_url(name)}: not a JSON object")
            quantization, sources[name] = (name, content), file_url(name)
            break

    total_parameters = None
    if INDEX_FILE in files:
        index = hub.json(file_url(INDEX_FILE), model_id)
        metadata = index.get("metadata") if isinstance(index, Mapping) else None
        total = metadata.get("total_size") if isinstance(metadata, Mapping) else None
        if isinstance(total, float) and total.is_integer():  # some hand-written indexes store 1.6e10-style floats
            total = int(total)
        if isinstance(total, bool) or not isinstance(total, int) or total < 1:
            raise HubError(E706, f"{file_url(INDEX_FILE)}: metadata.total_size is {total!r}, not a number of bytes")
        counted = metadata.get("total_parameters") if isinstance(metadata, Mapping) else None
        if isinstance(counted, int) and not isinstance(counted, bool) and counted > 0:
            total_parameters = counted
        total_size, total_from = total, TOTAL_SIZE_FROM[0]
        sources[INDEX_FILE] = file_url(INDEX_FILE)
    elif SINGLE_FILE in files:
        total_size, total_from = _single_file_tensor_bytes(hub, files[SINGLE_FILE], file_url(SINGLE_FILE), model_id)
        sources[SINGLE_FILE] = file_url(SINGLE_FILE)
    else:
        raise HubError(
            E706,
            f"{model_id}@{commit} has neither {INDEX_FILE} nor {SINGLE_FILE}; llm-eks records safetensors "
            "checkpoints only (their sizes are exact without downloading the weights)",
        )
    return ModelRecord(
        id=model_id,
        revision=revision,
        commit=commit,
        fetched_at=fetched_at,
        config=recorded_config(config),
        total_size=total_size,
        total_size_from=total_from,
        total_parameters=total_parameters,
        quantization_file=quantization,
        sources=sources,
    )


def _single_file_tensor_bytes(hub: HubClient, sibling: Mapping[str, Any], url: str, model_id: str) -> tuple[int, str]:
    """Bytes of the tensors in a single model.safetensors: its size (from the file list) minus the 8-byte header
    length and the header itself (read with a Range request for the first 8 bytes)."""
    lfs = sibling.get("lfs")
    size = sibling.get("size") if sibling.get("size") is not None else (lfs or {}).get("size")
    if isinstance(size, bool) or not isinstance(size, int) or size <= 8:
        raise HubError(E706, f"{model_id}: the file list gives no size for {SINGLE_FILE}")
    head = hub.get(url, model_id, {"Range": "bytes=0-7", "Accept": "*/*"}).body[:8]
    if len(head) != 8:
        raise HubError(E706, f"{url}: fewer than 8 bytes; not a safetensors file")
    (header,) = struct.unpack("<Q", head)
    if not 2 <= header < size - 8:
        raise HubError(
            E706, f"{url}: header length {header} does not fit a file of {size} bytes; not a safetensors file"
        )
    return size - 8 - header, TOTAL_SIZE_FROM[1]


def _lower(items: Any) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in items}
