"""`LlmEksChecks`: the synth-time checks of llm_eks.manifests.checks as a CDK validation plugin.

Register it once on the app; `cdk synth` then fails with one violation per finding, naming the Kubernetes object and
the fix, before anything deploys:

    app = cdk.App()
    ...  # stacks with aws_eks_v2 clusters, add_cdk8s_chart / add_manifest
    cdk.Validations.of(app).add_plugins(LlmEksChecks())

It reads every synthesized template: the Kubernetes objects of each `Custom::AWSCDK-EKS-KubernetesResource` (what
`add_manifest` and `add_cdk8s_chart` create; the `Manifest` property is JSON text, or an `Fn::Join` around deploy-time
tokens, which are rendered as placeholder strings), and each `AWS::EKS::Nodegroup` as a static node group (labels,
taints, instance types, capacity type, arch). Helm releases are not read (their objects exist only at deploy time).
A stack's objects are checked together; stacks are checked separately (one cluster each).

A finding can be acknowledged like any plugin violation, on the manifest's construct or a scope above it:
`cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id="llm-eks::DRAIN", reason="..."))`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii

from llm_eks import __version__
from llm_eks.manifests.checks import (
    RULES,
    Finding,
    InstanceLookup,
    StaticNodeGroup,
    catalog_instance_resources,
    check_objects,
    object_ref,
)
from llm_eks.manifests.node_pools.auto_mode import SYSTEM_POOL, builtin_system_pool

PLUGIN_NAME = "llm-eks"
# A manifest whose objects could not be read: reported as a warning (synth goes on), since nothing in it was checked.
UNREADABLE = "UNREADABLE_MANIFEST"
MANIFEST_TYPE = "Custom::AWSCDK-EKS-KubernetesResource"
NODEGROUP_TYPE = "AWS::EKS::Nodegroup"
CLUSTER_TYPE = "AWS::EKS::Cluster"
_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}


@dataclass(frozen=True)
class _Source:
    """Where one Kubernetes object came from in a template."""

    logical_id: str
    # Index of the object in the manifest's JSON array.
    index: int


def _placeholder(token: Any) -> str:
    """Text for a deploy-time value; no quote or backslash, so it stays valid inside a JSON string."""
    if isinstance(token, Mapping) and len(token) == 1:
        ((fn, arg),) = token.items()
        if fn == "Ref":
            return f"${{Token[Ref:{arg}]}}"
        if fn == "Fn::GetAtt":
            target = ".".join(arg) if isinstance(arg, list) else str(arg)
            return f"${{Token[GetAtt:{target}]}}"
        return f"${{Token[{fn}]}}"
    return "${Token}"


def render_manifest(value: Any) -> list[dict[str, Any]]:
    """The objects of a KubernetesManifest's `Manifest` property (a JSON string or an Fn::Join of one)."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, Mapping) and "Fn::Join" in value:
        separator, pieces = value["Fn::Join"]
        parts: list[str] = []
        in_string = False
        for piece in pieces:
            if isinstance(piece, str):
                parts.append(piece)
                in_string = _ends_inside_string(piece, in_string)
            else:
                # Inside a JSON string a token becomes placeholder text; outside (a number, say) JSON null.
                parts.append(_placeholder(piece) if in_string else "null")
        text = separator.join(parts)
    else:
        return []
    objects = json.loads(text)
    return [o for o in (objects if isinstance(objects, list) else [objects]) if isinstance(o, dict)]


def _ends_inside_string(piece: str, in_string: bool) -> bool:
    """Whether JSON text that starts in (or out of) a string ends inside one."""
    escaped = False
    for char in piece:
        if escaped:
            escaped = False
        elif char == "\\" and in_string:
            escaped = True
        elif char == '"':
            in_string = not in_string
    return in_string


def _arch(ami_type: Any) -> str | None:
    text = str(ami_type or "")
    if "ARM" in text:
        return "arm64"
    if "x86_64" in text or not text:
        return "amd64"  # no AmiType: EKS picks an x86_64 AMI for x86 instance types
    return None


def static_node_groups(template: Mapping[str, Any]) -> list[StaticNodeGroup]:
    """Every AWS::EKS::Nodegroup of a template, as the scheduling check's static node groups."""
    groups = []
    for logical_id, resource in (template.get("Resources") or {}).items():
        if resource.get("Type") != NODEGROUP_TYPE:
            continue
        props = resource.get("Properties") or {}
        name = props.get("NodegroupName")
        labels = {str(k): str(v) for k, v in (props.get("Labels") or {}).items() if isinstance(v, str)}
        taints = tuple(
            {
                "key": str(t.get("Key", "")),
                "value": str(t.get("Value", "")),
                "effect": _EFFECTS.get(t.get("Effect"), ""),
            }
            for t in props.get("Taints") or []
        )
        types = tuple(t for t in props.get("InstanceTypes") or [] if isinstance(t, str))
        groups.append(
            StaticNodeGroup(
                name=name if isinstance(name, str) else logical_id,
                labels=labels,
                taints=taints,
                instance_types=types,
                capacity_type=props.get("CapacityType", "ON_DEMAND"),
                arch=_arch(props.get("AmiType")),
            )
        )
    return groups


