"""When nothing fits, the error lists the changes that would, each one planned, cheapest first; the CLI names them as
options, cdk.json by their paths."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from llm_eks.cli import main
from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.error_codes import E209
from llm_eks.errors import ConfigError
from llm_eks.planner import PlanRequest, plan
from llm_eks.planner.fixes import CONTEXT, ROUND_LENGTHS, TCP, NoFitError
from llm_eks.planner.search import quiet_plan
from llm_eks.planner.sizing import Context
from tests.coded import raises_code

X = "\N{MULTIPLICATION SIGN}"
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
# The README's model on the instance dev plans, at the planner's default context (the model's 131072 tokens).
README_ON_DEV = PlanRequest(model=LLAMA_8B, accelerator="g5.xlarge")
WHY = (
    "a replica of meta-llama/Llama-3.1-8B-Instruct at max_model_len 131072 needs 2 g5.xlarge nodes "
    f"(2{X} g5.xlarge, TP1 PP2) and g5.xlarge has no EFA, so the nodes would exchange activations over TCP; what fits "
    "instead, cheapest first ($/h to hold target_concurrency 16 sequences of 1280 tokens): "
)


def no_fit(request: PlanRequest) -> NoFitError:
    with pytest.raises(NoFitError) as err:
        plan(request)
    return err.value


def test_a_shorter_context_comes_first_on_the_readme_model_and_devs_instance() -> None:
    assert str(no_fit(README_ON_DEV)) == (
        f"workload.accelerator: 'g5.xlarge' is not allowed; {WHY}"
        "1) max_model_len 32768 (the longest round length that fits): g5.xlarge, 25 sequences a replica, $1.01/h; "
        "2) weight_format fp8 and kv_cache_dtype fp8: g5.xlarge, 134 sequences a replica, $1.01/h; "
        "3) accelerator g6e.xlarge: 156 sequences a replica, $1.86/h; "
        f"4) accelerator g5.8xlarge: 2{X} g5.8xlarge over EFA, 147 sequences a replica, $4.90/h; "
        "5) acknowledged_warnings llm-eks:plan-no-efa (allow_without_efa): "
        f"2{X} g5.xlarge over TCP, 147 sequences a replica, $2.01/h [LLMEKS-E209]"
    )


@pytest.mark.parametrize(
    "request_",
    [
        README_ON_DEV,
        PlanRequest(model="meta-llama/Llama-3.3-70B-Instruct", accelerator="p5.4xlarge", max_nodes_per_replica=1),
        PlanRequest(model="Qwen/Qwen2.5-72B-Instruct", weight_format="awq-int4", accelerator="g6e.xlarge"),
        PlanRequest(model="deepseek-ai/DeepSeek-V3", accelerator="g6e.xlarge"),
    ],
)
def test_every_change_listed_plans_as_listed_and_the_order_is_cheapest_first(request_: PlanRequest) -> None:
    fixes = no_fit(request_).fixes
    assert fixes
    for fix in fixes:
        # The change alone, through the public entry point, gives the plan the error priced.
        again = plan(dataclasses.replace(request_, **dict(fix.changes)))
        assert (again.instance_type, again.nodes_per_replica, again.cost_per_replica_hour) == (
            fix.plan.instance_type,
            fix.plan.nodes_per_replica,
            fix.plan.cost_per_replica_hour,
        )
    # One-node changes by cost, then replicas spanning nodes by cost, accepting TCP last.
    groups = [(f.kind == TCP, f.plan.nodes_per_replica > 1) for f in fixes]
    assert groups == sorted(groups)
    for group in set(groups):
        costs = [f.usd_per_hour or math.inf for f, g in zip(fixes, groups, strict=True) if g == group]
        assert costs == sorted(costs)


def test_the_context_offered_is_the_longest_round_length_that_fits() -> None:
    (context,) = [f for f in no_fit(README_ON_DEV).fixes if f.kind == CONTEXT]
    (length,) = [value for field, value in context.changes if field == "max_model_len"]
    assert length == 32768
    longer = ROUND_LENGTHS[ROUND_LENGTHS.index(length) + 1]
    assert longer == 49152 < 131072
    with raises_code(E209):
        plan(dataclasses.replace(README_ON_DEV, max_model_len=longer))


def test_the_search_for_changes_does_not_search_again() -> None:
    # A candidate that does not fit raises the plain error (no list of its own), so the search stays one level deep.
    with pytest.raises(ConfigError) as err:
        quiet_plan(README_ON_DEV)
    assert not isinstance(err.value, NoFitError)
    assert Context(README_ON_DEV).suggest and not Context(README_ON_DEV, suggest=False).suggest


def test_the_cli_names_the_changes_as_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", LLAMA_8B, "--accelerator", "g5.xlarge"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"llm-eks: error: workload.accelerator: 'g5.xlarge' is not allowed; {WHY}"
        "1) --max-model-len 32768 (the longest round length that fits): g5.xlarge, 25 sequences a replica, $1.01/h; "
        "2) --weight-format fp8 --kv-cache-dtype fp8: g5.xlarge, 134 sequences a replica, $1.01/h; "
        "3) --accelerator g6e.xlarge: 156 sequences a replica, $1.86/h; "
        f"4) --accelerator g5.8xlarge: 2{X} g5.8xlarge over EFA, 147 sequences a replica, $4.90/h; "
        f"5) --allow-without-efa: 2{X} g5.xlarge over TCP, 147 sequences a replica, $2.01/h [LLMEKS-E209]\n"
    )


DEV_ON_G5 = {"workload": {"model": LLAMA_8B, "accelerator": "g5.xlarge", "max_model_len": 131072}}
CONFIG_FIXES = (
    "1) environments.dev.workload.max_model_len 32768 (the longest round length that fits): g5.xlarge, 25 sequences "
    "a replica, $1.01/h; 2) environments.dev.workload.weight_format fp8 and environments.dev.workload.kv_cache_dtype "
    "fp8: g5.xlarge, 134 sequences a replica, $1.01/h; 3) environments.dev.workload.accelerator g6e.xlarge: 156 "
    f"sequences a replica, $1.86/h; 4) environments.dev.workload.accelerator g5.8xlarge: 2{X} g5.8xlarge over EFA, "
    '147 sequences a replica, $4.90/h; 5) environments.dev.workload.acknowledged_warnings["llm-eks:plan-no-efa"]: '
    f"2{X} g5.xlarge over TCP, 147 sequences a replica, $2.01/h"
)


def test_cdk_json_names_the_changes_by_their_paths() -> None:
    with pytest.raises(ConfigError) as err:
        plan_workloads(parse_environment("dev", DEV_ON_G5))
    assert (
        str(err.value)
        == f"environments.dev.workload.accelerator: 'g5.xlarge' is not allowed; {WHY}{CONFIG_FIXES} [LLMEKS-E209]"
    )


def test_plan_env_names_cdk_json_paths_and_the_options_given(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    context = tmp_path / "cdk.json"
    context.write_text(json.dumps({"context": {"environments": {"dev": DEV_ON_G5}}}))
    assert main(["plan", "--env", "dev", "--context-file", str(context)]) == 2
    assert capsys.readouterr().err == (
        f"llm-eks: error: environments.dev.workload.accelerator: 'g5.xlarge' is not allowed; {WHY}{CONFIG_FIXES}"
        " [LLMEKS-E209]\n"
    )
    # An option given on the command line is named as that option; the rest stay cdk.json's.
    assert main(["plan", "--env", "dev", "--context-file", str(context), "--max-model-len", "65536"]) == 2
    err = capsys.readouterr().err
    assert "1) --max-model-len 32768 (the longest round length that fits): g5.xlarge" in err
    assert "2) environments.dev.workload.kv_cache_dtype fp8: g5.xlarge" in err


def test_a_change_cdk_json_has_no_field_for_is_left_out() -> None:
    # Two L40S nodes hold no 70B bf16 replica; four would (the CLI's --max-nodes-per-replica), but cdk.json has no
    # such field, so its error leaves that change out and keeps the others.
    body = {"workload": {"model": "meta-llama/Llama-3.3-70B-Instruct", "accelerator": "g6e.8xlarge"}}
    fixes = no_fit(parse_environment("dev", body).workload.plan_request()).fixes
    assert ("max_nodes_per_replica", 4) in [change for fix in fixes for change in fix.changes]
    with pytest.raises(ConfigError) as err:
        plan_workloads(parse_environment("dev", body))
    message = str(err.value)
    assert "max_nodes_per_replica" not in message
    assert "1) environments.dev.workload.accelerator g6e.12xlarge: 66 sequences a replica, $10.49/h;" in message


def test_a_canary_names_its_own_settings_and_its_workloads_for_the_rest() -> None:
    # The workload fits the A10G at full context with fp8 weights and KV cache; its next version's 16-bit KV cache
    # does not. The KV cache dtype is the canary's to set; the context is its workload's (both versions read it).
    body = {
        "gateway": {"allow_http": True, "inbound_cidrs": ["192.168.0.0/16"]},
        "workloads": {
            "chat": {
                "model": LLAMA_8B,
                "accelerator": "g5.xlarge",
                "max_model_len": 131072,
                "weight_format": "fp8",
                "kv_cache_dtype": "fp8",
                "canary": {"kv_cache_dtype": "auto", "weight": 10},
            }
        },
    }
    with pytest.raises(ConfigError) as err:
        plan_workloads(parse_environment("qa", body))
    message = str(err.value)
    assert message.startswith("environments.qa.workloads.chat.canary.accelerator: 'g5.xlarge' is not allowed; ")
    assert "environments.qa.workloads.chat.canary.kv_cache_dtype fp8: g5.xlarge" in message
    assert "environments.qa.workloads.chat.max_model_len " in message
    assert "canary.max_model_len" not in message
