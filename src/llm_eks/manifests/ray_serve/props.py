"""RayServeProps: one model served by Ray Serve LLM, its constants and its validation (one line per bad prop)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_eks import aws_ids
from llm_eks.error_codes import E403, E405
from llm_eks.errors import ConfigError, fail
from llm_eks.manifests.labels import require_dns1035, require_dns1123
from llm_eks.manifests.pods import (
    MAX_GRACE_SECONDS,
)
from llm_eks.manifests.quantities import parse_quantity
from llm_eks.manifests.weights_staging.props import KEY_LENGTH
from llm_eks.planner.engine import RAY_ENGINE_FIELDS, EngineSettings, validate_engine
from llm_eks.validation import HF_REPO, MODEL_NAME, whole_number
from llm_eks.versions import RAY_LLM_IMAGE, RAY_VERSION

RAY_SERVE_APP = "ray-serve"
IMPORT_PATH = "ray.serve.llm:build_openai_app"
APPLICATION_NAME = "llm"
SERVE_PORT = 8000
WORKER_GROUP = "gpu"
# KubeRay appends "-serve-svc" (and "-xxxxx" for the RayCluster) to the RayService name; 63 - 10 - 6 = 47.
MAX_NAME_LENGTH = 47
# Ray's metrics export port on every Ray pod (KubeRay's default `metrics-export-port`, container port `metrics`).
METRICS_PORT = 8080
METRICS_PORT_NAME = "metrics"
# KubeRay's authOptions token mode needs this Ray version (ray-operator/controllers/ray/utils/validation.go).
MIN_TOKEN_AUTH_RAY_VERSION = (2, 52, 0)
# Read by `ray start` at SIGTERM: the drain deadline it gives the GCS (python/ray/_private/ray_constants.py).
RAY_DRAIN_TIMEOUT_ENV = "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"
# Time the Serve controller may need to see a draining node (it polls the GCS from its control loop).
SERVE_DRAIN_NOTICE_SECONDS = 5
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
# Node-selector keys that only Karpenter-launched nodes carry.
_KARPENTER_KEYS = ("karpenter.sh/nodepool", "karpenter.sh/capacity-type")

# NVIDIA accelerator types Ray knows (ray/util/accelerators/accelerators.py in Ray 2.60.0); LLMConfig refuses any
# other value. Ray detects the GPU model on each node and advertises it as the resource `accelerator_type:<type>`.
RAY_NVIDIA_ACCELERATOR_TYPES = (
    "V100",
    "P100",
    "T4",
    "P4",
    "K80",
    "A10G",
    "L4",
    "L40S",
    "A100",
    "A100-40G",
    "A100-80G",
    "H100",
    "H200",
    "H20",
    "B200",
    "B300",
    "GB200",
    "GB300",
    "RTX-PRO-6000",
)
# Ray Serve LLM sets these itself: the model from model_loading_config, the Ray executor always.
_RESERVED_ENGINE_KWARGS = {
    "model": "it comes from model_source",
    "served_model_name": "it comes from model_id",
    "distributed_executor_backend": "Ray Serve LLM always uses the ray executor",
}
_UPSCALING_MODES = ("Default", "Aggressive", "Conservative")
# NewClusterWithIncrementalUpgrade needs the Gateway API; it is not offered.
_UPGRADE_STRATEGIES = ("NewCluster", "None")
_S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/\S*)?$")
# Where a worker pod's init container puts the staged checkpoint (an emptyDir on the node's disk): model_source names
# it, and Ray Serve LLM passes a local path to vLLM unchanged (module docstring).
STAGED_WEIGHTS_DIR = "/mnt/llm-eks/weights"
STAGED_WEIGHTS_VOLUME = "staged-weights"


@dataclass(frozen=True)
class RayServeProps:
    """One model on Ray Serve LLM. The lead fills the fields without defaults from the config and the plan."""

    # RayService and ServiceAccount name (DNS-1035, at most 47 characters); the endpoint is <name>-serve-svc.
    name: str
    # The name clients send as "model" (LLMConfig model_loading_config.model_id).
    model_id: str
    # Hugging Face repo id, or s3://bucket/prefix of a weights mirror (model_loading_config.model_source).
    model_source: str
    # Ray's accelerator constant for the node pool's GPU (e.g. "L40S", "A10G"), from the planner.
    accelerator_type: str
    # GPUs one worker pod (one node) takes: the node's accelerators the plan uses.
    gpus_per_worker: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    # From the plan: context length, memory share, batch limits, dtypes; rendered as LLMConfig engine_kwargs.
    engine: EngineSettings
    # Serve model replicas (each replica spans nodes_per_replica worker pods).
    min_replicas: int
    max_replicas: int
    # Ongoing requests per replica Serve autoscales to: the plan's concurrency per replica.
    target_ongoing_requests: int
    # CPU and memory of one GPU worker pod, right-sized by the planner.
    worker_cpu: str
    worker_memory: str
    # From the node-pool helper: selects the planned GPU pool and tolerates its taint.
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    # Further vLLM engine arguments, after the rendered ones: none that the engine settings or Ray Serve LLM set.
    extra_engine_kwargs: Mapping[str, Any] = field(default_factory=dict)
    # Environment of the replica and its engine workers (LLMConfig runtime_env.env_vars).
    runtime_env_vars: Mapping[str, str] = field(default_factory=dict)
    # None keeps Ray Serve LLM's default (no cap: vLLM queues the excess, and the queue is what we watch).
    max_ongoing_requests: int | None = None
    # Secrets Manager secret NAME holding the Hugging Face token; None for public models (or S3 weights).
    hf_token_secret: str | None = None
    # Region of the secret; None lets the AWS provider look it up.
    aws_region: str | None = None
    # Ephemeral storage of a worker pod for the downloaded weights (planner); None when streaming from S3.
    worker_ephemeral_storage: str | None = None
    # Staged weights, as (bucket prefix, staging key): each worker pod's init container waits for the key's marker in
    # the environment's weights bucket, then copies the files it lists, verified, into STAGED_WEIGHTS_DIR, which
    # model_source must then name. None: Ray Serve LLM fetches model_source itself.
    staged_weights: tuple[str, str] | None = None
    namespace: str = "inference"
    # Emit the Namespace object (one chart must own it; the lead decides which).
    create_namespace: bool = True
    # Ray Serve LLM runs vLLM on CUDA GPUs here; Neuron needs a different engine build.
    gpu_resource: str = "nvidia.com/gpu"
    # EFA interfaces each worker of a replica spanning nodes requests (vpc.amazonaws.com/efa, all of its node's);
    # 0: none (the replica's nodes then talk over TCP).
    efa_interfaces: int = 0
    image: str = RAY_LLM_IMAGE
    ray_version: str = RAY_VERSION
    # GCS, dashboard, Serve controller and proxy for one model: 2 CPUs / 8 GiB (KubeRay's LLM samples use 2 CPUs).
    head_cpu: str = "2"
    head_memory: str = "8Gi"
    # System nodes carry llm-eks.io/node-role=system (cross-chart contract); the head must not land on a GPU node.
    head_node_selector: Mapping[str, str] = field(default_factory=lambda: {"llm-eks.io/node-role": "system"})
    head_tolerations: tuple[Mapping[str, Any], ...] = ()
    # Serve already waits downscale_delay_s (600 s) before dropping a replica; 5 more minutes of an idle worker lets
    # a returning burst reuse a warm GPU node instead of paying a multi-minute cold start.
    idle_timeout_seconds: int = 300
    # GPU nodes take minutes to arrive: never rate-limit the requests for them.
    upscaling_mode: str = "Default"
    # NewCluster: zero-downtime cluster upgrades (briefly twice the GPUs); serveConfigV2 changes apply in place.
    upgrade_strategy: str = "NewCluster"
    # The image's own non-root `ray` user (UID 1000, GID 100); None runs as the image default.
    run_as_user: int | None = 1000
    # GPU worker drain (see the module docstring for the order and the arithmetic).
    # Sleep before SIGTERM so kube-proxy and load balancers stop sending this pod new connections first.
    pre_stop_seconds: int = 15
    # RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S: how long after SIGTERM Ray keeps the draining node up (Ray's default: 30).
    drain_timeout_seconds: int = 90
    # Serve's graceful_shutdown_timeout_s (default 20): in-flight requests a stopping replica may finish; as long as
    # the drain allows, minus the time Serve needs to notice it.
    graceful_shutdown_timeout_seconds: int = 85
    # Serve's graceful_shutdown_wait_loop_s (its default): how often a stopping replica checks for in-flight work.
    graceful_shutdown_wait_loop_seconds: int = 2
    # Everything above must fit in it, and it must fit in the Spot notice.
    termination_grace_seconds: int = MAX_GRACE_SECONDS

    @property
    def serve_service_name(self) -> str:
        """The Service KubeRay creates for the Serve endpoint (port 8000, name `serve`)."""
        return f"{self.name}-serve-svc"

    @property
    def nodes_per_replica(self) -> int:
        """Worker pods (nodes) one model replica spans."""
        return (self.tensor_parallel_size * self.pipeline_parallel_size) // self.gpus_per_worker

    @property
    def llm_deployment_name(self) -> str:
        """The Serve deployment serving the model (the `deployment` label of Ray Serve's metrics)."""
        return llm_deployment_name(self.model_id)

    @property
    def head_on_karpenter(self) -> bool:
        """Whether the head's node selector picks Karpenter-launched capacity."""
        return any(key in self.head_node_selector for key in _KARPENTER_KEYS)


def llm_deployment_name(model_id: str) -> str:
    """Ray Serve LLM's name for a model's deployment: `LLMServer:` + model_id with "/" -> "--" and "." -> "_"
    (python/ray/llm/_internal/serve/core/server/builder.py, _get_deployment_name and build_llm_deployment)."""
    return "LLMServer:" + model_id.replace("/", "--").replace(".", "_")


def _fail(prop: str, value: object, allowed: str) -> ConfigError:
    return fail(E405, f"ray_serve.{prop}", value, allowed)


def _at_least(prop: str, value: object, minimum: int) -> None:
    if not whole_number(value) or value < minimum:
        raise _fail(prop, value, f"must be a whole number of at least {minimum}")


def validate(p: RayServeProps) -> None:
    """Raise ConfigError (one line naming the field) on the first bad prop."""
    require_dns1035("ray_serve.name", p.name)
    if len(p.name) > MAX_NAME_LENGTH:
        raise _fail("name", p.name, f"must be at most {MAX_NAME_LENGTH} characters (KubeRay appends suffixes)")
    require_dns1123("ray_serve.namespace", p.namespace)
    if not isinstance(p.model_id, str) or not MODEL_NAME.match(p.model_id):
        raise _fail("model_id", p.model_id, "must be 1-253 characters of letters, digits and ._/:@+-")
    if p.staged_weights is not None:
        _validate_staged(p)
    elif not isinstance(p.model_source, str) or not (_S3_URI.match(p.model_source) or HF_REPO.match(p.model_source)):
        raise _fail("model_source", p.model_source, "must be a Hugging Face repo id (org/name) or an s3:// URI")
    if p.accelerator_type not in RAY_NVIDIA_ACCELERATOR_TYPES:
        raise _fail(
            "accelerator_type",
            p.accelerator_type,
            f"must be one of Ray {RAY_VERSION}'s NVIDIA types: {', '.join(RAY_NVIDIA_ACCELERATOR_TYPES)}",
        )
    if _version(p.ray_version) < MIN_TOKEN_AUTH_RAY_VERSION:
        raise _fail(
            "ray_version",
            p.ray_version,
            "must be 2.52.0 or later (Ray token authentication, which every RayCluster here turns on)",
        )
    if p.gpu_resource != "nvidia.com/gpu":
        raise _fail("gpu_resource", p.gpu_resource, "must be nvidia.com/gpu (Ray Serve LLM runs vLLM on CUDA here)")
    _at_least("gpus_per_worker", p.gpus_per_worker, 1)
    _at_least("efa_interfaces", p.efa_interfaces, 0)
    _at_least("tensor_parallel_size", p.tensor_parallel_size, 1)
    _at_least("pipeline_parallel_size", p.pipeline_parallel_size, 1)
    _validate_layout(p)
    validate_engine(p.engine, "ray_serve.engine")
    _at_least("min_replicas", p.min_replicas, 0)
    _at_least("max_replicas", p.max_replicas, 1)
    if p.min_replicas > p.max_replicas:
        raise _fail("min_replicas", p.min_replicas, f"must be at most max_replicas ({p.max_replicas})")
    _at_least("target_ongoing_requests", p.target_ongoing_requests, 1)
    if p.max_ongoing_requests is not None:
        _at_least("max_ongoing_requests", p.max_ongoing_requests, p.target_ongoing_requests)
    _validate_engine_kwargs(p)
    _validate_pods(p)
    _validate_drain(p)


def _validate_staged(p: RayServeProps) -> None:
    """Staged weights: a bucket prefix and a staging key, served from the directory the workers copy them to."""
    if p.model_source != STAGED_WEIGHTS_DIR:
        raise _fail("model_source", p.model_source, f"must be {STAGED_WEIGHTS_DIR} with staged_weights")
    prefix, key = p.staged_weights or ("", "")
    if not isinstance(prefix, str) or not prefix.endswith("/") or prefix.startswith("/") or "$" in prefix:
        raise _fail("staged_weights", prefix, "the prefix must end in '/', not start with '/' and hold no '$'")
    if not isinstance(key, str) or not re.fullmatch(f"[0-9a-f]{{{KEY_LENGTH}}}", key):
        raise _fail("staged_weights", key, f"the key must be a staging key ({KEY_LENGTH} hex digits)")
    if p.worker_ephemeral_storage is None:
        raise _fail("worker_ephemeral_storage", None, "must be set with staged_weights (the copy lives on the node)")
    if p.hf_token_secret is not None:
        raise _fail("hf_token_secret", p.hf_token_secret, "must be None with staged_weights (nothing from the Hub)")


def _validate_layout(p: RayServeProps) -> None:
    """Tensor parallelism within a worker node; a replica a whole number of worker nodes."""
    if p.tensor_parallel_size > p.gpus_per_worker:
        raise _fail(
            "tensor_parallel_size",
            p.tensor_parallel_size,
            f"must be at most {p.gpus_per_worker} (GPUs per worker node; tensor parallelism stays within a node)",
        )
    gpus = p.tensor_parallel_size * p.pipeline_parallel_size
    if gpus % p.gpus_per_worker != 0 and gpus > p.gpus_per_worker:
        raise _fail(
            "pipeline_parallel_size",
            p.pipeline_parallel_size,
            f"must make tensor_parallel_size x pipeline_parallel_size ({gpus} GPUs) a whole number of "
            f"{p.gpus_per_worker}-GPU worker nodes",
        )
    if gpus < p.gpus_per_worker:
        raise _fail(
            "gpus_per_worker",
            p.gpus_per_worker,
            f"must equal tensor_parallel_size x pipeline_parallel_size ({gpus}) when one node holds a replica",
        )


def _validate_engine_kwargs(p: RayServeProps) -> None:
    """No engine keyword that llm-eks sets itself or that has its own setting."""
    for key in p.extra_engine_kwargs:
        if key in _RESERVED_ENGINE_KWARGS:
            raise _fail("extra_engine_kwargs", key, _RESERVED_ENGINE_KWARGS[key])
        if key in ("tensor_parallel_size", "pipeline_parallel_size"):
            raise _fail("extra_engine_kwargs", key, "it has its own prop")
        if key in RAY_ENGINE_FIELDS:
            raise _fail("extra_engine_kwargs", key, f"it has its own setting (engine.{key})")


def _validate_pods(p: RayServeProps) -> None:
    """Resources, the Hub token's secret, autoscaling and upgrade settings, and where the head runs."""
    for prop in ("worker_cpu", "worker_memory", "head_cpu", "head_memory"):
        parse_quantity(f"ray_serve.{prop}", getattr(p, prop))
    if p.worker_ephemeral_storage is not None:
        parse_quantity("ray_serve.worker_ephemeral_storage", p.worker_ephemeral_storage)
    if p.hf_token_secret is not None and not aws_ids.SECRET_NAME.match(p.hf_token_secret):
        raise _fail("hf_token_secret", p.hf_token_secret, "must be a Secrets Manager secret name")
    _at_least("idle_timeout_seconds", p.idle_timeout_seconds, 0)
    if p.upscaling_mode not in _UPSCALING_MODES:
        raise _fail("upscaling_mode", p.upscaling_mode, f"must be one of {', '.join(_UPSCALING_MODES)}")
    if p.upgrade_strategy not in _UPGRADE_STRATEGIES:
        raise _fail("upgrade_strategy", p.upgrade_strategy, f"must be one of {', '.join(_UPGRADE_STRATEGIES)}")
    if p.run_as_user is not None:
        _at_least("run_as_user", p.run_as_user, 1)
    if p.head_node_selector.get("karpenter.sh/capacity-type") == "spot":
        raise _fail(
            "head_node_selector",
            dict(p.head_node_selector),
            "the head (GCS, Serve controller) must run on on-demand capacity, never Spot",
        )


def _version(text: object) -> tuple[int, ...]:
    """`2.60.0` -> (2, 60, 0); anything else sorts below every release."""
    if not isinstance(text, str) or not re.fullmatch(r"\d+\.\d+\.\d+", text):
        return (0,)
    return tuple(int(part) for part in text.split("."))


def _validate_drain(p: RayServeProps) -> None:
    _at_least("pre_stop_seconds", p.pre_stop_seconds, 0)
    # 0 would make `ray start` skip the drain and stop Ray at once on SIGTERM.
    _at_least("drain_timeout_seconds", p.drain_timeout_seconds, 1)
    _at_least("graceful_shutdown_wait_loop_seconds", p.graceful_shutdown_wait_loop_seconds, 1)
    _at_least("graceful_shutdown_timeout_seconds", p.graceful_shutdown_timeout_seconds, 1)
    longest = p.drain_timeout_seconds - SERVE_DRAIN_NOTICE_SECONDS
    if p.graceful_shutdown_timeout_seconds > longest:
        raise _fail(
            "graceful_shutdown_timeout_seconds",
            p.graceful_shutdown_timeout_seconds,
            f"must be at most drain_timeout_seconds - {SERVE_DRAIN_NOTICE_SECONDS} ({longest}): Ray stops the node "
            "at its drain deadline",
        )
    if p.graceful_shutdown_wait_loop_seconds >= p.graceful_shutdown_timeout_seconds:
        raise _fail(
            "graceful_shutdown_wait_loop_seconds",
            p.graceful_shutdown_wait_loop_seconds,
            f"must be below graceful_shutdown_timeout_seconds ({p.graceful_shutdown_timeout_seconds})",
        )
    drain = p.pre_stop_seconds + p.drain_timeout_seconds
    if not whole_number(p.termination_grace_seconds) or not drain < p.termination_grace_seconds <= MAX_GRACE_SECONDS:
        raise ConfigError(
            E403,
            f"ray_serve.drain: preStop {p.pre_stop_seconds} s + Ray drain timeout {p.drain_timeout_seconds} s = "
            f"{drain} s must be below terminationGracePeriodSeconds {p.termination_grace_seconds} s, which must be at "
            f"most {MAX_GRACE_SECONDS} s (2-minute Spot notice minus margin)",
        )
