"""The gateway's limits, as one Envoy Gateway BackendTrafficPolicy on the Gateway: the request body cap, a per-replica
request rate ahead of the body buffer (overload protection), each tenant's request rate and token budgets per model
(the global rate-limit service, counters in Valkey), and the Retry-After on the endpoint picker's 429 and 503.

What is counted, and when (envoyproxy/gateway v1.9.0 internal/xds/translator/ratelimit.go): a rule without `cost`
counts 1 per request; a token rule counts 0 on the request (a request is refused only once the window is already
spent) and charges the response's tokens when the response ends (`apply_on_stream_done`), read from the metadata the
AI Gateway writes from `usage` (GatewayConfig.globalLLMRequestCosts: proxy.py). So requests in flight can overshoot a
budget by their own tokens. Windows are calendar windows of the unit (envoyproxy/ratelimit src/limiter/
base_limiter.go). `shared: true` makes one counter per (tenant, model) whatever xDS route matched. `Distinct` on the
model header gives each model its own counter; its values are bounded: rbac refused every model the tenant may not
call before this filter runs.

429s carry `Retry-After` (seconds to the window's end) and RateLimit-Limit/-Remaining from the rate-limit service
(constructs/envoy_gateway.py sets LIMIT_RESET_HEADER), and Envoy's x-ratelimit-* headers. The picker's own refusals
(flow control) carry none: `responseOverride` (Envoy's custom_response filter, which sees local replies) adds it,
matching the picker's `x-llm-d-request-dropped-reason` header (llm-d router pkg/common/error/error.go; outcomes in
pkg/epp/requestcontrol/admission.go).
"""

from __future__ import annotations

from typing import Any

from llm_eks.manifests.gateway.common import meta
from llm_eks.manifests.gateway.props import MODEL_HEADER, TENANT_HEADER, GatewayProps
from llm_eks.manifests.gateway.proxy import INPUT_TOKENS, OUTPUT_TOKENS
from llm_eks.manifests.gateway.tenants import Tenant
from llm_eks.manifests.source import builds_objects

GATEWAY_API = "gateway.networking.k8s.io"
DROPPED_HEADER = "x-llm-d-request-dropped-reason"
# Requests per second one Envoy replica takes before its own local limit answers 429: above any tenant's share, below
# what floods a replica's memory with buffered bodies.
REPLICA_REQUESTS_PER_SECOND = 500
# Retry-After of a 429 from a full priority band: the queue drains at the pool's pace; ten seconds is a few batches.
SATURATED_RETRY_AFTER_SECONDS = 10
AI_GATEWAY_METADATA = "io.envoy.ai_gateway"

# (field of TenantLimits, unit, token metadata key or None for requests)
_BUDGETS = (
    ("requests_per_second", "Second", None),
    ("input_tokens_per_minute", "Minute", INPUT_TOKENS),
    ("input_tokens_per_day", "Day", INPUT_TOKENS),
    ("output_tokens_per_minute", "Minute", OUTPUT_TOKENS),
    ("output_tokens_per_day", "Day", OUTPUT_TOKENS),
)


def tenant_rules(t: Tenant) -> list[dict[str, Any]]:
    """The tenant's limits, one global rule each, per model it calls."""
    selector = [
        {
            "headers": [
                {"name": TENANT_HEADER, "type": "Exact", "value": t.name},
                {"name": MODEL_HEADER, "type": "Distinct"},
            ]
        }
    ]
    rules = []
    for field, unit, metadata_key in _BUDGETS:
        value = getattr(t.limits, field)
        if value is None:
            continue
        rule: dict[str, Any] = {"clientSelectors": selector, "limit": {"requests": value, "unit": unit}, "shared": True}
        if metadata_key is not None:
            rule["cost"] = {
                "request": {"from": "Number", "number": 0},
                "response": {"from": "Metadata", "metadata": {"namespace": AI_GATEWAY_METADATA, "key": metadata_key}},
            }
        rules.append(rule)
    return rules


def _override(status: int, reason: dict[str, str], retry_after: int, kind: str, message: str) -> dict[str, Any]:
    body = f'{{"error":{{"type":"{kind}","code":{status},"message":"{message}"}}}}'
    return {
        "match": {
            "statusCodes": [{"type": "Value", "value": status}],
            "responseHeaders": [{"name": DROPPED_HEADER, "value": reason}],
        },
        "source": "Local",
        "response": {
            "contentType": "application/json",
            "body": {"type": "Inline", "inline": body},
            "header": {"set": [{"name": "Retry-After", "value": str(retry_after)}]},
        },
    }


@builds_objects
def traffic_policy(p: GatewayProps) -> dict[str, Any]:
    """The Gateway's BackendTrafficPolicy."""
    rules = [rule for t in p.tenants for rule in tenant_rules(t)]
    # One value for every pool: a policy in a workload's namespace could override the gateway's (guard.py refuses
    # them there). The longest cold start's retry.
    retry_503 = max((r.flow.retry_after_seconds for r in p.routes if r.flow is not None), default=30)
    spec: dict[str, Any] = {
        "targetRefs": [{"group": GATEWAY_API, "kind": "Gateway", "name": p.name}],
        # 413 above it, before the AI Gateway's processor reads the body. Load-bearing for the filter order too: the
        # AI Gateway inserts its processor right after the last buffer filter (after authentication).
        "requestBuffer": {"limit": str(p.max_request_bytes)},
        "rateLimit": {"local": {"rules": [{"limit": {"requests": REPLICA_REQUESTS_PER_SECOND, "unit": "Second"}}]}},
        "responseOverride": [
            _override(
                503,
                {"type": "Exact", "value": "rejected-no-endpoints"},
                retry_503,
                "model_starting",
                "the model is starting; retry after the time given",
            ),
            _override(
                429,
                {"type": "Prefix", "value": "rejected-"},
                SATURATED_RETRY_AFTER_SECONDS,
                "overloaded",
                "the model is at capacity; retry after the time given",
            ),
        ],
    }
    if rules:
        spec["rateLimit"]["global"] = {"rules": rules}
    return {
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "BackendTrafficPolicy",
        "metadata": meta(p.name, p.namespace),
        "spec": spec,
    }
