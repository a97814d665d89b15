"""The gateway's own monitoring, in its namespace: a dashboard of every tenant's traffic (requests, tokens in and out,
time held, requests refused, per tenant and model) and the alerts on the gateway's parts, each with its row of the
fault matrix (FAULTS: what breaks, what a caller sees, which alert says so, what to do).

Series, each read in its source at the pinned version:
- the endpoint pickers (llm-d router v0.10.0 pkg/epp/metrics/llm_d_router_metrics.go, subsystem `llm_d_epp`):
  `request_total`, `request_input_tokens`, `request_output_tokens` (labels model_name, target_model_name,
  fairness_id, priority: fairness_id is the tenant, set by tenant_filter.py), `flow_control_queue_size` (gauge:
  fairness_id, priority, inference_pool) and `flow_control_request_queue_duration_seconds` (histogram: fairness_id,
  priority, outcome, inference_pool; outcomes in pkg/epp/flowcontrol/types/outcomes.go: Dispatched,
  RejectedCapacity, RejectedNoEndpoints, RejectedOther, EvictedTTL, EvictedContextCancelled, EvictedOther);
- the AI Gateway's external processor on the Envoy pods (envoyproxy/ai-gateway v1.1.0 internal/metrics/genai.go, as
  that release's examples/monitoring/grafana-dashboard.json names them in Prometheus):
  `gen_ai_server_request_duration_seconds` (gen_ai_original_model, error_type) and `gen_ai_client_token_usage`
  (gen_ai_token_type), with the `tenant` label from the tenant header (constructs/envoy_gateway.py,
  metricsRequestHeaderAttributes): every model, Ray Serve's too. Their Prometheus names were read from that
  example, not from a live /metrics (docs/reference/not-verified.md);
- the Envoy pods' own `envoy_http_downstream_rq_xx` (Envoy's tag extraction turns `*_rq_<d>xx` into the label
  `envoy_response_code_class` = d and the connection manager's stat prefix into `envoy_http_conn_manager_prefix`:
  envoyproxy/envoy source/common/config/well_known_names.cc, RESPONSE_CODE_CLASS and HTTP_CONN_MANAGER_PREFIX), without
  Envoy Gateway's own stats listener (`eg-stats-http`, envoyproxy/gateway internal/xds/bootstrap/bootstrap.yaml.tpl),
  whose scrapes would dilute the ratio;
- `up` of the pickers' ServiceMonitors and the Envoy pods' PodMonitor (job `<namespace>/<name>`), and
  kube-state-metrics v2.19.1's `kube_deployment_status_replicas_available` for the controllers, the rate-limit
  service (Deployment `envoy-ratelimit`, envoyproxy/gateway v1.9.0 internal/infrastructure/kubernetes/ratelimit/
  resource.go InfraName) and its counter store, and `kube_deployment_status_replicas` / `_spec_replicas` for each
  picker's standby (with leader election only the leader is Ready, so its pods are counted, not its ready replicas).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from llm_eks.manifests.dashboard import ExtraPanel, panels_dashboard
from llm_eks.manifests.gateway.common import meta
from llm_eks.manifests.gateway.platform import (
    AI_GATEWAY_CONTROLLER,
    AI_GATEWAY_NAMESPACE,
    ENVOY_GATEWAY_NAMESPACE,
    EXTERNAL_SECRETS_NAMESPACE,
    EXTERNAL_SECRETS_RELEASE,
    VALKEY,
)
from llm_eks.manifests.gateway.props import GatewayProps, ModelRoute, PoolBackend
from llm_eks.manifests.gateway.usage import usage_panel, usage_rules
from llm_eks.manifests.monitoring_model import alert_rule, dashboard_uid
from llm_eks.manifests.promql import ksm_workload, selector
from llm_eks.manifests.source import builds_objects

_RATE = "$__rate_interval"
# The picker's refusals: a full band, a hold that ended with no replica ready, other refusals, a hold that expired.
REFUSED = "RejectedCapacity|RejectedNoEndpoints|RejectedOther|EvictedTTL"
RATELIMIT_DEPLOYMENT = "envoy-ratelimit"
# Above this share of 5xx answers for 5 minutes the gateway pages; below MIN_RATE requests a second it is noise.
ERROR_RATIO = 0.05
MIN_RATE = 0.1
# Envoy Gateway's own HTTP listeners on each Envoy pod (stats, readiness) and the admin's: not callers' traffic.
INTERNAL_LISTENERS = "admin|eg-stats-http|eg-ready-http"
ENVOY_GATEWAY_DEPLOYMENT = "envoy-gateway"


@dataclass(frozen=True)
class Fault:
    """One row of the gateway's fault matrix."""

    part: str
    failure: str
    # What a caller sees while it lasts.
    seen: str
    # The alert that says so ("" where the caller's error is the signal).
    alert: str
    action: str


