"""cdk8s-plus objects (cdk8s-plus-35 2.0.5) for the charts' standard kinds that synthesize exactly the object dict a
chart has built and the golden files pin, so a user extends them with cdk8s-plus's own API (`add_container`,
`add_volume`, `containers[0].env.add_variable`, ...) while a deployed workload's selector and pod template stay
byte-identical (a changed selector is refused by the API server; a changed pod template restarts every GPU pod).

How: the object is built through cdk8s-plus from what it models the way we write it (metadata; a workload's replicas,
strategy, selector, pod labels, service account, grace period; each container's name, image, pull policy, command,
args, ports, env and volume mounts; emptyDir and CSI volumes; a Service's type and ports; a ServiceAccount's token
mount), rendered once, and compared with the dict. Where cdk8s-plus renders something else, JSON patches at the exact
paths set our value (`reconcile`):
- its defaults that we leave to the API server: a pod's `dnsPolicy`, `restartPolicy`, `hostNetwork`,
  `shareProcessNamespace`, `setHostnameAsFqdn`; a Deployment's `minReadySeconds` and `revisionHistoryLimit`;
- its own label `cdk8s.io/metadata.addr` on the pod template, which it adds even with `select=False` (cdk8s-plus-35
  2.0.5 lib/workload.js, `podMetadata`): removed, so the template is the one deployed clusters run;
- security contexts: cdk8s-plus always renders runAsNonRoot, privileged and readOnlyRootFilesystem (lib/container.js
  ContainerSecurityContext, lib/pod.js PodSecurityContext with fsGroupChangePolicy Always);
- what it has no API for: extended resources (nvidia.com/gpu, vpc.amazonaws.com/efa) and exact quantities (it renders
  memory in Mi and storage in Gi, lib/container.js Container._toKube), probes on a named port, a preStop `sleep`,
  affinity and topology spread as we write them, nodeSelector, tolerations, schedulerName, projected volumes, a
  Service's named targetPort (lib/service.js: a number only).
Patches name list items by index; our containers, init containers and the volumes our containers mount come first in
cdk8s-plus's rendering (lib/pod.js AbstractPod._toPodSpec: containers' mounts, then init containers', then the pod's
volumes), and what a user adds later is appended after them, so the patches keep to our items. A volume cdk8s-plus
cannot express is appended by a patch (`volumes/-`).

Cost: one jsii round trip per call. A container is one ContainerProps (all its fields in one call), the rendering one
`to_json`, the patches one `add_json_patch` call (plus one per operation built).

Selecting pods: the pod templates carry our labels (`app.kubernetes.io/name`, `app.kubernetes.io/instance`), not
cdk8s-plus's address label, so cdk8s-plus selectors built from a workload object (`expose_via_service`,
`connections.allow_from(deployment)`) would select nothing: select by the chart's labels
(`kplus.Pods.select(scope, id, labels=chart.selector)`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import cdk8s
import cdk8s_plus_35 as kplus
from constructs import Construct

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


def _pointer(path: Sequence[str | int]) -> str:
    """A JSON pointer (RFC 6901): `~` and `/` escaped in each token."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _diff(rendered: Any, desired: Any, path: tuple[str | int, ...]) -> Iterator[tuple[str, tuple[str | int, ...], Any]]:
    """JSON patch operations (op, pointer, value) that turn `rendered` into `desired`, at the deepest path that
    differs; a list at least as long as the rendered one is patched item by item, its extra items appended."""
    if isinstance(rendered, dict) and isinstance(desired, dict):
        for key in rendered:
            if key not in desired:
                yield ("remove", (*path, key), None)
        for key, value in desired.items():
            if key not in rendered:
                yield ("add", (*path, key), value)
            else:
                yield from _diff(rendered[key], value, (*path, key))
    elif isinstance(rendered, list) and isinstance(desired, list) and len(desired) >= len(rendered):
        for index, value in enumerate(desired):
            if index < len(rendered):
                yield from _diff(rendered[index], value, (*path, index))
            else:
                yield ("add", (*path, "-"), value)
    elif rendered != desired or type(rendered) is not type(desired):
        yield ("replace", path, desired)


