"""DRAIN: A container running vLLM (`vllm serve` or vllm.entrypoints.openai.api_server in command/args, or the
vllm/vllm-openai image with its `vllm serve` entrypoint not overridden by `command`) must set
`--shutdown-timeout N` (N > 0; vLLM's default 0 aborts in-flight requests on SIGTERM), and preStop
(lifecycle.preStop.sleep.seconds, or an exec `sleep N`) + N must be below terminationGracePeriodSeconds
(default 30), which must be at most 110 s (the 2-minute Spot notice minus Karpenter's reaction time). A
timeout set only through `--config FILE` is not seen; one given as a shell variable is skipped.

The check knows the vLLM release a container runs where its image says it: AWS's Neuron vLLM containers
(`pytorch-inference-vllm-neuronx:<vLLM version>-...`). vLLM 0.16 and older have no `--shutdown-timeout` (vLLM 0.16.0's
engine/arg_utils.py defines none; its launcher cancels the server on SIGTERM), so there the in-flight requests must
finish before SIGTERM: passing the flag is a finding (the server refuses an unknown argument), and the preStop must
outlast the 15 s of endpoint removal the charts allow and stay below terminationGracePeriodSeconds (at most 110 s).
"""

from __future__ import annotations

import itertools
import math
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from llm_eks.manifests.checks.findings import DRAIN, Finding
from llm_eks.manifests.checks.objects import (
    PodTemplate,
    as_int,
    list_at,
    mapping_at,
    mappings_at,
    object_ref,
    part_prefix,
    value_at,
)
from llm_eks.manifests.pods import MAX_GRACE_SECONDS

# Kubernetes' default terminationGracePeriodSeconds.
DEFAULT_GRACE_SECONDS = 30

_VLLM_IMAGE = re.compile(r"(^|/)vllm/vllm-openai(:|@|$)")
# AWS's Neuron vLLM containers name the vLLM release first in their tag (aws-neuron/deep-learning-containers README).
_NEURON_VLLM_IMAGE = re.compile(r"(^|/)pytorch-inference-vllm-neuronx:(\d+)\.(\d+)\.(\d+)")
# The newest vLLM release read without --shutdown-timeout (0.16.0); 0.29.0's has it.
LAST_WITHOUT_SHUTDOWN_TIMEOUT = (0, 16)
# What the charts give endpoint removal before SIGTERM (VllmProps.pre_stop_seconds): a preStop that drains in-flight
# requests too must be longer.
ENDPOINT_REMOVAL_SECONDS = 15
_SLEEP = re.compile(r"(?:^|[;&|\s])sleep\s+(\d+(?:\.\d+)?)s?(?:$|[;&|\s])")


def _words(items: Sequence[Any]) -> list[str]:
    """Command/args as words; an element with spaces (a shell script) is split the way a shell would."""
    out: list[str] = []
    for item in items:
        text = str(item)
        if any(c.isspace() for c in text):
            try:
                out.extend(shlex.split(text))
            except ValueError:
                out.extend(text.split())
        else:
            out.append(text)
    return out


def _runs_vllm(container: Mapping[str, Any]) -> bool:
    words = _words([*list_at(container, "command"), *list_at(container, "args")])
    if any(a == "vllm" and b == "serve" for a, b in itertools.pairwise(words)):
        return True
    if any("vllm.entrypoints.openai.api_server" in w for w in words):
        return True
    # The image's ENTRYPOINT is `vllm serve`; an explicit command replaces it.
    return bool(_VLLM_IMAGE.search(str(container.get("image", "")))) and not list_at(container, "command")


def _shutdown_timeout(container: Mapping[str, Any]) -> int | str | None:
    """vLLM's --shutdown-timeout (argparse also takes `=value` and vLLM accepts underscores); None when absent, the
    text when it is not a number (e.g. `$TIMEOUT` in a shell script: unknown here)."""
    words = _words([*list_at(container, "command"), *list_at(container, "args")])
    value: str | None = None
    for i, word in enumerate(words):
        flag, eq, inline = word.partition("=")
        if flag.replace("_", "-") == "--shutdown-timeout":
            value = inline if eq else (words[i + 1] if i + 1 < len(words) else "")
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return value


def drains_after_sigterm(container: Mapping[str, Any]) -> bool:
    """False for a container whose image is a Neuron vLLM container of a release without --shutdown-timeout."""
    match = _NEURON_VLLM_IMAGE.search(str(container.get("image", "")))
    if match is None:
        return True
    return (int(match.group(2)), int(match.group(3))) > LAST_WITHOUT_SHUTDOWN_TIMEOUT


