"""Weights staging: the stage and wait scripts run for real against moto's S3 and a loopback Hugging Face Hub (the
few endpoints huggingface_hub calls: model_info with files metadata, and HEAD/GET of /resolve/), then the Kubernetes
objects and the serving pod's init container."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_eks.errors import ConfigError
from llm_eks.manifests.pods import HF_TOKEN_PATH, secret_provider_class_name
from llm_eks.manifests.vllm import probe_timing
from llm_eks.manifests.vllm.pod import serving_pod_spec
from llm_eks.manifests.weights_staging import (
    BUCKET_CONFIG_MAP,
    BUCKET_ENV,
    BUCKET_KEY,
    MARKER,
    MARKERS,
    STAGING_KEY_LABEL,
    WeightsStagingProps,
    bucket_env,
    in_progress_key,
    marker_key,
    s3_model_uri,
    stage_script,
    staging_job_name,
    staging_key,
    staging_objects,
    validate_weights_staging_props,
    wait_for_weights_init_container,
    wait_script,
)
from llm_eks.manifests.weights_staging import stage as stage_module
from llm_eks.manifests.weights_staging import wait as wait_module
from llm_eks.manifests.weights_staging.objects import SCRATCH_DIR, stage_args
from llm_eks.versions import VLLM_IMAGE
from tests.coded import raises_code
from tests.kube_schema import assert_valid
from tests.moto_s3 import emptied, module_s3
from tests.test_vllm_chart import base_props

moto = pytest.importorskip("moto")
pytest.importorskip("huggingface_hub")

BUCKET = "llm-eks-weights-test"
REPO = "acme/tiny-llm"
PREFIX = "models/acme/tiny-llm/main/"
COMMIT_1 = "1" * 40
COMMIT_2 = "2" * 40
MIB = 1024 * 1024
PACKAGE_DIR = Path(stage_module.__file__).parent
PROPS = WeightsStagingProps(
    name="stage-tiny-llm",
    namespace="inference",
    repo_id=REPO,
    prefix=PREFIX,
    hf_token_secret="llm-eks/dev/hf-token",
    aws_region="eu-west-1",
)


# --- A loopback Hugging Face Hub ---------------------------------------------------------------------------------


def git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclasses.dataclass
class Commit:
    files: dict[str, bytes]
    # Files stored with Git LFS (the Hub lists their sha256).
    lfs: set[str]


def commit_1() -> Commit:
    files = {
        "config.json": b'{"architectures": ["LlamaForCausalLM"]}\n',
        "generation_config.json": b'{"do_sample": true}\n',
        "tokenizer.json": b'{"model": {"type": "BPE"}}\n',
        "tokenizer_config.json": b'{"model_max_length": 8192}\n',
        "chat_template.jinja": b"{{ messages }}\n",
        "model.safetensors.index.json": b'{"weight_map": {"a": "model-00001-of-00002.safetensors"}}\n',
        # Above the (patched) 5 MiB multipart threshold: uploaded in parts.
        "model-00001-of-00002.safetensors": bytes(range(256)) * (6 * MIB // 256),
        "model-00002-of-00002.safetensors": b"\x01" * 4096,
        # Not staged: not matched, or a duplicate the ignore patterns drop.
        "README.md": b"# tiny\n",
        "pytorch_model.bin": b"\x02" * 1024,
        "original/params.json": b"{}\n",
        "original/consolidated.00.pth": b"\x03" * 1024,
        "consolidated.safetensors": b"\x04" * 2048,
    }
    lfs = {n for n in files if n.endswith((".safetensors", ".bin", ".pth"))}
    return Commit(files, lfs)


STAGED_1 = sorted(
    [
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
)


class FakeHub:
    """Repo REPO: revision "main" and commit ids resolve to commits; every request is recorded."""

    def __init__(self) -> None:
        self.commits: dict[str, Commit] = {}
        self.branches: dict[str, str] = {}
        self.requests: list[tuple[str, str]] = []
        # name -> bytes served instead of the listed content (a corrupted transfer).
        self.corrupt: dict[str, bytes] = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self) -> None:
        self.commits = {COMMIT_1: commit_1()}
        self.branches = {"main": COMMIT_1}
        self.requests = []
        self.corrupt = {}

    def downloads(self) -> list[str]:
        """Files fetched with GET /resolve/ since the last clear."""
        return sorted(
            path.split("/resolve/", 1)[1].split("/", 1)[1]
            for m, path in self.requests
            if m == "GET" and "/resolve/" in path
        )

    def resolve(self, revision: str) -> str | None:
        revision = self.branches.get(revision, revision)
        return revision if revision in self.commits else None

    def model_info(self, revision: str) -> dict[str, Any] | None:
        sha = self.resolve(revision)
        if sha is None:
            return None
        c = self.commits[sha]
        siblings = []
        for name, data in sorted(c.files.items()):
            sibling: dict[str, Any] = {"rfilename": name, "size": len(data)}
            if name in c.lfs:
                pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256(data)}\nsize {len(data)}\n"
                sibling["blobId"] = git_oid(pointer.encode())
                sibling["lfs"] = {"size": len(data), "sha256": sha256(data), "pointerSize": len(pointer)}
            else:
                sibling["blobId"] = git_oid(data)
            siblings.append(sibling)
        return {"id": REPO, "modelId": REPO, "sha": sha, "private": False, "siblings": siblings}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def send(self, status: int, body: bytes, headers: dict[str, str], with_body: bool = True) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if with_body:
                    self.wfile.write(body)

            def not_found(self, code: str, with_body: bool = True) -> None:
                body = json.dumps({"error": code}).encode()
                self.send(404, body, {"X-Error-Code": code, "Content-Type": "application/json"}, with_body)

            def route(self, with_body: bool) -> None:
                path = urllib.parse.urlsplit(self.path).path
                hub.requests.append((self.command, path))
                api = f"/api/models/{REPO}/revision/"
                resolve = f"/{REPO}/resolve/"
                if path.startswith(api):
                    info = hub.model_info(urllib.parse.unquote(path[len(api) :]))
                    if info is None:
                        return self.not_found("RevisionNotFound", with_body)
                    return self.send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, with_body)
                if path.startswith(resolve):
                    revision, _, name = urllib.parse.unquote(path[len(resolve) :]).partition("/")
                    sha = hub.resolve(revision)
                    if sha is None:
                        return self.not_found("RevisionNotFound", with_body)
                    c = hub.commits[sha]
                    if name not in c.files:
                        return self.not_found("EntryNotFound", with_body)
                    data = c.files[name]
                    etag = sha256(data) if name in c.lfs else git_oid(data)
                    headers = {"X-Repo-Commit": sha, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
                    if name in c.lfs:
                        headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(data))})
                    body = hub.corrupt.get(name, data)
                    status = 200
                    ranged = self.headers.get("Range")
                    if ranged and ranged.startswith("bytes="):
                        start = int(ranged[len("bytes=") :].split("-")[0])
                        headers["Content-Range"] = f"bytes {start}-{len(body) - 1}/{len(body)}"
                        body, status = body[start:], 206
                    return self.send(status, body, headers, with_body)
                self.not_found("RepoNotFound", with_body)

            def do_GET(self) -> None:
                self.route(with_body=True)

            def do_HEAD(self) -> None:
                self.route(with_body=False)

        return Handler


@pytest.fixture(scope="module")
def fake_hub() -> Iterator[FakeHub]:
    hub = FakeHub()
    yield hub
    hub.server.shutdown()
    hub.server.server_close()


@pytest.fixture
def hub(fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    fake_hub.reset()
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.url)
    return fake_hub


s3_module = module_s3(BUCKET)


@pytest.fixture
def s3(s3_module: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """moto's S3 (the whole boto3 stack in-process) holding an empty weights bucket."""
    # A 6 MiB shard goes up in parts (S3's smallest part is 5 MiB).
    monkeypatch.setattr(stage_module, "MIN_PART_BYTES", 5 * MIB)
    return emptied(s3_module, BUCKET)


