"""The environment's inference gateway from its config, workloads and plans: one route per workload, naming every
`model` it answers (the served model name, then each LoRA adapter), with its picker's flow control from the plan;
the tenants (declared, or one per workload with that workload's own key) and their JWT issuers. On EKS Auto Mode the
Envoy pods and the pickers run on its system pool and the NLB is Auto Mode's (`eks.amazonaws.com/nlb`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from llm_eks.config import EnvironmentConfig, ServedWorkload
from llm_eks.config.tenant_checks import routed, tenant_key_secret, tenant_models
from llm_eks.config.tenants import EKS_CLUSTER_ISSUER, TenantConfig
from llm_eks.images.lock import ImageLock
from llm_eks.infra.workloads.props import workload_key_secret
from llm_eks.infra.workloads.types import VllmWorkload, Workload
from llm_eks.manifests.gateway import (
    AUTO_MODE_NLB_CLASS,
    CLUSTER_ISSUER,
    ENVOY_PROXY_IMAGE,
    EPP_IMAGE,
    FlowControl,
    GatewayProps,
    Issuer,
    ModelRoute,
    NextVersion,
    PoolBackend,
    PrecisePrefix,
    ServiceBackend,
    Tenant,
    TenantLimits,
    hold_for,
)
from llm_eks.manifests.labels import POOL_LABEL, serving_selector
from llm_eks.manifests.node_pools.auto_mode import SYSTEM_POOL_SELECTOR, SYSTEM_POOL_TOLERATIONS
from llm_eks.manifests.ray_monitoring import pod_selector as ray_pod_selector
from llm_eks.manifests.vllm import PORT, service_url
from llm_eks.manifests.vllm.pod import LWS_WORKER_INDEX_LABEL
from llm_eks.planner import Plan
from llm_eks.planner.compute_mode import AUTO_MODE


def flow_control(s: ServedWorkload, plan: Plan) -> FlowControl:
    """The picker's hold and capacities from the plan: the hold covers detection and a cold start on a new node, the
    route's timeout a hold plus a whole generation at the SLO; each band queues what the pool at its largest serves
    within the TTFT target."""
    w = s.config
    hold = hold_for(plan.cold_start.scale_out_s, w.slo.ttft_p99_ms / 1000, w.slo.itl_p99_ms / 1000, w.max_model_len)
    per_replica = max(1, plan.max_num_seqs)
    # Requests the largest pool finishes within one TTFT target, at its planned concurrency and latency.
    turnover = plan.ttft_estimate_ms / 1000 + w.typical_output_tokens * plan.itl_estimate_ms / 1000
    band = per_replica * w.replicas.max * max(1, math.ceil(w.slo.ttft_p99_ms / 1000 / max(turnover, 1e-3)))
    return FlowControl(
        hold_seconds=hold.hold,
        retry_after_seconds=hold.retry_after,
        request_timeout_seconds=hold.request_timeout,
        max_concurrency=per_replica,
        band_capacity=min(max(band, per_replica), 5000),
    )


def model_route(s: ServedWorkload, workload: Workload, plan: Plan, lock: ImageLock) -> ModelRoute:
    """What the gateway needs of one workload: where its pods are and every name they answer."""
    if isinstance(workload, VllmWorkload):
        v = workload.vllm
        # Every serving pod of the workload, its on-demand floor's too.
        selector = serving_selector(v.name)
        if v.nodes_per_replica > 1:
            # A LeaderWorkerSet group serves from its leader only; the workers are headless.
            selector[LWS_WORKER_INDEX_LABEL] = "0"
        adapters = tuple(name for name, _ in v.engine.lora_modules)
        return ModelRoute(
            name=v.name,
            namespace=v.namespace,
            model_names=(v.served_model_name, *adapters),
            backend=PoolBackend(selector=selector, port=PORT),
            flow=flow_control(s, plan),
            picker_image=lock.pin(EPP_IMAGE),
            pd_non_cached_tokens=None if v.disaggregation is None else v.disaggregation.non_cached_tokens,
            # The pods publish KV-cache events (vllm_props decided): the picker scores on them, and renders prompts
            # on the workload's Service.
            precise_prefix=(
                None
                if v.engine.kv_events_config is None
                else PrecisePrefix(model_name=v.served_model_name, render_url=service_url(v))
            ),
        )
    r = workload.ray
    w = s.config
    return ModelRoute(
        name=r.name,
        namespace=r.namespace,
        model_names=(r.model_id,),
        backend=ServiceBackend(service=r.serve_service_name, selector=ray_pod_selector(r.name)),
        request_timeout_seconds=math.ceil(w.slo.ttft_p99_ms / 1000 + w.max_model_len * w.slo.itl_p99_ms / 1000),
    )


def gateway_props(
    config: EnvironmentConfig,
    workloads: Sequence[Workload],
    plans: Sequence[Plan],
    lock: ImageLock | None = None,
) -> GatewayProps | None:
    """The gateway of `config.gateway` over every workload (in `config.served` order, with their plans), its images
    pinned where `lock` holds them; None when the environment has none. A gateway that trusts the cluster's own tokens
    names CLUSTER_ISSUER until the charts are built (`GatewayProps.with_cluster_issuer`)."""
    g = config.gateway
    if g is None:
        return None
    lock = lock or ImageLock()
    nlb = g.expose == "nlb"
    routes = [model_route(s, w, plan, lock) for s, w, plan in zip(config.served, workloads, plans, strict=True)]
    routes = canary_pairs(config, workloads, routes)
    on_auto_mode = config.compute == AUTO_MODE
    if on_auto_mode:
        routes = [replace(r, **_system_pool()) for r in routes]
    declared = bool(g.tenants)
    names = {r.name: r.model_names for r in routes}
    if declared:
        tenants = tuple(_tenant(config, name, t) for name, t in g.tenants.items())
    else:
        served = zip(config.served, workloads, strict=True)
        tenants = tuple(_workload_tenant(config, s, names[w_name(w)]) for s, w in served if s.canary_of is None)
    return GatewayProps(
        routes=tuple(routes),
        tenants=tenants,
        issuers=_issuers(config, tenants),
        inbound_cidrs=g.inbound_cidrs,
        load_balancer_cidrs=config.vpc.load_balancer_subnet_cidrs() if nlb else (),
        expose=g.expose,
        max_request_bytes=g.max_request_bytes,
        certificate_arn=g.certificate_arn,
        allow_http=g.allow_http or not nlb,
        forward_api_key=not declared,
        envoy_image=lock.pin(ENVOY_PROXY_IMAGE),
        **(_system_pool() | {"load_balancer_class": AUTO_MODE_NLB_CLASS} if on_auto_mode else {}),
    )


def _system_pool() -> dict[str, Any]:
    """On EKS Auto Mode the Envoy pods and the pickers run where the controllers do: its built-in system pool
    (on-demand, apart from the GPU and Spot CPU capacity they route to), whose CriticalAddonsOnly taint they
    tolerate."""
    return {"node_selector": SYSTEM_POOL_SELECTOR, "tolerations": SYSTEM_POOL_TOLERATIONS}


def w_name(w: Workload) -> str:
    return w.vllm.name if isinstance(w, VllmWorkload) else w.ray.name


def _limits(t: TenantConfig) -> TenantLimits:
    lim = t.limits
    return TenantLimits(
        requests_per_second=lim.requests_per_second,
        input_tokens_per_minute=lim.input_tokens_per_minute,
        input_tokens_per_day=lim.input_tokens_per_day,
        output_tokens_per_minute=lim.output_tokens_per_minute,
        output_tokens_per_day=lim.output_tokens_per_day,
    )


def _tenant(config: EnvironmentConfig, name: str, t: TenantConfig) -> Tenant:
    """A declared tenant, its models expanded to the exact names (a workload stands for all it serves)."""
    models = tenant_models(config, t)
    if t.credential.api_key is not None:
        secret = t.credential.api_key.secret or tenant_key_secret(config, name)
        return Tenant(name, models, api_key_secret=secret, priority=t.priority, limits=_limits(t))
    jwt = t.credential.jwt
    assert jwt is not None
    return Tenant(
        name,
        models,
        jwt_issuer=jwt.issuer,
        jwt_principal=jwt.principal,
        priority=t.priority,
        limits=_limits(t),
    )


def _workload_tenant(config: EnvironmentConfig, s: ServedWorkload, models: tuple[str, ...]) -> Tenant:
    """Without declared tenants: one per workload, named after it (`default` for the one-model shorthand), whose
    credential is that workload's own key and whose models are exactly its names."""
    return Tenant(s.key or "default", models, api_key_secret=workload_key_secret(config, s))


