"""Reconciling a cdk8s-plus object with the reviewed dict it stands for (the package docstring says why): the JSON
patches that turn cdk8s-plus's rendering into the dict, in the form cdk8s-plus's k8s objects take them, and the chart
that synthesizes its objects in the dicts' key order."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import cdk8s
import cdk8s_plus_35 as kplus
from constructs import Construct


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
PROPS_KEYS = {
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
        return {PROPS_KEYS.get(k, k): _props_form((*path, k), v) for k, v in value.items()}
    if isinstance(value, list):
        return [_props_form((*path, i), v) for i, v in enumerate(value)]
    return value


def _patch(op: str, path: tuple[str | int, ...], value: Any) -> cdk8s.JsonPatch:
    pointer = _pointer(tuple(PROPS_KEYS.get(p, p) if isinstance(p, str) else p for p in path))
    if op == "remove":
        return cdk8s.JsonPatch.remove(pointer)
    return _OPS[op](pointer, _props_form(path, value))


def reconcile(
    resource: kplus.Resource,
    desired: Mapping[str, Any],
    chart: cdk8s.Chart | None = None,
    construct_id: str | None = None,
) -> list[str]:
    """Patch `resource`'s object so it synthesizes `desired` (a whole object: apiVersion, kind, metadata, ...);
    returns the patched paths (`op pointer`), which tests/test_chart_api.py pins per object. `chart` and
    `construct_id`: the resource's chart and id when the caller knows them (each saves a jsii round trip)."""
    api_object = cdk8s.ApiObject.of(resource)
    ops = list(_diff(api_object.to_json(), dict(desired), ()))
    if ops:
        api_object.add_json_patch(*(_patch(op, path, value) for op, path, value in ops))
    paths = [f"{op} {_pointer(path)}" for op, path, _ in ops]
    chart = chart or cdk8s.Chart.of(resource)
    if isinstance(chart, PlusChart):
        chart.record(construct_id or resource.node.id, resource, desired, paths)
    return paths


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

    def __init__(self, scope: Construct, construct_id: str, namespace: str | None = None) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True, namespace=namespace)
        # Each cdk8s-plus object's reconciled paths (reconcile), by construct id: what tests pin.
        self.reconciled: dict[str, list[str]] = {}
        self._reviewed: dict[tuple[Any, Any], Mapping[str, Any]] = {}
        # The chart's NetworkPolicies by name (the workload's own and those an environment adds): a user allows
        # more traffic with cdk8s-plus's API (`add_ingress_rule`) or a policy of their own.
        self.network_policies: dict[str, kplus.NetworkPolicy] = {}

    def record(self, construct_id: str, resource: kplus.Resource, obj: Mapping[str, Any], paths: list[str]) -> None:
        """`obj`, the reviewed dict of this chart's cdk8s-plus object `resource` (`construct_id`), and its reconciled
        paths."""
        self.reconciled[construct_id] = paths
        if isinstance(resource, kplus.NetworkPolicy):
            self.network_policies[obj["metadata"]["name"]] = resource
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


_R = TypeVar("_R", bound=kplus.Resource)


def reconciled(
    kind: Callable[..., _R],
    scope: Construct,
    construct_id: str,
    obj: Mapping[str, Any],
    props: Mapping[str, Any],
    then: Callable[[_R], None] | None = None,
) -> _R:
    """`kind(scope, construct_id, metadata=obj's, **props)`, `then` applied (what takes a call of its own, such as
    a selector), reconciled with `obj`."""
    made = kind(scope, construct_id, metadata=metadata(obj["metadata"]), **props)
    if then is not None:
        then(made)
    # On a chart itself (add_objects, the charts' own builders), the chart is the scope: no round trip to find it.
    reconcile(made, obj, scope if isinstance(scope, cdk8s.Chart) else None, construct_id)
    return made


def metadata(fields: Mapping[str, Any]) -> cdk8s.ApiObjectMetadata:
    """An object's metadata (name, namespace, labels, annotations) as cdk8s takes it."""
    return cdk8s.ApiObjectMetadata(
        **{key: fields[key] for key in ("name", "namespace", "labels", "annotations") if key in fields}
    )
