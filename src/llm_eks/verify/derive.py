"""The `EnvironmentPlan` of an environment, from its config and capacity plans through the props the charts are built
from (`llm_eks.infra.workloads.build_workloads`) and the charts' own rendering functions: the vLLM arguments
(`container_args`), the Ray Serve LLMConfig (`llm_config`), the rules of the HTTPRoute the AI Gateway writes from a
workload's AIGatewayRoute (`generated_rules`). Nothing here restates a chart's arithmetic, so a chart change moves
what verify expects with it. `load_specs` renders the `--load` Jobs from the environment's own benchmark chart the
same way.

This is the one verify module that loads cdk8s (through infra.workloads: the props modules live in the chart
packages, whose `__init__` imports their charts); `llm_eks.verify` imports it only when a command runs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from llm_eks.catalog.accelerators import INSTANCE_TYPES
from llm_eks.config import EnvironmentConfig
from llm_eks.images.lock import ImageLock
from llm_eks.infra.workloads import RayServeWorkload, VllmWorkload, Workload, build_workloads
from llm_eks.manifests.autoscaling import AutoscalingProps, prefill_autoscaling
from llm_eks.manifests.benchmark import load_job, load_props
from llm_eks.manifests.gateway import GatewayProps
from llm_eks.manifests.gateway.props import MODEL_HEADER, ModelRoute, PoolBackend
from llm_eks.manifests.gateway.routes import generated_rules
from llm_eks.manifests.labels import serving_selector
from llm_eks.manifests.ray_serve import llm_config
from llm_eks.manifests.vllm import container_args
from llm_eks.manifests.vllm.disaggregated import ROLE_LABEL, prefill_name
from llm_eks.manifests.vllm.pod import Role
from llm_eks.manifests.vllm.props import VllmProps
from llm_eks.planner import Plan
from llm_eks.planner.at_load import ObservedLoad, estimate_at_load
from llm_eks.planner.drift import P99_MIN_SAMPLES
from llm_eks.verify.checks_load import LoadSpec
from llm_eks.verify.expected import EnvironmentPlan, PhasePlan, PoolPlan, RoutePlan, WorkloadPlan, prefill_role

# KubeRay 1.7.0 labels every Ray pod with its node type (ray-operator/controllers/ray/common/pod.go, labelPod; the
# template's own labels cannot override it): the GPU workers are "worker".
RAY_NODE_TYPE_LABEL = "ray.io/node-type"


def ttft_estimate_ms(plan: Plan) -> float | None:
    """The plan's time-to-first-token estimate, when the planner makes one (None: not planned)."""
    value = getattr(plan, "ttft_estimate_ms", None)
    return float(value) if isinstance(value, int | float) else None


def environment_plan(
    config: EnvironmentConfig, plans: Sequence[Plan], images: ImageLock | None = None
) -> EnvironmentPlan:
    """What `config`'s cluster should hold; `plans` in `config.served` order, `images` the app's lock file (so the
    images verify expects are pinned as deployed)."""
    workloads = build_workloads(config, plans, images=images)
    served = [_workload(config, w, plan) for w, plan in zip(workloads, plans, strict=True)]
    if workloads and workloads[0].gateway is not None:
        gateway = workloads[0].gateway
        served = [_with_route(s, gateway, route) for s, route in zip(served, gateway.routes, strict=True)]
    return EnvironmentPlan(
        config.name, _pools(workloads, plans, served), tuple(served), MappingProxyType(dict(config.accepted_risks))
    )


