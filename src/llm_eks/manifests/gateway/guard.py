"""What keeps the gateway closed, beyond its NetworkPolicies: the JWT check (when the gateway authenticates), its
access log, the options that make its generated Service an internal NLB the AWS Load Balancer Controller owns, and
two ValidatingAdmissionPolicies (built into Kubernetes) that the API server enforces on anything else written
later:

- `llm-eks-gateway-routes`: a route attached to the inference gateway may match only the model names its own
  namespace serves, in every rule and every match, on the header the payload processor sets. Any HTTPRoute in a
  workload namespace attaches to the shared Gateway; without this, one with a longer path prefix (or no header
  match at all) would capture another workload's traffic.
- `llm-eks-gateway-services`: in the gateway's namespace a LoadBalancer Service exists only as an internal NLB owned
  by the AWS Load Balancer Controller (its `loadBalancerClass`), never as whatever the in-tree provider makes of an
  annotation that went missing; with `expose: cluster` no LoadBalancer Service at all.

Sources: Istio 1.30.3 (pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go: `spec.infrastructure.
parametersRef` to a ConfigMap of strategic-merge overlays, keys deployment/service/...; the `networking.istio.io/
service-type` annotation; RequestAuthentication, AuthorizationPolicy and Telemetry with `targetRefs` to a Gateway,
pilot/pkg/model/policyattachment.go), AWS Load Balancer Controller v3.5.0 docs/guide/service/nlb.md (the
`service.k8s.aws/nlb` class; the in-tree provider ignores a Service with a class it does not own), Kubernetes
admissionregistration.k8s.io/v1 (GA since 1.30). CEL here is standard CEL plus the strings library Kubernetes
ships (`lowerAscii`); the tests evaluate every expression against our own objects and against the captures it
must refuse.
"""

from __future__ import annotations

import json
from typing import Any

from llm_eks.manifests.gateway.common import meta
from llm_eks.manifests.gateway.props import MODEL_HEADER, GatewayProps
from llm_eks.manifests.source import builds_objects

GATEWAY_API = "gateway.networking.k8s.io"
# The AWS Load Balancer Controller's class: set, the in-tree cloud provider leaves the Service alone.
NLB_CLASS = "service.k8s.aws/nlb"
SCHEME_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-scheme"
ROUTES_POLICY = "llm-eks-gateway-routes"
SERVICES_POLICY = "llm-eks-gateway-services"
# Every route kind of Gateway API v1.6: the listener admits only HTTPRoutes, the policy refuses the others outright.
ROUTE_RESOURCES = ("httproutes", "grpcroutes", "tlsroutes", "tcproutes", "udproutes")


def options_name(p: GatewayProps) -> str:
    return f"{p.name}-options"


@builds_objects
def gateway_options(p: GatewayProps) -> dict[str, Any]:
    """The ConfigMap the Gateway's `infrastructure.parametersRef` names: istiod strategic-merges its `service` entry
    over the Service it generates, so the Service is created with the NLB class and internal scheme (a class can be
    set only when a LoadBalancer Service is created). A missing ConfigMap leaves the Gateway unprogrammed: closed."""
    overlay = {
        "metadata": {
            "annotations": {
                "service.beta.kubernetes.io/aws-load-balancer-type": "external",
                "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
                SCHEME_ANNOTATION: "internal",
            }
        },
        "spec": {"loadBalancerClass": NLB_CLASS},
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(options_name(p), p.namespace),
        # Istio reads each key as YAML; JSON is YAML.
        "data": {"service": json.dumps(overlay, sort_keys=True)},
    }


@builds_objects
def jwt_policies(p: GatewayProps) -> list[dict[str, Any]]:
    """With `auth`: RequestAuthentication validates any JWT a request carries (and rejects a bad one), and the
    AuthorizationPolicy admits only requests with a verified one (a request without a token would otherwise pass
    with no identity). Both attach to the Gateway by `targetRefs`, so they bind its Envoy pods only."""
    if p.auth is None:
        return []
    target = [{"group": GATEWAY_API, "kind": "Gateway", "name": p.name}]
    return [
        {
            "apiVersion": "security.istio.io/v1",
            "kind": "RequestAuthentication",
            "metadata": meta(f"{p.name}-jwt", p.namespace),
            "spec": {
                "targetRefs": target,
                "jwtRules": [
                    {
                        "issuer": p.auth.issuer,
                        "jwksUri": p.auth.jwks_uri,
                        "audiences": list(p.auth.audiences),
                        # The token is the gateway's credential: not forwarded to the model servers.
                        "forwardOriginalToken": False,
                    }
                ],
            },
        },
        {
            "apiVersion": "security.istio.io/v1",
            "kind": "AuthorizationPolicy",
            "metadata": meta(f"{p.name}-require-jwt", p.namespace),
            "spec": {
                "targetRefs": target,
                "action": "ALLOW",
                "rules": [{"from": [{"source": {"requestPrincipals": ["*"]}}]}],
            },
        },
    ]


