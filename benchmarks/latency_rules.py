"""The rules that decide, before any scoring, which published runs the latency model is scored on and fitted to. Each
rule reads only what the run's source states (tests/fixtures/latency/published.json) or what the planner computes
from the run's settings, never the model's error on it; a run that breaks one is listed with the rule's id and kept
in the fixture. The accuracy page prints these rules (docgen/accuracy.py) above the tables they decide.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm_eks.catalog.accelerators import instance_type
from llm_eks.errors import ConfigError

Run = dict[str, Any]

# Engine flags that change what a step does in ways the model does not describe.
UNMODELLED_FLAGS = ("--enforce-eager", "--speculative-config", "--cpu-offload-gb", "--enable-lora", "--kv-transfer")
# A KV cache this full means the scheduler was short of blocks, so the batch was not the stated concurrency.
KV_FULL_PERCENT = 90.0


@dataclass(frozen=True)
class Rule:
    id: str
    text: str
    # Why `run` breaks the rule (one phrase), or None.
    check: Callable[[Run], str | None]
    # True: the rule excludes only the run's time to first token, its decode figure is still scored.
    ttft_only: bool = False


def version_rule(run: Run) -> str | None:
    """Why the run's vLLM is not one the model describes (none stated, or before the V1 engine), or None."""
    match = re.search(r"(\d+)\.(\d+)", str(run.get("vllm_version") or ""))
    if match is None:
        return "no vLLM version stated"
    if (int(match.group(1)), int(match.group(2))) < (0, 10):
        return f"vLLM {match.group(0)} (before the V1 engine became the default, 0.10)"
    return None


def _load(run: Run) -> str | None:
    if run.get("regime") not in ("fixed-concurrency", "wave"):
        return f"regime {run.get('regime')!r}: no fixed number of requests in flight"
    return None


def _held(run: Run) -> str | None:
    log = run.get("server_log") or {}
    if log.get("max_waiting"):
        return f"the server log shows {log['max_waiting']} requests waiting"
    if (log.get("max_kv_cache_usage_percent") or 0) >= KV_FULL_PERCENT:
        return f"the server log shows the KV cache {log['max_kv_cache_usage_percent']}% full"
    ttft = (run.get("ttft_ms") or {}).get("median")
    decode = (run.get("itl_ms") or {}).get("median") or (run.get("tpot_ms") or {}).get("median")
    out = run.get("mean_output_tokens") or run.get("output_len")
    if ttft and decode and out and ttft > decode * float(out):
        return f"median TTFT {ttft:g} ms exceeds the whole decode ({float(out):g} tokens x {decode:g} ms): queued"
    return None


def _hardware(run: Run) -> str | None:
    plan = run.get("llm_eks") or {}
    try:
        inst = instance_type(plan.get("instance_type", ""))
    except ConfigError:
        return f"no catalog instance {plan.get('instance_type')!r}"
    if inst.accelerator_vendor != "nvidia":
        return f"{inst.accelerator_name} is not an NVIDIA GPU"
    if int(run.get("tp") or 1) * int(run.get("pp") or 1) > inst.accelerators * max(1, int(run.get("nodes") or 1)):
        return "more GPUs than the instances hold"
    return None


def _features(run: Run) -> str | None:
    flags = " ".join(str(f) for f in run.get("flags") or [])
    flags += " " + str((run.get("source") or {}).get("serving_command") or "")
    used = [f for f in UNMODELLED_FLAGS if f in flags]
    return f"{', '.join(used)} (not modelled)" if used else None


def _prefix_cache(run: Run) -> str | None:
    hits = ((run.get("server_log") or {}).get("prefix_cache_hit_rate_percent")) or 0
    return f"the server log shows a {hits}% prefix-cache hit rate: prompts were partly cached" if hits > 0 else None


RULES: tuple[Rule, ...] = (
    Rule("R1", "The source states a vLLM version of 0.10 or later (the V1 engine and its scheduler).", version_rule),
    Rule(
        "R2",
        "A fixed number of requests in flight: a closed loop at `--max-concurrency`, or one wave of requests sent "
        "at once; runs at a request rate or with every prompt sent at once and no cap (saturation) are not scored.",
        _load,
    ),
    Rule(
        "R3",
        "The server held that load: no request waiting and the KV cache under 90 % full where the source prints the "
        "engine's log, and a median TTFT shorter than the whole decode (else the requests queued and the batch was "
        "not the concurrency).",
        _held,
    ),
    Rule("R4", "An NVIDIA GPU of a catalog instance, every GPU of the replica in the instances named.", _hardware),
    Rule(
        "R5",
        "No engine feature the model does not describe: eager mode, speculative decoding, CPU offload, LoRA, "
        "KV transfer.",
        _features,
    ),
    Rule(
        "R6",
        "Time to first token only: not scored where the engine's log shows prefix-cache hits (the prompt was partly "
        "computed before).",
        _prefix_cache,
        ttft_only=True,
    ),
)


# A run whose every request generates at least this share of output_len ran to the same length.
SAME_LENGTH_SHARE = 0.98


def arrivals(run: Run) -> str:
    """How the run's requests arrived, read from its settings: "synchronized" when they start in waves, because the
    run sent one wave, or because every prompt and output has the same length (a random dataset without a range
    ratio or length variance, and --ignore-eos or outputs that reached output_len) so each closed-loop wave ends,
    and the next starts, together; "steady" otherwise (lengths vary, so requests start one at a time)."""
    if run.get("regime") == "wave":
        return "synchronized"
    fixed = run.get("dataset") == "random" and not any("range-ratio" in str(f) for f in run.get("flags") or [])
    out, mean_out = run.get("output_len"), run.get("mean_output_tokens")
    same = "--ignore-eos" in (run.get("flags") or []) or bool(
        out and mean_out and float(mean_out) >= SAME_LENGTH_SHARE * float(out)
    )
    return "synchronized" if fixed and same else "steady"


# The first vLLM release that schedules asynchronously by default (vllm-project/vllm#27614; djl#3833 states 0.14).
ASYNC_DEFAULT_FROM = (0, 14)


def async_scheduling(run: Run) -> bool:
    """Whether the run's engine scheduled asynchronously: --async-scheduling given, or a version that defaults to it."""
    if "--async-scheduling" in (run.get("flags") or []):
        return True
    match = re.search(r"(\d+)\.(\d+)", str(run.get("vllm_version") or ""))
    return match is not None and (int(match.group(1)), int(match.group(2))) >= ASYNC_DEFAULT_FROM


def excluded(run: Run) -> tuple[str, str] | None:
    """The first rule that excludes the whole run, as (rule id, why), or None."""
    for rule in RULES:
        if not rule.ttft_only and (why := rule.check(run)):
            return rule.id, why
    return None


def ttft_excluded(run: Run) -> tuple[str, str] | None:
    """The first rule that excludes the run's time to first token (the whole-run rules included), or None."""
    for rule in RULES:
        if why := rule.check(run):
            return rule.id, why
    return None
