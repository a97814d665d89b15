"""The skip policy (tests/skip_policy.py), run by pytester in a session of its own over a small test file."""

from __future__ import annotations

import pytest

from tests.skip_policy import allowed

TESTS = """
import pytest

def test_runs():
    assert True

def test_skips():
    pytest.skip("the wheel is missing")

@pytest.mark.skip(reason="by marker")
def test_marked():
    pass

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    assert False
"""


@pytest.fixture(autouse=True)
def _no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)


def test_plain_pytest_reports_skips_as_skips(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_it=TESTS)
    pytester.runpytest_inprocess("-p", "tests.skip_policy").assert_outcomes(passed=1, skipped=2, xfailed=1)


@pytest.mark.parametrize("how", [("--strict-skips",), ("CI",)], ids=["make-test", "ci"])
def test_a_skip_fails_under_make_test_and_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: tuple[str]
) -> None:
    pytester.makepyfile(test_it=TESTS)
    args = ["-p", "tests.skip_policy"]
    if how == ("CI",):
        monkeypatch.setenv("CI", "true")
    else:
        args.append("--strict-skips")
    result = pytester.runpytest_inprocess(*args)
    result.assert_outcomes(passed=1, failed=1, errors=1, xfailed=1)  # the marker skips at setup: an error
    result.stdout.fnmatch_lines(["*skipped (the wheel is missing), and a skip fails the run here*ALLOWED_SKIPS*"])


def test_a_module_that_skips_whole_fails_its_collection(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_gone='import pytest\npytest.importorskip("no_such_module")\n')
    result = pytester.runpytest_inprocess("-p", "tests.skip_policy", "--strict-skips")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*could not import 'no_such_module'*a skip fails the run here*"])


def test_the_allow_list_matches_node_id_prefixes_only() -> None:
    allow = {"tests/test_x.py::test_gpu": "needs a GPU"}
    assert allowed("tests/test_x.py::test_gpu[a100]", allow) == "needs a GPU"
    assert allowed("tests/test_x.py::test_cpu", allow) is None
