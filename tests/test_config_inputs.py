"""Config inputs that used to fail wrongly or pass silently (issue 8, findings 6 and 7): each is now accepted and
works end to end, or is one line naming `environments.<env>.<field>`, the value and what is allowed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_eks.aws_regions import CHINA, COMMERCIAL, GOVCLOUD, REGIONS
from llm_eks.cli import main
from llm_eks.config import WorkloadConfig, load_environments, parse_environment
from llm_eks.errors import ConfigError
from llm_eks.planner import plan
from tests.conftest import REPO_ROOT
from tests.kube_schema import assert_valid

SG = "sg-0123456789abcdef0"
# Llama 3.1 8B's architecture under another name: a model the catalog does not have.
SPEC = {
    "layers": 32,
    "hidden_size": 4096,
    "attention_heads": 32,
    "kv_heads": 8,
    "max_position_embeddings": 131072,
    "vocab_size": 128256,
    "intermediate_size": 14336,
}
SCHEDULE = {"timezone": "Europe/Paris", "start": "0 8 * * 1-5", "end": "0 19 * * 1-5"}


def error_of(body: Any, name: str = "dev") -> str:
    with pytest.raises(ConfigError) as info:
        parse_environment(name, body)
    message = str(info.value)
    assert "\n" not in message
    return message


def scaled_to_zero(**schedule: Any) -> dict[str, Any]:
    return {"workload": {"replicas": {"min": 0}, "autoscaling": {"scale_to_zero": {**SCHEDULE, **schedule}}}}


def write_context(folder: Path, text: str) -> Path:
    path = folder / "cdk.json"
    path.write_text(text)
    return path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- Finding 6: workload.model_spec ---


def test_model_spec_is_planned_and_its_charts_synthesize(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A model outside the catalog goes config -> plan -> charts: the vLLM pod serves it by its Hub id."""
    body = {"workload": {"model": "acme/llama-clone-8b", "model_spec": SPEC, "max_model_len": 8192}}
    context = write_context(tmp_path, json.dumps({"context": {"environments": {"lab": body}}}))
    code, out, err = cli(capsys, "plan", "--env", "lab", "--context-file", str(context), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["model"]["id"] == "acme/llama-clone-8b"
    assert json.loads(out)["model"]["parameters"] == 8_030_261_248  # estimated: exactly Llama 3.1 8B's count

    out_dir = tmp_path / "k8s"
    code, _, err = cli(
        capsys, "manifests", "--env", "lab", "--context-file", str(context), "--node-role-name", "NodeRole-lab",
        "--security-group-id", SG, "--out", str(out_dir),
    )  # fmt: skip
    assert (code, err) == (0, "")
    objects = [o for p in sorted(out_dir.glob("*.yaml")) for o in yaml.safe_load_all(p.read_text()) if o]
    assert_valid(objects)
    # The workload's Deployment (the monitoring namespace's query endpoint is one too).
    (deployment,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("vllm-")]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == "acme/llama-clone-8b"
    assert container["args"][container["args"].index("--served-model-name") + 1] == "acme/llama-clone-8b"


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        (
            {"model": "acme llama", "model_spec": SPEC},
            "environments.dev.workload.model: 'acme llama' is not allowed; with model_spec, must be a Hugging Face "
            "repo id: org/name of letters, digits, '-', '_' and '.', at most 96 characters, with no '--' or '..'"
            " [LLMEKS-E203]",
        ),
        (
            {"model": "llama-clone", "model_spec": SPEC},
            "environments.dev.workload.model: 'llama-clone' is not allowed; with model_spec, must be a Hugging Face "
            "repo id: org/name of letters, digits, '-', '_' and '.', at most 96 characters, with no '--' or '..'"
            " [LLMEKS-E203]",
        ),
        (
            {"model": "acme/llama--clone", "model_spec": SPEC},
            "environments.dev.workload.model: 'acme/llama--clone' is not allowed; with model_spec, must be a Hugging "
            "Face repo id: org/name of letters, digits, '-', '_' and '.', at most 96 characters, with no '--' or '..'"
            " [LLMEKS-E203]",
        ),
        (
            {"model": "acme/x", "model_spec": {**SPEC, "id": "acme/y"}},
            "environments.dev.workload.model_spec.id: not allowed; the model's id is workload.model [LLMEKS-E203]",
        ),
        (
            {"model": "acme/x", "model_spec": {**SPEC, "layers": 0}},
            "environments.dev.workload.model_spec.layers: 0 is not allowed; must be a positive integer [LLMEKS-E203]",
        ),
        (
            {"model": "acme/x", "model_spec": {**SPEC, "layers": "32"}},
            "environments.dev.workload.model_spec.layers: '32' is not allowed; must be a positive integer"
            " [LLMEKS-E203]",
        ),
    ],
)
def test_model_spec_errors_name_the_config_field(workload: dict[str, Any], message: str) -> None:
    assert error_of({"workload": workload}) == message


