"""What every llm-eks ValidatingAdmissionPolicy shares: its binding, which denies (never only warns or audits) every
request the policy's validations refuse, everywhere its matchConstraints reach."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

API_VERSION = "admissionregistration.k8s.io/v1"


def deny_binding(policy: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """The ValidatingAdmissionPolicyBinding of `policy`, named after it, with validationActions Deny."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy, "labels": dict(labels)},
        "spec": {"policyName": policy, "validationActions": ["Deny"]},
    }
