"""The planner's prefill/decode estimate against published P/D benchmarks: the fixture is pinned by its digest, the
scoring rules decide before any error is computed, an admitted benchmark is planned as it was served and compared
with what the planner itself reports, and the accuracy page states what the scores show (here: that none passes)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from benchmarks import pd_error_table as pd
from benchmarks import pd_rules
from docgen.accuracy import pd_accuracy_table, pd_rules_section
from llm_eks.planner import plan

# tests/fixtures/pd/published.json as its rows were read from their sources: a change to a figure fails here first.
FIXTURE_SHA256 = "a8465803037c54beb2dda5a98e270864c18b97b3352de7e98c21f0e48b3e0cee"
LLM_D = "llm-d-pd-guide-gpt-oss-120b-h200-p8tp1-d2tp4-in5000-out250-rate45"


@pytest.fixture(scope="module")
def runs() -> list[dict[str, Any]]:
    return pd.load()


def test_the_fixture_is_the_one_the_rows_were_read_into() -> None:
    assert pd.digest() == FIXTURE_SHA256


def test_every_row_names_its_source_at_a_commit_or_address(runs: list[dict[str, Any]]) -> None:
    for run in runs:
        src = run["source"]
        assert (src.get("repo") and src.get("path") and len(src.get("commit", "")) == 40) or src.get("url"), run["id"]


def test_llm_d_guide_is_excluded_by_every_rule_it_breaks(runs: list[dict[str, Any]]) -> None:
    (run,) = (r for r in runs if r["id"] == LLM_D)
    assert [rule for rule, _ in pd_rules.every_breach(run)] == ["P2", "P3", "P4", "P5"]
    assert pd_rules.excluded(run) == ("P2", "no vLLM version stated")
    assert dict(pd_rules.every_breach(run))["P3"].startswith("prefill TP1 and decode TP4")


def test_no_benchmark_is_scored_and_the_page_says_so() -> None:
    result = pd.scores()
    assert result.rows == []
    assert [run_id for run_id, _, _ in result.excluded] == [LLM_D]
    assert "**not scored**" in pd_accuracy_table()
    assert f"`{LLM_D}`" in pd_rules_section()


def _admissible(run: dict[str, Any]) -> dict[str, Any]:
    """The llm-d row with the settings the rules ask for (same TP, a concurrency, EFA, a vLLM version): a test input
    for the scoring path, never a published benchmark."""
    out = copy.deepcopy(run)
    out.update(vllm_version="0.15.1", regime="fixed-concurrency", concurrency=64, transport="efa")
    out["prefill"] = {"replicas": 2, "tp": 4}
    return out


def test_an_admitted_benchmark_is_compared_with_the_planners_own_pd_figures(runs: list[dict[str, Any]]) -> None:
    run = _admissible(next(r for r in runs if r["id"] == LLM_D))
    assert pd_rules.excluded(run) is None
    row = pd.score(run)
    forced = plan(pd.request(run, "on")).disaggregation
    chosen = plan(pd.request(run, "auto")).disaggregation
    assert forced is not None and forced.disaggregated is not None and chosen is not None
    assert forced.disaggregated.pools[0].replicas == 2
    assert (row.ttft_estimated, row.decode_estimated) == (forced.disaggregated.ttft_ms, forced.disaggregated.tpot_ms)
    # The published TTFT is the median where given; a chunked stream's ITL gives way to its TPOT.
    assert (row.ttft_metric, row.ttft_measured) == ("median", 1108.4)
    assert (row.decode_metric, row.decode_measured) == ("TPOT median", 5.70)
    assert row.ttft_error == pytest.approx(row.ttft_estimated / 1108.4 - 1)
    assert row.recommended == chosen.recommended
    assert row.agrees is (chosen.recommended == "disaggregated")


def test_a_transport_without_a_planner_rate_drops_the_ttft_only(runs: list[dict[str, Any]]) -> None:
    run = _admissible(next(r for r in runs if r["id"] == LLM_D))
    run["transport"] = "roce"
    row = pd.score(run)
    assert row.ttft_rule == "P5: KV transfer over 'roce', a rate the planner does not hold"
    assert row.ttft_error is None and row.decode_error is not None
    assert [s.points for s in pd.summarize([row])] == [0, 1]
