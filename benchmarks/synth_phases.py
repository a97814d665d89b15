"""One environment's synth, in this process, timed phase by phase; prints one JSON object (bench.py runs it).

    .venv/bin/python benchmarks/synth_phases.py ENV [--cfn-validation]

Phases, in the order `cdk synth` runs them:
- imports: Python modules (ours, aws_cdk, cdk8s, cdk_nag), without the next item;
- jsii load: the node kernel loading each jsii assembly (aws-cdk-lib, cdk8s, cdk-nag, the kubectl layer, ...);
- plan: config validation and the capacity plan;
- build: the stack's constructs (jsii round trips, and aws_cdk submodules imported on first use);
- synth: `app.synth()` (templates, assets, tree, cdk-nag) without our plugin's Python callback;
- checks: LlmEksChecks' Python callback;
- review: cdk.out/manifests/<env>/ (chart objects resolved through the kernel, then YAML);
- cfn validation (with --cfn-validation): aws-cdk-lib's built-in CloudFormation validation of this template, which
  our app leaves off; the time it would add.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

START = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
TIMES: dict[str, float] = {"jsii load": 0.0, "plan": 0.0, "checks": 0.0}


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMES[name] += time.perf_counter() - start

    return wrapper


def main() -> int:
    env = sys.argv[1]
    import jsii._kernel

    jsii._kernel.Kernel.load = _timed("jsii load", jsii._kernel.Kernel.load)  # type: ignore[method-assign]

    import aws_cdk as cdk

    from llm_eks.infra import app as llm_app
    from llm_eks.infra.checks import LlmEksChecks

    imported = time.perf_counter()
    TIMES["imports"] = imported - START - TIMES["jsii load"]
    llm_app.plan_workloads = _timed("plan", llm_app.plan_workloads)  # type: ignore[assignment]
    LlmEksChecks.validate = _timed("checks", LlmEksChecks.validate)  # type: ignore[method-assign]
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    with tempfile.TemporaryDirectory() as outdir:
        app = llm_app.new_app(context={**context, "env": env}, outdir=outdir)
        stacks = llm_app.build_app(app)
        llm_app.add_checks(app)
        built = time.perf_counter()
        TIMES["build"] = built - imported - TIMES["plan"]
        assembly = app.synth()
        synthesized = time.perf_counter()
        TIMES["synth"] = synthesized - built - TIMES["checks"]
        llm_app.write_review(app, stacks, assembly)
        TIMES["review"] = time.perf_counter() - synthesized
        TIMES["total"] = time.perf_counter() - START
        if "--cfn-validation" in sys.argv:
            TIMES["cfn validation"] = _builtin_validation(cdk, [str(Path(outdir, s.template_file)) for s in stacks])
    print(json.dumps(TIMES))
    return 0


def _builtin_validation(cdk: Any, templates: list[str]) -> float:
    """Wall time of aws-cdk-lib's CloudFormationValidatePlugin on these templates (engine start included, as in a
    synth that has it on); raises if it reports an error."""
    import jsii

    @jsii.implements(cdk.IPolicyValidationContext)
    class Context:
        @property
        def stack_templates(self) -> list[Any]:
            return [cdk.PolicyValidationStack(stack_construct_path=p, template_path=p) for p in templates]

        @property
        def template_paths(self) -> list[str]:
            return templates

    start = time.perf_counter()
    report = cdk.CloudFormationValidatePlugin().validate(Context())
    elapsed = time.perf_counter() - start
    errors = [v.rule_name for v in report.violations if v.severity in ("error", "fatal")]
    if errors:
        raise SystemExit(f"CloudFormation validation found {errors}")
    return elapsed


if __name__ == "__main__":
    sys.exit(main())
