"""No test skips silently (a pytest plugin; tests/conftest.py loads it).

Under `make test`, which passes `--strict-skips`, and wherever the environment variable CI is set (to anything but
"", "0" or "false"), a skipped test fails with its skip reason, unless its node id starts with a key of ALLOWED_SKIPS,
where the value says why that skip is right. A module that skips as a whole fails its collection the same way. xfail is
not a skip and is left alone. Plain `pytest` and `make check-fast`, the inner loop, report skips as skips.

`make test` installs everything the suite needs (the venvs, checkov, the vLLM wheel's files through `make upstream`),
so a skip there means something is missing that a user's clone would miss too.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

# Node-id prefix -> why that test may skip under `make test` and CI. Keep it short; every entry is a gap in the gate.
ALLOWED_SKIPS: dict[str, str] = {}
OPTION = "--strict-skips"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(OPTION, action="store_true", help="fail a skipped test unless tests/skip_policy.py allows it")


def strict(config: pytest.Config) -> bool:
    ci = os.environ.get("CI", "").strip().lower()
    return bool(config.getoption(OPTION)) or ci not in ("", "0", "false")


def allowed(nodeid: str, allow: dict[str, str] | None = None) -> str | None:
    """The reason a skip of `nodeid` is allowed, or None."""
    allow = ALLOWED_SKIPS if allow is None else allow
    return next((reason for prefix, reason in allow.items() if nodeid.startswith(prefix)), None)


def _reason(longrepr: Any) -> str:
    # A skip's longrepr is (file, line, "Skipped: <reason>").
    return str(longrepr[2] if isinstance(longrepr, tuple) else longrepr).removeprefix("Skipped: ")


def _fail(report: pytest.TestReport | pytest.CollectReport, config: pytest.Config) -> None:
    if report.skipped and not hasattr(report, "wasxfail") and strict(config) and allowed(report.nodeid) is None:
        why = "--strict-skips" if config.getoption(OPTION) else "CI is set"
        report.outcome = "failed"
        report.longrepr = (
            f"skipped ({_reason(report.longrepr)}), and a skip fails the run here ({why}): make it run, or add "
            "its node id with a reason to ALLOWED_SKIPS in tests/skip_policy.py"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    _fail(report, item.config)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    report = yield
    _fail(report, collector.config)
    return report
