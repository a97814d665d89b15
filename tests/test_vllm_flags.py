"""Every flag a plan's `vllm serve` arguments can carry exists in vLLM 0.33.0's own parser, and takes a value exactly
when vLLM's does.

vLLM's parser cannot be built here (importing vllm.engine.arg_utils needs torch), so the flags are a list extracted
once from the 0.33.0 wheel's source and pinned below with the file and line each `add_argument` is on: the wheel
vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl (`vllm/_version.py`: 0.33.0, commit g4ba787ec9). `make upstream` (run
by `make test`) downloads that wheel and extracts the files named here (tests/upstream_wheels.py), and a second test
re-reads every pinned line there, so the list cannot drift from the file it names.
"""

from __future__ import annotations

import re

import pytest

from llm_eks.planner import LoraAdapters, PlanRequest, plan
from llm_eks.planner.disaggregation import kv_transfer_config
from llm_eks.planner.engine import EngineSettings, data_parallel_pod_flags, parallel_flags, vllm_flags
from llm_eks.planner.kv_events import kv_events_config
from tests.upstream_wheels import VLLM, extracted, missing_reason

# flag -> (file in the wheel's vllm/ package, line of its add_argument, takes a value). Value-less flags are
# argparse BooleanOptionalAction (a bool config field, arg_utils.py _compute_kwargs) or store_true.
VLLM_FLAGS: dict[str, tuple[str, int, bool]] = {
    "--trust-remote-code": ("engine/arg_utils.py", 975, False),  # ModelConfig.trust_remote_code: bool
    "--dtype": ("engine/arg_utils.py", 977, True),
    "--revision": ("engine/arg_utils.py", 986, True),
    "--max-model-len": ("engine/arg_utils.py", 991, True),
    "--quantization": ("engine/arg_utils.py", 992, True),
    "--served-model-name": ("engine/arg_utils.py", 1031, True),
    "--pipeline-parallel-size": ("engine/arg_utils.py", 1171, True),
    "--master-addr": ("engine/arg_utils.py", 1175, True),
    "--nnodes": ("engine/arg_utils.py", 1177, True),
    "--node-rank": ("engine/arg_utils.py", 1178, True),
    "--tensor-parallel-size": ("engine/arg_utils.py", 1209, True),
    "--data-parallel-size": ("engine/arg_utils.py", 1241, True),
    "--data-parallel-start-rank": ("engine/arg_utils.py", 1253, True),
    "--data-parallel-size-local": ("engine/arg_utils.py", 1259, True),
    "--data-parallel-address": ("engine/arg_utils.py", 1265, True),
    "--data-parallel-rpc-port": ("engine/arg_utils.py", 1271, True),
    "--enable-expert-parallel": ("engine/arg_utils.py", 1305, False),  # ParallelConfig.enable_expert_parallel: bool
    "--gpu-memory-utilization": ("engine/arg_utils.py", 1389, True),
    "--kv-cache-dtype": ("engine/arg_utils.py", 1397, True),
    "--kv-offloading-size": ("engine/arg_utils.py", 1453, True),  # CacheConfig.kv_offloading_size: float | None
    "--kv-offloading-backend": ("engine/arg_utils.py", 1456, True),  # native | lmcache
    "--language-model-only": ("engine/arg_utils.py", 1497, False),  # MultiModalConfig.language_model_only: bool
    "--enable-lora": ("engine/arg_utils.py", 1610, False),  # action=argparse.BooleanOptionalAction
    "--max-loras": ("engine/arg_utils.py", 1614, True),
    "--max-lora-rank": ("engine/arg_utils.py", 1615, True),
    "--max-num-batched-tokens": ("engine/arg_utils.py", 1740, True),
    "--max-num-seqs": ("engine/arg_utils.py", 1754, True),
    "--kv-transfer-config": ("engine/arg_utils.py", 1881, True),  # a JSON KVTransferConfig
    "--kv-events-config": ("engine/arg_utils.py", 1883, True),  # a JSON KVEventsConfig
    "--headless": ("entrypoints/common/cli_args.py", 445, False),  # action="store_true"
    # Generated from the field name (BaseFrontendArgs.lora_modules, get_kwargs) with nargs "+" (LoRAParserAction).
    "--lora-modules": ("entrypoints/common/cli_args.py", 81, True),
    # Generated from BaseFrontendArgs.enable_scale_out: bool (get_kwargs gives a bool BooleanOptionalAction,
    # engine/arg_utils.py:386).
    "--enable-scale-out": ("entrypoints/common/cli_args.py", 216, False),
}
# Flags argparse builds from a frontend dataclass field (BaseFrontendArgs.add_cli_args): the field's line.
FIELD_FLAGS = {
    "--lora-modules": "lora_modules: list[LoRAModulePath]",
    "--enable-scale-out": "enable_scale_out: bool = False",
}


# The chart's own `vllm serve` flags (tests/test_vllm_chart.py checks them), each with a value; the rest must be
# vLLM 0.33's.
CHART_FLAGS = ("--host", "--port", "--shutdown-timeout", "--load-format")


def engine_flags(args: list[str]) -> list[str]:
    """A vLLM container's `vllm serve` arguments without the model (the first) and the chart's own flags."""
    out, i = [], 1
    while i < len(args):
        if args[i] in CHART_FLAGS:
            i += 2
            continue
        out.append(args[i])
        i += 1
    return out


