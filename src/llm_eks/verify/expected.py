"""What the cluster should hold, as plain data: one `PoolPlan` per GPU NodePool, one `WorkloadPlan` per workload
(with its `RoutePlan` behind a gateway), together an `EnvironmentPlan`.

Filled by `llm_eks.verify.derive` from the environment's config and plans, through the same functions the charts
use; the checks read only these, so they stay pure and test without a chart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

Engine: TypeAlias = Literal["vllm", "ray-serve"]
# The `args` role of a disaggregated workload's prefill pods (its own pods decode, as "server", or "leader" and
# "worker" of a LeaderWorkerSet group).
PREFILL_ROLE = "prefill"


def prefill_role(role: str) -> str:
    """The `args` role of a prefill pod of pod role `role`: PREFILL_ROLE for a server, `prefill-leader` and
    `prefill-worker` for the pods of a prefill LeaderWorkerSet's groups."""
    return PREFILL_ROLE if role == "server" else f"{PREFILL_ROLE}-{role}"


# The object that owns a workload's serving pods.
OwnerKind: TypeAlias = Literal["Deployment", "LeaderWorkerSet", "RayService"]


@dataclass(frozen=True)
class PoolPlan:
    """A GPU NodePool (karpenter.sh/v1) as the node-pools chart renders it."""

    name: str
    # The `node.kubernetes.io/instance-type In [...]` requirement: the planned sizes and their same-shape fallbacks.
    instance_types: tuple[str, ...]
    # The sizes the plans of its workloads chose.
    planned_types: tuple[str, ...]
    # The extended resource of its accelerators (nvidia.com/gpu) and the pool's limit on it.
    resource: str
    accelerator_limit: int
    # Accelerators each allowed size has (catalog), what a node of it must advertise.
    accelerators: Mapping[str, int]
    # The workloads placed on it (their object names).
    workloads: tuple[str, ...]


@dataclass(frozen=True)
class RoutePlan:
    """The HTTPRoute the AI Gateway's controller writes from a workload's AIGatewayRoute (same name and namespace,
    gateway.networking.k8s.io/v1): the route Envoy Gateway programs and reports on."""

    name: str
    namespace: str
    gateway: str
    gateway_namespace: str
    # Every `model` the workload answers (the served name, then its LoRA adapters), matched exactly.
    model_names: tuple[str, ...]
    # What spec.rules must be (rendered by the gateway chart's own function).
    rules: tuple[Mapping[str, Any], ...]
    # "InferencePool" (vLLM: the pool of its pods, a next version's included) or "Backend" (Ray Serve: the Envoy
    # Gateway Backend naming its Serve Service).
    backend_kind: str
    backend_name: str
    # The InferencePool's pod selector (vLLM only).
    pool_selector: Mapping[str, str] | None = None
    # The header the AI Gateway sets from the request's `model` and the rules match on.
    model_header: str = "x-ai-eg-model"
    # The InferencePool's namespace (None: the route's).
    pool_namespace: str | None = None


@dataclass(frozen=True)
class PhasePlan:
    """A disaggregated workload's prefill pool and the plan's estimate of each phase (its P/D decision's), what the
    prefill and decode pools are each held to: neither pool's histograms measure the whole-path TTFT."""

    # The prefill pool's Prometheus `job` (its Service, `<name>-prefill`); the workload's `metrics_job` is the decode
    # pool's.
    prefill_job: str
    # One prompt's prefill on the prefill pool (queueing excluded, as vllm:request_prefill_time_seconds is).
    prefill_ms: float
    # The decode pool's step: its inter-token latency, no prompt chunks mixed in.
    decode_itl_ms: float
    # The prompt's KV cache moved from the prefill pod to the decode pod.
    transfer_ms: float
    # The labels that tell its prefill pods from its decode pods (the endpoint picker's role label).
    prefill_pod_labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # The prefill Deployment's (or LeaderWorkerSet's groups') bounds (its own ScaledObject's).
    prefill_replicas_min: int = 0
    prefill_replicas_max: int = 0


@dataclass(frozen=True)
class WorkloadPlan:
    """One workload: where its pods are, what they run, and the plan's figures the metrics are held against."""

    # Its key in `workloads` (None: the one-model `workload`) and its object name and namespace.
    key: str | None
    name: str
    namespace: str
    engine: Engine
    owner_kind: OwnerKind
    # The `model` clients send, and the `model_name` label of its vLLM metrics.
    served_model_name: str
    # Labels that select its serving pods (for Ray Serve: its GPU worker pods), its on-demand floor's too.
    pod_selector: Mapping[str, str]
    # The replica bounds, the on-demand floor included.
    replicas_min: int
    replicas_max: int
    nodes_per_replica: int
    # The image every serving pod runs (pinned by digest when images.lock.json has it).
    image: str
    # vLLM: the `vllm serve` arguments by pod role (server, or leader and worker of a LeaderWorkerSet group; a
    # disaggregated workload's prefill pods: prefill_role of theirs).
    args: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    # vLLM: the replicas of `<name>-floor`, the on-demand floor beside the owner KEDA scales (0: none).
    floor_replicas: int = 0
    # Ray Serve: the LLMConfig serveConfigV2 must carry.
    llm_config: Mapping[str, Any] | None = None
    # The GPU NodePool and the planned instance type.
    pool: str = ""
    instance_type: str = ""
    accelerator_name: str = ""
    accelerators_per_node: int = 1
    # The plan's figures.
    kv_cache_tokens: int = 0
    itl_estimate_ms: float = 0.0
    # None: the plan has no TTFT estimate.
    ttft_estimate_ms: float | None = None
    target_concurrency: int = 0
    # The SLO (config `slo`).
    slo_ttft_p99_ms: float = 0.0
    slo_itl_p99_ms: float = 0.0
    # Cold start: a replica on a node that is already up (image, weights, warm-up) and on a new node (plus launch).
    start_warm_s: float = 0.0
    start_new_node_s: float = 0.0
    # The Prometheus `job` label of its series (the Service for vLLM, the RayService for Ray Serve).
    metrics_job: str = ""
    # What a calibration point records besides the measurements.
    model: str = ""
    model_type: str = "dense"
    weight_format: str = ""
    # The weight format the config asked for (auto: the checkpoint's own), as the planner takes it.
    requested_weight_format: str = "auto"
    kv_cache_dtype: str = "auto"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    route: RoutePlan | None = None
    # Disaggregated: its prefill pool and per-phase estimates (None: one pool serves both phases).
    phases: PhasePlan | None = None

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size


@dataclass(frozen=True)
class EnvironmentPlan:
    """Everything verify holds one environment's cluster against."""

    environment: str
    pools: tuple[PoolPlan, ...]
    workloads: tuple[WorkloadPlan, ...]
    # What production lets through by decision (accepted_risks: id -> why), listed on every report.
    accepted_risks: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
