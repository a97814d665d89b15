"""Karpenter's own CloudFormation for the pinned version (tests/fixtures/upstream/karpenter-cloudformation.yaml),
read as plain data so the construct tests can compare our templates with it."""

from __future__ import annotations

from typing import Any

import yaml

from tests.upstream import KARPENTER_CLOUDFORMATION


class _CfnLoader(yaml.SafeLoader):
    """Reads CloudFormation short-form tags (!Sub, !Ref, !GetAtt) as {"Fn::Sub": ...} etc."""


def _tag(name: str) -> Any:
    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if name == "Fn::GetAtt":
                value = value.split(".", 1)
        else:
            value = loader.construct_sequence(node, deep=True)
        return {name: value}

    return construct


for _short, _long in (("!Sub", "Fn::Sub"), ("!Ref", "Ref"), ("!GetAtt", "Fn::GetAtt")):
    _CfnLoader.add_constructor(_short, _tag(_long))


def karpenter_reference() -> dict[str, Any]:
    """The Resources of Karpenter's CloudFormation."""
    resources: dict[str, Any] = yaml.load(KARPENTER_CLOUDFORMATION.read_text(), Loader=_CfnLoader)["Resources"]
    return resources