_OPS = {"add": cdk8s.JsonPatch.add, "replace": cdk8s.JsonPatch.replace}
# cdk8s-plus's objects are its imported k8s classes (KubeDeployment, ...), whose JSON patches apply to their props
# before these are converted to Kubernetes JSON (cdk8s ApiObject.toJson, then toJson_KubeDeploymentProps in
# cdk8s-plus-35's lib/imports/k8s.js): a patch names a props key where it differs from the Kubernetes one, and
# gives a Quantity or IntOrString as the object holding it ({"value": ...}), or the conversion drops it.
_PROPS_KEYS = {
    "clientIP": "clientIp",
    "clusterIP": "clusterIp",
    "datasetUUID": "datasetUuid",
    "diskURI": "diskUri",
    "downwardAPI": "downwardApi",
    "externalID": "externalId",
    "hostIP": "hostIp",
    "hostIPC": "hostIpc",
    "hostPID": "hostPid",
    "insecureSkipTLSVerify": "insecureSkipTlsVerify",
    "loadBalancerIP": "loadBalancerIp",
    "nodeID": "nodeId",
    "nodeUID": "nodeUid",
    "nonResourceURLs": "nonResourceUrLs",
    "openAPIV3Schema": "openApiv3Schema",
    "pdID": "pdId",
    "podCIDR": "podCidr",
    "podCIDRs": "podCidRs",
    "podUID": "podUid",
    "providerID": "providerId",
    "scaleIO": "scaleIo",
    "serviceAccountUID": "serviceAccountUid",
    "setHostnameAsFQDN": "setHostnameAsFqdn",
    "storagePolicyID": "storagePolicyId",
    "targetCPUUtilizationPercentage": "targetCpuUtilizationPercentage",
    "targetWWNs": "targetWwNs",
    "volumeID": "volumeId",
}
_PORT_HOLDERS = ("httpGet", "tcpSocket")


def _wrapped(path: tuple[str | int, ...]) -> bool:
    """Whether the value at `path` is a Quantity or IntOrString in the props."""
    last, parent = path[-1], path[-2] if len(path) > 1 else None
    return (
        last in ("sizeLimit", "targetPort", "maxSurge", "maxUnavailable")
        or (last == "port" and parent in _PORT_HOLDERS)
        or (parent in ("requests", "limits") and len(path) > 2 and path[-3] == "resources")
    )


def _props_form(path: tuple[str | int, ...], value: Any) -> Any:
    if path and not isinstance(path[-1], int) and _wrapped(path):
        return {"value": value}
    if isinstance(value, dict):
        return {_PROPS_KEYS.get(k, k): _props_form((*path, k), v) for k, v in value.items()}
    if isinstance(value, list):
        return [_props_form((*path, i), v) for i, v in enumerate(value)]
    return value


def _patch(op: str, path: tuple[str | int, ...], value: Any) -> cdk8s.JsonPatch:
    pointer = _pointer(tuple(_PROPS_KEYS.get(p, p) if isinstance(p, str) else p for p in path))
    if op == "remove":
        return cdk8s.JsonPatch.remove(pointer)
    return _OPS[op](pointer, _props_form(path, value))


def reconcile(resource: kplus.Resource, desired: Mapping[str, Any]) -> list[str]:
    """Patch `resource`'s object so it synthesizes `desired` (a whole object: apiVersion, kind, metadata, ...);
    returns the patched paths (`op pointer`), which tests/test_chart_api.py pins per object."""
    api_object = cdk8s.ApiObject.of(resource)
    ops = list(_diff(api_object.to_json(), dict(desired), ()))
    if ops:
        api_object.add_json_patch(*(_patch(op, path, value) for op, path, value in ops))
    paths = [f"{op} {_pointer(path)}" for op, path, _ in ops]
    chart = cdk8s.Chart.of(resource)
    if isinstance(chart, PlusChart):
        chart.record(resource.node.id, desired, paths)
    return paths


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


