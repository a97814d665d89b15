"""Benchmarks that print numbers (never timed tests): synth phases per environment, `cdk synth` wall and CPU (next to
the eks-blueprints anchor when its folder is given), `make synth`, template sizes, `make test` and `make check-fast`
against their goals, the planner's latency and its error against published vLLM logs and serving benchmarks, and
the modelled cold start of every default workload.

    make bench                                   # or: .venv/bin/python benchmarks/bench.py [options]
    make bench ARGS="--anchor ../anchor --skip-tests"     # the anchor ratio: median of 5 side-by-side runs
    make bench ARGS="--floor --skip-tests"                # a Python CDK app's floor: the twin apps' ratio

--anchor DIR: a CDK app folder (cdk.json, node_modules) synthesized with `npx cdk synth`, alternating run by run
with ours, so both see the same machine. Run it after `make synth`/`make test` have set up .venv and node_modules,
so set-up time is not counted. Figures are medians; CPU includes every child process (the jsii node kernel).

--floor: the same bare aws-eks-v2 cluster with the kubectl layer and cdk-nag, once in Python and once in JavaScript
(benchmarks/twin/), synthesized alternately: the ratio any Python CDK app starts from against a JavaScript one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CDK = str(ROOT / "node_modules" / ".bin" / "cdk")
PHASES = ("imports", "jsii load", "plan", "build", "synth", "checks", "review", "total")
QUIET = ["--quiet", "--no-notices", "--no-version-reporting"]


def run(cmd: list[str], cwd: Path = ROOT) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system, children included) of one command, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def phases(environments: list[str], runs: int) -> None:
    """Each environment's synth phases in a fresh process (median of `runs`); the first run also times the
    built-in CloudFormation validation our app leaves off."""
    script = str(ROOT / "benchmarks" / "synth_phases.py")
    print("synth phases, seconds (median of", runs, "fresh processes)")
    print(f"{'env':8}" + "".join(f"{p:>11}" for p in (*PHASES, "cpu", "cfn valid.")))
    for env in environments:
        samples = []
        for index in range(runs):
            extra = ["--cfn-validation"] if index == 0 else []
            _, cpu, out = run([sys.executable, script, env, *extra])
            samples.append({**json.loads(out), "cpu": cpu})
        row = {p: statistics.median(s[p] for s in samples) for p in PHASES}
        # Run 0's CPU includes the CloudFormation validation; the others are plain synths.
        row["cpu"] = statistics.median(s["cpu"] for s in samples[1:] or samples)
        print(
            f"{env:8}"
            + "".join(f"{row[p]:11.2f}" for p in (*PHASES, "cpu"))
            + f"{samples[0].get('cfn validation', float('nan')):11.2f}"
        )


def cdk_synth(env: str, anchor: Path | None, runs: int) -> None:
    """`cdk synth -c env=ENV` wall and CPU, alternating with the anchor's `npx cdk synth` when given."""
    ours: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    for _ in range(runs):
        ours.append(run([CDK, "synth", *QUIET, "-c", f"env={env}"])[:2])
        if anchor:
            theirs.append(run(["npx", "--no-install", "cdk", "synth", "--quiet", "--no-notices"], cwd=anchor)[:2])
    wall, cpu = (statistics.median(x) for x in zip(*ours, strict=True))
    print(f"cdk synth -c env={env:8}  {wall:6.2f} s wall  {cpu:6.2f} s CPU  (median of {runs})")
    if anchor:
        a_wall, a_cpu = (statistics.median(x) for x in zip(*theirs, strict=True))
        print(f"anchor {anchor.name:21}  {a_wall:6.2f} s wall  {a_cpu:6.2f} s CPU  (median of {runs}, alternating)")
        print(f"ratio                       {wall / a_wall:6.2f}x wall  {cpu / a_cpu:6.2f}x CPU")


TWIN = ROOT / "benchmarks" / "twin"
# The npm packages of the JavaScript twin, and the Python distributions that carry the same jsii assemblies.
TWIN_PACKAGES = {
    "aws-cdk-lib": "aws-cdk-lib",
    "cdk-nag": "cdk-nag",
    "constructs": "constructs",
    "@aws-cdk/lambda-layer-kubectl-v35": "aws-cdk.lambda-layer-kubectl-v35",
}


