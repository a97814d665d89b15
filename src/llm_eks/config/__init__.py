"""Typed, validated configuration for one environment, read from cdk.json context `environments`.

Every error is one line: `environments.<env>.<field>: <value> is not allowed; <what is allowed>`, raised before any
construct is built. No aws_cdk import here: the `llm-eks plan` CLI reads the same config and must stay fast.

`environment` holds the dataclasses, `inputs` the single-value rules (CIDRs, tags, time zones, S3 URIs, ...),
`validation` the checks across fields; this module reads cdk.json's `environments` with them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from llm_eks.aws_ids import RESERVATION_TYPES
from llm_eks.config.canary import CanaryConfig
from llm_eks.config.environment import (
    ACCEPTED_RISKS,
    ALPHA_FEATURES,
    CAPACITY_TYPES,
    COMMIT,
    ENGINES,
    LOAD_BALANCER_SUBNET_PREFIX,
    WEIGHT_SOURCES,
    CapacityReservationConfig,
    EndpointConfig,
    EnvironmentConfig,
    GatewayConfig,
    ServedWorkload,
    SystemNodesConfig,
    VpcConfig,
    WeightsBucketConfig,
    WorkloadConfig,
)
from llm_eks.config.schema import build
from llm_eks.config.tenants import (
    ApiKeyCredentialConfig,
    ClusterIssuerConfig,
    IssuerConfig,
    JwtCredentialConfig,
    TenantConfig,
    TenantCredentialConfig,
    TenantLimitsConfig,
)
from llm_eks.config.validation import validate_environment, validate_policy_cidr
from llm_eks.config.workload_options import (
    AlbConfig,
    AutoscalingConfig,
    BenchmarkConfig,
    LoadBalancerConfig,
    ReplicasConfig,
    SloConfig,
    WorkingHoursConfig,
)
from llm_eks.error_codes import E102, E106
from llm_eks.errors import ConfigError, did_you_mean, fail
from llm_eks.hub.records import MODELS_DIR, load_record, model_file, recorded_model

_ENV_NAME = re.compile(r"^[a-z][a-z0-9-]{0,19}$")


def load_environments(context: Mapping[str, Any], models_dir: Path | None = None) -> dict[str, EnvironmentConfig]:
    """Every environment in the CDK context key `environments`, validated. `models_dir`: the app's recorded models
    (default: models in the working directory, where the CDK CLI runs the app)."""
    raw = context.get("environments")
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(
            E102, "environments: missing or empty; cdk.json context must map environment names to objects"
        )
    return {name: parse_environment(name, body, models_dir) for name, body in raw.items()}


def select_environments(environments: Mapping[str, EnvironmentConfig], selected: str | None) -> list[EnvironmentConfig]:
    """All environments, or the one named by `-c env=NAME`."""
    if selected is None:
        return list(environments.values())
    if selected not in environments:
        raise ConfigError(
            E102,
            f"env: {selected!r} is not allowed; {did_you_mean(selected, environments)}"
            f"defined environments: {', '.join(environments)}",
        )
    return [environments[selected]]


def parse_environment(name: str, body: Any, models_dir: Path | None = None) -> EnvironmentConfig:
    """One environment from its cdk.json object; raises ConfigError with the field path. A workload model recorded
    in `models_dir` (default: models in the working directory) is read from its file."""
    path = f"environments.{name}"
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise fail(
            E102,
            "environments",
            name,
            "names are 1-20 characters: lowercase letters, digits and '-', starting with a letter",
        )
    if body is None:
        raise fail(E102, path, body, "must be an object (use {} for an environment with every default)")
    if isinstance(body, Mapping) and "name" in body:
        raise ConfigError(E102, f"{path}.name: not allowed; the environment's name is its key in environments")
    _refuse_removed_keys(body, path)
    if isinstance(body, Mapping) and "workloads" in body:
        if "workload" in body:
            raise ConfigError(
                E102, f"{path}.workload: not allowed together with workloads; move it into workloads under a name"
            )
        if isinstance(body["workloads"], Mapping) and not body["workloads"]:
            raise fail(E102, f"{path}.workloads", {}, "must name at least one workload (or use workload for one model)")
    config = build(
        EnvironmentConfig, {"name": name, **(body or {})} if isinstance(body, Mapping) else body, path, hidden=("name",)
    )
    validate_environment(config, path)
    validate_policy_cidr(body, config, path)
    models = Path(MODELS_DIR) if models_dir is None else models_dir
    if config.workloads:
        recorded = {
            key: _with_recorded_model(w, f"{path}.workloads.{key}", models) for key, w in config.workloads.items()
        }
        return dataclasses.replace(config, workloads=MappingProxyType(recorded))
    return dataclasses.replace(config, workload=_with_recorded_model(config.workload, f"{path}.workload", models))


# Keys a release removed, by where they were: what replaces them, in one line.
_REMOVED = {
    ("gateway", "ray_serve_without_api_key"): "every routed model needs a credential, and the gateway now checks one "
    "for every tenant (gateway.tenants; without tenants, each workload's own API key)",
    ("gateway", "auth"): "declare gateway.tenants instead: each caller with its own credential (api_key, or jwt with "
    "an issuer and a principal), the models it may call and its limits; without tenants each workload's own API key "
    "is its caller's credential",
    ("workload", "internal_alb"): "the internal ALB is workload.alb: {certificate_arn, inbound_cidrs} (HTTPS only, "
    "from client ranges outside the pods' subnets)",
    ("workload", "load_balancer"): "the internal ALB is workload.alb: {certificate_arn, inbound_cidrs} (HTTPS only, "
    "from client ranges outside the pods' subnets)",
}


def _refuse_removed_keys(body: Any, path: str) -> None:
    """A key an earlier release had is named with what replaces it, not with "unknown key"."""
    if not isinstance(body, Mapping):
        return
    sections: list[tuple[str, Any]] = [("gateway", body.get("gateway")), ("workload", body.get("workload"))]
    workloads = body.get("workloads")
    if isinstance(workloads, Mapping):
        sections += [(f"workloads.{key}", w) for key, w in workloads.items()]
    for where, section in sections:
        if not isinstance(section, Mapping):
            continue
        kind = "workload" if where.startswith("workload") else where
        for (owner, key), instead in _REMOVED.items():
            if owner == kind and key in section:
                raise ConfigError(E106, f"{path}.{where}.{key}: no longer exists; {instead}")


def _with_recorded_model(w: WorkloadConfig, path: str, models_dir: Path) -> WorkloadConfig:
    """The workload's model read from models/<org>/<name>.json (written by `llm-eks models add`) when it is recorded
    there; a model_spec in cdk.json describes the model itself, so no file is read for it."""
    if w.model_spec is not None:
        return w
    spec = recorded_model(models_dir, w.model, f"{path}.model")
    if spec is None:
        return w
    record = load_record(model_file(models_dir, w.model), w.model)
    return dataclasses.replace(w, recorded_model=spec, recorded_commit=record.commit)


__all__ = [
    "ACCEPTED_RISKS",
    "ALPHA_FEATURES",
    "CAPACITY_TYPES",
    "COMMIT",
    "ENGINES",
    "LOAD_BALANCER_SUBNET_PREFIX",
    "RESERVATION_TYPES",
    "WEIGHT_SOURCES",
    "AlbConfig",
    "ApiKeyCredentialConfig",
    "AutoscalingConfig",
    "BenchmarkConfig",
    "CanaryConfig",
    "CapacityReservationConfig",
    "ClusterIssuerConfig",
    "EndpointConfig",
    "EnvironmentConfig",
    "GatewayConfig",
    "IssuerConfig",
    "JwtCredentialConfig",
    "LoadBalancerConfig",
    "ReplicasConfig",
    "ServedWorkload",
    "SloConfig",
    "SystemNodesConfig",
    "TenantConfig",
    "TenantCredentialConfig",
    "TenantLimitsConfig",
    "VpcConfig",
    "WeightsBucketConfig",
    "WorkingHoursConfig",
    "WorkloadConfig",
    "load_environments",
    "parse_environment",
    "select_environments",
]
