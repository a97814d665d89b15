"""`BenchmarkChart`: a one-shot Job that runs `vllm bench serve` against the vLLM Service and prints the result JSON.

It runs on CPU capacity (llm-eks places it on the CPU node pool, never a GPU node) with the same pinned vLLM image,
as a ServiceAccount of its own (named after the benchmark; llm-eks applies it with the workload, so the Job and
`llm-eks verify --load` find it), whose Pod Identity role reads only what a client needs: the
API key, and the model's tokenizer files. With staged weights an init container copies those few files from the
weights bucket (no Hub token, no weights, no compile cache); otherwise the tokenizer comes from the Hub, with the
Hub token for a gated model. It mounts the server's SecretProviderClass for the key (a SecretProviderClass names
secrets; the pod's own ServiceAccount decides what it may read): the shell exports the key file as OPENAI_API_KEY,
which `vllm bench serve` sends as `Authorization: Bearer` (vllm/benchmarks/lib/endpoint_request_func.py,
_get_headers).
Requests go to /v1/completions with random token prompts of exactly `input_len` tokens and `--ignore-eos`, so every
request generates `output_len` tokens: the shape the capacity plan assumed.

`llm-eks verify --load` runs it at the plan's load and judges its result. By hand, run it after a deploy (a Job is
immutable and meant to run on demand, so apply it yourself rather than with the stack):

    kubectl -n inference rollout status deploy/<vllm name> --timeout=30m
    kubectl delete -f cdk.out/manifests/<env>/<benchmark file>.yaml --ignore-not-found
    kubectl apply -f cdk.out/manifests/<env>/<benchmark file>.yaml
    kubectl -n inference wait --for=condition=complete job/<name> --timeout=60m
    kubectl -n inference logs job/<name> | tail -n 1 | jq '{completed, failed, request_goodput,
        p50_ttft_ms, p99_ttft_ms, p99_tpot_ms, p99_itl_ms, output_throughput}'

The last log line is the result JSON (after a `=== vllm bench serve result.json ===` marker). Compare p99_ttft_ms
with the environment's TTFT p99 SLO and p99_itl_ms with its inter-token-latency p99 SLO (p99_tpot_ms is the per
request average of the same gaps, so it sits at or below p99_itl_ms). With the SLOs in the props the Job also passes
`--goodput ttft:<ms> tpot:<ms>`, and request_goodput is the requests per second that met both: compare it with
request_throughput to see the share of requests inside the SLO. `failed` must be 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

import cdk8s
from constructs import Construct

from llm_eks.error_codes import E126
from llm_eks.errors import ConfigError
from llm_eks.manifests import plus
from llm_eks.manifests.api_key import api_key_mount, api_key_volume, export_key
from llm_eks.manifests.checkov import serving_pod_annotations
from llm_eks.manifests.labels import app_labels, require_dns1035
from llm_eks.manifests.pods import container_security_context, hf_token_env, hf_token_mount, hf_token_volume, placement
from llm_eks.manifests.quantities import parse_quantity
from llm_eks.manifests.source import builds_objects, sourced_metadata
from llm_eks.manifests.vllm import VllmProps, pod_security_context, service_url, validate_vllm_props

BENCHMARK_APP = "vllm-benchmark"
WORK_DIR = "/work"
# What a tokenizer needs of a checkpoint (transformers' tokenizer files, Mistral's tekken, config for the model type):
# the benchmark's role may read exactly these keys under the staged prefix, nothing else of the model.
TOKENIZER_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "tekken.json",
    "chat_template.jinja",
)
TOKENIZER_DIR = f"{WORK_DIR}/tokenizer"
# Copies the tokenizer files that exist (a missing one answers 403 without ListBucket, which the role lacks) with the
# image's boto3; the bucket comes from the llm-eks-weights ConfigMap, as the serving pods read it.
FETCH_TOKENIZER = """import os, sys, boto3
from botocore.exceptions import ClientError
bucket, prefix, dest = os.environ["LLM_EKS_WEIGHTS_BUCKET"], sys.argv[1], sys.argv[2]
os.makedirs(dest, exist_ok=True)
s3 = boto3.client("s3")
got = 0
for name in sys.argv[3:]:
    try:
        s3.download_file(bucket, prefix + name, os.path.join(dest, name))
        got += 1
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") not in ("403", "404", "AccessDenied", "NoSuchKey"):
            raise