# --- Finding 7: inputs that were silently accepted ---


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"endpoint": {"access": "public", "public_cidrs": ["0.0.0.0/1", "128.0.0.0/1"]}},
            "environments.dev.endpoint.public_cidrs: ['0.0.0.0/1', '128.0.0.0/1'] is not allowed; together they "
            "open the API to 4,294,967,296 addresses (100% of IPv4); the union may cover at most 16,777,216 "
            "(one /8): list your own ranges [LLMEKS-E113]",
        ),
        (
            {"endpoint": {"access": "public", "public_cidrs": ["11.0.0.0/8", "12.0.0.0/16"]}},
            "environments.dev.endpoint.public_cidrs: ['11.0.0.0/8', '12.0.0.0/16'] is not allowed; together they "
            "open the API to 16,842,752 addresses (0% of IPv4); the union may cover at most 16,777,216 (one /8): "
            "list your own ranges [LLMEKS-E113]",
        ),
        (
            {"vpc": {"cidr": "8.8.0.0/16"}},
            "environments.dev.vpc.cidr: '8.8.0.0/16' is not allowed; must be inside a private range: 10.0.0.0/8, "
            "172.16.0.0/12 or 192.168.0.0/16 (RFC 1918), or 100.64.0.0/10 (RFC 6598); a public range would shadow "
            "those addresses on the internet [LLMEKS-E112]",
        ),
        (
            {"account": "123456789012", "region": "eu-wset-1"},
            "environments.dev.region: 'eu-wset-1' is not allowed; did you mean 'eu-west-1'? must be a commercial, "
            "GovCloud or China AWS region such as us-east-1 (listed in llm_eks/aws_regions.py) [LLMEKS-E110]",
        ),
        (
            scaled_to_zero(timezone="Europe/Pariss"),
            "environments.dev.workload.autoscaling.scale_to_zero.timezone: 'Europe/Pariss' is not allowed; did you "
            "mean 'Europe/Paris'? must be a time zone of the IANA tz database such as Europe/Paris or UTC"
            " [LLMEKS-E130]",
        ),
        (
            scaled_to_zero(start="0 25 * * 1-5"),
            "environments.dev.workload.autoscaling.scale_to_zero.start: '0 25 * * 1-5' is not allowed; its hour "
            "field '25' must be *, a value or a range a-b within 0-23; a cron expression is minute hour "
            "day-of-month month day-of-week, such as '0 8 * * 1-5' [LLMEKS-E130]",
        ),
        (
            scaled_to_zero(end="0 19 * * 7"),
            "environments.dev.workload.autoscaling.scale_to_zero.end: '0 19 * * 7' is not allowed; its day-of-week "
            "field '7' must be *, a value or a range a-b within 0-6 (or SUN-SAT); a cron expression is minute hour "
            "day-of-month month day-of-week, such as '0 8 * * 1-5' [LLMEKS-E130]",
        ),
        (
            scaled_to_zero(end="0 19 * * MON-FRI *"),
            "environments.dev.workload.autoscaling.scale_to_zero.end: '0 19 * * MON-FRI *' is not allowed; must "
            "have 5 fields separated by single spaces; a cron expression is minute hour day-of-month month "
            "day-of-week, such as '0 8 * * 1-5' [LLMEKS-E130]",
        ),
        (
            scaled_to_zero(start="*/0 8 * * *"),
            "environments.dev.workload.autoscaling.scale_to_zero.start: '*/0 8 * * *' is not allowed; its minute "
            "field step '0' must be a positive integer; a cron expression is minute hour day-of-month month "
            "day-of-week, such as '0 8 * * 1-5' [LLMEKS-E130]",
        ),
        (
            scaled_to_zero(end="0 8 * * 1-5"),
            "environments.dev.workload.autoscaling.scale_to_zero.end: '0 8 * * 1-5' is not allowed; must differ "
            "from start (KEDA rejects a window that opens and closes at once) [LLMEKS-E130]",
        ),
        (
            {"workload": {"replicas": {"min": 1}, "autoscaling": {"scale_to_zero": SCHEDULE}}},
            "environments.dev.workload.replicas.min: 1 is not allowed; must be 0 with autoscaling.scale_to_zero "
            "(the schedule is what brings replicas back) [LLMEKS-E130]",
        ),
        (
            {"workload": {"engine": "ray-serve", "replicas": {"min": 0}, "autoscaling": {"scale_to_zero": SCHEDULE}}},
            "environments.dev.workload.autoscaling.scale_to_zero: not allowed with engine 'ray-serve'; only the "
            "vllm engine scales to zero (on a KEDA cron schedule) [LLMEKS-E130]",
        ),
        (
            {"tags": {"cost#center": "x"}},
            "environments.dev.tags: 'cost#center' is not allowed; tag keys are 1-128 characters of letters, digits, "
            "spaces and _ . : / = + - @, and may not start with 'aws:' [LLMEKS-E116]",
        ),
        (
            {"tags": {"k" * 129: "x"}},
            f"environments.dev.tags: '{'k' * 129}' is not allowed; tag keys are 1-128 characters of letters, "
            "digits, spaces and _ . : / = + - @, and may not start with 'aws:' [LLMEKS-E116]",
        ),
        (
            {"tags": {"AWS:team": "x"}},
            "environments.dev.tags: 'AWS:team' is not allowed; tag keys are 1-128 characters of letters, digits, "
            "spaces and _ . : / = + - @, and may not start with 'aws:' [LLMEKS-E116]",
        ),
        (
            {"tags": {"owner": "ml\nplatform"}},
            "environments.dev.tags.owner: 'ml\\nplatform' is not allowed; tag values are 0-256 characters of "
            "letters, digits, spaces and _ . : / = + - @ [LLMEKS-E116]",
        ),
        (
            {"tags": {"owner": "a&b"}},
            "environments.dev.tags.owner: 'a&b' is not allowed; tag values are 0-256 characters of letters, digits, "
            "spaces and _ . : / = + - @ [LLMEKS-E116]",
        ),
        (
            {"tags": {"owner": "v" * 257}},
            f"environments.dev.tags.owner: '{'v' * 257}' is not allowed; tag values are 0-256 characters of "
            "letters, digits, spaces and _ . : / = + - @ [LLMEKS-E116]",
        ),
        (
            {"tags": {"karpenter.sh/nodepool": "x"}},
            "environments.dev.tags: 'karpenter.sh/nodepool' is not allowed; is a tag key Karpenter sets itself on "
            "the nodes it launches; choose another key [LLMEKS-E116]",
        ),
        (
            {"tags": {"owner": 7}},
            "environments.dev.tags.owner: 7 is not allowed; must be a string [LLMEKS-E105]",
        ),
        (
            {"workload": {"slo": {"ttft_p99_ms": 1e-9}}},
            "environments.dev.workload.slo.ttft_p99_ms: 1e-09 is not allowed; must be 10 to 600000 milliseconds; a "
            "first token needs a network round trip, a scheduler step and a prefill pass over the whole prompt, "
            "which takes at least 10 ms [LLMEKS-E129]",
        ),
        (
            {"workload": {"slo": {"itl_p99_ms": 0.05}}},
            "environments.dev.workload.slo.itl_p99_ms: 0.05 is not allowed; must be 1 to 600000 milliseconds; each "
            "output token is a forward pass that reads every weight from GPU memory, which takes at least 1 ms"
            " [LLMEKS-E129]",
        ),
        (
            {
                "admin_role_arns": [
                    "arn:aws:iam::123456789012:role/Admin",
                    "arn:aws:iam::123456789012:role/Ops",
                    "arn:aws:iam::123456789012:role/admin",
                ]
            },
            "environments.dev.admin_role_arns[2]: 'arn:aws:iam::123456789012:role/admin' is not allowed; a role may "
            "be listed once (EKS allows one access entry per role) [LLMEKS-E110]",
        ),
        (
            None,
            "environments.dev: None is not allowed; must be an object (use {} for an environment with every default)"
            " [LLMEKS-E102]",
        ),
        (
            {"workload": {"slo": {"ttft_p99_ms": math.inf}}},
            "environments.dev.workload.slo.ttft_p99_ms: inf is not allowed; must be a finite number [LLMEKS-E105]",
        ),
        (
            {"workload": {"gpu_memory_utilization": math.nan}},
            "environments.dev.workload.gpu_memory_utilization: nan is not allowed; must be a finite number"
            " [LLMEKS-E105]",
        ),
        (
            {"workload": {"benchmark": {"request_rate": 1e308}}},
            "environments.dev.workload.benchmark.request_rate: 1e+308 is not allowed; must be at most num_prompts "
            "(200) per second; a higher rate sends every prompt in the first second already [LLMEKS-E126]",
        ),
        (
            {"workload": {"max_model_len": 10**400}},
            "environments.dev.workload.max_model_len: an integer of 1329 bits is not allowed; must be between "
            "-2**63 and 2**63 - 1 [LLMEKS-E105]",
        ),
    ],
)
def test_silently_accepted_inputs_are_one_line_errors(body: Any, message: str) -> None:
    assert error_of(body) == message


