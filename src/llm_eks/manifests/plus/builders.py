"""Builders: one standard-kind object dict in, its cdk8s-plus object out, reconciled (the package docstring says what
each models and what is patched)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cdk8s
import cdk8s_plus_35 as kplus
from constructs import Construct

from llm_eks.manifests.plus.network import network_policy
from llm_eks.manifests.plus.rbac import role, role_binding
from llm_eks.manifests.plus.reconcile import metadata, reconciled

_PULL = {
    "Always": kplus.ImagePullPolicy.ALWAYS,
    "IfNotPresent": kplus.ImagePullPolicy.IF_NOT_PRESENT,
    "Never": kplus.ImagePullPolicy.NEVER,
}
_PROTOCOL = {"TCP": kplus.Protocol.TCP, "UDP": kplus.Protocol.UDP, "SCTP": kplus.Protocol.SCTP}
_FIELD = {
    "metadata.name": kplus.EnvFieldPaths.POD_NAME,
    "metadata.namespace": kplus.EnvFieldPaths.POD_NAMESPACE,
    "metadata.uid": kplus.EnvFieldPaths.POD_UID,
    "status.podIP": kplus.EnvFieldPaths.POD_IP,
    "status.hostIP": kplus.EnvFieldPaths.NODE_IP,
    "spec.nodeName": kplus.EnvFieldPaths.NODE_NAME,
    "spec.serviceAccountName": kplus.EnvFieldPaths.SERVICE_ACCOUNT_NAME,
}


class PodParts:
    """What a pod's containers refer to, built once per pod under `scope` (a construct of its own, so two pods'
    volumes of one name never collide): its cdk8s-plus volumes, and the ConfigMaps its env values read."""

    def __init__(self, scope: Construct, specs: Sequence[Mapping[str, Any]]) -> None:
        self.scope = scope
        self.volumes: dict[str, kplus.Volume] = {}
        self._config_maps: dict[str, kplus.IConfigMap] = {}
        for spec in specs:
            name = spec["name"]
            if "emptyDir" in spec:
                # Its sizeLimit is reconciled: cdk8s-plus renders it in Mi.
                medium = kplus.EmptyDirMedium.MEMORY if spec["emptyDir"].get("medium") == "Memory" else None
                self.volumes[name] = kplus.Volume.from_empty_dir(scope, f"volume-{name}", name, medium=medium)
            elif "csi" in spec:
                csi = spec["csi"]
                self.volumes[name] = kplus.Volume.from_csi(
                    scope,
                    f"volume-{name}",
                    csi["driver"],
                    name=name,
                    read_only=csi.get("readOnly"),
                    attributes=csi.get("volumeAttributes"),
                )
            # Others (projected) have no cdk8s-plus constructor: reconcile appends them.

    def env_value(self, env: Mapping[str, Any]) -> kplus.EnvValue | None:
        """The cdk8s-plus value of one env entry; None for a source it cannot express."""
        if "value" in env:
            return kplus.EnvValue.from_value(env["value"])
        source = env.get("valueFrom") or {}
        field = (source.get("fieldRef") or {}).get("fieldPath")
        if field in _FIELD:
            return kplus.EnvValue.from_field_ref(_FIELD[field])
        ref = source.get("configMapKeyRef")
        if ref is None:
            return None
        name = ref["name"]
        if name not in self._config_maps:
            self._config_maps[name] = kplus.ConfigMap.from_config_map_name(self.scope, f"config-map-{name}", name)
        return kplus.EnvValue.from_config_map(self._config_maps[name], ref["key"], optional=ref.get("optional"))

    def container(self, spec: Mapping[str, Any]) -> kplus.ContainerProps:
        """One container's props, in one call: what cdk8s-plus renders as we write it. Resources, probes,
        lifecycle and the rest of the security context are reconciled (the module docstring says why)."""
        env: dict[str, kplus.EnvValue] = {}
        for item in spec.get("env") or ():
            value = self.env_value(item)
            if value is None:
                break  # it and the entries after it are reconciled, in order
            env[item["name"]] = value
        security = spec.get("securityContext") or {}
        return kplus.ContainerProps(
            name=spec["name"],
            image=spec["image"],
            image_pull_policy=_PULL[spec.get("imagePullPolicy", "Always")],
            command=spec.get("command"),
            args=spec.get("args"),
            ports=[
                kplus.ContainerPort(
                    number=p["containerPort"], name=p.get("name"), protocol=_PROTOCOL[p.get("protocol", "TCP")]
                )
                for p in spec.get("ports") or ()
            ],
            env_variables=env,
            volume_mounts=[
                kplus.VolumeMount(path=m["mountPath"], volume=self.volumes[m["name"]], read_only=m.get("readOnly"))
                for m in spec.get("volumeMounts") or ()
                if m["name"] in self.volumes
            ],
            restart_policy=kplus.ContainerRestartPolicy.ALWAYS if spec.get("restartPolicy") == "Always" else None,
            # Nothing, rather than cdk8s-plus's default requests and limits (1 CPU, 512Mi): ours are reconciled.
            resources=kplus.ContainerResources(),
            security_context=kplus.ContainerSecurityContextProps(
                allow_privilege_escalation=security.get("allowPrivilegeEscalation"),
                privileged=security.get("privileged"),
                read_only_root_filesystem=security.get("readOnlyRootFilesystem"),
                ensure_non_root=security.get("runAsNonRoot"),
                user=security.get("runAsUser"),
                group=security.get("runAsGroup"),
            ),
        )


def _pod_props(scope: Construct, pod: Mapping[str, Any], account: kplus.IServiceAccount | None) -> dict[str, Any]:
    """The pod-level props of a workload (a Deployment's or a Job's) whose pod spec is `pod`."""
    parts = PodParts(scope, pod.get("volumes") or ())
    if account is None and "serviceAccountName" in pod:
        # An account built elsewhere (another chart, or the same chart as a plain object): by name.
        account = kplus.ServiceAccount.from_service_account_name(scope, "account", pod["serviceAccountName"])
    grace = pod.get("terminationGracePeriodSeconds")
    security = pod.get("securityContext") or {}
    return {
        "service_account": account,
        "automount_service_account_token": pod.get("automountServiceAccountToken"),
        "enable_service_links": pod.get("enableServiceLinks"),
        "termination_grace_period": None if grace is None else cdk8s.Duration.seconds(grace),
        "security_context": kplus.PodSecurityContextProps(
            ensure_non_root=security.get("runAsNonRoot"),
            user=security.get("runAsUser"),
            group=security.get("runAsGroup"),
        ),
        "containers": [parts.container(c) for c in pod["containers"]],
        "init_containers": [parts.container(c) for c in pod.get("initContainers") or ()],
        "volumes": list(parts.volumes.values()),
    }


def _seconds(value: int | None) -> cdk8s.Duration | None:
    return None if value is None else cdk8s.Duration.seconds(value)


def _workload_props(
    scope: Construct, construct_id: str, template: Mapping[str, Any], account: kplus.IServiceAccount | None
) -> dict[str, Any]:
    """A workload's pod: no cdk8s-plus address label (select=False), its labels, its pod props."""
    return {
        "select": False,
        "pod_metadata": metadata(template["metadata"]),
        **_pod_props(Construct(scope, f"{construct_id}-pod"), template["spec"], account),
    }


