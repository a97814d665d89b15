"""Synth-time checks over Kubernetes objects: will the pods schedule, fit the GPU limits, drain within a Spot notice,
pass their namespace's Pod Security Standard, and does every PromQL string use current vLLM metrics in a shape KEDA
can read?

Pure Python over plain object dicts (no aws_cdk, no cdk8s), so a GitOps user runs the same checks on YAML:

    objects = [o for p in paths for o in yaml.safe_load_all(open(p)) if o]
    for finding in check_objects(objects, instance_resources=catalog_instance_resources):
        print(finding)

`llm_eks.infra.checks.LlmEksChecks` runs them on every Kubernetes manifest of a CDK app at `cdk synth`.

Rules (each finding is one line: the object, the problem, and the fix), each described in its module:
SCHEDULING (scheduling), GPU_LIMIT (limits), DRAIN (drain), PROMQL (promql_shape), POD_SECURITY (pod_security).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_eks.manifests.checks.capacity import StaticNodeGroup
from llm_eks.manifests.checks.drain import DEFAULT_GRACE_SECONDS, check_drain
from llm_eks.manifests.checks.findings import DRAIN, GPU_LIMIT, POD_SECURITY, PROMQL, RULES, SCHEDULING, Finding
from llm_eks.manifests.checks.instances import (
    ACCELERATOR_RESOURCES,
    INSTANCE_TYPE_LABEL,
    InstanceLookup,
    InstanceResources,
    catalog_instance_resources,
)
from llm_eks.manifests.checks.limits import check_gpu_limits, placeholder
from llm_eks.manifests.checks.objects import KEDA_DEFAULT_MAX_REPLICAS, group_kind, object_ref, pod_templates
from llm_eks.manifests.checks.pod_security import Violation, check_pod_security, namespace_levels, violations
from llm_eks.manifests.checks.promql_shape import check_promql_objects, promql_shape_problem
from llm_eks.manifests.checks.requirements import WELL_KNOWN_LABELS
from llm_eks.manifests.checks.scheduling import Scheduler, check_scheduling
from llm_eks.manifests.pods import MAX_GRACE_SECONDS
from llm_eks.manifests.promql_parse import PromQLError
from llm_eks.manifests.quantities import quantity

__all__ = [
    "ACCELERATOR_RESOURCES",
    "DEFAULT_GRACE_SECONDS",
    "DRAIN",
    "GPU_LIMIT",
    "INSTANCE_TYPE_LABEL",
    "KEDA_DEFAULT_MAX_REPLICAS",
    "MAX_GRACE_SECONDS",
    "POD_SECURITY",
    "PROMQL",
    "RULES",
    "SCHEDULING",
    "WELL_KNOWN_LABELS",
    "Finding",
    "InstanceLookup",
    "InstanceResources",
    "PromQLError",
    "StaticNodeGroup",
    "Violation",
    "catalog_instance_resources",
    "check_objects",
    "namespace_levels",
    "object_ref",
    "promql_shape_problem",
    "quantity",
    "violations",
]


def check_objects(
    objects: Sequence[Mapping[str, Any]],
    *,
    instance_resources: InstanceLookup | None = None,
    static_nodes: Sequence[StaticNodeGroup] = (),
) -> list[Finding]:
    """Every finding of every rule (see the module docstring), in rule order then object order.

    `instance_resources` sizes instance types (e.g. `catalog_instance_resources`); None skips sizing. `static_nodes`
    are node groups outside Karpenter that pods may also land on.
    """
    objects = [o for o in objects if isinstance(o, Mapping)]
    every = list(pod_templates(objects, daemonsets=True))
    templates = [t for t in every if group_kind(t.obj) != ("apps", "DaemonSet")]
    scheduler = Scheduler(objects, instance_resources, static_nodes)
    return [
        *check_scheduling(templates, scheduler),
        *check_gpu_limits([t for t in templates if not placeholder(t, objects)], scheduler),
        *check_drain(templates),
        *check_promql_objects(objects),
        *check_pod_security(every, objects),
    ]