def deployment(
    scope: Construct, construct_id: str, obj: Mapping[str, Any], account: kplus.IServiceAccount | None
) -> kplus.Deployment:
    """The Deployment `obj` (a whole object dict) as a cdk8s-plus Deployment with `account` as its service account,
    reconciled (`reconcile`). Its selector is exactly `obj`'s (select=False: no cdk8s-plus address label)."""
    spec = obj["spec"]
    template = spec["template"]
    # A rolling update by absolute numbers, as ours are; anything else is left to reconcile.
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    strategy = None
    if all(isinstance(rolling.get(k), int) for k in ("maxSurge", "maxUnavailable")):
        strategy = kplus.DeploymentStrategy.rolling_update(
            max_surge=kplus.PercentOrAbsolute.absolute(rolling["maxSurge"]),
            max_unavailable=kplus.PercentOrAbsolute.absolute(rolling["maxUnavailable"]),
        )
    deadline = spec.get("progressDeadlineSeconds")
    made = kplus.Deployment(
        scope,
        construct_id,
        metadata=cdk8s.ApiObjectMetadata(**_metadata(obj["metadata"])),
        select=False,
        replicas=spec.get("replicas"),
        strategy=strategy,
        progress_deadline=None if deadline is None else cdk8s.Duration.seconds(deadline),
        pod_metadata=cdk8s.ApiObjectMetadata(**_metadata(template["metadata"])),
        **_pod_props(Construct(scope, f"{construct_id}-pod"), template["spec"], account),
    )
    made.select(kplus.LabelSelector.of(labels=spec["selector"]["matchLabels"]))
    reconcile(made, obj)
    return made


def job(
    scope: Construct, construct_id: str, obj: Mapping[str, Any], account: kplus.IServiceAccount | None
) -> kplus.Job:
    """The Job `obj` as a cdk8s-plus Job (select=False), reconciled (`reconcile`)."""
    spec = obj["spec"]
    template = spec["template"]
    deadline = spec.get("activeDeadlineSeconds")
    ttl = spec.get("ttlSecondsAfterFinished")
    made = kplus.Job(
        scope,
        construct_id,
        metadata=cdk8s.ApiObjectMetadata(**_metadata(obj["metadata"])),
        select=False,
        backoff_limit=spec.get("backoffLimit"),
        active_deadline=None if deadline is None else cdk8s.Duration.seconds(deadline),
        ttl_after_finished=None if ttl is None else cdk8s.Duration.seconds(ttl),
        pod_metadata=cdk8s.ApiObjectMetadata(**_metadata(template["metadata"])),
        **_pod_props(Construct(scope, f"{construct_id}-pod"), template["spec"], account),
    )
    reconcile(made, obj)
    return made


def service(scope: Construct, construct_id: str, obj: Mapping[str, Any]) -> kplus.Service:
    """The Service `obj` as a cdk8s-plus Service selecting its pods by label, reconciled (a named targetPort: cdk8s-plus
    takes numbers only)."""
    spec = obj["spec"]
    made = kplus.Service(
        scope,
        construct_id,
        metadata=cdk8s.ApiObjectMetadata(**_metadata(obj["metadata"])),
        type=kplus.ServiceType.CLUSTER_IP if spec.get("type", "ClusterIP") == "ClusterIP" else None,
        ports=[
            kplus.ServicePort(port=p["port"], name=p.get("name"), protocol=_PROTOCOL[p.get("protocol", "TCP")])
            for p in spec["ports"]
        ],
    )
    for key, value in spec.get("selector", {}).items():
        made.select_label(key, value)
    reconcile(made, obj)
    return made


