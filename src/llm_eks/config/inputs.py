"""Checks of config values that AWS, KEDA or the Hugging Face Hub would reject at deploy time, or accept to the
user's surprise: each is a one-line ConfigError naming the field's path, the value and what is allowed.

The single-value rules of the config package (`validation` checks across fields); pure Python.
"""

from __future__ import annotations

import ipaddress
import unicodedata
import zoneinfo
from collections.abc import Mapping
from typing import TYPE_CHECKING

from llm_eks import aws_ids
from llm_eks.error_codes import E113, E116, E117, E129, E130, E203
from llm_eks.errors import ConfigError, did_you_mean, fail
from llm_eks.validation import is_hf_repo_id

if TYPE_CHECKING:
    from llm_eks.config.environment import WorkloadConfig
    from llm_eks.config.workload_options import SloConfig


# VPC ranges that never collide with internet addresses.
PRIVATE_RANGES = tuple(
    ipaddress.IPv4Network(r) for r in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)
# The most a public API endpoint may be opened to: one /8. Many CIDRs that together cover more (two /1s are the
# whole internet) are "the internet" with extra steps.
_MAX_PUBLIC_ADDRESSES = 2**24
# AWS's tag rule (the Tag API pattern [\p{L}\p{Z}\p{N}_.:/=+\-@]): Unicode letters, separators (spaces) and digits,
# plus these characters.
_TAG_PUNCTUATION = frozenset("_.:/=+-@")
# SLO floors, in milliseconds: below them the SLO cannot be met by any deployment, so the value is a mistake
# (most often seconds written in a milliseconds field).
_SLO_FLOORS_MS = {
    "ttft_p99_ms": (
        10.0,
        "a first token needs a network round trip, a scheduler step and a prefill pass over the whole prompt",
    ),
    "itl_p99_ms": (1.0, "each output token is a forward pass that reads every weight from GPU memory"),
}
_SLO_CEILING_MS = 600_000
# KEDA's cron scaler parses with robfig/cron's standard parser (cron.New + AddFunc): 5 fields with these bounds
# (robfig/cron spec.go; a day-of-week of 7 is an error there, not Sunday), month and weekday names in any case.
_CRON_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")),
    ("day-of-week", 0, 6, ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")),
)


def validate_public_cidrs(cidrs: tuple[str, ...], path: str) -> None:
    networks = ipaddress.collapse_addresses(ipaddress.IPv4Network(c) for c in cidrs)
    total = sum(n.num_addresses for n in networks)
    if total > _MAX_PUBLIC_ADDRESSES:
        raise fail(
            E113,
            path,
            list(cidrs),
            f"together they open the API to {total:,} addresses ({total / 2**32:.0%} of IPv4); the union may cover "
            f"at most {_MAX_PUBLIC_ADDRESSES:,} (one /8): list your own ranges",
        )


def _tag_text_ok(text: str) -> bool:
    return all(ch in _TAG_PUNCTUATION or unicodedata.category(ch)[0] in "LNZ" for ch in text)


def validate_tags(tags: Mapping[str, str], path: str) -> None:
    allowed = "letters, digits, spaces and _ . : / = + - @"
    for key, value in tags.items():
        if not 1 <= len(key) <= 128 or not _tag_text_ok(key) or key.lower().startswith("aws:"):
            raise fail(E116, path, key, f"tag keys are 1-128 characters of {allowed}, and may not start with 'aws:'")
        if key in aws_ids.KARPENTER_RESERVED_TAGS or key.startswith(aws_ids.KARPENTER_RESERVED_TAG_PREFIXES):
            raise fail(
                E116, path, key, "is a tag key Karpenter sets itself on the nodes it launches; choose another key"
            )
        if len(value) > 256 or not _tag_text_ok(value):
            raise fail(E116, f"{path}.{key}", value, f"tag values are 0-256 characters of {allowed}")


def validate_slo(slo: SloConfig, path: str) -> None:
    for name, (floor, reason) in _SLO_FLOORS_MS.items():
        value = getattr(slo, name)
        if not floor <= value <= _SLO_CEILING_MS:
            raise fail(
                E129,
                f"{path}.{name}",
                value,
                f"must be {floor:g} to {_SLO_CEILING_MS} milliseconds; {reason}, which takes at least {floor:g} ms",
            )


