"""Upgrading llm-eks over a deployed environment: the baseline's cdk.json (tests/fixtures/baseline/, what users
deployed before this release) synthesized with the new code keeps every stateful resource, immutable field, pod
template and node class of the baseline's output, or CHANGELOG.md announces the change with its marker; every cdk.json
key removed, newly required or given another default since the baseline has its entry and migration."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from tests import baseline, upgrade_diff
from tests.changelog import Entry, entries_since
from tests.config_keys import config_keys
from tests.conftest import CDK_JSON, Synthesized, _synth
from tests.upgrade_diff import Finding

BASELINE = baseline.folder()
BASELINE_CONTEXT = json.loads((BASELINE / "cdk.json").read_text())["context"]
ENVIRONMENTS = tuple(BASELINE_CONTEXT["environments"])


def _announced() -> list[Entry]:
    return entries_since(baseline.info()["version"])


def _apply_migrations(context: dict[str, Any], announced: list[Entry]) -> dict[str, Any]:
    """The baseline's cdk.json as a user who followed the CHANGELOG's migrations holds it: keys announced as removed
    are deleted from every environment (other migrations need a person; their keys stay, and synth says so)."""
    migrated = copy.deepcopy(context)
    for entry in announced:
        if entry.marker != "cdk.json" or "removed" not in entry.text or entry.subject.startswith("pipeline."):
            continue
        *parents, leaf = entry.subject.split(".")
        for body in migrated["environments"].values():
            for parent in parents:
                body = body.get(parent) if isinstance(body, dict) else None
            if isinstance(body, dict):
                body.pop(leaf, None)
    return migrated


@pytest.fixture(scope="session")
def upgraded(synthesized: Synthesized, tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The new code's synth of the baseline's cdk.json: the session's default app when the two contexts are equal,
    else one synth of its own."""
    context = _apply_migrations(BASELINE_CONTEXT, _announced())
    if context == CDK_JSON["context"]:
        return synthesized
    outdir = tmp_path_factory.mktemp("upgrade")
    return Synthesized(outdir, _synth(outdir, context))


def _baseline_template(env: str) -> dict[str, Any]:
    template: dict[str, Any] = json.loads((BASELINE / "golden" / env / "template.json").read_text())
    return template


def _baseline_objects(env: str) -> list[dict[str, Any]]:
    folder = BASELINE / "golden" / env / "manifests"
    return [
        o
        for p in sorted(folder.glob("*.yaml"))
        if p.name != "helm-releases.yaml"  # a listing of the Helm releases, not objects
        for o in yaml.safe_load_all(p.read_text())
        if o
    ]


def _unannounced(findings: list[Finding]) -> str:
    """The CHANGELOG lines that would announce `findings`, for those it does not; empty when all are announced."""
    announced = {(e.marker, e.subject) for e in _announced()}
    missing: dict[tuple[str, str], list[Finding]] = {}
    for f in sorted(findings):
        if (f.marker, f.subject) not in announced:
            missing.setdefault((f.marker, f.subject), []).append(f)
    if not missing:
        return ""
    lines = [
        f"- **{marker}** `{subject}`: <why, and what a user sees> "
        f"({'; '.join(sorted({f'{f.where}: {f.what}' for f in found}))[:300]})"
        for (marker, subject), found in missing.items()
    ]
    return (
        f"against the baseline ({BASELINE.relative_to(BASELINE.parents[3])}), this release changes what a deployed "
        "environment runs without announcing it. Add to CHANGELOG.md, under the newest release's (or Unreleased's) "
        "### Changed:\n" + "\n".join(lines)
    )


def test_the_baseline_cdk_json_still_synthesizes(upgraded: Synthesized) -> None:
    assert upgraded.error is None, (
        "the baseline's cdk.json no longer synthesizes with this release: a user who upgrades gets the error below. "
        "Announce the change with a **cdk.json** entry and its Migration (a removed key is then deleted here as a user "
        f"would), or keep the key working.\n{upgraded.error}"
    )


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_stateful_resources_keep_their_logical_ids_and_replacement_properties(upgraded: Synthesized, env: str) -> None:
    assert upgraded.error is None
    findings = upgrade_diff.cloudformation(env, _baseline_template(env), upgraded.template(env))
    assert not (message := _unannounced(findings)), message


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_kubernetes_objects_keep_immutable_fields_pod_templates_and_node_classes(
    upgraded: Synthesized, env: str
) -> None:
    assert upgraded.error is None
    findings = upgrade_diff.kubernetes(env, _baseline_objects(env), upgraded.objects(env))
    assert not (message := _unannounced(findings)), message


def _key_changes(before: dict[str, Any], now: dict[str, Any]) -> list[Finding]:
    """cdk.json keys removed (or renamed), newly required in a section a user could already set, or given another
    default, between two config key tables (tests/config_keys.py)."""
    found = [Finding("cdk.json", k, "cdk.json", "removed or renamed") for k in before if k not in now]
    for key, spec in now.items():
        parent = key.rpartition(".")[0]
        if spec["required"] and not before.get(key, {}).get("required") and (not parent or parent in before):
            found.append(Finding("cdk.json", key, "cdk.json", "newly required"))
        elif key in before and spec["default"] != before[key]["default"]:
            found.append(
                Finding("cdk.json", key, "cdk.json", f"default {before[key]['default']!r} -> {spec['default']!r}")
            )
    return found


