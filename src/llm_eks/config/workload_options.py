"""The small option groups of a workload (replicas, SLO, autoscaling, benchmark, load balancer): leaves of the
config that environment.py and canary.py both build on."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReplicasConfig:
    # One warm replica: a GPU replica takes minutes to start, so zero is opt-in (scale_to_zero).
    min: int = 1
    # Two: one more replica absorbs a burst or a Spot interruption; raise it with the traffic you expect.
    max: int = 2


@dataclass(frozen=True)
class SloConfig:
    # Interactive chat expects the first token within about a second at p99.
    ttft_p99_ms: float = 1000.0
    # ~20 tokens/s per stream reads faster than a person reads.
    itl_p99_ms: float = 50.0


@dataclass(frozen=True)
class BenchmarkConfig:
    """The `vllm bench serve` workload the benchmark Job sends."""

    # Request sizes come from the workload's typical sizes, so the benchmark measures what the plan assumed.
    # 4 requests/s is a steady load a single replica of the default plan should hold inside its SLO.
    request_rate: float = 4.0
    # 200 prompts at 4/s is under a minute of load: enough samples for a stable p99 without a long run.
    num_prompts: int = 200


@dataclass(frozen=True)
class WorkingHoursConfig:
    """Keep replicas up inside these hours; outside them the workload may sit at zero (KEDA cron trigger).

    No in-stack signal can wake a Deployment at zero on a request (vLLM's metrics vanish with its pods), so the
    clock is the activation signal. Open the window one cold start early (see the plan's scale-out time).
    """

    # An IANA tz database name (Europe/Paris, UTC): the hours are a team's, not the cluster's.
    timezone: str
    # Cron expressions (minute hour day-of-month month day-of-week): when the window opens...
    start: str
    # ...and when it closes.
    end: str


@dataclass(frozen=True)
class AutoscalingConfig:
    # Queue-based: scale up once more than this many requests wait per replica.
    waiting_per_replica: int = 4
    # KV-cache pressure: scale up when average usage passes this fraction (vllm:kv_cache_usage_perc is 0..1).
    kv_cache_usage: float = 0.8
    # Off by default: at zero replicas the first request waits for a full GPU cold start.
    scale_to_zero: WorkingHoursConfig | None = None


@dataclass(frozen=True)
class LoadBalancerConfig:
    """The gateway's internal NLB: its listener and who may reach it."""

    # HTTPS with this ACM certificate (in the stack's region). Required unless allow_http.
    certificate_arn: str | None = None
    # Plain HTTP instead: an explicit choice (requests and API keys cross the VPC in clear); never in production.
    allow_http: bool = False
    # IPv4 CIDRs the NLB admits: client ranges, never ones that hold pods.
    inbound_cidrs: tuple[str, ...] = ()


@dataclass(frozen=True)
class AlbConfig:
    """An internal ALB in front of the one-model workload's Service: HTTPS only, from the client ranges listed."""

    # Its ACM certificate (in the stack's region): the ALB serves HTTPS on 443 and nothing else.
    certificate_arn: str
    # IPv4 CIDRs its security group admits: client ranges outside the pods' subnets (with the VPC CNI every pod
    # holds a VPC address, so the VPC's CIDR would admit every pod).
    inbound_cidrs: tuple[str, ...]
