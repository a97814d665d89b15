"""Karpenter's own CloudFormation for the pinned version (../shared/reference/), read as plain data so the
construct tests can compare our templates with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

KARPENTER_REFERENCE = (
    Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "karpenter-cloudformation.yaml"
)


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
    """The Resources of Karpenter's CloudFormation; skips the calling test where the file is absent."""
    if not KARPENTER_REFERENCE.is_file():
        pytest.skip(f"Karpenter reference CloudFormation not found: {KARPENTER_REFERENCE} is missing (present in CI)")
    return yaml.load(KARPENTER_REFERENCE.read_text(), Loader=_CfnLoader)["Resources"]
