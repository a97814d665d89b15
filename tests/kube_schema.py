"""Validate synthesized Kubernetes objects: core kinds against the Kubernetes OpenAPI schema (kubernetes-validate),
custom resources against the upstream CRDs vendored in tests/fixtures/upstream/crds (SOURCES.md there names the
source of each). An object of a kind without a vendored CRD fails: copy the CRD in with its row.

CEL rules (`x-kubernetes-validations`) are not evaluated here: jsonschema ignores that keyword. The API server
enforces them; tests/crd_cel.py evaluates those a test names.

CRD schemas are made strict here: an object schema that lists `properties` and does not preserve unknown fields
rejects any other key. The API server would silently prune such a key, so a misspelled field deploys and does
nothing; we would rather fail the test.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from llm_eks.versions import KUBERNETES_VERSION
from tests.upstream import CRDS

# kubernetes-validate parses its JSON schema files (the 2 MB _definitions.json too) again for every object it
# validates: two thirds of the time. The files never change within a run.
kubernetes_validate.utils.schema_contents = functools.cache(kubernetes_validate.utils.schema_contents)

# Core API groups validated by kubernetes-validate; anything else must have a CRD in tests/fixtures/upstream/crds.
_CORE_GROUPS = {
    "",
    "apps",
    "batch",
    "policy",
    "autoscaling",
    "networking.k8s.io",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "scheduling.k8s.io",
    "admissionregistration.k8s.io",
}


def _strict(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


# Where each CRD lives, read from the text of the files (controller-gen and the other generators write `group:`
# and the names' `kind:` at these indents): a test parses only the files of the kinds it validates, not all 7 MB.
_GROUP = re.compile(r"^  group: (\S+)$", re.M)
_NAMES_KIND = re.compile(r"^  names:\n(?:    .*\n)*?    kind: (\S+)$", re.M)


@functools.cache
def _crd_files() -> dict[tuple[str, str], Path]:
    """(group, kind) -> the CRD file that defines it."""
    files: dict[tuple[str, str], Path] = {}
    for path in sorted(CRDS.glob("*.yaml")):
        text = path.read_text()
        groups, kinds = _GROUP.findall(text), _NAMES_KIND.findall(text)
        assert len(groups) == len(kinds) == 1, f"{path.name}: expected one CRD, found groups {groups} kinds {kinds}"
        key = (groups[0], kinds[0])
        assert key not in files, f"{path.name}: {key} has a schema in two files"
        files[key] = path
    return files


@functools.cache
def _file_validators(path: Path) -> dict[tuple[str, str], jsonschema.Draft7Validator]:
    validators: dict[tuple[str, str], jsonschema.Draft7Validator] = {}
    for doc in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader):
        if not doc or doc.get("kind") != "CustomResourceDefinition":
            continue
        group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
        for version in doc["spec"]["versions"]:
            if not version.get("served", True):
                continue
            schema = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
            # apiVersion/kind/metadata are checked by the API server, not the CRD schema.
            for key in ("apiVersion", "kind", "metadata"):
                schema.get("properties", {}).pop(key, None)
            schema["properties"] = {
                **schema.get("properties", {}),
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
            }
            validators[(f"{group}/{version['name']}", kind)] = jsonschema.Draft7Validator(schema)
    return validators


def _crd_validator(api_version: str, kind: str) -> jsonschema.Draft7Validator | None:
    path = _crd_files().get((api_version.rpartition("/")[0], kind))
    return None if path is None else _file_validators(path).get((api_version, kind))


# Deploy-time values a review YAML shows as `${GetAtt:...}`; schemas with patterns need a sample of the real shape.
_TOKEN_SAMPLES = {".ClusterSecurityGroupId}": "sg-0123456789abcdef0", ".GroupId}": "pg-0123456789abcdef0"}


def _with_samples(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _with_samples(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_samples(v) for v in value]
    if isinstance(value, str) and value.startswith("${"):
        for suffix, sample in _TOKEN_SAMPLES.items():
            if value.endswith(suffix):
                return sample
    return value


def validation_errors(obj: dict[str, Any]) -> list[str]:
    """Every schema error of one object, as readable lines (empty when valid)."""
    obj = _with_samples(obj)
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    name = f"{kind}/{obj.get('metadata', {}).get('name', '?')}"
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    if group in _CORE_GROUPS:
        try:
            kubernetes_validate.validate(obj, f"{KUBERNETES_VERSION}.0", strict=True)
        except kubernetes_validate.ValidationError as err:
            return [f"{name}: {'.'.join(str(p) for p in err.path)}: {err.message}"]
        return []
    validator = _crd_validator(api_version, kind)
    if validator is None:
        return [f"{name}: no schema for {api_version} {kind} in {CRDS}"]
    return [
        f"{name}: {'.'.join(str(p) for p in err.absolute_path)}: {err.message}" for err in validator.iter_errors(obj)
    ]


def assert_valid(objects: list[dict[str, Any]]) -> None:
    """Fail with every error of every object at once."""
    errors = [line for obj in objects for line in validation_errors(obj)]
    assert not errors, "invalid Kubernetes objects:\n" + "\n".join(errors)