def _issuers(config: EnvironmentConfig, tenants: Sequence[Tenant]) -> tuple[Issuer, ...]:
    g = config.gateway
    assert g is not None
    used = {t.jwt_issuer for t in tenants if t.jwt_issuer is not None}
    issuers = []
    if EKS_CLUSTER_ISSUER in used:
        issuers.append(Issuer(EKS_CLUSTER_ISSUER, CLUSTER_ISSUER, "", audiences=g.eks_cluster_issuer.audiences))
    for name, i in g.issuers.items():
        if name in used:
            issuers.append(Issuer(name, i.issuer, i.jwks_uri, audiences=i.audiences, principal_claim=i.principal_claim))
    return tuple(issuers)


def canary_pairs(
    config: EnvironmentConfig, workloads: Sequence[Workload], routes: Sequence[ModelRoute]
) -> list[ModelRoute]:
    """`routes` (in `config.served` order) with each next version tied to its current version: the current route's
    pool takes both versions' pods (selected by the pool label they share) and names the next version's object,
    whose scale sets its share; the next version has no route of its own."""
    paired = list(routes)
    index = {s.key: i for i, s in enumerate(config.served)}
    for i, s in enumerate(config.served):
        if s.canary_of is None:
            continue
        current = index[s.canary_of]
        nxt = workloads[i]
        assert isinstance(nxt, VllmWorkload)  # a canary is for engine vllm (config validation)
        kind = "LeaderWorkerSet" if nxt.vllm.nodes_per_replica > 1 else "Deployment"
        route = paired[current]
        assert isinstance(route.backend, PoolBackend)
        # Every pod that joins the current version's pool: its own, its floor's and the next version's.
        shared = {POOL_LABEL: route.name}
        if nxt.vllm.nodes_per_replica > 1:
            shared[LWS_WORKER_INDEX_LABEL] = "0"
        paired[current] = replace(
            route,
            backend=replace(route.backend, selector=shared),
            next_version=NextVersion(name=paired[i].name, kind=kind),
        )
        paired[i] = replace(paired[i], canary_of=(route.name, route.namespace), flow=None)
    return paired


__all__ = ["canary_pairs", "flow_control", "gateway_props", "model_route", "routed"]
