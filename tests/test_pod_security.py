"""POD_SECURITY (llm_eks.manifests.checks.pod_security): each Pod Security Standard rule on a violating and a
compliant pod spec, pod- versus container-level settings, the containers Pod Security Admission reads, and the
level of the namespace a workload lands in, down to the one line `cdk synth` and `check_app` report."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from llm_eks.error_codes import E412, E413
from llm_eks.manifests.app_checks import ChecksFailed
from llm_eks.manifests.checks import (
    POD_SECURITY,
    SCHEDULING,
    Finding,
    check_objects,
    namespace_levels,
    violations,
)

Spec = dict[str, Any]

CONTAINER_OK = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
# Meets restricted: non-root and RuntimeDefault seccomp at the pod, no escalation and no capabilities in the container.
RESTRICTED_POD: Spec = {
    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{"name": "app", "image": "app:1", "securityContext": dict(CONTAINER_OK)}],
}


def _pod(change: Callable[[Spec], object]) -> Spec:
    spec = copy.deepcopy(RESTRICTED_POD)
    change(spec)
    return spec


def _app(spec: Spec) -> dict[str, Any]:
    return spec["containers"][0]


def _app_ctx(spec: Spec) -> dict[str, Any]:
    return _app(spec)["securityContext"]


def _found(spec: Spec, level: str) -> list[tuple[str, str]]:
    return [(v.check, v.problem) for v in violations(spec, level)]


# (level, a change that breaks the rule, the violation, a change that keeps the pod within the rule)
RULES: list[tuple[str, Callable[[Spec], object], tuple[str, str], Callable[[Spec], object]]] = [
    (
        "baseline",
        lambda s: s["securityContext"].update(windowsOptions={"hostProcess": True}),
        ("windowsHostProcess", "pod sets securityContext.windowsOptions.hostProcess=true"),
        lambda s: s["securityContext"].update(windowsOptions={"hostProcess": False}),
    ),
    (
        "baseline",
        lambda s: s.update(hostNetwork=True, hostPID=True),
        ("hostNamespaces", "pod sets hostNetwork=true, hostPID=true"),
        lambda s: s.update(hostNetwork=False, hostIPC=False),
    ),
    (
        "baseline",
        lambda s: _app_ctx(s).update(privileged=True),
        ("privileged", "container app sets securityContext.privileged=true"),
        lambda s: _app_ctx(s).update(privileged=False),
    ),
    (
        "baseline",
        lambda s: _app_ctx(s).update(capabilities={"add": ["NET_RAW", "CHOWN", "SYS_ADMIN"]}),
        ("capabilities_baseline", "container app sets capabilities.add NET_RAW, SYS_ADMIN"),
        lambda s: _app_ctx(s).update(capabilities={"add": ["CHOWN", "KILL", "NET_BIND_SERVICE"]}),
    ),
    (
        "baseline",
        lambda s: s.update(volumes=[{"name": "host", "hostPath": {"path": "/var/log"}}]),
        ("hostPathVolumes", "volume host is a hostPath volume"),
        lambda s: s.update(volumes=[{"name": "nfs", "nfs": {"server": "fs", "path": "/"}}]),  # baseline allows NFS
    ),
    (
        "baseline",
        lambda s: _app(s).update(ports=[{"containerPort": 8080, "hostPort": 8080}, {"containerPort": 9090}]),
        ("hostPorts", "container app sets hostPort 8080"),
        lambda s: _app(s).update(ports=[{"containerPort": 8080, "hostPort": 0}]),
    ),
    (
        "baseline",
        lambda s: _app(s).update(
            livenessProbe={"httpGet": {"host": "10.0.0.1", "port": 80}},
            lifecycle={"preStop": {"tcpSocket": {"host": "example.com", "port": 80}}},
        ),
        ("hostProbesAndHostLifecycle", "container app sets a probe or lifecycle host (10.0.0.1, example.com)"),
        lambda s: _app(s).update(livenessProbe={"httpGet": {"port": 80, "path": "/health"}}),
    ),
    (
        "baseline",
        lambda s: _app_ctx(s).update(appArmorProfile={"type": "Unconfined"}),
        ("appArmorProfile", "container app sets AppArmor profile Unconfined"),
        lambda s: _app_ctx(s).update(appArmorProfile={"type": "Localhost", "localhostProfile": "k8s-apparmor"}),
    ),
    (
        "baseline",
        lambda s: s["securityContext"].update(seLinuxOptions={"type": "spc_t", "user": "root"}),
        ("seLinuxOptions", "pod sets seLinuxOptions type spc_t, user root"),
        lambda s: s["securityContext"].update(seLinuxOptions={"type": "container_engine_t", "level": "s0:c1"}),
    ),
    (
        "baseline",
        lambda s: _app_ctx(s).update(procMount="Unmasked"),
        ("procMount", "container app sets securityContext.procMount=Unmasked"),
        lambda s: _app_ctx(s).update(procMount="Default"),
    ),
    (
        "baseline",
        lambda s: s["securityContext"].update(seccompProfile={"type": "Unconfined"}),
        ("seccompProfile_baseline", "pod sets seccompProfile.type Unconfined"),
        lambda s: s["securityContext"].pop("seccompProfile"),  # baseline: unset is allowed
    ),
    (
        "baseline",
        lambda s: s["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
        ("sysctls", "pod sets sysctls kernel.msgmax"),
        lambda s: s["securityContext"].update(sysctls=[{"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"}]),
    ),
    (
        "restricted",
        lambda s: s.update(volumes=[{"name": "host", "hostPath": {"path": "/"}}, {"name": "n", "nfs": {}}]),
        ("restrictedVolumes", "volumes host, n use hostPath, nfs"),
        lambda s: s.update(volumes=[{"name": "e", "emptyDir": {}}, {"name": "i", "image": {"reference": "weights:1"}}]),
    ),
    (
        "restricted",
        lambda s: _app_ctx(s).pop("allowPrivilegeEscalation"),
        ("allowPrivilegeEscalation", "container app does not set securityContext.allowPrivilegeEscalation=false"),
        lambda s: None,
    ),
    (
        "restricted",
        lambda s: s["securityContext"].pop("runAsNonRoot"),
        ("runAsNonRoot", "neither the pod nor container app sets runAsNonRoot=true"),
        lambda s: _app_ctx(s).update(runAsNonRoot=True),
    ),
    (
        "restricted",
        lambda s: _app_ctx(s).update(runAsUser=0),
        ("runAsUser", "container app sets securityContext.runAsUser=0"),
        lambda s: _app_ctx(s).update(runAsUser=65532),
    ),
    (
        "restricted",
        lambda s: s["securityContext"].pop("seccompProfile"),
        (
            "seccompProfile_restricted",
            "neither the pod nor container app sets seccompProfile.type RuntimeDefault or Localhost",
        ),
        lambda s: s["securityContext"].update(seccompProfile={"type": "Localhost", "localhostProfile": "p.json"}),
    ),
    (
        "restricted",
        lambda s: _app_ctx(s).update(capabilities={"drop": ["NET_RAW"], "add": ["SYS_ADMIN", "NET_BIND_SERVICE"]}),
        (
            "capabilities_restricted",
            "container app does not drop ALL capabilities; container app adds capabilities SYS_ADMIN",
        ),
        lambda s: _app_ctx(s).update(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}),
    ),
]


@pytest.mark.parametrize(("level", "breaks", "expected", "keeps"), RULES, ids=[r[2][0] for r in RULES])
def test_each_rule_finds_its_violation_and_nothing_else(
    level: str, breaks: Callable[[Spec], object], expected: tuple[str, str], keeps: Callable[[Spec], object]
) -> None:
    assert _found(RESTRICTED_POD, "restricted") == []
    assert _found(_pod(breaks), level) == [expected]
    assert _found(_pod(keeps), level) == []
    # A stricter level keeps every baseline rule (with the restricted form of the ones it replaces).
    if level == "baseline":
        assert len(_found(_pod(breaks), "restricted")) == 1
    assert _found(_pod(breaks), "privileged") == []


def test_restricted_replaces_the_baseline_form_of_a_rule_and_does_not_report_it_twice() -> None:
    spec = _pod(lambda s: s.update(volumes=[{"name": "host", "hostPath": {"path": "/"}}]))
    assert _found(spec, "restricted") == [("restrictedVolumes", "volume host uses hostPath")]
    spec = _pod(lambda s: _app_ctx(s).update(capabilities={"drop": ["ALL"], "add": ["NET_RAW"]}))
    assert _found(spec, "baseline") == [("capabilities_baseline", "container app sets capabilities.add NET_RAW")]
    assert _found(spec, "restricted") == [("capabilities_restricted", "container app adds capabilities NET_RAW")]


def test_baseline_does_not_ask_what_only_restricted_requires() -> None:
    bare = {"containers": [{"name": "app", "image": "app:1"}]}
    assert _found(bare, "baseline") == []
    assert [check for check, _ in _found(bare, "restricted")] == [
        "capabilities_restricted",
        "seccompProfile_restricted",
        "allowPrivilegeEscalation",
        "runAsNonRoot",
    ]


def test_a_container_setting_overrides_the_pods() -> None:
    # runAsNonRoot: the pod's true covers containers that say nothing; a container's false is its own.
    assert _found(_pod(lambda s: _app_ctx(s).update(runAsNonRoot=False)), "restricted") == [
        ("runAsNonRoot", "container app sets securityContext.runAsNonRoot=false")
    ]

    def pod_false_container_true(s: Spec) -> None:
        s["securityContext"]["runAsNonRoot"] = False
        _app_ctx(s)["runAsNonRoot"] = True

    assert _found(_pod(pod_false_container_true), "restricted") == [
        ("runAsNonRoot", "pod sets securityContext.runAsNonRoot=false")
    ]

    def one_of_two_opts_in(s: Spec) -> None:
        del s["securityContext"]["runAsNonRoot"]
        _app_ctx(s)["runAsNonRoot"] = True
        s["containers"].append({"name": "b", "securityContext": dict(CONTAINER_OK)})

    assert _found(_pod(one_of_two_opts_in), "restricted") == [
        ("runAsNonRoot", "neither the pod nor container b sets runAsNonRoot=true")
    ]
    # seccomp: a container's profile stands without the pod's; the pod's Unconfined fails even when containers
    # set their own.
    only_container = _pod(lambda s: s["securityContext"].pop("seccompProfile"))
    _app_ctx(only_container)["seccompProfile"] = {"type": "RuntimeDefault"}
    assert _found(only_container, "restricted") == []
    unconfined_pod = copy.deepcopy(only_container)
    unconfined_pod["securityContext"]["seccompProfile"] = {"type": "Unconfined"}
    assert _found(unconfined_pod, "restricted") == [
        ("seccompProfile_restricted", "pod sets seccompProfile.type Unconfined")
    ]
    assert _found(_pod(lambda s: _app_ctx(s).update(seccompProfile={"type": "Unconfined"})), "restricted") == [
        ("seccompProfile_restricted", "container app sets seccompProfile.type Unconfined")
    ]
    # runAsUser 0 at either level.
    assert _found(_pod(lambda s: s["securityContext"].update(runAsUser=0)), "restricted") == [
        ("runAsUser", "pod sets securityContext.runAsUser=0")
    ]


def test_init_containers_native_sidecars_and_ephemeral_containers_are_judged_and_named_together() -> None:
    def more_containers(s: Spec) -> None:
        s["initContainers"] = [
            {"name": "fetch", "securityContext": {**CONTAINER_OK, "privileged": True}},
            {"name": "shipper", "restartPolicy": "Always", "securityContext": {**CONTAINER_OK, "privileged": True}},
        ]
        s["ephemeralContainers"] = [{"name": "debug", "securityContext": {"runAsUser": 0}}]
        s["securityContext"]["runAsUser"] = 0

    assert _found(_pod(more_containers), "restricted") == [
        ("privileged", "containers fetch, shipper set securityContext.privileged=true"),
        ("capabilities_restricted", "container debug does not drop ALL capabilities"),
        ("allowPrivilegeEscalation", "container debug does not set securityContext.allowPrivilegeEscalation=false"),
        ("runAsUser", "pod and container debug set securityContext.runAsUser=0"),
    ]


def test_user_namespaces_and_windows_pods_are_relaxed_as_kubernetes_135_does() -> None:
    root = _pod(lambda s: s["securityContext"].update(runAsNonRoot=False, runAsUser=0))
    _app_ctx(root)["procMount"] = "Unmasked"
    assert [c for c, _ in _found(root, "restricted")] == ["procMount_restricted", "runAsNonRoot", "runAsUser"]
    root["hostUsers"] = False
    # A pod in its own user namespace may run as (namespaced) root and unmask /proc at baseline, never at restricted.
    assert [c for c, _ in _found(root, "restricted")] == ["procMount_restricted"]
    assert _found(root, "baseline") == []
    windows = {"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": True}, "containers": [{"name": "w"}]}
    assert _found(windows, "restricted") == []
    assert _found({**windows, "securityContext": {}}, "restricted") == [
        ("runAsNonRoot", "neither the pod nor container w sets runAsNonRoot=true")
    ]


def test_the_deprecated_apparmor_annotation_is_read_from_the_pod_metadata() -> None:
    key = "container.apparmor.security.beta.kubernetes.io/app"
    assert violations(RESTRICTED_POD, "baseline", {"annotations": {key: "localhost/k8s-apparmor"}}) == []
    (found,) = violations(RESTRICTED_POD, "baseline", {"annotations": {key: "unconfined"}})
    assert (found.check, found.problem) == (
        "appArmorProfile",
        f"container app (annotation) sets AppArmor profile {key}=unconfined",
    )


# -- the namespace's level, and the line a user reads ---------------------------------------------------------------


def _namespace(name: str, level: str | None) -> dict[str, Any]:
    labels = {"pod-security.kubernetes.io/enforce": level} if level is not None else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def _deployment(namespace: str, spec: Spec, name: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 1, "template": {"metadata": {"labels": {"app": name}}, "spec": spec}},
    }


def _lines(objects: list[dict[str, Any]]) -> list[str]:
    return [str(f) for f in check_objects(objects) if f.rule == POD_SECURITY]


PRIVILEGED_SIDECAR = _pod(
    lambda s: s["containers"].append(
        {"name": "log-shipper", "securityContext": {**CONTAINER_OK, "privileged": True, "runAsUser": 0}}
    )
)


def test_namespace_levels_are_read_from_the_enforce_label() -> None:
    objects = [
        _namespace("a", "restricted"),
        _namespace("b", "baseline"),
        _namespace("c", None),
        _namespace("d", "strict"),  # not a level: Pod Security Admission fails closed
    ]
    assert namespace_levels(objects) == {"a": "restricted", "b": "baseline", "c": "privileged", "d": "restricted"}


def test_the_finding_names_the_object_the_containers_the_level_and_the_fix() -> None:
    assert _lines([_namespace("inference", "restricted"), _deployment("inference", PRIVILEGED_SIDECAR)]) == [
        "[POD_SECURITY] Deployment/inference/web: container log-shipper sets securityContext.privileged=true, which "
        "Pod Security restricted (enforced on namespace inference) forbids; the API server would reject its pods. "
        "Fix: remove securityContext.privileged, or, if it needs the host, run it in a namespace whose "
        "pod-security.kubernetes.io/enforce label is privileged",
        "[POD_SECURITY] Deployment/inference/web: container log-shipper sets securityContext.runAsUser=0, which Pod "
        "Security restricted (enforced on namespace inference) forbids; the API server would reject its pods. Fix: "
        "run as a non-zero user (securityContext.runAsUser, e.g. the image's own non-root user)",
    ]


def test_each_namespace_is_judged_at_its_own_level() -> None:
    objects = [
        _namespace("strict", "restricted"),
        _namespace("base", "baseline"),
        _namespace("open", "privileged"),
        _namespace("unlabelled", None),
        *(_deployment(ns, PRIVILEGED_SIDECAR) for ns in ("strict", "base", "open", "unlabelled", "elsewhere")),
        _deployment("base", _pod(lambda s: _app_ctx(s).update(runAsUser=0)), name="root-only"),
    ]
    found = [(f.object, f.problem.split(",")[0]) for f in check_objects(objects) if f.rule == POD_SECURITY]
    # A namespace without the label, or not among the objects, is privileged (Kubernetes' default): not judged.
    assert found == [
        ("Deployment/strict/web", "container log-shipper sets securityContext.privileged=true"),
        ("Deployment/strict/web", "container log-shipper sets securityContext.runAsUser=0"),
        ("Deployment/base/web", "container log-shipper sets securityContext.privileged=true"),
    ]


def test_every_kind_of_pod_template_is_judged_daemonsets_and_operator_sidecars_included() -> None:
    bad = _pod(lambda s: _app_ctx(s).update(privileged=True))
    template = {"metadata": {}, "spec": bad}
    objects: list[dict[str, Any]] = [
        _namespace("ns", "restricted"),
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "ns"},
            "spec": {"template": template},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": "ns"},
            "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}},
        },
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "one", "namespace": "ns"}, "spec": bad},
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "lws", "namespace": "ns"},
            "spec": {
                "leaderWorkerTemplate": {
                    "size": 2,
                    "leaderTemplate": template,
                    "workerTemplate": {"spec": RESTRICTED_POD},
                }
            },
        },
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "metadata": {"name": "ray", "namespace": "ns"},
            "spec": {
                "rayClusterConfig": {
                    # KubeRay adds its autoscaler sidecar to the head with autoscalerOptions.securityContext,
                    # here none.
                    "enableInTreeAutoscaling": True,
                    "headGroupSpec": {"template": {"spec": RESTRICTED_POD}},
                    "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "template": template}],
                }
            },
        },
        {
            "apiVersion": "gateway.envoyproxy.io/v1alpha1",
            "kind": "EnvoyProxy",
            "metadata": {"name": "proxy", "namespace": "ns"},
            "spec": {"provider": {"type": "Kubernetes", "kubernetes": {"envoyDeployment": {"replicas": 1}}}},
        },
    ]
    found = [f"{f.object}: {f.problem.split(',')[0]}" for f in check_objects(objects) if f.rule == POD_SECURITY]
    assert found == [
        "DaemonSet/ns/agent: container app sets securityContext.privileged=true",
        "CronJob/ns/nightly: container app sets securityContext.privileged=true",
        "Pod/ns/one: container app sets securityContext.privileged=true",
        "LeaderWorkerSet/ns/lws: leader: container app sets securityContext.privileged=true",
        "RayService/ns/ray: head: container autoscaler does not drop ALL capabilities",
        "RayService/ns/ray: head: container autoscaler does not set securityContext.allowPrivilegeEscalation=false",
        "RayService/ns/ray: worker group gpu: container app sets securityContext.privileged=true",
    ]


def test_checks_failed_carries_the_pod_security_code_only_when_every_finding_is_one() -> None:
    pod_security = Finding(POD_SECURITY, "Deployment/ns/web", "container app sets securityContext.privileged=true", "x")
    scheduling = Finding(SCHEDULING, "Deployment/ns/web", "no NodePool can run this pod", "y")
    assert ChecksFailed([pod_security]).code is E413
    assert ChecksFailed([pod_security, scheduling]).code is E412
