"""promtool cases for the alerts on faults: each workload's health (no ready replica, series absent, KEDA's scaler
errors, GPU pods pending, Ray Serve without a healthy replica) over kube-state-metrics', KEDA's and Ray's series, and
the rules of no workload (the GPU rules over DCGM's series; an endpoint picker's standby over kube-state-metrics',
which tests/test_gateway_observability.py runs with the gateway's other alerts), in the labels each exporter gives them
at its pinned version. As in tests/promtool_cases.py, every alert has a case that
fires it and one that does not, next to a decoy a wrongly scoped expression would fire on."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from llm_eks.manifests.promql import MetricSource
from tests.promtool_cases import OTHER_MODEL, SPAN, Scene, alert_test, rule_alert_test, series_text


def ksm(name: str, labels: Mapping[str, str], values: str) -> dict[str, str]:
    """A kube-state-metrics series (its own labels; the chart's ServiceMonitor keeps them: honorLabels)."""
    target = {"job": "kube-state-metrics", "instance": "10.0.2.9:8080", "container": "kube-state-metrics"}
    return {"series": series_text(name, {**labels, **target}), "values": values}


def _replica_series(s: Scene, metric: str, values: dict[str, str], namespace: str | None = None) -> list[dict]:
    """kube-state-metrics' `metric` for each replica object of the scene (`values` by object name)."""
    kind = s.replica_kind
    if metric == "spec_replicas" and kind == "statefulset":
        metric = "replicas"
    return [
        ksm(f"kube_{kind}_{metric}", {"namespace": namespace or s.namespace, kind: owner}, value)
        for owner, value in values.items()
    ]


def _workload(s: Scene, ready: int, wanted: int, created: int, *, owner: str | None = None) -> list[dict]:
    """The scene's replica objects (or `owner`): the first holds `ready` of `wanted` replicas, the others (a floor)
    none of none; all created at `created` seconds."""
    names = (owner,) if owner else (s.replica_names or (s.job,))
    first, rest = names[0], names[1:]
    out = _replica_series(s, "status_replicas_ready", {first: f"{ready}x{SPAN}", **{n: f"0x{SPAN}" for n in rest}})
    out += _replica_series(s, "spec_replicas", {first: f"{wanted}x{SPAN}", **{n: f"0x{SPAN}" for n in rest}})
    return out + _replica_series(s, "created", {n: f"{created}x{SPAN}" for n in names})


def no_ready_replica(s: Scene, name: str) -> list[dict[str, Any]]:
    cold = _cold_start_seconds(s, name)
    # Another workload of the namespace down too: not this alert's business.
    decoy = _workload(s, 0, 1, -3600, owner="vllm-other")
    namespace = {"namespace": s.namespace}
    assert cold > 60, "the starting case below needs a cold start above a minute"
    return [
        alert_test(s, name, "wanted, none ready, older than its cold start fires", _workload(s, 0, 1, -3600) + decoy,
                   [(namespace, 0.0)]),
        alert_test(s, name, "one ready stays quiet", _workload(s, 1, 1, -3600) + decoy, None),
        # Created at 600 s: younger than its cold start at every check (4 and 11 minutes).
        alert_test(s, name, "a new workload still starting stays quiet", _workload(s, 0, 1, 600) + decoy, None),
        alert_test(s, name, "asleep (none wanted) stays quiet", _workload(s, 0, 0, -3600) + decoy, None),
    ]  # fmt: skip


def _cold_start_seconds(s: Scene, name: str) -> int:
    """The cold start the rule compares a workload's age with (its last number)."""
    return int(re.findall(r"\d+", s.rule(name)["expr"])[-1])


def series_absent(s: Scene, name: str) -> list[dict[str, Any]]:
    waiting = "vllm:num_requests_waiting"
    other = s.series(waiting, s.engine(9, model=OTHER_MODEL), f"3x{SPAN}")
    present = s.series(waiting, s.engine(0), f"2x{SPAN}")
    return [
        alert_test(s, name, "replicas ready, no series of the model fires", [*_workload(s, 1, 1, 0), other],
                   [({"namespace": s.namespace}, 1.0)]),
        alert_test(s, name, "replicas ready with their series stays quiet", [*_workload(s, 1, 1, 0), present, other],
                   None),
        alert_test(s, name, "asleep without series stays quiet", [*_workload(s, 0, 0, 0), other], None),
    ]  # fmt: skip


def keda_scaler_errors(s: Scene, name: str) -> list[dict[str, Any]]:
    assert s.scaled_object is not None

    def errors(scaled: str, values: str) -> dict[str, str]:
        # KEDA's own labels (pkg/metricscollector/prommetrics.go, metricLabels), its `namespace` renamed
        # exported_namespace by the scrape (the chart's PodMonitor keeps the target's namespace, keda).
        labels = {
            "exported_namespace": s.namespace,
            "scaledObject": scaled,
            "scaler": "prometheusScaler",
            "triggerIndex": "0",
            "metric": "s0-prometheus",
            "type": "scaledobject",
            "namespace": "keda",
            "job": "keda-operator",
            "pod": "keda-operator-7d9f8b6c5-abcde",
            "instance": "10.0.3.4:8080",
        }
        return {"series": series_text("keda_scaler_detail_errors_total", labels), "values": values}

    decoy = errors("vllm-other", f"0+60x{SPAN}")
    return [
        alert_test(s, name, "a failing read a second with replicas ready fires",
                   [errors(s.scaled_object, f"0+60x{SPAN}"), decoy, *_workload(s, 1, 1, 0)],
                   [({"scaledObject": s.scaled_object}, 1.0)]),
        alert_test(s, name, "no new error stays quiet", [errors(s.scaled_object, f"5x{SPAN}"), decoy,
                                                           *_workload(s, 1, 1, 0)], None),
        alert_test(s, name, "errors while asleep stay quiet",
                   [errors(s.scaled_object, f"0+60x{SPAN}"), decoy, *_workload(s, 0, 0, 0)], None),
    ]  # fmt: skip


def _gpu_resource(s: Scene) -> str:
    return re.findall(r'resource="([^"]+)"', s.rule("GpuPodsPendingTooLong")["expr"])[0]


def gpu_pods_pending(s: Scene, name: str) -> list[dict[str, Any]]:
    def pod(pod_name: str, phase: str, gpus: int, namespace: str | None = None) -> list[dict[str, str]]:
        where = {"namespace": namespace or s.namespace, "pod": pod_name}
        phases = [
            ksm("kube_pod_status_phase", {**where, "uid": f"u-{pod_name}", "phase": p}, f"{int(p == phase)}x{SPAN}")
            for p in ("Pending", "Running")
        ]
        container = "ray-worker" if s.source is MetricSource.RAY else "vllm"
        requests = {**where, "container": container, "node": "", "uid": f"u-{pod_name}"}
        resources = [("cpu", "core", 4), ("memory", "byte", 8 << 30)]
        if gpus:
            resources.append((_gpu_resource(s), "integer", gpus))
        return phases + [
            ksm("kube_pod_container_resource_requests", {**requests, "resource": r, "unit": u}, f"{v}x{SPAN}")
            for r, u, v in resources
        ]

    # Another workload's GPU pod pending in the same namespace, and a pod of this name in another namespace.
    decoys = pod("vllm-other-6b7f9c8d4-x2x0q", "Pending", 1) + pod(s.pod(5), "Pending", 1, "other-namespace")
    return [
        alert_test(s, name, "a GPU pod pending past the cold start fires", pod(s.pod(0), "Pending", 1) + decoys,
                   [({"namespace": s.namespace, "pod": s.pod(0)}, 1.0)]),
        alert_test(s, name, "a running GPU pod stays quiet", pod(s.pod(0), "Running", 1) + decoys, None),
        alert_test(s, name, "a pending pod without GPUs stays quiet", pod(s.pod(0), "Pending", 0) + decoys, None),
    ]  # fmt: skip


def no_healthy_serve_replica(s: Scene, name: str) -> list[dict[str, Any]]:
    def healthy(values: str, deployment: str | None = None) -> dict[str, str]:
        labels = {**s.target(), "pod": f"{s.job}-k8x2p-head-q7w2e", "application": "llm"}
        labels |= {"deployment": deployment or s.deployment, "replica": "r0a1b2c3"}
        return {"series": series_text("ray_serve_deployment_replica_healthy", labels), "values": values}

    decoy = healthy(f"0x{SPAN}", deployment="OpenAiIngress")
    none: dict[str, str] = {}
    return [
        alert_test(s, name, "healthy, then none healthy fires", [healthy(f"1 0x{SPAN}"), decoy], [(none, 0.0)]),
        alert_test(s, name, "healthy, then gone with the head fires", [healthy("1 stale"), decoy], [(none, 0.0)]),
        alert_test(s, name, "always healthy stays quiet", [healthy(f"1x{SPAN}"), decoy], None),
        alert_test(s, name, "never healthy yet (starting) stays quiet", [healthy(f"0x{SPAN}"), decoy], None),
    ]


WORKLOAD_CASES: dict[str, Callable[[Scene, str], list[dict[str, Any]]]] = {
    "VllmNoReadyReplica": no_ready_replica,
    "VllmSeriesAbsent": series_absent,
    "KedaScalerErrors": keda_scaler_errors,
    "GpuPodsPendingTooLong": gpu_pods_pending,
    "RayServeNoHealthyReplica": no_healthy_serve_replica,
}


# -- rules of no workload: the GPU rules, an endpoint picker's standby -------------------------------------------------

InfraCases = Callable[[Mapping[str, Any], str], list[dict[str, Any]]]


def _dcgm_xid(values: str, gpu: str = "0") -> dict[str, str]:
    """DCGM_FI_DEV_XID_ERRORS of one GPU as the exporter labels it (internal/pkg/transformation/const.go) and our
    ServiceMonitor keeps it (honorLabels: the pod and namespace are those of the pod holding the GPU)."""
    labels = {
        "gpu": gpu,
        "UUID": f"GPU-4f0c2a7e-0000-1111-2222-33334444555{gpu}",
        "device": f"nvidia{gpu}",
        "modelName": "NVIDIA L40S",
        "Hostname": "ip-10-0-1-23.us-west-2.compute.internal",
        "pci_bus_id": "00000000:35:00.0",
        "DCGM_FI_DRIVER_VERSION": "580.95.05",
        "container": "vllm",
        "namespace": "inference",
        "pod": "vllm-llama-6b7f9c8d4-x2x0q",
        "job": "dcgm-exporter",
        "instance": "10.0.1.23:9400",
        "endpoint": "metrics",
        "service": "dcgm-exporter",
    }
    return {"series": series_text("DCGM_FI_DEV_XID_ERRORS", labels), "values": values}


def _xid_labels(gpu: str, xid: str) -> dict[str, str]:
    kept = ("Hostname", "UUID", "gpu", "modelName", "namespace", "pod")
    labels = dict(re.findall(r'(\w+)="([^"]*)"', _dcgm_xid("0", gpu)["series"]))
    return {**{k: labels[k] for k in kept}, "xid": xid}


def gpu_xid_fatal(rule: Mapping[str, Any], namespace: str) -> list[dict[str, Any]]:
    return [
        rule_alert_test(rule, "Xid 79 (fallen off the bus) fires",
                        [_dcgm_xid(f"0 79x{SPAN}"), _dcgm_xid(f"13x{SPAN}", "1")], [(_xid_labels("0", "79"), 1.0)]),
        rule_alert_test(rule, "an application Xid (13) stays quiet", [_dcgm_xid(f"0 13x{SPAN}")], None),
        rule_alert_test(rule, "no Xid stays quiet", [_dcgm_xid(f"0x{SPAN}")], None),
    ]  # fmt: skip


def gpu_xid_error(rule: Mapping[str, Any], namespace: str) -> list[dict[str, Any]]:
    fired = dict(re.findall(r'(\w+)="([^"]*)"', _dcgm_xid("0")["series"]))
    return [
        rule_alert_test(rule, "a new Xid 13 fires, with its code", [_dcgm_xid(f"0 13x{SPAN}")], [(fired, 13.0)]),
        rule_alert_test(rule, "a fatal Xid is GpuXidFatal's, not this one", [_dcgm_xid(f"0 79x{SPAN}")], None),
        rule_alert_test(rule, "an old Xid, held, stays quiet", [_dcgm_xid(f"13x{SPAN}")], None),
    ]  # fmt: skip


def _deployment(namespace: str, name: str, ready: int, wanted: int, pods: int | None = None) -> list[dict[str, str]]:
    where = {"namespace": namespace, "deployment": name}
    return [
        ksm("kube_deployment_status_replicas_ready", where, f"{ready}x{SPAN}"),
        ksm("kube_deployment_spec_replicas", where, f"{wanted}x{SPAN}"),
        ksm("kube_deployment_status_replicas", where, f"{wanted if pods is None else pods}x{SPAN}"),
    ]


def _deployment_of(rule: Mapping[str, Any]) -> str:
    return re.findall(r'deployment="([^"]+)"', rule["expr"])[0]


def picker_standby_missing(rule: Mapping[str, Any], namespace: str) -> list[dict[str, Any]]:
    """With leader election only the leader is Ready: pods are counted, one ready of two is the normal state."""
    name = _deployment_of(rule)
    return [
        rule_alert_test(rule, "one pod of two fires", _deployment(namespace, name, 1, 2, pods=1), [({}, 1.0)]),
        rule_alert_test(rule, "leader and standby stay quiet", _deployment(namespace, name, 1, 2, pods=2), None),
    ]


INFRASTRUCTURE_CASES: dict[str, InfraCases] = {
    "GpuXidFatal": gpu_xid_fatal,
    "GpuXidError": gpu_xid_error,
}
