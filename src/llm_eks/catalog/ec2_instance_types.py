"""Every EC2 instance type name, so a typo in a free-form instance type (`system_nodes.instance_type: m7i.xlargee`)
is a one-line error at synth instead of a node group that never launches.

The names are EC2's own `InstanceType` enum from the EC2 service model botocore ships
(`botocore/data/ec2/<api version>/service-2.json`), vendored as ec2_instance_types.json with the botocore version and
file they came from (botocore is Apache-2.0; the list is data from it, not its code), because botocore is only in
the `aws` extra and synth needs no AWS SDK. Regenerate it after moving the botocore pin (dev extra, pyproject.toml):

    .venv/bin/python -m llm_eks.catalog.ec2_instance_types

tests/test_ec2_instance_types.py holds the file to the installed botocore.
"""

from __future__ import annotations

import difflib
import functools
import gzip
import json
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from llm_eks.error_codes import E201
from llm_eks.errors import fail

DATA_FILE = Path(__file__).with_name("ec2_instance_types.json")


@dataclass(frozen=True)
class InstanceTypeList:
    """EC2's instance type names and where they were read."""

    names: frozenset[str]
    botocore_version: str
    # The service model inside botocore's package, e.g. botocore/data/ec2/2016-11-15/service-2.json.
    source_file: str


@functools.cache
def ec2_instance_types() -> InstanceTypeList:
    """The vendored list (read once)."""
    body = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    return InstanceTypeList(frozenset(body["instance_types"]), body["botocore_version"], body["source_file"])


def check_instance_type(path: str, value: Any) -> None:
    """Raise a one-line ConfigError naming `path` unless `value` is an EC2 instance type; the closest names help."""
    known = ec2_instance_types()
    if isinstance(value, str) and value in known.names:
        return
    close = difflib.get_close_matches(value, sorted(known.names), n=3, cutoff=0.8) if isinstance(value, str) else []
    hint = f"; closest: {', '.join(close)}" if close else "; such as m7i.xlarge"
    raise fail(E201, path, value, f"not an EC2 instance type (botocore {known.botocore_version}'s list){hint}")


def from_botocore() -> dict[str, Any]:
    """The list as the installed botocore has it: the InstanceType enum of its newest EC2 service model (the API
    version botocore's own loader picks), sorted."""
    root = resources.files("botocore") / "data" / "ec2"
    # botocore ships the model gzipped since 1.32; a plain service-2.json is read the same way.
    models = sorted(
        (d.name, f.name) for d in root.iterdir() if d.is_dir() for f in d.iterdir() if f.name.startswith("service-2.")
    )
    if not models:
        raise FileNotFoundError(f"no ec2/<api version>/service-2.json under {root}")
    version, name = models[-1]
    raw = (root / version / name).read_bytes()
    model = json.loads(gzip.decompress(raw) if name.endswith(".gz") else raw)
    return {
        "botocore_version": metadata.version("botocore"),
        "source_file": f"botocore/data/ec2/{version}/{name} (shapes.InstanceType.enum)",
        "licence": "Apache-2.0 (botocore)",
        "instance_types": sorted(model["shapes"]["InstanceType"]["enum"]),
    }


def render(body: dict[str, Any]) -> str:
    """The data file's text: one name a line, so a botocore upgrade diffs as the names it adds."""
    return json.dumps(body, indent=1) + "\n"


if __name__ == "__main__":
    generated = from_botocore()
    DATA_FILE.write_text(render(generated), encoding="utf-8")
    count, version = len(generated["instance_types"]), generated["botocore_version"]
    print(f"wrote {DATA_FILE}: {count} instance types, botocore {version}")
