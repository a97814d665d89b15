"""The configuration reference: every key an environment in cdk.json takes, read from the typed config
(llm_eks.config.environment): its JSON type, its default and the one-line reason written above the field."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from docgen.comments import field_comments
from docgen.markdown import cell, escape_placeholders
from llm_eks.aws_ids import RESERVATION_TYPES
from llm_eks.catalog.formats import FORMATS
from llm_eks.config import alerting, canary, workload_options
from llm_eks.config import environment as env
from llm_eks.manifests.alerting import RECEIVER_KINDS
from llm_eks.planner import KV_CACHE_DTYPES, WARNING_IDS

# The modules whose fields the reference lists (their comments are the reasons).
SOURCES = tuple(Path(m.__file__) for m in (env, workload_options, canary, alerting))

# Where a key takes one of a fixed set of values, the set the code checks against.
ALLOWED: dict[tuple[str, str], tuple[str, ...]] = {
    ("WorkloadConfig", "engine"): env.ENGINES,
    ("WorkloadConfig", "weights"): env.WEIGHT_SOURCES,
    ("WorkloadConfig", "capacity_types"): env.CAPACITY_TYPES,
    ("WorkloadConfig", "weight_format"): ("auto", *FORMATS),
    ("WorkloadConfig", "kv_cache_dtype"): KV_CACHE_DTYPES,
    ("WorkloadConfig", "acknowledged_warnings"): WARNING_IDS,
    ("EndpointConfig", "access"): ("private", "public"),
    ("CapacityReservationConfig", "reservation_type"): RESERVATION_TYPES,
    ("AlertReceiverConfig", "type"): RECEIVER_KINDS,
}

# The sections, in the order a reader meets them: (cdk.json path, dataclass).
SECTIONS: tuple[tuple[str, type[Any]], ...] = (
    ("environments.<env>", env.EnvironmentConfig),
    ("environments.<env>.vpc", env.VpcConfig),
    ("environments.<env>.endpoint", env.EndpointConfig),
    ("environments.<env>.system_nodes", env.SystemNodesConfig),
    ("environments.<env>.weights_bucket", env.WeightsBucketConfig),
    ("environments.<env>.gateway", env.GatewayConfig),
    ("environments.<env>.capacity_reservations.<family>", env.CapacityReservationConfig),
    ("environments.<env>.alerting", alerting.AlertingConfig),
    ("environments.<env>.alerting.receivers.<name>", alerting.AlertReceiverConfig),
    ("environments.<env>.workload, environments.<env>.workloads.<name>", env.WorkloadConfig),
    ("….canary", canary.CanaryConfig),
    ("….replicas", workload_options.ReplicasConfig),
    ("….slo", workload_options.SloConfig),
    ("….autoscaling", workload_options.AutoscalingConfig),
    ("….autoscaling.scale_to_zero", workload_options.WorkingHoursConfig),
    ("….load_balancer", workload_options.LoadBalancerConfig),
    ("….benchmark", workload_options.BenchmarkConfig),
)
# Keys the schema fills itself (never written in cdk.json).
_SKIPPED = {("EnvironmentConfig", "name")}


def all_field_comments() -> dict[tuple[str, str], str]:
    """(class, field) -> its reason, across SOURCES."""
    return {k: v for source in SOURCES for k, v in field_comments(source).items()}


def _json_type(annotation: str) -> str:
    """The JSON shape a field's annotation (a string: the module uses postponed annotations) accepts."""
    optional = annotation.endswith(" | None")
    core = annotation.removesuffix(" | None")
    names = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
    if core in names:
        text = names[core]
    elif all(part in names for part in core.split(" | ")):
        # A union of scalars (kv_offload: a size or "auto"), as words: a "|" would split the table's cell.
        text = " or ".join(names[part] for part in core.split(" | "))
    elif core.startswith("tuple["):
        text = f"list of {names.get(core[6:].split(',')[0], core[6:].split(',')[0])}s"
    elif core.startswith("Mapping[str, "):
        value = core.removeprefix("Mapping[str, ").removesuffix("]")
        text = "object" if value == "Any" else f"object of {names[value]}s" if value in names else f"name -> {value}"
    else:
        text = f"object ({core})"
    return f"{text} or null" if optional else text


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if dataclasses.is_dataclass(value):
        return "see below"
    if isinstance(value, MappingProxyType | Mapping):
        value = dict(value)
    if isinstance(value, tuple):
        value = list(value)
    return f"`{json.dumps(value)}`"


def _first_paragraph(cls: type[Any]) -> str:
    doc = cls.__doc__ or ""
    if doc.startswith(f"{cls.__name__}("):  # dataclasses' generated signature, not a docstring
        return ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def config_reference() -> str:
    """The reference as Markdown: one table per section."""
    reasons = all_field_comments()
    out: list[str] = []
    for path, cls in SECTIONS:
        out += [f"## `{path}`", ""]
        if intro := _first_paragraph(cls):
            out += [escape_placeholders(intro), ""]
        out += ["| key | type | default | why, and what is allowed |", "|---|---|---|---|"]
        for field in dataclasses.fields(cls):
            if field.metadata.get("derived") or (cls.__name__, field.name) in _SKIPPED:
                continue
            # An inherited field (GatewayConfig's listener fields) carries the comment of the class that declares it.
            why = next(
                (reasons[(c.__name__, field.name)] for c in cls.__mro__ if (c.__name__, field.name) in reasons), ""
            )
            if allowed := ALLOWED.get((cls.__name__, field.name)):
                why += f" One of: {', '.join(f'`{v}`' for v in allowed)}."
            cells = [f"`{field.name}`", _json_type(str(field.type)), _default(field), cell(why)]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)
