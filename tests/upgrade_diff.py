"""What an upgrade does to a deployed environment, read from two synth outputs of the same cdk.json (the baseline's
and the new code's): each change a user must be told about, as the CHANGELOG marker that announces it and the
object it names (CHANGELOG.md, "Markers").

CloudFormation: the stateful resource types below must keep their logical ids, and none of the properties whose change
makes CloudFormation replace the resource (or fail the update) may change. Those properties come from the resource
schemas cfn-lint ships as data (cfnlint/data/schemas: providers/us-east-1.json maps a type to its schema file under
resources/): each schema's `createOnlyProperties` (CloudFormation's registry: a change requires replacement), plus the
properties whose description says an update fails on a change (AWS::KMS::Key's KeySpec, KeyUsage, MultiRegion, Origin:
"If you change the value ... the update request fails").

Kubernetes: immutable fields (a workload's selector, a StatefulSet's volumeClaimTemplates and serviceName, a Service's
type and clusterIP, a Job's template and selector) recreate the object; a pod template change restarts pods; an
EC2NodeClass's userData and static fields, and a NodePool's template, make Karpenter replace the nodes (drift: the
NodePool's spec.template is hashed except its requirements, and an EC2NodeClass's static fields are hashed while its
selector terms are resolved; Karpenter's designs/drift-hash-versioning.md). Objects are compared as parsed YAML, so
a change of quoting or block style is not a change; userData is compared as the exact string.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cfnlint

# Resources that hold data or an identity others rely on: replacing one loses data, rotates an address or a name
# other systems know, or rebuilds the cluster.
STATEFUL_TYPES = (
    "AWS::EKS::Cluster",
    "AWS::EC2::VPC",
    "AWS::EC2::Subnet",
    # The NAT gateways' public addresses: partners allow-list them.
    "AWS::EC2::EIP",
    "AWS::S3::Bucket",
    "AWS::KMS::Key",
    "AWS::SQS::Queue",
    "AWS::SecretsManager::Secret",
    "AWS::Logs::LogGroup",
    "AWS::CloudTrail::Trail",
)
_SCHEMAS = Path(cfnlint.__file__).parent / "data" / "schemas"
_UPDATE_FAILS = re.compile(r"the update request fails|(?:can't|cannot) change the ", re.IGNORECASE)

# Kubernetes kinds whose pod template rolls pods, and where it is.
POD_TEMPLATES = {
    "Deployment": (("spec", "template"),),
    "StatefulSet": (("spec", "template"),),
    "DaemonSet": (("spec", "template"),),
    # A LeaderWorkerSet rolls its groups on any change of its template (leader, workers, size).
    "LeaderWorkerSet": (("spec", "leaderWorkerTemplate"),),
    # KubeRay starts a new RayCluster (and moves traffic to it) when the cluster config changes.
    "RayService": (("spec", "rayClusterConfig"),),
}
IMMUTABLE = {
    "Deployment": (("spec", "selector"),),
    "DaemonSet": (("spec", "selector"),),
    "StatefulSet": (("spec", "selector"), ("spec", "volumeClaimTemplates"), ("spec", "serviceName")),
    "Job": (("spec", "template"), ("spec", "selector")),
    "Service": (("spec", "type"), ("spec", "clusterIP")),
}
# Removing one of these deletes running pods, nodes, addresses, volumes or everything in a namespace.
REMOVAL_MATTERS = {*POD_TEMPLATES, "Job", "Service", "PersistentVolumeClaim", "NodePool", "EC2NodeClass", "Namespace"}


@dataclass(frozen=True, order=True)
class Finding:
    """One change to announce: the marker and subject of its CHANGELOG entry, where it was seen and what changed."""

    marker: str
    subject: str
    where: str
    what: str


@functools.cache
def replacement_properties(resource_type: str) -> tuple[tuple[str, ...], ...]:
    """Property paths (as key tuples under Properties) whose change replaces a resource of this type or fails it."""
    provider = json.loads((_SCHEMAS / "providers" / "us-east-1.json").read_text())
    schema = json.loads((_SCHEMAS / "resources" / f"{provider[resource_type]}.json").read_text())
    paths = {tuple(p.split("/")[2:]) for p in schema.get("createOnlyProperties", [])}
    paths |= {
        (name,) for name, prop in schema["properties"].items() if _UPDATE_FAILS.search(prop.get("description", ""))
    }
    return tuple(sorted(paths))


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def cloudformation(env: str, before: dict[str, Any], after: dict[str, Any]) -> list[Finding]:
    """Stateful resources of `before` removed or replaced in `after` (two templates of one environment)."""
    found = []
    resources = after["Resources"]
    for logical_id, old in before["Resources"].items():
        if old["Type"] not in STATEFUL_TYPES:
            continue
        new = resources.get(logical_id)
        if new is None:
            found.append(Finding("removes", logical_id, env, f"{old['Type']} is gone from the template"))
            continue
        if new["Type"] != old["Type"]:
            found.append(Finding("replaces", logical_id, env, f"type {old['Type']} -> {new['Type']}"))
            continue
        for path in replacement_properties(old["Type"]):
            was, now = _at(old.get("Properties", {}), path), _at(new.get("Properties", {}), path)
            if was != now:
                found.append(Finding("replaces", logical_id, env, f"{'.'.join(path)}: {was!r} -> {now!r}"))
    return found


def object_key(obj: dict[str, Any]) -> str:
    """`Kind namespace/name`, or `Kind name` for a cluster-scoped object: how the CHANGELOG names it."""
    meta = obj["metadata"]
    return (
        f"{obj['kind']} {meta['namespace']}/{meta['name']}"
        if meta.get("namespace")
        else f"{obj['kind']} {meta['name']}"
    )


def _without(spec: dict[str, Any], drop: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k not in drop}


def kubernetes(env: str, before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[Finding]:
    """Objects of `before` removed, recreated, restarting pods or replacing nodes in `after` (one environment)."""
    found = []
    new_objects = {object_key(o): o for o in after}
    for old in before:
        key, kind = object_key(old), old["kind"]
        new = new_objects.get(key)
        if new is None:
            if kind in REMOVAL_MATTERS:
                found.append(Finding("removes", key, env, "no longer applied (deleted from the cluster)"))
            continue
        for path in IMMUTABLE.get(kind, ()):
            if _at(old, path) != _at(new, path):
                found.append(Finding("recreates", key, env, f"immutable {'.'.join(path)} changed"))
        for path in POD_TEMPLATES.get(kind, ()):
            if _at(old, path) != _at(new, path):
                found.append(Finding("restarts pods", key, env, f"{'.'.join(path)} changed"))
        if kind == "EC2NodeClass":
            old_spec, new_spec = old["spec"], new["spec"]
            if old_spec.get("userData") != new_spec.get("userData"):
                found.append(Finding("replaces nodes", key, env, "spec.userData is not byte-identical"))
            dynamic = ("userData", *(k for k in {*old_spec, *new_spec} if k.endswith("SelectorTerms")))
            if _without(old_spec, dynamic) != _without(new_spec, dynamic):
                found.append(Finding("replaces nodes", key, env, "a static field of spec changed"))
        if kind == "NodePool":
            old_template, new_template = old["spec"]["template"], new["spec"]["template"]
            if {**old_template, "spec": _without(old_template["spec"], ("requirements",))} != {
                **new_template,
                "spec": _without(new_template["spec"], ("requirements",)),
            }:
                found.append(Finding("replaces nodes", key, env, "spec.template changed (drift)"))
    return found
