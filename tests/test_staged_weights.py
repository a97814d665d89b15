"""Weights "staged" (issue 12 item 1) in the default environments: the environment's bucket, the staging Job's
add-only role and the serving pods' read-only one, the pods waiting for the marker and streaming from the bucket,
the order the stack applies them in, and the cold start the plan prints for it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.manifests.weights_staging import BUCKET_CONFIG_MAP, BUCKET_ENV, WAIT_CONTAINER
from tests.conftest import CDK_JSON, Synthesized

PREFIX = "models/meta-llama/Llama-3.1-8B-Instruct/main/"
CACHE_PREFIX = "compile-cache/vllm-llama-3-1-8b-instruct/g5/"


def _resources(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == type_}


def _vllm_objects(synthesized: Synthesized) -> list[dict[str, Any]]:
    return synthesized.manifests("dev")["02-vllm.yaml"]


def _one(objects: list[dict[str, Any]], kind: str, prefix: str = "") -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].startswith(prefix)]
    return found


def test_the_environment_owns_one_encrypted_bucket_it_keeps(templates: dict[str, dict[str, Any]]) -> None:
    # One weights bucket (the other is the object-access trail's log bucket).
    ((bucket_id, bucket),) = [
        (k, r) for k, r in _resources(templates["dev"], "AWS::S3::Bucket").items() if k.startswith("WeightsBucket")
    ]
    assert bucket["DeletionPolicy"] == "Retain"
    assert "BucketName" not in bucket["Properties"]
    (rule,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    output = templates["dev"]["Outputs"]["WeightsBucketName"]
    assert output["Value"] == {"Ref": bucket_id}


def test_the_pods_stream_the_staged_prefix_after_the_marker(synthesized: Synthesized) -> None:
    objects = _vllm_objects(synthesized)
    deployment = _one(objects, "Deployment", "vllm-")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert f"s3://$({BUCKET_ENV})/{PREFIX}" in container["args"]
    assert {"name": BUCKET_ENV, "valueFrom": {"configMapKeyRef": {"name": BUCKET_CONFIG_MAP, "key": "bucket"}}} in (
        container["env"]
    )
    # The serving pod restores the cache and never saves it (the compile-cache Job does).
    wait, restore = pod["initContainers"]
    assert [c["name"] for c in pod["initContainers"]] == [WAIT_CONTAINER, "restore-compile-cache"]
    assert any(arg.startswith(CACHE_PREFIX) for arg in restore["args"])
    job = _one(objects, "Job", "stage-")
    key = job["metadata"]["name"].rsplit("-", 1)[1]
    assert key in wait["args"] and PREFIX in wait["args"]
    assert _one(objects, "ConfigMap", BUCKET_CONFIG_MAP)["data"] == {
        "bucket": "${Ref:" + _bucket_id(synthesized) + "}",
        # The key whose signature the restore checks before it uses a cached file.
        "cache-signing-key": "${GetAtt:WeightsCacheSigningKeyBD2745DC.Arn}",
    }


def _bucket_id(synthesized: Synthesized) -> str:
    (bucket_id,) = [
        k for k in _resources(synthesized.template("dev"), "AWS::S3::Bucket") if k.startswith("WeightsBucket")
    ]
    return bucket_id


def _policy_of(template: dict[str, Any], service_account: str) -> list[dict[str, Any]]:
    """The statements of the Pod Identity role of `service_account` (namespace inference)."""
    (association,) = [
        r
        for r in _resources(template, "AWS::EKS::PodIdentityAssociation").values()
        if r["Properties"]["ServiceAccount"] == service_account
    ]
    role_id = association["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    return [
        statement
        for policy in _resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    return {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}


def test_the_job_may_add_weights_and_the_pods_write_nothing(templates: dict[str, dict[str, Any]]) -> None:
    template = templates["dev"]
    stager = _policy_of(template, "stage-llama-3-1-8b-instruct")
    serving = _policy_of(template, "vllm-llama-3-1-8b-instruct")
    assert {"s3:PutObject", "s3:AbortMultipartUpload", "kms:GenerateDataKey"} <= _actions(stager)
    assert "secretsmanager:GetSecretValue" in _actions(stager)  # the gated model's Hub token
    assert not {a for a in _actions(stager) | _actions(serving) if a.startswith("s3:Delete")}
    assert PREFIX in json.dumps(stager) and CACHE_PREFIX not in json.dumps(stager)
    # The serving pods read the weights and their compile cache, and write nothing.
    assert "s3:PutObject" not in _actions(serving)
    reads = [s for s in serving if "s3:GetObject" in _actions([s])]
    assert {PREFIX, CACHE_PREFIX} <= {k for s in reads for k in (PREFIX, CACHE_PREFIX) if k in json.dumps(s)}


def test_the_workload_chart_waits_for_both_identities(templates: dict[str, dict[str, Any]]) -> None:
    template = templates["dev"]
    (manifest,) = [
        r
        for k, r in _resources(template, "Custom::AWSCDK-EKS-KubernetesResource").items()
        if k.startswith("PlatformClustervllm")
    ]
    after = set(manifest["DependsOn"])
    for service_account in ("stage-llama-3-1-8b-instruct", "vllm-llama-3-1-8b-instruct"):
        (association_id,) = [
            k
            for k, r in _resources(template, "AWS::EKS::PodIdentityAssociation").items()
            if r["Properties"]["ServiceAccount"] == service_account
        ]
        assert association_id in after, service_account


@pytest.mark.parametrize(("env", "hub", "staged", "cached"), [("dev", 328, 304, 273), ("prod", 1046, 341, 309)])
def test_staging_and_the_compile_cache_cut_the_planned_cold_start(env: str, hub: int, staged: int, cached: int) -> None:
    """The plan's scale-out cold start (new node) with the Hub download, with staged weights alone, and with the
    compile cache too (the default), as `llm-eks plan --env` prints them: prod's 70B no longer downloads 140 GB of
    16-bit files at every start, and no longer compiles on a new node."""
    body = CDK_JSON["context"]["environments"][env]
    bodies = {
        hub: {**body, "workload": {**body["workload"], "weights": "hf"}},
        staged: {**body, "workload": {**body["workload"], "compile_cache": False}},
        cached: body,
    }
    for expected, config_body in bodies.items():
        (plan,) = plan_workloads(parse_environment(env, config_body))
        assert plan.cold_start.scale_out_s == expected


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"workload": {"weights": "staged"}},
            "environments.qa.workload.weights: 'staged' is not allowed; needs environments.qa.weights_bucket ({} to "
            "let the stack create one, or the name of yours) [LLMEKS-E115]",
        ),
        (
            # Ray Serve stages into the environment's bucket too: it needs one as vLLM does.
            {"workload": {"engine": "ray-serve", "weights": "staged"}},
            "environments.qa.workload.weights: 'staged' is not allowed; needs environments.qa.weights_bucket ({} to "
            "let the stack create one, or the name of yours) [LLMEKS-E115]",
        ),
        (
            # Staged LoRA adapters stay vLLM's.
            {
                "weights_bucket": {},
                "workload": {"engine": "ray-serve", "weights": "staged", "lora_adapters": {"sql": "org/sql-lora"}},
            },
            "environments.qa.workload.lora_adapters: {'sql': 'org/sql-lora'} is not allowed; needs engine vllm (Ray "
            "Serve LLM loads LoRA from a dynamic path, which llm-eks does not configure) [LLMEKS-E127]",
        ),
        (
            {"weights_bucket": {"kms_key_arn": "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab"}},
            "environments.qa.weights_bucket.kms_key_arn: only allowed with name (the bucket llm-eks creates has its "
            "own key) [LLMEKS-E115]",
        ),
        (
            {"weights_bucket": {"name": "Bad_Bucket"}},
            "environments.qa.weights_bucket.name: 'Bad_Bucket' is not allowed; must be an S3 bucket name (3-63 "
            "lowercase letters, digits, '.', '-') [LLMEKS-E115]",
        ),
    ],
)
def test_bad_weights_config_is_one_line(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_environment("qa", body)
    assert str(info.value) == message