def validate_model_spec(w: WorkloadConfig, path: str) -> None:
    """A model described in config is checked here, with its field path (catalog ids are the planner's)."""
    if w.model_spec is None:
        return
    from llm_eks.catalog.models import ModelSpec

    if not is_hf_repo_id(w.model):
        raise fail(
            E203,
            f"{path}.model",
            w.model,
            "with model_spec, must be a Hugging Face repo id: org/name of letters, digits, '-', '_' and '.', "
            "at most 96 characters, with no '--' or '..'",
        )
    if "id" in w.model_spec:
        raise ConfigError(E203, f"{path}.model_spec.id: not allowed; the model's id is workload.model")
    ModelSpec.from_mapping({"id": w.model, **w.model_spec}, f"{path}.model_spec")


def _cron_field_problem(field_text: str, low: int, high: int, names: tuple[str, ...]) -> str | None:
    def number(text: str) -> int | None:
        if text.upper() in names:
            return names.index(text.upper()) + low
        return int(text) if text.isdigit() and low <= int(text) <= high else None

    for part in field_text.split(","):
        spread, _, step = part.partition("/")
        if step and (not step.isdigit() or int(step) < 1):
            return f"step {step!r} must be a positive integer"
        if spread == "*":  # robfig also reads '?' as '*'; the chart's pattern does not, so neither does config
            continue
        first, _, last = spread.partition("-")
        start, end = number(first), number(last) if last else None
        if start is None or (last and (end is None or end < start)):
            return f"{part!r} must be *, a value or a range a-b within {low}-{high}" + (
                f" (or {names[0]}-{names[-1]})" if names else ""
            )
    return None


def validate_scale_to_zero(w: WorkloadConfig, path: str) -> None:
    """The KEDA cron schedule, checked here so its errors name the environment (the chart checks props too)."""
    s = w.autoscaling.scale_to_zero
    if s is None:
        return
    p = f"{path}.autoscaling.scale_to_zero"
    if w.engine != "vllm":
        raise ConfigError(
            E130,
            f"{p}: not allowed with engine {w.engine!r}; only the vllm engine scales to zero (on a KEDA cron schedule)",
        )
    if w.replicas.min != 0:
        raise fail(
            E130,
            f"{path}.replicas.min",
            w.replicas.min,
            "must be 0 with autoscaling.scale_to_zero (the schedule is what brings replicas back)",
        )
    # KEDA resolves the zone with Go's time.LoadLocation: any IANA tz database name.
    if s.timezone not in zoneinfo.available_timezones():
        raise fail(
            E130,
            f"{p}.timezone",
            s.timezone,
            f"{did_you_mean(s.timezone, zoneinfo.available_timezones())}must be a time zone of the IANA tz "
            "database such as Europe/Paris or UTC",
        )
    for name in ("start", "end"):
        expr = getattr(s, name)
        fields = expr.split(" ")
        problem = "must have 5 fields separated by single spaces" if len(fields) != len(_CRON_FIELDS) else None
        for text, (label, low, high, names) in zip(fields, _CRON_FIELDS, strict=False):
            if problem is None and (problem := _cron_field_problem(text, low, high, names)) is not None:
                problem = f"its {label} field {problem}"
        if problem is not None:
            raise fail(
                E130,
                f"{p}.{name}",
                expr,
                f"{problem}; a cron expression is minute hour day-of-month month day-of-week, such as '0 8 * * 1-5'",
            )
    if s.start == s.end:
        raise fail(
            E130, f"{p}.end", s.end, "must differ from start (KEDA rejects a window that opens and closes at once)"
        )


# One line of why, as short as a cdk-nag acknowledgement's: it is read beside the warning it silences.
_ACKNOWLEDGEMENT_REASON_CHARS = 160


def require_reason(path: str, reason: object) -> None:
    """An acknowledgement's reason: one line of 1-160 characters."""
    if (
        not isinstance(reason, str)
        or not reason.strip()
        or len(reason) > _ACKNOWLEDGEMENT_REASON_CHARS
        or "\n" in reason
    ):
        raise fail(E117, path, reason, f"must say why in one line of 1-{_ACKNOWLEDGEMENT_REASON_CHARS} characters")


def validate_acknowledged_warnings(acknowledged: Mapping[str, str], path: str) -> None:
    """Each key a plan warning id, each reason one line of 1-160 characters."""
    from llm_eks.planner import WARNING_IDS

    for warning_id, reason in acknowledged.items():
        if warning_id not in WARNING_IDS:
            raise fail(E117, path, warning_id, f"must be a plan warning id: {', '.join(WARNING_IDS)}")
        require_reason(f"{path}.{warning_id}", reason)
