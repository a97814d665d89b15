"""Plan warnings reach `cdk synth`: a warning annotation, under a stable id, on the construct that applies the
workload; acknowledged by id (in the environment's config, or in code), it is gone and its reason is on record; the
default environments plan without any."""

from __future__ import annotations

from typing import Any

import pytest

from llm_eks.errors import ConfigError
from tests.conftest import ENVIRONMENTS, Synthesized
from tests.environments import plan_environment

WARNING = "aws:cdk:warning"
ACKNOWLEDGED = "aws:cdk:acknowledged-rules"
WORKLOAD_MANIFEST = "LlmEks-big/Platform/Cluster/vllm"
WHY = "the latency SLO is relaxed for this batch tier"
# Llama 3.3 70B at fp8 on one g6e.12xlarge cannot hold 256 sequences, nor stream them at 50 ms per token.
BIG = {
    "model": "meta-llama/Llama-3.3-70B-Instruct",
    "weight_format": "fp8",
    "accelerator": "g6e.12xlarge",
    "target_concurrency": 256,
    # TTFT held loosely: these tests are about the ITL and concurrency warnings.
    "slo": {"itl_p99_ms": 50, "ttft_p99_ms": 3000},
}
CONCURRENCY = (
    "only 226 of the 256 target sequences of 1280 tokens fit one replica on g6e.12xlarge; max_num_seqs is capped "
    "at 226 [ack: llm-eks:plan-concurrency]"
)
ITL = "time-per-output-token estimate 342.7 ms exceeds max_itl_ms 50 [ack: llm-eks:plan-itl]"


def _stack(**workload: Any) -> Any:
    import aws_cdk as cdk

    from llm_eks.config import parse_environment
    from llm_eks.infra.stack import InferenceStack

    config = parse_environment("big", {"workload": {**BIG, **workload}})
    return InferenceStack(cdk.App(), config, plan_environment(config))


def _metadata(stack: Any, kind: str) -> dict[str, list[Any]]:
    """Construct path -> its metadata entries of one kind, as the cloud assembly records them."""
    found: dict[str, list[Any]] = {}
    for construct in stack.node.find_all():
        entries = [entry.data for entry in construct.node.metadata if entry.type == kind]
        if entries:
            found[construct.node.path] = entries
    return found


def test_plan_warnings_are_annotations_on_the_workload_manifest() -> None:
    assert _metadata(_stack(), WARNING) == {WORKLOAD_MANIFEST: [CONCURRENCY, ITL]}


def test_a_warning_acknowledged_in_config_is_gone_and_its_reason_recorded() -> None:
    stack = _stack(acknowledged_warnings={"llm-eks:plan-itl": WHY})
    assert _metadata(stack, WARNING) == {WORKLOAD_MANIFEST: [CONCURRENCY]}
    # Recorded in the cloud assembly beside the construct, as cdk-nag acknowledgements are.
    assert _metadata(stack, ACKNOWLEDGED)[WORKLOAD_MANIFEST] == [{"Annotation::llm-eks:plan-itl": WHY}]


def test_a_warning_acknowledged_in_code_after_the_stack_is_gone() -> None:
    import aws_cdk as cdk

    stack = _stack()
    cdk.Annotations.of(stack).acknowledge_warning("llm-eks:plan-concurrency", "we scale out with replicas instead")
    assert _metadata(stack, WARNING) == {WORKLOAD_MANIFEST: [ITL]}


@pytest.mark.parametrize(
    ("acknowledged", "message"),
    [
        (
            {"llm-eks:plan-latency": WHY},
            "environments.big.workload.acknowledged_warnings: 'llm-eks:plan-latency' is not allowed; must be a plan "
            "warning id: llm-eks:plan-concurrency, llm-eks:plan-itl, llm-eks:plan-ttft, llm-eks:plan-no-efa, "
            "llm-eks:plan-no-price, llm-eks:plan-reservation [LLMEKS-E117]",
        ),
        (
            {"llm-eks:plan-itl": " "},
            "environments.big.workload.acknowledged_warnings.llm-eks:plan-itl: ' ' is not allowed; must say why in "
            "one line of 1-160 characters [LLMEKS-E117]",
        ),
        (
            {"llm-eks:plan-itl": "first line\nsecond line"},
            "environments.big.workload.acknowledged_warnings.llm-eks:plan-itl: 'first line\\nsecond line' is not "
            "allowed; must say why in one line of 1-160 characters [LLMEKS-E117]",
        ),
    ],
)
def test_bad_acknowledgement_is_one_line(acknowledged: dict[str, str], message: str) -> None:
    from llm_eks.config import parse_environment

    with pytest.raises(ConfigError) as err:
        parse_environment("big", {"workload": {**BIG, "acknowledged_warnings": acknowledged}})
    assert str(err.value) == message


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_default_environments_synthesize_without_plan_warnings(synthesized: Synthesized, env: str) -> None:
    """No plan warning in any default environment; prod's only warnings are the risks it accepts (each a warning of
    every synth by design, until it is removed from accepted_risks)."""
    import aws_cdk as cdk

    from tests.conftest import CDK_JSON

    assert synthesized.error is None, synthesized.error
    stack = cdk.cx_api.CloudAssembly(str(synthesized.outdir)).get_stack_by_name(f"LlmEks-{env}")
    warnings = [str(entry.data) for entry in stack.find_metadata_by_type(WARNING)]
    accepted = sorted(CDK_JSON["context"]["environments"][env].get("accepted_risks", {}))
    assert [w.split(" (")[0] for w in warnings] == [f"accepted risk {risk}" for risk in accepted]