def _pre_stop_seconds(container: Mapping[str, Any]) -> int:
    pre_stop = mapping_at(container, "lifecycle", "preStop")
    if "sleep" in pre_stop:
        return as_int(value_at(pre_stop, "sleep", "seconds"), 0)
    command = list_at(pre_stop, "exec", "command")
    match = _SLEEP.search(" ".join(str(c) for c in command))
    return math.ceil(float(match.group(1))) if match else 0


def check_drain(templates: Sequence[PodTemplate]) -> Iterator[Finding]:
    """DRAIN findings: vLLM containers that cannot finish in-flight requests within a Spot notice."""
    for template in templates:
        grace = as_int(template.spec.get("terminationGracePeriodSeconds"), DEFAULT_GRACE_SECONDS)
        for container in mappings_at(template.spec, "containers"):
            if not _runs_vllm(container):
                continue
            where = f"{part_prefix(template)}container {container.get('name', '?')}"
            pre_stop = _pre_stop_seconds(container)
            timeout = _shutdown_timeout(container)
            if not drains_after_sigterm(container):
                yield from _check_pre_stop_drain(template, where, pre_stop, timeout, grace)
                continue
            if isinstance(timeout, str):
                continue  # set at run time; nothing to add up here
            if not timeout:
                shown = "without --shutdown-timeout" if timeout is None else "with --shutdown-timeout 0"
                yield Finding(
                    DRAIN,
                    object_ref(template.obj),
                    f"{where} runs vLLM {shown}, so SIGTERM aborts in-flight requests (vLLM's default 0 = abort)",
                    f"pass --shutdown-timeout N with preStop {pre_stop} s + N below terminationGracePeriodSeconds "
                    f"(at most {MAX_GRACE_SECONDS} s), e.g. {max(MAX_GRACE_SECONDS - pre_stop - 5, 1)}",
                )
                continue
            drain = pre_stop + timeout
            if grace > MAX_GRACE_SECONDS:
                yield Finding(
                    DRAIN,
                    object_ref(template.obj),
                    f"{where}: terminationGracePeriodSeconds {grace} s is above {MAX_GRACE_SECONDS} s, longer than a "
                    "Spot interruption leaves (2-minute notice); the node goes away mid-drain",
                    f"set terminationGracePeriodSeconds to at most {MAX_GRACE_SECONDS} and keep preStop + "
                    "--shutdown-timeout below it",
                )
            if drain >= grace:
                yield Finding(
                    DRAIN,
                    object_ref(template.obj),
                    f"{where}: preStop {pre_stop} s + --shutdown-timeout {timeout} s = {drain} s is not below "
                    f"terminationGracePeriodSeconds {grace} s; the kubelet kills vLLM before in-flight requests finish",
                    f"lower --shutdown-timeout to at most {max(min(grace, MAX_GRACE_SECONDS) - pre_stop - 1, 0)} "
                    f"or raise terminationGracePeriodSeconds above {drain} (at most {MAX_GRACE_SECONDS})",
                )


def _check_pre_stop_drain(
    template: PodTemplate, where: str, pre_stop: int, timeout: int | str | None, grace: int
) -> Iterator[Finding]:
    """An engine without --shutdown-timeout: the preStop is the whole drain."""
    ref = object_ref(template.obj)
    if timeout is not None:
        yield Finding(
            DRAIN,
            ref,
            f"{where} passes --shutdown-timeout to a vLLM release without it (0.16 and older): the server refuses "
            "an unknown argument and never starts",
            "drop --shutdown-timeout and drain in preStop (sleep through endpoint removal and in-flight requests)",
        )
    if pre_stop <= ENDPOINT_REMOVAL_SECONDS:
        yield Finding(
            DRAIN,
            ref,
            f"{where} runs a vLLM release whose SIGTERM cancels in-flight requests (no --shutdown-timeout) and its "
            f"preStop {pre_stop} s covers no more than the {ENDPOINT_REMOVAL_SECONDS} s of endpoint removal",
            f"sleep longer in preStop (e.g. {MAX_GRACE_SECONDS - 5} s) so requests finish before SIGTERM, below "
            "terminationGracePeriodSeconds",
        )
    if grace > MAX_GRACE_SECONDS or pre_stop >= grace:
        yield Finding(
            DRAIN,
            ref,
            f"{where}: preStop {pre_stop} s must be below terminationGracePeriodSeconds {grace} s, itself at most "
            f"{MAX_GRACE_SECONDS} s (the 2-minute Spot notice)",
            f"set terminationGracePeriodSeconds to at most {MAX_GRACE_SECONDS} and the preStop below it",
        )
