"""KV cache offload (vLLM's CPU tier): its flags, its host memory in the pod and the instance choice, the
MultiConnector of a prefill/decode pod, the multi-turn prefix reuse estimate, and the one-line errors."""

from __future__ import annotations

import json
import math
import re

import pytest

from llm_eks.cli import main
from llm_eks.config import parse_environment
from llm_eks.errors import ConfigError
from llm_eks.infra.workloads.props import shm_size
from llm_eks.planner import PlanRequest, plan
from llm_eks.planner.cold_start import KV_OFFLOAD_PREFAULT_BYTES_PER_S
from llm_eks.planner.disaggregation import kv_transfer_config
from llm_eks.planner.kv_offload import AUTO_SHARE, max_turns, new_tokens_per_turn
from llm_eks.planner.pods import vllm_host_mib
from tests.upstream_wheels import VLLM, extracted, missing_reason

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


def _chat(**extra: object) -> PlanRequest:
    """Multi-turn chat on one L40S: 6 turns averaging 3000-token prompts, 300-token answers."""
    body: dict[str, object] = {
        "model": LLAMA_8B,
        "accelerator": "g6e.xlarge",
        "max_model_len": 16384,
        "typical_input_tokens": 3000,
        "typical_output_tokens": 300,
        "target_concurrency": 32,
        "conversation_turns": 6,
    }
    return PlanRequest(**{**body, **extra})  # type: ignore[arg-type]


def test_offload_is_off_by_default_and_renders_no_flag() -> None:
    p = plan(_chat())
    assert p.kv_offload_gib is None and p.kv_offload_mib_per_pod == 0
    assert not any(a.startswith("--kv-offloading") for a in p.engine_args)
    assert shm_size(p) == "2Gi"


def test_a_size_renders_vllms_flags_and_grows_dev_shm() -> None:
    p = plan(_chat(kv_offload=16))
    args = list(p.engine_args)
    i = args.index("--kv-offloading-size")
    assert args[i : i + 4] == ["--kv-offloading-size", "16", "--kv-offloading-backend", "native"]
    assert p.kv_offload_mib_per_pod == 16 * 1024
    # The tier lives in /dev/shm: the volume holds it beside the 2 GiB vLLM's workers use.
    assert shm_size(p) == f"{2048 + 16 * 1024}Mi"
    assert p.to_dict()["kv_offload"] == {
        "setting": 16,
        "gib_per_engine": 16.0,
        "engines_per_pod": 1,
        "host_mib_per_pod": 16384,
        "vllm_host_mib_per_pod": 8192,
        "backend": "native",
    }


def test_auto_takes_its_share_of_what_the_pod_holds_beyond_vllm() -> None:
    p = plan(_chat(kv_offload="auto"))
    spare = p.pod_resources.memory_mib - vllm_host_mib(p.gpus_per_pod)
    assert p.kv_offload_gib == math.floor(spare * AUTO_SHARE / 1024) == 14


def test_a_tier_larger_than_the_named_node_holds_is_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        plan(_chat(kv_offload=64))
    assert str(info.value) == (
        "workload.kv_offload: 64 is not allowed; a pod's share of g6e.xlarge's host memory (27269 MiB) holds the "
        "8192 MiB vLLM needs and 19077 MiB more: at most 18 GiB there; lower kv_offload, use auto, or choose an "
        "instance type with more memory [LLMEKS-E208]"
    )


