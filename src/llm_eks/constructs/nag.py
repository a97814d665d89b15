"""Scoped acknowledgements of security-scanner findings: each names the exact finding, the resource it is on, and
one line of why.

Two scanners read our templates: cdk-nag's AwsSolutions pack (a validation plugin at synth) and checkov (run on the
synthesized templates by the test suite). cdk-nag findings are acknowledged on the construct; checkov reads its
suppressions from the resource's own CloudFormation `Metadata.checkov.skip`, so a reviewer sees the reason beside the
resource in the template.
"""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from constructs import IConstruct


def acknowledge(scope: IConstruct, finding: str, reason: str) -> None:
    """Acknowledge one AwsSolutions finding on `scope` (and only there), e.g. `IAM4[Policy::...]`."""
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"AwsSolutions::AwsSolutions-{finding}", reason=reason))


def _flatten(node: Any) -> str:
    """A resolved CloudFormation value as cdk-nag spells it in finding ids (`${X}`/Ref X -> `<X>`)."""
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if isinstance(node, dict):
        if "Fn::Join" in node:
            delimiter: str
            items: list[Any]
            delimiter, items = node["Fn::Join"]
            return delimiter.join(_flatten(item) for item in items)
        if "Fn::Sub" in node:
            return _flatten(node["Fn::Sub"])
        if "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return f"<{_flatten(resource)}.{_flatten(attribute)}>"
        if "Ref" in node:
            return f"<{_flatten(node['Ref'])}>"
    return json.dumps(node, separators=(",", ":"))


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def iam5_findings(scope: Any, document: Any) -> list[str]:
    """The cdk-nag AwsSolutions-IAM5 finding ids a policy document raises, so each can be acknowledged by name
    (a new wildcard then shows up as an unacknowledged finding instead of hiding under a blanket one)."""
    resolved = cdk.Stack.of(scope).resolve(document)
    if not isinstance(resolved, dict):
        return []  # A whole-document Fn::Sub: cdk-nag cannot read it and reports nothing.
    findings: set[str] = set()
    for statement in resolved.get("Statement", []):
        if statement.get("Effect") != "Allow":
            continue
        findings.update(f"IAM5[Action::{a}]" for a in _as_list(statement.get("Action")) if "*" in _flatten(a))
        for resource in _as_list(statement.get("Resource")):
            flat = _flatten(resource)
            if "*" in flat:
                findings.add(f"IAM5[Resource::{flat}]")
    return sorted(findings)


def managed_policy(name: str) -> str:
    """The IAM4 finding text for an AWS managed policy name such as `service-role/AmazonEBSCSIDriverPolicy`."""
    return f"IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{name}]"


def skip_checkov(scope: IConstruct, check_id: str, reason: str) -> None:
    """Suppress one checkov check on the CloudFormation resource `scope` (or its default child), with the reason."""
    resource = scope if isinstance(scope, cdk.CfnResource) else scope.node.default_child
    if not isinstance(resource, cdk.CfnResource):
        raise TypeError(f"{scope.node.path} has no CloudFormation resource to carry a checkov suppression")
    metadata: dict[str, Any] = resource.get_metadata("checkov") or {"skip": []}
    skips = [s for s in metadata["skip"] if s["id"] != check_id]
    resource.add_metadata("checkov", {"skip": [*skips, {"id": check_id, "comment": reason}]})


# checkov's Lambda checks on the custom-resource Lambdas (aws_eks_v2's kubectl provider, our teardown) and why they
# do not apply: these functions run only while CloudFormation deploys or deletes the stack.
CUSTOM_RESOURCE_LAMBDA_SKIPS = {
    "CKV_AWS_116": "A failed custom-resource event fails the CloudFormation deploy itself; a DLQ would hold nothing.",
    "CKV_AWS_115": "Runs only during stack deploys and deletes; reserved concurrency would take from the account pool.",
    "CKV_AWS_173": "Its environment holds names and ARNs, no secrets; Lambda encrypts it at rest by default.",
}


def skip_custom_resource_lambda_checks(function: IConstruct) -> None:
    """The checkov suppressions every custom-resource Lambda shares (see CUSTOM_RESOURCE_LAMBDA_SKIPS)."""
    for check_id, reason in CUSTOM_RESOURCE_LAMBDA_SKIPS.items():
        skip_checkov(function, check_id, reason)
