"""Typed, validated configuration for one environment, read from cdk.json context `environments`.

Every error is one line: `environments.<env>.<field>: <value> is not allowed; <what is allowed>`, raised before any
construct is built. No aws_cdk import here: the `llm-eks plan` CLI reads the same config and must stay fast.

`environment` holds the dataclasses, `inputs` the single-value rules (CIDRs, tags, time zones, S3 URIs, ...),
`validation` the checks across fields; this module reads cdk.json's `environments` with them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from llm_eks.errors import ConfigError, did_you_mean, fail
from llm_eks.infra.config.environment import (
    CAPACITY_TYPES,
    ENGINES,
    LOAD_BALANCER_SUBNET_PREFIX,
    WEIGHT_SOURCES,
    AutoscalingConfig,
    BenchmarkConfig,
    EndpointConfig,
    EnvironmentConfig,
    LoadBalancerConfig,
    ReplicasConfig,
    SloConfig,
    SystemNodesConfig,
    VpcConfig,
    WorkingHoursConfig,
    WorkloadConfig,
)
from llm_eks.infra.config.validation import validate_environment, validate_policy_cidr
from llm_eks.infra.schema import build

_ENV_NAME = re.compile(r"^[a-z][a-z0-9-]{0,19}$")


def load_environments(context: Mapping[str, Any]) -> dict[str, EnvironmentConfig]:
    """Every environment in the CDK context key `environments`, validated."""
    raw = context.get("environments")
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError("environments: missing or empty; cdk.json context must map environment names to objects")
    return {name: parse_environment(name, body) for name, body in raw.items()}


def select_environments(environments: Mapping[str, EnvironmentConfig], selected: str | None) -> list[EnvironmentConfig]:
    """All environments, or the one named by `-c env=NAME`."""
    if selected is None:
        return list(environments.values())
    if selected not in environments:
        raise ConfigError(
            f"env: {selected!r} is not allowed; {did_you_mean(selected, environments)}"
            f"defined environments: {', '.join(environments)}"
        )
    return [environments[selected]]


def parse_environment(name: str, body: Any) -> EnvironmentConfig:
    """One environment from its cdk.json object; raises ConfigError with the field path."""
    path = f"environments.{name}"
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise fail(
            "environments",
            name,
            "names are 1-20 characters: lowercase letters, digits and '-', starting with a letter",
        )
    if body is None:
        raise fail(path, body, "must be an object (use {} for an environment with every default)")
    if isinstance(body, Mapping) and "name" in body:
        raise ConfigError(f"{path}.name: not allowed; the environment's name is its key in environments")
    config = build(
        EnvironmentConfig, {"name": name, **(body or {})} if isinstance(body, Mapping) else body, path, hidden=("name",)
    )
    validate_environment(config, path)
    validate_policy_cidr(body, config, path)
    return config


__all__ = [
    "CAPACITY_TYPES",
    "ENGINES",
    "LOAD_BALANCER_SUBNET_PREFIX",
    "WEIGHT_SOURCES",
    "AutoscalingConfig",
    "BenchmarkConfig",
    "EndpointConfig",
    "EnvironmentConfig",
    "LoadBalancerConfig",
    "ReplicasConfig",
    "SloConfig",
    "SystemNodesConfig",
    "VpcConfig",
    "WorkingHoursConfig",
    "WorkloadConfig",
    "load_environments",
    "parse_environment",
    "select_environments",
]
