"""What keeps the gateway closed to anyone who may write objects in a workload's namespace: four
ValidatingAdmissionPolicies (built into Kubernetes, each bound with Deny) the API server enforces on everything
written later.

- `llm-eks-gateway-routes`: a route of the kind the gateway reads (routes.route_kind: AIGatewayRoute) attached to the
  gateway lives in a workload's namespace and can only widen nothing: no `hostnames` (a matching non-wildcard hostname
  outranks every other route's rules), no `llmRequestCosts` (a route's cost overrides the gateway's, so a route could
  price its tokens at 0), at least one match per rule (an empty `matches` compiles to the path prefix "/" alone: every
  request), exactly one header per match, the model header, Exact, with a name its own namespace serves (header
  names compared case-insensitively: `X-AI-EG-Model` and `x-ai-eg-model` are one header to Envoy), backends in its
  own namespace, and only listeners the gateway has.
- `llm-eks-gateway-other-routes`: any other route attached to the gateway (an HTTPRoute with a longer path would
  outrank the AI Gateway's "/" rules) is written only by the AI Gateway's controller, which renders each AIGatewayRoute
  into one (and rewrites any edit); GRPC, TLS, TCP and UDP routes not at all.
- `llm-eks-gateway-policies`: in llm-eks's namespaces, Envoy Gateway and AI Gateway policy kinds only in the gateway's
  namespace (a route-level SecurityPolicy or BackendTrafficPolicy would override the gateway's authentication and
  budgets for that route); Gateways of llm-eks's class only there; HTTPRouteFilters elsewhere only by the AI
  Gateway's controller; a Backend only by name of a Service of its own namespace.
- `llm-eks-gateway-services`: no NodePort or LoadBalancer Service and no externalIPs in llm-eks's namespaces, except
  the gateway's own internal NLB (an AWS Load Balancer Controller NLB, scheme internal) in its namespace.

Sources: Gateway API v1.6.1 (HTTPRoute precedence: hostname, then path; `matches` defaulted only when absent),
envoyproxy/ai-gateway v1.1.0 (AIGatewayRoute fields; the controller's ServiceAccount ai-gateway-controller in the
chart's namespace; the HTTPRoute and HTTPRouteFilters it writes), envoyproxy/gateway v1.9.0 (policy attachment: the
more specific target wins), Kubernetes admissionregistration.k8s.io/v1 (GA since 1.30; CEL with the Kubernetes string
library, `lowerAscii`). The tests evaluate every expression with a CEL implementation against our own objects and
against the captures they must refuse.
"""

from __future__ import annotations

import json
from typing import Any

from llm_eks.manifests.admission import deny_binding
from llm_eks.manifests.gateway.common import meta
from llm_eks.manifests.gateway.platform import AI_GATEWAY_CONTROLLER, AI_GATEWAY_NAMESPACE
from llm_eks.manifests.gateway.props import GATEWAY_CLASS, MODEL_HEADER, GatewayProps
from llm_eks.manifests.gateway.proxy import SCHEME_ANNOTATION
from llm_eks.manifests.gateway.routes import route_kind
from llm_eks.manifests.labels import PART_OF
from llm_eks.manifests.source import builds_objects

GATEWAY_API = "gateway.networking.k8s.io"
ROUTES_POLICY = "llm-eks-gateway-routes"
OTHER_ROUTES_POLICY = "llm-eks-gateway-other-routes"
POLICIES_POLICY = "llm-eks-gateway-policies"
SERVICES_POLICY = "llm-eks-gateway-services"
# Every route kind of Gateway API v1.6.
GATEWAY_API_ROUTES = ("httproutes", "grpcroutes", "tlsroutes", "tcproutes", "udproutes")
EG_POLICY_KINDS = (
    "securitypolicies",
    "backendtrafficpolicies",
    "clienttrafficpolicies",
    "envoyextensionpolicies",
    "envoypatchpolicies",
    "envoyproxies",
)
AIGW_POLICY_KINDS = ("gatewayconfigs", "backendsecuritypolicies", "quotapolicies", "mcproutes")
# Namespaces llm-eks creates carry this label (and Envoy Gateway watches only those).
OUR_NAMESPACES = {"matchLabels": {"app.kubernetes.io/part-of": PART_OF}}


def ai_gateway_controller(namespace: str = AI_GATEWAY_NAMESPACE) -> str:
    """The username the AI Gateway's controller writes HTTPRoutes and HTTPRouteFilters as."""
    return f"system:serviceaccount:{namespace}:{AI_GATEWAY_CONTROLLER}"


