"""`llm-eks models add` against a local stand-in for the Hugging Face Hub, and the recorded file read offline by
config loading, `llm-eks plan` and the CDK app.

The Hub is an `http.server` on 127.0.0.1 serving tests/fixtures/hub (see its README: copies and constructed
responses, nothing recorded live); HF_ENDPOINT points at it, as it would at a mirror.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from llm_eks.cli import main
from llm_eks.cli.models import add_command
from llm_eks.config import parse_environment
from llm_eks.error_codes import E103
from llm_eks.errors import ConfigError
from llm_eks.hub.records import MODELS_DIR_CONTEXT, checkpoint_parameters, load_record
from tests.coded import raises_code
from tests.conftest import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "hub"
QWEN = "Qwen/Qwen3-8B"
QWEN_SHA = "eef7794f8575fc18fd728a40545bf764d291573f"  # sha1("fixture:Qwen/Qwen3-8B"), not a real commit
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_SHA = "3740f5931afc73425f09a88a966de0d8dbdacd96"
TOKEN = "hf_fixturetoken"
NOW = datetime(2026, 11, 30, 17, 0, 0, tzinfo=UTC)


class FakeHub:
    """Routes GET paths (with query) to (status, headers, body); answers Range requests; records what was asked."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.base = ""

    def file(self, path: str, body: bytes, status: int = 200, **headers: str) -> None:
        self.routes[path] = (status, headers, body)

    def json(self, path: str, body: Any, status: int = 200, **headers: str) -> None:
        self.file(path, json.dumps(body).encode(), status, **{"Content-Type": "application/json", **headers})


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hub.requests.append((self.path, dict(self.headers.items())))
            status, headers, body = hub.routes.get(
                self.path, (404, {"X-Error-Code": "EntryNotFound"}, b'{"error":"Entry not found"}')
            )
            ranged = self.headers.get("Range")
            if ranged and status == 200:
                start, _, end = ranged.removeprefix("bytes=").partition("-")
                body, status = body[int(start) : int(end) + 1], 206
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:  # keep pytest output clean
            pass

    return Handler


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    fake = FakeHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    fake.base = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("HF_ENDPOINT", fake.base)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    for model, sha in ((QWEN, QWEN_SHA), (LLAMA, LLAMA_SHA)):
        folder = FIXTURES / model
        fake.file(f"/api/models/{model}/revision/main?blobs=true", (folder / "model_info.json").read_bytes())
        for name in ("config.json", "model.safetensors.index.json"):
            if (folder / name).exists():
                fake.file(f"/{model}/resolve/{sha}/{name}", (folder / name).read_bytes())
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def add(models: Path, model: str, revision: str = "main") -> int:
    return add_command(argparse.Namespace(model=model, revision=revision, dir=str(models)), now=lambda: NOW)


def one_line(err: str) -> str:
    assert err.count("\n") == 1, err
    return err.rstrip("\n")


# -- models add ---------------------------------------------------------------------------------------------------


def test_add_writes_the_reviewed_file(hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    models = tmp_path / "models"
    assert add(models, QWEN) == 0
    path = models / "Qwen" / "Qwen3-8B.json"
    config = json.loads((FIXTURES / QWEN / "config.json").read_text())
    assert json.loads(path.read_text()) == {
        "format": 1,
        "id": QWEN,
        "revision": "main",
        "commit": QWEN_SHA,
        "fetched_at": "2026-11-30T17:00:00Z",
        "total_size": 16_381_470_720,
        "total_size_from": "model.safetensors.index.json metadata.total_size",
        "total_parameters": None,
        "config": config,
        "quantization_file": None,
        "sources": {
            "model_info": f"{hub.base}/api/models/{QWEN}/revision/main?blobs=true",
            "config.json": f"{hub.base}/{QWEN}/resolve/{QWEN_SHA}/config.json",
            "model.safetensors.index.json": f"{hub.base}/{QWEN}/resolve/{QWEN_SHA}/model.safetensors.index.json",
        },
    }
    # Keys in the documented order, config keys as published: the diff a reviewer reads is the Hub's own.
    text = path.read_text()
    assert list(json.loads(text)) == ["format", "id", "revision", "commit", "fetched_at", "total_size",
                                      "total_size_from", "total_parameters", "config", "quantization_file",
                                      "sources"]  # fmt: skip
    assert list(json.loads(text)["config"]) == list(config)
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"wrote {path}: {QWEN}@{QWEN_SHA}, 16.38 GB of weights",
        "planner reads it as 8.19B parameters, 36 layers",
    ]
    # Every file came from the resolved commit, and no token was sent (none was set).
    assert [p for p, _ in hub.requests] == [
        f"/api/models/{QWEN}/revision/main?blobs=true",
        f"/{QWEN}/resolve/{QWEN_SHA}/config.json",
        f"/{QWEN}/resolve/{QWEN_SHA}/model.safetensors.index.json",
    ]
    assert all("Authorization" not in headers for _, headers in hub.requests)


