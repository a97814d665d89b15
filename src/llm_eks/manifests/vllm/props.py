"""`VllmProps`: what one served model needs, with the chart's constants and every check on its input.

See the package docstring for the objects and the timing arithmetic."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from llm_eks import aws_ids
from llm_eks.error_codes import E401, E402, E403
from llm_eks.errors import ConfigError
from llm_eks.manifests.ingress import IngressProps, validate_ingress
from llm_eks.manifests.labels import POOL_LABEL, VLLM_APP, require_dns1035, require_dns1123, selector_labels
from llm_eks.manifests.pods import MAX_GRACE_SECONDS
from llm_eks.manifests.quantities import parse_quantity
from llm_eks.manifests.vllm.disaggregated import Disaggregation, PdRole, validate_disaggregation
from llm_eks.planner.engine import VLLM_FLAG_FIELDS, EngineSettings, validate_engine
from llm_eks.planner.neuron.engine import NeuronServing
from llm_eks.validation import HF_REPO
from llm_eks.versions import VLLM_IMAGE

PORT = 8000
PORT_NAME = "http"
CACHE_DIR = "/cache"

STARTUP_PERIOD_SECONDS = 10
PROBE_PERIOD_SECONDS = 10
# The API server's event loop shares the CPU with tokenization under load; 1 s (the default) flaps readiness.
PROBE_TIMEOUT_SECONDS = 5
READINESS_FAILURE_THRESHOLD = 3
# Liveness runs manifests/vllm/liveness.py every 30 s: /health (a dead engine) and token progress (a stalled one).
# A restart costs a full model reload (minutes): only restart after two failures in a row, a minute of a dead server
# (as the former /health probe, 6 x 10 s) or a stall of more than LIVENESS_STALL_SECONDS (restarted within 3 minutes).
LIVENESS_PERIOD_SECONDS = 30
LIVENESS_FAILURE_THRESHOLD = 2
# The script's own requests time out after 4 s each; the kubelet kills it after this.
LIVENESS_TIMEOUT_SECONDS = 10
# Requests running and no token processed for this long is a stall. One scheduler step is at most
# max-num-batched-tokens of prefill, well under a second on these GPUs: two orders of magnitude of margin.
LIVENESS_STALL_SECONDS = 120

# Flags the chart sets from typed props, or that would break its contracts: extra_engine_args must not hold them.
_CHART_FLAGS = {
    "--host": "the chart sets it (0.0.0.0)",
    "--port": f"the chart sets it ({PORT})",
    "--model": "the chart passes model as the positional argument",
    "--served-model-name": "the chart sets it from served_model_name",
    "--shutdown-timeout": "the chart sets it from shutdown_timeout_seconds",
    "--tensor-parallel-size": "the chart sets it from tensor_parallel_size",
    "-tp": "the chart sets it from tensor_parallel_size",
    "--pipeline-parallel-size": "the chart sets it from pipeline_parallel_size",
    "-pp": "the chart sets it from pipeline_parallel_size",
    "--download-dir": f"weights are cached under HF_HOME on the cache volume ({CACHE_DIR})",
    "--api-key": "the chart sets the key from api_key_secret (a Secrets Manager file, never an argument)",
    "--disable-log-stats": "it turns off the Prometheus metrics that autoscaling and alerts read",
    "--nnodes": "the chart sets it from nodes_per_replica",
    "--node-rank": "the chart sets it from the pod's place in its LeaderWorkerSet group",
    "--master-addr": "the chart sets it to the group's leader (LWS_LEADER_ADDRESS)",
    "--headless": "the chart sets it on the workers of a replica spanning nodes",
    "--data-parallel-size": "the chart sets it from data_parallel_size",
    "-dp": "the chart sets it from data_parallel_size",
    "--data-parallel-size-local": "the chart sets it from the ranks on each pod of a replica spanning nodes",
    "--data-parallel-start-rank": "the chart sets it from the pod's place in its LeaderWorkerSet group",
    "--data-parallel-address": "the chart sets it to the group's leader (LWS_LEADER_ADDRESS)",
    "--data-parallel-rpc-port": "the chart sets it on a replica whose data-parallel ranks span nodes",
    "--enable-expert-parallel": "the chart sets it from expert_parallel",
    "-ep": "the chart sets it from expert_parallel",
}
# What a Neuron server's flags set from its compiled shape, or what does not apply on Neuron (planner/neuron/engine.py).
_NEURON_FLAGS = {
    "--max-num-seqs": "the chart sets it from the compiled shape (neuron)",
    "--max-num-batched-tokens": "the chart sets it from the compiled shape (neuron)",
    "--num-gpu-blocks-override": "the chart sets it from the compiled shape (neuron)",
    "--block-size": "the chart sets it from the compiled shape (neuron)",
    "--enable-prefix-caching": "the chart sets it from the compiled shape (neuron)",
    "--no-enable-prefix-caching": "the chart sets it from the compiled shape (neuron)",
    "--additional-config": "the chart sets the Neuron settings from the compiled shape (neuron)",
    "--dtype": "the Neuron engines compile bfloat16 (the chart sets it)",
    "--quantization": "Neuron quantizes through its own flow, never vLLM's --quantization",
    "-q": "Neuron quantizes through its own flow, never vLLM's --quantization",
    "--kv-cache-dtype": "on Neuron the KV cache dtype follows the checkpoint",
    "--gpu-memory-utilization": "the Neuron engines size the KV cache from --num-gpu-blocks-override",
    "--enable-chunked-prefill": "the Neuron engines decide prefill from the compiled buckets",
    "--device": "not a flag of the vLLM releases the Neuron engines are built on",
    "--override-neuron-config": "not a flag of the vLLM releases the Neuron engines are built on (use the settings)",
}
# Switches of the removed V0 engine, or defaults the V1 engine already has (DESIGN.md).
_STALE_FLAGS = {
    "--enable-chunked-prefill": "chunked prefill is on by default (pass --no-enable-chunked-prefill to turn it off)",
    "--enable-prefix-caching": "prefix caching is on by default (pass --no-enable-prefix-caching to turn it off)",
    "--use-v2-block-manager": "it was removed with the V0 engine",
    "--num-scheduler-steps": "it was removed with the V0 engine",
}


@dataclass(frozen=True)
class VllmProps:
    """One served model. Filled by the lead from the config and the capacity plan; the chart derives no sizes."""

    # Deployment, Service, ServiceAccount, PDB name (DNS-1035), e.g. "vllm-llama-3-1-8b".
    name: str
    # Hugging Face repo id (weights="hf") or s3://bucket/prefix (weights="s3").
    model: str
    # The name clients send and the `model_name` label on every vLLM metric.
    served_model_name: str
    # From the plan: context length, memory share, batch limits, dtypes; rendered as `vllm serve` flags.
    engine: EngineSettings
    # Must fit one node (at most accelerators_per_node).
    tensor_parallel_size: int
    # Accelerators each pod requests: tensor_parallel_size x pipeline_parallel_size / nodes_per_replica.
    accelerators_per_pod: int
    # Of the planned node pool's instance type; a pod never spans nodes (a replica may: nodes_per_replica).
    accelerators_per_node: int
    # CPU and memory requests, right-sized by the planner (memory must include shm_size: tmpfs is charged to it).
    cpu: str
    memory: str
    # /dev/shm size (NCCL and the engine's worker processes exchange tensors through it).
    shm_size: str
    # Model cache volume size: the weights on disk plus headroom (planner).
    cache_size: str
    # Planner's cold-start estimate from container start to serving (download or stream, load, warm-up).
    startup_seconds: int
    # Initial replicas; the KEDA ScaledObject owns the count afterwards.
    replicas: int
    # From the node-pool helper: selects the planned GPU pool and tolerates its taint.
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    # Single-node pipeline parallelism is rare (tensor parallelism is faster within a node).
    pipeline_parallel_size: int = 1
    # vLLM's data-parallel ranks of one replica (a MoE model's attention per rank; 1: none), each of
    # tensor_parallel_size accelerators; across nodes each pod runs accelerators_per_pod / tensor_parallel_size.
    data_parallel_size: int = 1
    # vLLM's --enable-expert-parallel: the routed experts spread over DP x TP accelerators instead of split by TP.
    # Off, as in vLLM: the planner turns it on where it serves a MoE model more cheaply.
    expert_parallel: bool = False
    # Nodes one replica spans: 1 is a Deployment; more is a LeaderWorkerSet whose groups run vLLM across nodes (the
    # leader serving, the workers --headless): its multiprocessing backend (--nnodes), or its data-parallel ranks.
    nodes_per_replica: int = 1
    # NVIDIA is the common case; aws.amazon.com/neuron for Inferentia/Trainium (with a Neuron image).
    accelerator_resource: str = "nvidia.com/gpu"
    # EFA interfaces each pod of a replica spanning nodes requests (vpc.amazonaws.com/efa, all of its node's), so the
    # EFA device plugin hands it the node's EFA devices; 0: none (the nodes of a replica then talk over TCP).
    efa_interfaces: int = 0
    # hf needs nothing prepared; s3 (Run:ai streamer) starts faster once the weights are copied to a bucket.
    weights: Literal["hf", "s3"] = "hf"
    # Secrets Manager secret NAME holding the Hugging Face token; None for public models (or S3 weights).
    hf_token_secret: str | None = None
    # Secrets Manager secret NAME holding the OpenAI endpoint's API key (the whole SecretString); None: no key.
    # The config turns it on by default; a chart built directly must name its secret.
    api_key_secret: str | None = None
    # Region of the secret / S3 bucket; None lets the AWS provider and SDKs look it up (one more call per mount).
    aws_region: str | None = None
    # The workload namespace every chart and the Pod Identity association agree on.
    namespace: str = "inference"
    # Emit the Namespace object (one chart must own it; the lead decides which).
    create_namespace: bool = True
    # None: the workload serves in its own InferencePool. A next version served in its current version's pool (pool
    # share) names that version here: its pods then carry `vllm-next` as their name label (their own instance, so no
    # selector of the current version's matches them) and that version's pool label (labels.POOL_LABEL).
    pool_instance: str | None = None
    # The pinned vLLM release (versions.py).
    image: str = VLLM_IMAGE
    # The image's own non-root `vllm` user (UID 2000, GID 0); None runs as the image default, root.
    run_as_user: int | None = 2000
    # Sleep before SIGTERM so kube-proxy and the ALB stop sending new requests first.
    pre_stop_seconds: int = 15
    # vLLM's --shutdown-timeout: how long in-flight requests may finish after SIGTERM.
    shutdown_timeout_seconds: int = 90
    # Everything above must fit in it, and it must fit in the Spot notice.
    termination_grace_seconds: int = MAX_GRACE_SECONDS
    # The startup probe allows this multiple of startup_seconds before it gives up.
    startup_margin: float = 1.5
    # Node launch and image pull before the container starts; Kubernetes' own progress-deadline default.
    provisioning_seconds: int = 600
    # Spread replicas over zones (soft: an AZ without GPU capacity must not leave a replica Pending).
    zone_spread: bool = True
    # Replicas of the on-demand floor (`<name>-floor`, a Deployment of its own, or a LeaderWorkerSet, with a fixed
    # count): on on-demand capacity of `floor_pools`, one zone after the other (required spread). 0: none; KEDA
    # then scales `<name>` alone.
    floor_replicas: int = 0
    # The NodePools (llm-eks.io/node-pool values) the floor may use, tried by their weight; with floor_replicas.
    floor_pools: tuple[str, ...] = ()
    # The NodePools the serving pods may use (a node affinity), the planned family's first, then a fallback
    # family's; empty: node_selector alone decides. The compile cache's writer keeps to node_selector's pool.
    pools: tuple[str, ...] = ()
    # One replica at a time may be voluntarily disrupted (consolidation, drift, node upgrades).
    pdb_max_unavailable: int = 1
    ingress: IngressProps | None = None
    # Weights staged into the environment's bucket (manifests/weights_staging): (key prefix, staging key). The pods
    # read the bucket's name from ConfigMap llm-eks-weights and wait until the prefix holds this key's marker; the
    # model is then s3://$(LLM_EKS_WEIGHTS_BUCKET)/<prefix>. None: weights as `model` says.
    staged_weights: tuple[str, str] | None = None
    # With staged weights: the bucket prefix holding this workload's torch.compile cache (restored and verified
    # before vLLM starts, published by the chart's compile-cache Job); None: compile on every new node.
    compile_cache: str | None = None
    # LoRA adapters staged into the bucket, (adapter name, key prefix, staging key): an init container per adapter
    # fetches the files its marker lists, verified, into <cache>/lora/<name>, where engine.lora_modules points.
    staged_adapters: tuple[tuple[str, str, str], ...] = ()
    # Further `vllm serve` flags, after the rendered ones: none of the chart's, the engine settings' or V0-era ones.
    extra_engine_args: tuple[str, ...] = ()
    # Serving on AWS Neuron (planner/neuron): the engine path and the compiled shape, rendered instead of the GPU
    # flags, with `image` that path's container. It compiles ahead of time in the compile cache's writer and its
    # pods restore the result, so it needs staged weights and compile_cache. None: vLLM on NVIDIA GPUs.
    neuron: NeuronServing | None = None
    # Cores each accelerator offers to tensor parallelism (NeuronCores per Neuron chip); 1 for GPUs.
    cores_per_accelerator: int = 1
    # Neuron's ahead-of-time compile in the compile cache's writer Job (seconds), added to the writer's deadline.
    compile_seconds: int = 0
    # The pods' scheduler: None is Kubernetes' default; the Neuron scheduler extension's second scheduler
    # (neuron.NEURON_SCHEDULER_NAME) for pods that take some but not all Neuron chips of a node (contiguous ones).
    scheduler_name: str | None = None
    # Separate prefill and decode pools (manifests/vllm/disaggregated.py): this workload's Deployment decodes behind
    # the routing sidecar, `<name>-prefill` prefills; None: one aggregated pool.
    disaggregation: Disaggregation | None = None
    # Which pool's pods these props render (the chart sets it per Deployment); None: aggregated.
    pd_role: PdRole | None = None


@dataclass(frozen=True)
class ProbeTiming:
    """Derived probe numbers, exposed so tests and the docs show the arithmetic."""

    startup_budget_seconds: int
    startup_failure_threshold: int


def probe_timing(props: VllmProps) -> ProbeTiming:
    budget = math.ceil(props.startup_seconds * Fraction(str(props.startup_margin)))
    return ProbeTiming(budget, math.ceil(Fraction(budget, STARTUP_PERIOD_SECONDS)))


def service_url(props: VllmProps) -> str:
    """In-cluster base URL of the OpenAI-compatible endpoint."""
    return f"http://{props.name}.{props.namespace}.svc.cluster.local:{PORT}"


def _at_least(field_name: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise ConfigError(E401, f"{field_name}: {value} is not allowed; must be at least {minimum}")


NEXT_VERSION_APP = "vllm-next"


def pod_selector(p: VllmProps) -> dict[str, str]:
    """The labels that select the workload's Spot/on-demand serving pods (its Deployment's immutable selector)."""
    return selector_labels(VLLM_APP if p.pool_instance is None else NEXT_VERSION_APP, p.name)


def pool_label(p: VllmProps) -> dict[str, str]:
    """The label naming the InferencePool the workload's serving pods join: its own, or its current version's."""
    return {POOL_LABEL: p.pool_instance or p.name}


def validate_vllm_props(p: VllmProps) -> None:
    """Every check the chart makes on its input; raises ConfigError with one line."""
    require_dns1035("name", p.name)
    require_dns1123("namespace", p.namespace)
    if not p.served_model_name or any(c in p.served_model_name for c in '"\\\n'):
        raise ConfigError(
            E401,
            f"served_model_name: {p.served_model_name!r} is not allowed; must be non-empty without '\"', '\\' "
            "or a newline (it is quoted in PromQL)",
        )
    _validate_model_source(p)
    _validate_layout(p)
    _validate_resources(p)
    _at_least("startup_seconds", p.startup_seconds, 1)
    _at_least("replicas", p.replicas, 0)
    _at_least("provisioning_seconds", p.provisioning_seconds, 0)
    if not p.startup_margin >= 1:
        raise ConfigError(E401, f"startup_margin: {p.startup_margin} is not allowed; must be at least 1")
    if p.run_as_user is not None:
        _at_least("run_as_user", p.run_as_user, 1)
    _at_least("pdb_max_unavailable", p.pdb_max_unavailable, 1)
    _at_least("floor_replicas", p.floor_replicas, 0)
    if bool(p.floor_replicas) != bool(p.floor_pools):
        raise ConfigError(
            E401,
            f"floor_pools: {list(p.floor_pools)} is not allowed with floor_replicas {p.floor_replicas}; name the "
            "NodePools the on-demand floor may use exactly when it has replicas",
        )
    _validate_drain(p)
    validate_engine(p.engine, "engine")
    _validate_neuron(p)
    _validate_extra_engine_args(p)
    if p.disaggregation is not None:
        validate_disaggregation(p.disaggregation, p.pipeline_parallel_size, p.neuron is not None)
    if p.ingress is not None:
        validate_ingress(p.ingress)
        if p.nodes_per_replica > 1:
            raise ConfigError(
                E401,
                f"ingress: not allowed with nodes_per_replica {p.nodes_per_replica}; the ALB's readiness gate "
                "follows pods, and only a group's leader serves",
            )


def _validate_model_source(p: VllmProps) -> None:
    """Where the weights come from, and the secrets as Secrets Manager names."""
    if p.weights not in ("hf", "s3"):
        raise ConfigError(E401, f"weights: {p.weights!r} is not allowed; must be 'hf' or 's3'")
    if p.weights == "s3" and not p.model.startswith("s3://"):
        raise ConfigError(E401, f"model: {p.model!r} is not allowed with weights 's3'; must be an s3:// URI")
    if p.weights == "hf" and not HF_REPO.match(p.model):
        raise ConfigError(
            E401,
            f"model: {p.model!r} is not allowed with weights 'hf'; must be a Hugging Face repo id such as "
            "meta-llama/Llama-3.1-8B-Instruct (for s3:// set weights 's3')",
        )
    for field_name, secret in (("hf_token_secret", p.hf_token_secret), ("api_key_secret", p.api_key_secret)):
        if secret is not None and not aws_ids.SECRET_NAME.match(secret):
            raise ConfigError(
                E401,
                f"{field_name}: {secret!r} is not allowed; must be a Secrets Manager secret name "
                "(letters, digits and /_+=.@-)",
            )


def _validate_layout(p: VllmProps) -> None:
    """Tensor, pipeline and data parallelism over the accelerators of a pod, a node and a replica."""
    for name, value in (
        ("tensor_parallel_size", p.tensor_parallel_size),
        ("pipeline_parallel_size", p.pipeline_parallel_size),
        ("data_parallel_size", p.data_parallel_size),
    ):
        _at_least(name, value, 1)
    if p.data_parallel_size > 1 and p.pipeline_parallel_size > 1:
        raise ConfigError(
            E401,
            f"data_parallel_size: {p.data_parallel_size} is not allowed with pipeline_parallel_size "
            f"{p.pipeline_parallel_size}; data-parallel ranks here are tensor-parallel only (use 1 for either)",
        )
    _at_least("accelerators_per_node", p.accelerators_per_node, 1)
    _at_least("cores_per_accelerator", p.cores_per_accelerator, 1)
    _at_least("compile_seconds", p.compile_seconds, 0)
    _at_least("nodes_per_replica", p.nodes_per_replica, 1)
    _at_least("efa_interfaces", p.efa_interfaces, 0)
    if p.efa_interfaces and p.nodes_per_replica == 1 and p.disaggregation is None:
        raise ConfigError(
            E401,
            f"efa_interfaces: {p.efa_interfaces} is not allowed with nodes_per_replica 1; EFA carries the traffic "
            "between the nodes of a replica, or a disaggregated workload's KV cache (use 0)",
        )
    cores = p.cores_per_accelerator
    if p.tensor_parallel_size > p.accelerators_per_node * cores:
        raise ConfigError(
            E401,
            f"tensor_parallel_size: {p.tensor_parallel_size} is not allowed; must be at most "
            f"{p.accelerators_per_node * cores} (accelerators per node"
            + (f" x {cores} cores each)" if cores > 1 else ")"),
        )
    world = p.tensor_parallel_size * p.pipeline_parallel_size * p.data_parallel_size
    if p.accelerators_per_pod * p.nodes_per_replica * cores != world:
        per = f" / {cores} cores per accelerator" if cores > 1 else ""
        raise ConfigError(
            E401,
            f"accelerators_per_pod: {p.accelerators_per_pod} is not allowed; must equal tensor_parallel_size x "
            f"pipeline_parallel_size x data_parallel_size / nodes_per_replica{per} ({world} / {p.nodes_per_replica}"
            f"{f' / {cores}' if cores > 1 else ''}), a whole number (vLLM splits the ranks evenly over the nodes)",
        )
    if p.data_parallel_size > 1 and p.accelerators_per_pod % p.tensor_parallel_size:
        raise ConfigError(
            E401,
            f"accelerators_per_pod: {p.accelerators_per_pod} is not allowed with data_parallel_size "
            f"{p.data_parallel_size}; each pod runs whole data-parallel ranks of tensor_parallel_size "
            f"{p.tensor_parallel_size} accelerators",
        )
    if p.accelerators_per_pod > p.accelerators_per_node:
        raise ConfigError(
            E401,
            f"accelerators_per_pod: {p.accelerators_per_pod} is not allowed; must be at most "
            f"{p.accelerators_per_node} (accelerators per node)",
        )


def _validate_resources(p: VllmProps) -> None:
    """The accelerator resource name, CPU, memory, /dev/shm and the model cache."""
    if "/" not in p.accelerator_resource:
        raise ConfigError(
            E401,
            f"accelerator_resource: {p.accelerator_resource!r} is not allowed; must be an extended resource "
            "name such as nvidia.com/gpu or aws.amazon.com/neuron",
        )
    if parse_quantity("cpu", p.cpu) <= 0:
        raise ConfigError(E401, f"cpu: {p.cpu!r} is not allowed; must be above 0")
    memory = parse_quantity("memory", p.memory)
    shm = parse_quantity("shm_size", p.shm_size)
    if parse_quantity("cache_size", p.cache_size) <= 0:
        raise ConfigError(E401, f"cache_size: {p.cache_size!r} is not allowed; must be above 0")
    if shm <= 0:
        raise ConfigError(E401, f"shm_size: {p.shm_size!r} is not allowed; must be above 0")
    if memory < shm:
        raise ConfigError(
            E401,
            f"memory: {p.memory} is not allowed; must be at least shm_size ({p.shm_size}) because /dev/shm "
            "pages count against the memory limit",
        )


def _validate_drain(p: VllmProps) -> None:
    _at_least("pre_stop_seconds", p.pre_stop_seconds, 0)
    # 0 would make vLLM abort in-flight requests on SIGTERM.
    _at_least("shutdown_timeout_seconds", p.shutdown_timeout_seconds, 1)
    drain = p.pre_stop_seconds + p.shutdown_timeout_seconds
    if not drain < p.termination_grace_seconds <= MAX_GRACE_SECONDS:
        raise ConfigError(
            E403,
            f"drain: preStop {p.pre_stop_seconds} s + shutdown timeout {p.shutdown_timeout_seconds} s = {drain} s "
            f"must be below terminationGracePeriodSeconds {p.termination_grace_seconds} s, which must be at most "
            f"{MAX_GRACE_SECONDS} s (2-minute Spot notice minus margin)",
        )


def _validate_neuron(p: VllmProps) -> None:
    """A Neuron server: one pod of tensor parallelism, compiled ahead of time by the compile cache's writer."""
    if p.neuron is None:
        if p.cores_per_accelerator != 1:
            raise ConfigError(
                E401,
                f"cores_per_accelerator: {p.cores_per_accelerator} is not allowed without neuron; a GPU is one core",
            )
        return
    if p.neuron.shape.max_model_len != p.engine.max_model_len:
        raise ConfigError(
            E401,
            f"engine.max_model_len: {p.engine.max_model_len} is not allowed; must equal the compiled shape's "
            f"max_model_len ({p.neuron.shape.max_model_len}): a Neuron engine serves the length it compiled",
        )
    for name, value in (
        ("pipeline_parallel_size", p.pipeline_parallel_size),
        ("data_parallel_size", p.data_parallel_size),
        ("nodes_per_replica", p.nodes_per_replica),
    ):
        if value != 1:
            raise ConfigError(
                E401,
                f"{name}: {value} is not allowed with neuron; a Neuron replica is one pod of tensor-parallel "
                "NeuronCores (use 1)",
            )
    if p.expert_parallel or p.engine.lora_modules:
        raise ConfigError(E401, "neuron: expert parallelism and LoRA adapters are not served on Neuron here")
    if p.staged_weights is None or p.compile_cache is None:
        raise ConfigError(
            E401,
            "neuron: needs staged_weights and compile_cache: a Neuron engine compiles ahead of time in the compile "
            "cache's writer Job (from the staged weights) and its serving pods restore what it published",
        )


