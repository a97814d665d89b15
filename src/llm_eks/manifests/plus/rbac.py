"""Role and RoleBinding builders: one dict in, its cdk8s-plus Role or RoleBinding out, reconciled.

cdk8s-plus-35 2.0.5 (lib/role.js `synthesizeRules`) renders one rule per resource: the rule's verbs on one
IApiResource (`ApiResource.custom(api_group, resource_type)` for any group, the core one as ""), with that
resource's name when it has one. Ours may name several resources or groups in one rule, and names (`resourceNames`)
of objects that are not in the chart (the load Job `llm-eks verify` creates): each rule is built through cdk8s-plus
from its verbs, first group and first resource, and reconcile adds the rest to that rule (`add /rules/<i>/resources/-`,
`add /rules/<i>/resourceNames`). Rules a user adds (`allow`, `allow_read`, ...) render after ours.

A RoleBinding binds its Role by name (`Role.from_role_name`) to its subjects as cdk8s-plus references
(`ServiceAccount.from_service_account_name`, `Group.from_name`, `User.from_name`); cdk8s-plus renders a
ServiceAccount subject's `apiGroup: ""`, which reconcile removes (ours leave it out, as the API server does).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, cast

import cdk8s_plus_35 as kplus
from constructs import Construct

from llm_eks.manifests.plus.reconcile import reconciled


@functools.cache
def _resource(api_group: str, resource_type: str) -> kplus.IApiResource:
    """A value object (no construct): one per group and resource for the process, one jsii call each."""
    made = kplus.ApiResource.custom(api_group=api_group, resource_type=resource_type)
    # ApiResource implements IApiResource (its resourceName is optional); jsii's Python types omit the property.
    return cast(kplus.IApiResource, made)


def _rules(rules: Sequence[Mapping[str, Any]]) -> list[kplus.RolePolicyRule]:
    return [
        kplus.RolePolicyRule(verbs=list(r["verbs"]), resources=[_resource(r["apiGroups"][0], r["resources"][0])])
        for r in rules
    ]


def role(scope: Construct, construct_id: str, obj: Mapping[str, Any]) -> kplus.Role:
    """The Role `obj` as a cdk8s-plus Role, in one constructor call, reconciled (the module docstring says what)."""
    rules = obj.get("rules") or ()
    # A rule by resource names only (no resources) has no cdk8s-plus form: that rule and those after it are patched.
    expressible = []
    for rule in rules:
        if not rule.get("apiGroups") or not rule.get("resources"):
            break
        expressible.append(rule)
    return reconciled(kplus.Role, scope, construct_id, obj, {"rules": _rules(expressible)})


def _subject(scope: Construct, construct_id: str, subject: Mapping[str, Any]) -> kplus.ISubject | None:
    kind, name = subject["kind"], subject["name"]
    if kind == "ServiceAccount":
        return kplus.ServiceAccount.from_service_account_name(
            scope, construct_id, name, namespace_name=subject.get("namespace")
        )
    if kind == "Group":
        return kplus.Group.from_name(scope, construct_id, name)
    if kind == "User":
        return kplus.User.from_name(scope, construct_id, name)
    return None


def role_binding(scope: Construct, construct_id: str, obj: Mapping[str, Any]) -> kplus.RoleBinding:
    """The RoleBinding `obj` as a cdk8s-plus RoleBinding of its Role (by name) to its subjects, reconciled."""
    # A Role of the namespace by name (a ClusterRole's roleRef is reconciled to its kind).
    bound = kplus.Role.from_role_name(scope, f"{construct_id}-role", obj["roleRef"]["name"])
    subjects = [_subject(scope, f"{construct_id}-subject-{i}", s) for i, s in enumerate(obj.get("subjects") or ())]

    def bind(made: kplus.RoleBinding) -> None:
        # The subjects up to the first cdk8s-plus has no reference for; the rest are patched.
        known = []
        for subject in subjects:
            if subject is None:
                break
            known.append(subject)
        if known:
            made.add_subjects(*known)

    return reconciled(kplus.RoleBinding, scope, construct_id, obj, {"role": bound}, bind)
