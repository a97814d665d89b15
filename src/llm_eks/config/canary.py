"""A workload's next version (`canary` in a workload of `workloads`): what differs from the version that serves
now, and how traffic moves to it. The next version is served beside the current one as a workload of its own
(`<key>-canary`: its Deployment, Service, alerts) in the current version's namespace, and its pods join the current
version's InferencePool: the endpoint picker balances requests over both versions' pods, so the next version's share
of the traffic is its share of the pool's replicas (a "pool share"). Envoy AI Gateway v1.1.0 routes a rule to one
InferencePool only (its AIGatewayRoute CRD: "only one InferencePool backend is allowed per rule"), so two pools cannot
be weighted against each other. The smallest step is therefore one pod of the pool, and the next version leaves the
pool only by scaling to zero (rollback) or takes it over only by promotion (a deploy that moves its changes into the
workload)."""

from __future__ import annotations

from dataclasses import dataclass

from llm_eks.config.workload_options import ReplicasConfig
from llm_eks.error_codes import E133
from llm_eks.errors import ConfigError, fail

# The canary's key and namespace suffix: workload `llama` -> `llama-canary` (namespace inference-llama-canary).
CANARY_SUFFIX = "-canary"
# What a next version may change: the checkpoint, its format, the engine image and the engine's memory arguments.
# The model itself stays (clients keep asking for the same name); another model is another workload.
OVERRIDES = ("revision", "weight_format", "image", "kv_cache_dtype", "gpu_memory_utilization", "max_num_seqs")


@dataclass(frozen=True)
class CanaryConfig:
    """The next version and its rollout. Every override left out is the current version's."""

    # The Hub commit of the next checkpoint (production: 40 hex, as `revision`).
    revision: str | None = None
    # Its format (fp8, awq, ...): the plan of the next version may then pick other GPUs.
    weight_format: str | None = None
    # The next serving image (an engine release), e.g. vllm/vllm-openai:v0.33.1@sha256:...; production needs the
    # digest unless images-by-tag is an accepted risk.
    image: str | None = None
    # The engine's KV-cache dtype (e.g. fp8): more tokens per GPU, checked against the SLO like the rest.
    kv_cache_dtype: str | None = None
    # vLLM's share of GPU memory for the next version (its plan and KV cache follow).
    gpu_memory_utilization: float | None = None
    # vLLM's --max-num-seqs for the next version.
    max_num_seqs: int | None = None
    # The next version's replicas at any share above 0: at least min, at most max; None: the current version's.
    replicas: ReplicasConfig | None = None
    # Its share of the pool's replicas when this config is deployed (0-99), hence about that share of the requests.
    # 0: no pod of it runs until `llm-eks canary` raises the share (each step then waits for its pods to start).
    weight: int = 0
    # The shares `llm-eks canary` walks through, verifying the next version at each before the next step: as small a
    # first step as the pool allows (one pod: 5 % asks for one next pod beside at least 19 current ones, and is
    # rounded up to one pod otherwise), then about doubling. 100 is not a step: the current version leaves the pool
    # only when the next version is promoted (docs/how-to/promote.md).
    steps: tuple[int, ...] = (5, 25, 50)
    # How long each step is watched (its latency measured over this window) before the next: the drift alerts'
    # quantile window, long enough for a stable median at a few percent of the traffic.
    hold_minutes: int = 10

    def validate(self, path: str) -> None:
        if not any(getattr(self, name) is not None for name in OVERRIDES):
            raise ConfigError(
                E133,
                f"{path}: names no change; set at least one of {', '.join(OVERRIDES)} (what the next version changes)",
            )
        if not 0 <= self.weight <= 99:
            raise fail(
                E133,
                f"{path}.weight",
                self.weight,
                "must be 0 to 99 (the next version's share of the pool's replicas; all of it is a promotion)",
            )
        steps = list(self.steps)
        if not steps or steps != sorted(set(steps)) or steps[0] < 1 or steps[-1] > 99:
            raise fail(
                E133,
                f"{path}.steps",
                steps,
                "must rise strictly from at least 1 to at most 99 (100 is the promotion, docs/how-to/promote.md)",
            )
        if not 1 <= self.hold_minutes <= 1440:
            raise fail(E133, f"{path}.hold_minutes", self.hold_minutes, "must be 1 to 1440 (a day)")


def canary_key(key: str) -> str:
    return key + CANARY_SUFFIX
