"""The vendored EC2 instance type list is botocore's own, at the pinned botocore, and our catalog's GPU rows are in it.

catalog/ec2_instance_types.json is generated from botocore's EC2 service model (`python -m
llm_eks.catalog.ec2_instance_types`); botocore is pinned in the dev extra, so a clone's tests read the same release.
"""

from __future__ import annotations

import json
from importlib import metadata

import pytest

from llm_eks.catalog.accelerators import CATALOG
from llm_eks.catalog.ec2_instance_types import (
    DATA_FILE,
    check_instance_type,
    ec2_instance_types,
    from_botocore,
    render,
)
from llm_eks.errors import ConfigError


def test_the_vendored_list_is_the_installed_botocores() -> None:
    generated = from_botocore()
    assert generated["botocore_version"] == metadata.version("botocore") == "1.44.8"
    # Byte for byte: regenerate with `python -m llm_eks.catalog.ec2_instance_types` after moving the pin.
    assert DATA_FILE.read_text(encoding="utf-8") == render(generated)
    body = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    assert body["source_file"] == "botocore/data/ec2/2016-11-15/service-2.json.gz (shapes.InstanceType.enum)"
    assert body["instance_types"] == sorted(set(body["instance_types"])) and len(body["instance_types"]) == 1437


def test_every_catalog_instance_type_is_an_ec2_instance_type() -> None:
    missing = [row.instance_type for row in CATALOG if row.instance_type not in ec2_instance_types().names]
    assert missing == []


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "m7i.xlargee",
            "system_nodes.instance_type: 'm7i.xlargee' is not allowed; not an EC2 instance type (botocore 1.44.8's "
            "list); closest: m7i.xlarge, m7i.8xlarge, m7i.4xlarge [LLMEKS-E201]",
        ),
        (
            "c7g.medum",
            "system_nodes.instance_type: 'c7g.medum' is not allowed; not an EC2 instance type (botocore 1.44.8's "
            "list); closest: c7g.medium, c7gn.medium, c7gd.medium [LLMEKS-E201]",
        ),
        (
            "M7I.XLARGE",
            "system_nodes.instance_type: 'M7I.XLARGE' is not allowed; not an EC2 instance type (botocore 1.44.8's "
            "list); such as m7i.xlarge [LLMEKS-E201]",
        ),
        (
            4,
            "system_nodes.instance_type: 4 is not allowed; not an EC2 instance type (botocore 1.44.8's list); such "
            "as m7i.xlarge [LLMEKS-E201]",
        ),
    ],
)
def test_a_typo_names_the_field_the_value_and_the_closest_names(value: object, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        check_instance_type("system_nodes.instance_type", value)
    assert str(err.value) == message


@pytest.mark.parametrize("name", ["m7i.xlarge", "m7i.large", "c7i.2xlarge", "r7g.xlarge", "m8g.xlarge"])
def test_real_instance_types_pass(name: str) -> None:
    check_instance_type("system_nodes.instance_type", name)