FAULTS = (
    Fault(
        "Anything behind the gateway (a model's pods, its picker, the gateway's filters)",
        "answers 5xx to more than 5 % of requests",
        "those 5xx answers; the gateway stays up",
        "GatewayErrorRatioHigh",
        "the tenant dashboard splits errors per model: one model's point at its pods (VllmNoReadyReplica, "
        "VllmEngineStalled), every model's at the gateway (kubectl -n inference-gateway logs the Envoy pods)",
    ),
    Fault(
        "Envoy (the gateway's pods)",
        "every pod down",
        "connection refused or 503 from the load balancer, for every model",
        "GatewayEnvoyDown",
        "kubectl -n inference-gateway describe pods; Envoy Gateway recreates them from the EnvoyProxy",
    ),
    Fault(
        "Endpoint picker of a vLLM model",
        "both replicas down (a drain is a lease failover of a few seconds instead)",
        "500 for that model's requests (the AI Gateway calls the picker fail-closed); other models unaffected",
        "GatewayEndpointPickerDown",
        "kubectl -n <workload namespace> logs deploy/<workload>-epp",
    ),
    Fault(
        "Endpoint picker of a vLLM model",
        "one replica lost (the standby)",
        "nothing while the leader runs; a loss of the leader then fails that model's requests until a pod starts",
        "GatewayEndpointPickerStandbyMissing",
        "kubectl -n <workload namespace> get pods -l app.kubernetes.io/instance=<workload>-epp -o wide",
    ),
    Fault(
        "Flow control",
        "a tenant's requests refused: its band full (429), or no replica ready within the hold (503)",
        "429 or 503 with Retry-After for that tenant and model",
        "GatewayTenantRefused",
        "raise replicas.max, or the tenant's priority; a 503 at zero replicas is a cold start longer than the hold",
    ),
    Fault(
        "Rate-limit service",
        "down",
        "nothing: it fails open, so no tenant's request rate or token budget is enforced meanwhile",
        "GatewayRateLimitServiceDown",
        "kubectl -n envoy-gateway-system describe deploy/envoy-ratelimit",
    ),
    Fault(
        "Rate-limit counters (Valkey)",
        "down or restarted",
        "nothing while down (limits fail open); a restart empties the current windows, so budgets restart",
        "GatewayCounterStoreDown",
        "kubectl -n envoy-gateway-system describe deploy/valkey",
    ),
    Fault(
        "External Secrets Operator",
        "down",
        "nothing for existing keys; a new or rotated key does not reach the gateway (401 with the new key)",
        "GatewaySecretSyncDown",
        "kubectl -n external-secrets logs deploy/external-secrets; kubectl -n external-secrets get externalsecrets",
    ),
    Fault(
        "Envoy AI Gateway controller",
        "down",
        "nothing for running Envoy pods; new Envoy pods are refused by its webhook and route changes wait",
        "GatewayAiGatewayControllerDown",
        "kubectl -n envoy-ai-gateway-system logs deploy/ai-gateway-controller",
    ),
    Fault(
        "Envoy Gateway controller",
        "down",
        "nothing for running Envoy pods; configuration and key changes wait until it is back",
        "GatewayControllerDown",
        "kubectl -n envoy-gateway-system logs deploy/envoy-gateway",
    ),
)


def _deployment_down(alert: str, namespace: str, deployment: str, summary: str, description: str, runbook: str,
                     severity: str = "warning") -> dict[str, Any]:  # fmt: skip
    series = f"kube_deployment_status_replicas_available{selector({'namespace': namespace, 'deployment': deployment})}"
    return alert_rule(
        alert,
        f"max by (namespace, deployment) ({series}) < 1 or absent({series})",
        "5m",
        severity,
        summary,
        description,
        runbook,
    )