def _check(args: tuple[str, ...] | list[str]) -> None:
    """Each flag is vLLM's, followed by a value exactly when vLLM's takes one (--lora-modules takes several)."""
    i = 0
    while i < len(args):
        flag = args[i]
        assert flag in VLLM_FLAGS, f"{flag} is not a vLLM 0.33 flag"
        takes_value = VLLM_FLAGS[flag][2]
        following = args[i + 1] if i + 1 < len(args) else None
        if not takes_value:
            assert following is None or following.startswith("--"), (flag, following)
            i += 1
            continue
        assert following is not None and not following.startswith("--"), (flag, following)
        i += 2
        while flag == "--lora-modules" and i < len(args) and not args[i].startswith("--"):
            i += 1


@pytest.mark.parametrize(
    "request_",
    [
        PlanRequest(model="meta-llama/Llama-3.1-8B-Instruct", max_model_len=8192),
        PlanRequest(model="meta-llama/Llama-3.3-70B-Instruct", accelerator="p5.4xlarge", max_model_len=8192),
        PlanRequest(
            model="meta-llama/Llama-3.1-8B-Instruct",
            max_model_len=8192,
            weight_format="fp8",
            kv_cache_dtype="fp8",
            lora=LoraAdapters((("sql", "acme/sql-lora"),)),
        ),
        PlanRequest(
            model="deepseek-ai/DeepSeek-V3",
            accelerator="p5.48xlarge",
            max_model_len=32768,
            data_parallel_size=16,
            tensor_parallel_size=1,
        ),
        PlanRequest(
            model="deepseek-ai/DeepSeek-V3",
            accelerator="p5en.48xlarge",
            max_model_len=32768,
            data_parallel_size=8,
            tensor_parallel_size=1,
        ),
        PlanRequest(model="moonshotai/Kimi-K2.5", accelerator="p5en.48xlarge", max_model_len=32768),
        PlanRequest(model="meta-llama/Llama-3.1-8B-Instruct", max_model_len=8192, kv_offload="auto"),
    ],
    ids=[
        "one-gpu",
        "pipeline-across-nodes",
        "fp8-lora",
        "dp-ep-two-nodes",
        "dp-ep-one-node",
        "language-model-only",
        "kv-offload",
    ],
)
def test_every_flag_of_a_plan_is_vllms(request_: PlanRequest) -> None:
    p = plan(request_)
    _check(p.engine_args)
    for node in range(p.nodes_per_replica):
        _check(p.pod_engine_args(node, "leader.example"))


def test_the_kv_transfer_configs_are_vllm_flags() -> None:
    for role in ("prefill", "decode"):
        for efa in (True, False):
            for offload in (None, 64.0):
                _check(["--kv-transfer-config", kv_transfer_config(role, efa, offload)])


def test_every_flag_the_engine_module_renders_is_vllms() -> None:
    _check(parallel_flags(8, 2))
    _check(parallel_flags(4, 1, 4, 2, True))
    _check(data_parallel_pod_flags(1, 8, "10.0.0.1"))
    everything = EngineSettings(
        max_model_len=8192, max_num_seqs=8, max_num_batched_tokens=8192, kv_cache_dtype="fp8", quantization="fp8",
        dtype="bfloat16", lora_modules=(("a", "acme/a"), ("b", "acme/b")), revision="main", trust_remote_code=True,
        language_model_only=True, kv_events_config=kv_events_config("acme/model"),
    )  # fmt: skip
    _check(vllm_flags(everything))


@pytest.mark.parametrize("flag", sorted(VLLM_FLAGS))
def test_the_pinned_flags_are_where_the_source_says(flag: str) -> None:
    wheel = extracted(VLLM)
    if wheel is None:
        pytest.skip(missing_reason(VLLM))
    source = wheel / "vllm"
    assert "__version__ = version = '0.33.0'" in (source / "_version.py").read_text()
    path, line, takes_value = VLLM_FLAGS[flag]
    lines = (source / path).read_text(encoding="utf-8").splitlines()
    if flag in FIELD_FLAGS:
        assert lines[line - 1].strip().startswith(FIELD_FLAGS[flag])
        return
    window = "\n".join(lines[line - 2 : line + 1])
    assert f'"{flag}"' in window and "add_argument(" in window, (flag, window)
    if not takes_value:
        after = "\n".join(lines[line - 1 : line + 3])
        bool_field = re.search(r'\*\*\w+_kwargs\["(\w+)"\]', after)
        assert "BooleanOptionalAction" in after or "store_true" in after or bool_field, (flag, after)
        if bool_field and "BooleanOptionalAction" not in after and "store_true" not in after:
            field = bool_field.group(1)
            configs = "\n".join((source / "config" / name).read_text() for name in ("model.py", "parallel.py",
                                                                                     "multimodal.py"))  # fmt: skip
            assert re.search(rf"^\s+{field}: bool = ", configs, re.MULTILINE), (flag, field)


def test_make_upstream_extracts_every_file_the_pins_name() -> None:
    named = {f"vllm/{path}" for path, _, _ in VLLM_FLAGS.values()}
    configs = {f"vllm/config/{name}" for name in ("model.py", "parallel.py", "multimodal.py")}
    assert named | configs | {"vllm/_version.py"} <= set(VLLM.members)