print(f"fetch-tokenizer: {got} file(s) from s3://{bucket}/{prefix}", flush=True)
sys.exit(0 if got else 1)
"""
RESULT_FILE = "result.json"
# Job names are at most 63 characters (the pods' job-name label holds one).
_JOB_NAME_MAX = 63
LOAD_SUFFIX = "-load"
RESULT_MARKER = "=== vllm bench serve result.json ==="
CONTAINER = "vllm-bench"
# Extended resources of accelerators: the benchmark must never tolerate their taints.
_ACCELERATOR_KEYS = ("nvidia.com/gpu", "aws.amazon.com/neuron")


@dataclass(frozen=True)
class BenchmarkProps:
    """The workload the Job sends (from the environment's config) and where it runs."""

    # Job name (DNS-1035), e.g. "bench-vllm-llama-3-1-8b".
    name: str
    # Prompt and generation lengths in tokens.
    input_len: int
    output_len: int
    num_prompts: int
    # Requests per second (Poisson arrivals); None sends them all at once (vLLM's "inf").
    request_rate: float | None
    # Cap on requests in flight; None: only the rate limits them.
    max_concurrency: int | None = None
    # The environment's SLOs in milliseconds; when set they become --goodput targets.
    slo_ttft_p99_ms: float | None = None
    slo_itl_p99_ms: float | None = None
    # Tokenizer to count tokens with; None: the served model's own (its HF repo, or the staged copy below).
    tokenizer: str | None = None
    # The client's image; None: the server's (vLLM's own image holds `vllm bench serve`). A Neuron server's container
    # carries an older vLLM, so its benchmark runs the pinned vLLM image's client, whose flags the tests check.
    image: str | None = None
    # With staged weights: the key prefix of the model in the weights bucket, whose tokenizer files (TOKENIZER_FILES)
    # an init container copies; None: the tokenizer comes from the Hub.
    tokenizer_prefix: str | None = None
    # Same prompts on every run, so runs compare.
    seed: int = 0
    # The client is one asyncio process plus a tokenizer; 2 CPUs keep it from being the bottleneck.
    cpu: str = "2"
    # torch and the tokenizer load at import; limit = request.
    memory: str = "8Gi"
    # System (CPU) nodes; GPU nodes are for serving.
    node_selector: Mapping[str, str] = field(default_factory=lambda: {"llm-eks.io/node-role": "system"})
    tolerations: tuple[Mapping[str, Any], ...] = ()
    # Keep the finished Job (and its log) for a day.
    ttl_seconds_after_finished: int = 86400
    # A hung run ends after an hour (vLLM's own readiness wait is 10 minutes of it).
    active_deadline_seconds: int = 3600


# The arguments a load run sets from the plan and the Ready replicas (`load_props`); every other part of a load Job is
# the benchmark's own, which the load admission policy pins (llm_eks.manifests.verifier.load_policy).
LOAD_ARGS = ("--random-input-len", "--random-output-len", "--num-prompts", "--request-rate", "--max-concurrency")
# A load run's Job is deleted by the command that ran it; this only cleans up after one that was killed outright.
LOAD_TTL_SECONDS = 600


def load_job_name(benchmark_name: str) -> str:
    """The Job `llm-eks verify --load` and `llm-eks canary --load` run for a benchmark: `<name>-load` (one at a time
    per workload; its Role may get and delete only that name)."""
    return benchmark_name[: _JOB_NAME_MAX - len(LOAD_SUFFIX)].rstrip("-") + LOAD_SUFFIX


def _number(value: float) -> str:
    return f"{value:g}"


def validate_benchmark_props(b: BenchmarkProps) -> None:
    require_dns1035("benchmark.name", b.name)
    for name, value in (("input_len", b.input_len), ("output_len", b.output_len), ("num_prompts", b.num_prompts)):
        if value < 1:
            raise ConfigError(E126, f"benchmark.{name}: {value} is not allowed; must be at least 1")
    if b.request_rate is not None and not (b.request_rate > 0 and math.isfinite(b.request_rate)):
        raise ConfigError(
            E126, f"benchmark.request_rate: {b.request_rate} is not allowed; must be above 0 (None sends all at once)"
        )
    if b.max_concurrency is not None and b.max_concurrency < 1:
        raise ConfigError(E126, f"benchmark.max_concurrency: {b.max_concurrency} is not allowed; must be at least 1")
    for name, slo in (("slo_ttft_p99_ms", b.slo_ttft_p99_ms), ("slo_itl_p99_ms", b.slo_itl_p99_ms)):
        if slo is not None and not slo > 0:
            raise ConfigError(E126, f"benchmark.{name}: {slo} is not allowed; must be above 0")
    for name, amount in (("cpu", b.cpu), ("memory", b.memory)):
        if parse_quantity(f"benchmark.{name}", amount) <= 0:
            raise ConfigError(E126, f"benchmark.{name}: {amount!r} is not allowed; must be above 0")
    for toleration in b.tolerations:
        key = toleration.get("key")
        if key in _ACCELERATOR_KEYS or (toleration.get("operator") == "Exists" and key is None):
            raise ConfigError(
                E126,
                f"benchmark.tolerations: {key or 'every taint'!r} is not allowed; the benchmark runs on CPU capacity",
            )
    for name, value in (
        ("ttl_seconds_after_finished", b.ttl_seconds_after_finished),
        ("active_deadline_seconds", b.active_deadline_seconds),
    ):
        if value < 1:
            raise ConfigError(E126, f"benchmark.{name}: {value} is not allowed; must be at least 1")


def bench_args(b: BenchmarkProps, vllm: VllmProps) -> list[str]:
    """Arguments after `vllm bench serve`."""
    args = [
        "--backend",
        "openai",
        "--base-url",
        service_url(vllm),
        "--endpoint",
        "/v1/completions",
        # --model names the tokenizer source; --served-model-name is what requests ask for.
        "--model",
        vllm.model,
        "--served-model-name",
        vllm.served_model_name,
    ]
    if b.tokenizer is not None:
        args += ["--tokenizer", b.tokenizer]
    elif b.tokenizer_prefix is not None:
        args += ["--tokenizer", TOKENIZER_DIR]
    args += [
        "--dataset-name",
        "random",
        "--random-input-len",
        str(b.input_len),
        "--random-output-len",
        str(b.output_len),
        "--num-prompts",
        str(b.num_prompts),
        "--request-rate",
        "inf" if b.request_rate is None else _number(b.request_rate),
    ]
    if b.max_concurrency is not None:
        args += ["--max-concurrency", str(b.max_concurrency)]
    args += [
        "--ignore-eos",
        "--seed",
        str(b.seed),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,90,99",
    ]
    goodput = []
    if b.slo_ttft_p99_ms is not None:
        goodput.append(f"ttft:{_number(b.slo_ttft_p99_ms)}")
    if b.slo_itl_p99_ms is not None:
        # A request's TPOT is the mean of its inter-token gaps: the per-request form of the ITL SLO.
        goodput.append(f"tpot:{_number(b.slo_itl_p99_ms)}")
    if goodput:
        args += ["--goodput", *goodput]
    return [
        *args,
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        f"{WORK_DIR}/results",
        "--result-filename",
        RESULT_FILE,
    ]


# "$@" are the arguments above: no quoting to get wrong. The JSON is the last line of the log.
SCRIPT = (
    f'mkdir -p "{WORK_DIR}/results" && vllm bench serve "$@" && echo "{RESULT_MARKER}" '
    f'&& cat "{WORK_DIR}/results/{RESULT_FILE}" && echo'
)
# The same, with the server's API key exported first.
SCRIPT_WITH_KEY = f"{export_key('OPENAI_API_KEY')}; {SCRIPT}"


def script(vllm: VllmProps) -> str:
    """The Job's shell: the benchmark, after exporting the API key when the server has one."""
    return SCRIPT if vllm.api_key_secret is None else SCRIPT_WITH_KEY


@builds_objects
def service_account(vllm: VllmProps, benchmark: BenchmarkProps) -> dict[str, Any]:
    """The benchmark's ServiceAccount (named after it; its Pod Identity role reads only what a client needs). The
    stack applies it with the workload, so a Job `llm-eks verify --load` creates finds it."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": benchmark.name,
            "namespace": vllm.namespace,
            "labels": app_labels(BENCHMARK_APP, benchmark.name),
        },
        "automountServiceAccountToken": False,
    }


class BenchmarkChart(plus.PlusChart):
    """The `vllm bench serve` Job for one `VllmChart` workload, and its ServiceAccount unless `with_service_account`
    is False (the account is then applied elsewhere: `service_account`)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        vllm: VllmProps,
        benchmark: BenchmarkProps,
        *,
        with_service_account: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        validate_vllm_props(vllm)
        validate_benchmark_props(benchmark)
        b = benchmark
        labels = app_labels(BENCHMARK_APP, b.name)
        env = [
            {"name": "HF_HOME", "value": f"{WORK_DIR}/huggingface"},
            {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
            {"name": "DO_NOT_TRACK", "value": "1"},
        ]
        volumes: list[dict[str, Any]] = [{"name": "work", "emptyDir": {}}]
        mounts: list[dict[str, Any]] = [{"name": "work", "mountPath": WORK_DIR}]
        # The Hub token only where the tokenizer comes from the Hub.
        if vllm.hf_token_secret is not None and b.tokenizer_prefix is None:
            env.append(hf_token_env())
            volumes.append(hf_token_volume(vllm.name))
            mounts.append(hf_token_mount())
        if vllm.api_key_secret is not None:
            volumes.append(api_key_volume(vllm.name))
            mounts.append(api_key_mount())
        if vllm.aws_region is not None:
            env.append({"name": "AWS_REGION", "value": vllm.aws_region})
        container = {
            "name": CONTAINER,
            "image": b.image or vllm.image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["/bin/sh", "-c", script(vllm), "vllm-bench"],
            "args": bench_args(b, vllm),
            "env": env,
            "resources": {
                "requests": {"cpu": b.cpu, "memory": b.memory},
                "limits": {"memory": b.memory},
            },
            "volumeMounts": mounts,
            "securityContext": container_security_context(),
        }
        pod_spec: dict[str, Any] = {
            "restartPolicy": "Never",
            "serviceAccountName": b.name,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": pod_security_context(vllm),
            "containers": [container],
            "volumes": volumes,
        }
        if b.tokenizer_prefix is not None:
            pod_spec["initContainers"] = [_fetch_tokenizer(vllm, b)]
        pod_spec.update(placement(b.node_selector, b.tolerations))
        account = None
        if with_service_account:
            account_obj = service_account(vllm, b)
            account = plus.service_account(
                self,
                "service-account",
                {**account_obj, "metadata": sourced_metadata(account_obj["metadata"], __name__)},
            )
        metadata = {
            "name": b.name,
            "namespace": vllm.namespace,
            "labels": labels,
            # It runs the vLLM image as the server does, so the same checkov findings apply for the same reasons.
            "annotations": serving_pod_annotations(b.image or vllm.image),
        }
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": sourced_metadata(metadata, __name__),
            "spec": {
                # A benchmark retried after a failure measures something else; fail once, loudly.
                "backoffLimit": 0,
                "ttlSecondsAfterFinished": b.ttl_seconds_after_finished,
                "activeDeadlineSeconds": b.active_deadline_seconds,
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        }
        plus.job(self, "job", job, account)


def _fetch_tokenizer(vllm: VllmProps, b: BenchmarkProps) -> dict[str, Any]:
    """The init container copying the staged model's tokenizer files into the work volume."""
    from llm_eks.manifests.weights_staging import bucket_env

    assert b.tokenizer_prefix is not None
    env = [bucket_env()]
    if vllm.aws_region is not None:
        env.append({"name": "AWS_REGION", "value": vllm.aws_region})
    return {
        "name": "fetch-tokenizer",
        "image": b.image or vllm.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-c", FETCH_TOKENIZER, b.tokenizer_prefix, TOKENIZER_DIR, *TOKENIZER_FILES],
        "env": env,
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "256Mi"}},
        "volumeMounts": [{"name": "work", "mountPath": WORK_DIR}],
        "securityContext": container_security_context(),
    }