def _cel(value: Any) -> str:
    """A CEL literal of strings, lists and maps: JSON's escapes are CEL's for these."""
    return json.dumps(value, sort_keys=True)


def _attached(p: GatewayProps) -> str:
    # A parentRef's kind defaults to Gateway and its namespace to the route's own.
    return (
        "has(object.spec.parentRefs) && object.spec.parentRefs.exists(r, "
        "(!has(r.kind) || r.kind == 'Gateway') && r.name == " + _cel(p.name) + " && "
        "(has(r.namespace) ? r.namespace : object.metadata.namespace) == " + _cel(p.namespace) + ")"
    )


def _policy(name: str, match: dict[str, Any], validations: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": meta(name, "")["labels"]},
        "spec": {"failurePolicy": "Fail", "matchConstraints": match, **spec, "validations": validations},
    }


def _rules(groups: list[str], resources: list[str], operations: tuple[str, ...] = ("CREATE", "UPDATE")) -> list[Any]:
    return [{"apiGroups": groups, "apiVersions": ["*"], "resources": resources, "operations": list(operations)}]


def _deny(rule: str, message: str) -> dict[str, Any]:
    return {"expression": rule, "message": message, "reason": "Forbidden"}


@builds_objects
def route_policy(p: GatewayProps) -> list[dict[str, Any]]:
    """The policy on the gateway's route kind, and its binding."""
    allowed: dict[str, list[str]] = {}
    for r in p.routes:
        if r.routed:
            allowed.setdefault(r.namespace, []).extend(r.model_names)
    kind = route_kind()
    gw = f"{p.namespace}/{p.name}"
    only = "!variables.attached || "
    validations = [
        _deny(
            only + "object.metadata.namespace in variables.allowed",
            f"only the workloads' namespaces may attach routes to the inference gateway {gw}",
        ),
        _deny(
            only + "!has(object.spec.hostnames) || size(object.spec.hostnames) == 0",
            f"a route attached to the inference gateway {gw} may not name hostnames (a hostname outranks every "
            "other route)",
        ),
        _deny(
            only + "!has(object.spec.llmRequestCosts) || size(object.spec.llmRequestCosts) == 0",
            f"a route attached to the inference gateway {gw} may not set llmRequestCosts (token costs are the "
            "gateway's)",
        ),
        _deny(
            # A namespace without workloads fails the first validation; here it must not be an evaluation error.
            only + "object.metadata.namespace in variables.allowed && "
            "object.spec.rules.all(rule, has(rule.matches) && size(rule.matches) > 0 && "
            "rule.matches.all(m, has(m.headers) && size(m.headers) == 1 && m.headers.all(h, "
            f"h.name.lowerAscii() == {_cel(MODEL_HEADER)} && (!has(h.type) || h.type == 'Exact') && "
            "h.value in variables.allowed[object.metadata.namespace])))",
            f"a route attached to the inference gateway {gw} must match, in every rule and every match, exactly one "
            f"header: {MODEL_HEADER}, Exact, with a model name its own namespace serves",
        ),
        _deny(
            only + "object.spec.rules.all(rule, !has(rule.backendRefs) || rule.backendRefs.all(b, "
            "!has(b.namespace) || b.namespace == object.metadata.namespace))",
            f"a route attached to the inference gateway {gw} may send only to backends of its own namespace",
        ),
        _deny(
            only
            + "object.spec.parentRefs.all(r, !has(r.sectionName) || r.sectionName in "
            + _cel([name for name, _ in p.listeners()])
            + ")",
            f"a route attached to the inference gateway {gw} may name only its listeners",
        ),
    ]
    policy = _policy(
        ROUTES_POLICY,
        {"resourceRules": _rules([kind.group], [kind.resource])},
        validations,
        variables=[
            {"name": "attached", "expression": _attached(p)},
            {"name": "allowed", "expression": _cel(allowed)},
        ],
    )
    return [policy, _binding(ROUTES_POLICY)]


@builds_objects
def other_routes_policy(p: GatewayProps) -> list[dict[str, Any]]:
    """The policy on Gateway API routes attached to the gateway, and its binding."""
    gw = f"{p.namespace}/{p.name}"
    controller = ai_gateway_controller()
    validations = [
        _deny(
            "!variables.attached || request.kind.kind == 'HTTPRoute'",
            f"only HTTPRoutes may attach to the inference gateway {gw}",
        ),
        _deny(
            f"!variables.attached || request.userInfo.username == {_cel(controller)}",
            f"only the AI Gateway's controller writes the HTTPRoutes of the inference gateway {gw} (write an "
            f"{route_kind().kind} instead)",
        ),
    ]
    policy = _policy(
        OTHER_ROUTES_POLICY,
        {"resourceRules": _rules([GATEWAY_API], list(GATEWAY_API_ROUTES))},
        validations,
        variables=[{"name": "attached", "expression": _attached(p)}],
    )
    return [policy, _binding(OTHER_ROUTES_POLICY)]