@builds_objects
def access_log(p: GatewayProps) -> dict[str, Any]:
    """Envoy's access log for every request through the gateway, on its pods' stdout (Istio's built-in `envoy`
    provider), where the cluster's log collection picks it up."""
    return {
        "apiVersion": "telemetry.istio.io/v1",
        "kind": "Telemetry",
        "metadata": meta(f"{p.name}-access-log", p.namespace),
        "spec": {
            "targetRefs": [{"group": GATEWAY_API, "kind": "Gateway", "name": p.name}],
            "accessLogging": [{"providers": [{"name": "envoy"}]}],
        },
    }


def _cel(value: Any) -> str:
    """A CEL literal of strings, lists and maps: JSON's escapes are CEL's for these."""
    return json.dumps(value, sort_keys=True)


@builds_objects
def route_policy(p: GatewayProps) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy on routes, and its binding (Deny)."""
    allowed: dict[str, list[str]] = {}
    for r in p.routes:
        if r.routed:
            allowed.setdefault(r.namespace, []).extend(r.model_names)
    header = MODEL_HEADER.lower()
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": ROUTES_POLICY, "labels": meta(ROUTES_POLICY, "")["labels"]},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [GATEWAY_API],
                        "apiVersions": ["*"],
                        "resources": list(ROUTE_RESOURCES),
                        "operations": ["CREATE", "UPDATE"],
                    }
                ]
            },
            "variables": [
                {
                    "name": "attached",
                    # A parentRef's kind defaults to Gateway and its namespace to the route's own.
                    "expression": (
                        "has(object.spec.parentRefs) && object.spec.parentRefs.exists(r, "
                        "(!has(r.kind) || r.kind == 'Gateway') && r.name == " + _cel(p.name) + " && "
                        "(has(r.namespace) ? r.namespace : object.metadata.namespace) == " + _cel(p.namespace) + ")"
                    ),
                },
                {"name": "allowed", "expression": _cel(allowed)},
            ],
            "validations": [
                {
                    "expression": "!variables.attached || request.kind.kind == 'HTTPRoute'",
                    "message": f"only HTTPRoutes may attach to the inference gateway {p.namespace}/{p.name}",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!variables.attached || object.metadata.namespace in variables.allowed",
                    "message": (
                        f"only the workloads' namespaces may attach routes to the inference gateway "
                        f"{p.namespace}/{p.name}"
                    ),
                    "reason": "Forbidden",
                },
                {
                    "expression": (
                        "!variables.attached || (object.metadata.namespace in variables.allowed && "
                        "has(object.spec.rules) && object.spec.rules.all(rule, "
                        "has(rule.matches) && rule.matches.all(m, has(m.headers) && m.headers.exists(h, "
                        f"h.name.lowerAscii() == {_cel(header)} && (!has(h.type) || h.type == 'Exact') && "
                        "h.value in variables.allowed[object.metadata.namespace]))))"
                    ),
                    "message": (
                        f"a route attached to the inference gateway must match, in every rule and every match, the "
                        f"{MODEL_HEADER} header exactly, with a model name its own namespace serves"
                    ),
                    "reason": "Forbidden",
                },
            ],
        },
    }
    return [policy, _binding(ROUTES_POLICY)]


@builds_objects
def service_policy(p: GatewayProps) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy on Services in the gateway's namespace, and its binding (Deny)."""
    if p.load_balanced:
        rule = (
            "!has(object.spec.type) || object.spec.type != 'LoadBalancer' || "
            f"(has(object.spec.loadBalancerClass) && object.spec.loadBalancerClass == {_cel(NLB_CLASS)} && "
            f"has(object.metadata.annotations) && {_cel(SCHEME_ANNOTATION)} in object.metadata.annotations && "
            f"object.metadata.annotations[{_cel(SCHEME_ANNOTATION)}] == 'internal')"
        )
        message = (
            f"a LoadBalancer Service in {p.namespace} must be an internal NLB of the AWS Load Balancer Controller "
            f"(loadBalancerClass {NLB_CLASS}, {SCHEME_ANNOTATION}: internal)"
        )
    else:
        rule = "!has(object.spec.type) || object.spec.type != 'LoadBalancer'"
        message = f"the inference gateway is exposed in-cluster only: no LoadBalancer Service in {p.namespace}"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": SERVICES_POLICY, "labels": meta(SERVICES_POLICY, "")["labels"]},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": p.namespace}},
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["services"],
                        "operations": ["CREATE", "UPDATE"],
                    }
                ],
            },
            "validations": [{"expression": rule, "message": message, "reason": "Forbidden"}],
        },
    }
    return [policy, _binding(SERVICES_POLICY)]


@builds_objects
def _binding(policy: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy, "labels": meta(policy, "")["labels"]},
        "spec": {"policyName": policy, "validationActions": ["Deny"]},
    }
