"""One truth per field: what `llm-eks plan --help` says an option takes and defaults to is what the planner takes
and defaults to, and the config's workload fields default as the planner's do (or say why not).

The seed of a larger rule (one dataclass field holds a setting's default, bounds and reason; flags, validation and
docs derive from it): today it holds the `plan` options to PlanRequest and WorkloadConfig to PlanRequest.
"""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

from llm_eks.cli import parser
from llm_eks.cli.plan import _REQUEST_OPTIONS
from llm_eks.config.environment import WEIGHT_SOURCES, WorkloadConfig
from llm_eks.planner import PlanRequest
from llm_eks.planner.engine import GPU_MEMORY_UTILIZATION, EngineSettings
from llm_eks.planner.request import CHOICES

PLANNER = {f.name: f.default for f in dataclasses.fields(PlanRequest)}
CONFIG = {
    f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
    for f in dataclasses.fields(WorkloadConfig)
}
# WorkloadConfig fields whose default differs from PlanRequest's on purpose, and why.
CONFIG_DIFFERS = {
    # cdk.json's 8192 keeps a new environment's KV cache per sequence small enough for one cheap GPU; `llm-eks plan
    # --model` without --max-model-len answers for the model's full context (its help says so).
    "max_model_len": (8192, None),
}
_DEFAULT = re.compile(r"\(default:? ([^),:;]+)")


def _plan_options() -> dict[str, argparse.Action]:
    """The `llm-eks plan` options, by destination."""
    top = parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a for a in commands.choices["plan"]._actions if a.option_strings}


def stated_default(help_text: str) -> str | None:
    """The default an option's help states, "(default X" or "(default: X", as written."""
    found = _DEFAULT.search(help_text)
    return found.group(1).strip() if found else None


def stated_choices(help_text: str) -> tuple[str, ...] | None:
    """The values an option's help lists, "a | b | c" at its start."""
    found = re.match(r"^([a-z0-9-]+(?: \| [a-z0-9-]+)+)", help_text)
    return tuple(found.group(1).split(" | ")) if found else None


def as_stated(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def test_the_readers_see_a_wrong_help() -> None:
    # The help `--weights-source` had before "staged" existed: the check below would have refused it.
    assert stated_choices("nvme | s3 | ebs (default nvme)") == ("nvme", "s3", "ebs") != CHOICES["weights_source"]
    assert stated_default("vLLM's budget fraction (default 0.9, vLLM's)") == "0.9" != as_stated(GPU_MEMORY_UTILIZATION)


@pytest.mark.parametrize("field", _REQUEST_OPTIONS)
def test_plan_option_states_the_planners_choices_and_default(field: str) -> None:
    action = _plan_options()[field]
    help_text = " ".join((action.help or "").split())
    # Left out, an option passes nothing: the planner's own default applies (argparse must not supply another).
    assert action.default is None, f"--{field}: argparse default {action.default!r}"
    if field in CHOICES:
        assert stated_choices(help_text) == CHOICES[field], f"--{field}: {help_text}"
    default = PLANNER[field]
    stated = stated_default(help_text)
    if default is None or isinstance(default, bool):
        # None: the planner decides (a ceiling not checked, a size it chooses); the help may say how, never a value.
        assert stated is None or not re.fullmatch(r"[0-9.]+|auto", stated), f"--{field}: {help_text}"
    else:
        assert stated == as_stated(default), f"--{field} says default {stated}, the planner's is {default!r}"


def test_every_plan_request_option_is_mapped() -> None:
    """Every `plan` option named after a PlanRequest field reaches the request (an option left out of
    _REQUEST_OPTIONS would be parsed and silently ignored)."""
    options = {dest for dest in _plan_options() if dest in PLANNER} - {"model"}  # --model names a catalog id or file
    assert options == set(_REQUEST_OPTIONS)


@pytest.mark.parametrize("field", sorted(set(PLANNER) & set(CONFIG) - {"model"}))
def test_config_defaults_are_the_planners(field: str) -> None:
    if field in CONFIG_DIFFERS:
        assert (CONFIG[field], PLANNER[field]) == CONFIG_DIFFERS[field]
    else:
        assert CONFIG[field] == PLANNER[field], f"workload.{field}: {CONFIG[field]!r} against {PLANNER[field]!r}"


@pytest.mark.parametrize("weights", WEIGHT_SOURCES)
def test_every_config_weights_value_is_a_planner_weights_source(weights: str) -> None:
    uri = "s3://bucket/llama" if weights == "s3" else None
    for compile_cache in (True, False):
        request = WorkloadConfig(weights=weights, weights_s3_uri=uri, compile_cache=compile_cache).plan_request()
        assert request.weights_source in CHOICES["weights_source"]


def test_gpu_memory_utilization_defaults_to_vllms_own_everywhere() -> None:
    # vLLM 0.33.0: `gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1)` (CacheConfig,
    # vllm/config/cache.py line 215 of the vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64 wheel).
    assert GPU_MEMORY_UTILIZATION == 0.92
    assert EngineSettings(max_model_len=8192).gpu_memory_utilization == GPU_MEMORY_UTILIZATION
    assert PLANNER["gpu_memory_utilization"] == CONFIG["gpu_memory_utilization"] == GPU_MEMORY_UTILIZATION
