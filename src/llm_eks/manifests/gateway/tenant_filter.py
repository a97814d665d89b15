"""The one piece of code in the request path: a Lua filter (Envoy Gateway's EnvoyExtensionPolicy) that maps the
authenticated principal to its tenant, and sets the three headers that carry it: our own tenant header (rate-limit
keys, metrics, access log) and the endpoint picker's fairness id and objective (its flow and priority band).

Why code and not a resource: API-key auth forwards the client id into one header (`forwardClientIDHeader`, Envoy's
api_key_auth `setCopy`), JWT auth a claim (`claimToHeaders`); the picker needs two headers, from a mapping (a JWT
subject such as `system:serviceaccount:team-b:chat-client` is not an InferenceObjective name). Envoy Gateway v1.9.0
copies a header after authentication with no other filter (its header_mutation filter carries only late response
headers, internal/xds/translator/header_mutation.go; early request headers run before authentication), and an
AIGatewayRoute's header mutation is ignored for InferencePool backends (api/v1beta1/ai_gateway_route.go). The script is
fixed; the tenant table is data (`filterContext`, handed to the script as `handle:filterContext()`, Envoy Gateway
api/v1alpha1/lua_types.go). A principal the table does not hold is refused with 403 before the body is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llm_eks.manifests.gateway.props import FAIRNESS_HEADER, OBJECTIVE_HEADER, PRINCIPAL_HEADER, TENANT_HEADER
from llm_eks.manifests.gateway.tenants import Tenant

# What a refused caller reads: nothing about the tenants or models that exist.
DENIED_BODY = '{"error":{"type":"forbidden","code":403,"message":"access denied"}}'

SCRIPT = f"""-- llm-eks: the authenticated principal to its tenant (filterContext "principals"), or 403.
function envoy_on_request(handle)
  local headers = handle:headers()
  local principal = headers:get("{PRINCIPAL_HEADER}")
  local principals = handle:filterContext():get("principals")
  local tenant = nil
  if principal ~= nil and type(principals) == "table" then
    tenant = principals[principal]
  end
  if type(tenant) ~= "table" then
    handle:respond({{[":status"] = "403", ["content-type"] = "application/json"}}, '{DENIED_BODY}')
    return
  end
  headers:replace("{TENANT_HEADER}", tenant["tenant"])
  headers:replace("{FAIRNESS_HEADER}", tenant["tenant"])
  headers:replace("{OBJECTIVE_HEADER}", tenant["objective"])
end
"""


def filter_context(tenants: Sequence[Tenant]) -> dict[str, Any]:
    """The table the script reads: principal -> its tenant and InferenceObjective."""
    return {"principals": {t.principal: {"tenant": t.name, "objective": t.objective} for t in tenants}}