def deployment(
    scope: Construct, construct_id: str, obj: Mapping[str, Any], account: kplus.IServiceAccount | None = None
) -> kplus.Deployment:
    """The Deployment `obj` (a whole object dict) as a cdk8s-plus Deployment with `account` as its service account
    (None: the one its pod spec names), reconciled. Its selector is exactly `obj`'s."""
    spec = obj["spec"]
    # A rolling update by absolute numbers, as ours are; anything else is left to reconcile.
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    strategy = None
    if all(isinstance(rolling.get(k), int) for k in ("maxSurge", "maxUnavailable")):
        strategy = kplus.DeploymentStrategy.rolling_update(
            max_surge=kplus.PercentOrAbsolute.absolute(rolling["maxSurge"]),
            max_unavailable=kplus.PercentOrAbsolute.absolute(rolling["maxUnavailable"]),
        )
    selector = kplus.LabelSelector.of(labels=spec["selector"]["matchLabels"])
    return reconciled(
        kplus.Deployment,
        scope,
        construct_id,
        obj,
        {
            "replicas": spec.get("replicas"),
            "strategy": strategy,
            "progress_deadline": _seconds(spec.get("progressDeadlineSeconds")),
            **_workload_props(scope, construct_id, spec["template"], account),
        },
        lambda made: made.select(selector),
    )


