"""Plan warnings reach `cdk synth`: a warning annotation, under a stable id, on the construct that applies the
workload; acknowledged by id, it is gone; the default environments plan without any."""

from __future__ import annotations

from typing import Any

import pytest

from llm_eks.infra.app import plan_environment
from tests.conftest import ENVIRONMENTS, Synthesized

WARNING = "aws:cdk:warning"
# Llama 3.3 70B at fp8 on one g6e.12xlarge cannot hold 256 sequences, nor stream them at 50 ms per token.
BIG = {
    "model": "meta-llama/Llama-3.3-70B-Instruct",
    "weight_format": "fp8",
    "accelerator": "g6e.12xlarge",
    "target_concurrency": 256,
    "slo": {"itl_p99_ms": 50},
}
EXPECTED = [
    "only 214 of the 256 target sequences of 1280 tokens fit one replica on g6e.12xlarge; max_num_seqs is capped "
    "at 214 [ack: llm-eks:plan-concurrency]",
    "inter-token latency estimate 70.1 ms exceeds max_itl_ms 50 [ack: llm-eks:plan-itl]",
]


def _stack(acknowledge: tuple[str, ...] = ()) -> Any:
    import aws_cdk as cdk

    from llm_eks.infra.config import parse_environment
    from llm_eks.infra.stack import InferenceStack

    config = parse_environment("big", {"workload": BIG})
    stack = InferenceStack(cdk.App(), config, plan_environment(config))
    # As the README shows: on the stack (or the construct, or the app), after the stack is built.
    for warning_id in acknowledge:
        cdk.Annotations.of(stack).acknowledge_warning(warning_id, "the latency SLO is relaxed for this batch tier")
    return stack


def _warnings(stack: Any) -> dict[str, list[str]]:
    """Construct path -> its warning messages, as `cdk synth` prints them."""
    found: dict[str, list[str]] = {}
    for construct in stack.node.find_all():
        messages = [entry.data for entry in construct.node.metadata if entry.type == WARNING]
        if messages:
            found[construct.node.path] = messages
    return found


def test_plan_warnings_are_annotations_on_the_workload_manifest() -> None:
    assert _warnings(_stack()) == {"LlmEks-big/Platform/Cluster/vllm": EXPECTED}


def test_an_acknowledged_plan_warning_is_gone() -> None:
    assert _warnings(_stack(acknowledge=("llm-eks:plan-itl",))) == {"LlmEks-big/Platform/Cluster/vllm": EXPECTED[:1]}


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_default_environments_synthesize_without_warnings(synthesized: Synthesized, env: str) -> None:
    import aws_cdk as cdk

    assert synthesized.error is None, synthesized.error
    stack = cdk.cx_api.CloudAssembly(str(synthesized.outdir)).get_stack_by_name(f"LlmEks-{env}")
    assert [entry.data for entry in stack.find_metadata_by_type(WARNING)] == []