def test_add_through_the_cli_and_again_shows_the_moved_commit(
    hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = tmp_path / "models"
    assert main(["models", "add", QWEN, "--dir", str(models)]) == 0
    record = load_record(models / "Qwen" / "Qwen3-8B.json", QWEN)
    assert record.fetched_at.endswith("Z") and record.commit == QWEN_SHA
    capsys.readouterr()
    moved = "0" * 40
    info = json.loads((FIXTURES / QWEN / "model_info.json").read_text())
    hub.json(f"/api/models/{QWEN}/revision/v2?blobs=true", {**info, "sha": moved})
    for name in ("config.json", "model.safetensors.index.json"):
        hub.file(f"/{QWEN}/resolve/{moved}/{name}", (FIXTURES / QWEN / name).read_bytes())
    assert main(["models", "add", QWEN, "--dir", str(models), "--revision", "v2"]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith(f"@{moved} (was {QWEN_SHA}), 16.38 GB of weights")


def test_gated_model_without_a_token(hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hub.json(
        f"/{LLAMA}/resolve/{LLAMA_SHA}/config.json",
        {"error": f"Access to model {LLAMA} is restricted. You must have access to it and be authenticated."},
        status=401,
        **{"X-Error-Code": "GatedRepo"},
    )
    assert add(tmp_path / "models", LLAMA) == 1
    assert one_line(capsys.readouterr().err) == (
        f"llm-eks: error: {LLAMA} is a gated model and HF_TOKEN is not set (HTTP 401): accept the model's licence "
        f"at {hub.base}/{LLAMA} with your Hugging Face account, then set HF_TOKEN to a read token of that account"
        " [LLMEKS-E706]"
    )
    assert not (tmp_path / "models").exists()


def test_gated_model_with_a_token_that_has_no_access(
    hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub.json(f"/{LLAMA}/resolve/{LLAMA_SHA}/config.json", {"error": "not in the authorized list"}, status=403,
             **{"X-Error-Code": "GatedRepo"})  # fmt: skip
    assert main(["models", "add", LLAMA, "--dir", str(tmp_path / "models")]) == 1
    assert one_line(capsys.readouterr().err) == (
        f"llm-eks: error: {LLAMA} is a gated model and the token in HF_TOKEN has no access (HTTP 403): accept the "
        f"model's licence at {hub.base}/{LLAMA} with your Hugging Face account, then set HF_TOKEN to a read token of "
        "that account [LLMEKS-E706]"
    )


def test_gated_model_with_an_accepted_token(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    config = (FIXTURES / LLAMA / "config.json").read_bytes()
    index = {"metadata": {"total_parameters": 8_030_261_248, "total_size": 16_060_522_496}, "weight_map": {}}
    hub.file(f"/{LLAMA}/resolve/{LLAMA_SHA}/config.json", config)
    hub.json(f"/{LLAMA}/resolve/{LLAMA_SHA}/model.safetensors.index.json", index)
    assert main(["models", "add", LLAMA, "--dir", str(tmp_path / "models")]) == 0
    assert all(headers.get("Authorization") == f"Bearer {TOKEN}" for _, headers in hub.requests)
    record = load_record(tmp_path / "models" / "meta-llama" / "Llama-3.1-8B-Instruct.json", LLAMA)
    assert (record.total_size, record.total_parameters) == (16_060_522_496, 8_030_261_248)
    assert "planner reads it as 8.03B parameters, 32 layers" in capsys.readouterr().out


def test_missing_model(hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hub.json("/api/models/acme/missing/revision/main?blobs=true", {"error": "Repository not found"}, status=404,
             **{"X-Error-Code": "RepoNotFound"})  # fmt: skip
    assert main(["models", "add", "acme/missing", "--dir", str(tmp_path / "models")]) == 1
    assert one_line(capsys.readouterr().err) == (
        f"llm-eks: error: acme/missing: no such model on {hub.base} (HTTP 404); check the id; a private model needs "
        "HF_TOKEN [LLMEKS-E706]"
    )


def test_hub_unreachable(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    assert main(["models", "add", QWEN, "--dir", str(tmp_path / "models")]) == 1
    err = one_line(capsys.readouterr().err)
    assert err.startswith(f"llm-eks: error: 127.0.0.1:{port} unreachable (")
    assert err.endswith(
        "); `llm-eks models add` needs the Hugging Face Hub (or a mirror in HF_ENDPOINT); synth and `llm-eks plan` "
        "then read the recorded file offline [LLMEKS-E705]"
    )
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["models", "add", "not-an-id"], "llm-eks: error: models add: 'not-an-id' is not allowed; must be a Hugging "),
        (["models", "add", "../etc/passwd"], "llm-eks: error: models add: '../etc/passwd' is not allowed; "),
        (["models", "add", QWEN, "--revision", "a b"], "llm-eks: error: --revision: 'a b' is not allowed; "),
        (["models"], "llm-eks: error: the following arguments are required: ACTION [LLMEKS-E600]"),
    ],
)
def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(argv) == 2
    assert one_line(capsys.readouterr().err).startswith(message)


def safetensors_bytes(tensors: dict[str, tuple[str, list[int], int]]) -> tuple[bytes, int]:
    """A real safetensors file (header + zeroed data) and its tensor bytes: name -> (dtype, shape, bytes per item)."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape, item) in tensors.items():
        size = item
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + bytes(offset), offset


def test_single_file_checkpoint_counts_tensor_bytes_exactly(hub: FakeHub, tmp_path: Path) -> None:
    body, tensor_bytes = safetensors_bytes({"embed": ("BF16", [64, 32], 2), "proj": ("BF16", [32, 32], 2)})
    sha = "1" * 40
    files = [{"rfilename": "config.json"}, {"rfilename": "model.safetensors", "size": len(body)}]
    hub.json("/api/models/acme/tiny/revision/main?blobs=true", {"id": "acme/tiny", "sha": sha, "siblings": files})
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 1,
              "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 64, "vocab_size": 64,
              "max_position_embeddings": 2048, "torch_dtype": "bfloat16", "id2label": {"0": "a", "1": "b"}}  # fmt: skip
    hub.json(f"/acme/tiny/resolve/{sha}/config.json", config)
    hub.file(f"/acme/tiny/resolve/{sha}/model.safetensors", body)
    assert add(tmp_path / "models", "acme/tiny") == 0
    record = load_record(tmp_path / "models" / "acme" / "tiny.json", "acme/tiny")
    assert record.total_size == tensor_bytes == 6144
    assert record.total_size_from == "model.safetensors size minus its header"
    assert "id2label" not in record.config  # label maps are dropped
    # Only the first 8 bytes were read, never the weights.
    assert hub.requests[-1][1]["Range"] == "bytes=0-7"


def test_separate_quantization_config_is_recorded_and_read_as_vllm_reads_it(hub: FakeHub, tmp_path: Path) -> None:
    sha = "2" * 40
    config = json.loads((FIXTURES / LLAMA / "config.json").read_text())
    # A ModelOpt <= 0.29 FP8 export (the unified HF checkpoint format): the quantization config sits beside
    # config.json. quant_method makes it one the current planner reads; the file is recorded whatever it holds.
    quant = {"producer": {"name": "modelopt", "version": "0.29.0"}, "quant_method": "fp8",
             "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None}}  # fmt: skip
    hub.json("/api/models/acme/llama-fp8/revision/main?blobs=true",
             {"id": "acme/llama-fp8", "sha": sha, "siblings": [{"rfilename": n} for n in (
                 "config.json", "hf_quant_config.json", "model.safetensors.index.json")]})  # fmt: skip
    hub.json(f"/acme/llama-fp8/resolve/{sha}/config.json", config)
    hub.json(f"/acme/llama-fp8/resolve/{sha}/hf_quant_config.json", quant)
    hub.json(f"/acme/llama-fp8/resolve/{sha}/model.safetensors.index.json", {"metadata": {"total_size": 9_000_000_000}})
    assert add(tmp_path / "models", "acme/llama-fp8") == 0
    record = load_record(tmp_path / "models" / "acme" / "llama-fp8.json", "acme/llama-fp8")
    assert record.quantization_file == ("hf_quant_config.json", quant)
    assert record.config == config  # config.json itself unchanged
    assert record.effective_config()["quantization_config"] == quant
    # Bytes of a quantized checkpoint do not give its parameter count exactly.
    assert checkpoint_parameters(record) is None


# -- offline use ---------------------------------------------------------------------------------------------------


@pytest.fixture
def recorded(hub: FakeHub, tmp_path: Path) -> Path:
    """An app folder holding cdk.json and models/Qwen/Qwen3-8B.json, recorded from the fake Hub."""
    assert add(tmp_path / "models", QWEN) == 0
    workload = {"model": QWEN, "max_model_len": 8192, "accelerator": "g6e.xlarge"}
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"environments": {"lab": {"workload": workload}}}}))
    return tmp_path


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a network connection fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("network access while offline")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_plan_reads_the_recorded_model_offline(
    recorded: Path, offline: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    models = str(recorded / "models")
    code = main(["plan", "--model", QWEN, "--models-dir", models, "--accelerator", "g6e.xlarge", "--max-model-len",
                 "8192", "--json"])  # fmt: skip
    body = json.loads(capsys.readouterr().out)
    assert code == 0
    assert body["model"]["id"] == QWEN and body["model"]["parameters"] == 8_190_735_360
    # --env reads the models folder beside --context-file, as synth reads it beside cdk.json.
    assert main(["plan", "--env", "lab", "--context-file", str(recorded / "cdk.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["parameters"] == 8_190_735_360
    # The default folder is models in the working directory.
    monkeypatch.chdir(recorded)
    assert main(["plan", "--model", QWEN, "--accelerator", "g6e.xlarge", "--max-model-len", "8192", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["parameters"] == 8_190_735_360


def test_config_loading_reads_the_file_and_names_a_missing_one(recorded: Path, offline: None) -> None:
    config = parse_environment("lab", {"workload": {"model": QWEN}}, recorded / "models")
    spec = config.workload.recorded_model
    assert spec is not None and (spec.id, spec.parameters, spec.layers, spec.kv_heads) == (QWEN, 8_190_735_360, 36, 8)
    assert config.workload.plan_request().model == spec
    with pytest.raises(ConfigError) as err:
        parse_environment("lab", {"workload": {"model": "Qwen/Qwen3-14B"}}, recorded / "models")
    missing = recorded / "models" / "Qwen" / "Qwen3-14B.json"
    assert str(err.value) == (
        "environments.lab.workload.model: 'Qwen/Qwen3-14B' is not allowed; not a catalog model and "
        f"{missing} does not exist: run `llm-eks models add Qwen/Qwen3-14B` in the app's folder to record it from "
        "the Hugging Face Hub, or describe it with workload.model_spec (`llm-eks plan --catalog` lists the catalog)"
        " [LLMEKS-E200]"
    )
    # Catalog ids keep working without a file; model_spec needs none either.
    assert parse_environment("lab", {}, recorded / "models").workload.recorded_model is None
    # The resolved model is the loader's, never a cdk.json key.
    with raises_code(E103, match=r"^environments.lab.workload: unknown key 'recorded_model'; "):
        parse_environment("lab", {"workload": {"recorded_model": {}}}, recorded / "models")


def test_a_recorded_catalog_model_wins_and_keeps_its_awq_checkpoint(hub: FakeHub, tmp_path: Path) -> None:
    hub.json(f"/{LLAMA}/resolve/{LLAMA_SHA}/model.safetensors.index.json",
             {"metadata": {"total_size": 16_060_522_496}})  # fmt: skip
    hub.file(f"/{LLAMA}/resolve/{LLAMA_SHA}/config.json", (FIXTURES / LLAMA / "config.json").read_bytes())
    assert add(tmp_path / "models", LLAMA) == 0
    spec = parse_environment("lab", {"workload": {"model": LLAMA}}, tmp_path / "models").workload.recorded_model
    assert spec is not None and spec.parameters == 16_060_522_496 // 2
    assert spec.awq_checkpoint == "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace('"format": 1', '"format": 1, "format": 2'), "models/Qwen/Qwen3-8B.json.format: given "
         "twice in"),
        (lambda t: t.replace(f'"id": "{QWEN}"', '"id": "Qwen/Qwen3-4B"'), "models/Qwen/Qwen3-8B.json.id: "
         "'Qwen/Qwen3-4B' is not allowed; must be 'Qwen/Qwen3-8B', the id this file's path names [LLMEKS-E708]"),
        (lambda t: t.replace('"total_size": 16381470720', '"total_size": -1'), "models/Qwen/Qwen3-8B.json."
         "total_size: -1 is not allowed; must be a number of bytes"),
        (lambda t: t.replace(f'"commit": "{QWEN_SHA}"', '"commit": "main"'), "models/Qwen/Qwen3-8B.json.commit: "
         "'main' is not allowed; must be a 40-character"),
        (lambda t: t.replace('"num_hidden_layers": 36', '"num_hidden_layers": 0'), "models/Qwen/Qwen3-8B.json: "
         "config.num_hidden_layers: 0 is not allowed; must be a positive integer [LLMEKS-E203]"),
        (lambda t: t.replace('"sources"', '"source"'), "models/Qwen/Qwen3-8B.json: unknown key 'source'; did you "
         "mean 'sources'?"),
    ],
)  # fmt: skip
def test_a_bad_file_is_one_line_naming_it(recorded: Path, monkeypatch: pytest.MonkeyPatch, edit: Any,
                                          message: str) -> None:  # fmt: skip
    path = recorded / "models" / "Qwen" / "Qwen3-8B.json"
    path.write_text(edit(path.read_text()))
    monkeypatch.chdir(recorded)  # relative paths, as a user at the app's folder sees them
    with pytest.raises(ConfigError) as err:
        parse_environment("lab", {"workload": {"model": QWEN}})
    assert "\n" not in str(err.value) and message in str(err.value), str(err.value)


def test_the_app_reads_the_models_folder_it_is_given(recorded: Path, offline: None) -> None:
    import aws_cdk as cdk

    from llm_eks.infra.app import build_app

    context = json.loads((recorded / "cdk.json").read_text())["context"]
    app = cdk.App(context={**context, MODELS_DIR_CONTEXT: str(recorded / "models")})
    (stack,) = build_app(app)
    assert stack.plan.model.parameters == 8_190_735_360 and stack.plan.model.id == QWEN
    assert stack.workload.vllm.model == QWEN


def test_token_goes_to_the_hub_only_never_to_the_host_it_redirects_to(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Hub answers a large file's /resolve/ with a redirect to its CDN; the token must not follow it there."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    cdn = FakeHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(cdn))
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        body, tensor_bytes = safetensors_bytes({"w": ("F16", [16, 16], 2)})
        sha = "3" * 40
        files = [{"rfilename": "config.json"}, {"rfilename": "model.safetensors", "size": len(body)}]
        hub.json("/api/models/acme/cdn/revision/main?blobs=true", {"id": "acme/cdn", "sha": sha, "siblings": files})
        hub.json(f"/acme/cdn/resolve/{sha}/config.json", {"num_hidden_layers": 1})
        hub.file(f"/acme/cdn/resolve/{sha}/model.safetensors", b"", status=302,
                 Location=f"http://127.0.0.1:{server.server_address[1]}/blob?signed=1")  # fmt: skip
        cdn.file("/blob?signed=1", body)
        assert add(tmp_path / "models", "acme/cdn") == 0
    finally:
        server.shutdown()
        server.server_close()
    assert load_record(tmp_path / "models" / "acme" / "cdn.json", "acme/cdn").total_size == tensor_bytes
    assert all(headers.get("Authorization") == f"Bearer {TOKEN}" for _, headers in hub.requests)
    ((_, headers),) = cdn.requests
    assert headers["Range"] == "bytes=0-7" and "Authorization" not in headers


def test_bad_hf_endpoint_and_unwritable_dir(
    hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "models").write_text("a file, not a folder")
    assert main(["models", "add", QWEN, "--dir", str(tmp_path / "models")]) == 2
    folder = tmp_path / "models"
    assert one_line(capsys.readouterr().err).startswith(
        f"llm-eks: error: --dir: '{folder}' is not allowed; {folder / 'Qwen' / 'Qwen3-8B.json'} cannot be written ("
    )
    monkeypatch.setenv("HF_ENDPOINT", "huggingface.co")
    assert main(["models", "add", QWEN, "--dir", str(tmp_path / "other")]) == 1
    assert one_line(capsys.readouterr().err) == (
        "llm-eks: error: HF_ENDPOINT: 'huggingface.co' is not allowed; must be a URL such as https://huggingface.co"
        " [LLMEKS-E707]"
    )


def test_images_lock_reads_the_models_folder_beside_its_context_file(recorded: Path, offline: None) -> None:
    from llm_eks.cli.images import environments_of

    (lab,) = environments_of(argparse.Namespace(context_file=str(recorded / "cdk.json"), env="lab"))
    assert lab.workload.recorded_model is not None and lab.workload.recorded_model.id == QWEN
