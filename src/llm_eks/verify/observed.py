"""What verify read from the cluster, as plain data: the Kubernetes objects as the API server returned them (JSON,
camelCase, as `kubectl get -o json` shows them) and the Prometheus answers per workload. Filled by
`llm_eks.verify.kube` and `llm_eks.verify.prometheus`, read by the checks; small readers of object fields here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

Object = Mapping[str, Any]


@dataclass(frozen=True)
class WorkloadObjects:
    """One workload's objects; None where the API server answered 404 (missing object, or its kind unknown)."""

    # The Deployment, LeaderWorkerSet or RayService.
    owner: Object | None
    # Its serving pods (selected by the plan's labels), any phase.
    pods: tuple[Object, ...] = ()
    # Behind a gateway: its HTTPRoute, and the InferencePool the route targets (vLLM).
    route: Object | None = None
    inference_pool: Object | None = None
    # A disaggregated workload's prefill Deployment (its pods are among `pods`, told apart by their role label).
    prefill_owner: Object | None = None


@dataclass(frozen=True)
class ClusterState:
    """Everything verify read through the API server."""

    # The kubeconfig context and its API server.
    context: str
    server: str
    # NodePool name -> the object (None: not found).
    node_pools: Mapping[str, Object | None]
    # Nodes Karpenter launched (label karpenter.sh/nodepool), of every pool.
    nodes: tuple[Object, ...]
    # Workload object name -> its objects.
    workloads: Mapping[str, WorkloadObjects]


@dataclass(frozen=True)
class KvSample:
    """The KV cache one vLLM server reports (vllm:cache_config_info) and which labels gave it."""

    pod: str
    tokens: int
    # "kv_cache_size_tokens" (vLLM's group-aware figure) or "num_gpu_blocks x block_size".
    source: str


@dataclass(frozen=True)
class Latency:
    """A latency histogram over the window: median and p99 in seconds (None: no samples) and the request count."""

    median_s: float | None = None
    p99_s: float | None = None
    # Observations in the window (requests for TTFT, token gaps for ITL); None: the series does not exist.
    count: float | None = None

    @property
    def measured(self) -> bool:
        return bool(self.count) and self.median_s is not None and self.p99_s is not None


@dataclass(frozen=True)
class WorkloadMetrics:
    """Prometheus's answers for one workload over the window."""

    kv: tuple[KvSample, ...] = ()
    # A disaggregated workload's prefill servers' KV cache (the decode pool's is `kv`).
    prefill_kv: tuple[KvSample, ...] = ()
    ttft: Latency = field(default_factory=Latency)
    itl: Latency = field(default_factory=Latency)
    # Requests running per engine on average over the window (Little's law over vLLM's inference-time histogram).
    running_mean: float | None = None
    # Prompt and generated tokens per finished request (vLLM's per-request histograms), and generated tokens per
    # second.
    mean_input_tokens: float | None = None
    mean_output_tokens: float | None = None
    output_tokens_per_s: float | None = None
    # A disaggregated workload's prefill time per request on its prefill pool (None: one pool, nothing asked).
    prefill: Latency | None = None


NO_METRICS = WorkloadMetrics()
EMPTY: Mapping[str, Any] = MappingProxyType({})


def meta(obj: Object) -> Mapping[str, Any]:
    return obj.get("metadata") or EMPTY


def name(obj: Object) -> str:
    return str(meta(obj).get("name", "?"))


def labels(obj: Object) -> Mapping[str, str]:
    return meta(obj).get("labels") or EMPTY


def status(obj: Object) -> Mapping[str, Any]:
    return obj.get("status") or EMPTY


def condition(obj: Object, kind: str) -> Mapping[str, Any] | None:
    """The status condition of type `kind`, if the object has one."""
    for c in status(obj).get("conditions") or ():
        if c.get("type") == kind:
            return c  # type: ignore[no-any-return]
    return None


def is_true(obj: Object, kind: str) -> bool:
    c = condition(obj, kind)
    return c is not None and c.get("status") == "True"


def timestamp(value: Any) -> datetime | None:
    """An RFC 3339 timestamp of the API (`2026-12-01T10:00:00Z`); None when absent or not one."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def created(obj: Object) -> datetime | None:
    return timestamp(meta(obj).get("creationTimestamp"))


def terminating(obj: Object) -> bool:
    return meta(obj).get("deletionTimestamp") is not None


def container(pod: Object, container_name: str) -> Mapping[str, Any] | None:
    """The spec of the pod's container named `container_name`."""
    for c in (pod.get("spec") or EMPTY).get("containers") or ():
        if c.get("name") == container_name:
            return c  # type: ignore[no-any-return]
    return None


def restarts(pod: Object) -> int:
    return sum(int(c.get("restartCount") or 0) for c in status(pod).get("containerStatuses") or ())


def why_not_ready(pod: Object) -> str:
    """One phrase for a pod that is not Ready: unscheduled, a container waiting (and why), or its phase."""
    scheduled = condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.get("status") != "True":
        return f"not scheduled ({scheduled.get('reason') or 'pending'})"
    for c in (*(status(pod).get("initContainerStatuses") or ()), *(status(pod).get("containerStatuses") or ())):
        waiting = (c.get("state") or EMPTY).get("waiting")
        if waiting:
            return f"{c.get('name')} {waiting.get('reason') or 'waiting'}"
    return str(status(pod).get("phase") or "not Ready")
