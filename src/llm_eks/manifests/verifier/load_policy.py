"""The admission policy that holds Group `llm-eks-load` to the load Jobs `llm-eks verify --load` builds.

Role `llm-eks-load` must grant `create` on Jobs, and RBAC cannot limit a create to a name or to what the object
holds: without this policy a member could create any Job in a workload's namespace (mount its secrets, run as its
serving ServiceAccount, run any image or command and read the result from the pod's log). One
ValidatingAdmissionPolicy per vLLM workload namespace (bound with Deny, failurePolicy Fail), matched to requests of
that group creating or updating `batch/v1` Jobs there, admits only a Job that is one of the namespace's load Jobs
as `load_job` renders it:

- its name `<benchmark>-load`;
- the benchmark's ServiceAccount, automountServiceAccountToken as built (false), the pod security context as built;
- the same containers and init containers, in order: name, image (the one the plan pins, by digest when the image
  lock has it), command, environment (no envFrom), and arguments of the same shape whose only free values are the
  numbers a load run sets (`open_args`: lengths, request count, rate, concurrency); the API key the container
  exports goes to the Service URL in its arguments and nowhere else;
- the same volumes by name and source (an emptyDir, the Secrets Store CSI volumes of its SecretProviderClass);
- the pod template's labels as built (plus the Job controller's own), no pod annotations;
- never the node's network, PID or IPC namespace, a hostPath volume, a privileged container, privilege escalation
  or an added capability; no extended resource (a GPU).

The expected values are inline constants of the policy, not a paramRef: a ConfigMap holds only flat strings and
Kubernetes' CEL has no JSON decoding, so the commands, volumes and environment would be flattened into dozens of keys;
a ConfigMap in the namespace would also be a second object whose writers could widen the policy. The constants
change only when the workload's manifests change, which is when the policy is applied again with them.

Kubernetes type-checks these expressions with HomogeneousAggregateLiterals (apiserver pkg/cel/environment/base.go):
every list and map literal here holds one type (`_cel` refuses anything else). The Job is validated by the API server
(one source per volume, a name from generateName) before validating admission runs, as these checks assume.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from llm_eks.manifests.admission import deny_binding
from llm_eks.manifests.source import builds_objects
from llm_eks.manifests.verifier.rbac import LABELS

POLICY_PREFIX = "llm-eks-load-"
# Labels the Job controller adds to a Job's pod template before admission (batch/v1 Job strategy).
JOB_CONTROLLER_LABELS = ("controller-uid", "job-name")
JOB_CONTROLLER_LABEL_PREFIX = "batch.kubernetes.io/"
# What `:g` formats a count or a rate as (`1`, `12.5`, `1e+06`).
NUMBER = r"^[0-9]+(\.[0-9]+)?(e[+-][0-9]+)?$"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
_BASIC_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def policy_name(namespace: str) -> str:
    return f"{POLICY_PREFIX}{namespace}"


def _cel(value: str | bool | int | Sequence[str] | Sequence[int] | Mapping[str, str]) -> str:
    """A CEL literal of one type: a string, bool, int, list of strings or ints, or map of strings to strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int):
        return json.dumps(value)
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise ValueError(f"not a map of strings: {value!r}")  # a bug in the caller
        return json.dumps(dict(value), sort_keys=True)
    kinds = {type(v) for v in value}
    if len(kinds) > 1 or not kinds <= {str, int}:
        raise ValueError(f"not a list of one type: {value!r}")  # a bug in the caller
    return json.dumps(list(value))


def _deny(rule: str, message: str) -> dict[str, Any]:
    return {"expression": rule, "message": message, "reason": "Forbidden"}


def _all(terms: Sequence[str]) -> str:
    return " && ".join(f"({t})" for t in terms) if terms else "true"


def _list(expr: str, field: str) -> tuple[str, str]:
    """`expr.field` as a list (empty when absent) and its size."""
    return f"{expr}.{field}", f"(has({expr}.{field}) ? size({expr}.{field}) : 0)"


def _env(c: str, env: Sequence[Mapping[str, Any]]) -> list[str]:
    items, size = _list(c, "env")
    terms = [f"{size} == {len(env)}", f"!has({c}.envFrom) || size({c}.envFrom) == 0"]
    for i, e in enumerate(env):
        item = f"{items}[{i}]"
        terms.append(f"{item}.name == {_cel(e['name'])}")
        if "value" in e:
            terms.append(f"has({item}.value) && {item}.value == {_cel(e['value'])}")
        elif set(e.get("valueFrom", {})) == {"configMapKeyRef"}:
            ref = e["valueFrom"]["configMapKeyRef"]
            path = f"{item}.valueFrom.configMapKeyRef"
            terms.append(
                f"has({item}.valueFrom) && has({path}) && {path}.name == {_cel(ref['name'])} && "
                f"{path}.key == {_cel(ref['key'])}"
            )
        else:
            raise ValueError(f"no admission rule for env {e!r}")  # a new kind of env: write its rule
    return terms


