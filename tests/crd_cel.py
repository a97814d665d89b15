"""The CEL rules (`x-kubernetes-validations`) an upstream CRD puts on one field, evaluated as the API server would
(with common-expression-language, as tests/admission.py evaluates admission policies). kube_schema's jsonschema
checks leave them out; the EFA and reservation fields of EC2NodeClass carry rules worth checking here."""

from __future__ import annotations

import functools
from typing import Any

import cel
import cel.stdlib
import yaml

from tests.upstream import CRDS


@functools.cache
def _spec_properties(file_name: str) -> dict[str, Any]:
    doc = yaml.safe_load((CRDS / file_name).read_text())
    (version,) = [v for v in doc["spec"]["versions"] if v.get("storage", True)]
    properties: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    return properties


def failed_rules(file_name: str, field: str, value: Any) -> list[str]:
    """The messages of the rules on `spec.<field>` of the CRD tests/fixtures/upstream/crds/`file_name` that `value`
    fails."""
    failed = []
    for rule in _spec_properties(file_name)[field].get("x-kubernetes-validations", []):
        context = cel.Context()
        cel.stdlib.add_stdlib_to_context(context)
        context.add_variable("self", value)
        if cel.evaluate(rule["rule"], context) is not True:
            failed.append(rule["message"])
    return failed


def failed_item_rules(file_name: str, field: str, item: Any) -> list[str]:
    """The messages of the rules on each item of the list `spec.<field>` that `item` fails."""
    failed = []
    for rule in _spec_properties(file_name)[field]["items"].get("x-kubernetes-validations", []):
        context = cel.Context()
        cel.stdlib.add_stdlib_to_context(context)
        context.add_variable("self", item)
        if cel.evaluate(rule["rule"], context) is not True:
            failed.append(rule["message"])
    return failed


EC2_NODE_CLASS = "karpenter.k8s.aws_ec2nodeclasses.yaml"
AI_GATEWAY_ROUTE = "aigateway.envoyproxy.io_aigatewayroutes.yaml"
