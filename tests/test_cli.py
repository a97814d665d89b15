"""`llm-eks plan`: table and JSON output, --env from cdk.json, --catalog, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llm_eks.cli import main

REPO_ROOT = Path(__file__).resolve().parents[1]
X = "\N{MULTIPLICATION SIGN}"  # the sign in "1x L40S"
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "plan", "--model", LLAMA_8B, "--accelerator", "g6e.xlarge", "--max-model-len", "8192")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == (
        f"Llama-3.1-8B-Instruct on g6e.xlarge (1{X} L40S): TP1 PP1, 1 replica/node, KV 200k tokens, $1.86/h per replica"
    )
    assert any(line.startswith("Engine args") and "--tensor-parallel-size 1" in line for line in lines)
    assert any(line.startswith("Pod requests") and "nvidia.com/gpu 1" in line for line in lines)
    assert "Assumptions:" in lines


def test_json_output_parses(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "plan", "--model", "meta-llama/Llama-3.3-70B-Instruct", "--weight-format", "fp8",
        "--max-model-len", "16384", "--target-concurrency", "32", "--json",
    )  # fmt: skip
    assert code == 0
    body = json.loads(out)
    assert body["model"]["weight_format"] == "fp8"
    assert body["concurrency"]["meets_target"] is True
    assert "--quantization" in body["engine_args"]
    assert set(body) >= {"instance", "parallelism", "memory", "cost", "cold_start", "pod_resources", "assumptions"}


def test_plan_warnings_are_printed_with_their_ids(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("plan", "--model", "meta-llama/Llama-3.3-70B-Instruct", "--weight-format", "fp8", "--accelerator",
            "g6e.12xlarge", "--target-concurrency", "256", "--max-itl-ms", "50")  # fmt: skip
    code, out, _ = run(capsys, *argv)
    assert code == 0
    warnings = [line.split(None, 1)[1] for line in out.splitlines() if line.startswith("Warning ")]
    assert warnings == [
        "only 226 of the 256 target sequences of 1280 tokens fit one replica on g6e.12xlarge; max_num_seqs is capped "
        "at 226 [ack: llm-eks:plan-concurrency]",
        "time-per-output-token estimate 342.7 ms exceeds max_itl_ms 50 [ack: llm-eks:plan-itl]",
    ]
    code, out, _ = run(capsys, *argv, "--json")
    assert [w["id"] for w in json.loads(out)["warnings"]] == ["llm-eks:plan-concurrency", "llm-eks:plan-itl"]


def test_env_reads_the_workload_from_cdk_json(capsys: pytest.CaptureFixture[str]) -> None:
    context = str(REPO_ROOT / "cdk.json")
    code, out, _ = run(capsys, "plan", "--env", "dev", "--context-file", context, "--json")
    assert code == 0
    body = json.loads(out)
    workload = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]["environments"]["dev"]["workload"]
    assert body["model"]["id"] == workload["model"]
    assert body["model"]["max_model_len"] == workload["max_model_len"]
    assert body["concurrency"]["target"] == workload["target_concurrency"]


def test_env_with_overrides(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    context = tmp_path / "cdk.json"
    workload = {"model": "Qwen/Qwen2.5-7B-Instruct", "max_model_len": 16384, "target_concurrency": 8}
    context.write_text(
        json.dumps({"app": "python3 app.py", "context": {"environments": {"lab": {"workload": workload}}}})
    )
    code, out, _ = run(capsys, "plan", "--env", "lab", "--context-file", str(context), "--accelerator", "g6e.xlarge")
    assert code == 0
    assert out.startswith(f"Qwen2.5-7B-Instruct on g6e.xlarge (1{X} L40S): TP1 PP1")


def test_model_config_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
        "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, _ = run(
        capsys, "plan", "--model", "acme/llama-clone", "--model-config", str(tmp_path), "--max-model-len", "8192",
        "--accelerator", "g6e.xlarge", "--json",
    )  # fmt: skip
    assert code == 0
    body = json.loads(out)
    assert body["model"]["parameters"] == 8_030_261_248  # estimated from the config, exactly Llama 3.1 8B's count
    assert body["memory"]["kv_cache_tokens"] == 199_856


def test_catalog_lists_models_and_instance_types(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--catalog")
    assert code == 0 and LLAMA_8B in out and "p5en.48xlarge" in out and "inf2.xlarge" in out
    code, out, _ = run(capsys, "plan", "--catalog", "--json")
    body = json.loads(out)
    assert {m["id"] for m in body["models"]} >= {LLAMA_8B, "Qwen/Qwen2.5-72B-Instruct"}
    g6e = next(i for i in body["instance_types"] if i["instance_type"] == "g6e.xlarge")
    assert g6e["extended_resource"] == "nvidia.com/gpu" and g6e["on_demand_usd_per_hour"] == 1.861
    assert g6e["compute_capability"] == [8, 9]


def test_catalog_shows_compute_capability(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "plan", "--catalog")
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ") and "." in line}
    assert "CC" in out.split("Instance types", 1)[1].splitlines()[1].split()
    # name, count, accelerator, GiB, CC, ...
    assert rows["g5.xlarge"][4] == "8.6" and rows["p6-b200.48xlarge"][4] == "10.0" and rows["inf2.xlarge"][4] == "-"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "--model", "acme/unknown"], "llm-eks: error: workload.model: 'acme/unknown' is not allowed; "),
        (["plan", "--model", LLAMA_8B, "--max-model-len", "8k"], "llm-eks: error: argument --max-model-len: invalid "),
        (["plan", "--model", LLAMA_8B, "--weight-format", "int3"], "llm-eks: error: workload.weight_format: 'int3' "),
        ([], "llm-eks: error: a command is required: plan (see llm-eks --help) [LLMEKS-E600]"),
        (["plan"], "llm-eks: error: give exactly one of --model, --env NAME or --catalog [LLMEKS-E600]"),
        (["plan", "--model", LLAMA_8B, "--env", "dev"], "llm-eks: error: give exactly one of --model, --env NAME"),
        (["plan", "--env", "dev", "--context-file", "/nonexistent/cdk.json"], "llm-eks: error: --context-file: "),
        (["plan", "--env", "nope", "--context-file", str(REPO_ROOT / "cdk.json")], "llm-eks: error: env: 'nope' "),
        (
            ["plan", "--model", LLAMA_8B, "--parameters", "5"],
            "llm-eks: error: --parameters needs --model-config [LLMEKS-E600]",
        ),
        (["plan", "--model", "a/b", "--model-config", "/nonexistent"], "llm-eks: error: model_config: '/nonexistent"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(message), err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--help")
    assert code == 0 and "--max-model-len" in out


def test_subprocess_error_has_no_traceback_and_no_cdk_imports() -> None:
    bad = subprocess.run(
        [sys.executable, "-m", "llm_eks.cli", "plan", "--model", LLAMA_8B, "--gpu-memory-utilization", "1.5"],
        capture_output=True, text=True, cwd=REPO_ROOT, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == (
        "llm-eks: error: workload.gpu_memory_utilization: 1.5 is not allowed; must be a number above 0 and at most 1"
        " [LLMEKS-E202]\n"
    )
    # The planner's import path stays free of aws_cdk, cdk8s, constructs and jsii, even with --env.
    probe = (
        "import sys; from llm_eks.cli import main; "
        "main(['plan', '--env', 'prod', '--json']); main(['plan', '--model', 'Qwen/Qwen2.5-7B-Instruct']); "
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'aws_cdk', 'cdk8s', 'constructs', 'jsii'}); "
        "print(heavy, file=sys.stderr)"
    )
    clean = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert clean.stderr == "[]\n"
