"""Environment config: defaults, parsing, and one test per error with its exact one-line message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llm_eks.config import load_environments, parse_environment, select_environments
from llm_eks.error_codes import E102
from llm_eks.errors import ConfigError
from tests.coded import raises_code
from tests.conftest import CDK_JSON, REPO_ROOT


def env(**body: Any) -> dict[str, Any]:
    return body


def error_of(body: Any, name: str = "dev") -> str:
    with pytest.raises(ConfigError) as info:
        parse_environment(name, body)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_default_environments_parse() -> None:
    environments = load_environments(CDK_JSON["context"])
    assert list(environments) == ["dev", "staging", "prod"]
    dev = environments["dev"]
    assert dev.stack_name == "LlmEks-dev"
    assert dev.cluster_name == "llm-eks-dev"
    assert dev.account is None and dev.region is None
    assert dev.endpoint.access == "private"
    assert dev.workload.capacity_types == ("spot", "on-demand")
    staging = environments["staging"]
    assert [(s.key, s.config.engine, s.path) for s in staging.served] == [
        ("qwen", "ray-serve", "environments.staging.workloads.qwen"),
        ("llama", "vllm", "environments.staging.workloads.llama"),
    ]


def test_defaults_are_production_choices() -> None:
    config = parse_environment("x", {})
    assert config.kubernetes_version == "1.35"
    assert config.vpc.cidr == "10.0.0.0/16"
    assert config.system_nodes.min_size == 3
    assert config.workload.replicas.min == 1
    assert config.workload.autoscaling.scale_to_zero is None
    # The OpenAI endpoint needs a key unless the config turns it off; the stack generates it.
    assert (config.workload.api_key, config.workload.api_key_secret) == (True, None)


def test_config_is_frozen() -> None:
    config = parse_environment("x", {})
    with pytest.raises(AttributeError):
        config.name = "y"  # type: ignore[misc]


def test_existing_vpc() -> None:
    config = parse_environment(
        "x",
        {
            "account": "123456789012",
            "region": "eu-west-1",
            "vpc": {
                "vpc_id": "vpc-0abc12345def67890",
                "cidr": "172.20.0.0/16",
                "availability_zones": ["eu-west-1a", "eu-west-1b"],
                "private_subnet_ids": ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"],
            },
        },
    )
    assert config.vpc.imported
    assert config.vpc.cidr == "172.20.0.0/16"


@pytest.mark.parametrize(
    ("cidr", "message"),
    [
        (
            None,
            "environments.x.vpc.cidr: None is not allowed; an existing VPC needs its CIDR given (NetworkPolicies "
            "admit the EKS control plane and the ALB from it) [LLMEKS-E112]",
        ),
        (
            "vpc-cidr",
            "environments.x.vpc.cidr: 'vpc-cidr' is not allowed; must be the existing VPC's IPv4 CIDR such as "
            "10.0.0.0/16 [LLMEKS-E112]",
        ),
    ],
)
def test_existing_vpc_needs_its_cidr(cidr: str | None, message: str) -> None:
    vpc = {
        "vpc_id": "vpc-0abc12345def67890",
        "availability_zones": ["eu-west-1a", "eu-west-1b"],
        "private_subnet_ids": ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"],
    }
    if cidr is not None:
        vpc["cidr"] = cidr
    with pytest.raises(ConfigError) as err:
        parse_environment("x", {"account": "123456789012", "region": "eu-west-1", "vpc": vpc})
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"acount": "123456789012"},
            "environments.dev: unknown key 'acount'; did you mean 'account'? allowed: accepted_risks, account, "
            "admin_role_arns, alerting, alpha_features, capacity_reservations, compute, endpoint, gateway, "
            "kubernetes_version, production, region, require_image_digests, rollout_role_arns, "
            "system_nodes, tags, vpc, weights_bucket, workload, workloads [LLMEKS-E103]",
        ),
        (
            {"workload": {"modle": "x"}},
            "environments.dev.workload: unknown key 'modle'; did you mean 'model'? allowed: accelerator, "
            "accelerator_limit, acknowledged_warnings, alb, api_key, api_key_secret, autoscaling, benchmark, canary, "
            "capacity_types, compile_cache, conversation_turns, data_parallel_size, dedicated_pool, disaggregation, "
            "efa, enable_expert_parallel, engine, "
            "fallback_accelerator, gpu_memory_utilization, hf_token_secret, image, image_snapshot_id, "
            "kv_cache_dtype, kv_offload, lora_adapters, max_lora_rank, "
            "max_model_len, max_num_seqs, "
            "model, model_spec, on_demand_floor, pipeline_parallel_size, prefill_replicas, prefix_cache_scorer, "
            "replicas, revision, slo, target_concurrency, tensor_parallel_size, think_time_s, trust_remote_code, "
            "typical_input_tokens, typical_output_tokens, warm_replicas, weight_format, weights, weights_s3_uri "
            "[LLMEKS-E103]",
        ),
        (
            {"account": "1234"},
            "environments.dev.account: '1234' is not allowed; must be a 12-digit AWS account id [LLMEKS-E110]",
        ),
        (
            {"account": "123456789012"},
            "environments.dev: account and region must be given together (or neither, for an env-agnostic stack)"
            " [LLMEKS-E110]",
        ),
        (
            {"region": "mars-1", "account": "123456789012"},
            "environments.dev.region: 'mars-1' is not allowed; must be a commercial, GovCloud or China AWS region "
            "such as us-east-1 (listed in llm_eks/aws_regions.py) [LLMEKS-E110]",
        ),
        (
            {"kubernetes_version": "1.29"},
            "environments.dev.kubernetes_version: '1.29' is not allowed; must be 1.35, the version llm-eks pins its "
            "kubectl layer and node AMIs to (see llm_eks/versions.py) [LLMEKS-E110]",
        ),
        (
            {"vpc": {"cidr": "10.0.0.0/8"}},
            "environments.dev.vpc.cidr: '10.0.0.0/8' is not allowed; prefix length must be /16 to /20 "
            "(GPU nodes and pods need addresses) [LLMEKS-E112]",
        ),
        (
            {"vpc": {"cidr": "banana"}},
            "environments.dev.vpc.cidr: 'banana' is not allowed; must be an IPv4 CIDR such as 10.0.0.0/16"
            " [LLMEKS-E112]",
        ),
        (
            {"vpc": {"az_count": 3}},
            "environments.dev.vpc.az_count: 3 is not allowed; must be 2 unless availability_zones are listed "
            "(with account and region): an env-agnostic stack resolves only 2 zones without a context lookup"
            " [LLMEKS-E112]",
        ),
        (
            {"vpc": {"vpc_id": "vpc-0abc12345def67890"}},
            "environments.dev.vpc.availability_zones: [] is not allowed; an existing VPC needs its availability "
            "zones listed (at least 2), so synth needs no lookup [LLMEKS-E112]",
        ),
        (
            {"endpoint": {"access": "public"}},
            "environments.dev.endpoint.public_cidrs: [] is not allowed; access 'public' needs at least one CIDR "
            "to allow [LLMEKS-E113]",
        ),
        (
            {"endpoint": {"access": "public", "public_cidrs": ["0.0.0.0/0"]}},
            "environments.dev.endpoint.public_cidrs[0]: '0.0.0.0/0' is not allowed; must not be the whole "
            "internet; list your own ranges [LLMEKS-E113]",
        ),
        (
            {"endpoint": {"access": "open"}},
            "environments.dev.endpoint.access: 'open' is not allowed; must be 'private' or 'public' (public is "
            "limited to public_cidrs) [LLMEKS-E113]",
        ),
        (
            {"system_nodes": {"min_size": 1}},
            "environments.dev.system_nodes.min_size: 1 is not allowed; must be at least 2 (Karpenter's 2 "
            "replicas need 2 nodes in 2 AZs) [LLMEKS-E114]",
        ),
        (
            {"system_nodes": {"instance_type": "g6e.xlarge"}},
            "environments.dev.system_nodes.instance_type: 'g6e.xlarge' is not allowed; must be a CPU instance "
            "type (GPU capacity is Karpenter's) [LLMEKS-E114]",
        ),
        (
            {"system_nodes": {"instance_type": "m7i.xlargee"}},
            "environments.dev.system_nodes.instance_type: 'm7i.xlargee' is not allowed; not an EC2 instance type "
            "(botocore 1.44.8's list); closest: m7i.xlarge, m7i.8xlarge, m7i.4xlarge [LLMEKS-E201]",
        ),
        (
            {"system_nodes": {"instance_type": "m7i"}},
            "environments.dev.system_nodes.instance_type: 'm7i' is not allowed; not an EC2 instance type "
            "(botocore 1.44.8's list); such as m7i.xlarge [LLMEKS-E201]",
        ),
        (
            {"system_nodes": {"desired_size": 9}},
            "environments.dev.system_nodes.desired_size: 9 is not allowed; must be between min_size (3) and "
            "max_size (5) [LLMEKS-E114]",
        ),
        (
            {
                "admin_role_arns": ["arn:aws:iam::123456789012:role/ops"],
                "rollout_role_arns": ["arn:aws:iam::123456789012:role/OPS"],
            },
            "environments.dev.rollout_role_arns[0]: 'arn:aws:iam::123456789012:role/OPS' is not allowed; a role may "
            "be listed once (it is in admin_role_arns too) (EKS allows one access entry per role) [LLMEKS-E110]",
        ),
        (
            {"admin_role_arns": ["arn:aws:iam::123456789012:user/bob"]},
            "environments.dev.admin_role_arns[0]: 'arn:aws:iam::123456789012:user/bob' is not allowed; must be "
            "an IAM role ARN (arn:aws:iam::<account>:role/...) [LLMEKS-E110]",
        ),
        (
            {"tags": {"aws:owner": "me"}},
            "environments.dev.tags: 'aws:owner' is not allowed; tag keys are 1-128 characters of letters, digits, "
            "spaces and _ . : / = + - @, and may not start with 'aws:' [LLMEKS-E116]",
        ),
        (
            {"workload": {"engine": "tgi"}},
            "environments.dev.workload.engine: 'tgi' is not allowed; must be one of vllm, ray-serve [LLMEKS-E121]",
        ),
        (
            {"workload": {"capacity_types": ["spot", "reserved"]}},
            "environments.dev.workload.capacity_types: ['spot', 'reserved'] is not allowed; must be a non-empty "
            "subset of ['spot', 'on-demand'] [LLMEKS-E122]",
        ),
        (
            {"workload": {"replicas": {"min": 3, "max": 2}}},
            "environments.dev.workload.replicas.max: 2 is not allowed; must be at least replicas.min (3) and at "
            "least 1 [LLMEKS-E122]",
        ),
        (
            {"workload": {"replicas": {"min": 0}}},
            "environments.dev.workload.replicas.min: 0 is not allowed; must be at least 1 (0 only with "
            "autoscaling.scale_to_zero working hours, or for a vLLM workload behind the gateway, whose endpoint "
            "picker holds the requests that wake it) [LLMEKS-E122]",
        ),
        (
            {"workload": {"slo": {"ttft_p99_ms": -5}}},
            "environments.dev.workload.slo.ttft_p99_ms: -5.0 is not allowed; must be 10 to 600000 milliseconds; a "
            "first token needs a network round trip, a scheduler step and a prefill pass over the whole prompt, "
            "which takes at least 10 ms [LLMEKS-E129]",
        ),
        (
            {"workload": {"max_model_len": "8k"}},
            "environments.dev.workload.max_model_len: '8k' is not allowed; must be an integer [LLMEKS-E105]",
        ),
        (
            {"workload": {"weights": "s3"}},
            "environments.dev.workload.weights_s3_uri: None is not allowed; weights 's3' needs an "
            "s3://bucket/prefix URI [LLMEKS-E125]",
        ),
        (
            {"workload": {"hf_token_secret": "hf_abcdefghijklmnop"}},
            "environments.dev.workload.hf_token_secret: 'hf_…' is not allowed; must be the NAME of a Secrets "
            "Manager secret holding the token (never the token, never an ARN) [LLMEKS-E125]",
        ),
        (
            {"workload": {"autoscaling": {"kv_cache_usage": 95}}},
            "environments.dev.workload.autoscaling.kv_cache_usage: 95.0 is not allowed; must be between 0 and 1 "
            "(exclusive) [LLMEKS-E121]",
        ),
        (
            {"workload": {"image_snapshot_id": "ami-0123456789abcdef0"}},
            "environments.dev.workload.image_snapshot_id: 'ami-0123456789abcdef0' is not allowed; must be an EBS "
            "snapshot id such as snap-0123456789abcdef0 [LLMEKS-E125]",
        ),
        (
            {"name": "other"},
            "environments.dev.name: not allowed; the environment's name is its key in environments [LLMEKS-E102]",
        ),
        (
            {"workload": {"api_key": "yes"}},
            "environments.dev.workload.api_key: 'yes' is not allowed; must be true or false [LLMEKS-E105]",
        ),
        (
            {"workload": {"api_key": False, "api_key_secret": "llm-eks/dev/my-key"}},
            "environments.dev.workload.api_key_secret: only allowed with api_key true [LLMEKS-E128]",
        ),
        (
            {"workload": {"engine": "ray-serve", "api_key_secret": "llm-eks/dev/my-key"}},
            "environments.dev.workload.api_key_secret: 'llm-eks/dev/my-key' is not allowed; only engine 'vllm' "
            "checks an API key (Ray Serve LLM has none; NetworkPolicies guard it) [LLMEKS-E128]",
        ),
        (
            {"workload": {"api_key_secret": "arn:aws:secretsmanager:us-east-1:111122223333:secret:k-AbCdEf"}},
            "environments.dev.workload.api_key_secret: 'arn:aws:secretsmanager:us-east-1:111122223333:secret:"
            "k-AbCdEf' is not allowed; must be the NAME of a Secrets Manager secret holding the key (never the key, "
            "never an ARN) [LLMEKS-E128]",
        ),
        (
            {"workload": {"api_key_secret": "my api key"}},
            "environments.dev.workload.api_key_secret: 'my api key' is not allowed; must be the NAME of a Secrets "
            "Manager secret holding the key (never the key, never an ARN) [LLMEKS-E128]",
        ),
        ("not-an-object", "environments.dev: 'not-an-object' is not allowed; must be an object [LLMEKS-E105]"),
    ],
)
def test_config_errors(body: Any, message: str) -> None:
    assert error_of(body) == message


def test_bad_environment_name() -> None:
    assert error_of({}, name="Prod_1") == (
        "environments: 'Prod_1' is not allowed; names are 1-20 characters: lowercase letters, digits and '-', "
        "starting with a letter [LLMEKS-E102]"
    )


def test_missing_environments() -> None:
    with raises_code(E102, match=r"^environments: missing or empty"):
        load_environments({})


def test_unknown_selected_environment() -> None:
    environments = load_environments(CDK_JSON["context"])
    with pytest.raises(ConfigError) as info:
        select_environments(environments, "prd")
    assert (
        str(info.value)
        == "env: 'prd' is not allowed; did you mean 'prod'? defined environments: dev, staging, prod [LLMEKS-E102]"
    )
    assert [e.name for e in select_environments(environments, "prod")] == ["prod"]


def test_app_reports_one_line_and_exit_2() -> None:
    """A user's typo reaches them as one line on stderr and a non-zero exit, never a traceback."""
    context = {"environments": {"dev": {"workload": {"engine": "tgi"}}}}
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        env={**os.environ, "CDK_CONTEXT_JSON": json.dumps(context), "CDK_OUTDIR": "/tmp/llm-eks-bad-config"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "llm-eks: error: environments.dev.workload.engine: 'tgi' is not allowed; must be one of vllm, ray-serve"
        " [LLMEKS-E121]"
    )
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("environments", "line"),
    [
        # The CDK CLI drops an environment whose body is null from the context it hands the app.
        (
            '{"dev": null}',
            "environments.dev: None is not allowed; must be an object (use {} for an environment with every default)"
            " [LLMEKS-E102]",
        ),
        # JSON (and the CDK CLI) keep only the second body of a key written twice.
        (
            '{"dev": {}, "dev": {"workload": {}}}',
            "environments.dev: given twice in cdk.json; JSON keeps only the last, so the first would be silently "
            "ignored: write each key once [LLMEKS-E101]",
        ),
    ],
    ids=["null-body", "named-twice"],
)
def test_cdk_synth_names_what_the_cli_would_lose(tmp_path: Path, environments: str, line: str) -> None:
    """Through the real CDK CLI, as a user runs it: one line, exit 2, not "environments: missing or empty"."""
    (tmp_path / "cdk.json").write_text(
        f'{{"app": "{sys.executable} {REPO_ROOT / "app.py"}", "context": {{"environments": {environments}}}}}'
    )
    result = subprocess.run(
        [str(REPO_ROOT / "node_modules" / ".bin" / "cdk"), "synth", "--quiet", "--no-notices"],
        cwd=tmp_path,
        env={**os.environ, "CDK_DISABLE_VERSION_CHECK": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert f"llm-eks: error: {line}" in result.stderr.splitlines()
