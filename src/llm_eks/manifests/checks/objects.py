"""Reading plain Kubernetes object dicts: fields by path, object refs, pod requests, and the pod templates of every
workload kind with how many pods each makes at its maximum scale.

Objects come from charts and from users' YAML: a field of the wrong type is read as absent, never a crash.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from llm_eks.manifests.quantities import quantity

# KEDA's default ScaledObject maxReplicaCount.
KEDA_DEFAULT_MAX_REPLICAS = 100


def value_at(node: Any, *keys: str) -> Any:
    """The value at a path of mapping keys, or None."""
    for key in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def mapping_at(node: Any, *keys: str) -> Mapping[str, Any]:
    """The mapping at a path, or {}."""
    value = value_at(node, *keys)
    return value if isinstance(value, Mapping) else {}


def mappings_at(node: Any, *keys: str) -> list[Mapping[str, Any]]:
    """The mappings in the list at a path, or []."""
    value = value_at(node, *keys)
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def list_at(node: Any, *keys: str) -> list[Any]:
    """The list at a path, or []."""
    value = value_at(node, *keys)
    return value if isinstance(value, list) else []


def group_kind(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(API group, kind) of an object; the core group is ""."""
    api_version = str(obj.get("apiVersion") or "")
    return (api_version.rsplit("/", 1)[0] if "/" in api_version else ""), str(obj.get("kind") or "")


_BYTES = ("memory", "ephemeral-storage")


def amount(resource: str, value: Fraction) -> str:
    """A readable amount: 4 nvidia.com/gpu, 3.92 cpu, 28.6Gi memory."""
    if resource in _BYTES:
        gib = float(value / 2**30)
        text = f"{gib:.1f}".removesuffix(".0")
        return f"{text}Gi {resource}"
    if value.denominator == 1:
        return f"{value.numerator} {resource}"
    return f"{float(value):.3f}".rstrip("0").rstrip(".") + f" {resource}"


