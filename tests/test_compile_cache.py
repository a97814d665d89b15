"""vLLM's torch.compile cache in S3: compile_cache.py's restore and save modes run for real against moto's S3 and a
loopback /health, then the restore init container, the save sidecar and a serving pod carrying both."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_eks.errors import ConfigError
from llm_eks.manifests.vllm import probe_timing
from llm_eks.manifests.vllm.pod import container_env, serving_pod_spec
from llm_eks.manifests.vllm.props import CACHE_DIR, PORT
from llm_eks.manifests.weights_staging import (
    BUCKET_CONFIG_MAP,
    BUCKET_ENV,
    BUCKET_KEY,
    COMPILE_CACHE_SUBDIR,
    RESTORE_COMPILE_CACHE_CONTAINER,
    SAVE_COMPILE_CACHE_CONTAINER,
    WAIT_CONTAINER,
    compile_cache_dir,
    compile_cache_prefix,
    compile_cache_restore_container,
    compile_cache_save_sidecar,
    compile_cache_script,
    s3_model_uri,
    wait_for_weights_init_container,
)
from llm_eks.manifests.weights_staging import compile_cache as cc
from llm_eks.manifests.weights_staging.objects import VLLM_PORT
from llm_eks.versions import VLLM_IMAGE
from tests.kube_schema import assert_valid
from tests.moto_s3 import emptied, module_s3
from tests.test_vllm_chart import base_props

moto = pytest.importorskip("moto")

BUCKET = "llm-eks-weights-test"
PREFIX = "compile-cache/llama-3-1-8b/g6e/"
STAGING_PREFIX = "models/acme/tiny-llm/main/"
KEY = "0123456789"
# A fixed wall clock for the save passes; file times are set relative to it.
NOW = 2_000_000_000.0
# What vLLM 0.33 writes (vllm/compilation/backends.py, decorators.py), in miniature.
CACHE_FILES = {
    "3f2a9c1b7e/rank_0_0/backbone/vllm_compile_cache.py": b"{(1, 8192): {'graph_handle': ('a', 'b')}}\n",
    "3f2a9c1b7e/rank_0_0/backbone/computation_graph.py": b"def forward(x):\n    return x\n",
    "3f2a9c1b7e/rank_0_0/backbone/cache_key_factors.json": b'{"config_hash": "abc"}\n',
    "3f2a9c1b7e/rank_0_0/backbone/artifact_compile_range_1_8192_subgraph_0": b"\x00" * 9000,
    "3f2a9c1b7e/rank_0_0/backbone/inductor_cache/fxgraph/ab/cd/entry": b"\x01" * 300,
    "torch_aot_compile/5e6d/rank_0_0/model": b"\x02" * 2048,
}


s3_module = module_s3(BUCKET)


@pytest.fixture
def s3(s3_module: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """moto's S3 (the whole boto3 stack in-process) holding an empty weights bucket."""
    return emptied(s3_module, BUCKET)


class Recording:
    """An S3 client that records the calls the script makes (and may fail some)."""

    def __init__(self, s3: Any, fail_download: int | None = None, fail_upload: str | None = None) -> None:
        self.s3 = s3
        self.downloads: list[str] = []
        self.uploads: list[str] = []
        self.fail_download = fail_download
        self.fail_upload = fail_upload

    def get_paginator(self, name: str) -> Any:
        return self.s3.get_paginator(name)

    def download_fileobj(self, bucket: str, key: str, f: Any) -> None:
        if self.fail_download is not None and len(self.downloads) == self.fail_download:
            f.write(b"half")
            raise ConnectionResetError("connection reset by peer")
        self.downloads.append(key)
        self.s3.download_fileobj(bucket, key, f)

    def upload_file(self, path: str, bucket: str, key: str) -> None:
        if self.fail_upload is not None and key.endswith(self.fail_upload):
            raise ConnectionResetError("connection reset by peer")
        self.uploads.append(key[len(PREFIX) :])
        self.s3.upload_file(path, bucket, key)


