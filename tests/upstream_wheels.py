"""The upstream wheels whose source the tests read, and `make upstream`, which fetches them:

    python -m tests.upstream_wheels

For each pinned wheel: `pip download --no-deps` into .cache/wheels/ (git-ignored; pip reuses a file already there),
its sha256 checked against the pin, then only the members the tests read extracted into .cache/upstream/<name>-<ver>/
(git-ignored). A second run with everything in place does nothing. A test reads the files through `extracted()`,
which names the command to run when they are missing.

vLLM's parser cannot be imported without torch and CUDA, so tests/test_vllm_flags.py reads its source instead: the
files below are the ones that define `vllm serve`'s flags and the config fields behind them, and `vllm bench serve`'s
(tests/test_verify_load.py). The Neuron engines are built on older vLLM releases (NxD Inference's plugin on 0.16.0,
vllm-neuron on 0.29.0, llm_eks/catalog/neuron.py): tests/test_neuron_flags.py reads those releases' parsers the same
way, and their metric names (v1/metrics/loggers.py). The two add 508 MB and 316 MB to the one-time download (pip's
cache keeps them; a few seconds each on PyPI's CDN here) and about 2 MB of extracted files.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tests.upstream import REPO_ROOT, WHEEL_FILES

WHEELS_CACHE = REPO_ROOT / ".cache" / "wheels"
_DONE = ".extracted"


@dataclass(frozen=True)
class Wheel:
    """A pinned wheel: the exact file PyPI serves for `name==version` on `platform`, and the members to extract."""

    name: str
    version: str
    filename: str
    sha256: str
    platform: str
    members: tuple[str, ...]

    @property
    def folder(self) -> Path:
        return WHEEL_FILES / f"{self.name}-{self.version}"


VLLM = Wheel(
    name="vllm",
    version="0.33.0",
    filename="vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
    # PyPI's sha256 of the file (pip prints it with `pip download -v`; `sha256sum` gives the same).
    sha256="4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa",
    # Named, so a developer on macOS or arm64 downloads the same file CI reads.
    platform="manylinux_2_28_x86_64",
    members=(
        "vllm/_version.py",
        "vllm/engine/arg_utils.py",
        "vllm/entrypoints/common/cli_args.py",
        "vllm/config/model.py",
        "vllm/config/parallel.py",
        "vllm/config/multimodal.py",
        # The NIXL connector's registration, config and the fields it reads (tests/test_disaggregation.py).
        "vllm/distributed/kv_transfer/kv_connector/factory.py",
        "vllm/config/kv_transfer.py",
        "vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py",
        "vllm/envs.py",
        # Why a pipeline-parallel pool is refused, and where each engine's side channel listens
        # (tests/test_disaggregated_lws.py).
        "vllm/distributed/kv_transfer/kv_connector/v1/nixl/pull_worker.py",
        "vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py",
        # The metric names the P/D dashboard, alerts and verify read (tests/test_disaggregated_monitoring.py).
        "vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py",
        "vllm/v1/metrics/loggers.py",
        # The CPU KV tier's pre-fault at start (tests/test_kv_offload.py).
        "vllm/v1/kv_offload/cpu/shared_offload_region.py",
        "vllm/v1/kv_offload/cpu/spec.py",
        # KV-cache events for the picker's precise prefix scorer, the CPU tier's among them, and the render
        # endpoints it tokenizes on (tests/test_kv_events.py).
        "vllm/config/kv_events.py",
        "vllm/distributed/kv_events.py",
        "vllm/distributed/kv_transfer/kv_connector/v1/offloading/events.py",
        "vllm/v1/core/sched/scheduler.py",
        "vllm/entrypoints/scale_out/factories.py",
        "vllm/entrypoints/scale_out/render/api_router.py",
        "vllm/entrypoints/serve/middleware/authenticate.py",
        # `vllm bench serve`'s flags (tests/vllm_bench_flags.py).
        "vllm/benchmarks/serve.py",
        "vllm/benchmarks/datasets/datasets.py",
    ),
)
# vLLM 0.16.0: NxD Inference's vLLM plugin (vllm-neuron 0.5.x) is built on it (its requirements/core.txt pins
# vllm==0.16.0). PyPI's manylinux_2_31 build is the one file for x86_64.
VLLM_0_16 = Wheel(
    name="vllm",
    version="0.16.0",
    filename="vllm-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl",
    sha256="f066b2a2f8597a4a3ada8fbbfd122b59086864b2260ca42dc81bf9fb57af0c42",
    platform="manylinux_2_31_x86_64",
    members=(
        "vllm/_version.py",
        "vllm/engine/arg_utils.py",
        "vllm/config/cache.py",
        "vllm/config/model.py",
        "vllm/entrypoints/launcher.py",
        "vllm/entrypoints/openai/cli_args.py",
        "vllm/v1/metrics/loggers.py",
    ),
)
# vLLM 0.29.0: vllm-neuron 0.29.0.1.2.0 is `<vLLM>.<plugin>`, plugin 1.2.0 on it.
VLLM_0_29 = Wheel(
    name="vllm",
    version="0.29.0",
    filename="vllm-0.29.0-cp38-abi3-manylinux_2_28_x86_64.whl",
    sha256="09d48617fc2be9c6cdcd5db480651ab0d84817b257204f2cc2e3ecbb70bbb635",
    platform="manylinux_2_28_x86_64",
    members=(
        "vllm/_version.py",
        "vllm/engine/arg_utils.py",
        "vllm/config/cache.py",
        "vllm/config/model.py",
        "vllm/entrypoints/launchers/cli_args.py",
        "vllm/v1/metrics/loggers.py",
    ),
)
WHEELS = (VLLM, VLLM_0_16, VLLM_0_29)


def extracted(wheel: Wheel) -> Path | None:
    """The folder holding the wheel's extracted members, or None until `make upstream` has run."""
    done = wheel.folder / _DONE
    return wheel.folder if done.is_file() and done.read_text(encoding="utf-8") == _record(wheel) else None


def _record(wheel: Wheel) -> str:
    """What the marker file holds once every member is extracted: the wheel's digest and the members."""
    return "\n".join((wheel.sha256, *wheel.members)) + "\n"


def missing_reason(wheel: Wheel) -> str:
    return f"{wheel.folder} is missing: `make upstream` downloads {wheel.filename} and extracts what the tests read"


def fetch(wheel: Wheel) -> Path:
    """Download (unless cached), check and extract one wheel; returns the folder of its extracted members."""
    if extracted(wheel):
        return wheel.folder
    path = WHEELS_CACHE / wheel.filename
    if not path.is_file():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
             "--platform", wheel.platform, "--dest", str(WHEELS_CACHE), f"{wheel.name}=={wheel.version}"],
            check=True,
        )  # fmt: skip
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != wheel.sha256:
        raise SystemExit(f"{path}: sha256 {digest.hexdigest()} is not the pinned {wheel.sha256}; delete it and rerun")
    with zipfile.ZipFile(path) as archive:
        for member in wheel.members:
            archive.extract(member, wheel.folder)
    (wheel.folder / _DONE).write_text(_record(wheel), encoding="utf-8")
    return wheel.folder


def main() -> None:
    for wheel in WHEELS:
        print(f"{wheel.filename}: {fetch(wheel).relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