BUCKET_RULE = (
    "the bucket name must be 3-63 lowercase letters, digits, '.' and '-', start and end with a letter or digit, "
    "have no '..', not look like an IP address, not start with xn--, sthree- or amzn-s3-demo-, and not end with "
    "-s3alias, --ol-s3, .mrap, --x-s3 or --table-s3"
)
KEY_RULE = (
    "the key prefix may hold only S3's safe characters (letters, digits and ! - _ . * ' ( ) /), with no empty, '.' "
    "or '..' path segments"
)


@pytest.mark.parametrize(
    ("uri", "rule"),
    [
        ("s3://My-Bucket/llama", BUCKET_RULE),
        ("s3://ab/llama", BUCKET_RULE),
        ("s3://192.168.5.4/llama", BUCKET_RULE),
        ("s3://my..bucket/llama", BUCKET_RULE),
        ("s3://xn--bucket/llama", BUCKET_RULE),
        ("s3://weights-s3alias/llama", BUCKET_RULE),
        ("s3://weights--x-s3/llama", BUCKET_RULE),
        ("s3://weights/llama 3.1/8b", KEY_RULE),
        ("s3://weights/llama\x00/8b", KEY_RULE),
        ("s3://weights/llama#1", KEY_RULE),
        ("s3://weights/models//llama", KEY_RULE),
        ("s3://weights/models/../secrets", KEY_RULE),
        ("https://weights.s3.amazonaws.com/llama", "must start with s3://"),
    ],
)
def test_weights_uri_follows_s3_naming_rules(uri: str, rule: str) -> None:
    assert error_of({"workload": {"weights": "s3", "weights_s3_uri": uri}}) == (
        f"environments.dev.workload.weights_s3_uri: {uri!r} is not allowed; {rule} [LLMEKS-E125]"
    )


