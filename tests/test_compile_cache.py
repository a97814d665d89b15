"""vLLM's torch.compile cache: one writer that serves nothing, readers that verify (issue 23 item 1).

compile_cache.py's `publish` and `restore` run for real against moto's S3 (If-None-Match included) and KMS (an
ECC_NIST_P256 signing key), then the writer Job, the restore init container and the AWS side: the serving role
reads and verifies, only the writer's role writes and signs, and the bucket refuses any write under compile-cache/
that could replace an object."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_eks.manifests.vllm import probe_timing
from llm_eks.manifests.vllm.compile_job import cache_key, cache_prefix, writer_name, writer_objects
from llm_eks.manifests.vllm.pod import serving_pod_spec
from llm_eks.manifests.weights_staging import (
    BUCKET_ENV,
    COMPILE_CACHE_SCRIPT_ENV,
    RESTORE_COMPILE_CACHE_CONTAINER,
    SIGNING_KEY_ENV,
    WAIT_CONTAINER,
    compile_cache_script,
)
from llm_eks.manifests.weights_staging import compile_cache as cc
from tests.kube_schema import assert_valid
from tests.moto_s3 import REGION, emptied, module_s3
from tests.test_vllm_chart import base_props

moto = pytest.importorskip("moto")

BUCKET = "llm-eks-weights-test"
PREFIX = "compile-cache/llama-3-1-8b/g6e/0123456789/"
CACHE_KEY = "0123456789"
# What vLLM 0.33 writes (vllm/compilation/backends.py, decorators.py), in miniature.
CACHE_FILES = {
    "3f2a9c1b7e/rank_0_0/backbone/vllm_compile_cache.py": b"{(1, 8192): {'graph_handle': ('a', 'b')}}\n",
    "3f2a9c1b7e/rank_0_0/backbone/computation_graph.py": b"def forward(x):\n    return x\n",
    "3f2a9c1b7e/rank_0_0/backbone/artifact_compile_range_1_8192_subgraph_0": b"\x00" * 9000,
    "torch_aot_compile/5e6d/rank_0_0/model": b"\x02" * 2048,
}

s3_module = module_s3(BUCKET)


@pytest.fixture
def s3(s3_module: Any) -> Any:
    return emptied(s3_module, BUCKET)


@pytest.fixture(scope="module")
def kms(s3_module: Any) -> Iterator[tuple[Any, str, str]]:
    """moto's KMS (inside the module's moto) with the writer's signing key and a stranger's: (client, ours, theirs)."""
    import boto3

    client = boto3.client("kms", region_name=REGION)
    keys = [client.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["Arn"] for _ in range(2)]
    yield client, keys[0], keys[1]


def write_cache(root: Path, files: dict[str, bytes] = CACHE_FILES) -> None:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def keys(s3: Any) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []))


def published(s3: Any, kms: tuple[Any, str, str], tmp_path: Path) -> None:
    write_cache(tmp_path / "src")
    cc.publish(s3, kms[0], BUCKET, PREFIX, CACHE_KEY, kms[1], tmp_path / "src")


# --- the writer ----------------------------------------------------------------------------------------------------


def test_publish_writes_the_files_then_a_manifest_then_its_signature(
    s3: Any, kms: tuple[Any, str, str], tmp_path: Path
) -> None:
    write_cache(tmp_path / "src")
    summary = cc.publish(s3, kms[0], BUCKET, PREFIX, CACHE_KEY, kms[1], tmp_path / "src")
    assert (summary.uploaded, summary.uploaded_bytes) == (4, sum(len(d) for d in CACHE_FILES.values()))
    assert keys(s3) == sorted(
        [f"{PREFIX}files/{rel}" for rel in CACHE_FILES] + [f"{PREFIX}manifest.json", f"{PREFIX}manifest.sig"]
    )
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=f"{PREFIX}manifest.json")["Body"].read())
    # What the signature covers binds the cache to where it was published: workload, GPU family and key.
    assert (manifest["format"], manifest["prefix"], manifest["cache_key"]) == (2, PREFIX, CACHE_KEY)
    assert {f["path"]: f["sha256"] for f in manifest["files"]} == {
        rel: hashlib.sha256(data).hexdigest() for rel, data in CACHE_FILES.items()
    }


def test_a_second_publish_of_a_signed_cache_changes_nothing(s3: Any, kms: tuple[Any, str, str], tmp_path: Path) -> None:
    published(s3, kms, tmp_path)
    before = keys(s3)
    (tmp_path / "src" / "torch_aot_compile/5e6d/rank_0_0/model").write_bytes(b"evil")
    summary = cc.publish(s3, kms[0], BUCKET, PREFIX, CACHE_KEY, kms[1], tmp_path / "src")
    assert summary.already_signed and keys(s3) == before


def test_the_writer_does_nothing_for_a_signed_cache_not_even_wait_for_vllm(
    s3: Any, kms: tuple[Any, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Job started again for a cache already published (its template changed, not its key) exits at once: its
    health URL here answers nothing, so any wait would never end."""
    published(s3, kms, tmp_path)
    argv = [
        "publish", "--bucket", BUCKET, "--prefix", PREFIX, "--cache-key", CACHE_KEY, "--signing-key", kms[1],
        "--region", REGION, "--src", str(tmp_path / "src"), "--health", "http://127.0.0.1:9/health",
    ]  # fmt: skip
    assert cc.main(argv) == 0
    assert (
        capsys.readouterr().out
        == f"publish-compile-cache: s3://{BUCKET}/{PREFIX} is already published and signed: nothing to do\n"
    )


