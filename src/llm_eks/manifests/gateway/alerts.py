"""The gateway's alerts, against the gateway as it stands (Istio's gateway Envoy, the payload processor, one endpoint
picker per vLLM pool). They live with the gateway so that a change of gateway replaces them with it: only this module
reads Istio's and the routers' series and names.

- `GatewayErrorRatioHigh` (critical): more than 5 % of the requests through the gateway's Envoy answered 5xx for 5
  minutes (`istio_requests_total` with reporter="source", which a gateway reports, from the gateway's PodMonitor;
  the panels in `gateway.panels` read the same series), once it carries at least 0.1 request a second.
- `GatewayPayloadProcessorDown` (critical): no ready payload processor for a minute. Its ext_proc filter fails closed
  for the whole listener (`router._filter_chain`, failure_mode_allow false): every request to every model fails.
- `GatewayPayloadProcessorDegraded` (warning): fewer ready than wanted for 15 minutes (one loss more is the outage).
- `EndpointPickerDown` (warning): no ready picker for 2 minutes. The pool's `failureMode: FailOpen` makes Istio
  balance the pool round robin meanwhile (istio 1.30.3 pilot/pkg/networking/core/cluster_builder.go,
  applyOverrideHostPolicy): requests still succeed, without load or prefix-cache aware picking.
- `EndpointPickerStandbyMissing` (warning): fewer picker pods than wanted for 15 minutes. With leader election only
  the leader is Ready, so this compares pods, not ready replicas.

The replica counts are kube-state-metrics' (v2.19.1 deployment metrics).
"""

from __future__ import annotations

from typing import Any

from llm_eks.manifests.gateway.common import meta
from llm_eks.manifests.gateway.props import GatewayProps, ModelRoute
from llm_eks.manifests.gateway.router import IPP_NAME
from llm_eks.manifests.monitoring_model import alert_rule
from llm_eks.manifests.promql import check_promql, infrastructure_problems, ksm_workload, selector
from llm_eks.manifests.source import builds_objects

# A 5xx ratio above this for 5 minutes pages; below MIN_RATE requests a second the ratio is noise.
ERROR_RATIO = 0.05
MIN_RATE = 0.1


def _replicas(namespace: str, deployment: str) -> tuple[str, str, str]:
    """kube-state-metrics' ready, wanted and existing (ready or not) replicas of a Deployment, summed."""
    ready, wanted, pods = (
        f"sum({ksm_workload(metric, 'deployment', namespace, [deployment])})"
        for metric in ("status_replicas_ready", "spec_replicas", "status_replicas")
    )
    return ready, wanted, pods


def _rule(name: str, namespace: str, group: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    problems = [p for r in rules for p in (*check_promql(r["expr"]), *infrastructure_problems(r["expr"]))]
    assert not problems, problems
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": meta(name, namespace),
        "spec": {"groups": [{"name": group, "rules": rules}]},
    }


@builds_objects
def gateway_alerts(p: GatewayProps) -> dict[str, Any]:
    """The gateway namespace's PrometheusRule: its Envoy's 5xx ratio and the payload processor's replicas."""
    ns = p.namespace
    envoy = {"namespace": ns, "reporter": "source"}
    total = f"sum(rate(istio_requests_total{selector(envoy)}[5m]))"
    errors = f"sum(rate(istio_requests_total{selector(envoy, {'response_code': '5..'})}[5m]))"
    ready, wanted, _ = _replicas(ns, IPP_NAME)
    processor = f"kubectl -n {ns} get pods -l app.kubernetes.io/name={IPP_NAME} -o wide; kubectl logs"
    rules = [
        alert_rule(
            "GatewayErrorRatioHigh",
            f"{errors} / {total} > {ERROR_RATIO} and {total} > {MIN_RATE}",
            "5m",
            "critical",
            f"More than {ERROR_RATIO:.0%} of the requests through the gateway fail",
            f"{{{{ $value | humanizePercentage }}}} of the requests through {p.name} in {ns} answered 5xx over the "
            "last 5 minutes.",
            "The gateway dashboard panels split the errors per model: one model's errors point at its pods "
            "(VllmNoReadyReplica, VllmEngineStalled); every model's at the payload processor or the gateway's Envoy "
            f"(kubectl -n {ns} get pods; its access log).",
        ),
        alert_rule(
            "GatewayPayloadProcessorDown",
            f"{ready} == 0",
            "1m",
            "critical",
            "The gateway's payload processor has no ready replica: every model behind the gateway fails",
            f"No {IPP_NAME} replica in {ns} is ready; its filter fails closed, so every request through {p.name} "
            "fails until one is.",
            f"{processor} on a failing one. It runs on the system nodes: check them too (kubectl get nodes).",
        ),
        alert_rule(
            "GatewayPayloadProcessorDegraded",
            f"{ready} < {wanted}",
            "15m",
            "warning",
            "The gateway's payload processor runs fewer replicas than wanted",
            f"{{{{ $value }}}} {IPP_NAME} replicas in {ns} are ready, fewer than wanted for 15 minutes: one more "
            "loss stops every model behind the gateway.",
            f"{processor}; Pending means no room on the system nodes.",
        ),
    ]
    return _rule(f"{p.name}-gateway-alerts", ns, f"{p.name}.gateway", rules)


@builds_objects
def picker_alerts(r: ModelRoute) -> dict[str, Any]:
    """A vLLM route's PrometheusRule (in its namespace): its endpoint picker down, or its standby missing."""
    ns, picker = r.namespace, r.picker
    ready, wanted, pods = _replicas(ns, picker)
    look = f"kubectl -n {ns} get pods -l app.kubernetes.io/instance={picker} -o wide; kubectl logs"
    rules = [
        alert_rule(
            "EndpointPickerDown",
            f"{ready} == 0 and {wanted} > 0",
            "2m",
            "warning",
            f"The endpoint picker of {r.name} has no ready replica",
            f"No {picker} replica in {ns} is ready: the pool fails open, so requests to {r.name} are balanced round "
            "robin, without load or prefix-cache aware picking.",
            f"{look} on a failing one (a picker that cannot list the pool's pods or InferencePool is an RBAC or "
            "API-server problem).",
        ),
    ]
    if r.picker_replicas > 1:
        rules.append(
            alert_rule(
                "EndpointPickerStandbyMissing",
                f"{pods} < {wanted}",
                "15m",
                "warning",
                f"The endpoint picker of {r.name} has no standby",
                f"{{{{ $value }}}} {picker} pods run in {ns}, fewer than wanted for 15 minutes: a loss of the "
                "leader now leaves the pool unpicked until a new pod starts.",
                f"{look}; Pending means no room on the system nodes.",
            )
        )
    return _rule(f"{picker}-alerts", ns, f"{picker}.picker", rules)
