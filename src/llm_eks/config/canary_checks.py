"""Where a workload may declare its next version (`canary`)."""

from __future__ import annotations

from llm_eks.config.canary import canary_key
from llm_eks.config.environment import EnvironmentConfig
from llm_eks.errors import ConfigError, fail


def validate_canaries(c: EnvironmentConfig, path: str) -> None:
    """Where a next version may be declared: a vLLM workload of `workloads`, behind the environment's gateway (its
    route is what splits the traffic)."""
    if c.workload.canary is not None and not c.workloads:
        raise ConfigError(
            f"{path}.workload.canary: only in a workload of `workloads` behind the environment's `gateway` (its "
            "route splits the traffic between the two versions); move the workload there"
        )
    for key, w in c.workloads.items():
        if w.canary is None:
            continue
        where = f"{path}.workloads.{key}.canary"
        if c.gateway is None:
            raise ConfigError(
                f"{where}: needs the environment's `gateway` (its route splits the traffic between the two versions)"
            )
        if w.engine != "vllm":
            raise fail(
                f"{where}",
                w.engine,
                "is for engine vllm (the gateway weighs two InferencePools; Ray Serve routes "
                "inside its own application)",
            )
        if canary_key(key) in c.workloads:
            raise fail(f"{where}", key, f"names the next version {canary_key(key)!r}, already a workload here")
        w.canary.validate(where)
        if w.autoscaling.scale_to_zero is not None:
            # Istio 1.30.3 picks endpoints for both pools with one pool's picker: an empty pool fails the route
            # whole (istio/istio#61594), so neither version may scale to zero while both are routed.
            raise ConfigError(
                f"{path}.workloads.{key}.autoscaling.scale_to_zero: is not allowed with a canary; both versions keep "
                "at least one replica while the route splits traffic between them"
            )
        if w.canary.replicas is not None and w.canary.replicas.min < 1:
            raise fail(
                f"{where}.replicas.min",
                w.canary.replicas.min,
                "must be at least 1 (the route sends the next version its share only while it has a replica)",
            )
