"""The Pod Security Standards as rules on one pod spec (`violations`); pod_security.py applies them to every pod
template at its namespace's level.

The rules are the policy of Kubernetes 1.35 (llm_eks.versions.KUBERNETES_MINOR), as kubernetes/pod-security-admission
v0.35.6 (commit 2c255e8b) implements it in policy/check_*.go, which the Pod Security Standards page
(kubernetes.io/docs/concepts/security/pod-security-standards) documents. Baseline:
- hostProcess: no pod or container sets securityContext.windowsOptions.hostProcess=true;
- host namespaces: hostNetwork, hostPID and hostIPC unset or false;
- privileged: no container sets securityContext.privileged=true;
- capabilities: capabilities.add only from AUDIT_WRITE, CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, MKNOD,
  NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID, SYS_CHROOT;
- hostPath volumes: none;
- host ports: no container port sets a non-zero hostPort;
- probe or lifecycle host: no httpGet/tcpSocket host in a liveness, readiness or startup probe or a postStart or
  preStop handler (1.34+);
- AppArmor: appArmorProfile.type (pod or container) RuntimeDefault or Localhost, and the deprecated
  `container.apparmor.security.beta.kubernetes.io/*` annotations runtime/default or localhost/*;
- SELinux: seLinuxOptions.type empty, container_t, container_init_t, container_kvm_t or container_engine_t (1.31+),
  and no seLinuxOptions.user or role;
- /proc mount: procMount unset or Default, any value for a pod with hostUsers: false (1.35+);
- seccomp: seccompProfile.type, where set, RuntimeDefault or Localhost;
- sysctls: only kernel.shm_rmid_forced, net.ipv4.ip_local_port_range, ip_local_reserved_ports, tcp_syncookies,
  ping_group_range, ip_unprivileged_port_start, tcp_keepalive_time, tcp_fin_timeout, tcp_keepalive_intvl,
  tcp_keepalive_probes, tcp_rmem, tcp_wmem (1.32's list).
Restricted, on top of baseline (each starred rule replaces its baseline namesake, as OverrideCheckIDs does):
- *volume types: only configMap, csi, downwardAPI, emptyDir, ephemeral, image, persistentVolumeClaim, projected,
  secret;
- privilege escalation: every container sets securityContext.allowPrivilegeEscalation=false;
- running as non-root: runAsNonRoot=true on the pod or on every container, and false nowhere;
- non-root user: runAsUser 0 nowhere (both relaxed for a pod with hostUsers: false, 1.35+);
- *seccomp: the pod or every container sets seccompProfile.type RuntimeDefault or Localhost;
- *capabilities: every container drops ALL and adds nothing but NET_BIND_SERVICE;
- */proc mount: procMount unset or Default, whatever hostUsers says.
Privilege escalation, seccomp and capabilities exempt a pod with spec.os.name windows (1.25+). Containers are the
init containers (native sidecars included: an init container with restartPolicy Always), the containers and the
ephemeral containers, each judged with its own securityContext and the pod's where the rule reads both (a container's
runAsNonRoot or seccompProfile overrides the pod's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_eks.manifests.checks.objects import (
    mapping_at,
    mappings_at,
    value_at,
)

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)

BASELINE_CAPABILITIES = (
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
)
SAFE_SYSCTLS = (
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
)
SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
RESTRICTED_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
SECCOMP_TYPES = ("RuntimeDefault", "Localhost")
APPARMOR_TYPES = ("RuntimeDefault", "Localhost")
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
# KubeRay's in-tree autoscaler sidecar (AutoscalerContainerName, ray-operator/controllers/ray/common/pod.go v1.7.0).
RAY_AUTOSCALER = "autoscaler"
# For the baseline rules: what a node agent that needs the host does instead.
_ELSEWHERE = f"or, if it needs the host, run it in a namespace whose {ENFORCE_LABEL} label is privileged"


@dataclass(frozen=True)
class Violation:
    """One Pod Security rule a pod spec breaks: the rule's id (pod-security-admission's CheckID), what breaks it
    (`container log-shipper sets securityContext.privileged=true`), and the fix."""

    check: str
    problem: str
    fix: str


@dataclass(frozen=True)
class _Pod:
    """A pod spec as the rules read it."""

    spec: Mapping[str, Any]
    metadata: Mapping[str, Any]
    containers: tuple[Mapping[str, Any], ...]

    @property
    def context(self) -> Mapping[str, Any]:
        return mapping_at(self.spec, "securityContext")

    @property
    def windows(self) -> bool:
        return bool(value_at(self.spec, "os", "name") == "windows")

    @property
    def user_namespace(self) -> bool:
        return self.spec.get("hostUsers") is False

    @property
    def container_contexts(self) -> list[Mapping[str, Any]]:
        return [mapping_at(c, "securityContext") for c in self.containers]

    def bad_containers(self, bad: Callable[[Mapping[str, Any]], bool]) -> list[str]:
        return [str(c.get("name", "?")) for c in self.containers if bad(mapping_at(c, "securityContext"))]


def _who(pod: bool, containers: Sequence[str]) -> tuple[str, str]:
    """(`pod and containers a, b`, the verb ending: "s" for one subject, "" for more)."""
    parts = ["pod"] if pod else []
    if containers:
        parts.append(("container " if len(containers) == 1 else "containers ") + ", ".join(containers))
    single = len(parts) == 1 and len(containers) <= 1
    return " and ".join(parts), "s" if single else ""


def _setting(check: str, pod: bool, containers: Sequence[str], what: str, fix: str) -> Violation | None:
    """`<who> set(s) <what>`, or None when nothing sets it."""
    if not pod and not containers:
        return None
    who, s = _who(pod, containers)
    return Violation(check, f"{who} set{s} {what}", fix)


def _unset(containers: Sequence[str], what: str) -> str:
    """A setting the pod or every container must make, missing from both for `containers`."""
    who, s = _who(False, containers)
    return f"neither the pod nor {who} set{s} {what}"


def _listed(values: Sequence[str]) -> str:
    return ", ".join(dict.fromkeys(values))


# -- baseline ------------------------------------------------------------------------------------------------------


def _host_process(pod: _Pod) -> Violation | None:
    def bad(ctx: Mapping[str, Any]) -> bool:
        return value_at(ctx, "windowsOptions", "hostProcess") is True

    return _setting(
        "windowsHostProcess",
        bad(pod.context),
        pod.bad_containers(bad),
        "securityContext.windowsOptions.hostProcess=true",
        f"remove windowsOptions.hostProcess, {_ELSEWHERE}",
    )


def _host_namespaces(pod: _Pod) -> Violation | None:
    shared = [key for key in ("hostNetwork", "hostPID", "hostIPC") if pod.spec.get(key) is True]
    what = ", ".join(f"{key}=true" for key in shared)
    return _setting("hostNamespaces", bool(shared), (), what, f"remove {' and '.join(shared)}, {_ELSEWHERE}")


def _privileged(pod: _Pod) -> Violation | None:
    return _setting(
        "privileged",
        False,
        pod.bad_containers(lambda ctx: ctx.get("privileged") is True),
        "securityContext.privileged=true",
        f"remove securityContext.privileged, {_ELSEWHERE}",
    )


def _added(ctx: Mapping[str, Any]) -> list[str]:
    return [str(c) for c in value_at(ctx, "capabilities", "add") or [] if isinstance(c, str)]


def _capabilities_baseline(pod: _Pod) -> Violation | None:
    extra = [c for ctx in pod.container_contexts for c in _added(ctx) if c not in BASELINE_CAPABILITIES]
    return _setting(
        "capabilities_baseline",
        False,
        pod.bad_containers(lambda ctx: any(c not in BASELINE_CAPABILITIES for c in _added(ctx))),
        f"capabilities.add {_listed(extra)}",
        f"add only capabilities of the default set ({', '.join(BASELINE_CAPABILITIES)}), {_ELSEWHERE}",
    )


def _volume_names(pod: _Pod, bad: Callable[[Mapping[str, Any]], bool]) -> list[str]:
    return [str(v.get("name", "?")) for v in mappings_at(pod.spec, "volumes") if bad(v)]


def _volumes(check: str, names: Sequence[str], one: str, more: str, fix: str) -> Violation | None:
    """`volume a <one>` or `volumes a, b <more>`, or None when no volume is named."""
    if not names:
        return None
    if len(names) == 1:
        return Violation(check, f"volume {names[0]} {one}", fix)
    return Violation(check, f"volumes {', '.join(names)} {more}", fix)


def _host_path(pod: _Pod) -> Violation | None:
    return _volumes(
        "hostPathVolumes",
        _volume_names(pod, lambda v: "hostPath" in v),
        "is a hostPath volume",
        "are hostPath volumes",
        f"use an emptyDir, persistentVolumeClaim or csi volume instead, {_ELSEWHERE}",
    )


def _host_ports(pod: _Pod) -> Violation | None:
    ports = {
        str(c.get("name", "?")): [str(p["hostPort"]) for p in mappings_at(c, "ports") if p.get("hostPort")]
        for c in pod.containers
    }
    bad = [name for name, used in ports.items() if used]
    used = sorted({p for name in bad for p in ports[name]}, key=int)
    return _setting(
        "hostPorts",
        False,
        bad,
        f"hostPort {', '.join(used)}",
        f"remove hostPort and reach the pod through a Service, {_ELSEWHERE}",
    )


_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_HANDLERS = ("postStart", "preStop")


def _probe_hosts(container: Mapping[str, Any]) -> list[str]:
    handlers = [mapping_at(container, p) for p in _PROBES] + [mapping_at(container, "lifecycle", h) for h in _HANDLERS]
    return [
        str(host)
        for handler in handlers
        for action in ("httpGet", "tcpSocket")
        if (host := value_at(handler, action, "host"))
    ]


def _probe_host(pod: _Pod) -> Violation | None:
    bad = [str(c.get("name", "?")) for c in pod.containers if _probe_hosts(c)]
    hosts = [h for c in pod.containers for h in _probe_hosts(c)]
    return _setting(
        "hostProbesAndHostLifecycle",
        False,
        bad,
        f"a probe or lifecycle host ({_listed(hosts)})",
        "leave the host of httpGet and tcpSocket probes and handlers unset (the kubelet then uses the pod's IP)",
    )


def _app_armor(pod: _Pod) -> Violation | None:
    def bad(ctx: Mapping[str, Any]) -> bool:
        profile = mapping_at(ctx, "appArmorProfile")
        return bool(profile) and profile.get("type") not in APPARMOR_TYPES

    def allowed(value: str) -> bool:
        return not value or value == "runtime/default" or value.startswith("localhost/")

    annotations = {
        str(k): str(v)
        for k, v in sorted(mapping_at(pod.metadata, "annotations").items())
        if str(k).startswith(APPARMOR_ANNOTATION) and not allowed(str(v))
    }
    containers = pod.bad_containers(bad)
    values = [
        str(value_at(ctx, "appArmorProfile", "type")) for ctx in [pod.context, *pod.container_contexts] if bad(ctx)
    ]
    values += [f"{k}={v}" for k, v in annotations.items()]
    containers += [k.removeprefix(APPARMOR_ANNOTATION) + " (annotation)" for k in annotations]
    return _setting(
        "appArmorProfile",
        bad(pod.context),
        containers,
        f"AppArmor profile {_listed(values)}",
        "use appArmorProfile.type RuntimeDefault or Localhost, or leave it unset",
    )


def _se_linux(pod: _Pod) -> Violation | None:
    def wrong(ctx: Mapping[str, Any]) -> list[str]:
        opts = mapping_at(ctx, "seLinuxOptions")
        out = [f"type {opts['type']}"] if opts.get("type", "") not in SELINUX_TYPES else []
        return out + [f"{key} {opts[key]}" for key in ("user", "role") if opts.get(key)]

    found = [w for ctx in [pod.context, *pod.container_contexts] for w in wrong(ctx)]
    return _setting(
        "seLinuxOptions",
        bool(wrong(pod.context)),
        pod.bad_containers(lambda ctx: bool(wrong(ctx))),
        f"seLinuxOptions {_listed(found)}",
        f"leave seLinuxOptions.user and role unset, with type {', '.join(t for t in SELINUX_TYPES if t)} or none",
    )


def _proc_mount(pod: _Pod, restricted: bool) -> Violation | None:
    if pod.user_namespace and not restricted:
        return None
    bad = pod.bad_containers(lambda ctx: ctx.get("procMount") not in (None, "Default"))
    mounts = [
        str(value_at(c, "securityContext", "procMount"))
        for c in pod.containers
        if value_at(c, "securityContext", "procMount") not in (None, "Default")
    ]
    return _setting(
        "procMount_restricted" if restricted else "procMount",
        False,
        bad,
        f"securityContext.procMount={_listed(mounts)}",
        "leave securityContext.procMount unset (Default)",
    )


def _seccomp_set(ctx: Mapping[str, Any]) -> bool:
    return bool(mapping_at(ctx, "seccompProfile"))


def _seccomp_bad(ctx: Mapping[str, Any]) -> bool:
    """A seccompProfile set to a type other than RuntimeDefault or Localhost (Unconfined, or none given)."""
    return _seccomp_set(ctx) and value_at(ctx, "seccompProfile", "type") not in SECCOMP_TYPES


def _seccomp(pod: _Pod, restricted: bool) -> Violation | None:
    if restricted and pod.windows:
        return None
    values = [
        str(value_at(c, "seccompProfile", "type")) for c in [pod.context, *pod.container_contexts] if _seccomp_bad(c)
    ]
    fix = "set the pod's securityContext.seccompProfile.type to RuntimeDefault (or Localhost with a profile)"
    check = "seccompProfile_restricted" if restricted else "seccompProfile_baseline"
    explicit = _setting(
        check,
        _seccomp_bad(pod.context),
        pod.bad_containers(_seccomp_bad),
        f"seccompProfile.type {_listed(values)}",
        fix,
    )
    if explicit is not None or not restricted or _seccomp_set(pod.context):
        return explicit
    unset = pod.bad_containers(lambda ctx: not _seccomp_set(ctx))
    if not unset:
        return None
    return Violation(check, _unset(unset, "seccompProfile.type RuntimeDefault or Localhost"), fix)


def _sysctls(pod: _Pod) -> Violation | None:
    names = [str(s.get("name")) for s in mappings_at(pod.context, "sysctls") if s.get("name") not in SAFE_SYSCTLS]
    return _setting(
        "sysctls",
        bool(names),
        (),
        f"sysctls {_listed(names)}",
        f"set only the namespaced sysctls Pod Security allows ({', '.join(SAFE_SYSCTLS)})",
    )


# -- restricted ----------------------------------------------------------------------------------------------------


def _volume_types(pod: _Pod) -> Violation | None:
    def kinds(volume: Mapping[str, Any]) -> list[str]:
        return [str(k) for k in volume if k != "name"]

    bad = _volume_names(pod, lambda v: not any(k in RESTRICTED_VOLUMES for k in kinds(v)))
    types = _listed([k for v in mappings_at(pod.spec, "volumes") if str(v.get("name", "?")) in bad for k in kinds(v)])
    return _volumes(
        "restrictedVolumes",
        bad,
        f"uses {types or 'no volume source'}",
        f"use {types or 'no volume source'}",
        f"use only {', '.join(RESTRICTED_VOLUMES)} volumes, {_ELSEWHERE}",
    )


def _privilege_escalation(pod: _Pod) -> Violation | None:
    if pod.windows:
        return None
    bad = pod.bad_containers(lambda ctx: ctx.get("allowPrivilegeEscalation") is not False)
    if not bad:
        return None
    who, s = _who(False, bad)
    return Violation(
        "allowPrivilegeEscalation",
        f"{who} do{'es' if s else ''} not set securityContext.allowPrivilegeEscalation=false",
        "set securityContext.allowPrivilegeEscalation: false on every container",
    )


def _run_as_non_root(pod: _Pod) -> Violation | None:
    if pod.user_namespace:
        return None
    fix = "set the pod's securityContext.runAsNonRoot: true, with runAsUser a non-zero user the image can run as"
    pod_value = pod.context.get("runAsNonRoot")
    explicit = _setting(
        "runAsNonRoot",
        pod_value is False,
        pod.bad_containers(lambda ctx: ctx.get("runAsNonRoot") is False),
        "securityContext.runAsNonRoot=false",
        fix,
    )
    if explicit is not None or pod_value is True:
        return explicit
    unset = pod.bad_containers(lambda ctx: ctx.get("runAsNonRoot") is None)
    if not unset:
        return None
    return Violation("runAsNonRoot", _unset(unset, "runAsNonRoot=true"), fix)


def _run_as_user(pod: _Pod) -> Violation | None:
    if pod.user_namespace:
        return None
    return _setting(
        "runAsUser",
        pod.context.get("runAsUser") == 0,
        pod.bad_containers(lambda ctx: ctx.get("runAsUser") == 0),
        "securityContext.runAsUser=0",
        "run as a non-zero user (securityContext.runAsUser, e.g. the image's own non-root user)",
    )


def _capabilities_restricted(pod: _Pod) -> Violation | None:
    if pod.windows:
        return None
    keep = pod.bad_containers(lambda ctx: "ALL" not in (value_at(ctx, "capabilities", "drop") or []))
    add = pod.bad_containers(lambda ctx: any(c != "NET_BIND_SERVICE" for c in _added(ctx)))
    if not keep and not add:
        return None
    extra = [c for ctx in pod.container_contexts for c in _added(ctx) if c != "NET_BIND_SERVICE"]
    problems = []
    if keep:
        who, s = _who(False, keep)
        problems.append(f"{who} do{'es' if s else ''} not drop ALL capabilities")
    if add:
        who, s = _who(False, add)
        problems.append(f"{who} add{s} capabilities {_listed(extra)}")
    return Violation(
        "capabilities_restricted",
        "; ".join(problems),
        'set securityContext.capabilities.drop: ["ALL"] and add nothing but NET_BIND_SERVICE',
    )


def violations(spec: Mapping[str, Any], level: str, metadata: Mapping[str, Any] | None = None) -> list[Violation]:
    """The rules of Pod Security `level` (see the module docstring) that a pod spec breaks, in the order of the
    Pod Security Standards page; [] at `privileged`. `metadata` is the pod's (its AppArmor annotations)."""
    if level == PRIVILEGED:
        return []
    restricted = level != BASELINE  # a level that is not one reads as restricted
    containers = tuple(
        c for key in ("initContainers", "containers", "ephemeralContainers") for c in mappings_at(spec, key)
    )
    pod = _Pod(spec, metadata or {}, containers)
    rules: list[Callable[[_Pod], Violation | None]] = [
        _host_process,
        _host_namespaces,
        _privileged,
        _capabilities_restricted if restricted else _capabilities_baseline,
        _volume_types if restricted else _host_path,
        _host_ports,
        _probe_host,
        _app_armor,
        _se_linux,
        lambda p: _proc_mount(p, restricted),
        lambda p: _seccomp(p, restricted),
        _sysctls,
    ]
    if restricted:
        rules += [_privilege_escalation, _run_as_non_root, _run_as_user]
    return [v for rule in rules if (v := rule(pod)) is not None]
