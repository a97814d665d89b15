"""Where a workload may declare its next version (`canary`): a vLLM workload of `workloads` behind the gateway, whose
pods share its InferencePool (config/canary.py)."""

from __future__ import annotations

from llm_eks.config.canary import canary_key
from llm_eks.config.environment import EnvironmentConfig
from llm_eks.error_codes import E133
from llm_eks.errors import ConfigError, fail


def validate_canaries(c: EnvironmentConfig, path: str) -> None:
    """Where a next version may be declared: a vLLM workload of `workloads`, behind the environment's gateway (its
    route is what splits the traffic)."""
    if c.workload.canary is not None and not c.workloads:
        raise ConfigError(
            E133,
            f"{path}.workload.canary: only in a workload of `workloads` behind the environment's `gateway` (its "
            "route splits the traffic between the two versions); move the workload there",
        )
    for key, w in c.workloads.items():
        if w.canary is None:
            continue
        where = f"{path}.workloads.{key}.canary"
        if c.gateway is None:
            raise ConfigError(
                E133,
                f"{where}: needs the environment's `gateway` (its route splits the traffic between the two versions)",
            )
        if w.engine != "vllm":
            raise fail(
                E133,
                f"{where}",
                w.engine,
                "is for engine vllm (the next version's pods join the workload's InferencePool; Ray Serve routes "
                "inside its own application)",
            )
        if canary_key(key) in c.workloads:
            raise fail(E133, f"{where}", key, f"names the next version {canary_key(key)!r}, already a workload here")
        w.canary.validate(where)
        if w.autoscaling.scale_to_zero is not None:
            # The next version's share is its pods over the pool's: with the current version at zero, any next pod
            # would be all of the pool, a share no step asked for.
            raise ConfigError(
                E133,
                f"{path}.workloads.{key}.autoscaling.scale_to_zero: is not allowed with a canary; the next version's "
                "share is its pods over the pool's, so the current version keeps at least one replica",
            )
        if w.autoscaling.scale_to_zero is None and w.replicas.min < 1:
            raise fail(
                E133,
                f"{path}.workloads.{key}.replicas.min",
                w.replicas.min,
                "must be at least 1 with a canary (the next version's share is its pods over the pool's, so the "
                "current version keeps at least one replica)",
            )
        if w.canary.replicas is not None and w.canary.replicas.min < 1:
            raise fail(
                E133,
                f"{where}.replicas.min",
                w.canary.replicas.min,
                "must be at least 1 (any share above 0 runs at least one pod of the next version)",
            )
