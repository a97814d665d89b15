"""`llm-eks plan --env` says what each workload survives at its minimum replicas and what its on-demand floor costs
(llm_eks.config.resilience), from the environment's own settings and the plan's cold start."""

from __future__ import annotations

import json

import pytest

from llm_eks.cli import main
from tests.conftest import REPO_ROOT


def _plan(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["plan", "--context-file", str(REPO_ROOT / "cdk.json"), *argv]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def test_prod_keeps_its_minimum_on_demand_and_prices_the_floor(capsys: pytest.CaptureFixture[str]) -> None:
    body = json.loads(_plan(capsys, "--env", "prod", "--json"))
    assert body["resilience"] == {
        "min_replicas": 2,
        "on_demand_floor": 2,
        # Two replicas at the plan's on-demand price per replica.
        "floor_usd_per_hour": round(2 * body["cost"]["usd_per_replica_hour"], 2),
        "spot_reclaim": "survived: the 2 minimum replicas run on on-demand capacity",
        "zone_loss": "half the minimum replicas for ≈11 min (the floor runs in every zone)",
    }


def test_a_single_spot_first_replica_states_its_outages(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "--env", "dev")
    assert out.rstrip().splitlines()[-1] == (
        "resilience of this workload at 1 replica: Spot reclaim an outage of 273 s (its only replica, on a new "
        "node); zone loss an outage of ≈11 min if its only replica was there; no on-demand floor"
    )
    staging = _plan(capsys, "--env", "staging")
    assert "resilience of workload qwen at 1 replica: Spot reclaim an outage of 576 s" in staging
    assert "if the Ray head or its only worker was there" in staging
