"""Check 5: behind the environment's gateway, the HTTPRoute the AI Gateway writes from each workload's AIGatewayRoute
(gateway.networking.k8s.io/v1, same name) is Accepted and has its references resolved by the Gateway, matches exactly
the model names the workload serves, and sends them to its InferencePool (inference.networking.k8s.io/v1, vLLM; a
next version's pods are in it) or its Serve Backend (Ray Serve)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_eks.verify.expected import RoutePlan, WorkloadPlan
from llm_eks.verify.observed import EMPTY, Object, WorkloadObjects, status
from llm_eks.verify.rows import Row
from llm_eks.verify.text import count, joined


def _models(route: Object, header_name: str) -> set[str]:
    """The exact values of the model header (`header_name`) the route's rules match."""
    found = set()
    for rule in (route.get("spec") or EMPTY).get("rules") or ():
        for match in rule.get("matches") or ():
            for header in match.get("headers") or ():
                if header.get("name", "").lower() == header_name.lower() and header.get("type", "Exact") == "Exact":
                    found.add(str(header.get("value")))
    return found


def _backends(rules: Any, namespace: str) -> dict[tuple[str, str, str, str], int]:
    """(group, kind, namespace, name) of every backendRef -> its weight (the API server's defaults: core group, kind
    Service, the route's namespace, weight 1)."""
    refs = [ref for rule in rules or () for ref in rule.get("backendRefs") or ()]
    return {
        (
            ref.get("group") or "",
            ref.get("kind") or "Service",
            ref.get("namespace") or namespace,
            str(ref.get("name")),
        ): int(ref.get("weight", 1))
        for ref in refs
    }


def _describe(backends: Mapping[tuple[str, str, str, str], int], namespace: str) -> str:
    """`InferencePool vllm-a` per backend (another namespace's as ns/name), with weights when there are several."""
    shares = len(backends) > 1
    return (
        joined(
            sorted(
                f"{kind} {name if ns == namespace else f'{ns}/{name}'}" + (f" {weight}" if shares else "")
                for (_, kind, ns, name), weight in backends.items()
            )
        )
        or "no backend"
    )


def _as_planned(r: RoutePlan, backends: Mapping[tuple[str, str, str, str], int]) -> bool:
    """The rendered backends (a canary's versions share one pool: no second backend)."""
    return set(backends) == set(_backends(r.rules, r.namespace))


def _parent(route: Object, r: RoutePlan) -> Mapping[str, Any] | None:
    for parent in status(route).get("parents") or ():
        ref = parent.get("parentRef") or EMPTY
        if ref.get("name") == r.gateway and (ref.get("namespace") or r.namespace) == r.gateway_namespace:
            return parent  # type: ignore[no-any-return]
    return None


def _condition(parent: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in parent.get("conditions") or () if c.get("type") == kind), None)


def route_row(w: WorkloadPlan, objs: WorkloadObjects) -> Row | None:
    r = w.route
    if r is None:
        return None
    planned = f"{count(len(r.model_names), 'model')} → {r.backend_kind} {r.backend_name}"
    if objs.route is None:
        return Row("route", w.name, planned, "not found", "breach", f"no HTTPRoute {r.namespace}/{r.name}")
    route = objs.route
    models = _models(route, r.model_header)
    backends = _backends((route.get("spec") or EMPTY).get("rules"), r.namespace)
    kinds = _describe(backends, r.namespace)
    observed_shape = f"{count(len(models), 'model')} → {kinds}"
    parent = _parent(route, r)
    gateway = f"{r.gateway_namespace}/{r.gateway}"
    if parent is None:
        return Row("route", w.name, planned, observed_shape, "breach", f"Gateway {gateway} has not accepted it")
    for kind in ("Accepted", "ResolvedRefs"):
        c = _condition(parent, kind)
        if c is None or c.get("status") != "True":
            why = (c or {}).get("message") or (c or {}).get("reason") or "no such condition"
            state = (c or {}).get("status", "unset")
            return Row("route", w.name, planned, f"{kind} {state}", "breach", f"{gateway}: {why}")
    observed = f"Accepted, ResolvedRefs; {observed_shape}"
    missing, extra = sorted(set(r.model_names) - models), sorted(models - set(r.model_names))
    planned_backends = _as_planned(r, backends)
    if missing or not planned_backends:
        problems = [f"does not route {joined(missing)}"] if missing else []
        if not planned_backends:
            problems.append(f"backends {kinds}, planned {_describe(_backends(r.rules, r.namespace), r.namespace)}")
        return Row("route", w.name, planned, observed, "breach", "; ".join(problems))
    if extra:
        return Row("route", w.name, planned, observed, "drift", f"also routes {joined(extra)}")
    if r.backend_kind == "InferencePool":
        return _pool_row(w, r, objs.inference_pool, planned, observed)
    return Row("route", w.name, planned, observed, "ok")


def _pool_row(w: WorkloadPlan, r: RoutePlan, pool: Object | None, planned: str, observed: str) -> Row:
    if pool is None:
        where = f"{r.pool_namespace or r.namespace}/{r.backend_name}"
        return Row("route", w.name, planned, observed, "breach", f"no InferencePool {where}")
    selector = ((pool.get("spec") or EMPTY).get("selector") or EMPTY).get("matchLabels") or EMPTY
    if dict(selector) != dict(r.pool_selector or {}):
        return Row("route", w.name, planned, observed, "drift", f"the InferencePool selects {dict(selector)}")
    return Row("route", w.name, planned, observed, "ok")
