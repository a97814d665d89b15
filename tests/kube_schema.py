"""Validate synthesized Kubernetes objects: core kinds against the Kubernetes OpenAPI schema (kubernetes-validate),
custom resources against the upstream CRD schemas in ../shared/schemas and, for the kinds that folder lacks, the
upstream CRDs vendored in tests/fixtures/schemas (always present; SOURCES.md there names their source).

CEL rules (`x-kubernetes-validations`) are not evaluated: jsonschema ignores that keyword. Only the API server (and,
for Istio kinds, istiod's validating webhook) enforces them.

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
import pytest
import yaml

from llm_eks.versions import KUBERNETES_VERSION

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
# kubernetes-validate parses its JSON schema files (the 2 MB _definitions.json too) again for every object it
# validates: two thirds of the time. The files never change within a run.
kubernetes_validate.utils.schema_contents = functools.cache(kubernetes_validate.utils.schema_contents)
SCHEMAS = SHARED / "schemas"
# Upstream CRDs vendored with the tests (kinds ../shared/schemas does not have); never skipped.
VENDORED_SCHEMAS = Path(__file__).resolve().parent / "fixtures" / "schemas"

# Core API groups validated by kubernetes-validate; anything else must have a CRD schema in ../shared/schemas or
# tests/fixtures/schemas.
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


def require_shared_schemas() -> None:
    """Skip (with the missing folder named) where ../shared/schemas is absent, e.g. a user's own checkout."""
    if not SCHEMAS.is_dir():
        pytest.skip(f"upstream CRD schemas not found: {SCHEMAS} is missing (present in CI)")


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


def _schema_files() -> list[Path]:
    """The vendored CRDs, and the shared ones where ../shared/schemas exists."""
    return [*sorted(VENDORED_SCHEMAS.glob("*.yaml")), *sorted(SCHEMAS.glob("*.yaml"))]


# Where each CRD lives, read from the text of the files (controller-gen and Istio's generator both write `group:`
# and the names' `kind:` at these indents): a test parses only the files of the kinds it validates, not all 7 MB.
_GROUP = re.compile(r"^  group: (\S+)$", re.M)
_NAMES_KIND = re.compile(r"^  names:\n(?:    .*\n)*?    kind: (\S+)$", re.M)


@functools.cache
def _crd_files() -> dict[tuple[str, str], Path]:
    """(group, kind) -> the CRD file that defines it."""
    files: dict[tuple[str, str], Path] = {}
    for path in _schema_files():
        text = path.read_text()
        groups, kinds = _GROUP.findall(text), _NAMES_KIND.findall(text)
        assert len(groups) == len(kinds) == 1, f"{path.name}: expected one CRD, found groups {groups} kinds {kinds}"
        key = (groups[0], kinds[0])
        # One schema per kind: a vendored copy of a kind the shared folder gained later must go.
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


def _vendored(api_version: str, kind: str) -> bool:
    """A kind whose CRD is in tests/fixtures/schemas (always present)."""
    path = _crd_files().get((api_version.rpartition("/")[0], kind))
    return path is not None and path.parent == VENDORED_SCHEMAS


def _needs_shared_schemas(obj: dict[str, Any]) -> bool:
    api_version = obj.get("apiVersion", "")
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    key = (api_version, obj.get("kind", ""))
    return group not in _CORE_GROUPS and key not in UNVALIDATED_KINDS and not _vendored(*key)


# Kinds with no upstream schema in ../shared/schemas; their chart tests check them field by field instead.
UNVALIDATED_KINDS = {("secrets-store.csi.x-k8s.io/v1", "SecretProviderClass")}

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
    if (api_version, kind) in UNVALIDATED_KINDS:
        return []
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    if group in _CORE_GROUPS:
        try:
            kubernetes_validate.validate(obj, f"{KUBERNETES_VERSION}.0", strict=True)
        except kubernetes_validate.ValidationError as err:
            return [f"{name}: {'.'.join(str(p) for p in err.path)}: {err.message}"]
        return []
    validator = _crd_validator(api_version, kind)
    if validator is None:
        return [f"{name}: no schema for {api_version} {kind} in {SCHEMAS} or {VENDORED_SCHEMAS}"]
    return [
        f"{name}: {'.'.join(str(p) for p in err.absolute_path)}: {err.message}" for err in validator.iter_errors(obj)
    ]


def assert_valid(objects: list[dict[str, Any]]) -> None:
    """Fail with every error of every object at once. Skips where ../shared/schemas is absent, unless every object
    is a core kind or a vendored one."""
    if any(_needs_shared_schemas(obj) for obj in objects):
        require_shared_schemas()
    errors = [line for obj in objects for line in validation_errors(obj)]
    assert not errors, "invalid Kubernetes objects:\n" + "\n".join(errors)


def assert_valid_secret_provider_class(obj: dict[str, Any]) -> None:
    """A SecretProviderClass against the Secrets Store CSI driver v1.6.0 CRD in ../shared/schemas."""
    require_shared_schemas()
    validator = _crd_validator("secrets-store.csi.x-k8s.io/v1", "SecretProviderClass")
    assert validator is not None
    errors = [f"{'.'.join(str(p) for p in err.absolute_path)}: {err.message}" for err in validator.iter_errors(obj)]
    assert not errors, errors
