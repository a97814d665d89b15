"""Every flag a Neuron server gets exists in the argument parser of the upstream vLLM release its engine path is
built on (vLLM 0.16.0 for NxD Inference's plugin, 0.29.0 for vllm-neuron), and takes a value exactly when that
parser's does; the Neuron settings under `--additional-config` are field names read from the plugin's and NxD
Inference's source (tests/fixtures/neuron/, with their commits), and keep the constraints the documentation states.

As for vLLM 0.33 (tests/test_vllm_flags.py), the flags are pinned below with the file and line of each
`add_argument` in the wheel: vllm-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl and vllm-0.29.0-cp38-abi3-
manylinux_2_28_x86_64.whl from PyPI (`make upstream` downloads them, sha256-checked, tests/upstream_wheels.py), and
a second test re-reads every pinned line there. What this leaves unchecked: the Neuron wheels themselves (vllm-neuron,
neuronx-distributed-inference, torch-neuronx, neuronx-cc) come from Neuron's own package index, which neither this
machine nor CI reaches; the plugin sources at the pinned tags (release-0.5.3, release-0.29.0.1.2.0) were not
readable, so the settings fixtures are read from the nearest readable source (their `source` says which).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from llm_eks.planner import PlanRequest, plan
from llm_eks.planner.engine import EngineSettings
from llm_eks.planner.neuron.engine import NeuronServing, neuron_flags, neuron_settings
from llm_eks.planner.neuron.shape import compiled_shape
from llm_eks.planner.neuron.sizing import VLLM_NEURON_KV_CAP_FRACTION
from tests.upstream import REPO_ROOT
from tests.upstream_wheels import VLLM_0_16, VLLM_0_29, Wheel, extracted, missing_reason

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "neuron"

# flag -> (file in the wheel's vllm/ package, line of its add_argument, takes a value). `--no-enable-prefix-caching`
# is the BooleanOptionalAction's negative of the same add_argument (a bool config field); --host and --port are
# generated from the frontend args dataclass (their field's line).
NXDI_FLAGS: dict[str, tuple[str, int, bool]] = {
    "--trust-remote-code": ("engine/arg_utils.py", 652, False),
    "--dtype": ("engine/arg_utils.py", 655, True),
    "--revision": ("engine/arg_utils.py", 664, True),
    "--max-model-len": ("engine/arg_utils.py", 669, True),
    "--served-model-name": ("engine/arg_utils.py", 694, True),
    "--tensor-parallel-size": ("engine/arg_utils.py", 798, True),
    "--num-gpu-blocks-override": ("engine/arg_utils.py", 933, True),
    "--enable-prefix-caching": ("engine/arg_utils.py", 936, False),
    "--no-enable-prefix-caching": ("engine/arg_utils.py", 936, False),
    "--max-num-seqs": ("engine/arg_utils.py", 1112, True),
    "--additional-config": ("engine/arg_utils.py", 1211, True),
    "--host": ("entrypoints/openai/cli_args.py", 73, True),
    "--port": ("entrypoints/openai/cli_args.py", 75, True),
}
VLLM_NEURON_FLAGS: dict[str, tuple[str, int, bool]] = {
    "--trust-remote-code": ("engine/arg_utils.py", 899, False),
    "--dtype": ("engine/arg_utils.py", 902, True),
    "--revision": ("engine/arg_utils.py", 911, True),
    "--max-model-len": ("engine/arg_utils.py", 916, True),
    "--served-model-name": ("engine/arg_utils.py", 952, True),
    "--tensor-parallel-size": ("engine/arg_utils.py", 1107, True),
    "--block-size": ("engine/arg_utils.py", 1270, True),
    "--num-gpu-blocks-override": ("engine/arg_utils.py", 1278, True),
    "--enable-prefix-caching": ("engine/arg_utils.py", 1281, False),
    "--no-enable-prefix-caching": ("engine/arg_utils.py", 1281, False),
    "--max-num-batched-tokens": ("engine/arg_utils.py", 1581, True),
    "--max-num-seqs": ("engine/arg_utils.py", 1595, True),
    "--additional-config": ("engine/arg_utils.py", 1728, True),
    "--shutdown-timeout": ("engine/arg_utils.py", 1765, True),
    "--host": ("entrypoints/launchers/cli_args.py", 253, True),
    "--port": ("entrypoints/launchers/cli_args.py", 255, True),
}
TABLES = {"nxd-inference": (VLLM_0_16, NXDI_FLAGS), "vllm-neuron": (VLLM_0_29, VLLM_NEURON_FLAGS)}


def check(args: tuple[str, ...] | list[str], table: dict[str, tuple[str, int, bool]], version: str) -> None:
    """Each flag is in the table, followed by a value exactly when it takes one."""
    i = 0
    while i < len(args):
        flag = args[i]
        assert flag in table, f"{flag} is not a vLLM {version} flag"
        following = args[i + 1] if i + 1 < len(args) else None
        if not table[flag][2]:
            assert following is None or following.startswith("--"), (flag, following)
            i += 1
            continue
        assert following is not None and not following.startswith("--"), (flag, following)
        i += 2


REQUESTS = {
    "inf2-8b-4k": PlanRequest(model="meta-llama/Llama-3.1-8B-Instruct", accelerator="inf2.8xlarge", max_model_len=4096),
    "inf2-48xl-70b": PlanRequest(
        model="meta-llama/Llama-3.3-70B-Instruct", accelerator="inf2.48xlarge", max_model_len=8192
    ),
    "trn1-qwen3-32b": PlanRequest(model="Qwen/Qwen3-32B", accelerator="trn1.32xlarge", max_model_len=16384),
    "trn2-70b": PlanRequest(model="meta-llama/Llama-3.3-70B-Instruct", accelerator="trn2.48xlarge"),
    "trn2-8b-short": PlanRequest(
        model="meta-llama/Llama-3.1-8B-Instruct", accelerator="trn2.48xlarge", max_model_len=2048
    ),
}


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_every_flag_of_a_neuron_plan_is_in_its_vllm_release(name: str) -> None:
    p = plan(REQUESTS[name])
    assert p.neuron is not None
    wheel, table = TABLES[p.neuron.engine]
    check(p.engine_args, table, wheel.version)


def test_every_flag_the_renderer_can_give_is_in_its_vllm_release() -> None:
    everything = EngineSettings(max_model_len=4096, revision="0123456789abcdef0123456789abcdef01234567",
                                trust_remote_code=True)  # fmt: skip
    for engine, (wheel, table) in TABLES.items():
        for batch, length in ((1, 128), (4, 4096), (16, 131072)):
            serving = NeuronServing(engine, compiled_shape(engine, batch, length), engine == "vllm-neuron")
            check(neuron_flags(serving, everything), table, wheel.version)


def _source(wheel: Wheel) -> Path:
    folder = extracted(wheel)
    if folder is None:
        pytest.skip(missing_reason(wheel))
    source = folder / "vllm"
    assert f"__version__ = version = '{wheel.version}'" in (source / "_version.py").read_text()
    return source


def _calls(path: Path) -> dict[int, ast.Call]:
    """The `add_argument` calls of a source file by line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        n.lineno: n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"
    }


