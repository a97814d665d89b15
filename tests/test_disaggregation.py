"""The planner's prefill/decode decision: when separate pools pay, their ratio, the NIXL KV-transfer config, and the
one-line errors of a forced layout that cannot work."""

from __future__ import annotations

import json
import re

import pytest

from llm_eks.catalog.accelerators import instance_type
from llm_eks.cli import main
from llm_eks.config import parse_environment
from llm_eks.error_codes import E202
from llm_eks.errors import ConfigError
from llm_eks.planner import PlanRequest, plan
from llm_eks.planner.disaggregation import TCP_RATE, kv_transfer_config, transfer_rate
from tests.coded import raises_code
from tests.upstream_wheels import VLLM, extracted, missing_reason

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_70B = "meta-llama/Llama-3.3-70B-Instruct"


def _rag_70b(**extra: object) -> PlanRequest:
    """RAG-shaped traffic (8k prompts, 256 out) on p5 with a tight inter-token target."""
    body: dict[str, object] = {
        "model": LLAMA_70B,
        "accelerator": "p5.48xlarge",
        "typical_input_tokens": 8192,
        "typical_output_tokens": 256,
        "max_model_len": 16384,
        "target_concurrency": 32,
        "max_itl_ms": 30,
    }
    body.update(extra)
    return PlanRequest(**body)  # type: ignore[arg-type]


def test_long_prompts_with_a_tight_itl_target_are_disaggregated_over_efa() -> None:
    d = plan(_rag_70b()).disaggregation
    assert d is not None
    assert (d.recommended, d.ratio) == ("disaggregated", "5:1")
    assert not d.aggregated.meets_targets and d.disaggregated is not None and d.disaggregated.meets_targets
    assert d.disaggregated.tpot_ms <= 30 < d.aggregated.tpot_ms
    assert d.why.startswith("aggregated misses the targets, prefill/decode meets them ($")
    assert d.phase is not None and d.phase.transfer.transport == "efa" and d.phase.transfer.upper_bound
    # The whole prompt's KV: 80 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes x 8192 tokens.
    assert d.phase.kv_bytes_per_request == 80 * 8 * 128 * 2 * 2 * 8192
    assert d.kv_transfer_configs() == {
        "prefill": '{"kv_connector":"NixlConnector","kv_role":"kv_producer",'
        '"kv_connector_extra_config":{"backends":["LIBFABRIC"]}}',
        "decode": '{"kv_connector":"NixlConnector","kv_role":"kv_consumer",'
        '"kv_connector_extra_config":{"backends":["LIBFABRIC"]}}',
    }


def test_short_chat_stays_aggregated_and_says_why() -> None:
    d = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192)).disaggregation
    assert d is not None and d.recommended == "aggregated"
    assert re.fullmatch(
        r"prefill/decode misses the targets: TTFT \d+ ms > \d+ ms \(the KV transfer alone 414 ms over TCP\)", d.why
    ), d.why
    assert d.kv_transfer_configs() is None


def test_without_efa_the_transfer_runs_at_the_published_tcp_rate() -> None:
    assert transfer_rate(instance_type("g6e.xlarge"), 1) == TCP_RATE
    assert TCP_RATE.gb_per_s == 0.324 and not TCP_RATE.upper_bound
    # p5.48xlarge: 3,200 Gbps for 8 GPUs, a TP1 replica's share is 50 GB/s (an upper bound).
    assert transfer_rate(instance_type("p5.48xlarge"), 1).gb_per_s == 50.0
    assert json.loads(kv_transfer_config("decode", efa=False))["kv_connector_extra_config"] == {"backends": ["UCX"]}


def test_off_keeps_aggregated_but_still_prices_both() -> None:
    d = plan(_rag_70b(disaggregation="off")).disaggregation
    assert d is not None and (d.recommended, d.why) == ("aggregated", "disaggregation off")
    assert d.disaggregated is not None and d.disaggregated.usd_per_million_output_tokens is not None


def test_a_prefill_pool_too_small_for_the_ttft_target_is_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192, prefill_replicas=1,
                         max_ttft_ms=300))  # fmt: skip
    assert re.fullmatch(
        r"workload\.prefill_replicas: 1 is not allowed; it cannot meet max_ttft_ms 300: TTFT estimate \d+ ms with 1 "
        r"prefill replica\(s\), of which the KV transfer 414 ms over TCP at 0\.324 GB/s; raise max_ttft_ms, use a "
        r"family with EFA or leave prefill_replicas out \[LLMEKS-E138\]",
        str(info.value),
    ), str(info.value)