def gateway_alert_rules(p: GatewayProps) -> list[dict[str, Any]]:
    """The gateway's alerts: FAULTS names each."""
    pools = [r for r in p.routes if r.routed and isinstance(r.backend, PoolBackend)]
    namespaces = "|".join(sorted({r.namespace for r in pools})) or "none"
    rules = [
        alert_rule(
            "GatewayEnvoyDown",
            f"sum({_envoy_up(p)}) < 1 or absent({_envoy_up(p)})",
            "2m",
            "critical",
            "No gateway Envoy pod is up: every model is unreachable",
            f"Prometheus reaches no Envoy pod of the Gateway {p.namespace}/{p.name}.",
            f"kubectl -n {p.namespace} get pods,events; Envoy Gateway runs them from the EnvoyProxy {p.name}.",
        ),
        _error_ratio(p),
    ]
    for r in pools:
        up = f"up{selector({'namespace': r.namespace, 'job': r.picker})}"
        rules.append(
            alert_rule(
                "GatewayEndpointPickerDown",
                f"max by (namespace, job) ({up}) < 1 or absent({up})",
                "2m",
                "critical",
                f"The endpoint picker of {r.name} is down: its models answer 500",
                f"No replica of {r.namespace}/{r.picker} is up; the AI Gateway calls the picker fail-closed, so every "
                f"request for {', '.join(r.model_names[:3])} fails.",
                f"kubectl -n {r.namespace} logs deploy/{r.picker} --all-containers; kubectl -n {r.namespace} get pods",
            )
        )
        if r.picker_replicas > 1:
            rules.append(_standby_missing(r))
    if pools:
        refused = (
            "llm_d_epp_flow_control_request_queue_duration_seconds_count"
            f'{{namespace=~"{namespaces}", outcome=~"{REFUSED}"}}'
        )
        rules.append(
            alert_rule(
                "GatewayTenantRefused",
                f"sum by (namespace, inference_pool, fairness_id, outcome) (rate({refused}[5m])) > 0",
                "10m",
                "warning",
                "A tenant's requests are refused by flow control",
                "Tenant {{ $labels.fairness_id }}'s requests to {{ $labels.inference_pool }} have been refused "
                "({{ $labels.outcome }}) for 10 minutes: {{ $value | humanize }} a second.",
                "RejectedCapacity: the tenant's band is full (raise replicas.max or its priority); "
                "RejectedNoEndpoints or EvictedTTL: no replica became ready within the hold (a cold start longer "
                "than it, or replicas that cannot schedule: kubectl get nodeclaims).",
            )
        )
    rules += [
        _deployment_down(
            "GatewayRateLimitServiceDown",
            ENVOY_GATEWAY_NAMESPACE,
            RATELIMIT_DEPLOYMENT,
            "The gateway's rate-limit service is down: tenant limits are not enforced",
            "It fails open: requests pass without any tenant's request rate or token budget being counted.",
            f"kubectl -n {ENVOY_GATEWAY_NAMESPACE} describe deploy/{RATELIMIT_DEPLOYMENT}",
        ),
        _deployment_down(
            "GatewayCounterStoreDown",
            ENVOY_GATEWAY_NAMESPACE,
            VALKEY,
            "The rate-limit counters (Valkey) are down: tenant limits are not enforced",
            "The rate-limit service fails open without its counters; a restart empties the current windows.",
            f"kubectl -n {ENVOY_GATEWAY_NAMESPACE} describe deploy/{VALKEY}",
        ),
        _deployment_down(
            "GatewaySecretSyncDown",
            EXTERNAL_SECRETS_NAMESPACE,
            EXTERNAL_SECRETS_RELEASE,
            "The External Secrets Operator is down: new or rotated tenant keys do not reach the gateway",
            "Keys already synced keep working; a key changed in Secrets Manager is not read until it is back.",
            f"kubectl -n {EXTERNAL_SECRETS_NAMESPACE} logs deploy/{EXTERNAL_SECRETS_RELEASE}",
        ),
        _deployment_down(
            "GatewayAiGatewayControllerDown",
            AI_GATEWAY_NAMESPACE,
            AI_GATEWAY_CONTROLLER,
            "The Envoy AI Gateway controller is down: new Envoy pods are refused and route changes wait",
            "Its webhook mutates every new Envoy pod (fail-closed) and its extension server completes every xDS "
            "update; running pods keep serving.",
            f"kubectl -n {AI_GATEWAY_NAMESPACE} logs deploy/{AI_GATEWAY_CONTROLLER}",
        ),
        _deployment_down(
            "GatewayControllerDown",
            ENVOY_GATEWAY_NAMESPACE,
            ENVOY_GATEWAY_DEPLOYMENT,
            "The Envoy Gateway controller is down: gateway configuration and key changes wait",
            "Running Envoy pods keep their last configuration.",
            f"kubectl -n {ENVOY_GATEWAY_NAMESPACE} logs deploy/{ENVOY_GATEWAY_DEPLOYMENT}",
        ),
    ]
    return rules


