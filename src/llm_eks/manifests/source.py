"""The annotation that names the module which built a Kubernetes object (`llm-eks.io/source:
llm_eks.manifests.vllm.chart`), so a reviewer of the synthesized YAML finds its source. It goes on the object's own
metadata only, never on a pod template's (a changed pod template restarts its pods), and not at all on an object
whose annotations a controller copies into the pods it runs (metadata_reaches_pods).

Plain Python (no cdk8s): the verifier's RBAC and other dict builders use it too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar, cast

SOURCE_ANNOTATION = "llm-eks.io/source"


def sourced_metadata(metadata: Mapping[str, Any], module: str) -> dict[str, Any]:
    """`metadata` with SOURCE_ANNOTATION naming `module`, unless it names a module already (the builder nearest to
    the object wins)."""
    annotations = dict(metadata.get("annotations") or {})
    annotations.setdefault(SOURCE_ANNOTATION, module)
    return {**metadata, "annotations": annotations}


def metadata_reaches_pods(obj: Mapping[str, Any]) -> bool:
    """Whether a controller copies the object's own annotations into the pods it runs. Conservatively, a Gateway
    without `spec.infrastructure`: some implementations render such a Gateway into a Deployment whose pod template
    carries the Gateway's annotations (Istio 1.30.3 did). Envoy Gateway v1.9.0, llm-eks's, copies only
    `spec.infrastructure.annotations` onto the proxy's pods and Service (internal/gatewayapi/translator.go
    infrastructureAnnotations), and llm-eks's Gateway has `spec.infrastructure` (its EnvoyProxy), so it names its
    source like any other object. Such an object names no source: the annotation would restart its pods."""
    return (
        obj.get("kind") == "Gateway"
        and str(obj.get("apiVersion", "")).startswith("gateway.networking.k8s.io/")
        and "infrastructure" not in (obj.get("spec") or {})
    )


def with_source(obj: Mapping[str, Any], module: str) -> dict[str, Any]:
    """A copy of the Kubernetes object `obj` whose metadata names the module that built it (see sourced_metadata),
    unless its annotations reach pods (metadata_reaches_pods)."""
    if metadata_reaches_pods(obj):
        return dict(obj)
    return {**obj, "metadata": sourced_metadata(obj.get("metadata") or {}, module)}


_P = ParamSpec("_P")
_R = TypeVar("_R", dict[str, Any], list[dict[str, Any]])


def builds_objects(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorate a function that returns a Kubernetes object, or a list of them, as dicts: each object it returns
    names the function's module in SOURCE_ANNOTATION (charts add them with serving_objects.add_objects)."""
    module = function.__module__

    @functools.wraps(function)
    def build(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        built = function(*args, **kwargs)
        if isinstance(built, list):
            return cast(_R, [with_source(obj, module) for obj in built])
        return with_source(built, module)

    return build
