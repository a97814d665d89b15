"""checkov on what the default app synthesizes: every CloudFormation template and every Kubernetes object we apply.

Zero failed checks; each suppression sits on its own resource (template `Metadata.checkov.skip` or the object's
`checkov.io/skip*` annotation) with a one-line reason. checkov runs from its own venv (`make test` builds
`.venv-checkov` from requirements-checkov.txt), offline (`--skip-download`).
"""

from __future__ import annotations

from typing import Any

import pytest

from llm_eks.manifests.checkov import serving_pod_annotations, skip_annotations
from tests.checkov_run import CHECKOV, failed_checks, gather, run_checkov, suppressions_without_a_reason
from tests.conftest import ENVIRONMENTS, Synthesized


@pytest.fixture(scope="module")
def checkov_results(synthesized: Synthesized, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    if not CHECKOV.exists():
        pytest.skip(f"{CHECKOV} is missing: `make test` installs it from requirements-checkov.txt")
    assert synthesized.error is None, synthesized.error
    folder = gather(
        tmp_path_factory.mktemp("checkov"),
        [synthesized.outdir / f"LlmEks-{env}.template.json" for env in ENVIRONMENTS],
        {env: synthesized.outdir / "manifests" / env for env in ENVIRONMENTS},
    )
    results = run_checkov(folder, "cloudformation", "kubernetes")
    assert results is not None
    return results


def test_checkov_scans_templates_and_kubernetes_objects(checkov_results: list[dict[str, Any]]) -> None:
    scanned = {r["check_type"]: r["summary"]["resource_count"] for r in checkov_results}
    assert scanned.keys() == {"cloudformation", "kubernetes"}
    assert all(count > 0 for count in scanned.values()), scanned


def test_checkov_has_no_failed_check(checkov_results: list[dict[str, Any]]) -> None:
    failed = failed_checks(checkov_results)
    assert not failed, "\n".join(failed)


def test_every_checkov_suppression_has_a_one_line_reason(checkov_results: list[dict[str, Any]]) -> None:
    skipped = [s for r in checkov_results for s in r["results"].get("skipped_checks", [])]
    assert skipped, "expected the documented suppressions (custom-resource Lambdas, SQS-managed SSE)"
    assert suppressions_without_a_reason(checkov_results) == []


def _checks(results: list[dict[str, Any]], kind: str, resource: str) -> set[str]:
    return {
        c["check_id"]
        for r in results
        for c in r["results"][kind]
        if c["resource"].startswith(resource) and "dev" in c["file_path"]
    }


def test_the_weights_bucket_is_versioned_and_skips_only_access_logs(checkov_results: list[dict[str, Any]]) -> None:
    """The environment's weights bucket (constructs/weights_bucket.py) passes checkov's S3 checks, versioning
    included, except server access logs: the stack's CloudTrail trail records its object access instead."""
    assert _checks(checkov_results, "skipped_checks", "AWS::S3::Bucket.WeightsBucket") == {"CKV_AWS_18"}
    passed = _checks(checkov_results, "passed_checks", "AWS::S3::Bucket.WeightsBucket")
    assert {"CKV_AWS_19", "CKV_AWS_21", "CKV_AWS_53", "CKV_AWS_54", "CKV_AWS_55", "CKV_AWS_56"} <= passed


def test_the_object_access_trail_is_encrypted_and_validated(checkov_results: list[dict[str, Any]]) -> None:
    """The trail that records the weights bucket's data events (constructs/audit.py): KMS-encrypted log files and
    signed digests; it skips only the all-regions check (it records buckets of its own region)."""
    assert _checks(checkov_results, "passed_checks", "AWS::CloudTrail::Trail.WeightsAccess") >= {
        "CKV_AWS_35",
        "CKV_AWS_36",
    }
    assert _checks(checkov_results, "skipped_checks", "AWS::CloudTrail::Trail.WeightsAccess") == {"CKV_AWS_67"}
    assert _checks(checkov_results, "failed_checks", "AWS::S3::Bucket.WeightsAccess") == set()
    assert "CKV_AWS_21" in _checks(checkov_results, "passed_checks", "AWS::S3::Bucket.WeightsAccess")


def test_serving_pod_suppressions_drop_the_digest_one_once_the_image_is_locked() -> None:
    tagged = serving_pod_annotations("vllm/vllm-openai:v0.33.0")
    locked = serving_pod_annotations("vllm/vllm-openai:v0.33.0@sha256:" + "0" * 64)
    assert {v.split("=")[0] for v in tagged.values()} == {
        "CKV_K8S_11",
        "CKV_K8S_15",
        "CKV_K8S_22",
        "CKV_K8S_40",
        "CKV_K8S_43",
    }
    assert "CKV_K8S_43" not in {v.split("=")[0] for v in locked.values()}
    assert sorted(tagged) == [f"checkov.io/skip{i}" for i in range(1, 6)]


def test_a_reason_with_an_equals_sign_is_refused() -> None:
    """checkov splits the annotation at '=': a reason holding one would be cut short."""
    with pytest.raises(ValueError, match="CKV_K8S_11 must be one non-empty line without '='"):
        skip_annotations({"CKV_K8S_11": "limits=none"})


def test_the_routers_pull_policy_reason_says_what_the_image_reference_is() -> None:
    """IfNotPresent is safe for an image pinned by digest; by tag it is a choice whose risk the reason names (a tag
    can move), beside the digest suppression that lasts only while the image is unlocked."""
    from llm_eks.manifests.gateway.common import router_meta

    def reasons(image: str) -> dict[str, str]:
        annotations = router_meta("epp", "inference", {}, image)["annotations"]
        return dict(v.split("=", 1) for k, v in annotations.items() if k.startswith("checkov.io/"))

    tagged = reasons("registry.k8s.io/llm-d/llm-d-router:v0.10.0")
    locked = reasons("registry.k8s.io/llm-d/llm-d-router:v0.10.0@sha256:" + "0" * 64)
    assert "a tag can move, so lock the digest (llm-eks images lock)" in tagged["CKV_K8S_15"]
    assert "CKV_K8S_43" in tagged
    assert locked["CKV_K8S_15"].startswith("IfNotPresent: the image is pinned by digest")
    assert "CKV_K8S_43" not in locked
    assert not any("never moves" in r for r in (*tagged.values(), *locked.values()))
