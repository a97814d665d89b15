"""BenchmarkChart: the `vllm bench serve` Job."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from llm_eks.errors import ConfigError
from llm_eks.manifests.api_key import API_KEY_PATH
from llm_eks.manifests.benchmark import (
    RESULT_MARKER,
    SCRIPT,
    WORK_DIR,
    BenchmarkChart,
    BenchmarkProps,
    validate_benchmark_props,
)
from llm_eks.versions import VLLM_IMAGE
from tests.kube_schema import assert_valid
from tests.test_vllm_chart import NAME, base_props
from tests.vllm_bench_flags import parse

PROPS = BenchmarkProps(
    name="bench-vllm-llama-3-1-8b",
    input_len=1024,
    output_len=256,
    num_prompts=200,
    request_rate=4.0,
    slo_ttft_p99_ms=1000.0,
    slo_itl_p99_ms=50.0,
)


def synth(benchmark: BenchmarkProps, **vllm_overrides: Any) -> dict[str, Any]:
    import cdk8s

    chart = BenchmarkChart(cdk8s.App(), "benchmark", base_props(**vllm_overrides), benchmark)
    account, job = chart.to_json()
    assert (account["kind"], account["metadata"]["name"], account["automountServiceAccountToken"]) == (
        "ServiceAccount",
        benchmark.name,
        False,
    )
    return job


@pytest.fixture(scope="module")
def job() -> dict[str, Any]:
    return synth(PROPS)


@pytest.fixture(scope="module")
def pod(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["template"]["spec"]


def test_job_is_valid_and_runs_once(job: dict[str, Any]) -> None:
    assert_valid([job])
    assert job["metadata"]["name"] == "bench-vllm-llama-3-1-8b"
    assert job["metadata"]["namespace"] == "inference"
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["ttlSecondsAfterFinished"] == 86400
    assert job["spec"]["activeDeadlineSeconds"] == 3600
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_exact_bench_command(pod: dict[str, Any]) -> None:
    container = pod["containers"][0]
    assert container["image"] == VLLM_IMAGE
    assert container["command"] == ["/bin/sh", "-c", SCRIPT, "vllm-bench"]
    assert container["args"] == [
        "--backend",
        "openai",
        "--base-url",
        f"http://{NAME}.inference.svc.cluster.local:8000",
        "--endpoint",
        "/v1/completions",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--served-model-name",
        "llama-3.1-8b",
        "--dataset-name",
        "random",
        "--random-input-len",
        "1024",
        "--random-output-len",
        "256",
        "--num-prompts",
        "200",
        "--request-rate",
        "4",
        "--ignore-eos",
        "--seed",
        "0",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,90,99",
        "--goodput",
        "ttft:1000",
        "tpot:50",
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        "/work/results",
        "--result-filename",
        "result.json",
    ]


def test_vllm_033s_bench_parser_reads_every_argument(pod: dict[str, Any]) -> None:
    """The arguments as `vllm bench serve` 0.33 parses them (flags pinned from its source: tests/vllm_bench_flags)."""
    args = parse(pod["containers"][0]["args"])
    assert (args.random_input_len, args.random_output_len, args.num_prompts, args.request_rate) == (1024, 256, 200, 4.0)
    assert args.goodput == ["ttft:1000", "tpot:50"] and args.ignore_eos and args.save_result
    burst = synth(BenchmarkProps(name="bench-burst", input_len=8, output_len=8, num_prompts=1, request_rate=None))
    assert parse(burst["spec"]["template"]["spec"]["containers"][0]["args"]).request_rate == float("inf")
    with pytest.raises(AssertionError, match="unrecognized arguments: --random-prefix-len"):
        parse([*pod["containers"][0]["args"], "--random-prefix-len", "4"])


def test_runs_on_cpu_capacity_with_an_identity_of_its_own(pod: dict[str, Any]) -> None:
    container = pod["containers"][0]
    assert pod["nodeSelector"] == {"llm-eks.io/node-role": "system"}
    assert "tolerations" not in pod
    assert container["resources"] == {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "8Gi"}}
    assert not any("nvidia.com/gpu" in r for r in container["resources"].values())
    # A ServiceAccount of its own (its role reads what a client needs); from the Hub, a gated model's tokenizer loads
    # with the token, as the server's does.
    assert pod["serviceAccountName"] == PROPS.name
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["HF_TOKEN_PATH"] == "/var/run/secrets/huggingface/token"
    volume = next(v for v in pod["volumes"] if v["name"] == "hf-token")
    assert volume["csi"]["volumeAttributes"] == {"secretProviderClass": f"{NAME}-hf-token"}


def test_as_fast_as_possible_and_no_slo() -> None:
    job = synth(
        BenchmarkProps(
            name="bench-burst", input_len=128, output_len=64, num_prompts=10, request_rate=None, max_concurrency=8
        ),
        hf_token_secret=None,
    )
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--request-rate") + 1] == "inf"
    assert args[args.index("--max-concurrency") + 1] == "8"
    assert "--goodput" not in args
    assert all(v["name"] != "hf-token" for v in job["spec"]["template"]["spec"]["volumes"])


def test_script_passes_args_through_and_prints_the_json_last(tmp_path: Path, pod: dict[str, Any]) -> None:
    """Run the Job's shell script with a stand-in `vllm` that saves a result where it was told to."""
    fake = tmp_path / "bin" / "vllm"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'test "$1 $2" = "bench serve" || exit 3\n'
        "shift 2\n"
        'while [ $# -gt 0 ]; do case "$1" in\n'
        '  --result-dir) dir="$2"; shift 2;;\n'
        '  --result-filename) file="$2"; shift 2;;\n'
        "  *) shift;;\n"
        "esac; done\n"
        'echo "Serving Benchmark Result"\n'
        'printf \'{"completed": 200, "failed": 0, "p99_ttft_ms": 412.5}\' > "$dir/$file"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    work = tmp_path / "work"
    script = SCRIPT.replace(WORK_DIR, str(work))
    args = [a.replace(WORK_DIR, str(work)) for a in pod["containers"][0]["args"]]
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    result = subprocess.run(
        ["/bin/sh", "-c", script, "vllm-bench", *args], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-2] == RESULT_MARKER
    assert json.loads(lines[-1]) == {"completed": 200, "failed": 0, "p99_ttft_ms": 412.5}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"input_len": 0}, "benchmark.input_len: 0 is not allowed; must be at least 1 [LLMEKS-E126]"),
        ({"num_prompts": -5}, "benchmark.num_prompts: -5 is not allowed; must be at least 1 [LLMEKS-E126]"),
        (
            {"request_rate": 0.0},
            "benchmark.request_rate: 0.0 is not allowed; must be above 0 (None sends all at once) [LLMEKS-E126]",
        ),
        ({"slo_ttft_p99_ms": -1.0}, "benchmark.slo_ttft_p99_ms: -1.0 is not allowed; must be above 0 [LLMEKS-E126]"),
        (
            {"tolerations": ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)},
            "benchmark.tolerations: 'nvidia.com/gpu' is not allowed; the benchmark runs on CPU capacity [LLMEKS-E126]",
        ),
        (
            {"tolerations": ({"operator": "Exists"},)},
            "benchmark.tolerations: 'every taint' is not allowed; the benchmark runs on CPU capacity [LLMEKS-E126]",
        ),
        (
            {"name": "Bench"},
            "benchmark.name: 'Bench' is not allowed; must be a DNS-1035 label: lowercase letters, digits and '-', "
            "starting with a letter, at most 63 characters [LLMEKS-E400]",
        ),
    ],
)
def test_bad_props_get_one_line_errors(overrides: dict[str, Any], message: str) -> None:
    from dataclasses import replace

    with pytest.raises(ConfigError) as err:
        validate_benchmark_props(replace(PROPS, **overrides))
    assert str(err.value) == message


