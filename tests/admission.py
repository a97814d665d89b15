"""ValidatingAdmissionPolicies evaluated as the API server would: the policy's `variables` in order, then each
validation's CEL against `object` and `request`, with common-expression-language (a CEL implementation, plus the
strings library Kubernetes ships: lowerAscii and the rest).

What the API server does besides, and this does not: matchConstraints (the caller picks the objects a policy
matches), type-checking against the CRD's schema, and defaulting the object before admission (tests pass objects
as a defaulted one would look)."""

from __future__ import annotations

from typing import Any

import cel
import cel.stdlib


def denials(policy: dict[str, Any], obj: dict[str, Any], *, kind: str) -> list[str]:
    """The messages of every validation of `policy` that `obj` (of resource kind `kind`) fails."""
    assert policy["kind"] == "ValidatingAdmissionPolicy"
    context = cel.Context()
    cel.stdlib.add_stdlib_to_context(context)
    context.add_variable("object", obj)
    context.add_variable("request", {"kind": {"kind": kind}})
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