def job_args(props: WeightsStagingProps, scratch: Path) -> list[str]:
    """The arguments the Job passes to stage.py, with the bucket variable and scratch folder filled in."""
    args = [a.replace(f"$({BUCKET_ENV})", BUCKET) for a in stage_args(props)[1:]]
    return [str(scratch) if a == SCRATCH_DIR else a for a in args]


def run_stage(tmp_path: Path, props: WeightsStagingProps = PROPS) -> int:
    return stage_module.main(job_args(props, tmp_path / "scratch"))


def objects(s3: Any) -> dict[str, dict[str, Any]]:
    """Every object in the bucket: key -> its HEAD response."""
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    return {k: s3.head_object(Bucket=BUCKET, Key=k) for k in keys}


def marker(s3: Any, props: WeightsStagingProps = PROPS) -> dict[str, Any]:
    """The marker of `props`' staging key (one per key, outside the prefix)."""
    body = s3.get_object(Bucket=BUCKET, Key=marker_key(props.prefix, staging_key(props)))["Body"].read()
    data: dict[str, Any] = json.loads(body)
    return data


def markers(s3: Any) -> dict[str, dict[str, Any]]:
    """Every object under staging-markers/: key -> HEAD."""
    return {k: h for k, h in objects(s3).items() if k.startswith(MARKERS)}


# --- stage.py --------------------------------------------------------------------------------------------------