@builds_objects
def policies_policy(p: GatewayProps) -> list[dict[str, Any]]:
    """The policy on Envoy Gateway and AI Gateway kinds in llm-eks's namespaces, and its binding."""
    here = f"object.metadata.namespace == {_cel(p.namespace)}"
    controller = ai_gateway_controller()
    kinds = list(EG_POLICY_KINDS) + list(AIGW_POLICY_KINDS)
    validations = [
        _deny(
            f"!(request.resource.resource in {_cel(kinds)}) || {here}",
            f"Envoy Gateway and AI Gateway policies are the inference gateway's: only in {p.namespace}",
        ),
        _deny(
            f"request.resource.resource != 'gateways' || !has(object.spec.gatewayClassName) || "
            f"object.spec.gatewayClassName != {_cel(GATEWAY_CLASS)} || {here}",
            f"a Gateway of class {GATEWAY_CLASS} may exist only in {p.namespace}",
        ),
        _deny(
            f"request.resource.resource != 'httproutefilters' || {here} || "
            f"request.userInfo.username == {_cel(controller)}",
            "HTTPRouteFilters outside the gateway's namespace are the AI Gateway controller's",
        ),
        _deny(
            "request.resource.resource != 'backends' || (has(object.spec.endpoints) && "
            "object.spec.endpoints.all(e, has(e.fqdn) && "
            "e.fqdn.hostname.endsWith('.' + object.metadata.namespace + '.svc.cluster.local')))",
            "a Backend may name only a Service of its own namespace, by its cluster DNS name",
        ),
    ]
    match = {
        "namespaceSelector": OUR_NAMESPACES,
        "resourceRules": [
            *_rules(["gateway.envoyproxy.io"], [*EG_POLICY_KINDS, "httproutefilters", "backends"]),
            *_rules(["aigateway.envoyproxy.io"], list(AIGW_POLICY_KINDS)),
            *_rules([GATEWAY_API], ["gateways"]),
        ],
    }
    return [_policy(POLICIES_POLICY, match, validations), _binding(POLICIES_POLICY)]


@builds_objects
def service_policy(p: GatewayProps) -> list[dict[str, Any]]:
    """The policy on Services in llm-eks's namespaces, and its binding."""
    in_gateway = f"object.metadata.namespace == {_cel(p.namespace)}"
    internal_nlb = (
        f"{in_gateway} && has(object.spec.loadBalancerClass) && "
        f"object.spec.loadBalancerClass == {_cel(p.load_balancer_class)} "
        f"&& has(object.metadata.annotations) && {_cel(SCHEME_ANNOTATION)} in object.metadata.annotations && "
        f"object.metadata.annotations[{_cel(SCHEME_ANNOTATION)}] == 'internal'"
    )
    if p.load_balanced:
        load_balancer = f"!has(object.spec.type) || object.spec.type != 'LoadBalancer' || ({internal_nlb})"
        message = (
            f"the only LoadBalancer Service in llm-eks's namespaces is the gateway's internal NLB in {p.namespace} "
            f"(loadBalancerClass {p.load_balancer_class}, {SCHEME_ANNOTATION}: internal)"
        )
    else:
        load_balancer = "!has(object.spec.type) || object.spec.type != 'LoadBalancer'"
        message = "the inference gateway is exposed in-cluster only: no LoadBalancer Service in llm-eks's namespaces"
    validations = [
        _deny(load_balancer, message),
        _deny(
            "!has(object.spec.type) || object.spec.type != 'NodePort'",
            "no NodePort Service in llm-eks's namespaces (it opens the serving port on every node)",
        ),
        _deny(
            "!has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0",
            "no externalIPs on a Service in llm-eks's namespaces",
        ),
    ]
    match = {"namespaceSelector": OUR_NAMESPACES, "resourceRules": _rules([""], ["services"])}
    return [_policy(SERVICES_POLICY, match, validations), _binding(SERVICES_POLICY)]


def admission_policies(p: GatewayProps) -> list[dict[str, Any]]:
    return [*route_policy(p), *other_routes_policy(p), *policies_policy(p), *service_policy(p)]


@builds_objects
def _binding(policy: str) -> dict[str, Any]:
    return deny_binding(policy, meta(policy, "")["labels"])