def test_valid_inputs_next_to_the_rejected_ones_are_accepted() -> None:
    config = parse_environment(
        "dev",
        {
            "account": "123456789012",
            "region": "us-gov-west-1",
            "vpc": {"cidr": "100.64.0.0/16", "availability_zones": ["us-gov-west-1a", "us-gov-west-1b"]},
            "endpoint": {"access": "public", "public_cidrs": ["198.51.100.0/24", "11.0.0.0/9"]},
            "tags": {"Équipe": "plateforme ML", "cost-center": "", "team:owner": "a.b@c.d/e+f=g"},
            "admin_role_arns": ["arn:aws:iam::123456789012:role/Admin", "arn:aws:iam::123456789012:role/Ops"],
            "workload": {
                "replicas": {"min": 0, "max": 2},
                "autoscaling": {
                    "scale_to_zero": {
                        "timezone": "America/Argentina/Buenos_Aires",
                        "start": "30 7 * JAN-DEC MON-FRI",
                        "end": "0 19,21 1-31 * 1-5",
                    }
                },
                "slo": {"ttft_p99_ms": 10, "itl_p99_ms": 1},
                "weights": "s3",
                "weights_s3_uri": "s3://my.weights-bucket/models/Llama-3.1_8B(instruct)!/",
            },
        },
    )
    assert config.region == "us-gov-west-1"
    assert config.workload.autoscaling.scale_to_zero is not None


def test_region_list_matches_botocore() -> None:
    """The region list is data (botocore is a dev dependency only); this keeps it in step with botocore's."""
    import botocore

    partitions = json.loads((Path(botocore.__file__).parent / "data" / "partitions.json").read_text())["partitions"]
    regions = {p["id"]: {r for r in p["regions"] if not r.endswith("-global")} for p in partitions}
    assert set(COMMERCIAL) == regions["aws"]
    assert set(CHINA) == regions["aws-cn"]
    assert set(GOVCLOUD) == regions["aws-us-gov"]
    assert len(REGIONS) == len(COMMERCIAL) + len(CHINA) + len(GOVCLOUD)


