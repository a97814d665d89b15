"""POD_SECURITY: every pod template (Deployment, StatefulSet, ReplicaSet, DaemonSet, Job, CronJob, Pod,
RayCluster/RayService/RayJob head and worker groups, LeaderWorkerSet leader and workers) must meet the Pod Security
Standard its namespace enforces, or the API server rejects its pods: a Deployment applies, then never gets a pod.

The level is the namespace's `pod-security.kubernetes.io/enforce` label, read from the Namespace objects checked
with the pods (llm-eks applies every namespace it creates as such an object, with its level: the workload and
gateway namespaces and most add-on namespaces enforce `restricted`; `monitoring` and `nvidia-gpu` run node agents
and enforce `privileged`, with the reason on the Namespace). A namespace without the label, or not among the
objects (kube-system, a namespace made by hand or by Helm), is not checked: Pod Security Admission's default level
is `privileged` unless the cluster's AdmissionConfiguration sets another, and EKS takes no AdmissionConfiguration
(aws/containers-roadmap#1822), so Pod Security is set per namespace only. A label value that is not a level is read
as `restricted`, as Pod Security Admission does (api.ParseLevel fails closed).

The rules themselves, and the upstream source they follow, are in pod_security_rules.py. KubeRay adds containers to
the pods it builds (ray-project/kuberay v1.7.0 ray-operator/controllers/ray/common/pod.go): the in-tree autoscaler
sidecar `autoscaler` in the head, with autoscalerOptions.securityContext as its securityContext, is judged with the
head; the workers' `wait-gcs-ready` init container copies the Ray container's securityContext, so it passes or fails
with it and is not listed again. An `enforce-version` label is not read: a namespace is judged by the rules of
Kubernetes 1.35. EnvoyProxy pods are built by Envoy Gateway from its own defaults and are not judged.

One finding per rule a template breaks, naming the pod or the containers, as Pod Security Admission's message does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from llm_eks.manifests.checks.findings import POD_SECURITY, Finding
from llm_eks.manifests.checks.objects import (
    PodTemplate,
    group_kind,
    mapping_at,
    mappings_at,
    object_ref,
    part_prefix,
    ray_cluster_spec,
    value_at,
)
from llm_eks.manifests.checks.pod_security_rules import ENFORCE_LABEL, LEVELS, PRIVILEGED, RAY_AUTOSCALER, RESTRICTED
from llm_eks.manifests.checks.pod_security_rules import Violation as Violation  # re-exported
from llm_eks.manifests.checks.pod_security_rules import violations as violations  # re-exported


def namespace_levels(objects: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The Pod Security level each Namespace among the objects enforces (privileged when it has no label; a value
    that is not a level reads as restricted, as Pod Security Admission fails closed)."""
    levels = {}
    for obj in objects:
        if group_kind(obj) != ("", "Namespace"):
            continue
        value = mapping_at(obj, "metadata", "labels").get(ENFORCE_LABEL)
        name = str(value_at(obj, "metadata", "name") or "")
        levels[name] = PRIVILEGED if value is None else value if value in LEVELS else RESTRICTED
    return levels


def _with_injected(template: PodTemplate) -> Mapping[str, Any]:
    """The pod spec as the operator that builds the pods extends it: KubeRay's autoscaler sidecar in a Ray head."""
    cluster = ray_cluster_spec(template.obj)
    if template.part != "head" or cluster.get("enableInTreeAutoscaling") is not True:
        return template.spec
    sidecar = {"name": RAY_AUTOSCALER, "securityContext": mapping_at(cluster, "autoscalerOptions", "securityContext")}
    return {**template.spec, "containers": [*mappings_at(template.spec, "containers"), sidecar]}


def check_pod_security(templates: Sequence[PodTemplate], objects: Sequence[Mapping[str, Any]]) -> Iterator[Finding]:
    """POD_SECURITY findings: pod templates (DaemonSets' included) that break their namespace's enforced level."""
    levels = namespace_levels(objects)
    for template in templates:
        if group_kind(template.obj)[0] == "gateway.envoyproxy.io":
            continue
        namespace = str(value_at(template.obj, "metadata", "namespace") or "")
        level = levels.get(namespace, PRIVILEGED)
        for v in violations(_with_injected(template), level, template.metadata):
            yield Finding(
                POD_SECURITY,
                object_ref(template.obj),
                f"{part_prefix(template)}{v.problem}, which Pod Security {level} (enforced on namespace {namespace}) "
                "forbids; the API server would reject its pods",
                v.fix,
            )