def put_cache(s3: Any, files: dict[str, bytes] = CACHE_FILES, prefix: str = PREFIX) -> None:
    for rel, data in files.items():
        s3.put_object(Bucket=BUCKET, Key=prefix + rel, Body=data)


def bucket_objects(s3: Any) -> dict[str, bytes]:
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    return {k: s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in keys}


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def write_cache(root: Path, files: dict[str, bytes], age: float = 120.0) -> None:
    """Files as vLLM leaves them, last modified `age` seconds before NOW."""
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, (NOW - age, NOW - age))


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


# --- restore -----------------------------------------------------------------------------------------------------


def restore_args(dest: Path) -> list[str]:
    """The restore container's arguments with the bucket variable and the cache folder filled in."""
    args = compile_cache_restore_container(BUCKET_ENV, PREFIX, VLLM_IMAGE, "eu-west-1", CACHE_DIR, "cache")["args"]
    return [BUCKET if a == f"$({BUCKET_ENV})" else str(dest) if a == compile_cache_dir(CACHE_DIR) else a for a in args]


def test_restore_downloads_every_file_keeping_its_path(
    s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put_cache(s3)
    # Another workload's, or another GPU family's, cache is not ours.
    put_cache(s3, {"x/other": b"no"}, prefix="compile-cache/llama-3-1-8b/p5/")
    dest = tmp_path / "cache" / COMPILE_CACHE_SUBDIR
    assert cc.main(restore_args(dest)) == 0
    assert tree(dest) == CACHE_FILES
    (line,) = lines(capsys)
    assert line.startswith(
        f"restore-compile-cache: restored 6 files (11.2 KiB) from s3://{BUCKET}/{PREFIX} into {dest} in "
    )
    assert line.endswith(" s; 0 already present, 0 refused")


def test_a_second_restore_downloads_nothing(s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put_cache(s3)
    client = Recording(s3)
    assert cc.run_restore(client, BUCKET, PREFIX, tmp_path, deadline_seconds=60) == 0
    assert len(client.downloads) == 6
    capsys.readouterr()
    client.downloads.clear()
    assert cc.run_restore(client, BUCKET, PREFIX, tmp_path, deadline_seconds=60) == 0
    assert client.downloads == []
    assert "restored 0 files (0 B)" in capsys.readouterr().out
    # A file of another size (vLLM rewrote its index) is downloaded again.
    index = "3f2a9c1b7e/rank_0_0/backbone/vllm_compile_cache.py"
    (tmp_path / index).write_bytes(b"{}")
    assert cc.run_restore(client, BUCKET, PREFIX, tmp_path, deadline_seconds=60) == 0
    assert client.downloads == [PREFIX + index]
    assert tree(tmp_path) == CACHE_FILES


def test_restore_of_an_empty_prefix_exits_0(s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cc.main(restore_args(tmp_path / "dest")) == 0
    (line,) = lines(capsys)
    assert line.startswith(f"restore-compile-cache: nothing to restore: s3://{BUCKET}/{PREFIX} is empty")
    assert not (tmp_path / "dest").exists() or tree(tmp_path / "dest") == {}


def test_restore_refuses_keys_that_leave_the_destination(
    s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put_cache(s3, {"ok/file": b"fine", "../escape": b"evil", "a/../../escape2": b"evil", "/etc/passwd": b"evil"})
    dest = tmp_path / "dest"
    assert cc.main(restore_args(dest)) == 0
    assert tree(tmp_path) == {"dest/ok/file": b"fine"}
    out = lines(capsys)
    assert sorted(out[:-1]) == sorted(
        f"restore-compile-cache: refused s3://{BUCKET}/{PREFIX}{rel}: not a relative path below the prefix"
        for rel in ("../escape", "a/../../escape2", "/etc/passwd")
    )
    assert out[-1].endswith(" s; 0 already present, 3 refused")
    assert [cc.relative_path(PREFIX + r, PREFIX) for r in ("a/./b", "a//b", "a\\..\\b", "", "a/b")] == [
        None,
        None,
        None,
        None,
        "a/b",
    ]


def test_restore_from_a_missing_bucket_exits_0_with_one_line(
    s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = restore_args(tmp_path / "dest")
    args[args.index(BUCKET)] = "no-such-bucket"
    assert cc.main(args) == 0
    (line,) = lines(capsys)
    assert line.startswith("restore-compile-cache: failed after ")
    assert ", vLLM compiles from scratch (this run's files removed): s3://no-such-bucket/" in line
    assert line.endswith(
        "NoSuchBucket: An error occurred (NoSuchBucket) when calling the ListObjectsV2 operation: The specified "
        "bucket does not exist"
    )


def test_restore_on_access_denied_exits_0_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from botocore.exceptions import ClientError

    class Denied:
        def get_paginator(self, name: str) -> Any:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "ListObjectsV2")

    assert cc.run_restore(Denied(), BUCKET, PREFIX, tmp_path, deadline_seconds=60) == 0
    (line,) = lines(capsys)
    assert line.endswith(
        f"s3://{BUCKET}/{PREFIX}: ClientError (AccessDenied): An error occurred (AccessDenied) when calling the "
        "ListObjectsV2 operation: Access Denied"
    )


def test_a_restore_that_fails_half_way_removes_what_it_wrote(
    s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM must not find an index whose artefacts are missing: a cold cache instead."""
    put_cache(s3)
    present = "torch_aot_compile/5e6d/rank_0_0/model"
    write_cache(tmp_path, {present: CACHE_FILES[present]})
    assert cc.run_restore(Recording(s3, fail_download=2), BUCKET, PREFIX, tmp_path, deadline_seconds=60) == 0
    # The file that was there before stays; nothing else, not even the partial download.
    assert tree(tmp_path) == {present: CACHE_FILES[present]}
    (line,) = lines(capsys)
    assert line.endswith("ConnectionResetError: connection reset by peer")


def test_a_restore_past_its_deadline_gives_up(s3: Any, tmp_path: Path) -> None:
    put_cache(s3)
    ticks = iter(range(100))
    with pytest.raises(TimeoutError, match="restore took longer than 2 s"):
        cc.restore(s3, BUCKET, PREFIX, tmp_path, deadline_seconds=2, clock=lambda: float(next(ticks)))
    assert tree(tmp_path) == {}


def test_restore_skips_without_a_bucket(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty ConfigMap key must not stop the replica either."""
    args = restore_args(tmp_path)
    args[args.index(BUCKET)] = ""
    assert cc.main(args) == 0
    assert lines(capsys) == [
        f"restore-compile-cache: skipped: bucket '' and prefix {PREFIX!r} (ending in '/') are required"
    ]


# --- save --------------------------------------------------------------------------------------------------------


class Health:
    """A loopback /health answering 503 `unhealthy` times, then 200."""

    def __init__(self) -> None:
        self.unhealthy = 0
        self.requests = 0
        health = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                health.requests += 1
                status = 503 if health.unhealthy > 0 else 200
                health.unhealthy -= 1
                self.send_response(status if self.path == "/health" else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/health"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def health_server() -> Iterator[Health]:
    server = Health()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def health(health_server: Health) -> Health:
    health_server.unhealthy = 0
    health_server.requests = 0
    return health_server


def save(client: Any, src: Path, url: str, passes: int, now: float = NOW, **kw: Any) -> list[cc.PassSummary]:
    sleeps: list[float] = []
    return cc.save_loop(client, BUCKET, PREFIX, src, url, passes=passes, now=lambda: now, sleep=sleeps.append, **kw)


def test_save_waits_for_health_200_before_the_first_upload(
    s3: Any, tmp_path: Path, health: Health, capsys: pytest.CaptureFixture[str]
) -> None:
    write_cache(tmp_path, CACHE_FILES)
    health.unhealthy = 2
    seen: list[tuple[int, int]] = []

    def sleep(seconds: float) -> None:
        seen.append((health.requests, len(bucket_objects(s3))))
        assert seconds == 10.0

    cc.save_loop(s3, BUCKET, PREFIX, tmp_path, health.url, passes=1, now=lambda: NOW, sleep=sleep)
    # Two polls answered 503, each followed by a 10 s sleep with the bucket still empty; the third answered 200.
    assert seen == [(1, 0), (2, 0)]
    assert health.requests == 3
    assert bucket_objects(s3) == {PREFIX + rel: data for rel, data in CACHE_FILES.items()}
    out = lines(capsys)
    assert out[0] == f"save-compile-cache: waiting for {health.url} to answer 200 (0 s): HTTP 503"
    assert out[1].startswith(f"save-compile-cache: pass 1: uploaded 6 files (11.2 KiB) from {tmp_path} to s3://")
    assert out[1].endswith(" s; 0 already there, 0 too new, 0 above 2.0 GiB")
    assert len(out) == 2


def test_save_uploads_only_what_the_prefix_lacks_at_the_same_size(s3: Any, tmp_path: Path, health: Health) -> None:
    write_cache(tmp_path, CACHE_FILES)
    index = "3f2a9c1b7e/rank_0_0/backbone/vllm_compile_cache.py"
    graph = "3f2a9c1b7e/rank_0_0/backbone/computation_graph.py"
    put_cache(s3, {graph: CACHE_FILES[graph], index: b"{}"})
    client = Recording(s3)
    (summary,) = save(client, tmp_path, health.url, passes=1)
    assert sorted(client.uploads) == sorted(set(CACHE_FILES) - {graph})
    assert summary.present == 1
    # The index of another size was replaced by the local one.
    assert bucket_objects(s3)[PREFIX + index] == CACHE_FILES[index]


def test_save_uploads_oldest_first(s3: Any, tmp_path: Path, health: Health) -> None:
    """An index is written after the artefacts it names: it goes up after them."""
    for age, rel in enumerate(sorted(CACHE_FILES), start=100):
        write_cache(tmp_path, {rel: CACHE_FILES[rel]}, age=age)
    client = Recording(s3)
    save(client, tmp_path, health.url, passes=1)
    assert client.uploads == sorted(CACHE_FILES, reverse=True)


def test_save_skips_fresh_files_until_they_age(s3: Any, tmp_path: Path, health: Health) -> None:
    old = {k: v for k, v in CACHE_FILES.items() if "inductor" not in k}
    fresh = {k: v for k, v in CACHE_FILES.items() if "inductor" in k}
    write_cache(tmp_path, old, age=120)
    write_cache(tmp_path, fresh, age=10)
    client = Recording(s3)
    (first,) = save(client, tmp_path, health.url, passes=1)
    assert sorted(client.uploads) == sorted(old)
    assert first.fresh == 1
    client.uploads.clear()
    (second,) = save(client, tmp_path, health.url, passes=1, now=NOW + 25)
    assert (client.uploads, second.fresh, second.present) == (list(fresh), 0, len(old))


def test_save_never_deletes(s3: Any, tmp_path: Path, health: Health) -> None:
    """Objects only another replica has stay; the script has no delete call at all."""
    put_cache(s3, {"another-replica/kernel": b"k"})
    write_cache(tmp_path, CACHE_FILES)
    save(s3, tmp_path, health.url, passes=2)
    assert PREFIX + "another-replica/kernel" in bucket_objects(s3)
    assert "delete_object" not in compile_cache_script()
    assert ".delete(" not in compile_cache_script()


def test_a_second_pass_uploads_only_new_files(
    s3: Any, tmp_path: Path, health: Health, capsys: pytest.CaptureFixture[str]
) -> None:
    write_cache(tmp_path, CACHE_FILES)
    client = Recording(s3)
    sleeps: list[float] = []
    new = {"3f2a9c1b7e/rank_0_0/backbone/artifact_compile_range_8193_16384_subgraph_0": b"\x03" * 100}

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        write_cache(tmp_path, new)  # vLLM compiled a new shape while the sidecar slept

    summaries = cc.save_loop(
        client, BUCKET, PREFIX, tmp_path, health.url, interval_seconds=600, passes=2, now=lambda: NOW, sleep=sleep
    )
    assert sleeps == [600]
    assert [len(s.uploaded) for s in summaries] == [6, 1]
    assert client.uploads[6:] == list(new)
    assert summaries[1].present == 6
    out = lines(capsys)
    assert out[1].startswith("save-compile-cache: pass 2: uploaded 1 files (100 B)")


def test_save_skips_large_files_partial_downloads_and_symlinks(
    s3: Any, tmp_path: Path, health: Health, capsys: pytest.CaptureFixture[str]
) -> None:
    write_cache(tmp_path, {"big": b"\x00" * 5000, "small": b"s", "x/model" + cc.PARTIAL_SUFFIX: b"half"})
    (tmp_path / "link").symlink_to(tmp_path / "small")
    client = Recording(s3)
    (summary,) = save(client, tmp_path, health.url, passes=1, max_bytes=4096)
    assert client.uploads == ["small"]
    assert summary.too_large == ["big"]
    assert "1 above 4.0 KiB (first: big)" in capsys.readouterr().out


def test_a_failed_upload_ends_the_pass_and_the_next_pass_retries(
    s3: Any, tmp_path: Path, health: Health, capsys: pytest.CaptureFixture[str]
) -> None:
    for age, rel in enumerate(sorted(CACHE_FILES), start=100):
        write_cache(tmp_path, {rel: CACHE_FILES[rel]}, age=age)
    failing = sorted(CACHE_FILES, reverse=True)[2]
    client = Recording(s3, fail_upload=failing)
    first, second = save(client, tmp_path, health.url, passes=2)
    # Nothing newer than the failed file went up (an index never gets ahead of its artefacts).
    assert client.uploads == sorted(CACHE_FILES, reverse=True)[:2]
    assert first.error == f"{failing}: ConnectionResetError: connection reset by peer"
    assert second.error is not None
    assert "; failed, next pass retries: " in capsys.readouterr().out
    client.fail_upload = None
    (third,) = save(client, tmp_path, health.url, passes=1)
    assert third.error is None
    assert client.uploads == sorted(CACHE_FILES, reverse=True)
    assert third.present == 2


def test_an_error_in_a_pass_is_logged_and_the_loop_goes_on(
    tmp_path: Path, health: Health, capsys: pytest.CaptureFixture[str]
) -> None:
    class Broken:
        def get_paginator(self, name: str) -> Any:
            raise ConnectionError("endpoint unreachable")

    write_cache(tmp_path, {"a": b"a"})
    summaries = save(Broken(), tmp_path, health.url, passes=3)
    assert [s.error for s in summaries] == ["ConnectionError: endpoint unreachable"] * 3
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_health_is_only_200(health: Health) -> None:
    assert cc.healthy(health.url) is None
    health.unhealthy = 1
    assert cc.healthy(health.url) == "HTTP 503"
    assert cc.healthy(health.url.replace("/health", "/nope")) == "HTTP 404"
    closed = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = closed.server_address[1]
    closed.server_close()
    assert "Connection refused" in (cc.healthy(f"http://127.0.0.1:{port}/health") or "")


def test_the_script_runs_as_plain_python_without_llm_eks(tmp_path: Path) -> None:
    """As the image runs it: `python3 -c <text>`, isolated (no user site, no PYTHONPATH, not the repo on sys.path)."""
    for mode in ("restore", "save"):
        run = subprocess.run(
            [sys.executable, "-I", "-c", compile_cache_script(), mode, "--help"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        assert "--bucket" in run.stdout and "--prefix" in run.stdout


def test_an_unreachable_s3_never_stops_the_replica(tmp_path: Path) -> None:
    """The restore container as the kubelet runs it, with S3 at a closed port: exit 0, one line, nothing written."""
    closed = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = closed.server_address[1]
    closed.server_close()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{port}",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
    }
    dest = tmp_path / "dest"
    run = subprocess.run(
        [sys.executable, "-I", "-c", compile_cache_script(), *restore_args(dest)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    (line,) = run.stdout.splitlines()
    assert line.startswith("restore-compile-cache: failed after ")
    assert "EndpointConnectionError: Could not connect to the endpoint URL" in line
    assert not dest.exists()


# --- Kubernetes ----------------------------------------------------------------------------------------------------


RESTORE = compile_cache_restore_container(BUCKET_ENV, PREFIX, VLLM_IMAGE, "eu-west-1", CACHE_DIR, "cache")
SAVE = compile_cache_save_sidecar(BUCKET_ENV, PREFIX, VLLM_IMAGE, "eu-west-1", CACHE_DIR, "cache")


def test_the_prefix_is_per_workload_and_gpu_family() -> None:
    assert compile_cache_prefix("llama-3-1-8b", "g6e") == PREFIX
    with pytest.raises(ConfigError) as err:
        compile_cache_prefix("Llama", "g6e")
    assert str(err.value) == (
        "compile_cache.workload_name: 'Llama' is not allowed; must be a DNS-1035 label: lowercase letters, digits "
        "and '-', starting with a letter, at most 63 characters"
    )
    with pytest.raises(ConfigError) as err:
        compile_cache_prefix("llama", "g6e/x")
    assert str(err.value) == (
        "compile_cache.instance_family: 'g6e/x' is not allowed; must be a DNS-1123 label: lowercase letters, "
        "digits and '-', at most 63 characters"
    )


def test_the_cache_folder_is_where_vllm_writes() -> None:
    """VLLM_CACHE_ROOT of the vLLM container, plus torch_compile_cache (vllm/compilation/backends.py)."""
    env = {e["name"]: e.get("value") for e in container_env(base_props())}
    expected = f"{env['VLLM_CACHE_ROOT']}/torch_compile_cache"
    assert compile_cache_dir(CACHE_DIR) == expected == "/cache/vllm/torch_compile_cache"
    assert COMPILE_CACHE_SUBDIR == "vllm/torch_compile_cache"
    assert VLLM_PORT == PORT


def test_both_containers_run_the_script_restricted_with_the_bucket_from_the_config_map() -> None:
    assert (RESTORE["name"], SAVE["name"]) == (RESTORE_COMPILE_CACHE_CONTAINER, SAVE_COMPILE_CACHE_CONTAINER)
    assert (RESTORE["name"], SAVE["name"]) == ("restore-compile-cache", "save-compile-cache")
    for container in (RESTORE, SAVE):
        assert container["command"] == ["python3", "-c", compile_cache_script()]
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
        }
        assert container["resources"] == {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi"},
        }
        env = {e["name"]: e for e in container["env"]}
        assert env[BUCKET_ENV] == {
            "name": BUCKET_ENV,
            "valueFrom": {"configMapKeyRef": {"name": BUCKET_CONFIG_MAP, "key": BUCKET_KEY}},
        }
        assert env["PYTHONUNBUFFERED"]["value"] == "1"
        assert env["AWS_REGION"]["value"] == "eu-west-1"
        assert container["imagePullPolicy"] == "IfNotPresent"
    # The kubelet would expand a $(...) inside the script itself.
    assert "$(" not in compile_cache_script()
    no_region = compile_cache_restore_container(BUCKET_ENV, PREFIX, VLLM_IMAGE, None, "/c", "v")
    assert [e["name"] for e in no_region["env"]] == [BUCKET_ENV, "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE"]


def test_the_restore_container_writes_into_the_cache_volume() -> None:
    assert "restartPolicy" not in RESTORE
    assert RESTORE["volumeMounts"] == [{"name": "cache", "mountPath": CACHE_DIR}]
    assert RESTORE["args"] == [
        "restore",
        "--bucket",
        f"$({BUCKET_ENV})",
        "--prefix",
        PREFIX,
        "--dest",
        "/cache/vllm/torch_compile_cache",
    ]


def test_the_save_sidecar_is_native_reads_the_volume_read_only_and_polls_vllms_health() -> None:
    assert SAVE["restartPolicy"] == "Always"
    assert SAVE["volumeMounts"] == [{"name": "cache", "mountPath": CACHE_DIR, "readOnly": True}]
    assert SAVE["args"] == [
        "save",
        "--bucket",
        f"$({BUCKET_ENV})",
        "--prefix",
        PREFIX,
        "--src",
        "/cache/vllm/torch_compile_cache",
        "--health",
        "http://localhost:8000/health",
        "--interval",
        "600",
    ]
    other = compile_cache_save_sidecar(BUCKET_ENV, PREFIX, VLLM_IMAGE, None, "/c", "v", port=9000, interval_seconds=60)
    assert other["args"][-4:] == ["--health", "http://localhost:9000/health", "--interval", "60"]
    # The arguments are the script's own.
    parsed = cc.parser().parse_args([BUCKET if a == f"$({BUCKET_ENV})" else a for a in SAVE["args"]])
    assert (parsed.mode, parsed.bucket, parsed.prefix, parsed.health, parsed.interval) == (
        "save",
        BUCKET,
        PREFIX,
        "http://localhost:8000/health",
        600.0,
    )
    assert (parsed.min_age, parsed.max_bytes) == (30.0, 2 * 1024**3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prefix": "compile-cache/x"}, r"^prefix: 'compile-cache/x' must end in '/'"),
        ({"prefix": "$(X)/"}, r"^prefix: '\$\(X\)/' must end in '/'"),
        ({"cache_dir": "cache"}, r"^cache_dir: 'cache' must be an absolute path"),
        ({"volume": "Cache"}, r"^volume: 'Cache' must be a volume name"),
        ({"port": 0}, r"^port: 0 must be a TCP port"),
        ({"interval_seconds": 0}, r"^interval_seconds: 0 must be a whole number"),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else None,
)
def test_the_builders_reject_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {
        "bucket_env_name": BUCKET_ENV,
        "prefix": PREFIX,
        "image": VLLM_IMAGE,
        "region": None,
        "cache_dir": CACHE_DIR,
        "volume": "cache",
        **kwargs,
    }
    with pytest.raises(ValueError, match=message):
        compile_cache_save_sidecar(**args)
    if "port" not in kwargs and "interval_seconds" not in kwargs:
        with pytest.raises(ValueError, match=message):
            compile_cache_restore_container(**args)


def test_a_serving_pod_with_wait_restore_and_the_save_sidecar_is_valid() -> None:
    vllm = base_props(model=s3_model_uri(STAGING_PREFIX), weights="s3")
    spec = serving_pod_spec(vllm, probe_timing(vllm), {"app": "x"})
    (volume,) = [v for v in spec["volumes"] if v["name"] == "cache"]
    (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    spec["initContainers"] = [
        wait_for_weights_init_container(BUCKET_ENV, STAGING_PREFIX, KEY, vllm.image, vllm.aws_region),
        compile_cache_restore_container(
            BUCKET_ENV, PREFIX, vllm.image, vllm.aws_region, mount["mountPath"], volume["name"]
        ),
        compile_cache_save_sidecar(BUCKET_ENV, PREFIX, vllm.image, vllm.aws_region, mount["mountPath"], volume["name"]),
    ]
    spec["containers"][0]["env"].insert(0, {"name": BUCKET_ENV, "valueFrom": RESTORE["env"][0]["valueFrom"]})
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vllm", "namespace": "inference"}, "spec": spec}
    assert_valid([pod])
    assert [c["name"] for c in spec["initContainers"]] == [
        WAIT_CONTAINER,
        RESTORE_COMPILE_CACHE_CONTAINER,
        SAVE_COMPILE_CACHE_CONTAINER,
    ]
    # The pod's user (the vLLM image's, GID 0) owns what the restore writes, so vLLM may add to it.
    assert spec["securityContext"]["runAsUser"] == 2000
    assert all("runAsUser" not in c["securityContext"] for c in spec["initContainers"])
    yaml.safe_dump(pod)