def builtin_node_pools(template: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The NodePools EKS Auto Mode creates itself (an AWS::EKS::Cluster's ComputeConfig.NodePools) that pods are placed
    on: only `system` is enabled by llm-eks."""
    names = {
        name
        for resource in (template.get("Resources") or {}).values()
        if resource.get("Type") == CLUSTER_TYPE
        for name in ((resource.get("Properties") or {}).get("ComputeConfig") or {}).get("NodePools") or []
    }
    return [builtin_system_pool()] if SYSTEM_POOL in names else []


def kubernetes_objects(template: Mapping[str, Any]) -> list[tuple[dict[str, Any], _Source]]:
    """Every Kubernetes object a template applies, with the resource it comes from."""
    return _read_manifests(template)[0]


def _read_manifests(template: Mapping[str, Any]) -> tuple[list[tuple[dict[str, Any], _Source]], dict[str, str]]:
    """The objects, and the manifests that could not be read (logical id -> why)."""
    out, unreadable = [], {}
    for logical_id, resource in (template.get("Resources") or {}).items():
        if resource.get("Type") != MANIFEST_TYPE:
            continue
        manifest = (resource.get("Properties") or {}).get("Manifest")
        try:
            objects = render_manifest(manifest)
        except (ValueError, TypeError) as err:
            unreadable[logical_id] = str(err)
            continue
        for index, obj in enumerate(objects):
            out.append((obj, _Source(logical_id, index)))
    return out, unreadable


@jsii.implements(cdk.IPolicyValidationPlugin)
class LlmEksChecks:
    """CDK validation plugin running llm_eks.manifests.checks on every stack's Kubernetes objects.

    `instance_resources` sizes instance types for the scheduling and GPU-limit checks (default: llm-eks's accelerator
    catalog plus common m/c/r sizes; None skips sizing).
    """

    def __init__(self, instance_resources: InstanceLookup | None = catalog_instance_resources) -> None:
        self._lookup = instance_resources

    @property
    def name(self) -> str:
        return PLUGIN_NAME

    @property
    def version(self) -> str:
        return __version__

    @property
    def rule_ids(self) -> list[str]:
        return [*RULES, UNREADABLE]

    def validate(self, context: cdk.IPolicyValidationContext) -> cdk.PolicyValidationPluginReport:
        violations: list[cdk.PolicyViolation] = []
        for template_path in context.template_paths:
            template = json.loads(Path(template_path).read_text())
            violations += self.check_template(template, template_path)
        success = all(v.severity == "warning" for v in violations)
        return cdk.PolicyValidationPluginReport(success=success, violations=violations)

    def check_template(self, template: Mapping[str, Any], template_path: str) -> list[cdk.PolicyViolation]:
        """One violation per finding, pointing at the manifest resource (and the object's index in it)."""
        pairs, unreadable = _read_manifests(template)
        objects = [obj for obj, _ in pairs]
        findings = check_objects(
            [*objects, *builtin_node_pools(template)],
            instance_resources=self._lookup,
            static_nodes=static_node_groups(template),
        )
        violations = [self._violation(f, self._sources(f, pairs), template_path) for f in findings]
        for logical_id, why in unreadable.items():
            resource = cdk.PolicyViolatingResource(
                resource_logical_id=logical_id, template_path=template_path, locations=["Properties/Manifest"]
            )
            violations.append(
                cdk.PolicyViolation(
                    rule_name=UNREADABLE,
                    description=f"the Kubernetes objects of {logical_id} could not be read ({why}); not checked",
                    fix="pass the manifest as plain objects (deploy-time values only inside strings)",
                    violating_resources=[resource],
                    severity="warning",
                )
            )
        return violations

    @staticmethod
    def _sources(finding: Finding, pairs: Sequence[tuple[dict[str, Any], _Source]]) -> list[_Source]:
        return [source for obj, source in pairs if object_ref(obj) == finding.object]

    @staticmethod
    def _violation(finding: Finding, sources: Sequence[_Source], template_path: str) -> cdk.PolicyViolation:
        resources = [
            cdk.PolicyViolatingResource(
                resource_logical_id=s.logical_id,
                template_path=template_path,
                locations=[f"Properties/Manifest/{s.index}"],
            )
            for s in sources
        ]
        return cdk.PolicyViolation(
            rule_name=finding.rule,
            description=f"{finding.object}: {finding.problem}",
            fix=finding.fix,
            violating_resources=resources,
        )
