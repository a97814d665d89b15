"""Weights "staged" for a Ray Serve workload: the staging environment with its Ray Serve model (qwen) staged,
synthesized with cdk-nag and llm-eks's checks. Every GPU worker copies the staged prefix to its node once the staging
key's marker is there, the serve config names that copy, the Ray pods' role only reads the prefix, and no Ray pod
holds the Hub token (the staging Job does)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.manifests.ray_serve import STAGED_WEIGHTS_DIR
from llm_eks.manifests.weights_staging import BUCKET_ENV, STAGING_KEY_LABEL
from tests.conftest import CDK_JSON, Synthesized, _synth
from tests.kube_schema import assert_valid
from tests.test_ray_serve_chart import base_props, synth

ENV = "staging"
NAMESPACE = "inference-qwen"
ACCOUNT = "ray-qwen"
PREFIX = "models/Qwen/Qwen3-30B-A3B/main/"
TOKEN = "llm-eks/staging/hf-token"


def _body() -> dict[str, Any]:
    """cdk.json's staging environment with its Ray Serve model staged (a gated model: only staging reads the token)."""
    body: dict[str, Any] = copy.deepcopy(CDK_JSON["context"]["environments"][ENV])
    body["workloads"]["qwen"].update({"weights": "staged", "hf_token_secret": TOKEN})
    return body


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    context = {**CDK_JSON["context"], "environments": {ENV: _body()}}
    outdir = tmp_path_factory.mktemp("ray-staged")
    result = Synthesized(Path(outdir), _synth(Path(outdir), context))
    assert result.error is None, result.error  # synth fails on any cdk-nag or llm-eks finding
    return result


@pytest.fixture(scope="module")
def ray_objects(synthesized: Synthesized) -> list[dict[str, Any]]:
    (objects,) = [objs for name, objs in synthesized.manifests(ENV).items() if name.endswith("-qwen-ray-serve.yaml")]
    return objects


def _one(objects: list[dict[str, Any]], kind: str, prefix: str = "") -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].startswith(prefix)]
    return found