def daemon_set(
    scope: Construct, construct_id: str, obj: Mapping[str, Any], account: kplus.IServiceAccount | None = None
) -> kplus.DaemonSet:
    """The DaemonSet `obj` as a cdk8s-plus DaemonSet with `account` as its service account (None: the one its pod
    spec names, if any), reconciled. Its selector is exactly `obj`'s."""
    spec = obj["spec"]
    selector = kplus.LabelSelector.of(labels=spec["selector"]["matchLabels"])
    return reconciled(
        kplus.DaemonSet,
        scope,
        construct_id,
        obj,
        {
            "min_ready_seconds": spec.get("minReadySeconds"),
            **_workload_props(scope, construct_id, spec["template"], account),
        },
        lambda made: made.select(selector),
    )


def job(
    scope: Construct, construct_id: str, obj: Mapping[str, Any], account: kplus.IServiceAccount | None = None
) -> kplus.Job:
    """The Job `obj` as a cdk8s-plus Job with `account` as its service account (None: the one its pod spec names),
    reconciled."""
    spec = obj["spec"]
    return reconciled(
        kplus.Job,
        scope,
        construct_id,
        obj,
        {
            "backoff_limit": spec.get("backoffLimit"),
            "active_deadline": _seconds(spec.get("activeDeadlineSeconds")),
            "ttl_after_finished": _seconds(spec.get("ttlSecondsAfterFinished")),
            **_workload_props(scope, construct_id, spec["template"], account),
        },
    )


def service(scope: Construct, construct_id: str, obj: Mapping[str, Any]) -> kplus.Service:
    """The Service `obj` as a cdk8s-plus Service selecting its pods by label, reconciled (a named targetPort:
    cdk8s-plus takes numbers only)."""
    spec = obj["spec"]

    def select(made: kplus.Service) -> None:
        for key, value in spec.get("selector", {}).items():
            made.select_label(key, value)

    return reconciled(
        kplus.Service,
        scope,
        construct_id,
        obj,
        {
            "type": kplus.ServiceType.CLUSTER_IP if spec.get("type", "ClusterIP") == "ClusterIP" else None,
            "ports": [
                kplus.ServicePort(port=p["port"], name=p.get("name"), protocol=_PROTOCOL[p.get("protocol", "TCP")])
                for p in spec["ports"]
            ],
        },
        select,
    )


def service_account(scope: Construct, construct_id: str, obj: Mapping[str, Any]) -> kplus.ServiceAccount:
    """The ServiceAccount `obj` as a cdk8s-plus ServiceAccount, reconciled."""
    return reconciled(
        kplus.ServiceAccount, scope, construct_id, obj, {"automount_token": obj.get("automountServiceAccountToken")}
    )


def config_map(scope: Construct, construct_id: str, obj: Mapping[str, Any]) -> kplus.ConfigMap:
    """The ConfigMap `obj` as a cdk8s-plus ConfigMap, reconciled."""
    props = {"data": obj.get("data"), "immutable": obj.get("immutable")}
    return reconciled(kplus.ConfigMap, scope, construct_id, obj, props)


def namespace(scope: Construct, construct_id: str, obj: Mapping[str, Any]) -> kplus.Namespace:
    """The Namespace `obj` (its labels carry the Pod Security level) as a cdk8s-plus Namespace, reconciled. Not in
    BUILDERS: on a chart with a namespace (the gateway's), cdk8s puts that namespace into a plain Namespace's
    metadata and cdk8s-plus does not, so building that one through cdk8s-plus would change the synthesized text (a
    correct change, as a Namespace is cluster-scoped, left for a release that reviews it in the golden files)."""
    return reconciled(kplus.Namespace, scope, construct_id, obj, {})


# The kinds serving_objects.add_objects builds through cdk8s-plus on a PlusChart: (apiVersion, kind) -> builder.
BUILDERS: dict[tuple[str, str], Callable[[Construct, str, Mapping[str, Any]], kplus.Resource]] = {
    ("v1", "ServiceAccount"): service_account,
    ("v1", "ConfigMap"): config_map,
    ("v1", "Service"): service,
    ("batch/v1", "Job"): job,
    ("apps/v1", "Deployment"): deployment,
    ("apps/v1", "DaemonSet"): daemon_set,
    ("networking.k8s.io/v1", "NetworkPolicy"): network_policy,
    ("rbac.authorization.k8s.io/v1", "Role"): role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): role_binding,
}