def pod_requests(spec: Mapping[str, Any]) -> dict[str, Fraction]:
    """Effective requests of a pod, as the scheduler computes them: containers and sidecars summed, each regular init
    container (plus the sidecars started before it) as a floor. A missing request defaults to the limit."""

    def requests(container: Mapping[str, Any]) -> dict[str, Fraction]:
        merged = {**mapping_at(container, "resources", "limits"), **mapping_at(container, "resources", "requests")}
        out = {}
        for name, raw in merged.items():
            value = quantity(raw)
            if value is not None:
                out[str(name)] = value
        return out

    def add(into: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
        for name, value in more.items():
            into[name] = into.get(name, Fraction(0)) + value

    total: dict[str, Fraction] = {}
    for container in mappings_at(spec, "containers"):
        add(total, requests(container))
    sidecars: dict[str, Fraction] = {}
    floor: dict[str, Fraction] = {}
    for container in mappings_at(spec, "initContainers"):
        if container.get("restartPolicy") == "Always":
            add(sidecars, requests(container))
            continue
        step = dict(sidecars)
        add(step, requests(container))
        for name, value in step.items():
            floor[name] = max(floor.get(name, Fraction(0)), value)
    add(total, sidecars)
    for name, value in floor.items():
        total[name] = max(total.get(name, Fraction(0)), value)
    return total


def object_ref(obj: Mapping[str, Any]) -> str:
    """`Kind/namespace/name`, or `Kind/name` for an object without a namespace."""
    meta = mapping_at(obj, "metadata")
    parts = [str(obj.get("kind", "?")), str(meta.get("namespace") or ""), str(meta.get("name", "?"))]
    return "/".join(p for p in parts if p)


def as_int(value: Any, default: int) -> int:
    """An integer field; a deploy-time token (rendered null or as text) counts as the default."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _meta(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = mapping_at(obj, "metadata")
    return str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", ""))


@dataclass(frozen=True)
class PodTemplate:
    """One pod template of a workload, with how many such pods exist at the workload's maximum scale."""

    obj: Mapping[str, Any]
    # "" for single-template kinds; "head", "worker group gpu", "leader", "worker" otherwise.
    part: str
    spec: Mapping[str, Any]
    max_pods: int | None
    # How max_pods was worked out, for messages (e.g. "ScaledObject maxReplicaCount 6").
    scale: str
    # What to change to lower it.
    scale_fix: str
    # Pods per unit of that setting (Ray numOfHosts, LeaderWorkerSet size).
    unit_pods: int = 1
    # The template's metadata (labels, annotations), as the pods get it.
    metadata: Mapping[str, Any] = field(default_factory=dict)


def _max_replicas(obj: Mapping[str, Any], objects: Sequence[Mapping[str, Any]]) -> tuple[int, str, str]:
    kind, ns, name = _meta(obj)
    for other in objects:
        o_kind, o_ns, _ = _meta(other)
        spec = mapping_at(other, "spec")
        if o_ns != ns:
            continue
        if group_kind(other) == ("keda.sh", "ScaledObject"):
            target = mapping_at(spec, "scaleTargetRef")
            if target.get("name") == name and (target.get("kind") or "Deployment") == kind:
                count = spec.get("maxReplicaCount")
                source = f"ScaledObject maxReplicaCount {count}"
                if count is None:
                    count = KEDA_DEFAULT_MAX_REPLICAS
                    source = f"ScaledObject maxReplicaCount unset: KEDA's {count}"
                return (
                    as_int(count, KEDA_DEFAULT_MAX_REPLICAS),
                    source,
                    "the ScaledObject's maxReplicaCount (workload.replicas.max)",
                )
        if o_kind == "HorizontalPodAutoscaler":
            target = mapping_at(spec, "scaleTargetRef")
            if target.get("name") == name and target.get("kind") == kind:
                count = as_int(spec.get("maxReplicas"), 1)
                return count, f"HorizontalPodAutoscaler maxReplicas {count}", "the HPA's maxReplicas"
    count = as_int(value_at(obj, "spec", "replicas"), 1)
    return count, f"spec.replicas {count}", "spec.replicas"


def _ray_templates(obj: Mapping[str, Any], cluster: Mapping[str, Any]) -> Iterator[PodTemplate]:
    head = mapping_at(cluster, "headGroupSpec", "template")
    if head:
        yield PodTemplate(obj, "head", mapping_at(head, "spec"), 1, "1 head", "", metadata=mapping_at(head, "metadata"))
    for group in mappings_at(cluster, "workerGroupSpecs"):
        hosts = as_int(group.get("numOfHosts"), 1)
        if group.get("maxReplicas") is not None:
            replicas = as_int(group["maxReplicas"], 0)
            source = f"maxReplicas {replicas}"
        else:
            replicas = as_int(group.get("replicas"), 0)
            source = f"replicas {replicas}"
        scale = f"{source} x numOfHosts {hosts}" if hosts != 1 else source
        part = f"worker group {group.get('groupName', '?')}"
        yield PodTemplate(
            obj,
            part,
            mapping_at(group, "template", "spec"),
            replicas * hosts,
            scale,
            f"the {part}'s maxReplicas",
            hosts,
            mapping_at(group, "template", "metadata"),
        )


def ray_cluster_spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The RayCluster spec of a RayCluster, RayService (rayClusterConfig) or RayJob (rayClusterSpec), or {}."""
    path = {"RayCluster": (), "RayService": ("rayClusterConfig",), "RayJob": ("rayClusterSpec",)}
    group, kind = group_kind(obj)
    return mapping_at(obj, "spec", *path[kind]) if group == "ray.io" and kind in path else {}


def pod_templates(objects: Sequence[Mapping[str, Any]], *, daemonsets: bool = False) -> Iterator[PodTemplate]:
    """Every pod template the objects would create; DaemonSets' (one pod per node, max_pods None) only when asked."""
    for obj in objects:
        group, kind = group_kind(obj)
        spec = mapping_at(obj, "spec")
        template = mapping_at(spec, "template")
        meta = mapping_at(template, "metadata")
        if kind in ("Deployment", "StatefulSet", "ReplicaSet") and group == "apps":
            count, source, fix = _max_replicas(obj, objects)
            yield PodTemplate(obj, "", mapping_at(template, "spec"), count, source, fix, metadata=meta)
        elif kind == "DaemonSet" and group == "apps" and daemonsets:
            yield PodTemplate(obj, "", mapping_at(template, "spec"), None, "one per node", "", metadata=meta)
        elif kind == "Job" and group == "batch":
            count = as_int(spec.get("parallelism"), 1)
            yield PodTemplate(obj, "", mapping_at(template, "spec"), count, f"parallelism {count}", "", metadata=meta)
        elif kind == "CronJob" and group == "batch":
            job = mapping_at(spec, "jobTemplate", "spec")
            count = as_int(job.get("parallelism"), 1)
            meta = mapping_at(job, "template", "metadata")
            yield PodTemplate(
                obj, "", mapping_at(job, "template", "spec"), count, f"parallelism {count}", "", metadata=meta
            )
        elif kind == "Pod" and group == "":
            yield PodTemplate(obj, "", spec, 1, "1 pod", "", metadata=mapping_at(obj, "metadata"))
        elif group == "ray.io" and kind in ("RayCluster", "RayService", "RayJob"):
            yield from _ray_templates(obj, ray_cluster_spec(obj))
        elif group == "gateway.envoyproxy.io" and kind == "EnvoyProxy":
            yield from _envoy_templates(obj, objects)
        elif group == "leaderworkerset.x-k8s.io" and kind == "LeaderWorkerSet":
            lwt = mapping_at(spec, "leaderWorkerTemplate")
            # Groups at the maximum scale: a ScaledObject or HPA on the LeaderWorkerSet (its scale subresource
            # counts groups), else spec.replicas.
            groups, source, fix = _max_replicas(obj, objects)
            size = as_int(lwt.get("size"), 1)
            worker = mapping_at(lwt, "workerTemplate", "spec")
            worker_meta = mapping_at(lwt, "workerTemplate", "metadata")
            if mapping_at(lwt, "leaderTemplate"):
                leader = mapping_at(lwt, "leaderTemplate", "spec")
                leader_meta = mapping_at(lwt, "leaderTemplate", "metadata")
                yield PodTemplate(obj, "leader", leader, groups, source, fix, metadata=leader_meta)
                yield PodTemplate(
                    obj,
                    "worker",
                    worker,
                    groups * (size - 1),
                    f"{source} x (size {size} - 1)",
                    fix,
                    max(size - 1, 1),
                    worker_meta,
                )
            else:
                yield PodTemplate(obj, "", worker, groups * size, f"{source} x size {size}", fix, size, worker_meta)


# The containers Envoy Gateway and the AI Gateway add to every Envoy pod beside Envoy. Envoy Gateway v1.9.0's
# shutdown manager is a regular container with fixed requests that no EnvoyProxy field sets (envoyproxy/gateway v1.9.0
# internal/infrastructure/kubernetes/proxy/resource.go expectedProxyContainers: Resources
# DefaultShutdownManagerContainerResourceRequirements(); api/v1alpha1/shared_types.go: 10m cpu, 32Mi memory).
SHUTDOWN_MANAGER: Mapping[str, Any] = {
    "name": "shutdown-manager",
    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
}
# envoyproxy/ai-gateway v1.1.0 internal/controller/gateway_mutator.go (extProcContainerName, the annotation
# GatewayConfigAnnotationKey names the Gateway's GatewayConfig in its namespace).
EXTPROC_CONTAINER = "ai-gateway-extproc"
GATEWAY_CONFIG_ANNOTATION = "aigateway.envoyproxy.io/gateway-config"
_AI_GATEWAY = "aigateway.envoyproxy.io"
_GATEWAY_API = "gateway.networking.k8s.io"


def _names_envoy_proxy(ref: Mapping[str, Any], name: str) -> bool:
    return (ref.get("group"), ref.get("kind"), ref.get("name")) == ("gateway.envoyproxy.io", "EnvoyProxy", name)


def _gateways(proxy: Mapping[str, Any], objects: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The Gateways whose Envoy pods this EnvoyProxy shapes: its own `infrastructure.parametersRef`, else its
    GatewayClass's `parametersRef` (which names the EnvoyProxy's namespace)."""
    _, ns, name = _meta(proxy)
    classes = {
        _meta(o)[2]
        for o in objects
        if group_kind(o) == (_GATEWAY_API, "GatewayClass")
        and _names_envoy_proxy(mapping_at(o, "spec", "parametersRef"), name)
        and value_at(o, "spec", "parametersRef", "namespace") == ns
    }
    found = []
    for gateway in objects:
        if group_kind(gateway) != (_GATEWAY_API, "Gateway"):
            continue
        own = mapping_at(gateway, "spec", "infrastructure", "parametersRef")
        if own:
            if _meta(gateway)[1] == ns and _names_envoy_proxy(own, name):
                found.append(gateway)
        elif value_at(gateway, "spec", "gatewayClassName") in classes:
            found.append(gateway)
    return found


def _extproc(gateway: Mapping[str, Any], objects: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The AI Gateway's external processor in the Gateway's Envoy pods, or None when it adds none.

    Its mutating webhook adds it only while an AIGatewayRoute or MCPRoute names the Gateway as a parent (name, and
    namespace defaulting to the route's); from Kubernetes 1.33 as a native sidecar (an init container with
    restartPolicy Always), before as a regular container: either way its requests add to Envoy's. Its resources are
    the Gateway's GatewayConfig's `extProc.kubernetes.resources`, none without one (envoyproxy/ai-gateway v1.1.0
    internal/controller/gateway_mutator.go mutatePod, parentRefsMatchGateway, fetchGatewayConfig;
    internal/controller/extproc_builder.go buildExtProcContainer; internal/controller/controller.go
    isKubernetes133OrLater)."""
    _, ns, name = _meta(gateway)
    routed = any(
        group_kind(route) in ((_AI_GATEWAY, "AIGatewayRoute"), (_AI_GATEWAY, "MCPRoute"))
        and any(
            ref.get("name") == name and (ref.get("namespace") or _meta(route)[1]) == ns
            for ref in mappings_at(route, "spec", "parentRefs")
        )
        for route in objects
    )
    if not routed:
        return None
    config = value_at(gateway, "metadata", "annotations", GATEWAY_CONFIG_ANNOTATION)
    resources = next(
        (
            mapping_at(o, "spec", "extProc", "kubernetes", "resources")
            for o in objects
            if group_kind(o) == (_AI_GATEWAY, "GatewayConfig") and _meta(o)[1:] == (ns, config)
        ),
        {},
    )
    return {"name": EXTPROC_CONTAINER, "restartPolicy": "Always", "resources": resources}


def _envoy_templates(proxy: Mapping[str, Any], objects: Sequence[Mapping[str, Any]]) -> Iterator[PodTemplate]:
    """The Envoy pods Envoy Gateway makes of an EnvoyProxy, one Deployment per Gateway that uses it: its
    `envoyDeployment.pod` placement, its init containers, the Envoy container's resources (envoyproxy/gateway v1.9.0
    api/v1alpha1/shared_types.go KubernetesDeploymentSpec; one replica when unset, DefaultDeploymentReplicas in the
    same file), the shutdown manager, and the AI Gateway's external processor when it adds one (`_extproc`)."""
    deployment = mapping_at(proxy, "spec", "provider", "kubernetes", "envoyDeployment")
    if not deployment:
        return
    pod = mapping_at(deployment, "pod")
    placement = {key: pod[key] for key in ("nodeSelector", "tolerations", "affinity") if key in pod}
    envoy = {"name": "envoy", "resources": mapping_at(deployment, "container", "resources")}
    count = as_int(deployment.get("replicas"), 1)
    gateways = _gateways(proxy, objects)
    # Without a Gateway in the objects, one template of what every Envoy pod of it has.
    targets: list[Mapping[str, Any] | None] = [*gateways] or [None]
    for gateway in targets:
        extproc = _extproc(gateway, objects) if gateway is not None else None
        init = [*mappings_at(deployment, "initContainers"), *([extproc] if extproc else [])]
        spec = {**placement, "containers": [envoy, SHUTDOWN_MANAGER], **({"initContainers": init} if init else {})}
        part = f"envoy of Gateway {_meta(gateway)[2]}" if gateway is not None and len(gateways) > 1 else "envoy"
        yield PodTemplate(proxy, part, spec, count, f"replicas {count}", "")


def part_prefix(template: PodTemplate) -> str:
    """`<part>: ` for messages about one part of a workload."""
    return f"{template.part}: " if template.part else ""