def _workload(config: EnvironmentConfig, w: Workload, plan: Plan) -> WorkloadPlan:
    served = next(s for s in config.served if s.key == w.key)
    slo = served.config.slo
    common: dict[str, Any] = {
        "key": w.key,
        "served_model_name": plan.served_model_name,
        "nodes_per_replica": plan.nodes_per_replica,
        "pool": w.gpu_pool.name,
        "instance_type": plan.instance_type,
        "accelerator_name": plan.accelerator_name,
        "accelerators_per_node": plan.instance.accelerators,
        "kv_cache_tokens": plan.kv_cache_tokens,
        "itl_estimate_ms": plan.itl_estimate_ms,
        "ttft_estimate_ms": ttft_estimate_ms(plan),
        "target_concurrency": plan.target_concurrency,
        "slo_ttft_p99_ms": slo.ttft_p99_ms,
        "slo_itl_p99_ms": slo.itl_p99_ms,
        "start_warm_s": plan.cold_start.total_s,
        "start_new_node_s": plan.cold_start.scale_out_s,
        "model": plan.model.id,
        "model_type": "moe" if plan.model.is_moe else "dense",
        "weight_format": plan.weight_format,
        "requested_weight_format": plan.request.weight_format,
        "kv_cache_dtype": plan.kv_cache_dtype,
        "tensor_parallel_size": plan.tensor_parallel_size,
        "pipeline_parallel_size": plan.pipeline_parallel_size,
    }
    if isinstance(w, RayServeWorkload):
        ray = w.ray
        return WorkloadPlan(
            name=ray.name,
            namespace=ray.namespace,
            engine="ray-serve",
            owner_kind="RayService",
            pod_selector=MappingProxyType({"app.kubernetes.io/instance": ray.name, RAY_NODE_TYPE_LABEL: "worker"}),
            image=ray.image,
            llm_config=MappingProxyType(llm_config(ray)),
            metrics_job=ray.name,
            # Ray Serve's autoscaler keeps at least one model replica (RayServeProps).
            replicas_min=ray.min_replicas,
            replicas_max=ray.max_replicas,
            **common,
        )
    assert isinstance(w, VllmWorkload)
    p = w.vllm
    roles: tuple[Role, ...] = ("server",) if p.nodes_per_replica == 1 else ("leader", "worker")
    return WorkloadPlan(
        name=p.name,
        namespace=p.namespace,
        engine="vllm",
        owner_kind="Deployment" if p.nodes_per_replica == 1 else "LeaderWorkerSet",
        # Both Deployments' pods: KEDA's and the on-demand floor's (a next version's own, never its current's).
        pod_selector=MappingProxyType(serving_selector(p.name)),
        image=p.image,
        args=MappingProxyType(_args(p, roles)),
        metrics_job=p.name,
        # KEDA's bounds (0 with scale_to_zero, or behind the gateway's held requests) above the on-demand floor; a
        # next version's replicas are its share of the pool, 0 at share 0.
        replicas_min=0 if w.canary_of is not None else p.floor_replicas + w.autoscaling.min_replicas,
        replicas_max=p.floor_replicas + w.autoscaling.max_replicas,
        floor_replicas=p.floor_replicas,
        phases=_phases(plan, p.name, prefill_autoscaling(w.autoscaling)) if p.disaggregation is not None else None,
        **common,
    )


def _args(p: VllmProps, roles: tuple[Role, ...]) -> dict[str, tuple[str, ...]]:
    """The `vllm serve` arguments by pod role; a disaggregated workload's own pods decode (as its chart renders them:
    the decode port and KV-transfer config) and its prefill pool's pods prefill (their roles: prefill_role)."""
    if p.disaggregation is None:
        return {role: tuple(container_args(p, role)) for role in roles}
    decode, prefill = replace(p, pd_role="decode"), replace(p, pd_role="prefill")
    return {
        **{role: tuple(container_args(decode, role)) for role in roles},
        **{prefill_role(role): tuple(container_args(prefill, role)) for role in roles},
    }


def _phases(plan: Plan, name: str, autoscaling: AutoscalingProps) -> PhasePlan:
    """The prefill pool's scrape job and the P/D decision's per-phase estimates of a workload served disaggregated
    (the same figures its drift rules hold each pool to: infra.workloads.props)."""
    d = plan.disaggregation
    assert d is not None and d.disaggregated is not None and d.phase is not None  # it rendered a prefill pool
    return PhasePlan(
        prefill_job=prefill_name(name),
        prefill_ms=d.phase.prefill_ms,
        decode_itl_ms=d.disaggregated.tpot_ms,
        transfer_ms=d.phase.transfer_ms,
        prefill_pod_labels=MappingProxyType({ROLE_LABEL: "prefill"}),
        prefill_replicas_min=autoscaling.min_replicas,
        prefill_replicas_max=autoscaling.max_replicas,
    )


def _with_route(w: WorkloadPlan, gateway: GatewayProps, route: ModelRoute) -> WorkloadPlan:
    """The route that sends to `w`: its own, or for a next version its current version's (whose pool holds both
    versions' pods)."""
    current = route
    if route.canary_of is not None:
        current = next(r for r in gateway.routes if (r.name, r.namespace) == route.canary_of)
    backend = current.backend
    pool = isinstance(backend, PoolBackend)
    plan = RoutePlan(
        name=current.name,
        namespace=current.namespace,
        gateway=gateway.name,
        gateway_namespace=gateway.namespace,
        model_names=current.model_names,
        rules=tuple(generated_rules(gateway, current)),
        backend_kind="InferencePool" if pool else "Backend",
        backend_name=current.name,
        pool_selector=MappingProxyType(dict(backend.selector)) if pool else None,
        model_header=MODEL_HEADER,
        pool_namespace=current.namespace,
    )
    return replace(w, route=plan)