# --- cdk.json read strictly: keys given twice, numbers no float holds ---

DUPLICATE_ENV = '{"context": {"environments": {"dev": {"workload": {"engine": "tgi"}}, "dev": {}}}}'
DUPLICATE_KEY = '{"context": {"environments": {"dev": {"workload": {"slo": {"ttft_p99_ms": 900}, "slo": {}}}}}}'
HUGE_NUMBER = '{"context": {"environments": {"dev": {"workload": {"slo": {"ttft_p99_ms": 1e400}}}}}}'
HUGE_INTEGER = '{"context": {"environments": {"dev": {"workload": {"max_model_len": 1' + "0" * 5000 + "}}}}}"
STRICT_READ = [
    (
        DUPLICATE_ENV,
        "environments.dev: given twice in cdk.json; JSON keeps only the last, so the first would be silently "
        "ignored: write each key once [LLMEKS-E101]",
    ),
    (
        DUPLICATE_KEY,
        "environments.dev.workload.slo: given twice in cdk.json; JSON keeps only the last, so the first would be "
        "silently ignored: write each key once [LLMEKS-E101]",
    ),
    (
        HUGE_NUMBER,
        "environments.dev.workload.slo.ttft_p99_ms: 1e400 is not allowed; must be a finite number (too large for a "
        "64-bit float: JSON readers make it infinity) [LLMEKS-E101]",
    ),
    (
        HUGE_INTEGER,
        f"environments.dev.workload.max_model_len: 1{'0' * 5000} is not allowed; must be a finite number (too "
        "large for a 64-bit float: JSON readers make it infinity) [LLMEKS-E101]",
    ),
    (
        '{"context": {"environments": {"dev": {"workload": {"gpu_memory_utilization": NaN}}}}}',
        "environments.dev.workload.gpu_memory_utilization: NaN is not allowed; must be a finite number (NaN and "
        "Infinity are not JSON) [LLMEKS-E101]",
    ),
]


@pytest.mark.parametrize(("text", "message"), STRICT_READ)
def test_plan_env_reads_cdk_json_strictly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    context = write_context(tmp_path, text)
    code, out, err = cli(capsys, "plan", "--env", "dev", "--context-file", str(context))
    assert (code, out, err) == (2, "", f"llm-eks: error: {message}\n")


@pytest.mark.parametrize(("text", "message"), [STRICT_READ[0], STRICT_READ[2]])
def test_app_rereads_the_cdk_json_the_cli_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    """The CDK CLI hands the app the merged context: the first `dev` already dropped, 1e400 already null. The app
    re-reads cdk.json in its working folder (where the CDK CLI runs it) and reports what the user wrote.
    (app.py as a process, exit code and stderr included, is tested in test_config.)"""
    import aws_cdk as cdk

    from llm_eks.infra import app

    write_context(tmp_path, text)
    # Python's json, like the CLI's, keeps the last `dev`; the CLI hands 1e400 on as null.
    as_the_cli_passes_it = json.loads(json.dumps(json.loads(text)["context"]).replace("Infinity", "null"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(app, "new_app", lambda: cdk.App(context=as_the_cli_passes_it, outdir=str(tmp_path / "out")))
    with pytest.raises(SystemExit) as info:
        app.main()
    assert info.value.code == 2
    assert capsys.readouterr().err == f"llm-eks: error: {message}\n"


def test_context_json_option_is_read_strictly() -> None:
    """`cdk synth -c environments='{...}'` hands the app JSON text: it is read as strictly as cdk.json."""
    import aws_cdk as cdk

    from llm_eks.infra.app import read_context

    app = cdk.App(context={"environments": '{"dev": {}, "dev": {"region": "x"}}'})
    with pytest.raises(ConfigError) as info:
        read_context(app)
    assert str(info.value) == (
        "environments.dev: given twice in -c environments; JSON keeps only the last, so the first would be "
        "silently ignored: write each key once [LLMEKS-E101]"
    )


# --- `llm-eks manifests` identity options ---


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        (
            "--node-role-name",
            "arn:aws:iam::123456789012:role/KarpenterNodeRole-dev",
            "--node-role-name: 'arn:aws:iam::123456789012:role/KarpenterNodeRole-dev' is not allowed; must be an IAM "
            "role NAME (1-64 letters, digits and + = , . @ _ -), not its ARN [LLMEKS-E601]",
        ),
        (
            "--node-role-name",
            "Karpenter Node Role",
            "--node-role-name: 'Karpenter Node Role' is not allowed; must be an IAM role NAME (1-64 letters, digits "
            "and + = , . @ _ -), not its ARN [LLMEKS-E601]",
        ),
        (
            "--security-group-id",
            "sg-12345",
            "--security-group-id: 'sg-12345' is not allowed; must be a security group id such as sg-0123456789abcdef0"
            " [LLMEKS-E601]",
        ),
        (
            "--security-group-id",
            "vpc-0abc12345def67890",
            "--security-group-id: 'vpc-0abc12345def67890' is not allowed; must be a security group id such as "
            "sg-0123456789abcdef0 [LLMEKS-E601]",
        ),
    ],
)
def test_manifests_identity_options_are_checked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, option: str, value: str, message: str
) -> None:
    args = {"--node-role-name": "KarpenterNodeRole-dev", "--security-group-id": SG, option: value}
    code, out, err = cli(
        capsys, "manifests", "--env", "dev", "--context-file", str(REPO_ROOT / "cdk.json"), "--out",
        str(tmp_path), *[token for pair in args.items() for token in pair],
    )  # fmt: skip
    assert (code, out, err) == (2, "", f"llm-eks: error: {message}\n")
    assert not list(tmp_path.glob("*.yaml"))