def _args(c: str, args: Sequence[str], open_args: Collection[str]) -> str:
    """The arguments as built, except the value after each of `open_args`: a number."""
    values = ["" if i > 0 and args[i - 1] in open_args else a for i, a in enumerate(args)]
    if any(a == "" for a in args):
        raise ValueError(f"an empty argument cannot be pinned: {args!r}")  # a bug in the caller
    return (
        f"has({c}.args) && size({c}.args) == {len(args)} && {_cel(list(range(len(args))))}.all(i, "
        f"{_cel(values)}[i] == '' ? {c}.args[i].matches({_cel(NUMBER)}) : {c}.args[i] == {_cel(values)}[i])"
    )


def _containers(field: str, built: Sequence[Mapping[str, Any]], open_args: Collection[str]) -> tuple[str, str]:
    """(image rule, command rule) of the pod's `field` list against `built`."""
    items, size = _list("variables.spec", field)
    images, commands = [f"{size} == {len(built)}"], [f"{size} == {len(built)}"]
    for i, b in enumerate(built):
        c = f"{items}[{i}]"
        images.append(f"{c}.name == {_cel(b['name'])} && {c}.image == {_cel(b['image'])}")
        commands.append(f"has({c}.command) && {c}.command == {_cel(b['command'])}")
        commands.append(_args(c, b.get("args", ()), open_args) if b.get("args") else f"!has({c}.args)")
        commands.extend(_env(c, b.get("env", ())))
    return _all(images), _all(commands)


def _volume(v: Mapping[str, Any]) -> str:
    if set(v) == {"name", "emptyDir"}:
        return "has(v.emptyDir)"
    if set(v) == {"name", "csi"}:
        csi = v["csi"]
        terms = [f"has(v.csi) && v.csi.driver == {_cel(csi['driver'])}"]
        if csi.get("readOnly"):
            terms.append("has(v.csi.readOnly) && v.csi.readOnly")
        if "volumeAttributes" in csi:
            terms.append(f"has(v.csi.volumeAttributes) && v.csi.volumeAttributes == {_cel(csi['volumeAttributes'])}")
        return _all(terms)
    raise ValueError(f"no admission rule for volume {v!r}")  # a new kind of volume: write its rule


def _volumes(built: Sequence[Mapping[str, Any]]) -> str:
    items, size = _list("variables.spec", "volumes")
    terms = [f"{size} == {len(built)}"]
    if built:
        terms.append(f"{items}.all(v, v.name in {_cel([v['name'] for v in built])})")
        terms += [f"{items}.exists(v, v.name == {_cel(v['name'])} && {_volume(v)})" for v in built]
    return _all(terms)


def _pod_security(built: Mapping[str, Any]) -> str:
    sc = "variables.spec.securityContext"
    terms = [f"has({sc})"]
    for key, value in built.items():
        if isinstance(value, bool | int):
            terms.append(f"has({sc}.{key}) && {sc}.{key} == {_cel(value)}")
        elif key == "seccompProfile":
            terms.append(f"has({sc}.seccompProfile) && {sc}.seccompProfile.type == {_cel(value['type'])}")
        else:
            raise ValueError(f"no admission rule for securityContext.{key}")  # write its rule
    return _all(terms)