def _validate_extra_engine_args(p: VllmProps) -> None:
    for token in p.extra_engine_args:
        if not isinstance(token, str):
            raise ConfigError(E402, f"extra_engine_args: {token!r} is not allowed; every argument must be a string")
        flag = token.partition("=")[0]
        if not flag.startswith("-"):
            continue
        reason = _CHART_FLAGS.get(flag) or _STALE_FLAGS.get(flag)
        if flag in VLLM_FLAG_FIELDS:
            reason = f"the chart sets it from engine.{VLLM_FLAG_FIELDS[flag]}"
        if p.neuron is not None and flag in _NEURON_FLAGS:
            reason = _NEURON_FLAGS[flag]
        if p.neuron is not None and flag == "--shutdown-timeout" and not p.neuron.shutdown_timeout:
            reason = "the Neuron engine's vLLM 0.16 has no such flag (the chart drains in preStop)"
        if flag == "--load-format" and p.weights == "s3":
            reason = "the chart sets it (runai_streamer) for weights 's3'"
        if flag == "--kv-transfer-config" and p.disaggregation is not None:
            reason = "the chart sets it for each pool of a disaggregated workload (the plan's NIXL config)"
        if flag == "--kv-transfer-config" and p.engine.kv_offloading_size is not None:
            # vLLM 0.33 replaces its connector with the CPU tier's (config/vllm.py _post_init_kv_transfer_config).
            reason = "--kv-offloading-size (engine.kv_offloading_size) replaces its connector; pass one or the other"
        if reason:
            raise ConfigError(E402, f"extra_engine_args: {flag!r} is not allowed; {reason}")