# --- Hostile and mistaken input: always one line, never a traceback ---


@pytest.mark.parametrize(
    "workload",
    [
        {"max_model_len": -1},
        {"max_model_len": 0},
        {"max_model_len": 10**18},
        {"model": ""},
        {"model": "\u202emeta-llama/Llama-3.1-8B-Instruct"},
        {"model": "メタ/ラマ"},
        {"model": 42},
        {"target_concurrency": -5},
        {"typical_input_tokens": 10**15},
        {"gpu_memory_utilization": -0.5},
        {"gpu_memory_utilization": "0.9"},
        {"accelerator": ""},
        {"accelerator": "p5.48xlarge ; rm -rf /"},
        {"weight_format": None},
        {"replicas": {"min": 1, "max": 10**9}},
        {"replicas": []},
        {"benchmark": {"request_rate": 1e308}},
        {"autoscaling": {"scale_to_zero": "always"}},
        {"hf_token_secret": ""},
        {"capacity_types": "spot"},
        {"internal_alb": "yes"},
    ],
)
def test_hostile_workloads_fail_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, workload: Any) -> None:
    """Through `parse_environment` + the planner (what synth does) and through `llm-eks plan --env`."""
    message = None
    try:
        config = parse_environment("dev", {"workload": workload})
        plan(config.workload.plan_request())
    except ConfigError as err:
        message = str(err)
    assert message is not None and "\n" not in message, message
    context = write_context(tmp_path, json.dumps({"context": {"environments": {"dev": {"workload": workload}}}}))
    code, out, err = cli(capsys, "plan", "--env", "dev", "--context-file", str(context))
    assert (code, out) == (2, "") and err.count("\n") == 1 and err.startswith("llm-eks: error: environments.dev."), err


def test_null_environment_in_cdk_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    context = write_context(tmp_path, '{"context": {"environments": {"dev": {}, "qa": null}}}')
    code, _, err = cli(capsys, "plan", "--env", "dev", "--context-file", str(context))
    assert (code, err) == (
        2,
        "llm-eks: error: environments.qa: None is not allowed; must be an object (use {} for an environment with "
        "every default) [LLMEKS-E102]\n",
    )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
WORKLOAD_KEYS = sorted(WorkloadConfig.__dataclass_fields__)
NESTED_KEYS = ["min", "max", "ttft_p99_ms", "itl_p99_ms", "scale_to_zero", "timezone", "start", "end", *SPEC]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.sampled_from(WORKLOAD_KEYS),
        JSON | st.dictionaries(st.sampled_from(NESTED_KEYS), JSON, max_size=6),
        max_size=6,
    )
)
def test_any_json_workload_is_a_config_or_a_config_error(workload: dict[str, Any]) -> None:
    try:
        config = parse_environment("dev", {"workload": workload})
        plan(config.workload.plan_request())
    except ConfigError as err:
        assert "\n" not in str(err)


def test_default_cdk_json_reads_strictly() -> None:
    from llm_eks.strict_json import read_context_file

    context = read_context_file(REPO_ROOT / "cdk.json", "cdk.json")
    assert list(load_environments(context)) == ["dev", "staging", "prod"]