def _error_ratio(p: GatewayProps) -> dict[str, Any]:
    """The share of callers' requests the gateway's Envoy answered 5xx (its own or a backend's) over 5 minutes."""
    # Namespace and Gateway names are DNS labels: nothing to escape.
    callers = (
        f'namespace="{p.namespace}", job="{p.namespace}/{p.name}", '
        f'envoy_http_conn_manager_prefix!~"{INTERNAL_LISTENERS}"'
    )
    series = f"envoy_http_downstream_rq_xx{{{callers}}}"
    errors_only = f'envoy_http_downstream_rq_xx{{{callers}, envoy_response_code_class="5"}}'
    total = f"sum(rate({series}[5m]))"
    errors = f"sum(rate({errors_only}[5m]))"
    return alert_rule(
        "GatewayErrorRatioHigh",
        f"{errors} / {total} > {ERROR_RATIO} and {total} > {MIN_RATE}",
        "5m",
        "critical",
        f"More than {ERROR_RATIO:.0%} of the requests through the gateway fail",
        f"{{{{ $value | humanizePercentage }}}} of the requests through {p.name} in {p.namespace} answered 5xx over "
        "the last 5 minutes.",
        "The tenant dashboard splits the errors per model: one model's errors point at its pods "
        "(VllmNoReadyReplica, VllmEngineStalled); every model's at the gateway's Envoy or its filters "
        f"(kubectl -n {p.namespace} logs the Envoy pods; GatewayEndpointPickerDown).",
    )


def _standby_missing(r: ModelRoute) -> dict[str, Any]:
    """Fewer picker pods than wanted: with leader election only the leader is Ready, so this counts pods (ready or
    not), not ready replicas; a lost standby turns the next loss of the leader into an outage of the model."""
    pods, wanted = (
        f"sum({ksm_workload(metric, 'deployment', r.namespace, [r.picker])})"
        for metric in ("status_replicas", "spec_replicas")
    )
    return alert_rule(
        "GatewayEndpointPickerStandbyMissing",
        f"{pods} < {wanted}",
        "15m",
        "warning",
        f"The endpoint picker of {r.name} has no standby",
        f"{{{{ $value }}}} {r.picker} pods run in {r.namespace}, fewer than wanted for 15 minutes: a loss of the "
        "leader now fails the model's requests until a new pod starts.",
        f"kubectl -n {r.namespace} get pods -l app.kubernetes.io/instance={r.picker} -o wide; Pending means no "
        "room on the system nodes.",
    )


def _envoy_up(p: GatewayProps) -> str:
    # A PodMonitor's targets carry job <namespace>/<name> (the Prometheus Operator's default jobLabel).
    return f"up{selector({'namespace': p.namespace, 'job': f'{p.namespace}/{p.name}'})}"


