"""Every alert, recording rule and KEDA query the library ships, run by Prometheus's own evaluator (`promtool test
rules`) on series in vLLM 0.33's names and labels (tests/promtool_cases.py says which and how).

The rules and queries are the synthesized objects of every environment in cdk.json and of the disaggregated example
(built in-process, as `llm-eks manifests` builds them: its prefill and decode pools' per-pool rules and its prefill
pool's ScaledObject), plus, for each engine, a workload carrying every planned figure, so each drift alert is tested
even where no shipped plan has that figure. A PrometheusRule, rule or trigger without a case here
fails the test.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import cdk8s
import pytest

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.infra.charts import build_charts
from llm_eks.infra.workloads import VllmWorkload, build_workloads
from llm_eks.manifests.autoscaling import AutoscalingProps, ScaleToZeroSchedule, VllmAutoscalingChart
from llm_eks.manifests.monitoring import MonitoringChart, MonitoringProps
from llm_eks.manifests.promql import MetricSource
from llm_eks.manifests.ray_monitoring import RayMonitoringChart, RayMonitoringProps
from tests.chart_helpers import placement_groups
from tests.conftest import CDK_JSON, REPO_ROOT
from tests.promtool import run_rule_tests
from tests.promtool_cases import Scene, alert_cases, keda_cases, record_cases
from tests.promtool_fault_cases import INFRASTRUCTURE_CASES
from tests.test_vllm_chart import base_props

SECURITY_GROUPS = ("sg-0123456789abcdef0",)
ISSUER = "https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
# What a workload without a figure gets in the every-figure scenes.
FULL_PLAN = {"planned_kv_cache_tokens": 33088, "planned_itl_seconds": 0.04, "planned_ttft_seconds": 0.2}
DRIFT_ALERTS = ("InterTokenLatencyAbovePlan", "TimeToFirstTokenAbovePlan", "KvCacheBelowPlan")
# A prefill pool and a decode pool: the example a disaggregated workload's rules are tested on.
DISAGGREGATED = json.loads((REPO_ROOT / "examples" / "disaggregated" / "cdk.json").read_text())["context"]

Props = MonitoringProps | RayMonitoringProps


def _scene(props: Props, rule: dict[str, Any]) -> Scene:
    ray = isinstance(props, RayMonitoringProps)
    return Scene(
        rule_name=f"{rule['metadata']['namespace']}/{rule['metadata']['name']}",
        groups=rule["spec"]["groups"],
        source=MetricSource.RAY if ray else MetricSource.VLLM,
        namespace=props.namespace,
        model=props.model_id if isinstance(props, RayMonitoringProps) else props.served_model_name,
        job=props.name,
        targets=props.targets,
        planned_kv_cache_tokens=props.planned_kv_cache_tokens,
        planned_itl_seconds=props.planned_itl_seconds,
        planned_ttft_seconds=props.planned_ttft_seconds,
        **(
            {"deployment": props.deployment}
            if isinstance(props, RayMonitoringProps)
            else {
                "replica_kind": props.replica_kind,
                "replica_names": props.replica_names,
                "scaled_object": props.scaled_object,
                "prefill_job": props.prefill_job,
                "planned_prefill_seconds": props.planned_prefill_seconds,
            }
        ),
    )


def _prometheus_rule(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == "PrometheusRule" and o["metadata"]["name"] == name]
    return found


@dataclasses.dataclass(frozen=True)
class Shipped:
    """What cdk.json's environments synthesize: each workload's monitoring props and scene, each KEDA trigger."""

    workloads: list[tuple[Props, Scene]]
    # (scene of the scaled workload, trigger) for every prometheus trigger of every ScaledObject.
    triggers: list[tuple[Scene, dict[str, Any]]]
    # The PrometheusRules of no workload outside the gateway's namespace (the GPU rules), by namespace/name.
    others: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def shipped() -> Shipped:
    workloads: list[tuple[Props, Scene]] = []
    triggers: list[tuple[Scene, dict[str, Any]]] = []
    others: dict[str, dict[str, Any]] = {}
    environments = [*CDK_JSON["context"]["environments"].items(), *DISAGGREGATED["environments"].items()]
    for env, body in environments:
        config = parse_environment(env, body)
        built = build_workloads(config, plan_workloads(config))
        charts = build_charts(
            cdk8s.App(),
            config,
            built,
            node_role_name="r",
            security_group_ids=SECURITY_GROUPS,
            cluster_oidc_issuer=ISSUER,
            region="us-west-2",
            placement_groups=placement_groups(built),
        )
        objects = [o for c in charts for o in c.chart.to_json()]
        scenes = {
            w.monitoring.name: _scene(w.monitoring, _prometheus_rule(objects, f"{w.monitoring.name}-alerts"))
            for w in built
        }
        workloads += [(w.monitoring, scenes[w.monitoring.name]) for w in built]
        rules = {o["metadata"]["name"] for o in objects if o["kind"] == "PrometheusRule"}
        assert rules >= {f"{name}-alerts" for name in scenes}, f"{env}: a workload without its PrometheusRule"
        # The gateway's own rules have a promtool test of their own (tests/test_gateway_observability.py).
        for o in objects:
            workload = o["metadata"]["name"] in {f"{n}-alerts" for n in scenes}
            if o["kind"] == "PrometheusRule" and not workload and o["metadata"]["namespace"] != "inference-gateway":
                others[f"{o['metadata']['namespace']}/{o['metadata']['name']}"] = o
        served = {w.vllm.name: w.vllm.served_model_name for w in built if isinstance(w, VllmWorkload)}
        # A disaggregated workload's prefill pool scales on a ScaledObject of its own, named as its scrape job.
        pools = {s.prefill_job: s.prefill_pool() for s in list(scenes.values()) if s.prefill_job is not None}
        for scaled in (o for o in objects if o["kind"] == "ScaledObject"):
            scene = {**scenes, **pools}[scaled["metadata"]["name"]]
            assert scene.model == served[scene.workload_name]
            triggers += [(scene, t) for t in scaled["spec"]["triggers"] if t["type"] == "prometheus"]
    return Shipped(workloads, triggers, others)


def _every_figure(props: Props) -> Scene:
    """A workload like `props` with every planned figure, through its own chart."""
    filled = dataclasses.replace(props, **{k: getattr(props, k) or v for k, v in FULL_PLAN.items()})
    chart = (
        RayMonitoringChart(cdk8s.App(), "m", filled)
        if isinstance(filled, RayMonitoringProps)
        else MonitoringChart(cdk8s.App(), "m", filled)
    )
    return _scene(filled, _prometheus_rule(chart.to_json(), f"{filled.name}-alerts"))


def _tests(scene: Scene, group: dict[str, Any]) -> list[dict[str, Any]]:
    """The promtool tests of one rule group: its alerts' cases, and one of its recording rules if it has any. A group
    is tested on its own (the other's rules are not evaluated): promtool evaluates every rule of its files at every
    step of every test."""
    rules = group["rules"]
    tests = [t for rule in rules if "alert" in rule for t in alert_cases(scene, rule["alert"])]
    return tests + (record_cases(scene, rules) if any("record" in rule for rule in rules) else [])


def test_every_prometheus_rule_alert_and_recording_rule_passes_promtool(shipped: Shipped, tmp_path: Path) -> None:
    scenes = [scene for _, scene in shipped.workloads]
    # One of each engine with every planned figure (none added when a shipped one already has them all).
    for source in MetricSource:
        engine = [(props, s) for props, s in shipped.workloads if s.source is source]
        assert engine, f"no shipped {source.value} workload in cdk.json"
        if not any(
            None not in (s.planned_kv_cache_tokens, s.planned_itl_seconds, s.planned_ttft_seconds) for _, s in engine
        ):
            scenes.append(_every_figure(engine[0][0]))
    tested: set[str] = set()
    for i, scene in enumerate(scenes):
        for group in scene.groups:
            run_rule_tests(tmp_path, f"{i}-{group['name']}", [group], _tests(scene, group))
        tested |= {r["alert"] for r in scene.rules() if "alert" in r}
    for prefix in ("Vllm", "RayVllm"):
        assert {prefix + a for a in DRIFT_ALERTS} <= tested
    assert "VllmPrefillTimeAbovePlan" in tested, "no disaggregated workload among the scenes"


def test_every_keda_query_passes_promtool(shipped: Shipped, tmp_path: Path) -> None:
    assert {t["name"] for _, t in shipped.triggers} == {"waiting-requests", "kv-cache-usage", "held-requests"}
    run_rule_tests(tmp_path, "keda", [], [c for scene, trigger in shipped.triggers for c in keda_cases(scene, trigger)])


def test_a_scale_to_zero_query_reads_zero_while_asleep(shipped: Shipped, tmp_path: Path) -> None:
    """A workload that sleeps on its schedule (no shipped environment does): its guard reads 0 even when
    kube-state-metrics has no series for it, so an outage of it never wakes the model."""
    scene, _ = shipped.triggers[0]
    vllm = dataclasses.replace(base_props(), name=scene.job, namespace=scene.namespace, served_model_name=scene.model)
    autoscaling = AutoscalingProps(
        max_replicas=2,
        waiting_requests_per_replica=4,
        kv_cache_usage_target=0.8,
        min_replicas=0,
        scale_to_zero=ScaleToZeroSchedule("Europe/Paris", "30 6 * * 1-5", "0 20 * * 1-5", 1),
    )
    (scaled,) = VllmAutoscalingChart(cdk8s.App(), "a", dataclasses.replace(vllm, replicas=0), autoscaling).to_json()
    triggers = [t for t in scaled["spec"]["triggers"] if t["type"] == "prometheus"]
    assert len(triggers) == 2
    run_rule_tests(tmp_path, "keda-asleep", [], [c for t in triggers for c in keda_cases(scene, t)])


def test_the_gpu_alerts_pass_promtool(shipped: Shipped, tmp_path: Path) -> None:
    """The PrometheusRules of no workload outside the gateway's namespace: the GPU rules (once per cluster, beside
    the DCGM ServiceMonitor). Every alert among them has cases (INFRASTRUCTURE_CASES)."""
    names = {n.split("/")[1] for n in shipped.others}
    assert "dcgm-exporter-alerts" in names, names
    tested: set[str] = set()
    for i, (where, rule) in enumerate(sorted(shipped.others.items())):
        for group in rule["spec"]["groups"]:
            tests = []
            for r in group["rules"]:
                if "alert" in r:
                    assert r["alert"] in INFRASTRUCTURE_CASES, f"{where}: no promtool case for {r['alert']}"
                    tests += INFRASTRUCTURE_CASES[r["alert"]](r, rule["metadata"]["namespace"])
                    tested.add(r["alert"])
            run_rule_tests(tmp_path, f"other-{i}-{group['name']}", [group], tests)
    assert tested == set(INFRASTRUCTURE_CASES)