@pytest.mark.parametrize(
    ("engine", "flag"), [(engine, flag) for engine, (_, table) in TABLES.items() for flag in sorted(table)]
)
def test_the_pinned_flags_are_where_the_source_says(engine: str, flag: str) -> None:
    wheel, table = TABLES[engine]
    source = _source(wheel)
    path, line, takes_value = table[flag]
    if flag in ("--host", "--port"):
        lines = (source / path).read_text(encoding="utf-8").splitlines()
        assert re.match(rf"\s+{flag[2:]}: ", lines[line - 1]), (flag, lines[line - 1])
        return
    call = _calls(source / path)[line]
    positive = f"--{flag.removeprefix('--no-')}" if flag.startswith("--no-") else flag
    assert isinstance(call.args[0], ast.Constant) and call.args[0].value == positive, (flag, ast.unparse(call))
    if not takes_value:
        # A bool config field: vLLM's argument builder gives it BooleanOptionalAction (--flag and --no-flag).
        field = re.search(r"_kwargs\[['\"](\w+)['\"]\]", ast.unparse(call))
        assert field is not None, (flag, ast.unparse(call))
        configs = "\n".join((source / "config" / name).read_text() for name in ("cache.py", "model.py"))
        assert re.search(rf"^\s+{field.group(1)}: bool = ", configs, re.MULTILINE), (flag, field.group(1))


def test_what_the_engine_paths_rely_on_in_their_vllm_release() -> None:
    old, new = _source(VLLM_0_16), _source(VLLM_0_29)
    old_args, new_args = (s / "engine" / "arg_utils.py" for s in (old, new))
    # 0.16 has no --shutdown-timeout (SIGTERM cancels the server task: entrypoints/launcher.py), 0.29 has it.
    assert '"--shutdown-timeout"' not in old_args.read_text() and '"--shutdown-timeout"' in new_args.read_text()
    assert "server_task.cancel()" in (old / "entrypoints" / "launcher.py").read_text()
    # Prefix caching is on by default in both: the NxD Inference path renders --no-enable-prefix-caching explicitly.
    for source in (old, new):
        assert "    enable_prefix_caching: bool = True" in (source / "config" / "cache.py").read_text()
    # 0.16's block sizes are a Literal; 0.29 takes any size above 0 (vllm-neuron renders 32).
    assert "BlockSize = Literal[1, 8, 16, 32, 64, 128, 256]" in (old / "config" / "cache.py").read_text()
    assert "block_size: int = Field(default=None, gt=0)" in (new / "config" / "cache.py").read_text()
    # vllm-neuron budgets gpu_memory_utilization x HBM; 0.29's default is the planner's (0.92).
    assert (
        "gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1)" in (new / "config" / "cache.py").read_text()
    )


