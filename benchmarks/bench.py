"""Benchmarks that print numbers (never timed tests): synth and test wall time, template size per environment.

    make bench            # or: .venv/bin/python benchmarks/bench.py [--skip-tests]

Run it after `make synth`/`make test` have set up .venv and node_modules, so set-up time is not counted.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    print(f"make synth ENV=dev   {timed(['make', 'synth', 'ENV=dev']):6.1f} s")
    print(f"make synth (all)     {timed(['make', 'synth']):6.1f} s")
    for template in sorted((ROOT / "cdk.out").glob("LlmEks-*.template.json")):
        body = json.loads(template.read_text())
        manifests = ROOT / "cdk.out" / "manifests" / template.name.split("-", 1)[1].split(".")[0]
        objects = sum(
            p.read_text().count("\napiVersion:") + p.read_text().startswith("apiVersion:")
            for p in manifests.glob("*.yaml")
            if p.name != "helm-releases.yaml"
        )
        print(
            f"{template.name:32} {template.stat().st_size / 1024:7.0f} KiB  "
            f"{len(body['Resources']):4d} resources  {objects:3d} Kubernetes objects"
        )
    if "--skip-tests" not in sys.argv:
        print(f"make test            {timed(['make', 'test']):6.1f} s")
    plan_bench = ROOT / "benchmarks" / "bench_plan.py"
    if plan_bench.exists():
        subprocess.run([sys.executable, str(plan_bench)], cwd=ROOT, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