def _twin_versions() -> dict[str, tuple[str, str]]:
    """Each twin package's (Python, npm) version; the JavaScript twin's packages are installed on first use."""
    from importlib.metadata import version

    js = TWIN / "js"
    if not (js / "node_modules").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=js, check=True)
    return {
        npm: (version(dist), json.loads((js / "node_modules" / npm / "package.json").read_text())["version"])
        for npm, dist in TWIN_PACKAGES.items()
    }


def floor(runs: int) -> None:
    """The twin apps' `cdk synth`, alternating, and their ratio: the floor of a Python CDK app's synth."""
    versions = _twin_versions()
    differ = {name: pair for name, pair in versions.items() if pair[0] != pair[1]}
    if differ:
        raise SystemExit(f"twin versions differ (Python, npm): {differ}; align benchmarks/twin/js/package.json")
    samples: dict[str, list[tuple[float, float]]] = {"python": [], "js": []}
    for _ in range(runs):
        for side in samples:
            samples[side].append(run([CDK, "synth", *QUIET, "-o", f"cdk.out.{side}"], cwd=TWIN / side)[:2])
    resources = {
        side: sorted(json.loads((TWIN / side / f"cdk.out.{side}" / "Twin.template.json").read_text())["Resources"])
        for side in samples
    }
    if resources["python"] != resources["js"]:
        raise SystemExit("the twins synthesized different resources; they must build the same thing")
    pinned = ", ".join(f"{name} {pair[0]}" for name, pair in versions.items())
    print(f"twin apps ({len(resources['js'])} resources each; {pinned}):")
    medians = {side: [statistics.median(x) for x in zip(*s, strict=True)] for side, s in samples.items()}
    for side, (wall, cpu) in medians.items():
        print(f"  {side:26} {wall:6.2f} s wall  {cpu:6.2f} s CPU  (median of {runs}, alternating)")
    (p_wall, p_cpu), (j_wall, j_cpu) = medians["python"], medians["js"]
    print(f"floor: Python / JavaScript   {p_wall / j_wall:6.2f}x wall  {p_cpu / j_cpu:6.2f}x CPU")


def sizes() -> None:
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchor", type=Path, help="folder of a CDK app to compare one synth with")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per environment for the phases")
    parser.add_argument(
        "--synth-runs", type=int, default=5, help="side-by-side `cdk synth` runs (ours, the anchor) for the ratio"
    )
    parser.add_argument("--floor", action="store_true", help="also synthesize the Python/JavaScript twin apps")
    parser.add_argument("--skip-tests", action="store_true", help="do not time `make test` and `make check-fast`")
    args = parser.parse_args()
    os.environ.setdefault("CDK_DISABLE_VERSION_CHECK", "1")
    environments = list(json.loads((ROOT / "cdk.json").read_text())["context"]["environments"])

    phases(environments, args.runs)
    cdk_synth(environments[-1], args.anchor.resolve() if args.anchor else None, args.synth_runs)
    if args.floor:
        floor(args.synth_runs)
    wall, cpu, _ = run(["make", "synth"])
    print(f"make synth (all {len(environments)})      {wall:6.2f} s wall  {cpu:6.2f} s CPU")
    sizes()
    if not args.skip_tests:
        # The goals: the whole suite within 120 s on two cores, the inner loop within 15 s.
        for target, goal in (("test", 120), ("check-fast", 15)):
            wall, cpu, _ = run(["make", target])
            verdict = "within" if wall <= goal else "OVER"
            print(f"make {target:22} {wall:6.2f} s wall  {cpu:6.2f} s CPU  ({verdict} the {goal} s goal)")
    for script in ("bench_plan.py", "kv_error_table.py", "cold_start_table.py"):
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / script)], cwd=ROOT, check=True)
    # A module: it imports its siblings (the scoring rules, the fit) as the benchmarks package.
    subprocess.run([sys.executable, "-m", "benchmarks.latency_error_table"], cwd=ROOT, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
