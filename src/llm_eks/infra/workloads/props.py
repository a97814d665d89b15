"""Chart props for one workload from its config and plan: names, the vLLM and Ray Serve props, autoscaling,
monitoring, benchmark and ingress. Every number a chart uses comes from here, so a chart never guesses a
tensor-parallel size or a memory request."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import replace
from typing import Any, Literal

from llm_eks.config import CapacityReservationConfig, EnvironmentConfig, ServedWorkload
from llm_eks.config.capacity import prefill_max_replicas, replica_price
from llm_eks.error_codes import E120, E138, E140
from llm_eks.errors import ConfigError, fail
from llm_eks.infra.workloads.pools import placement
from llm_eks.manifests.autoscaling import (
    MAX_STABILIZATION_SECONDS,
    AutoscalingProps,
    HeldRequests,
    ScaleToZeroSchedule,
    replica_kind,
    replica_names,
)
from llm_eks.manifests.benchmark import BenchmarkProps
from llm_eks.manifests.gateway.routes import TrafficSplit
from llm_eks.manifests.monitoring import MonitoringProps
from llm_eks.manifests.monitoring_targets import MonitoringTargets
from llm_eks.manifests.node_pools import CpuPoolSpec, GpuPoolSpec, workload_placement
from llm_eks.manifests.ray_monitoring import RayMonitoringProps
from llm_eks.manifests.ray_serve import STAGED_WEIGHTS_DIR, RayServeProps
from llm_eks.manifests.vllm import IngressProps, VllmProps
from llm_eks.manifests.vllm.disaggregated import Disaggregation, prefill_name
from llm_eks.manifests.vllm.neuron import NEURON_SCHEDULER_NAME
from llm_eks.manifests.vllm.pod import adapter_dir
from llm_eks.manifests.weights_staging import (
    ADAPTER_ALLOW_PATTERNS,
    DEFAULT_ALLOW_PATTERNS,
    REMOTE_CODE_PATTERNS,
    WeightsStagingProps,
    s3_model_uri,
    staging_key,
)
from llm_eks.manifests.weights_staging.props import NAME_MAX
from llm_eks.planner import Plan
from llm_eks.planner.pods import shm_mib
from llm_eks.versions import RAY_LLM_IMAGE, VLLM_IMAGE

GIB = 1024**3


def slug(model_id: str) -> str:
    """`meta-llama/Llama-3.1-8B-Instruct` -> `llama-3-1-8b-instruct` (object names reviewers can read)."""
    name = model_id.rsplit("/", 1)[-1].lower()
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-")[:40].rstrip("-")


def workload_name(s: ServedWorkload) -> str:
    """`vllm-<model>` for the one-model shorthand (names kept since the first release); `vllm-<key>` in
    `workloads`, where two workloads may serve the same model."""
    prefix = "vllm" if s.config.engine == "vllm" else "ray"
    return f"{prefix}-{slug(s.config.model) if s.key is None else s.key}"


def workload_namespace(s: ServedWorkload) -> str:
    """`inference` for the shorthand; `inference-<key>` in `workloads`: a namespace per workload, so removing one
    workload deletes its own namespace and nothing of another's. A next version lives in its current version's
    (its pods join that version's InferencePool: pool share)."""
    if s.canary_of is not None:
        return f"inference-{s.canary_of}"
    return "inference" if s.key is None else f"inference-{s.key}"


def shm_size(plan: Plan) -> str:
    """/dev/shm (planner/pods.shm_mib) plus a CPU KV tier, which lives there (vLLM checks its free space before
    creating it: planner/kv_offload.py)."""
    base = shm_mib(plan.gpus_per_pod)
    if plan.kv_offload_mib_per_pod:
        return f"{base + plan.kv_offload_mib_per_pod}Mi"
    return f"{base // 1024}Gi"


def cache_size(plan: Plan) -> str:
    """Model cache: the checkpoint on disk plus 20% and 10 GiB (tokenizer, compile cache, a partial download)."""
    return f"{math.ceil(plan.checkpoint_bytes * 1.2 / GIB) + 10}Gi"


def generated_api_key_secret(config: EnvironmentConfig, s: ServedWorkload | None = None) -> str:
    """The name of the API key secret the stack generates for workload `s` when the config names none: the
    shorthand's llm-eks/<env>/api-key, each workload of `workloads` its own llm-eks/<env>/<key>/api-key (a next
    version checks its current version's key: both answer the same callers)."""
    key = None if s is None else (s.canary_of or s.key)
    return f"llm-eks/{config.name}/api-key" if key is None else f"llm-eks/{config.name}/{key}/api-key"


def workload_key_secret(config: EnvironmentConfig, s: ServedWorkload) -> str:
    """The Secrets Manager secret holding workload `s`'s own key, whether its server checks it or not: the gateway's
    credential for the workload's own tenant when no tenants are declared."""
    owner = config.workloads[s.canary_of] if s.canary_of is not None else s.config
    return owner.api_key_secret or generated_api_key_secret(config, s)


def api_key_secret(config: EnvironmentConfig, s: ServedWorkload | None = None) -> str | None:
    """The Secrets Manager secret holding the vLLM endpoint's API key (of workload `s`, default the environment's
    only one); None when the key is off or the engine has no key check (Ray Serve LLM). Each workload's key is its
    own (no two workloads share a credential)."""
    s = s or only_workload(config)
    w = s.config
    if not w.api_key or w.engine != "vllm":
        return None
    return workload_key_secret(config, s)


def only_workload(config: EnvironmentConfig) -> ServedWorkload:
    """The environment's single workload; a ConfigError where `workloads` names several."""
    if len(config.served) != 1:
        raise fail(
            E120,
            f"environments.{config.name}.workloads",
            list(config.workloads),
            "this call takes an environment of one workload; for several use plan_workloads and build_workloads",
        )
    return config.served[0]


def vllm_props(
    config: EnvironmentConfig, s: ServedWorkload, plan: Plan, pool: GpuPoolSpec, region: str | None
) -> VllmProps:
    w = s.config
    if plan.nodes_per_replica > 1 and w.alb is not None:
        raise ConfigError(
            E140,
            f"{s.path}.alb: not allowed here; {plan.model.id} needs {plan.nodes_per_replica} "
            f"{plan.instance.instance_type} nodes per replica (a LeaderWorkerSet, whose workers never serve); reach it "
            "through its Service, or use engine 'ray-serve'",
        )
    selector, tolerations = placement(w, pool)
    # Config validation allows exactly these two.
    weights: Literal["hf", "s3"] = "s3" if w.weights == "s3" else "hf"
    # On Neuron: the engine path's container and compiled shape; pods of some but not all of a node's chips name the
    # Neuron scheduler extension's scheduler (contiguous chips).
    n = plan.neuron
    default_image = n.image if n is not None else VLLM_IMAGE
    return VllmProps(
        name=workload_name(s),
        namespace=workload_namespace(s),
        model=w.weights_s3_uri if weights == "s3" and w.weights_s3_uri else plan.checkpoint,
        served_model_name=plan.served_model_name,
        engine=replace(
            plan.engine,
            revision=hub_revision(s, plan),
            trust_remote_code=w.trust_remote_code,
        ),
        tensor_parallel_size=plan.tensor_parallel_size,
        pipeline_parallel_size=plan.pipeline_parallel_size,
        data_parallel_size=plan.data_parallel_size,
        expert_parallel=plan.expert_parallel,
        accelerators_per_pod=plan.gpus_per_pod,
        nodes_per_replica=plan.nodes_per_replica,
        accelerators_per_node=plan.instance.accelerators,
        accelerator_resource=pool.resource,
        efa_interfaces=pool.efa_interfaces,
        cpu=plan.pod_resources.cpu,
        memory=plan.pod_resources.memory,
        shm_size=shm_size(plan),
        cache_size=cache_size(plan),
        startup_seconds=math.ceil(plan.cold_start.startup_s),
        replicas=initial_replicas(config, s),
        node_selector=selector,
        tolerations=tuple(tolerations),
        weights=weights,
        hf_token_secret=w.hf_token_secret,
        api_key_secret=api_key_secret(config, s),
        aws_region=region,
        # Internal ALB only when the environment asks: in-cluster clients use the ClusterIP Service.
        ingress=ingress_props(config) if w.alb is not None else None,
        # A next version's pods join its current version's pool; its namespace is that version's.
        pool_instance=workload_name(current(config, s)) if s.canary_of is not None else None,
        create_namespace=s.canary_of is None,
        # workload.image (e.g. vLLM with the EFA userspace), else the pinned release (a Neuron plan's: its path's).
        image=w.image if w.image is not None else default_image,
        neuron=n.serving if n is not None else None,
        cores_per_accelerator=plan.instance.cores_per_accelerator if n is not None else 1,
        compile_seconds=n.compile_seconds if n is not None else 0,
        scheduler_name=NEURON_SCHEDULER_NAME if n is not None and n.scheduler_extension else None,
    )


def disaggregation_props(
    config: EnvironmentConfig, s: ServedWorkload, plan: Plan, name: str, lock: Any = None
) -> Disaggregation | None:
    """The prefill pool of a workload the plan disaggregates (its decision, or `disaggregation: on`): the planner's
    prefill replicas and each pool's NIXL --kv-transfer-config; None when it serves aggregated. A replica spanning
    nodes is served as a LeaderWorkerSet per pool (the chart); the planner never disaggregates a pipeline-parallel
    layout (planner/disaggregation.py)."""
    d = plan.disaggregation
    configs = None if d is None else d.kv_transfer_configs()
    if d is None or configs is None or d.disaggregated is None:
        return None
    if config.gateway is None:
        raise fail(
            E138,
            f"{s.path}.disaggregation",
            s.config.disaggregation,
            "the plan disaggregates prefill and decode, which the gateway's endpoint picker routes (its prefill and "
            "decode profiles): add a gateway to the environment, or use disaggregation off",
        )
    if s.canary_of is not None:
        raise fail(
            E138, f"{s.path}.disaggregation", s.config.disaggregation, "a next version is served aggregated; use off"
        )
    prefill = d.disaggregated.pools[0]
    body = Disaggregation(
        prefill_replicas=prefill.replicas,
        prefill_kv_transfer_config=configs["prefill"],
        decode_kv_transfer_config=configs["decode"],
        pool=name,
    )
    return body if lock is None else replace(body, sidecar_image=lock.pin(body.sidecar_image))


def checkpoint_revision(s: ServedWorkload, plan: Plan) -> str:
    """The Hub revision of the checkpoint the plan serves: the workload's `revision`, else the commit recorded for
    its model (when the plan serves that model's own repo, not the catalog's AWQ one), else "main"."""
    w = s.config
    if w.revision is not None:
        return w.revision
    if plan.checkpoint == w.model and w.recorded_commit is not None:
        return w.recorded_commit
    return "main"


def hub_revision(s: ServedWorkload, plan: Plan) -> str | None:
    """The revision for the engine's own Hub download (weights "hf"); None: the repo's default branch."""
    revision = checkpoint_revision(s, plan)
    return None if s.config.weights != "hf" or revision == "main" else revision


def weights_staging_props(
    s: ServedWorkload, plan: Plan, server: VllmProps | RayServeProps, cpu: CpuPoolSpec
) -> WeightsStagingProps:
    """The staging Job of a workload with weights "staged": the plan's checkpoint at its revision, copied once into
    the environment's bucket under models/<repo>/<revision>/, by a Job on the CPU pool running the workload's own
    (pinned) image as that image's user (vLLM's, or Ray's: the Ray LLM image ships huggingface_hub with vLLM and
    boto3 with Ray). The checkpoint's *.py files only for a workload that runs remote code."""
    selector, tolerations = workload_placement(cpu)
    revision = checkpoint_revision(s, plan)
    patterns = DEFAULT_ALLOW_PATTERNS + (REMOTE_CODE_PATTERNS if s.config.trust_remote_code else ())
    staging = WeightsStagingProps(
        name=f"stage-{slug(s.config.model) if s.key is None else s.key}",
        namespace=server.namespace,
        repo_id=plan.checkpoint,
        prefix=f"models/{plan.checkpoint}/{revision}/",
        revision=revision,
        hf_token_secret=s.config.hf_token_secret,
        aws_region=server.aws_region,
        image=server.image,
        node_selector=selector,
        tolerations=tuple(tolerations),
        allow_patterns=patterns,
    )
    if isinstance(server, RayServeProps) and server.run_as_user is not None:
        staging = replace(staging, run_as_user=server.run_as_user)
    return staging


def adapter_staging_props(staging: WeightsStagingProps, name: str, repo: str, revision: str) -> WeightsStagingProps:
    """The staging Job of one LoRA adapter: like the model's (same namespace, image, placement, token), under
    adapters/<repo>/<revision>/, adapter files only, with a ServiceAccount of its own."""
    job = f"lora-{staging.name.removeprefix('stage-')}-{slug(name)}"
    if len(job) > NAME_MAX or not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", job):
        digest = hashlib.sha256(f"{staging.name}/{name}".encode()).hexdigest()[:8]
        job = f"lora-{staging.name.removeprefix('stage-')[: NAME_MAX - 14].rstrip('-')}-{digest}"
    return replace(
        staging,
        name=job,
        repo_id=repo,
        revision=revision,
        prefix=f"adapters/{repo}/{revision}/",
        allow_patterns=ADAPTER_ALLOW_PATTERNS,
    )


def with_staged_weights(
    vllm: VllmProps,
    staging: WeightsStagingProps,
    compile_cache: str | None,
    adapters: tuple[tuple[str, WeightsStagingProps], ...] = (),
) -> VllmProps:
    """`vllm` streaming the staged prefix from the environment's bucket, once the staging key's marker is there, with
    its torch.compile cache under `compile_cache` (a bucket prefix; None: none) and each staged LoRA adapter fetched
    into the pod, where --lora-modules points."""
    lora = tuple((name, adapter_dir(name)) for name, _ in adapters) if adapters else vllm.engine.lora_modules
    return replace(
        vllm,
        weights="s3",
        model=s3_model_uri(staging.prefix),
        staged_weights=(staging.prefix, staging_key(staging)),
        staged_adapters=tuple((name, a.prefix, staging_key(a)) for name, a in adapters),
        compile_cache=compile_cache,
        # Nothing is fetched from the Hub at start: no revision flag, no token (the staging Jobs hold it).
        engine=replace(vllm.engine, revision=None, lora_modules=lora),
        hf_token_secret=None,
    )


def with_staged_ray_weights(ray: RayServeProps, staging: WeightsStagingProps) -> RayServeProps:
    """`ray` serving the staged prefix: every worker pod copies it, verified, to its node once the staging key's
    marker is there, and model_source names that local copy. No revision and no Hub token (the staging Job holds
    it)."""
    return replace(
        ray,
        model_source=STAGED_WEIGHTS_DIR,
        staged_weights=(staging.prefix, staging_key(staging)),
        engine=replace(ray.engine, revision=None),
        hf_token_secret=None,
    )


def ingress_props(config: EnvironmentConfig) -> IngressProps:
    """The ALB's HTTPS listener and inbound CIDRs from `workload.alb` (validated by config: only the one-model
    shorthand has one, with both fields)."""
    alb = config.workload.alb
    assert alb is not None
    return IngressProps(certificate_arn=alb.certificate_arn, inbound_cidrs=alb.inbound_cidrs)


def initial_replicas(config: EnvironmentConfig, s: ServedWorkload) -> int:
    """The replicas a deploy sets: at least one (KEDA owns the count afterwards), or for a next version the count that
    gives it `canary.weight` percent of the pool beside its current version's floor (`llm-eks canary` scales it
    afterwards; a deploy restores this)."""
    if s.canary_of is None:
        return max(s.config.replicas.min, 1)
    owner = config.workloads[s.canary_of]
    assert owner.canary is not None
    w = s.config
    return TrafficSplit.next_replicas(owner.canary.weight, max(owner.replicas.min, 1), w.replicas.min, w.replicas.max)


def current(config: EnvironmentConfig, s: ServedWorkload) -> ServedWorkload:
    """The workload a next version `s` is the canary of (`s` itself for any other workload)."""
    if s.canary_of is None:
        return s
    return next(c for c in config.served if c.key == s.canary_of)


def autoscaling_props(
    s: ServedWorkload, plan: Plan, floor: int = 0, behind_gateway: VllmProps | None = None
) -> AutoscalingProps:
    """KEDA's bounds and behaviour; above an on-demand floor of `floor` replicas, from 0 to replicas.max - floor.
    `behind_gateway`: its vLLM props when the gateway routes to it, whose endpoint picker then holds requests that
    wake and scale it (a next version is served through its current version's pool, whose picker's queue does not
    name it)."""
    w = s.config
    a = w.autoscaling
    schedule = None
    if a.scale_to_zero is not None:
        schedule = ScaleToZeroSchedule(
            timezone=a.scale_to_zero.timezone,
            start=a.scale_to_zero.start,
            end=a.scale_to_zero.end,
            replicas=max(w.replicas.min, 1),
        )
    return AutoscalingProps(
        max_replicas=w.replicas.max - floor,
        waiting_requests_per_replica=a.waiting_per_replica,
        kv_cache_usage_target=a.kv_cache_usage,
        min_replicas=0 if floor else w.replicas.min,
        floor_replicas=floor,
        scale_to_zero=schedule,
        held_requests=(
            HeldRequests(picker=f"{behind_gateway.name}-epp", pool=behind_gateway.name)
            if behind_gateway is not None and s.canary_of is None
            else None
        ),
        prefill_max_replicas=prefill_max_replicas(w, plan),
        # Scale-down must wait out a cold start, or a bounce costs a full model load (at most the HPA's hour); the
        # startup probe's allowance too, which on NxD Inference covers a compile when the restore found nothing.
        scale_down_stabilization_seconds=min(
            max(600, math.ceil(plan.cold_start.scale_out_s), math.ceil(plan.cold_start.startup_s)),
            MAX_STABILIZATION_SECONDS,
        ),
    )


def _monitoring_targets(
    s: ServedWorkload,
    plan: Plan,
    *,
    dcgm_service_monitor: bool = True,
    reserved: CapacityReservationConfig | None = None,
    gpu_resource: str = "nvidia.com/gpu",
) -> MonitoringTargets:
    """What both engines' monitoring charts take from the SLO, the autoscaling config and the plan; with
    `dcgm_service_monitor` this workload's chart carries the environment's one dcgm-exporter ServiceMonitor."""
    w = s.config
    return MonitoringTargets(
        ttft_p99_seconds=w.slo.ttft_p99_ms / 1000,
        itl_p99_seconds=w.slo.itl_p99_ms / 1000,
        # The plan prices a replica across all the nodes it spans (build_workload refuses a plan without a price).
        cost_per_hour_per_replica=replica_price(s, plan, reserved),
        # Alert when more requests wait than the whole fleet at max scale is meant to queue.
        queue_waiting_threshold=w.autoscaling.waiting_per_replica * w.replicas.max,
        dcgm=plan.instance.accelerator_vendor == "nvidia",
        dcgm_service_monitor=dcgm_service_monitor,
        cold_start_seconds=plan.cold_start.scale_out_s,
        gpu_resource=gpu_resource,
        neuron=plan.neuron is not None,
    )


def _planned(plan: Plan) -> dict[str, Any]:
    """The plan's figures the drift alerts hold production to (both engines' monitoring props take them)."""
    return {
        "planned_kv_cache_tokens": plan.kv_cache_tokens,
        "planned_itl_seconds": plan.itl_estimate_ms / 1000,
        "planned_ttft_seconds": plan.ttft_estimate_ms / 1000,
    }


def monitoring_props(
    s: ServedWorkload,
    plan: Plan,
    vllm: VllmProps,
    *,
    dcgm_service_monitor: bool = True,
    reserved: CapacityReservationConfig | None = None,
) -> MonitoringProps:
    return MonitoringProps(
        name=vllm.name,
        namespace=vllm.namespace,
        served_model_name=vllm.served_model_name,
        targets=_monitoring_targets(
            s,
            plan,
            dcgm_service_monitor=dcgm_service_monitor,
            reserved=reserved,
            gpu_resource=vllm.accelerator_resource,
        ),
        replica_kind=replica_kind(vllm),
        replica_names=replica_names(vllm),
        # VllmAutoscalingChart names its ScaledObject after the Deployment it scales.
        scaled_object=vllm.name,
        scales_to_zero=s.config.autoscaling.scale_to_zero is not None,
        **{**_planned(plan), **(_disaggregated_planned(plan, vllm.name) if vllm.disaggregation is not None else {})},
    )


def _disaggregated_planned(plan: Plan, name: str) -> dict[str, Any]:
    """A disaggregated workload's monitoring: the prefill pool's scrape job, the plan's decode step as the ITL the
    decode pool is held to, and its prefill time per request in place of a whole-path TTFT no histogram measures."""
    d = plan.disaggregation
    assert d is not None and d.disaggregated is not None and d.phase is not None  # disaggregation_props made it
    return {
        "prefill_job": prefill_name(name),
        "planned_itl_seconds": d.disaggregated.tpot_ms / 1000,
        "planned_ttft_seconds": None,
        "planned_prefill_seconds": d.phase.prefill_ms / 1000,
    }


def benchmark_props(s: ServedWorkload, cpu: CpuPoolSpec, plan: Plan | None = None) -> BenchmarkProps:
    """The benchmark Job's props; a Neuron server is measured with the pinned vLLM image's client (its own container
    carries an older vLLM whose `vllm bench serve` flags nothing here checks)."""
    w = s.config
    selector, tolerations = workload_placement(cpu)
    return BenchmarkProps(
        image=VLLM_IMAGE if plan is not None and plan.neuron is not None else None,
        name=f"bench-{slug(w.model) if s.key is None else s.key}",
        input_len=w.typical_input_tokens,
        output_len=w.typical_output_tokens,
        num_prompts=w.benchmark.num_prompts,
        request_rate=w.benchmark.request_rate,
        max_concurrency=w.target_concurrency * w.replicas.max,
        slo_ttft_p99_ms=w.slo.ttft_p99_ms,
        slo_itl_p99_ms=w.slo.itl_p99_ms,
        node_selector=selector,
        tolerations=tuple(tolerations),
    )


def ray_props(
    s: ServedWorkload, plan: Plan, pool: GpuPoolSpec, region: str | None, cpu: CpuPoolSpec | None = None
) -> RayServeProps:
    """With `cpu`, the head runs on that pool's on-demand capacity (the chart then marks it do-not-disrupt): off the
    system nodes, so losing one of those never restarts the Ray cluster, and their capacity is the controllers'."""
    w = s.config
    selector, tolerations = placement(w, pool)
    gpus = plan.tensor_parallel_size * plan.pipeline_parallel_size
    head: dict[str, Any] = {}
    if cpu is not None:
        head_selector, head_tolerations = workload_placement(cpu, capacity_type="on-demand")
        head = {"head_node_selector": head_selector, "head_tolerations": tuple(head_tolerations)}
    return RayServeProps(
        name=workload_name(s),
        namespace=workload_namespace(s),
        model_id=plan.served_model_name,
        model_source=w.weights_s3_uri if w.weights == "s3" and w.weights_s3_uri else plan.checkpoint,
        accelerator_type=plan.instance.ray_accelerator_type or plan.instance.accelerator_name,
        gpus_per_worker=min(gpus, plan.instance.accelerators),
        tensor_parallel_size=plan.tensor_parallel_size,
        pipeline_parallel_size=plan.pipeline_parallel_size,
        engine=replace(plan.engine, revision=hub_revision(s, plan), trust_remote_code=w.trust_remote_code),
        min_replicas=max(w.replicas.min, 1),
        max_replicas=w.replicas.max,
        # Ray Serve adds a replica when ongoing requests per replica pass the planned concurrency.
        target_ongoing_requests=max(1, plan.max_num_seqs),
        worker_cpu=plan.pod_resources.cpu,
        worker_memory=plan.pod_resources.memory,
        node_selector=selector,
        tolerations=tuple(tolerations),
        hf_token_secret=w.hf_token_secret,
        aws_region=region,
        worker_ephemeral_storage=cache_size(plan),
        gpu_resource=pool.resource,
        efa_interfaces=pool.efa_interfaces,
        image=w.image if w.image is not None else RAY_LLM_IMAGE,
        **head,
    )


def ray_monitoring_props(
    s: ServedWorkload,
    plan: Plan,
    ray: RayServeProps,
    *,
    dcgm_service_monitor: bool = True,
    reserved: CapacityReservationConfig | None = None,
) -> RayMonitoringProps:
    return RayMonitoringProps(
        name=ray.name,
        namespace=ray.namespace,
        model_id=ray.model_id,
        targets=_monitoring_targets(
            s, plan, dcgm_service_monitor=dcgm_service_monitor, reserved=reserved, gpu_resource=ray.gpu_resource
        ),
        **_planned(plan),
    )