def tenant_panels(p: GatewayProps) -> tuple[ExtraPanel, ...]:
    """Per tenant: from the pickers (vLLM models) requests, tokens, time held, held now and refusals; from the AI
    Gateway (every model, Ray Serve's too) requests, errors and tokens."""
    pools = sorted({r.namespace for r in p.routes if r.routed and isinstance(r.backend, PoolBackend)})
    # Namespace names are DNS labels: nothing to escape in the regular expression.
    epp = f'{{namespace=~"{"|".join(pools) or "none"}"}}'
    gw = selector({"namespace": p.namespace})
    errors = gw[:-1] + ', error_type!=""}'
    queue = "llm_d_epp_flow_control_request_queue_duration_seconds"
    return (
        ExtraPanel(
            "Requests per tenant (vLLM models)",
            "Requests each tenant sent to each vLLM model, as its endpoint picker counted them.",
            "reqps",
            ((f"sum by (fairness_id, model_name) (rate(llm_d_epp_request_total{epp}[{_RATE}]))",
              "{{fairness_id}} {{model_name}}"),),
        ),
        ExtraPanel(
            "Tokens per tenant (vLLM models)",
            "Prompt (in) and generated (out) tokens per second, per tenant.",
            "short",
            (
                (f"sum by (fairness_id) (rate(llm_d_epp_request_input_tokens_sum{epp}[{_RATE}]))",
                 "{{fairness_id}} in"),
                (f"sum by (fairness_id) (rate(llm_d_epp_request_output_tokens_sum{epp}[{_RATE}]))",
                 "{{fairness_id}} out"),
            ),
        ),
        ExtraPanel(
            "Time held per tenant (p99)",
            "How long the pickers' flow control held each tenant's requests before dispatching or refusing them "
            "(while no replica was ready, or the pool was saturated).",
            "s",
            ((f"histogram_quantile(0.99, sum by (le, fairness_id) (rate({queue}_bucket{epp}[{_RATE}])))",
              "{{fairness_id}}"),),
        ),
        ExtraPanel(
            "Held now per tenant",
            "Requests the pickers hold at this moment, per tenant and pool (what wakes a workload at zero).",
            "short",
            ((f"sum by (fairness_id, inference_pool) (llm_d_epp_flow_control_queue_size{epp})",
              "{{fairness_id}} {{inference_pool}}"),),
        ),
        ExtraPanel(
            "Refused by flow control per tenant",
            "Requests the pickers refused (429 band full, 503 no replica within the hold), per tenant and outcome.",
            "reqps",
            ((f'sum by (fairness_id, outcome) (rate({queue}_count{epp[:-1]}, outcome!="Dispatched"}}[{_RATE}]))',
              "{{fairness_id}} {{outcome}}"),),
        ),
        ExtraPanel(
            "Requests and errors per tenant (every model)",
            "Requests the AI Gateway processed per tenant and model, and those that ended in an error (rate limits "
            "and budgets included), from the Envoy pods.",
            "reqps",
            (
                (f"sum by (tenant, gen_ai_original_model) (rate(gen_ai_server_request_duration_seconds_count{gw}"
                 f"[{_RATE}]))", "{{tenant}} {{gen_ai_original_model}}"),
                (f"sum by (tenant, error_type) (rate(gen_ai_server_request_duration_seconds_count{errors}[{_RATE}]))",
                 "{{tenant}} error {{error_type}}"),
            ),
        ),
        ExtraPanel(
            "Tokens per tenant (every model)",
            "Tokens the AI Gateway counted from each response's usage (what the budgets charge), per tenant and type.",
            "short",
            ((f"sum by (tenant, gen_ai_token_type) (rate(gen_ai_client_token_usage_sum{gw}[{_RATE}]))",
              "{{tenant}} {{gen_ai_token_type}}"),),
        ),
    )  # fmt: skip


@builds_objects
def gateway_monitoring(p: GatewayProps) -> list[dict[str, Any]]:
    """The PrometheusRule (the alerts, and the usage records of usage.py) and the dashboard ConfigMap."""
    name = f"{p.name}-gateway"
    dashboard = panels_dashboard(
        dashboard_uid(name),
        f"llm-eks gateway: {p.namespace}/{p.name}",
        "Every tenant's traffic through the inference gateway: requests, tokens, time held and refusals.",
        ("llm-eks", "gateway"),
        (*tenant_panels(p), usage_panel(p.namespace)),
    )
    alerts = meta(f"{p.name}-alerts", p.namespace)
    board = meta(f"{p.name}-dashboard", p.namespace)
    board["labels"]["grafana_dashboard"] = "1"
    return [
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": alerts,
            "spec": {
                "groups": [
                    {"name": f"{name}.alerts", "rules": gateway_alert_rules(p)},
                    {"name": f"{name}.usage", "rules": usage_rules(p.namespace)},
                ]
            },
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": board,
            "data": {f"{name}.json": json.dumps(dashboard, indent=2, sort_keys=True)},
        },
    ]