def test_auto_avoids_a_node_too_small_for_the_tier() -> None:
    small = plan(PlanRequest(model=LLAMA_8B, max_model_len=8192))
    big = plan(PlanRequest(model=LLAMA_8B, max_model_len=8192, kv_offload=100))
    assert small.instance_type == "g6.xlarge"
    assert small.pod_resources.memory_mib < vllm_host_mib(1) + 100 * 1024
    assert big.instance_type != small.instance_type
    assert big.pod_resources.memory_mib >= vllm_host_mib(1) + 100 * 1024


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"kv_offload": 0},
            'workload.kv_offload: 0 is not allowed; must be null (off), "auto" or a size in GiB from 1 to 4096 '
            "(vLLM --kv-offloading-size) [LLMEKS-E208]",
        ),
        (
            {"kv_offload": "lots"},
            "workload.kv_offload: 'lots' is not allowed; must be null (off), \"auto\" or a size in GiB from 1 to 4096 "
            "(vLLM --kv-offloading-size) [LLMEKS-E208]",
        ),
        (
            {"conversation_turns": 0},
            "workload.conversation_turns: 0 is not allowed; must be an integer from 1 to 256 [LLMEKS-E208]",
        ),
        (
            {"conversation_turns": 21},
            "workload.conversation_turns: 21 is not allowed; turns of 300 output tokens cannot average 3000 prompt "
            "tokens (each prompt carries every earlier turn): at most 20; raise typical_input_tokens [LLMEKS-E208]",
        ),
        (
            {"think_time_s": 0},
            "workload.think_time_s: 0 is not allowed; must be a positive number of seconds (at most 86400)"
            " [LLMEKS-E208]",
        ),
    ],
)
def test_bad_offload_settings_are_one_line(extra: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        _chat(**extra)
    assert str(info.value) == message


def test_ray_serve_refuses_the_tier() -> None:
    with pytest.raises(ConfigError) as info:
        parse_environment("dev", {"workload": {"engine": "ray-serve", "kv_offload": "auto"}})
    assert str(info.value) == (
        "environments.dev.workload.kv_offload: 'auto' is not allowed; the CPU KV tier is planned for engine 'vllm' "
        "only (vLLM keeps it in /dev/shm, where a Ray worker also keeps its object store); leave it out with ray-serve"
        " [LLMEKS-E121]"
    )


def test_the_config_passes_the_keys_to_the_planner() -> None:
    config = parse_environment("dev", {"workload": {"kv_offload": 32, "conversation_turns": 4, "think_time_s": 90}})
    request = config.workload.plan_request()
    assert (request.kv_offload, request.conversation_turns, request.think_time_s) == (32, 4, 90)


def test_prefill_decode_with_a_tier_is_a_multiconnector() -> None:
    """--kv-offloading-size would replace the NIXL connector (vLLM 0.33 config/vllm.py): both run as children."""
    body = json.loads(kv_transfer_config("decode", efa=True, offload_gib=64))
    assert body == {
        "kv_connector": "MultiConnector",
        "kv_role": "kv_consumer",
        "kv_connector_extra_config": {
            "connectors": [
                {
                    "kv_connector": "NixlConnector",
                    "kv_role": "kv_consumer",
                    "kv_connector_extra_config": {"backends": ["LIBFABRIC"]},
                },
                {
                    "kv_connector": "OffloadingConnector",
                    "kv_role": "kv_both",
                    "kv_connector_extra_config": {"cpu_bytes_to_use": 64 * 2**30},
                },
            ]
        },
    }
    decision = plan(_chat(kv_offload=16, disaggregation="on", max_ttft_ms=60_000)).disaggregation
    configs = decision.kv_transfer_configs()
    children = json.loads(configs["prefill"])["kv_connector_extra_config"]["connectors"]
    assert [c["kv_connector"] for c in children] == ["NixlConnector", "OffloadingConnector"]
    assert children[1]["kv_connector_extra_config"] == {"cpu_bytes_to_use": 16 * 2**30}


def test_single_turn_traffic_has_no_reuse_estimate() -> None:
    assert plan(_chat(conversation_turns=1)).prefix_reuse is None


def test_the_reuse_estimate_splits_prompt_tokens_and_the_tier_adds_hits() -> None:
    without = plan(_chat(think_time_s=120)).prefix_reuse
    with_tier = plan(_chat(think_time_s=120, kv_offload="auto")).prefix_reuse
    assert without is not None and with_tier is not None
    fresh = new_tokens_per_turn(3000, 300, 6)
    assert fresh == pytest.approx((6000 - 1500) / 7)
    for u in (without, with_tier):
        assert u.reusable == round(1 - fresh / 3000, 3) == 0.786
        assert u.gpu_hit + u.cpu_hit + u.prefilled == pytest.approx(1, abs=0.002)
        assert u.ttft_gpu_ms < u.ttft_no_reuse_ms
    assert without.cpu_hit == 0 and without.cpu_tokens == 0 and without.ttft_ms == without.ttft_gpu_ms
    assert with_tier.gpu_hit == without.gpu_hit
    assert with_tier.cpu_hit > 0 and with_tier.prefilled < without.prefilled
    assert with_tier.ttft_ms < without.ttft_ms
    assert max_turns(3000, 300) == 20


def test_plan_prints_the_tier_and_the_reuse(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--model", LLAMA_8B, "--accelerator", "g6e.xlarge", "--max-model-len", "16384",
            "--typical-input-tokens", "3000", "--typical-output-tokens", "300", "--target-concurrency", "32",
            "--conversation-turns", "6", "--kv-offload", "auto"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"^KV offload +CPU tier 14 GiB per engine \(vLLM native, in /dev/shm\): 14336 MiB of the pod's 27269Mi beside "
        r"the 8192 MiB vLLM needs$",
        out,
        re.MULTILINE,
    )
    reuse = out.split("Prefix reuse (multi-turn):\n", 1)[1].splitlines()
    assert reuse[0].startswith("  prompt tokens: GPU prefix cache ")
    assert reuse[1].startswith("  TTFT ~")
    assert main([*argv, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["kv_offload"]["gib_per_engine"] == 14.0
    assert body["prefix_reuse"]["conversation_turns"] == 6


def test_the_connectors_are_ones_vllm_registers() -> None:
    """OffloadingConnector (what --kv-offloading-size stands for) and MultiConnector, as vLLM 0.33.0 registers them."""
    wheel = extracted(VLLM)
    if wheel is None:
        pytest.skip(missing_reason(VLLM))
    factory = (wheel / "vllm/distributed/kv_transfer/kv_connector/factory.py").read_text()
    for name in ("OffloadingConnector", "MultiConnector"):
        assert re.search(rf'register_connector\(\s*"{name}",', factory)


def test_the_tier_s_pre_fault_is_in_the_warm_up_and_the_startup_probe() -> None:
    """vLLM 0.33 writes every page of the tier in before it serves, at most ~10 GiB/s by its own comment for one
    /dev/shm file (v1/kv_offload/cpu/shared_offload_region.py): 100 GiB adds 10 s to the warm-up, the startup probe's
    budget and every cold-start path (the same one-GPU layout with and without the tier)."""
    without, tier = plan(_chat(accelerator="g6e.4xlarge")), plan(_chat(accelerator="g6e.4xlarge", kv_offload=100))
    assert (tier.kv_offload_gib, tier.gpus_per_pod, without.gpus_per_pod) == (100, 1, 1)
    for part in ("warmup_s", "startup_s", "total_s", "scale_out_s"):
        assert getattr(tier.cold_start, part) - getattr(without.cold_start, part) == 10, part
    paths = zip(tier.cold_start_paths, without.cold_start_paths, strict=True)
    assert {(a.warmup_s - b.warmup_s, a.total_s - b.total_s) for a, b in paths} == {(10, 10)}
    (line,) = [a for a in tier.assumptions if a.startswith("CPU KV tier")]
    assert "pre-faulted at start: 10 s of the warm-up at 10 GiB/s (vLLM's own figure for one /dev/shm file" in line


def test_the_pre_fault_rate_is_vllm_0_33_s_own_figure() -> None:
    """The figure the cold-start model uses, where vLLM states it: the region is split into files because
    page-cache inserts are serialized per file, "capping pre-faulting of one file near 10 GiB/s", and each worker
    pre-faults its share with MADV_POPULATE_WRITE."""
    wheel = extracted(VLLM)
    if wheel is None:
        pytest.skip(missing_reason(VLLM))
    region = (wheel / "vllm/v1/kv_offload/cpu/shared_offload_region.py").read_text()
    assert "capping pre-faulting of one\n# file near 10 GiB/s" in region
    assert "_MADV_POPULATE_WRITE" in region and "populate_shard" in region
    assert KV_OFFLOAD_PREFAULT_BYTES_PER_S == 10 * 2**30
    spec = (wheel / "vllm/v1/kv_offload/cpu/spec.py").read_text()
    assert re.search(r"^_REGION_SEGMENTS = 32$", spec, re.M)