def test_every_cdk_json_key_change_since_the_baseline_has_its_migration() -> None:
    findings = _key_changes(json.loads((BASELINE / "config-keys.json").read_text()), config_keys())
    message = _unannounced(findings).replace("<why, and what a user sees>", "<what changed>. Migration: <one line>")
    assert not message, message


def test_key_changes_are_removals_new_requirements_and_defaults() -> None:
    before = {"gateway": {"required": False, "default": None}, "gateway.x": {"required": False, "default": 1}}
    now = {
        "gateway": {"required": False, "default": None},
        "gateway.y": {"required": True, "default": None},
        "fresh": {"required": False, "default": None},
        "fresh.z": {"required": True, "default": None},
    }
    assert {(f.subject, f.what) for f in _key_changes(before, now)} == {
        ("gateway.x", "removed or renamed"),
        ("gateway.y", "newly required"),
    }
    now["gateway.x"] = {"required": False, "default": 2}
    assert ("gateway.x", "default 1 -> 2") in {(f.subject, f.what) for f in _key_changes(before, now)}


# The comparison itself: each kind of change in a copy of the baseline is found, under the marker that announces it.


def _one_object(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind)


def test_a_changed_pod_template_restarts_pods_and_a_changed_selector_recreates() -> None:
    before = _baseline_objects("dev")
    after = copy.deepcopy(before)
    deployment = _one_object(after, "Deployment")
    deployment["spec"]["template"]["metadata"].setdefault("annotations", {})["x"] = "1"
    deployment["spec"]["selector"]["matchLabels"]["x"] = "1"
    key = upgrade_diff.object_key(deployment)
    assert {(f.marker, f.subject) for f in upgrade_diff.kubernetes("dev", before, after)} == {
        ("restarts pods", key),
        ("recreates", key),
    }


def test_user_data_must_stay_byte_identical() -> None:
    before = _baseline_objects("dev")
    after = copy.deepcopy(before)
    node_class = _one_object(after, "EC2NodeClass")
    node_class["spec"]["userData"] += "\n"
    assert [(f.marker, f.what) for f in upgrade_diff.kubernetes("dev", before, after)] == [
        ("replaces nodes", "spec.userData is not byte-identical")
    ]


def test_a_removed_workload_and_a_changed_service_type_are_found() -> None:
    before = _baseline_objects("dev")
    service = copy.deepcopy(_one_object(before, "Service"))
    service["spec"]["type"] = "LoadBalancer"
    after = [o for o in before if o["kind"] not in ("Deployment", "Service")] + [service]
    markers = {(f.marker, f.subject.split()[0]) for f in upgrade_diff.kubernetes("dev", before, after)}
    assert ("removes", "Deployment") in markers and ("recreates", "Service") in markers


def test_a_renamed_bucket_is_a_replacement_and_a_dropped_log_group_a_removal() -> None:
    before = _baseline_template("dev")
    after = copy.deepcopy(before)
    bucket_id = next(k for k, r in after["Resources"].items() if r["Type"] == "AWS::S3::Bucket")
    after["Resources"][bucket_id].setdefault("Properties", {})["BucketName"] = "another-name"
    log_id = next(k for k, r in after["Resources"].items() if r["Type"] == "AWS::Logs::LogGroup")
    del after["Resources"][log_id]
    found = {(f.marker, f.subject) for f in upgrade_diff.cloudformation("dev", before, after)}
    assert found == {("replaces", bucket_id), ("removes", log_id)}


def test_replacement_properties_come_from_cfn_lints_schemas() -> None:
    assert ("Name",) in upgrade_diff.replacement_properties("AWS::EKS::Cluster")
    assert ("CidrBlock",) in upgrade_diff.replacement_properties("AWS::EC2::Subnet")
    assert {("KeySpec",), ("KeyUsage",), ("MultiRegion",), ("Origin",)} <= set(
        upgrade_diff.replacement_properties("AWS::KMS::Key")
    )
    assert all(upgrade_diff.replacement_properties(t) for t in upgrade_diff.STATEFUL_TYPES)


def test_an_unannounced_change_names_the_entry_to_add() -> None:
    finding = Finding("restarts pods", "Deployment inference/vllm-x", "dev", "spec.template changed")
    assert "- **restarts pods** `Deployment inference/vllm-x`: <why, and what a user sees> (dev: spec.template " in (
        _unannounced([finding])
    )


def test_the_removed_ray_serve_key_is_announced_with_its_migration() -> None:
    (entry,) = [e for e in _announced() if e.subject == "gateway.ray_serve_without_api_key"]
    assert entry.marker == "cdk.json" and "Migration: delete the key" in entry.text
    context = {"environments": {"e": {"gateway": {"ray_serve_without_api_key": True, "expose": "cluster"}}}}
    assert _apply_migrations(context, [entry]) == {"environments": {"e": {"gateway": {"expose": "cluster"}}}}


def test_the_baseline_is_a_commit_of_this_repository() -> None:
    info = baseline.info()
    assert BASELINE.name == str(info["commit"])[:7]
    assert (BASELINE / "golden").is_dir() and (BASELINE / "cdk.json").is_file()
