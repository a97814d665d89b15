"""ValidatingAdmissionPolicies evaluated as the API server would: the policy's `variables` in order, then each
validation's CEL against `object` and `request`, with common-expression-language (a CEL implementation, plus the
strings library Kubernetes ships: lowerAscii and the rest).

What the API server does besides, and this does not: matchConstraints (the caller picks the objects a policy
matches), type-checking against the CRD's schema, and defaulting the object before admission (tests pass objects
as a defaulted one would look). `matches` evaluates a policy's matchConditions, as the API server does before any
validation."""

from __future__ import annotations

from typing import Any

import cel
import cel.stdlib


def _context(obj: dict[str, Any], kind: str, request: dict[str, Any] | None) -> cel.Context:
    context = cel.Context()
    cel.stdlib.add_stdlib_to_context(context)
    context.add_variable("object", obj)
    context.add_variable("request", {"kind": {"kind": kind}, **(request or {})})
    return context


def matches(policy: dict[str, Any], obj: dict[str, Any], *, kind: str, request: dict[str, Any] | None = None) -> bool:
    """Whether every matchCondition of `policy` holds for `obj` and `request` (e.g. its `userInfo`)."""
    context = _context(obj, kind, request)
    return all(cel.evaluate(c["expression"], context) is True for c in policy["spec"].get("matchConditions", []))


def denials(
    policy: dict[str, Any], obj: dict[str, Any], *, kind: str, request: dict[str, Any] | None = None
) -> list[str]:
    """The messages of every validation of `policy` that `obj` (of resource kind `kind`) fails; `request` adds to
    the request's attributes (e.g. `userInfo`)."""
    assert policy["kind"] == "ValidatingAdmissionPolicy"
    context = _context(obj, kind, request)
    variables: dict[str, Any] = {}
    for variable in policy["spec"].get("variables", []):
        context.add_variable("variables", variables)
        variables[variable["name"]] = cel.evaluate(variable["expression"], context)
    context.add_variable("variables", variables)
    failed = []
    for validation in policy["spec"]["validations"]:
        result = cel.evaluate(validation["expression"], context)
        assert isinstance(result, bool), (validation["expression"], result)
        if not result:
            failed.append(validation["message"])
    return failed
