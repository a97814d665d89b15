"""The capacity plan of each workload of an environment. Pure Python (no aws_cdk, cdk8s or jsii): `llm-eks plan`,
`llm-eks images lock` and `llm-eks manifests` import it as `cdk synth` does."""

from __future__ import annotations

from dataclasses import replace

from llm_eks.catalog.accelerators import INSTANCE_TYPES
from llm_eks.config import EnvironmentConfig, ServedWorkload
from llm_eks.error_codes import E135
from llm_eks.errors import ConfigError, fail
from llm_eks.planner import Plan, plan
from llm_eks.planner.compute_mode import KARPENTER
from llm_eks.planner.engine import vllm_flags
from llm_eks.planner.fixes import NoFitError


def plan_workloads(config: EnvironmentConfig) -> tuple[Plan, ...]:
    """The capacity plan of each workload, in `config.served` order; planner errors carry the workload's path."""
    plans = []
    for s in config.served:
        try:
            plans.append(plan(s.config.plan_request(config.compute, config.gateway is not None)))
        except ConfigError as err:
            # The changes that would fit, named as cdk.json sets them for this workload.
            message = err.render(s.setting) if isinstance(err, NoFitError) else err.message
            if message.startswith("workload."):
                message = f"{s.path}.{message.removeprefix('workload.')}"
            raise ConfigError(err.code, message) from None
    return tuple(plans)


def _flags(args: list[str]) -> dict[str, str]:
    """`--flag value` pairs (a switch without a value maps to "")."""
    out: dict[str, str] = {}
    for i, token in enumerate(args):
        if token.startswith("--"):
            value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else ""
            out[token] = value
    return out


def fallback_plan(s: ServedWorkload, primary: Plan, compute: str = KARPENTER) -> Plan | None:
    """The plan of workload `s` on its `fallback_accelerator` (another GPU family Karpenter may launch when the
    planned one has no capacity), sized with the primary plan's shape on the environment's `compute`; None without
    one. One pod template serves
    both families, so a one-line ConfigError refuses a type of the same family or vendor, one the planner cannot
    serve the replica on, one that needs other engine arguments, or one whose nodes cannot hold the pod as sized
    for the planned type."""
    w = s.config
    if w.fallback_accelerator is None:
        return None
    path, value = f"{s.path}.fallback_accelerator", w.fallback_accelerator
    other = INSTANCE_TYPES[value]
    planned = primary.instance
    if other.family == planned.family:
        raise fail(E135, path, value, f"must be of another family than the planned {planned.instance_type}")
    if other.accelerator_vendor != planned.accelerator_vendor:
        raise fail(
            E135, path, value, f"must carry {planned.accelerator_vendor} accelerators like {planned.instance_type}"
        )
    request = replace(
        w.plan_request(compute),
        # The same environment: the same gateway, so the same prefix-cache scorer (one pod template).
        picker=primary.request.picker,
        accelerator=value,
        tensor_parallel_size=primary.tensor_parallel_size,
        pipeline_parallel_size=primary.pipeline_parallel_size,
        data_parallel_size=primary.data_parallel_size,
        enable_expert_parallel=primary.expert_parallel,
        max_num_seqs=primary.max_num_seqs,
    )
    try:
        fallback = plan(request)
    except ConfigError as err:
        raise fail(E135, path, value, f"the planner cannot serve the same replica on it: {err.message}") from None
    ours, theirs = _flags(vllm_flags(primary.engine)), _flags(vllm_flags(fallback.engine))
    differ = [
        f"{flag} {theirs.get(flag, '(none)')} instead of {ours.get(flag, '(none)')}"
        for flag in {**ours, **theirs}
        if ours.get(flag) != theirs.get(flag)
    ]
    if primary.nodes_per_replica != fallback.nodes_per_replica:
        differ.append(f"{fallback.nodes_per_replica} node(s) per replica instead of {primary.nodes_per_replica}")
    if differ:
        raise fail(
            E135,
            path,
            value,
            f"a replica there needs other engine arguments ({'; '.join(differ)}) than on {planned.instance_type}, "
            "and one pod template serves both; choose a type the same arguments fit",
        )
    pod, room = primary.pod_resources, fallback.pod_resources
    if pod.cpu_millicores > room.cpu_millicores or pod.memory_mib > room.memory_mib:
        raise fail(
            E135,
            path,
            value,
            f"a pod sized for {planned.instance_type} ({pod.cpu}, {pod.memory}) does not fit beside the others on a "
            f"{value} node ({room.cpu}, {room.memory} per replica); choose a larger size",
        )
    return fallback