def service_account(scope: Construct, construct_id: str, obj: Mapping[str, Any]) -> kplus.ServiceAccount:
    """The ServiceAccount `obj` as a cdk8s-plus ServiceAccount, reconciled (`reconcile`)."""
    made = kplus.ServiceAccount(
        scope,
        construct_id,
        metadata=cdk8s.ApiObjectMetadata(**_metadata(obj["metadata"])),
        automount_token=obj.get("automountServiceAccountToken"),
    )
    reconcile(made, obj)
    return made


def in_order(rendered: Any, reviewed: Any) -> Any:
    """`rendered` with its keys in `reviewed`'s order, then its own others (what a user added). cdk8s-plus's objects
    come out in its converters' key order (lib/imports/k8s.js); ours keep the order the reviewed dicts, the golden
    files and deployed manifests have, so the synthesized text (and the CloudFormation manifest property holding it)
    does not change."""
    if isinstance(rendered, dict) and isinstance(reviewed, dict):
        keys = [*(k for k in reviewed if k in rendered), *(k for k in rendered if k not in reviewed)]
        return {k: in_order(rendered[k], reviewed.get(k)) for k in keys}
    if isinstance(rendered, list) and isinstance(reviewed, list):
        return [in_order(item, reviewed[i] if i < len(reviewed) else None) for i, item in enumerate(rendered)]
    return rendered


class PlusChart(cdk8s.Chart):
    """A chart whose cdk8s-plus objects, built by this module's builders, are synthesized in their reviewed dicts'
    key order (in_order)."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        # Each cdk8s-plus object's reconciled paths (reconcile), by construct id: what tests pin.
        self.reconciled: dict[str, list[str]] = {}
        self._reviewed: dict[tuple[Any, Any], Mapping[str, Any]] = {}

    def record(self, construct_id: str, obj: Mapping[str, Any], paths: list[str]) -> None:
        """`obj`, the reviewed dict of this chart's cdk8s-plus object `construct_id`, and its reconciled paths."""
        self.reconciled[construct_id] = paths
        # An object's own metadata comes out of cdk8s sorted (ApiObjectMetadata), as a plain ApiObject's does.
        self._reviewed[(obj["kind"], obj["metadata"]["name"])] = {**obj, "metadata": _sorted(obj["metadata"])}

    def to_json(self) -> list[Any]:
        objects: list[Any] = super().to_json()
        reviewed = self._reviewed
        return [in_order(o, reviewed.get((o.get("kind"), (o.get("metadata") or {}).get("name")))) for o in objects]


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    return value


def config_map(scope: Construct, construct_id: str, obj: Mapping[str, Any]) -> kplus.ConfigMap:
    """The ConfigMap `obj` as a cdk8s-plus ConfigMap, reconciled (`reconcile`)."""
    made = kplus.ConfigMap(
        scope,
        construct_id,
        metadata=cdk8s.ApiObjectMetadata(**_metadata(obj["metadata"])),
        data=obj.get("data"),
        immutable=obj.get("immutable"),
    )
    reconcile(made, obj)
    return made


def _job(scope: Construct, construct_id: str, obj: Mapping[str, Any]) -> kplus.Job:
    return job(scope, construct_id, obj, None)


def _deployment(scope: Construct, construct_id: str, obj: Mapping[str, Any]) -> kplus.Deployment:
    return deployment(scope, construct_id, obj, None)


# The kinds add_objects builds through cdk8s-plus on a PlusChart: (apiVersion, kind) -> builder.
BUILDERS: dict[tuple[str, str], Any] = {
    ("v1", "ServiceAccount"): service_account,
    ("v1", "ConfigMap"): config_map,
    ("v1", "Service"): service,
    ("batch/v1", "Job"): _job,
    ("apps/v1", "Deployment"): _deployment,
}


def _metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {key: metadata[key] for key in ("name", "namespace", "labels", "annotations") if key in metadata}