def test_a_saturated_prefill_pool_is_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        plan(_rag_70b(prefill_replicas=1, max_itl_ms=None))
    assert re.fullmatch(
        r"workload\.prefill_replicas: 1 is not allowed; 1 prefill replica\(s\) cannot keep up with the prompts "
        r"\(utilisation \d+\.\d\d >= 1\); add prefill replicas or leave prefill_replicas out \(the planner sizes it\) "
        r"\[LLMEKS-E138\]",
        str(info.value),
    ), str(info.value)


def test_prefill_replicas_with_disaggregation_off_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^workload\.prefill_replicas: 2 is not allowed; sizes a prefill pool, and "
                       r"disaggregation is off: set disaggregation on or auto, or leave it out "
                       r"\[LLMEKS-E202\]$"):  # fmt: skip
        PlanRequest(model=LLAMA_8B, disaggregation="off", prefill_replicas=2)


def test_an_unknown_mode_is_refused() -> None:
    with raises_code(E202, match=r"^workload\.disaggregation: 'yes' is not allowed; .*auto, on, off"):
        PlanRequest(model=LLAMA_8B, disaggregation="yes")


@pytest.mark.parametrize("setting", [{"disaggregation": "on"}, {"prefill_replicas": 2}])
def test_ray_serve_refuses_prefill_decode_pools(setting: dict[str, object]) -> None:
    name, value = next(iter(setting.items()))
    with pytest.raises(ConfigError) as info:
        parse_environment("dev", {"workload": {"engine": "ray-serve", **setting}})
    assert str(info.value) == (
        f"environments.dev.workload.{name}: {value!r} is not allowed; prefill/decode pools are planned for engine "
        "'vllm' only (vLLM's NixlConnector behind the endpoint picker); use disaggregation auto or off with ray-serve"
        " [LLMEKS-E121]"
    )


def test_ray_serve_workloads_are_planned_aggregated() -> None:
    config = parse_environment("dev", {"workload": {"engine": "ray-serve"}})
    assert config.workload.plan_request().disaggregation == "off"


def test_plan_prints_both_modes_and_json_carries_the_decision(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--model", LLAMA_70B, "--accelerator", "p5.48xlarge", "--typical-input-tokens", "8192",
            "--max-model-len", "16384", "--target-concurrency", "32", "--max-itl-ms", "30"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    lines = out.split("\nPrefill/decode:\n", 1)[1].splitlines()
    assert lines[0].startswith("  aggregated     1\N{MULTIPLICATION SIGN} aggregated TP8 PP1: TTFT")
    assert "5\N{MULTIPLICATION SIGN} prefill TP8 PP1 + 1\N{MULTIPLICATION SIGN} decode TP8 PP1" in lines[1]
    assert lines[-1].startswith("  auto: disaggregated (5:1 prefill:decode): aggregated misses")
    assert lines[-1].endswith("; served so: a prefill and a decode Deployment behind the gateway's endpoint picker")
    assert main([*argv, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)["disaggregation"]
    assert (body["recommended"], body["ratio"], body["deployed"]) == ("disaggregated", "5:1", "disaggregated")
    assert json.loads(body["kv_transfer_config"]["decode"])["kv_role"] == "kv_consumer"


def test_compare_shows_both_modes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", LLAMA_8B, "--max-model-len", "8192", "--compare"]) == 0
    out = capsys.readouterr().out
    tail = out.split("Prefill/decode on the plan's choice:\n", 1)[1].splitlines()
    assert tail[0].startswith("  aggregated ") and tail[1].startswith("  disaggregated ")
    assert tail[3].startswith("  auto: aggregated: ")


def test_the_connector_is_one_vllm_registers_with_the_fields_it_reads() -> None:
    """NixlConnector, kv_role and `backends` as vLLM 0.33.0's source names them."""
    wheel = extracted(VLLM)
    if wheel is None:
        pytest.skip(missing_reason(VLLM))
    source = wheel / "vllm"
    factory = (source / "distributed/kv_transfer/kv_connector/factory.py").read_text()
    assert re.search(r'register_connector\(\s*"NixlConnector",', factory)
    config = (source / "config/kv_transfer.py").read_text()
    assert 'KVProducer = Literal["kv_producer", "kv_both"]' in config
    assert 'KVConsumer = Literal["kv_consumer", "kv_both"]' in config
    worker = (source / "distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py").read_text()
    assert re.search(r'get_from_extra_config\(\s*"backends", \["UCX"\]\s*\)', worker)
    envs = (source / "envs.py").read_text()
    assert "VLLM_NIXL_SIDE_CHANNEL_PORT: int = 5600" in envs
