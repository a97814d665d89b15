"""Review output: every Kubernetes object and Helm release a stack adds to its cluster, as plain YAML.

Written to `cdk.out/manifests/<env>/` by the same `cdk synth`. CloudFormation references inside objects (a role
name, the cluster name) are shown as `${Ref:LogicalId}` / `${GetAtt:LogicalId.Attr}` so a reviewer reads one file.
Every string that holds a line break (a script, a dashboard, a config file, user data) is written as a YAML block
literal (`|`), line for line as the cluster receives it: the same string, so the same object, only readable.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

HELM_RESOURCE = "Custom::AWSCDK-EKS-HelmChart"
KUBERNETES_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"
ADDON_NAMESPACES_FILE = "addon-namespaces.yaml"
CLUSTER_OBJECTS_FILE = "cluster-objects.yaml"
# aws_eks_v2 labels each object of a manifest so `kubectl apply --prune` finds the ones a new version dropped.
PRUNE_LABEL_PREFIX = "aws.cdk.eks/prune-"


def readable(value: Any) -> Any:
    """Turn CloudFormation intrinsics into `${...}` text; leave everything else as is."""
    if isinstance(value, dict):
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return f"${{Ref:{arg}}}"
            if key == "Fn::GetAtt":
                return f"${{GetAtt:{'.'.join(arg) if isinstance(arg, list) else arg}}}"
            if key == "Fn::Join":
                sep, parts = arg
                return sep.join(str(readable(p)) for p in parts)
            if key == "Fn::Select":
                return f"${{Select:{arg[0]}:{readable(arg[1])}}}"
            if key.startswith("Fn::"):
                return f"${{{key[4:]}:{json.dumps(arg, sort_keys=True)}}}"
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [readable(v) for v in value]
    return value


# libyaml's emitter when PyYAML was built with it (PyPI's wheels are): the same bytes as the pure-Python emitter on
# every golden file, 10x faster (0.07 s against 0.75 s for the three environments' review YAML).
_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _ReadableDumper(_SafeDumper):  # type: ignore[valid-type,misc]
    """PyYAML's safe dumper with multi-line strings as block literals and no anchors or aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # PyYAML falls back to a double-quoted scalar by itself where a block literal cannot hold the string exactly
    # (a line ending in a space, a tab or another control character); tests/review_yaml.py measures what is left quoted.
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_ReadableDumper.add_representer(str, _string)


def dump_all(docs: list[Any]) -> str:
    """Kubernetes objects as a YAML stream a person reads: keys in their order, multi-line strings as block
    literals, 120 columns."""
    return yaml.dump_all(
        docs, Dumper=_ReadableDumper, sort_keys=False, default_flow_style=False, width=120, allow_unicode=True
    )


def object_key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    """What names a Kubernetes object in a cluster: its apiVersion, kind, namespace and name."""
    metadata = obj.get("metadata") or {}
    return (obj["apiVersion"], obj["kind"], metadata.get("namespace", ""), metadata["name"])


def applied_objects(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every Kubernetes object the template applies through aws_eks_v2's kubectl provider, with the logical id of
    its manifest resource: the manifest's JSON with CloudFormation references as `${...}` text (as `readable` shows
    them), and without aws_eks_v2's prune label."""
    applied = []
    for logical_id, resource in template.get("Resources", {}).items():
        if resource.get("Type") != KUBERNETES_RESOURCE:
            continue
        for obj in json.loads(readable(resource["Properties"]["Manifest"])):
            labels = obj.get("metadata", {}).get("labels", {})
            for key in [k for k in labels if k.startswith(PRUNE_LABEL_PREFIX)]:
                del labels[key]
            if "labels" in obj.get("metadata", {}) and not labels:
                del obj["metadata"]["labels"]
            applied.append((logical_id, obj))
    return applied


def write_stack_review(
    charts: list[tuple[str, list[dict[str, Any]]]],
    template: dict[str, Any],
    out: Path,
    *,
    addon_namespaces: list[dict[str, Any]] | None = None,
) -> list[Path]:
    """Write one YAML per chart (in install order), addon-namespaces.yaml (each add-on's Namespace and
    NetworkPolicies, applied before its Helm releases), cluster-objects.yaml (the objects the stack's constructs
    apply besides those: a StorageClass, the CRD installer's RBAC, ...) and helm-releases.yaml; return the files
    written."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.yaml"):
        old.unlink()
    written = []
    shown: set[tuple[str, str, str, str]] = set()
    for index, (name, objects) in enumerate(charts, start=1):
        path = out / f"{index:02d}-{re.sub(r'[^a-z0-9-]+', '-', name.lower())}.yaml"
        path.write_text(dump_all([readable(o) for o in objects]))
        shown.update(object_key(o) for o in objects)
        written.append(path)
    if addon_namespaces:
        path = out / ADDON_NAMESPACES_FILE
        path.write_text(dump_all([readable(o) for o in addon_namespaces]))
        shown.update(object_key(o) for o in addon_namespaces)
        written.append(path)
    others = [obj for _, obj in applied_objects(template) if object_key(obj) not in shown]
    if others:
        path = out / CLUSTER_OBJECTS_FILE
        path.write_text(dump_all(others))
        written.append(path)
    releases = []
    for logical_id, resource in template.get("Resources", {}).items():
        if resource.get("Type") != HELM_RESOURCE:
            continue
        props = resource["Properties"]
        values = props.get("Values")
        releases.append(
            {
                "logicalId": logical_id,
                "release": props.get("Release"),
                "chart": props.get("Chart"),
                "repository": props.get("Repository"),
                "version": props.get("Version"),
                "namespace": props.get("Namespace"),
                "wait": props.get("Wait", False),
                "timeout": props.get("Timeout"),
                "values": _decode_values(values),
            }
        )
    if releases:
        path = out / "helm-releases.yaml"
        path.write_text(dump_all([readable(r) for r in releases]))
        written.append(path)
    return written


def _decode_values(values: Any) -> Any:
    """Helm values are a JSON string, or an Fn::Join of pieces when they hold references."""
    if isinstance(values, str):
        return json.loads(values)
    if isinstance(values, dict) and "Fn::Join" in values:
        text = readable(values)
        try:
            return json.loads(text)
        except (TypeError, json.JSONDecodeError):
            return text
    return readable(values)