def _worker_pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (group,) = _one(objects, "RayService")["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    pod: dict[str, Any] = group["template"]["spec"]
    return pod


def _key(objects: list[dict[str, Any]]) -> str:
    key: str = _one(objects, "Job", "stage-qwen-")["metadata"]["labels"][STAGING_KEY_LABEL]
    return key


def test_every_object_validates(ray_objects: list[dict[str, Any]]) -> None:
    # The weights ConfigMap carries the bucket's name as a CloudFormation token until deploy.
    assert_valid([o for o in ray_objects if o["metadata"]["name"] != "llm-eks-weights"])


def test_the_serve_config_serves_the_local_copy(ray_objects: list[dict[str, Any]]) -> None:
    serve = yaml.safe_load(_one(ray_objects, "RayService")["spec"]["serveConfigV2"])
    (llm,) = serve["applications"][0]["args"]["llm_configs"]
    assert llm["model_loading_config"] == {"model_id": "Qwen/Qwen3-30B-A3B", "model_source": STAGED_WEIGHTS_DIR}
    # Nothing comes from the Hub at start: no revision to resolve, no token in the replica's environment.
    assert "revision" not in llm["engine_kwargs"]
    assert "HF_TOKEN" not in json.dumps(llm)


def test_every_worker_copies_the_staged_prefix_after_the_marker(ray_objects: list[dict[str, Any]]) -> None:
    pod = _worker_pod(ray_objects)
    (fetch,) = pod["initContainers"]
    assert fetch["name"] == "fetch-weights"
    assert fetch["args"] == [
        "--bucket",
        f"$({BUCKET_ENV})",
        "--prefix",
        PREFIX,
        "--key",
        _key(ray_objects),
        "--fetch-to",
        STAGED_WEIGHTS_DIR,
    ]
    assert fetch["command"][:2] == ["python3", "-c"] and "def fetch(" in fetch["command"][2]
    (worker,) = pod["containers"]
    assert fetch["image"] == worker["image"]
    assert fetch["volumeMounts"] == [{"name": "staged-weights", "mountPath": STAGED_WEIGHTS_DIR}]
    assert worker["volumeMounts"] == [{"name": "staged-weights", "mountPath": STAGED_WEIGHTS_DIR, "readOnly": True}]
    # The copy lives on the node's disk, within what the worker asks of it.
    (volume,) = pod["volumes"]
    assert volume == {
        "name": "staged-weights",
        "emptyDir": {"sizeLimit": worker["resources"]["requests"]["ephemeral-storage"]},
    }


def test_no_ray_pod_holds_the_hub_token(ray_objects: list[dict[str, Any]]) -> None:
    cluster = _one(ray_objects, "RayService")["spec"]["rayClusterConfig"]
    pods = [cluster["headGroupSpec"]["template"]["spec"], _worker_pod(ray_objects)]
    assert "hf-token" not in json.dumps(pods) and "HF_TOKEN" not in json.dumps(pods)
    # The one token mount is the staging Job's, through its own ServiceAccount.
    (provider,) = [o for o in ray_objects if o["kind"] == "SecretProviderClass"]
    assert provider["metadata"]["name"] == "stage-qwen-hf-token"
    job = _one(ray_objects, "Job", "stage-qwen-")["spec"]["template"]["spec"]
    assert job["serviceAccountName"] == "stage-qwen"
    # The workload's own image stages it, as the Ray image's user.
    assert job["containers"][0]["image"] == _worker_pod(ray_objects)["containers"][0]["image"]
    assert job["securityContext"]["runAsUser"] == 1000


def _statements(template: dict[str, Any], account: str) -> list[dict[str, Any]]:
    resources = template["Resources"]
    (role,) = [
        r["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        for r in resources.values()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation"
        and r["Properties"]["Namespace"] == NAMESPACE
        and r["Properties"]["ServiceAccount"] == account
    ]
    return [
        s
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]


def _object_arn_suffix(statement: dict[str, Any]) -> str:
    """The object key pattern of an S3 object ARN built with Fn::Join (the bucket part is a reference)."""
    suffix: str = statement["Resource"]["Fn::Join"][1][-1]
    return suffix


def test_the_ray_role_reads_exactly_the_prefix_and_its_marker(
    synthesized: Synthesized, ray_objects: list[dict[str, Any]]
) -> None:
    statements = _statements(synthesized.template(ENV), ACCOUNT)
    assert {s["Action"] for s in statements} == {"s3:GetObject", "s3:ListBucket", "kms:Decrypt"}
    reads = sorted(_object_arn_suffix(s) for s in statements if s["Action"] == "s3:GetObject")
    assert reads == sorted([f"/{PREFIX}*", f"/staging-markers/{PREFIX}{_key(ray_objects)}*"])
    lists = sorted(s["Condition"]["StringLike"]["s3:prefix"][0] for s in statements if s["Action"] == "s3:ListBucket")
    assert lists == sorted([PREFIX, f"staging-markers/{PREFIX}{_key(ray_objects)}"])
    # The Hub token is the staging Job's: the Ray role reads no secret.
    assert "secretsmanager" not in json.dumps(statements)
    # Writing is the staging Job's own role's.
    stager = _statements(synthesized.template(ENV), "stage-qwen")
    assert any("s3:PutObject" in s["Action"] for s in stager)


def test_the_ray_service_waits_for_its_read_access(synthesized: Synthesized) -> None:
    template = synthesized.template(ENV)
    resources = template["Resources"]
    (association,) = [
        k
        for k, r in resources.items()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation" and r["Properties"]["ServiceAccount"] == ACCOUNT
    ]
    (ray,) = [r for k, r in resources.items() if k.startswith("PlatformClusterqwenrayserve")]
    assert association in ray["DependsOn"]


def test_the_plan_reads_the_weights_from_s3_instead_of_the_hub() -> None:
    """The planner models the Ray copy as its S3 path ("s3", no compile cache): `llm-eks plan --env` prints a
    shorter cold start than the Hub download."""
    staged = parse_environment(ENV, _body())
    hub = parse_environment(ENV, CDK_JSON["context"]["environments"][ENV])
    (staged_plan, _), (hub_plan, _) = plan_workloads(staged), plan_workloads(hub)
    assert staged_plan.request.weights_source == "s3"
    assert hub_plan.request.weights_source == "nvme"
    assert staged_plan.cold_start.weights_s < hub_plan.cold_start.weights_s


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"staged_weights": (PREFIX, "0123456789")},
            "ray_serve.model_source: 'meta-llama/Llama-3.1-8B-Instruct' is not allowed; must be "
            f"{STAGED_WEIGHTS_DIR} with staged_weights [LLMEKS-E405]",
        ),
        (
            {"staged_weights": (PREFIX, "not-a-key"), "model_source": STAGED_WEIGHTS_DIR, "hf_token_secret": None},
            "ray_serve.staged_weights: 'not-a-key' is not allowed; the key must be a staging key (10 hex digits) "
            "[LLMEKS-E405]",
        ),
        (
            {"staged_weights": (PREFIX, "0123456789"), "model_source": STAGED_WEIGHTS_DIR},
            "ray_serve.hf_token_secret: 'llm-eks/dev/hf-token' is not allowed; must be None with staged_weights "
            "(nothing from the Hub) [LLMEKS-E405]",
        ),
        (
            # A local path is the staged copy's only: an arbitrary one is neither a repo id nor an s3:// URI.
            {"model_source": STAGED_WEIGHTS_DIR},
            f"ray_serve.model_source: '{STAGED_WEIGHTS_DIR}' is not allowed; must be a Hugging Face repo id "
            "(org/name) or an s3:// URI [LLMEKS-E405]",
        ),
    ],
)
def test_bad_staged_props_fail_with_one_line(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        synth(base_props(**overrides))
    assert str(err.value) == message
