"""Wall time of the capacity planner (prints numbers; not a test): in-process plan(), the module import, and the
`llm-eks plan` CLI both as `python -m llm_eks.cli` and as the installed console script.

    .venv/bin/python benchmarks/bench_plan.py [--runs N]

Also reports whether anything heavy (aws_cdk, cdk8s, constructs, jsii) got imported on the way.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]
HEAVY = ("aws_cdk", "cdk8s", "constructs", "jsii")


def wall(cmd: list[str], runs: int) -> tuple[float, float]:
    """Median and best wall time in ms over `runs` runs (after one warm-up run that fills the OS file cache)."""
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


def in_process(runs: int) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from llm_eks.planner import PlanRequest, plan

    requests = {
        "explicit g6e.xlarge (8B)": PlanRequest(
            model="meta-llama/Llama-3.1-8B-Instruct", accelerator="g6e.xlarge", max_model_len=8192
        ),
        "auto (8B bf16)": PlanRequest(model="meta-llama/Llama-3.1-8B-Instruct", max_model_len=8192),
        "auto (70B fp8, 16k)": PlanRequest(
            model="meta-llama/Llama-3.3-70B-Instruct", weight_format="fp8", max_model_len=16384, target_concurrency=32
        ),
    }
    for label, request in requests.items():
        start = time.perf_counter()
        for _ in range(runs * 20):
            plan(request)
        print(f"plan() {label:<28} {(time.perf_counter() - start) * 1000 / (runs * 20):7.2f} ms")
    from llm_eks.planner.compare import compare

    for label, request in requests.items():
        start = time.perf_counter()
        for _ in range(runs * 5):
            compare(request)
        print(f"compare() {label:<25} {(time.perf_counter() - start) * 1000 / (runs * 5):7.2f} ms")
    heavy = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
    print(f"heavy modules imported           {heavy or 'none'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    python = sys.executable
    in_process(runs)
    rows = [
        ("python -c pass (interpreter floor)", [python, "-c", "pass"]),
        ("import llm_eks.cli", [python, "-c", "import llm_eks.cli"]),
        ("python -m llm_eks.cli plan", [python, "-m", "llm_eks.cli", "plan", *MODEL]),
        ("python -m ... plan --json (auto)", [python, "-m", "llm_eks.cli", "plan", *MODEL, "--json"]),
        (
            "python -m ... plan --compare --chart",
            [python, "-m", "llm_eks.cli", "plan", *MODEL, "--compare", "--chart", "/tmp/llm-eks-bench-chart.svg"],
        ),
    ]
    script = shutil.which("llm-eks", path=str(Path(python).parent))
    if script:
        rows += [
            ("llm-eks plan (console script)", [script, "plan", *MODEL]),
            ("llm-eks plan --env prod", [script, "plan", "--env", "prod"]),
        ]
    else:
        print("console script llm-eks not installed next to this python (pip install -e .)")
    for label, cmd in rows:
        median, best = wall(cmd, runs)
        print(f"{label:<36} median {median:6.0f} ms   best {best:6.0f} ms   ({runs} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