# --- Neuron settings -----------------------------------------------------------------------------------------------


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


def test_the_fixtures_say_where_they_were_read() -> None:
    for name in ("nxdi-neuron-config-keys.json", "vllm-neuron-0.5-additional-config.json",
                 "vllm-neuron-1.x-neuron-config.json"):  # fmt: skip
        source = fixture(name)["source"]
        assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]) and source["repo"] and source["read"], name
    assert "provisional" in fixture("vllm-neuron-1.x-neuron-config.json")["source"]["status"]


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_every_neuron_setting_a_plan_renders_is_a_field_of_its_path(name: str) -> None:
    p = plan(REQUESTS[name])
    assert p.neuron is not None
    args = list(p.engine_args)
    config = json.loads(args[args.index("--additional-config") + 1])
    assert config == neuron_settings(p.neuron.serving)
    (key,) = config
    if p.neuron.engine == "nxd-inference":
        # The plugin reads the key with an underscore; the hyphenated spelling of some examples is ignored.
        assert key in fixture("vllm-neuron-0.5-additional-config.json")["additional_config_keys"]
        assert key == "override_neuron_config"
        assert set(config[key]) <= set(fixture("nxdi-neuron-config-keys.json")["NeuronConfig"]["keys"])
    else:
        assert key == "neuron_config" and key in fixture("vllm-neuron-1.x-neuron-config.json")["additional_config_keys"]
        assert set(config[key]) <= set(fixture("vllm-neuron-1.x-neuron-config.json")["neuron_config"])


def flag_value(args: list[str], flag: str) -> int:
    return int(args[args.index(flag) + 1])


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_the_buckets_keep_what_the_documentation_requires(name: str) -> None:
    p = plan(REQUESTS[name])
    assert p.neuron is not None
    args = list(p.engine_args)
    settings = json.loads(args[args.index("--additional-config") + 1])
    length, seqs = flag_value(args, "--max-model-len"), flag_value(args, "--max-num-seqs")
    if p.neuron.engine == "nxd-inference":
        s = settings["override_neuron_config"]
        for buckets in (s["context_encoding_buckets"], s["token_generation_buckets"]):
            assert buckets == sorted(set(buckets)) and buckets[0] >= 128 and buckets[-1] == length
        # Contiguous KV: prefix caching off and exactly max_num_seqs blocks (vllm-user-guide-v1.rst, Known Issues).
        assert "--no-enable-prefix-caching" in args and flag_value(args, "--num-gpu-blocks-override") == seqs
        assert "--max-num-batched-tokens" not in args and "--block-size" not in args
        return
    s = settings["neuron_config"]
    docs = fixture("vllm-neuron-1.x-neuron-config.json")
    block, budget = flag_value(args, "--block-size"), flag_value(args, "--max-num-batched-tokens")
    assert max(s["num_batched_tokens_buckets"]) == budget and max(s["num_seqs_buckets"]) == seqs
    assert s["num_seqs_buckets"] == sorted(set(s["num_seqs_buckets"]))
    if "--enable-prefix-caching" in args:
        # Prefix caching needs segmented prefill; the segment buckets equal the token buckets.
        assert s["kv_segment_size_buckets"] == s["num_batched_tokens_buckets"]
        assert all(v in docs["segment_sizes"] and v % block == 0 for v in s["kv_segment_size_buckets"])
    # Enough blocks for every sequence to reach max_model_len, and the KV cache under vllm-neuron's cap.
    assert flag_value(args, "--num-gpu-blocks-override") * block >= seqs * length
    assert p.kv_cache_bytes_per_gpu <= VLLM_NEURON_KV_CAP_FRACTION * p.usable_bytes_per_gpu


def test_make_upstream_extracts_every_file_the_pins_name() -> None:
    for wheel, table in TABLES.values():
        named = {f"vllm/{path}" for path, _, _ in table.values()}
        assert named | {"vllm/_version.py", "vllm/config/cache.py", "vllm/config/model.py"} <= set(wheel.members)