def test_benchmark_sends_the_servers_api_key(tmp_path: Path) -> None:
    """With an API key the Job mounts the server's key file through the server's SecretProviderClass (read with its
    own ServiceAccount's role) and `vllm bench serve` gets it as OPENAI_API_KEY, which it sends as
    `Authorization: Bearer`."""
    job = synth(PROPS, api_key_secret="llm-eks/dev/api-key")
    assert_valid([job])
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == PROPS.name
    (container,) = pod["containers"]
    volume = next(v for v in pod["volumes"] if v["name"] == "api-key")
    assert volume["csi"]["volumeAttributes"] == {"secretProviderClass": f"{NAME}-api-key"}
    assert {"name": "api-key", "mountPath": "/var/run/secrets/llm-eks", "readOnly": True} in container["volumeMounts"]
    assert "OPENAI_API_KEY" not in {e["name"] for e in container["env"]}
    # The script exports the file's content, then runs the benchmark: run it with a fake `vllm` that records it.
    fake = tmp_path / "bin" / "vllm"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'while [ $# -gt 0 ]; do case "$1" in --result-dir) dir="$2"; shift 2;; --result-filename) file="$2"; '
        "shift 2;; *) shift;; esac; done\n"
        'printf \'{"key": "%s"}\' "$OPENAI_API_KEY" > "$dir/$file"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    key_file = tmp_path / "api-key"
    key_file.write_text("k3y\n")
    work = tmp_path / "work"
    script = container["command"][2].replace(WORK_DIR, str(work)).replace(API_KEY_PATH, str(key_file))
    args = [a.replace(WORK_DIR, str(work)) for a in container["args"]]
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    result = subprocess.run(
        ["/bin/sh", "-c", script, "vllm-bench", *args], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {"key": "k3y"}
    # Without a key file the Job fails at once instead of measuring 401s.
    key_file.unlink()
    failed = subprocess.run(
        ["/bin/sh", "-c", script, "vllm-bench", *args], capture_output=True, text=True, env=env, check=False
    )
    assert failed.returncode == 1 and "no API key in" in failed.stderr


def test_benchmark_without_a_key_mounts_none(pod: dict[str, Any]) -> None:
    assert "api-key" not in {v["name"] for v in pod["volumes"]}
    assert pod["containers"][0]["command"][2] == SCRIPT
