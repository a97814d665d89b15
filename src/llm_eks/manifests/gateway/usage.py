"""What each tenant used, for billing and chargeback: the input and output tokens per tenant and model, as the
gateway counted them, in the gateway's PrometheusRule (hourly records, a dashboard panel) and in the query
`llm-eks usage` sends for any window.

The source is the AI Gateway's `gen_ai.client.token.usage` histogram (envoyproxy/ai-gateway v1.1.0, c217da8:
internal/metrics/genai.go, unit token, the model the client asked for in `gen_ai.original.model`;
internal/metrics/metrics_impl.go `RecordTokenUsage`, one observation per response and token type), which Prometheus
holds as `gen_ai_client_token_usage_sum` (the release's examples/monitoring/grafana-dashboard.json reads that name and
sums `gen_ai_token_type=~"input|output"`). Only `input` and `output` are read: `input` already holds the cached and
cache-creation tokens (internal/metrics/metrics.go `ExtractTokenUsageFromExplicitCaching`), which are recorded again
as `cached_input` and `cache_creation_input`, and `reasoning` is recorded apart; adding them would count twice.

The `tenant` label is the tenant header the gateway's own filter sets after authentication (tenant_filter.py), copied
into the metric's attributes by the controller's `--metricsRequestHeaderAttributes` (v1.1.0
manifests/charts/ai-gateway-helm/values.yaml:110 `controller.metricsRequestHeaderAttributes`, passed on by
templates/deployment.yaml:71-72; metrics_impl.go `buildBaseAttributes` names the attribute as mapped), which
constructs/envoy_gateway.py `ai_gateway_values` sets from infra/stack.py: a client cannot choose it.

`increase()` over a counter reads what was scraped inside the window and extrapolates to its edges, so a window's
figure is exact to within the tokens of one scrape interval at each end; an Envoy pod's restart resets its counters,
which `increase()` accounts for.
"""

from __future__ import annotations

from typing import Any

from llm_eks.manifests.dashboard import ExtraPanel
from llm_eks.manifests.promql import selector

TOKENS = "gen_ai_client_token_usage_sum"
# The labels a usage row is keyed by: who, and which model they asked for.
TENANT = "tenant"
MODEL = "gen_ai_original_model"
TOKEN_TYPE = "gen_ai_token_type"
# Token types, as genai.go names them.
INPUT, OUTPUT = "input", "output"
INPUT_RECORD = "llm_eks:gateway_input_tokens:increase1h"
OUTPUT_RECORD = "llm_eks:gateway_output_tokens:increase1h"


def _tokens(namespace: str, token_type: str) -> str:
    return f"{TOKENS}{selector({'namespace': namespace, TOKEN_TYPE: token_type})}"


def usage_rules(namespace: str) -> list[dict[str, Any]]:
    """Input and output tokens per tenant and model over the last hour, recorded at every evaluation."""
    return [
        {
            "record": record,
            "expr": f"sum by (namespace, {TENANT}, {MODEL}) (increase({_tokens(namespace, kind)}[1h]))",
        }
        for record, kind in ((INPUT_RECORD, INPUT), (OUTPUT_RECORD, OUTPUT))
    ]


def usage_query(namespace: str, seconds: int) -> str:
    """Tokens per tenant, model and type over the `seconds` before the query's evaluation time."""
    series = TOKENS + selector({"namespace": namespace}, {TOKEN_TYPE: f"{INPUT}|{OUTPUT}"})
    return f"sum by ({TENANT}, {MODEL}, {TOKEN_TYPE}) (increase({series}[{seconds}s]))"


def usage_panel(namespace: str) -> ExtraPanel:
    """The hourly records, per tenant and model."""
    gw = selector({"namespace": namespace})
    return ExtraPanel(
        "Tokens per tenant and model, last hour (usage)",
        "Input and output tokens each tenant used per model over the hour before each point, as recorded for "
        "chargeback (llm-eks usage reports any window).",
        "short",
        (
            (f"sum by ({TENANT}, {MODEL}) ({INPUT_RECORD}{gw})", f"{{{{{TENANT}}}}} {{{{{MODEL}}}}} in"),
            (f"sum by ({TENANT}, {MODEL}) ({OUTPUT_RECORD}{gw})", f"{{{{{TENANT}}}}} {{{{{MODEL}}}}} out"),
        ),
    )
