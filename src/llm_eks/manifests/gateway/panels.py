"""The gateway's view of one workload, as panels on that workload's dashboard: requests, latency and errors per
`model` as the router saw them (queueing in Envoy and the pickers included, which vLLM's own panels cannot show).

Series names, each read in its source at the pinned version:
- a vLLM workload's endpoint picker (llm-d-router v0.10.0 pkg/epp/metrics/llm_d_router_metrics.go, subsystem
  `llm_d_epp`): `llm_d_epp_request_total` and `llm_d_epp_request_duration_seconds` (labels model_name,
  target_model_name, fairness_id, priority) and `llm_d_epp_request_error_total` (plus error_code). `model_name` is
  the request's `model`, so a LoRA adapter is its own series. The `inference_objective_*` names are deprecated there.
- a Ray Serve workload has no picker: the AI Gateway external processor's OpenTelemetry GenAI metrics on the Envoy
  pods (envoyproxy/ai-gateway v1.1.0 internal/metrics/genai.go: gen_ai.server.request.duration in seconds, with
  gen_ai.original.model and error.type), as Prometheus names them (that release's examples/monitoring
  grafana-dashboard.json: gen_ai_server_request_duration_seconds_*, label gen_ai_original_model), scraped by the
  gateway's PodMonitor.
"""

from __future__ import annotations

from llm_eks.manifests.dashboard import ExtraPanel
from llm_eks.manifests.gateway.props import GatewayProps, ModelRoute, PoolBackend
from llm_eks.manifests.promql import selector

EPP_REQUESTS = "llm_d_epp_request_total"
EPP_ERRORS = "llm_d_epp_request_error_total"
EPP_DURATION = "llm_d_epp_request_duration_seconds_bucket"
GENAI_REQUESTS = "gen_ai_server_request_duration_seconds_count"
GENAI_DURATION = "gen_ai_server_request_duration_seconds_bucket"
_RATE = "$__rate_interval"


def gateway_panels(gateway: GatewayProps, route: ModelRoute) -> tuple[ExtraPanel, ...]:
    """Three panels for `route`'s workload: request rate, latency quantiles and errors, per model name."""
    if isinstance(route.backend, PoolBackend):
        return _picker_panels(route)
    return _envoy_panels(gateway, route)


def _picker_panels(route: ModelRoute) -> tuple[ExtraPanel, ...]:
    sel = selector({"job": route.picker, "namespace": route.namespace})

    def quantile(q: float) -> tuple[str, str]:
        expr = f"histogram_quantile({q}, sum by (le, model_name) (rate({EPP_DURATION}{sel}[{_RATE}])))"
        return expr, f"p{round(q * 100)} {{{{model_name}}}}"

    return (
        ExtraPanel(
            "Gateway: requests per model",
            f"Requests the endpoint picker {route.picker} routed, by the `model` they asked for (LoRA adapters apart).",
            "reqps",
            ((f"sum by (model_name) (rate({EPP_REQUESTS}{sel}[{_RATE}]))", "{{model_name}}"),),
        ),
        ExtraPanel(
            "Gateway: end-to-end latency",
            "From the gateway's first byte to the response's end, as the endpoint picker measured it.",
            "s",
            (quantile(0.5), quantile(0.99)),
        ),
        ExtraPanel(
            "Gateway: errors",
            "Requests that failed at the gateway or the model server, by model and error code.",
            "reqps",
            (
                (
                    f"sum by (model_name, error_code) (rate({EPP_ERRORS}{sel}[{_RATE}]))",
                    "{{model_name}} {{error_code}}",
                ),
            ),
        ),
    )


def _envoy_panels(gateway: GatewayProps, route: ModelRoute) -> tuple[ExtraPanel, ...]:
    assert not isinstance(route.backend, PoolBackend)
    # A Ray Serve workload serves one model (RayServeProps.model_id).
    sel = selector({"namespace": gateway.namespace, "gen_ai_original_model": route.model_names[0]})
    errors = sel[:-1] + ', error_type!=""}'

    def quantile(q: float) -> tuple[str, str]:
        expr = f"histogram_quantile({q}, sum by (le) (rate({GENAI_DURATION}{sel}[{_RATE}])))"
        return expr, f"p{round(q * 100)}"

    return (
        ExtraPanel(
            "Gateway: requests",
            f"Requests the gateway sent to {route.backend.service}, by tenant.",
            "reqps",
            ((f"sum by (tenant) (rate({GENAI_REQUESTS}{sel}[{_RATE}]))", "{{tenant}}"),),
        ),
        ExtraPanel(
            "Gateway: end-to-end latency",
            "From the gateway's external processor to the response's end.",
            "s",
            (quantile(0.5), quantile(0.99)),
        ),
        ExtraPanel(
            "Gateway: errors",
            "Requests that ended in an error, by its type.",
            "reqps",
            ((f"sum by (error_type) (rate({GENAI_REQUESTS}{errors}[{_RATE}]))", "{{error_type}}"),),
        ),
    )