def test_first_run_uploads_every_allowed_file_with_its_hashes_and_writes_the_marker(
    hub: FakeHub, s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_stage(tmp_path) == 0
    files = commit_1().files
    found = objects(s3)
    key = staging_key(PROPS)
    # The files under the prefix; the key's marker and its in-progress record outside it (never under the prefix,
    # where vLLM's S3 loader pulls every non-weight object).
    assert sorted(found) == sorted(
        [PREFIX + n for n in STAGED_1] + [marker_key(PREFIX, key), in_progress_key(PREFIX, key)]
    )
    assert marker_key(PREFIX, key) == f"staging-markers/{PREFIX}{key}.json"
    for name in STAGED_1:
        head = found[PREFIX + name]
        assert head["ContentLength"] == len(files[name])
        assert head["Metadata"]["sha256"] == sha256(files[name])
        assert head["Metadata"]["commit"] == COMMIT_1
        assert head["Metadata"]["repo"] == REPO
        assert head["Metadata"]["prefix"] == PREFIX
        body = s3.get_object(Bucket=BUCKET, Key=PREFIX + name)["Body"].read()
        assert body == files[name]
    # The 6 MiB shard went up in two parts (a multipart ETag ends in -<parts>).
    assert found[PREFIX + "model-00001-of-00002.safetensors"]["ETag"].strip('"').endswith("-2")
    assert marker(s3) == {
        "key": staging_key(PROPS),
        "repo_id": REPO,
        "revision": "main",
        "commit": COMMIT_1,
        "files": [{"name": n, "size": len(files[n]), "sha256": sha256(files[n])} for n in STAGED_1],
    }
    assert hub.downloads() == STAGED_1
    out = capsys.readouterr().out
    assert f"stage: {REPO}@main is commit {COMMIT_1}: 8 files" in out
    assert f"8 uploaded, 0 already present; marker staging-markers/{PREFIX}{key}.json written" in out
    # Nothing is left on the scratch volume but huggingface_hub's bookkeeping.
    assert not [p for p in (tmp_path / "scratch").rglob("*") if p.is_file() and ".cache" not in p.parts]


def test_a_second_run_uploads_nothing(
    hub: FakeHub, s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_stage(tmp_path) == 0
    before = {k: h["LastModified"] for k, h in objects(s3).items() if not k.endswith(".in-progress")}
    hub.requests.clear()
    capsys.readouterr()
    assert run_stage(tmp_path) == 0
    assert hub.downloads() == []
    # The marker too is untouched: written once, never replaced.
    assert {k: h["LastModified"] for k, h in objects(s3).items() if not k.endswith(".in-progress")} == before
    assert "0 uploaded, 8 already present; marker " in capsys.readouterr().out
    assert marker(s3)["key"] == staging_key(PROPS)


def test_a_run_after_an_object_was_deleted_restages_only_that_file(hub: FakeHub, s3: Any, tmp_path: Path) -> None:
    assert run_stage(tmp_path) == 0
    s3.delete_object(Bucket=BUCKET, Key=PREFIX + "model-00002-of-00002.safetensors")
    hub.requests.clear()
    assert run_stage(tmp_path) == 0
    assert hub.downloads() == ["model-00002-of-00002.safetensors"]
    assert PREFIX + "model-00002-of-00002.safetensors" in objects(s3)


def test_an_object_of_the_wrong_size_or_hash_is_replaced(hub: FakeHub, s3: Any, tmp_path: Path) -> None:
    assert run_stage(tmp_path) == 0
    shard = "model-00002-of-00002.safetensors"
    s3.put_object(Bucket=BUCKET, Key=PREFIX + shard, Body=b"truncated", Metadata={"sha256": sha256(b"\x01" * 4096)})
    # Right size, wrong hash (e.g. a copy from another revision).
    s3.put_object(Bucket=BUCKET, Key=PREFIX + "config.json", Body=b"x" * len(commit_1().files["config.json"]))
    hub.requests.clear()
    assert run_stage(tmp_path) == 0
    assert hub.downloads() == ["config.json", shard]
    assert s3.get_object(Bucket=BUCKET, Key=PREFIX + shard)["Body"].read() == b"\x01" * 4096
    assert s3.get_object(Bucket=BUCKET, Key=PREFIX + "config.json")["Body"].read() == commit_1().files["config.json"]


def commit_2(drop: str | None = None) -> Commit:
    """Commit 1 with a changed config.json (and without `drop`)."""
    new = commit_1()
    new.files["config.json"] = b'{"architectures": ["LlamaForCausalLM"], "rope_theta": 500000.0}\n'
    if drop is not None:
        del new.files[drop]
    return new


def test_a_new_revision_at_the_same_prefix_restages_only_changed_files(hub: FakeHub, s3: Any, tmp_path: Path) -> None:
    assert run_stage(tmp_path) == 0
    # Not written by this repo's staging to this prefix: none of the script's business.
    s3.put_object(Bucket=BUCKET, Key=PREFIX + "notes.txt", Body=b"mine", Metadata={"repo": "someone/else"})
    nested = PREFIX + "v2/model.safetensors"
    s3.put_object(Bucket=BUCKET, Key=nested, Body=b"v2", Metadata={"repo": REPO, "prefix": PREFIX + "v2/"})
    hub.commits[COMMIT_2] = commit_2()
    props = dataclasses.replace(PROPS, revision=COMMIT_2)
    assert staging_key(props) != staging_key(PROPS)
    hub.requests.clear()
    # The first staging's marker is gone (a revision that moved would replace files its pods stream: refused
    # below); with it gone the prefix is the new commit's.
    s3.delete_object(Bucket=BUCKET, Key=marker_key(PREFIX, staging_key(PROPS)))
    assert run_stage(tmp_path, props) == 0
    assert hub.downloads() == ["config.json"]
    assert {PREFIX + "notes.txt", nested} <= set(objects(s3))
    assert (marker(s3, props)["key"], marker(s3, props)["commit"]) == (staging_key(props), COMMIT_2)
    assert s3.head_object(Bucket=BUCKET, Key=PREFIX + "config.json")["Metadata"]["commit"] == COMMIT_2


def test_files_an_earlier_staging_left_fail_the_run_before_anything_changes(
    hub: FakeHub, s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Job may not delete (add-only), and the streamer would load a stale shard with the new ones."""
    assert run_stage(tmp_path) == 0
    hub.commits[COMMIT_2] = commit_2(drop="model-00002-of-00002.safetensors")
    hub.requests.clear()
    capsys.readouterr()
    assert run_stage(tmp_path, dataclasses.replace(PROPS, revision=COMMIT_2)) == 1
    assert capsys.readouterr().err == (
        f"stage: failed: s3://{BUCKET}/{PREFIX} holds 1 files of an earlier staging that commit {COMMIT_2} lacks "
        "(model-00002-of-00002.safetensors) and the streamer would load them too: stage to a new prefix, or delete "
        "them\n"
    )
    assert hub.downloads() == []
    assert marker(s3)["key"] == staging_key(PROPS)  # the old model's pods still start


def test_a_new_key_stages_beside_the_running_one_whose_pods_keep_starting(
    hub: FakeHub, s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new staging key for the same files (a vLLM bump, a locked image digest) writes a marker of its own; the
    running key's marker never changes, so its pods start at once during the new staging, even when it fails."""
    assert run_stage(tmp_path) == 0
    old = marker(s3)
    props = dataclasses.replace(PROPS, image=f"{VLLM_IMAGE}@sha256:{'a' * 64}")
    assert staging_key(props) != staging_key(PROPS)
    # The new run has a file to fetch again, and the download is corrupt: it fails half way.
    s3.delete_object(Bucket=BUCKET, Key=PREFIX + "model-00002-of-00002.safetensors")
    hub.corrupt["model-00002-of-00002.safetensors"] = b"\x09" * 4096
    assert run_stage(tmp_path, props) == 1
    assert marker(s3) == old
    assert marker_key(PREFIX, staging_key(props)) not in objects(s3)
    assert wait_module.wait(s3, BUCKET, PREFIX, staging_key(PROPS), poll_seconds=0.01, timeout_seconds=0.01)
    hub.corrupt.clear()
    assert run_stage(tmp_path, props) == 0
    assert (marker(s3), marker(s3, props)["key"]) == (old, staging_key(props))
    for key in (staging_key(PROPS), staging_key(props)):
        assert wait_module.wait(s3, BUCKET, PREFIX, key, poll_seconds=0.01, timeout_seconds=0.01)


def test_a_moved_revision_that_would_replace_a_running_keys_files_fails_before_anything_changes(
    hub: FakeHub, s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`main` moved (revisions by name): staging it to the same prefix would overwrite files the running key's
    pods stream; it fails with one line instead, and the running key's marker and files stay."""
    assert run_stage(tmp_path) == 0
    hub.commits[COMMIT_2] = commit_2()
    props = dataclasses.replace(PROPS, revision=COMMIT_2)
    hub.requests.clear()
    capsys.readouterr()
    assert run_stage(tmp_path, props) == 1
    assert capsys.readouterr().err == (
        f"stage: failed: commit {COMMIT_2} changes 1 files that another staging key still lists under "
        f"s3://{BUCKET}/{PREFIX} (config.json (staging key {staging_key(PROPS)})), which its pods stream: pin a "
        "commit with `llm-eks models add` (its own prefix), or stage to a new prefix\n"
    )
    assert hub.downloads() == []
    assert s3.get_object(Bucket=BUCKET, Key=PREFIX + "config.json")["Body"].read() == commit_1().files["config.json"]


def test_the_marker_is_written_once_and_s3_refuses_to_replace_it(hub: FakeHub, s3: Any, tmp_path: Path) -> None:
    assert run_stage(tmp_path) == 0
    key = marker_key(PREFIX, staging_key(PROPS))
    with pytest.raises(Exception) as err:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"{}", IfNoneMatch="*")
    assert stage_module.error_code(err.value) in ("PreconditionFailed", "412")
    # A second staging of the same key finds it and leaves it as it is.
    request = stage_module.parse_args(job_args(PROPS, tmp_path / "scratch"))
    stage_module.write_marker(s3, request, {"key": staging_key(PROPS)})
    assert marker(s3)["files"]


@pytest.mark.parametrize(
    ("corrupt", "change", "message"),
    [
        (
            {"model-00002-of-00002.safetensors": b"\x09" * 4096},
            {},
            "stage: failed: model-00002-of-00002.safetensors: downloaded sha256 ",
        ),
        ({}, {"revision": "v9"}, "stage: failed: RevisionNotFoundError: "),
        ({}, {"repo_id": "acme/gone"}, "stage: failed: RepositoryNotFoundError: "),
        (
            {},
            {"allow_patterns": ("*.json",)},
            f"stage: failed: {REPO}@main has no .safetensors file the patterns select; the Run:ai streamer loads "
            "safetensors only",
        ),
    ],
    ids=["corrupt-download", "unknown-revision", "unknown-repo", "no-safetensors"],
)
def test_failures_exit_1_with_one_line(
    hub: FakeHub,
    s3: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    corrupt: dict[str, bytes],
    change: dict[str, Any],
    message: str,
) -> None:
    hub.corrupt.update(corrupt)
    assert run_stage(tmp_path, dataclasses.replace(PROPS, **change)) == 1
    err = capsys.readouterr().err
    assert err.startswith(message), err
    assert err.count("\n") == 1
    assert marker_key(PREFIX, staging_key(dataclasses.replace(PROPS, **change))) not in objects(s3)


def test_a_file_larger_than_the_scratch_volume_fails_before_any_download(
    hub: FakeHub, s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = job_args(PROPS, tmp_path)
    args[args.index("--scratch-bytes") + 1] = str(1024**3)
    assert stage_module.main(args) == 1
    assert capsys.readouterr().err == (
        "stage: failed: model-00001-of-00002.safetensors is 6.0 MiB and the scratch volume holds 1.0 GiB; "
        "raise scratch_size to at least 2Gi\n"
    )
    assert hub.downloads() == []


def test_file_selection_follows_snapshot_download_patterns() -> None:
    allow, ignore = PROPS.allow_patterns, PROPS.ignore_patterns
    assert [n for n in sorted(commit_1().files) if stage_module.selected(n, allow, ignore)] == STAGED_1
    assert stage_module.selected("sub/dir/x.json", ("sub/",), ())
    assert not stage_module.selected("other/x.json", ("sub/",), ())


def test_part_size_keeps_any_file_within_the_part_limit() -> None:
    assert stage_module.part_size(1) == stage_module.MIN_PART_BYTES
    for size in (10 * 1024**3, 500 * 1024**3, 5 * 1024**4):
        part = stage_module.part_size(size)
        assert part % MIB == 0
        assert -(-size // part) <= 10_000


# --- wait.py ---------------------------------------------------------------------------------------------------


def put_marker(s3: Any, key: str) -> None:
    """The marker staging key `key` writes (its own, outside the prefix)."""
    s3.put_object(Bucket=BUCKET, Key=marker_key(PREFIX, key), Body=json.dumps({"key": key}).encode())


OLD_KEY, NEW_KEY, OTHER_KEY = "0123456789", "abcdef0123", "ffffffffff"


def test_wait_proceeds_for_a_staged_key_and_times_out_with_one_line_for_one_never_staged(
    s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two keys staged side by side (the running version's and the next one's): each proceeds at once; a key whose
    marker never appears, with no staging running, ends with the timeout line after --timeout-seconds."""
    put_marker(s3, OLD_KEY)
    put_marker(s3, NEW_KEY)
    for key in (OLD_KEY, NEW_KEY):
        assert wait_module.wait(s3, BUCKET, PREFIX, key, poll_seconds=0.01, timeout_seconds=0.05) is True
    assert f"s3://{BUCKET}/staging-markers/{PREFIX}{OLD_KEY}.json is there: weights ready" in capsys.readouterr().out
    assert wait_module.wait(s3, BUCKET, PREFIX, OTHER_KEY, poll_seconds=0.01, timeout_seconds=0.05) is False
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("wait-for-weights: gave up after ")
    assert last.endswith(
        f"s: no marker and no staging in progress for key {OTHER_KEY} under s3://{BUCKET}/{PREFIX} (no marker yet); "
        "the staging Job has not run (cdk deploy creates it) or failed: kubectl get jobs -A -l "
        f"llm-eks.io/staging-key={OTHER_KEY}, then its logs"
    )


def test_wait_main_against_the_s3_stub_exits_0_for_the_old_key_and_1_with_the_timeout_line(
    s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The init container's own command line (`wait.py` with the container's arguments) against moto's S3."""
    put_marker(s3, OLD_KEY)
    put_marker(s3, NEW_KEY)
    container = wait_for_weights_init_container(BUCKET_ENV, PREFIX, OLD_KEY, VLLM_IMAGE, "eu-west-1")
    args = [a.replace(f"$({BUCKET_ENV})", BUCKET) for a in container["args"]]
    assert wait_module.main(args) == 0
    capsys.readouterr()
    never = [a.replace(OLD_KEY, OTHER_KEY) for a in args]
    assert wait_module.main([*never, "--poll-seconds", "0.01", "--timeout-seconds", "0.05"]) == 1
    assert f"gave up after 0 s: no marker and no staging in progress for key {OTHER_KEY}" in capsys.readouterr().out


def test_wait_waits_as_long_as_the_staging_is_alive(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """A fresh in-progress record keeps the wait going past the timeout (staging a large model takes an hour); one
    the staging stopped refreshing does not."""
    in_progress = in_progress_key(PREFIX, NEW_KEY)
    s3.put_object(Bucket=BUCKET, Key=in_progress, Body=b"{}")
    modified = s3.head_object(Bucket=BUCKET, Key=in_progress)["LastModified"].timestamp()
    now = [0.0]

    def run(wall: Callable[[], float]) -> bool:
        now[0] = 0.0
        return wait_module.wait(
            s3,
            BUCKET,
            PREFIX,
            NEW_KEY,
            timeout_seconds=600,
            clock=lambda: now[0],
            wall=wall,
            sleep=lambda s: now.__setitem__(0, now[0] + s) if now[0] < 2000 else put_marker(s3, NEW_KEY),
        )

    # Refreshed every minute (the record is always seconds old): the wait outlives the 600 s timeout until the
    # marker arrives, at 2000 s.
    assert run(lambda: modified + now[0] % 60) is True
    assert "staging is running (alive 0 s ago)" in capsys.readouterr().out
    s3.delete_object(Bucket=BUCKET, Key=marker_key(PREFIX, NEW_KEY))
    # Stale from the start (its last refresh an hour ago): the timeout applies.
    assert run(lambda: modified + 3600) is False
    out = capsys.readouterr().out
    assert "the staging stopped refreshing its record 3600 s ago" in out
    assert "gave up after 600 s" in out


def test_an_earlier_releases_marker_counts_for_the_key_it_records(s3: Any) -> None:
    """Pods of an environment staged before per-key markers start without a new staging (the Job of that key ran)."""
    s3.put_object(Bucket=BUCKET, Key=PREFIX + MARKER, Body=json.dumps({"key": OLD_KEY}).encode())
    assert wait_module.wait(s3, BUCKET, PREFIX, OLD_KEY, poll_seconds=0.01, timeout_seconds=0.05) is True
    assert wait_module.wait(s3, BUCKET, PREFIX, NEW_KEY, poll_seconds=0.01, timeout_seconds=0.05) is False


def test_wait_logs_one_line_a_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    class Failing:
        def get_object(self, **_: Any) -> None:
            raise Exception("boom")  # any error reads as "not yet"

    now = [0.0]
    lines: list[str] = []
    monkeypatch.setattr(wait_module, "log", lines.append)
    ready = wait_module.wait(
        Failing(),
        BUCKET,
        PREFIX,
        OLD_KEY,
        timeout_seconds=300,
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
    )
    assert ready is False
    # Polls every 10 s for 300 s; a line at 0, 60, ..., 300 s plus the one giving up.
    assert len(lines) == 7
    assert lines[1] == f"waiting for s3://{BUCKET}/{MARKERS}{PREFIX}{OLD_KEY}.json (60 s): Exception: boom"


def test_the_scripts_agree_on_the_marker_names() -> None:
    assert MARKER == stage_module.MARKER == wait_module.MARKER == "_llm-eks-staged.json"
    assert MARKERS == stage_module.MARKERS == wait_module.MARKERS == "staging-markers/"
    assert stage_module.IN_PROGRESS == wait_module.IN_PROGRESS


# --- Kubernetes objects ----------------------------------------------------------------------------------------


def by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objs}


@pytest.fixture(scope="module")
def staged() -> dict[str, dict[str, Any]]:
    return by_kind(staging_objects(PROPS))


def test_objects_are_valid(staged: dict[str, dict[str, Any]]) -> None:
    assert sorted(staged) == ["ConfigMap", "Job", "SecretProviderClass", "ServiceAccount"]
    assert_valid(list(staged.values()))
    assert all(o["metadata"]["namespace"] == "inference" for o in staged.values())
    assert sorted(by_kind(staging_objects(dataclasses.replace(PROPS, hf_token_secret=None)))) == [
        "ConfigMap",
        "Job",
        "ServiceAccount",
    ]


def test_the_secret_provider_class_is_the_serving_pods_one(staged: dict[str, dict[str, Any]]) -> None:
    import cdk8s

    from llm_eks.manifests.serving_objects import workload_identity

    chart = cdk8s.Chart(cdk8s.App(), "c", disable_resource_name_hashes=True)
    workload_identity(
        chart, lambda n: {"name": n, "namespace": "inference"}, PROPS.name, PROPS.hf_token_secret, "eu-west-1"
    )
    service_account, spc = chart.to_json()
    ours = staged["SecretProviderClass"]
    assert spc["metadata"]["name"] == ours["metadata"]["name"] == secret_provider_class_name(PROPS.name)
    assert spc["spec"] == ours["spec"]
    assert service_account["automountServiceAccountToken"] is staged["ServiceAccount"]["automountServiceAccountToken"]


def test_the_job_name_carries_the_key_and_changes_with_the_model(staged: dict[str, dict[str, Any]]) -> None:
    key = staging_key(PROPS)
    assert len(key) == 10 and int(key, 16) >= 0
    job = staged["Job"]
    assert job["metadata"]["name"] == f"stage-tiny-llm-{key}" == staging_job_name(PROPS)
    assert job["metadata"]["labels"][STAGING_KEY_LABEL] == key
    for change in (
        {"revision": "v2"},
        {"repo_id": "acme/other"},
        {"image": "vllm/vllm-openai:v0.34.0"},
        {"allow_patterns": ("*.safetensors", "*.json")},
        {"prefix": "models/other/"},
    ):
        assert staging_key(dataclasses.replace(PROPS, **change)) != key, change
    # Resources and placement do not change what is staged: the serving pods keep waiting for the same key.
    assert staging_key(dataclasses.replace(PROPS, cpu="4", memory="8Gi", scratch_size="100Gi")) == key


def test_the_job_runs_restricted_and_resumable(staged: dict[str, dict[str, Any]]) -> None:
    job = staged["Job"]["spec"]
    assert (job["backoffLimit"], job["ttlSecondsAfterFinished"], job["activeDeadlineSeconds"]) == (6, 86400, 21600)
    pod = job["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure"
    assert pod["serviceAccountName"] == "stage-tiny-llm"
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": True,
        "runAsUser": 2000,
        "runAsGroup": 0,
    }
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    assert container["resources"] == {
        "requests": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "60Gi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    }
    assert {"name": "scratch", "emptyDir": {"sizeLimit": "60Gi"}} in pod["volumes"]
    assert pod["nodeSelector"] == {"llm-eks.io/node-pool": "cpu"}
    assert job["template"]["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    env = {e["name"]: e for e in container["env"]}
    assert env[BUCKET_ENV] == bucket_env()
    assert env["HF_TOKEN_PATH"]["value"] == HF_TOKEN_PATH
    assert env["AWS_REGION"]["value"] == "eu-west-1"
    assert "HF_HUB_ENABLE_HF_TRANSFER" not in env
    assert {"name": "hf-token", "mountPath": "/var/run/secrets/huggingface", "readOnly": True} in container[
        "volumeMounts"
    ]
    annotations = staged["Job"]["metadata"]["annotations"]
    reasons = sorted(v.split("=")[0] for k, v in annotations.items() if k.startswith("checkov.io/"))
    assert reasons == ["CKV_K8S_15", "CKV_K8S_40", "CKV_K8S_43"]


def test_the_job_runs_the_config_maps_script_with_arguments_it_accepts(staged: dict[str, dict[str, Any]]) -> None:
    config_map = staged["ConfigMap"]
    assert config_map["metadata"]["name"] == "stage-tiny-llm-script"
    assert config_map["data"] == {"stage.py": (PACKAGE_DIR / "stage.py").read_text()}
    assert stage_script() == (PACKAGE_DIR / "stage.py").read_text()
    container = staged["Job"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python3"]
    assert container["args"][0] == "/opt/llm-eks/stage.py"
    assert {"name": "script", "mountPath": "/opt/llm-eks", "readOnly": True} in container["volumeMounts"]
    request = stage_module.parse_args(job_args(PROPS, Path(SCRATCH_DIR)))
    assert (request.bucket, request.prefix, request.repo_id, request.revision) == (BUCKET, PREFIX, REPO, "main")
    assert request.key == staging_key(PROPS)
    assert request.allow_patterns == PROPS.allow_patterns
    assert request.ignore_patterns == PROPS.ignore_patterns
    assert request.scratch_bytes == 60 * 1024**3


def test_the_init_container_reads_the_bucket_from_the_config_map() -> None:
    key = staging_key(PROPS)
    container = wait_for_weights_init_container(BUCKET_ENV, PREFIX, key, VLLM_IMAGE, "eu-west-1")
    assert container["env"][0] == {
        "name": BUCKET_ENV,
        "valueFrom": {"configMapKeyRef": {"name": BUCKET_CONFIG_MAP, "key": BUCKET_KEY}},
    }
    assert container["command"] == ["python3", "-c", wait_script()]
    assert container["args"] == ["--bucket", f"$({BUCKET_ENV})", "--prefix", PREFIX, "--key", key]
    # The kubelet would expand a $(...) inside the script itself.
    assert "$(" not in wait_script()
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
    }
    assert container["resources"]["limits"] == {"cpu": "500m", "memory": "128Mi"}
    assert s3_model_uri(PREFIX) == f"s3://$({BUCKET_ENV})/{PREFIX}"


def test_a_serving_pod_with_the_init_container_is_valid() -> None:
    vllm = base_props(model=s3_model_uri(PREFIX), weights="s3")
    spec = serving_pod_spec(vllm, probe_timing(vllm), {"app": "x"})
    spec["initContainers"] = [
        wait_for_weights_init_container(BUCKET_ENV, PREFIX, staging_key(PROPS), vllm.image, vllm.aws_region)
    ]
    spec["containers"][0]["env"].insert(0, bucket_env())
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vllm", "namespace": "inference"}, "spec": spec}
    assert_valid([pod])
    yaml.safe_dump(pod)  # a reviewer's YAML


def test_the_init_container_rejects_what_is_not_a_staging_key() -> None:
    with pytest.raises(ValueError, match=r"^key: 'main' is not a staging key"):
        wait_for_weights_init_container(BUCKET_ENV, PREFIX, "main", VLLM_IMAGE, None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"name": "Stage"},
            "weights_staging.name: 'Stage' is not allowed; must be a DNS-1035 label: lowercase letters, digits and "
            "'-', starting with a letter, at most 63 characters [LLMEKS-E400]",
        ),
        (
            {"name": "s" * 53},
            f"weights_staging.name: {'s' * 53!r} is not allowed; must be at most 52 characters (the Job name adds "
            "'-' and a 10-character key) [LLMEKS-E411]",
        ),
        (
            {"repo_id": "llama"},
            "weights_staging.repo_id: 'llama' is not allowed; must be a Hugging Face repo id (org/name) such as "
            "meta-llama/Llama-3.1-8B [LLMEKS-E411]",
        ),
        (
            {"revision": "main branch"},
            "weights_staging.revision: 'main branch' is not allowed; must be a branch, tag or commit: up to 255 "
            "letters, digits and ._-/+ without '..' [LLMEKS-E411]",
        ),
        (
            {"prefix": "models/llama"},
            "weights_staging.prefix: 'models/llama' is not allowed; the key prefix must end in '/', not start with "
            "'/' and hold no '*' (IAM grants it as <prefix>*) [LLMEKS-E411]",
        ),
        (
            {"prefix": "models//llama/"},
            "weights_staging.prefix: 'models//llama/' is not allowed; the key prefix may hold only S3's safe "
            "characters (letters, digits and ! - _ . * ' ( ) /), with no empty, '.' or '..' path segments"
            " [LLMEKS-E411]",
        ),
        (
            {"hf_token_secret": "my token"},
            "weights_staging.hf_token_secret: 'my token' is not allowed; must be a Secrets Manager secret name "
            "(letters, digits and /_+=.@-) [LLMEKS-E411]",
        ),
        (
            {"aws_region": "Europe"},
            "weights_staging.aws_region: 'Europe' is not allowed; must be an AWS region such as us-east-1"
            " [LLMEKS-E411]",
        ),
        (
            {"allow_patterns": ()},
            "weights_staging.allow_patterns: () is not allowed; must list at least one file pattern such as "
            "'*.safetensors' [LLMEKS-E411]",
        ),
        (
            {"ignore_patterns": ("/original/*",)},
            "weights_staging.ignore_patterns[0]: '/original/*' is not allowed; must be a non-empty fnmatch pattern "
            "relative to the repo root, without '$' [LLMEKS-E411]",
        ),
        (
            {"scratch_size": "1Gi"},
            "weights_staging.scratch_size: '1Gi' is not allowed; must be at least 2Gi (one file plus 1Gi headroom)"
            " [LLMEKS-E411]",
        ),
        (
            {"memory": "lots"},
            "weights_staging.memory: 'lots' is not allowed; must be a Kubernetes quantity such as 8, 500m or 32Gi"
            " [LLMEKS-E400]",
        ),
        (
            {"tolerations": ({"key": "nvidia.com/gpu", "operator": "Exists"},)},
            "weights_staging.tolerations: 'nvidia.com/gpu' is not allowed; staging runs on CPU capacity, never GPU "
            "nodes [LLMEKS-E411]",
        ),
        (
            {"backoff_limit": -1},
            "weights_staging.backoff_limit: -1 is not allowed; must be a whole number of at least 0 [LLMEKS-E411]",
        ),
        (
            {"active_deadline_seconds": 0},
            "weights_staging.active_deadline_seconds: 0 is not allowed; must be a whole number of at least 1"
            " [LLMEKS-E411]",
        ),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else None,
)
def test_exact_one_line_validation_errors(change: dict[str, Any], message: str) -> None:
    props = dataclasses.replace(PROPS, **change)
    with pytest.raises(ConfigError) as err:
        validate_weights_staging_props(props)
    assert str(err.value) == message
    # The chart refuses the same props with the same error.
    with raises_code(err.value.code, match=re.escape(err.value.message)):
        staging_objects(props)


def test_the_defaults_validate() -> None:
    validate_weights_staging_props(
        WeightsStagingProps(name="stage-llama", namespace="inference", repo_id=REPO, prefix=PREFIX)
    )


def test_both_scripts_run_as_plain_python_without_llm_eks(tmp_path: Path) -> None:
    """As the image runs them: stage.py as a file from the ConfigMap, wait.py through `python3 -c`."""
    import subprocess
    import sys

    script = tmp_path / "stage.py"
    script.write_text(stage_script())
    for argv in ([str(script), "--help"], ["-c", wait_script(), "--help"]):
        # -I: no user site, no PYTHONPATH, not the repo's folder on sys.path.
        run = subprocess.run([sys.executable, "-I", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert "--bucket" in run.stdout


# --- wait.py --fetch-to (LoRA adapters) ---------------------------------------------------------------------------


def test_a_staged_adapter_is_fetched_byte_for_byte_as_staged(hub: FakeHub, s3: Any, tmp_path: Path) -> None:
    assert run_stage(tmp_path) == 0
    dest = tmp_path / "lora"
    assert wait_module.fetch(s3, BUCKET, PREFIX, staging_key(PROPS), str(dest)) == []
    files = commit_1().files
    assert sorted(p.name for p in dest.iterdir()) == sorted(STAGED_1)
    assert all((dest / name).read_bytes() == files[name] for name in STAGED_1)
    # A restarted container finds the files in place and fetches nothing again.
    assert wait_module.fetch(s3, BUCKET, PREFIX, staging_key(PROPS), str(dest)) == []


def test_a_file_replaced_after_staging_is_refused(hub: FakeHub, s3: Any, tmp_path: Path) -> None:
    """Whoever could overwrite an object under the prefix still cannot get it loaded: the staging record decides."""
    assert run_stage(tmp_path) == 0
    name = STAGED_1[0]
    s3.put_object(Bucket=BUCKET, Key=PREFIX + name, Body=b"not what was staged")
    dest = tmp_path / "lora"
    (problem,) = wait_module.fetch(s3, BUCKET, PREFIX, staging_key(PROPS), str(dest))
    assert problem.startswith(f"{name}: 19 bytes, sha256 {sha256(b'not what was staged')}; the marker records ")
    assert not (dest / name).exists() and not (dest / f"{name}.partial").exists()


def test_a_marker_naming_a_file_outside_the_folder_is_refused(hub: FakeHub, s3: Any, tmp_path: Path) -> None:
    body = {"key": staging_key(PROPS), "files": [{"name": "../../etc/profile", "size": 1, "sha256": "0" * 64}]}
    s3.put_object(Bucket=BUCKET, Key=marker_key(PREFIX, staging_key(PROPS)), Body=json.dumps(body).encode())
    (problem,) = wait_module.fetch(s3, BUCKET, PREFIX, staging_key(PROPS), str(tmp_path / "lora"))
    assert problem.startswith("the marker lists a file that is not a relative name with size and sha256")
    assert not (tmp_path / "etc").exists()