def _pools(
    workloads: Sequence[Workload], plans: Sequence[Plan], served: Sequence[WorkloadPlan]
) -> tuple[PoolPlan, ...]:
    pools: dict[str, PoolPlan] = {}
    for w, plan, s in zip(workloads, plans, served, strict=True):
        # Merged: the environment's sizes and the sum of the limits; the floor's and a fallback family's too.
        for pool in w.pools:
            have = pools.get(pool.name)
            types = tuple(t for t in pool.instance_types if t == plan.instance_type) or pool.instance_types[:1]
            planned = (*have.planned_types, *types) if have else types
            pools[pool.name] = PoolPlan(
                name=pool.name,
                instance_types=pool.instance_types,
                planned_types=tuple(dict.fromkeys(planned)),
                resource=pool.resource,
                accelerator_limit=pool.accelerator_limit,
                accelerators=MappingProxyType({t: INSTANCE_TYPES[t].accelerators for t in pool.instance_types}),
                workloads=(*have.workloads, s.name) if have else (s.name,),
            )
    return tuple(pools.values())


# Requests per load run: enough for a p99 (P99_MIN_SAMPLES), and each sequence slot used ten times over.
LOAD_REQUESTS_PER_SEQUENCE = 10


def load_tenant(config: EnvironmentConfig, w: VllmWorkload) -> None:
    """TENANT HOOK. The load Job calls the workload's own Service with the server's API key, not the gateway, so no
    tenant's rate or token limit applies to it today. Where the gateway authenticates tenants and the load goes
    through it, the Job must call as a tenant of its own whose limits cannot throttle it (verify would otherwise
    measure 429s and call them drift): return that tenant here and have `load_specs` give the Job its credential."""
    return None


def load_specs(
    config: EnvironmentConfig,
    plans: Sequence[Plan],
    ready: Mapping[str, int],
    images: ImageLock | None = None,
    only: Collection[str] | None = None,
) -> list[LoadSpec]:
    """One load run per vLLM workload with a Ready replica (`ready`: Ready replicas by object name; `only`: these
    object names): its benchmark Job sending the plan's typical request at the rate that keeps target_concurrency
    of them in flight per Ready replica (Little's law over the plan's request time; Poisson arrivals, as production
    traffic arrives, capped at that concurrency), and the planner's estimate at that load."""
    specs = []
    for w, plan in zip(build_workloads(config, plans, images=images), plans, strict=True):
        if not isinstance(w, VllmWorkload) or (only is not None and w.vllm.name not in only):
            continue
        replicas = ready.get(w.vllm.name, 0)
        if replicas < 1:
            continue
        load_tenant(config, w)
        concurrency = plan.target_concurrency * replicas
        r = plan.request
        # A request takes its first token and then each output token's time: at `concurrency` in flight, requests
        # arrive `concurrency` per request time.
        request_s = (plan.ttft_estimate_ms + r.typical_output_tokens * plan.tpot_estimate_ms) / 1000
        bench = load_props(
            w.benchmark,
            input_len=r.typical_input_tokens,
            output_len=r.typical_output_tokens,
            num_prompts=max(P99_MIN_SAMPLES, LOAD_REQUESTS_PER_SEQUENCE * concurrency),
            request_rate=float(f"{concurrency / request_s:.3g}"),
            concurrency=concurrency,
        )
        job = load_job(w.vllm, bench)
        name = job["metadata"]["name"]
        specs.append(
            LoadSpec(
                workload=w.vllm.name,
                namespace=w.vllm.namespace,
                job_name=name,
                job=job,
                replicas=replicas,
                concurrency=concurrency,
                input_len=bench.input_len,
                output_len=bench.output_len,
                num_prompts=bench.num_prompts,
                estimate=estimate_at_load(
                    plan, ObservedLoad(plan.target_concurrency, bench.input_len, bench.output_len)
                ),
                slo_ttft_p99_ms=w.benchmark.slo_ttft_p99_ms or 0.0,
                slo_itl_p99_ms=w.benchmark.slo_itl_p99_ms or 0.0,
            )
        )
    return specs
