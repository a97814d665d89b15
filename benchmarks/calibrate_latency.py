"""Fit the latency model's constants (src/llm_eks/planner/latency/fitted.py) to every published run the scoring
rules admit (benchmarks/latency_rules.py), and print them as fitted.py's defaults with the fixture's sha256 to record
beside them. The fit is benchmarks/latency_fit.py's, in pure Python: re-run this when the fixture changes, and paste
what it prints (tests/test_latency_accuracy.py fails until the digest and the constants match a fresh fit).

    .venv/bin/python -m benchmarks.calibrate_latency
"""

from __future__ import annotations

import dataclasses
import sys

from benchmarks.latency_error_table import digest, fit_constants, load, prepare


def main() -> int:
    prepared, dropped = prepare(load())
    fitted = fit_constants(prepared)
    print(f"{len(prepared)} admitted runs ({len(dropped)} excluded by the rules); fixture sha256 {digest()}")
    print(f'FIXTURE_SHA256 = "{digest()}"')
    for field in dataclasses.fields(fitted):
        print(f"    {field.name}: float = {getattr(fitted, field.name)!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
