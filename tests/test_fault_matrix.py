"""The fault matrix page (docs/concepts/faults.md) holds exactly what docgen/faults computes from the default app's
synthesized objects: a change that moves a cell changes the page in the same diff (`make golden` rewrites it). The
rules themselves are checked on facts changed one at a time."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from docgen import faults
from tests.conftest import CDK_JSON, Synthesized


@pytest.fixture(scope="module")
def facts(synthesized: Synthesized) -> dict[str, faults.EnvFacts]:
    assert synthesized.error is None, synthesized.error
    plans = faults.planned_seconds(CDK_JSON["context"])
    return {env: faults.EnvFacts.read(synthesized.outdir, env, plans[env]) for env in faults.ENVIRONMENTS}


def test_the_page_holds_the_matrix_of_the_synthesized_objects(facts: dict[str, faults.EnvFacts]) -> None:
    page = faults.PAGE.read_text()
    assert page == faults.page_with(page, faults.markdown(facts)), (
        "docs/concepts/faults.md is stale: run `make golden` (it rewrites the fault matrix with the golden files)"
    )


def test_what_the_issue_asks_of_each_shipped_environment(facts: dict[str, faults.EnvFacts]) -> None:
    """Every environment: an alert receiver that is not null, two Prometheus and Alertmanager replicas over zones,
    KEDA's fallback on every ScaledObject. Prod: an on-demand floor holding its minimum replicas, a second family,
    a required zone spread."""
    for env, f in facts.items():
        assert {"critical", "warning", "deadmans-switch"} <= set(f.alertmanager_receivers), env
        assert f.prometheus_replicas == f.alertmanager_replicas == 2 and f.prometheus_zone_spread, env
        assert f.scaled_objects_fail_safe and f.keda_reads_query_endpoint and f.deadmans_alarm, env
        assert f.survives_a_system_node, (env, f.system_millicores, f.system_allocatable_millicores)
    (prod,) = facts["prod"].workloads
    assert prod.floor_holds_minimum and prod.floor_spread_required and prod.fallback_pools


def test_the_matrix_counts(facts: dict[str, faults.EnvFacts]) -> None:
    rows = faults.matrix(facts)
    assert {env: faults.counts(rows, env) for env in facts} == {
        "dev": {"S": 11, "D": 2, "F": 7},
        "staging": {"S": 11, "D": 4, "F": 8},
        "prod": {"S": 12, "D": 7, "F": 1},
    }


def _cell(f: faults.EnvFacts, title: str) -> faults.Cell:
    (fault,) = [x for x in faults.FAULTS if x.title == title]
    return fault.cell(f)


def test_the_gateway_rows_describe_its_fail_closed_parts_and_flow_control(facts: dict[str, faults.EnvFacts]) -> None:
    """Staging's gateway: a lost picker leader fails its model's requests until the standby takes the lease (the
    gateway calls the picker fail-closed), every Envoy pod lost fails every model, and a flood meets the pickers'
    early refusals; an environment without a gateway has no such rows, and its flood still fails."""
    staging, dev = facts["staging"], facts["dev"]
    assert staging.picker_replicas == 2 and staging.envoy_replicas == 2
    picker = _cell(staging, "Endpoint picker down")
    assert picker.verdict == "D" and "fail-closed" in picker.text
    assert picker.alerts == ("GatewayEndpointPickerStandbyMissing", "GatewayEndpointPickerDown")
    envoy = _cell(staging, "Gateway Envoy down (every pod)")
    assert envoy.verdict == "F" and envoy.alerts == ("GatewayEnvoyDown",)
    flood = _cell(staging, "10x request flood")
    assert flood.verdict == "D" and "429" in flood.text and "GatewayTenantRefused" in flood.alerts
    assert _cell(dev, "Gateway Envoy down (every pod)").verdict == "—"
    assert _cell(dev, "10x request flood").verdict == "F"


def test_node_repair_off_leaves_a_fatal_xid_to_a_person(facts: dict[str, faults.EnvFacts]) -> None:
    prod = dataclasses.replace(facts["prod"], node_repair=False)
    cell = _cell(prod, "GPU Xid fatal")
    assert cell.verdict == "F" and "kubectl delete nodeclaim" in cell.text and "GpuXidFatal" in cell.alerts
    assert _cell(facts["prod"], "GPU Xid fatal").verdict == "D"


def test_cells_move_with_the_objects(facts: dict[str, faults.EnvFacts]) -> None:
    prod = facts["prod"]
    (w,) = prod.workloads
    # Without the floor prod's minimum may be on Spot again; with one replica a reclaim is an outage.
    spot = dataclasses.replace(prod, workloads=(dataclasses.replace(w, floor=0),))
    assert _cell(spot, "Spot reclaim of a GPU node").verdict == "D"
    alone = dataclasses.replace(prod, workloads=(dataclasses.replace(w, floor=0, min_replicas=1),))
    assert _cell(alone, "Spot reclaim of a GPU node").verdict == "F"
    # One Prometheus, one KEDA metrics server: the monitoring rows degrade.
    single = dataclasses.replace(prod, prometheus_replicas=1, keda_metrics_servers=1)
    assert _cell(single, "Prometheus down (one replica)").verdict == "D"
    assert _cell(single, "KEDA metrics server down").verdict == "D"
    assert _cell(single, "Zone loss (one of two)").verdict == "D"
    # Too few system nodes for the controllers when one is lost.
    small = dataclasses.replace(prod, system_nodes=1)
    assert _cell(small, "One system node lost").verdict == "D"
    # Without the fail-safe triggers, missing series scale a workload down under load.
    unsafe = dataclasses.replace(prod, scaled_objects_fail_safe=False)
    assert _cell(unsafe, "vLLM series missing under load").verdict == "F"
    # A pool of one instance type and one capacity type, no fallback family.
    narrow = dataclasses.replace(
        prod, workloads=(dataclasses.replace(w, capacity_types=("on-demand",), fallback_pools=()),)
    )
    assert _cell(narrow, "GPU capacity unavailable for the pool").verdict == "D"


def test_the_page_is_in_the_site_nav() -> None:
    assert "concepts/faults.md" in (Path(faults.PAGE).parents[2] / "mkdocs.yml").read_text()


def test_the_prefill_rows_say_what_a_disaggregated_workload_does(facts: dict[str, faults.EnvFacts]) -> None:
    """No shipped environment is disaggregated (no rows there); with a prefill pool, a pool at zero degrades to the
    decode pods prefilling themselves, and a lost prefill pod or failed transfer fails its requests (vLLM 0.33's
    kv_load_failure_policy "fail")."""
    staging = facts["staging"]
    title_zero = "Prefill pool at zero or down (disaggregated)"
    title_lost = "Prefill pod lost mid-request, or KV transfer fails (disaggregated)"
    assert _cell(staging, title_zero).verdict == _cell(staging, title_lost).verdict == "—"
    w = staging.workloads[0]
    pd = dataclasses.replace(staging, workloads=(dataclasses.replace(w, prefill_pool=True),))
    zero, lost = _cell(pd, title_zero), _cell(pd, title_lost)
    assert zero.verdict == "D" and "the decode pod prefills the prompt itself" in zero.text
    assert lost.verdict == "D" and "kv_load_failure_policy defaults to fail" in lost.text


def test_a_worker_lost_in_a_prefill_group_recreates_the_group(facts: dict[str, faults.EnvFacts]) -> None:
    """A prefill pool whose replicas span nodes (a LeaderWorkerSet of groups): a lost worker takes its whole group
    down (RecreateGroupOnPodRestart), the other groups or the decode pods take its prompts. A one-node prefill pool
    (a Deployment) has no such row."""
    staging = facts["staging"]
    title = "Worker lost in a prefill group (disaggregated, replicas spanning nodes)"
    assert _cell(staging, title).verdict == "—"
    w = staging.workloads[0]
    one_node = dataclasses.replace(staging, workloads=(dataclasses.replace(w, prefill_pool=True),))
    assert _cell(one_node, title).text == "No disaggregated workload whose replicas span nodes."
    groups = dataclasses.replace(staging, workloads=(dataclasses.replace(w, prefill_pool=True, prefill_group_size=2),))
    cell = _cell(groups, title)
    assert cell.verdict == "D"
    assert cell.text.startswith(f"{w.name}: LeaderWorkerSet recreates the whole prefill group")
    assert "the other prefill groups take the prompts" in cell.text


def test_a_prefill_leader_worker_set_is_a_prefill_pool() -> None:
    """The facts read a prefill LeaderWorkerSet and its group size from the objects, as they read a Deployment."""
    from docgen.faults.facts import _prefill_pool

    lws = {
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm-x-prefill", "namespace": "inference"},
        "spec": {"leaderWorkerTemplate": {"size": 2}},
    }
    assert _prefill_pool([lws], "vllm-x") == {"size": 2}
    assert _prefill_pool([], "vllm-x") == {}
