"""Object metadata shared by the workload charts: the contract labels, name rules, and the one-call builder that
hands a whole object body to cdk8s as a plain dict (one jsii round trip per object, stable readable names, the
module that built it named in its metadata: manifests/source.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import cdk8s
from constructs import Construct

from llm_eks.error_codes import E400
from llm_eks.errors import ConfigError
from llm_eks.manifests.source import SOURCE_ANNOTATION, metadata_reaches_pods, sourced_metadata

PART_OF = "llm-eks"
VLLM_APP = "vllm"
# The label of the system node group (InferenceCluster sets it): controllers select it, GPU/CPU workloads never do.
SYSTEM_NODE_LABEL = ("llm-eks.io/node-role", "system")

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


# The pods of a vLLM workload's on-demand floor (`<name>-floor`): their own `name`, so neither Deployment's selector
# matches the other's pods, and the workload's `instance`, which the Service, PDB and pools select both by.
FLOOR_APP = "vllm-floor"
INSTANCE_LABEL = "app.kubernetes.io/instance"
# The InferencePool a vLLM serving pod joins (its workload's name; a next version's: its current version's), on
# every serving pod: a canary pair's pool selects it, so both versions' pods (and the floor's) share one pool while
# each version's Service, PDB and NetworkPolicies (`serving_selector`) keep to its own pods.
POOL_LABEL = "llm-eks.io/inference-pool"


def selector_labels(app: str, instance: str) -> dict[str, str]:
    """The immutable subset used in selectors (a Deployment's selector can never change)."""
    return {"app.kubernetes.io/name": app, INSTANCE_LABEL: instance}


def serving_selector(instance: str) -> dict[str, str]:
    """Every serving pod of one workload, its Spot/on-demand replicas and its on-demand floor alike: what its
    Service, PodDisruptionBudget, NetworkPolicies and InferencePool select (all mutable selectors; a pod of the
    first release, labelled before the floor existed, matches too)."""
    return {INSTANCE_LABEL: instance}


def app_labels(app: str, instance: str) -> dict[str, str]:
    """Labels every object of one workload carries (the cross-chart contract)."""
    return {**selector_labels(app, instance), "app.kubernetes.io/part-of": PART_OF}


def require_dns1035(field: str, value: str) -> None:
    """Service names (and so our workload names) must be DNS-1035 labels."""
    if not _DNS1035.match(value):
        raise ConfigError(
            E400,
            f"{field}: {value!r} is not allowed; must be a DNS-1035 label: lowercase letters, digits and '-', "
            "starting with a letter, at most 63 characters",
        )


def require_dns1123(field: str, value: str) -> None:
    """Namespace names must be DNS-1123 labels."""
    if not _DNS1123.match(value):
        raise ConfigError(
            E400,
            f"{field}: {value!r} is not allowed; must be a DNS-1123 label: lowercase letters, digits and '-', "
            "at most 63 characters",
        )


def plain_object(
    scope: Construct,
    construct_id: str,
    *,
    api_version: str,
    kind: str,
    metadata: Mapping[str, Any],
    body: Mapping[str, Any],
    source: str | None,
) -> cdk8s.ApiObject:
    """An ApiObject whose top-level fields (spec, data, ...) are given as one dict; `source` is the module that
    built it (its `__name__`), unless `metadata` names one already. None only for an object whose annotations reach
    its pods (metadata_reaches_pods), which names none.

    cdk8s's Python ApiObject takes only metadata; the rest goes in as a single JSON patch of plain values.
    """
    if metadata_reaches_pods({"apiVersion": api_version, "kind": kind, **body}):
        metadata = dict(metadata)
    elif source is not None:
        metadata = sourced_metadata(metadata, source)
    elif SOURCE_ANNOTATION not in (metadata.get("annotations") or {}):  # a bug: a builder without builds_objects
        raise ValueError(f"{kind} {metadata.get('name')}: source is None is not allowed; name the module that built it")
    obj = cdk8s.ApiObject(scope, construct_id, api_version=api_version, kind=kind, metadata=dict(metadata))
    if body:
        obj.add_json_patch(*(cdk8s.JsonPatch.add(f"/{key}", value) for key, value in body.items()))
    return obj