def _job_rules(job: Mapping[str, Any], open_args: Collection[str]) -> list[dict[str, Any]]:
    """The validations of one load Job: each holds for any other name."""
    name = job["metadata"]["name"]
    template = job["spec"]["template"]
    spec = template["spec"]
    account = spec["serviceAccountName"]
    only = f"variables.name != {_cel(name)} || "
    images, commands = _containers("containers", spec["containers"], open_args)
    init_images, init_commands = _containers("initContainers", spec.get("initContainers", ()), open_args)
    shown = ", ".join(dict.fromkeys(c["image"] for c in spec["containers"]))
    labels = template["metadata"]["labels"]
    tpl = "object.spec.template.metadata"
    return [
        _deny(
            only + f"has(variables.spec.serviceAccountName) && variables.spec.serviceAccountName == {_cel(account)} "
            f"&& (!has(variables.spec.serviceAccount) || variables.spec.serviceAccount == {_cel(account)})",
            f"load Job {name} must run as ServiceAccount {account}",
        ),
        _deny(
            only + "has(variables.spec.automountServiceAccountToken) && "
            f"variables.spec.automountServiceAccountToken == {_cel(bool(spec['automountServiceAccountToken']))}",
            f"load Job {name} must set automountServiceAccountToken: "
            f"{str(bool(spec['automountServiceAccountToken'])).lower()}",
        ),
        _deny(only + f"({images}) && ({init_images})", f"load Job {name} must run image {shown}"),
        _deny(
            only + f"({commands}) && ({init_commands})",
            f"load Job {name} must run the benchmark's command, environment and arguments as llm-eks verify --load "
            "builds them (only the load's lengths, request count, rate and concurrency may differ)",
        ),
        _deny(
            only + _volumes(spec.get("volumes", ())),
            f"load Job {name} may mount only its own volumes: {', '.join(v['name'] for v in spec.get('volumes', ()))}",
        ),
        _deny(
            only + _pod_security(spec.get("securityContext", {})),
            f"load Job {name} must run with the benchmark's pod security context",
        ),
        _deny(
            only + f"has({tpl}) && has({tpl}.labels) && {_cel(labels)}.all(k, k in {tpl}.labels && "
            f"{tpl}.labels[k] == {_cel(labels)}[k]) && {tpl}.labels.all(k, k in {_cel(labels)} || "
            f"k.startsWith({_cel(JOB_CONTROLLER_LABEL_PREFIX)}) || k in {_cel(list(JOB_CONTROLLER_LABELS))}) && "
            f"(!has({tpl}.annotations) || size({tpl}.annotations) == 0)",
            f"load Job {name}'s pods carry the benchmark's labels and no annotations",
        ),
    ]


_UNPRIVILEGED = (
    "variables.containers.all(c, has(c.securityContext) && "
    "(!has(c.securityContext.privileged) || !c.securityContext.privileged) && "
    "has(c.securityContext.allowPrivilegeEscalation) && !c.securityContext.allowPrivilegeEscalation && "
    "(!has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add) || "
    "size(c.securityContext.capabilities.add) == 0))"
)
_HOST = (
    "!(has(variables.spec.hostNetwork) && variables.spec.hostNetwork) && "
    "!(has(variables.spec.hostPID) && variables.spec.hostPID) && "
    "!(has(variables.spec.hostIPC) && variables.spec.hostIPC)"
)
_NO_HOST_PATH = "!has(variables.spec.volumes) || variables.spec.volumes.all(v, !has(v.hostPath))"
_RESOURCES = (
    "variables.containers.all(c, !has(c.resources) || ("
    f"(!has(c.resources.requests) || c.resources.requests.all(r, r in {_cel(list(_BASIC_RESOURCES))})) && "
    f"(!has(c.resources.limits) || c.resources.limits.all(r, r in {_cel(list(_BASIC_RESOURCES))}))))"
)


@builds_objects
def load_policy(
    namespace: str, jobs: Sequence[Mapping[str, Any]], open_args: Collection[str], group: str
) -> list[dict[str, Any]]:
    """The policy on Jobs `group` writes in `namespace`, admitting only `jobs` (the namespace's load Jobs as
    `llm_eks.manifests.benchmark.load_job` renders them; the values after `open_args` free), and its binding."""
    name = policy_name(namespace)
    names = [j["metadata"]["name"] for j in jobs]
    rules = [
        _deny(
            f"variables.name in {_cel(names)}",
            f"members of {group} may create only the load Jobs {', '.join(names)} in {namespace} (as llm-eks verify "
            "--load builds them)",
        ),
        _deny(_HOST, "a load Job may not use the node's network, PID or IPC namespace"),
        _deny(_NO_HOST_PATH, "a load Job may not mount a hostPath volume"),
        _deny(
            _UNPRIVILEGED,
            "a load Job's containers run unprivileged: privileged false, allowPrivilegeEscalation false, no added "
            "capabilities",
        ),
        _deny(_RESOURCES, f"a load Job requests only {', '.join(_BASIC_RESOURCES)} (no GPU or other device)"),
        *(rule for job in jobs for rule in _job_rules(job, open_args)),
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(LABELS)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
                "resourceRules": [
                    {
                        "apiGroups": ["batch"],
                        "apiVersions": ["v1"],
                        "resources": ["jobs"],
                        "operations": ["CREATE", "UPDATE"],
                    }
                ],
            },
            "matchConditions": [
                {
                    "name": "the-load-group",
                    "expression": f"has(request.userInfo.groups) && {_cel(group)} in request.userInfo.groups",
                }
            ],
            "variables": [
                {"name": "name", "expression": "has(object.metadata.name) ? object.metadata.name : ''"},
                {"name": "spec", "expression": "object.spec.template.spec"},
                {
                    "name": "containers",
                    "expression": "variables.spec.containers + (has(variables.spec.initContainers) ? "
                    "variables.spec.initContainers : [])",
                },
            ],
            "validations": rules,
        },
    }
    return [policy, deny_binding(name, LABELS)]