def test_publish_never_replaces_an_object(s3: Any, kms: tuple[Any, str, str], tmp_path: Path) -> None:
    """An unsigned cache with a file of other content (a writer killed half way, or a write from elsewhere): S3
    refuses the overwrite (If-None-Match, 412) and publish stops instead of signing over it."""
    rel = "torch_aot_compile/5e6d/rank_0_0/model"
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}files/{rel}", Body=b"planted", Metadata={"sha256": "0" * 64})
    write_cache(tmp_path / "src")
    with pytest.raises(RuntimeError, match=r"is already there with sha256 '0{64}'.*the cache is add-only"):
        cc.publish(s3, kms[0], BUCKET, PREFIX, CACHE_KEY, kms[1], tmp_path / "src")
    assert s3.get_object(Bucket=BUCKET, Key=f"{PREFIX}files/{rel}")["Body"].read() == b"planted"
    assert f"{PREFIX}manifest.sig" not in keys(s3)


def test_publish_resumes_where_a_killed_writer_stopped(s3: Any, kms: tuple[Any, str, str], tmp_path: Path) -> None:
    rel, data = next(iter(CACHE_FILES.items()))
    digest = hashlib.sha256(data).hexdigest()
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}files/{rel}", Body=data, Metadata={"sha256": digest})
    write_cache(tmp_path / "src")
    summary = cc.publish(s3, kms[0], BUCKET, PREFIX, CACHE_KEY, kms[1], tmp_path / "src")
    assert (summary.uploaded, summary.present) == (3, 1)


# --- the readers -------------------------------------------------------------------------------------------------


def test_restore_verifies_and_restores_exactly_the_manifest(s3: Any, kms: tuple[Any, str, str], tmp_path: Path) -> None:
    published(s3, kms, tmp_path)
    summary = cc.restore(s3, kms[0], BUCKET, PREFIX, CACHE_KEY, kms[1], tmp_path / "dest")
    assert summary is not None and len(summary.restored) == 4
    assert tree(tmp_path / "dest") == CACHE_FILES


def test_restore_never_reads_a_file_the_manifest_does_not_list(
    s3: Any, kms: tuple[Any, str, str], tmp_path: Path
) -> None:
    """A compromised replica (or anyone) adding code beside a signed cache: no reader ever loads it."""
    published(s3, kms, tmp_path)
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}files/3f2a9c1b7e/rank_0_0/backbone/__init__.py", Body=b"import os")
    cc.restore(s3, kms[0], BUCKET, PREFIX, CACHE_KEY, kms[1], tmp_path / "dest")
    assert tree(tmp_path / "dest") == CACHE_FILES