def load_props(
    b: BenchmarkProps, *, input_len: int, output_len: int, num_prompts: int, request_rate: float, concurrency: int
) -> BenchmarkProps:
    """A load run's props: the benchmark's own, sending `num_prompts` requests of these lengths at `request_rate`
    with at most `concurrency` in flight (the values of LOAD_ARGS)."""
    return replace(
        b,
        input_len=input_len,
        output_len=output_len,
        num_prompts=num_prompts,
        request_rate=request_rate,
        max_concurrency=concurrency,
        ttl_seconds_after_finished=LOAD_TTL_SECONDS,
    )


def load_job(vllm: VllmProps, b: BenchmarkProps) -> dict[str, Any]:
    """The Job `llm-eks verify --load` creates for a load run (`b` from `load_props`): the benchmark chart's Job,
    named `load_job_name`."""
    (job,) = BenchmarkChart(cdk8s.App(), "load", vllm, b, with_service_account=False).to_json()
    job["metadata"]["name"] = load_job_name(b.name)
    return cast(dict[str, Any], job)


def load_template(vllm: VllmProps, b: BenchmarkProps) -> dict[str, Any]:
    """The load Job of `b` whatever the load: LOAD_ARGS' values at 1, the values the load admission policy leaves
    free (llm_eks.manifests.verifier.load_policy)."""
    return load_job(vllm, load_props(b, input_len=1, output_len=1, num_prompts=1, request_rate=1.0, concurrency=1))
