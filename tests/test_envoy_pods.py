"""The Envoy pods the scheduling check places: Envoy, Envoy Gateway's shutdown manager and, while an AI route names
the Gateway, the AI Gateway's external processor with the resources its GatewayConfig gives it."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from llm_eks.manifests.checks import catalog_instance_resources, check_objects
from llm_eks.manifests.checks.objects import pod_requests, pod_templates
from llm_eks.manifests.gateway.props import GatewayProps
from llm_eks.manifests.gateway.proxy import envoy_proxy, gateway, gateway_config
from tests.conftest import Synthesized
from tests.test_checks import daemonset, node_pool

MIB = 2**20
ENVOY = {"name": "envoy", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}}
SHUTDOWN_MANAGER = {"name": "shutdown-manager", "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}}
EXTPROC = {
    "name": "ai-gateway-extproc",
    "restartPolicy": "Always",
    "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
}
PROPS = GatewayProps(routes=(), tenants=(), expose="cluster", node_selector={"llm-eks.io/node-pool": "system"})


def _route(*parent_refs: dict[str, str]) -> dict[str, Any]:
    """An AIGatewayRoute of team-a's, as a user's YAML would write it: only its parents matter here."""
    return {
        "apiVersion": "aigateway.envoyproxy.io/v1beta1",
        "kind": "AIGatewayRoute",
        "metadata": {"name": "chat", "namespace": "team-a"},
        "spec": {"parentRefs": list(parent_refs)},
    }


GATEWAY_OBJECTS = [envoy_proxy(PROPS), gateway(PROPS, ["team-a"]), gateway_config(PROPS)]
ROUTE = _route({"name": "inference", "namespace": "inference-gateway"})


def _envoy_spec(objects: list[dict[str, Any]]) -> Any:
    (template,) = [t for t in pod_templates(objects) if t.obj["kind"] == "EnvoyProxy"]
    assert template.part == "envoy"
    return template.spec


def test_the_staging_envoy_pod_counts_the_shutdown_manager_and_the_external_processor(
    synthesized: Synthesized,
) -> None:
    """Staging routes models through the AI Gateway: its Envoy pods request Envoy's 500m/512Mi, the shutdown
    manager's 10m/32Mi (Envoy Gateway's fixed default) and the processor's 250m/256Mi (our GatewayConfig)."""
    assert synthesized.error is None, synthesized.error
    spec = _envoy_spec(synthesized.objects("staging"))
    assert spec["containers"] == [ENVOY, SHUTDOWN_MANAGER]
    assert spec["initContainers"] == [EXTPROC]
    assert pod_requests(spec) == {"cpu": Fraction(760, 1000), "memory": Fraction(800 * MIB)}


def test_the_external_processor_is_counted_only_while_an_ai_route_names_the_gateway() -> None:
    """The AI Gateway's webhook adds its processor only to the pods of a Gateway some AIGatewayRoute (or MCPRoute)
    names as a parent, in the route's namespace unless the reference names another."""
    assert "initContainers" not in _envoy_spec(GATEWAY_OBJECTS)
    assert "initContainers" not in _envoy_spec([*GATEWAY_OBJECTS, _route({"name": "inference"})])
    assert "initContainers" not in _envoy_spec([*GATEWAY_OBJECTS, _route({"name": "other", "namespace": "x"})])
    assert _envoy_spec([*GATEWAY_OBJECTS, ROUTE])["initContainers"] == [EXTPROC]
    # The EnvoyProxy's own init containers run first; the webhook appends the processor after them.
    proxy = envoy_proxy(PROPS)
    setup = {"name": "setup", "resources": {"requests": {"cpu": "1"}}}
    proxy["spec"]["provider"]["kubernetes"]["envoyDeployment"]["initContainers"] = [setup]
    assert _envoy_spec([proxy, *GATEWAY_OBJECTS[1:], ROUTE])["initContainers"] == [setup, EXTPROC]
    # A Gateway without a GatewayConfig gets a processor with no requests.
    without_config = [o for o in GATEWAY_OBJECTS if o["kind"] != "GatewayConfig"]
    assert _envoy_spec([*without_config, ROUTE])["initContainers"] == [
        {"name": "ai-gateway-extproc", "restartPolicy": "Always", "resources": {}}
    ]


def test_a_pool_that_fits_envoy_alone_but_not_its_sidecars_fails_the_scheduling_check() -> None:
    """m7i.large has 1.93 allocatable cpu; a DaemonSet takes 1.3 of it, leaving 0.63: Envoy with its shutdown manager
    (0.51) fits, Envoy with both sidecars (0.76) does not, and Karpenter would leave those pods Pending."""
    pool = node_pool("system", instance_types=["m7i.large"], taints=[], node_class="default")
    base = [pool, daemonset("agent", "1300m"), *GATEWAY_OBJECTS]
    assert check_objects(base, instance_resources=catalog_instance_resources) == []
    assert [str(f) for f in check_objects([*base, ROUTE], instance_resources=catalog_instance_resources)] == [
        "[SCHEDULING] EnvoyProxy/inference-gateway/inference: envoy: no NodePool can run this pod (system: needs 0.76 "
        "cpu plus 1.3 cpu for DaemonSets but m7i.large has allocatable 1.93); Karpenter would leave it Pending. Fix: "
        "lower the pod's cpu request to at most 0.63 cpu or allow a larger instance type in NodePool system"
    ]


def test_an_envoy_proxy_of_a_gateway_class_makes_one_envoy_pod_per_gateway() -> None:
    """Envoy Gateway runs one Envoy Deployment per Gateway; an EnvoyProxy named by a GatewayClass shapes those of
    every Gateway of the class that names none of its own, and only the routed one gets the processor."""
    gateway_class = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "shared"},
        "spec": {
            "controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
            "parametersRef": {
                "group": "gateway.envoyproxy.io",
                "kind": "EnvoyProxy",
                "name": "inference",
                "namespace": "inference-gateway",
            },
        },
    }
    gateways = [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": name, "namespace": "edge"},
            "spec": {"gatewayClassName": "shared", "listeners": []},
        }
        for name in ("a", "b")
    ]
    objects = [envoy_proxy(PROPS), gateway_class, *gateways, _route({"name": "a", "namespace": "edge"})]
    templates = {t.part: t.spec for t in pod_templates(objects)}
    assert sorted(templates) == ["envoy of Gateway a", "envoy of Gateway b"]
    assert templates["envoy of Gateway a"]["initContainers"] == [
        {"name": "ai-gateway-extproc", "restartPolicy": "Always", "resources": {}}
    ]
    assert "initContainers" not in templates["envoy of Gateway b"]
