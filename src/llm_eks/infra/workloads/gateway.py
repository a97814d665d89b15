"""The environment's inference gateway from its config and workloads: one route per workload, naming every `model`
it answers (the served model name, then each LoRA adapter)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from llm_eks.config import EnvironmentConfig
from llm_eks.config.environment import EKS_CLUSTER_ISSUER
from llm_eks.images.lock import ImageLock
from llm_eks.infra.workloads.types import VllmWorkload, Workload
from llm_eks.manifests.gateway import (
    CLUSTER_ISSUER,
    EPP_IMAGE,
    IPP_IMAGE,
    GatewayAuth,
    GatewayProps,
    ModelRoute,
    NextVersion,
    PoolBackend,
    ServiceBackend,
)
from llm_eks.manifests.labels import serving_selector
from llm_eks.manifests.ray_monitoring import pod_selector
from llm_eks.manifests.vllm import PORT
from llm_eks.manifests.vllm.pod import LWS_WORKER_INDEX_LABEL


def model_route(workload: Workload, lock: ImageLock) -> ModelRoute:
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
            picker_image=lock.pin(EPP_IMAGE),
        )
    r = workload.ray
    return ModelRoute(
        name=r.name,
        namespace=r.namespace,
        model_names=(r.model_id,),
        backend=ServiceBackend(service=r.serve_service_name, selector=pod_selector(r.name)),
    )


def gateway_props(
    config: EnvironmentConfig, workloads: Sequence[Workload], lock: ImageLock | None = None
) -> GatewayProps | None:
    """The gateway of `config.gateway` over every workload, its images pinned where `lock` holds them; None when the
    environment has none. A gateway that trusts the cluster's own tokens names CLUSTER_ISSUER until the charts are
    built (`GatewayProps.with_cluster_issuer`)."""
    g = config.gateway
    if g is None:
        return None
    nlb = g.expose == "nlb"
    routes = [model_route(w, lock or ImageLock()) for w in workloads]
    return GatewayProps(
        routes=canary_pairs(config, routes),
        inbound_cidrs=g.inbound_cidrs,
        load_balancer_cidrs=config.vpc.load_balancer_subnet_cidrs() if nlb else (),
        expose=g.expose,
        auth=_auth(config),
        max_request_bytes=g.max_request_bytes,
        certificate_arn=g.certificate_arn,
        allow_http=g.allow_http or not nlb,
        router_image=(lock or ImageLock()).pin(IPP_IMAGE),
    )


def canary_pairs(config: EnvironmentConfig, routes: Sequence[ModelRoute]) -> tuple[ModelRoute, ...]:
    """`routes` (in `config.served` order) with each next version tied to its current version: the current route
    sends the canary's weight to the next version's pool, which has no HTTPRoute of its own."""
    paired = list(routes)
    index = {s.key: i for i, s in enumerate(config.served)}
    for i, s in enumerate(config.served):
        if s.canary_of is None:
            continue
        canary = config.workloads[s.canary_of].canary
        assert canary is not None
        current = index[s.canary_of]
        paired[current] = replace(
            paired[current],
            next_version=NextVersion(pool=paired[i].name, namespace=paired[i].namespace, weight=canary.weight),
        )
        paired[i] = replace(paired[i], canary_of=(paired[current].name, paired[current].namespace))
    return tuple(paired)


def _auth(config: EnvironmentConfig) -> GatewayAuth | None:
    """The gateway's JWT check (mode jwt); None where each backend checks its own key."""
    assert config.gateway is not None
    auth = config.gateway.auth
    if auth.mode != "jwt":
        return None
    if auth.issuer == EKS_CLUSTER_ISSUER:
        return GatewayAuth(issuer=CLUSTER_ISSUER, jwks_uri="", audiences=auth.audiences)
    assert auth.issuer is not None and auth.jwks_uri is not None
    return GatewayAuth(issuer=auth.issuer, jwks_uri=auth.jwks_uri, audiences=auth.audiences)