def test_a_signed_cache_replayed_under_another_prefix_is_refused(
    s3: Any, kms: tuple[Any, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every object of one workload's signed cache copied, unchanged, under another workload's (or family's) prefix
    with the same key: the signature verifies, the manifest names where it was published, and the reader refuses."""
    published(s3, kms, tmp_path)
    other = PREFIX.replace("llama-3-1-8b", "qwen3-8b")
    for key in keys(s3):
        s3.copy_object(Bucket=BUCKET, Key=other + key[len(PREFIX) :], CopySource={"Bucket": BUCKET, "Key": key})
    code = cc.run_restore(s3, kms[0], BUCKET, other, CACHE_KEY, kms[1], tmp_path / "dest", deadline_seconds=60)
    assert code == 0 and not (tmp_path / "dest").exists()
    (line,) = capsys.readouterr().out.splitlines()
    assert line == (
        f"restore-compile-cache: refused s3://{BUCKET}/{other}, vLLM compiles from scratch (this run's files "
        f"removed): the manifest was published under '{PREFIX}' for key '{CACHE_KEY}', not this prefix and key"
    )


def test_a_manifest_of_the_first_format_is_never_restored(s3: Any, kms: tuple[Any, str, str], tmp_path: Path) -> None:
    """Format 1 signed the key alone. Such a manifest, signed by the right key, is not restored: and a new format is
    a new cache key, so the new writer never meets the old signature under its prefix."""
    body = json.dumps({"format": 1, "cache_key": CACHE_KEY, "files": []}, sort_keys=True, separators=(",", ":"))
    manifest = body.encode()
    signature = kms[0].sign(
        KeyId=kms[1], Message=hashlib.sha256(manifest).digest(), MessageType="DIGEST", SigningAlgorithm="ECDSA_SHA_256"
    )["Signature"]
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}manifest.json", Body=manifest)
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}manifest.sig", Body=base64.b64encode(signature))
    with pytest.raises(ValueError, match="not a format-2 manifest"):
        cc.restore(s3, kms[0], BUCKET, PREFIX, CACHE_KEY, kms[1], tmp_path / "dest")


def test_a_new_manifest_format_is_a_new_cache_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_eks.manifests.weights_staging import props as staging_props

    before = staging_props.compile_cache_key("vllm/vllm-openai:v0.33.0", ["m", "--max-model-len", "8192"])
    monkeypatch.setattr(staging_props, "COMPILE_CACHE_FORMAT", cc.FORMAT + 1)
    assert staging_props.compile_cache_key("vllm/vllm-openai:v0.33.0", ["m", "--max-model-len", "8192"]) != before


@pytest.mark.parametrize("threat", ["unsigned", "forged", "tampered", "other-key"])
def test_restore_refuses_a_cache_it_cannot_trust_and_leaves_nothing(
    s3: Any, kms: tuple[Any, str, str], tmp_path: Path, threat: str, capsys: pytest.CaptureFixture[str]
) -> None:
    published(s3, kms, tmp_path)
    rel = "3f2a9c1b7e/rank_0_0/backbone/computation_graph.py"
    if threat == "unsigned":
        s3.delete_object(Bucket=BUCKET, Key=f"{PREFIX}manifest.sig")
    elif threat == "forged":
        # Signed by a key that is not the cache's: a manifest anyone could write.
        manifest = s3.get_object(Bucket=BUCKET, Key=f"{PREFIX}manifest.json")["Body"].read()
        other = kms[0].sign(
            KeyId=kms[2], Message=hashlib.sha256(manifest).digest(), MessageType="DIGEST",
            SigningAlgorithm="ECDSA_SHA_256",
        )["Signature"]  # fmt: skip
        s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}manifest.sig", Body=base64.b64encode(other))
    elif threat == "tampered":
        s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}files/{rel}", Body=b"import os; os.system('curl evil')\n")
    code = cc.run_restore(
        s3, kms[0], BUCKET, PREFIX, CACHE_KEY, kms[2] if threat == "other-key" else kms[1], tmp_path / "dest",
        deadline_seconds=60,
    )  # fmt: skip
    assert code == 0
    assert not any(p.is_file() for p in (tmp_path / "dest").rglob("*"))
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"restore-compile-cache: refused s3://{BUCKET}/{PREFIX}, vLLM compiles from scratch")
    reason = {
        "unsigned": "the manifest is not signed (yet)",
        "forged": "the manifest's signature does not verify",
        "other-key": "the manifest's signature does not verify",
        "tampered": f"{rel}: ",
    }[threat]
    assert reason in line


def test_restore_of_a_cache_not_yet_published_is_a_cold_start(
    s3: Any, kms: tuple[Any, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cc.run_restore(s3, kms[0], BUCKET, PREFIX, CACHE_KEY, kms[1], tmp_path / "d", deadline_seconds=60) == 0
    assert "has no manifest yet (the writer Job publishes it" in capsys.readouterr().out


def test_the_program_runs_with_the_standard_library_and_boto3_alone(tmp_path: Path) -> None:
    """As the vLLM image runs it: `python3 -c <file>` in a fresh interpreter; --help of each mode, no import error."""
    for mode in ("restore", "publish"):
        result = subprocess.run(
            [sys.executable, "-I", "-c", compile_cache_script(), mode, "--help"], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
    assert "$(" not in compile_cache_script()
    assert "delete_object" not in compile_cache_script()


# --- the objects ---------------------------------------------------------------------------------------------------


def _props() -> Any:
    from dataclasses import replace

    return replace(
        base_props(),
        staged_weights=("models/acme/tiny-llm/main/", "0123456789"),
        weights="s3",
        model=f"s3://$({BUCKET_ENV})/models/acme/tiny-llm/main/",
        compile_cache="compile-cache/vllm-test/g6e/",
        api_key_secret="llm-eks/test/api-key",
        hf_token_secret="llm-eks/test/hf-token",
    )


def test_the_writer_job_serves_nothing_and_holds_no_client_secret() -> None:
    props = _props()
    timing = probe_timing(props)
    account, job = writer_objects(props, timing)
    assert account["metadata"]["name"] == writer_name(props) == f"{props.name}-compile-cache"
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == writer_name(props) and pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    # No key, no Hub token: nothing of a client's, nothing to download from the Hub.
    assert not [v for v in pod["volumes"] if "csi" in v]
    assert not [e for e in container["env"] if e["name"] in ("HF_TOKEN_PATH", "VLLM_API_KEY")]
    # Not a replica: no Service, InferencePool, PDB or NetworkPolicy of the workload selects it.
    assert job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "vllm-compile-cache"
    assert "startupProbe" not in container and "readinessProbe" not in container
    # The same server the Deployment runs, on the same GPUs, but reachable from its own pod only.
    serving = serving_pod_spec(props, timing, {"app": "x"})["containers"][0]
    assert container["resources"] == serving["resources"] and container["args"][0] == serving["args"][0]
    host = container["args"].index("--host")
    assert container["args"][host + 1] == "127.0.0.1" and serving["args"][host + 1] == "0.0.0.0"
    assert [a for i, a in enumerate(container["args"]) if i != host + 1] == [
        a for i, a in enumerate(serving["args"]) if i != host + 1
    ]
    assert "ports" not in container and "ports" in serving
    assert [c["name"] for c in pod["initContainers"]] == [WAIT_CONTAINER]
    command = container["command"][2]
    assert f'publish --bucket "${BUCKET_ENV}" --prefix {cache_prefix(props)} --cache-key {cache_key(props)}' in command
    assert f'--signing-key "${SIGNING_KEY_ENV}"' in command
    assert "--health http://127.0.0.1:8000/health" in command
    assert {e["name"] for e in container["env"]} >= {COMPILE_CACHE_SCRIPT_ENV, SIGNING_KEY_ENV, BUCKET_ENV}
    assert_valid([account, job])


def test_a_replica_restores_the_cache_of_its_own_key_and_never_writes() -> None:
    props = _props()
    pod = serving_pod_spec(props, probe_timing(props), {"app": "x"})
    restore = next(c for c in pod["initContainers"] if c["name"] == RESTORE_COMPILE_CACHE_CONTAINER)
    args = restore["args"]
    assert args[: args.index("--dest")] == [
        "restore", "--bucket", f"$({BUCKET_ENV})", "--prefix", cache_prefix(props), "--cache-key", cache_key(props),
        "--signing-key", f"$({SIGNING_KEY_ENV})",
    ]  # fmt: skip
    assert all(c.get("restartPolicy") != "Always" for c in pod["initContainers"]), "no uploading sidecar"


def test_any_change_to_the_writers_pod_template_is_a_new_job() -> None:
    """A Job's template is immutable: the Job is named after it, so a changed template is a new Job (and the old
    one is pruned), never an update the API server would refuse mid-deploy."""
    from dataclasses import replace

    props = _props()
    timing = probe_timing(props)
    _, job = writer_objects(props, timing)
    assert job["metadata"]["name"] == writer_objects(props, timing)[1]["metadata"]["name"]
    assert (
        job["metadata"]["name"].startswith(f"{props.name}-cc-")
        and len(job["metadata"]["name"]) == len(props.name) + 4 + 10
    )
    # Another region: the same server, the same cache key, another template.
    other = replace(props, aws_region="eu-central-1")
    assert cache_key(other) == cache_key(props)
    assert writer_objects(other, timing)[1]["metadata"]["name"] != job["metadata"]["name"]


def test_a_changed_engine_argument_is_a_new_cache_key() -> None:
    from dataclasses import replace

    props = _props()
    other = replace(props, extra_engine_args=("--enforce-eager",))
    assert cache_key(props) != cache_key(other)
    assert cache_key(props) == cache_key(replace(props, replicas=3))


def test_the_writer_job_keeps_its_name_until_its_pod_template_changes() -> None:
    """The stack's prune label removes the old Job, so the name moves only with the template: a replica count
    leaves it, an engine argument (a new key) or a new release's wait script (the same key) moves it."""
    from dataclasses import replace

    from llm_eks.manifests.vllm.compile_job import job_name

    props = _props()
    timing = probe_timing(props)
    _, job = writer_objects(props, timing)
    assert job["metadata"]["name"] == job_name(props, job["spec"]["template"])
    assert writer_objects(replace(props, replicas=3), timing)[1]["metadata"]["name"] == job["metadata"]["name"]
    changed = writer_objects(replace(props, extra_engine_args=("--enforce-eager",)), timing)[1]
    assert changed["metadata"]["name"] != job["metadata"]["name"]
    edited = json.loads(json.dumps(job["spec"]["template"]))
    edited["spec"]["initContainers"][0]["command"][-1] += "\n"
    assert job_name(props, edited) != job["metadata"]["name"]


# --- a Neuron engine that must not compile (restore --required) ----------------------------------------------------


def test_a_required_restore_waits_for_the_writer_and_then_restores(
    s3: Any, kms: tuple[Any, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 2:  # the writer Job publishes while the serving pod waits in Init
            published(s3, kms, tmp_path)

    code = cc.run_restore_required(
        s3, kms[0], BUCKET, PREFIX, CACHE_KEY, kms[1], tmp_path / "dest", deadline_seconds=600, sleep=sleep
    )
    assert (code, len(naps)) == (0, 2)
    assert tree(tmp_path / "dest") == CACHE_FILES
    assert "waiting for the writer Job to publish" in capsys.readouterr().out


@pytest.mark.parametrize("case", ["never-published", "unsigned"])
def test_a_required_restore_fails_the_init_container_without_a_trusted_cache(
    s3: Any, kms: tuple[Any, str, str], tmp_path: Path, case: str
) -> None:
    if case == "unsigned":
        published(s3, kms, tmp_path)
        s3.delete_object(Bucket=BUCKET, Key=f"{PREFIX}manifest.sig")
    ticks = iter(range(0, 100_000, 100))
    code = cc.run_restore_required(
        s3, kms[0], BUCKET, PREFIX, CACHE_KEY, kms[1], tmp_path / "dest", deadline_seconds=1800,
        clock=lambda: float(next(ticks)), sleep=lambda _: None,
    )  # fmt: skip
    assert code == 1
    assert not any(p.is_file() for p in (tmp_path / "dest").rglob("*"))


def test_required_is_a_flag_of_the_restore_mode_only() -> None:
    args = cc.parser().parse_args(["restore", *_ARGS, "--dest", "/d", "--required", "--deadline-seconds", "1800"])
    assert (args.required, args.deadline_seconds) == (True, 1800.0)
    assert not cc.parser().parse_args(["restore", *_ARGS, "--dest", "/d"]).required
    with pytest.raises(SystemExit):
        cc.parser().parse_args(["publish", *_ARGS, "--src", "/s", "--health", "http://x", "--required"])
    # No bucket (the ConfigMap lacks it): a required restore fails instead of letting the engine start without it.
    assert cc.main(["restore", "--bucket", "", *_ARGS[2:], "--dest", "/d", "--required"]) == 1
    assert cc.main(["restore", "--bucket", "", *_ARGS[2:], "--dest", "/d"]) == 0


_ARGS = ["--bucket", BUCKET, "--prefix", PREFIX, "--cache-key", CACHE_KEY, "--signing-key", "arn:aws:kms:k"]
