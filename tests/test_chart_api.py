"""The charts' public API for cdk8s users: the typed cdk8s-plus attributes of the vLLM, Ray Serve, gateway and route
charts (snapshots, so a release that removes or retypes one is seen), the cdk8s-plus objects synthesizing exactly the
reviewed dicts for every vLLM chart shape and every chart of every environment, the JSON patches that make them so
(pinned: a cdk8s-plus upgrade that renders differently shows here), and the plain ApiObjects left, each with its
reason."""

from __future__ import annotations

import dataclasses
import json
import re
import tarfile
import types
import typing
from pathlib import Path
from typing import Any

import cdk8s
import cdk8s_plus_35 as kplus
import pytest

from llm_eks.manifests import plus
from llm_eks.manifests.gateway import chart as gateway_chart
from llm_eks.manifests.gateway.chart import GatewayChart, ModelRouteChart
from llm_eks.manifests.ray_serve import chart as ray_chart
from llm_eks.manifests.ray_serve.chart import RayServeChart
from llm_eks.manifests.vllm import VllmChart, VllmProps
from llm_eks.manifests.vllm.chart import PUBLIC_ATTRIBUTES
from llm_eks.manifests.vllm.disaggregated import Disaggregation
from llm_eks.manifests.weights_staging import BUCKET_ENV
from tests.test_vllm_chart import base_props

# The snapshot. Removing an attribute or changing its type breaks a user's extended chart: only in a release that may
# break (0.x: a minor), announced in the changelog; then update this.
PUBLIC_API = (
    ("props", "VllmProps"),
    ("service_account", "kplus.ServiceAccount"),
    ("deployment", "kplus.Deployment | None"),
    ("floor_deployment", "kplus.Deployment | None"),
    ("leader_worker_set", "cdk8s.ApiObject | None"),
    ("floor_leader_worker_set", "cdk8s.ApiObject | None"),
    ("prefill_deployment", "kplus.Deployment | None"),
    ("prefill_leader_worker_set", "cdk8s.ApiObject | None"),
    ("prefill_service", "kplus.Service | None"),
    ("service", "kplus.Service"),
    ("pod_disruption_budget", "cdk8s.ApiObject"),
    ("compile_cache_job", "kplus.Job | None"),
    ("compile_cache_service_account", "kplus.ServiceAccount | None"),
    ("selector", "dict[str, str]"),
)

# The other extensible charts' snapshots (manifests/ray_serve/chart.py, manifests/gateway/chart.py), under the
# same rule.
RAY_SERVE_PUBLIC_API = (
    ("props", "RayServeProps"),
    ("serve_config", "dict[str, Any]"),
    ("service_account", "kplus.ServiceAccount"),
    ("ray_service", "cdk8s.ApiObject"),
    ("selector", "dict[str, str]"),
)
GATEWAY_PUBLIC_API = (
    ("props", "GatewayProps"),
    ("dashboard", "kplus.ConfigMap"),
)
ROUTE_PUBLIC_API = (
    ("props", "GatewayProps"),
    ("route", "ModelRoute"),
    ("picker_deployment", "kplus.Deployment | None"),
    ("picker_service", "kplus.Service | None"),
    ("picker_config", "kplus.ConfigMap | None"),
    ("picker_service_account", "kplus.ServiceAccount | None"),
)

# Plain ApiObjects the chart still builds, by kind, each with the reason.
RAW_OBJECTS = {
    "SecretProviderClass": "a custom resource (secrets-store.csi.x-k8s.io/v1): no cdk8s-plus class",
    "LeaderWorkerSet": "a custom resource (leaderworkerset.x-k8s.io/v1), a dict validated against the vendored CRD "
    "(tests/fixtures/upstream/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml, test_multi_node.py)",
    "PodDisruptionBudget": "cdk8s-plus-35 2.0.5 has no PodDisruptionBudget class",
    "Ingress": "the internal ALB's Ingress is mostly controller annotations and a named backend port, which "
    "cdk8s-plus's Ingress (numeric service ports) cannot express: a dict until a user needs it extended",
    "Role": "the P/D sidecar's read access to InferencePools (a custom resource group): cdk8s-plus's Role.allow "
    "takes its own IApiResource objects; a dict, reviewed as one",
    "RoleBinding": "binds that Role to the workload's ServiceAccount: a dict beside its Role",
}


# Plain ApiObjects an environment adds to its vLLM chart (llm_eks.infra.charts), each with the reason. Its
# ServiceAccounts, ConfigMaps and Jobs are cdk8s-plus objects (serving_objects.add_objects on a cdk8s-plus chart).
ENVIRONMENT_RAW_OBJECTS = {
    "NetworkPolicy": "the namespace's default-deny and one allow per flow, built with the add-on namespaces' policies "
    "(network_policies.py) and read by the tests' policy evaluator (tests/netpol.py); cdk8s-plus renders rules from "
    "its own peer objects, and a rule patched in would sit where a user's added rule renders",
    "Role": "what `llm-eks verify` and the load Job may read and create (manifests/verifier): dicts the admission "
    "policy's CEL names by rule",
    "RoleBinding": "binds those Roles to the verify and load groups: dicts beside their Roles",
    "ValidatingAdmissionPolicy": "no cdk8s-plus class (admissionregistration.k8s.io/v1)",
    "ValidatingAdmissionPolicyBinding": "no cdk8s-plus class (admissionregistration.k8s.io/v1)",
}
# Every plain ApiObject of a built-in kind left in any chart of any cdk.json environment, each with the reason.
# Custom resources (every other kind) are dicts validated against the vendored CRDs (tests/kube_schema.py,
# tests/fixtures/upstream/crds): cdk8s-plus has no class for them, and classes generated by `cdk8s import` would add
# a jsii round trip per field to a synth already held to its budget.
BUILT_IN_RAW_OBJECTS = {
    "NetworkPolicy": ENVIRONMENT_RAW_OBJECTS["NetworkPolicy"],
    "Role": "RBAC rules for `llm-eks verify`, the load Job, the endpoint picker and the P/D sidecar, including custom "
    "resource groups (InferencePools, leases by name) that cdk8s-plus's Role.allow takes only as its own "
    "IApiResource objects, and that the load admission policy's CEL names by rule: dicts, reviewed as such",
    "RoleBinding": "binds each of those Roles to its ServiceAccount or group: dicts beside their Roles",
    "PodDisruptionBudget": RAW_OBJECTS["PodDisruptionBudget"],
    "ValidatingAdmissionPolicy": ENVIRONMENT_RAW_OBJECTS["ValidatingAdmissionPolicy"],
    "ValidatingAdmissionPolicyBinding": ENVIRONMENT_RAW_OBJECTS["ValidatingAdmissionPolicyBinding"],
    "Namespace": "the gateway chart's namespace: on a chart with a namespace, cdk8s writes that namespace into a plain "
    "Namespace's metadata and cdk8s-plus does not (plus.namespace), so moving it would change the synthesized text; "
    "the workloads' namespaces are cdk8s-plus Namespaces",
}
# The kinds cdk8s-plus builds (manifests/plus BUILDERS, and Namespace through plus.namespace): never plain.
STANDARD_KINDS = {"Deployment", "DaemonSet", "Service", "ServiceAccount", "ConfigMap", "Job"}
OIDC_ISSUER = "https://oidc.eks.eu-west-1.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF"


def _disaggregation() -> Disaggregation:
    return Disaggregation(
        prefill_replicas=1,
        prefill_kv_transfer_config='{"kv_connector":"NixlConnector","kv_role":"kv_producer"}',
        decode_kv_transfer_config='{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}',
        pool="vllm-x",
    )


# Every shape of the chart: one node per replica (with ingress, Hub token), floor, API key, staged weights with a
# compile cache, prefill/decode, a replica spanning nodes, a namespace the chart creates.
SHAPES: dict[str, dict[str, Any]] = {
    "default": {},
    "floor": {"floor_replicas": 2, "floor_pools": ("gpu-l40s-floor", "gpu-l40s"), "pools": ("gpu-l40s",)},
    "api-key": {"api_key_secret": "llm-eks/test/api-key", "create_namespace": True},
    "compile-cache": {
        "staged_weights": ("models/acme/tiny-llm/main/", "0123456789"),
        "weights": "s3",
        "model": f"s3://$({BUCKET_ENV})/models/acme/tiny-llm/main/",
        "compile_cache": "compile-cache/vllm-test/g6e/",
    },
    "prefill-decode": {"ingress": None, "disaggregation": _disaggregation()},
    "multi-node": {"nodes_per_replica": 2, "pipeline_parallel_size": 2, "ingress": None},
    # Data-parallel ranks over two nodes, each pool a LeaderWorkerSet.
    "multi-node-prefill-decode": {
        "nodes_per_replica": 2,
        "data_parallel_size": 2,
        "expert_parallel": True,
        "ingress": None,
        "disaggregation": _disaggregation(),
    },
}


def _chart(shape: str) -> VllmChart:
    return VllmChart(cdk8s.App(), "vllm", base_props(**SHAPES[shape]))


@pytest.fixture(scope="module")
def charts() -> dict[str, VllmChart]:
    return {shape: _chart(shape) for shape in SHAPES}


def test_the_public_attributes_are_the_snapshot() -> None:
    assert PUBLIC_ATTRIBUTES == PUBLIC_API
    # Each is declared on the class with that type, so mypy holds a user's code to it.
    declared = {k: v for k, v in VllmChart.__annotations__.items() if not k.startswith("_")}
    assert declared == dict(PUBLIC_API)


def test_every_public_attribute_holds_its_type_in_every_shape(charts: dict[str, VllmChart]) -> None:
    hints = typing.get_type_hints(VllmChart, {"kplus": kplus, "cdk8s": cdk8s, "VllmProps": VllmProps})
    for shape, chart in charts.items():
        for name, _ in PUBLIC_API:
            value = getattr(chart, name)
            hint = hints[name]
            expected = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
            assert isinstance(value, tuple(typing.get_origin(t) or t for t in expected)), (shape, name, value)
    # None exactly where the shape has no such object.
    assert charts["default"].floor_deployment is None and charts["floor"].floor_deployment is not None
    assert charts["multi-node"].deployment is None and charts["multi-node"].leader_worker_set is not None
    assert charts["prefill-decode"].prefill_deployment is not None and charts["prefill-decode"].prefill_service
    lws = charts["multi-node-prefill-decode"]
    assert lws.prefill_deployment is None and lws.prefill_leader_worker_set is not None and lws.prefill_service
    assert charts["prefill-decode"].prefill_leader_worker_set is None
    assert charts["compile-cache"].compile_cache_job is not None and charts["default"].compile_cache_job is None


def _objects(chart: cdk8s.Chart) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in chart.to_json()}


@pytest.mark.parametrize("shape", SHAPES)
def test_each_cdk8s_plus_object_synthesizes_the_reviewed_dict_byte_for_byte(
    charts: dict[str, VllmChart], shape: str
) -> None:
    chart = charts[shape]
    synthesized = _objects(chart)
    assert chart._reviewed
    for key, reviewed in chart._reviewed.items():
        # The same text, key order included (the golden files and the CloudFormation manifest property).
        assert json.dumps(synthesized[key]) == json.dumps(reviewed), key
    # Nothing cdk8s-plus adds of its own reaches a pod template or a selector.
    for obj in synthesized.values():
        assert "cdk8s.io/metadata.addr" not in json.dumps(obj)


def test_the_patches_are_the_ones_reviewed(charts: dict[str, VllmChart]) -> None:
    """What cdk8s-plus-35 2.0.5 renders otherwise for the serving Deployment (manifests/plus says why for each):
    its defaults out, what it has no API for in. A cdk8s-plus upgrade that changes its rendering changes this."""
    pod = "/spec/template/spec"
    assert charts["default"].reconciled["deployment"] == [
        "remove /spec/minReadySeconds",
        "remove /spec/revisionHistoryLimit",
        "remove /spec/template/metadata/labels/cdk8s.io~1metadata.addr",
        f"remove {pod}/dnsPolicy",
        f"remove {pod}/hostNetwork",
        f"remove {pod}/restartPolicy",
        f"remove {pod}/setHostnameAsFQDN",
        f"remove {pod}/shareProcessNamespace",
        f"remove {pod}/securityContext/fsGroupChangePolicy",
        f"add {pod}/securityContext/seccompProfile",
        f"add {pod}/containers/0/resources",
        f"add {pod}/containers/0/startupProbe",
        f"add {pod}/containers/0/readinessProbe",
        f"add {pod}/containers/0/livenessProbe",
        f"add {pod}/containers/0/lifecycle",
        f"remove {pod}/containers/0/securityContext/privileged",
        f"remove {pod}/containers/0/securityContext/readOnlyRootFilesystem",
        f"remove {pod}/containers/0/securityContext/runAsNonRoot",
        f"add {pod}/containers/0/securityContext/capabilities",
        f"add {pod}/volumes/0/emptyDir/sizeLimit",
        f"add {pod}/volumes/1/emptyDir/sizeLimit",
        f"add {pod}/nodeSelector",
        f"add {pod}/tolerations",
        f"add {pod}/topologySpreadConstraints",
    ]
    # cdk8s-plus renders an empty externalIPs, and takes a numeric targetPort only.
    assert charts["default"].reconciled["service"] == ["remove /spec/externalIPs", "add /spec/ports/0/targetPort"]
    assert charts["default"].reconciled["service-account"] == []


def test_every_plain_api_object_left_is_listed_with_its_reason(charts: dict[str, VllmChart]) -> None:
    raw = {
        obj.kind
        for chart in charts.values()
        for obj in chart.node.find_all()
        if isinstance(obj, cdk8s.ApiObject) and not isinstance(obj.node.scope, kplus.Resource)
    }
    assert raw == set(RAW_OBJECTS)
    # Deployments, Services, ServiceAccounts and the Job are never among them.
    assert not raw & {"Deployment", "Service", "ServiceAccount", "Job", "ConfigMap"}


@pytest.fixture(scope="module")
def every_environments_charts() -> dict[str, list[cdk8s.Chart]]:
    """Every chart of each environment of the default cdk.json, as `llm-eks manifests` builds them."""
    from llm_eks.config import load_environments
    from llm_eks.config.plans import plan_workloads
    from llm_eks.infra.workloads import build_workloads
    from tests.chart_helpers import charts_of
    from tests.conftest import CDK_JSON

    out = {}
    for name, config in load_environments(CDK_JSON["context"]).items():
        workloads = build_workloads(config, plan_workloads(config), region=config.region)
        charts = charts_of(
            config, workloads, weights_bucket="weights", cluster_oidc_issuer=OIDC_ISSUER, region="eu-west-1"
        )
        out[name] = [c.chart for c in charts]
    return out


@pytest.fixture(scope="module")
def environment_charts(every_environments_charts: dict[str, list[cdk8s.Chart]]) -> dict[str, VllmChart]:
    """The vLLM chart of each environment."""
    out = {}
    for name, charts in every_environments_charts.items():
        (out[name],) = [c for c in charts if isinstance(c, VllmChart)]
    return out


def _plain_objects(chart: cdk8s.Chart) -> list[cdk8s.ApiObject]:
    """The chart's ApiObjects that no cdk8s-plus object holds."""
    return [
        obj
        for obj in chart.node.find_all()
        if isinstance(obj, cdk8s.ApiObject) and not isinstance(obj.node.scope, kplus.Resource)
    ]


def test_every_plain_object_of_every_environment_is_listed_with_its_reason(
    every_environments_charts: dict[str, list[cdk8s.Chart]],
) -> None:
    from tests.kube_schema import _CORE_GROUPS, validation_errors

    built_in: dict[str, set[str]] = {}
    custom: dict[str, set[str]] = {}
    errors = []
    for charts in every_environments_charts.values():
        for chart in charts:
            for obj in _plain_objects(chart):
                core = obj.api_version.rpartition("/")[0] in _CORE_GROUPS
                (built_in if core else custom).setdefault(obj.kind, set()).add(type(chart).__name__)
                if not core:
                    errors += validation_errors(obj.to_json())
    # Exactly the listed built-in kinds: a new one needs its reason here, a moved one leaves the list.
    assert set(built_in) == set(BUILT_IN_RAW_OBJECTS), built_in
    assert built_in["Namespace"] == {"GatewayChart"}
    assert not set(built_in) & STANDARD_KINDS
    # Every custom resource left as a dict is valid against its vendored CRD.
    assert custom and not errors, errors


def test_every_cdk8s_plus_object_of_every_environment_synthesizes_its_reviewed_dict(
    every_environments_charts: dict[str, list[cdk8s.Chart]],
) -> None:
    kinds: set[str] = set()
    for charts in every_environments_charts.values():
        for chart in charts:
            if not isinstance(chart, plus.PlusChart):
                # Charts of custom resources only (node pools, autoscaling, the DCGM monitor).
                assert not [o for o in _plain_objects(chart) if o.kind in STANDARD_KINDS], type(chart).__name__
                continue
            synthesized = _objects(chart)
            for key, reviewed in chart._reviewed.items():
                assert json.dumps(synthesized[key]) == json.dumps(reviewed), (type(chart).__name__, key)
                kinds.add(key[0])
            assert "cdk8s.io/metadata.addr" not in json.dumps(list(synthesized.values()))
    assert kinds == {*STANDARD_KINDS - {"DaemonSet"}, "Namespace"}


def _holds_its_types(chart: cdk8s.Chart, api: tuple[tuple[str, str], ...], names: dict[str, Any]) -> None:
    hints = typing.get_type_hints(type(chart), {"kplus": kplus, "cdk8s": cdk8s, **names})
    for name, _ in api:
        hint = hints[name]
        expected = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        assert isinstance(getattr(chart, name), tuple(typing.get_origin(t) or t for t in expected)), name


def test_the_ray_serve_gateway_and_route_charts_public_attributes_are_the_snapshots(
    every_environments_charts: dict[str, list[cdk8s.Chart]],
) -> None:
    from llm_eks.manifests.gateway.props import GatewayProps, ModelRoute
    from llm_eks.manifests.ray_serve.props import RayServeProps

    names = {"RayServeProps": RayServeProps, "GatewayProps": GatewayProps, "ModelRoute": ModelRoute, "Any": Any}
    for cls, declared, snapshot in (
        (RayServeChart, ray_chart.PUBLIC_ATTRIBUTES, RAY_SERVE_PUBLIC_API),
        (GatewayChart, gateway_chart.GATEWAY_PUBLIC_ATTRIBUTES, GATEWAY_PUBLIC_API),
        (ModelRouteChart, gateway_chart.ROUTE_PUBLIC_ATTRIBUTES, ROUTE_PUBLIC_API),
    ):
        assert declared == snapshot
        assert {k: v for k, v in cls.__annotations__.items() if not k.startswith("_")} == dict(snapshot), cls
    staging = every_environments_charts["staging"]
    (ray,) = [c for c in staging if isinstance(c, RayServeChart)]
    (gateway,) = [c for c in staging if isinstance(c, GatewayChart)]
    routes = [c for c in staging if isinstance(c, ModelRouteChart)]
    _holds_its_types(ray, RAY_SERVE_PUBLIC_API, names)
    _holds_its_types(gateway, GATEWAY_PUBLIC_API, names)
    for route in routes:
        _holds_its_types(route, ROUTE_PUBLIC_API, names)
    # A pool's route has its picker; a Ray Serve route (a Backend) has none.
    assert {r.route.name: r.picker_deployment is not None for r in routes} == {
        r.route.name: r.route.name != ray.props.name for r in routes
    }
    assert ray.service_account.name == ray.props.name
    assert gateway.dashboard.name.startswith(gateway.props.name)


def test_an_environments_plain_objects_are_listed_with_their_reasons(environment_charts: dict[str, VllmChart]) -> None:
    raw: dict[str, set[str]] = {}
    for name, chart in environment_charts.items():
        for obj in chart.node.find_all():
            if isinstance(obj, cdk8s.ApiObject) and not isinstance(obj.node.scope, kplus.Resource):
                raw.setdefault(obj.kind, set()).add(name)
    assert set(raw) <= {*RAW_OBJECTS, *ENVIRONMENT_RAW_OBJECTS}, raw
    assert set(ENVIRONMENT_RAW_OBJECTS) <= set(raw)
    # and every cdk8s-plus object of an environment synthesizes its reviewed dict
    for chart in environment_charts.values():
        synthesized = _objects(chart)
        for key, reviewed in chart._reviewed.items():
            assert json.dumps(synthesized[key]) == json.dumps(reviewed), key
        assert {k for k, _ in chart._reviewed} >= {"Deployment", "Service", "ServiceAccount"}


def test_a_user_extends_the_deployment_and_keeps_every_reviewed_field(charts: dict[str, VllmChart]) -> None:
    plain = _objects(charts["prefill-decode"])[("Deployment", "vllm-llama-3-1-8b")]
    chart = _chart("prefill-decode")
    deployment = chart.deployment
    assert deployment is not None
    extra = kplus.Volume.from_empty_dir(chart, "extra", "extra")
    sidecar = deployment.add_container(name="extra", image="busybox:1.37", port_number=9000)
    sidecar.mount("/extra", extra)
    deployment.containers[0].env.add_variable("EXTRA", kplus.EnvValue.from_value("1"))
    extended = _objects(chart)[("Deployment", "vllm-llama-3-1-8b")]
    spec, before = extended["spec"]["template"]["spec"], plain["spec"]["template"]["spec"]
    # The user's container and volume are there; ours are as they were (the sidecar's projected token volume,
    # appended by a patch, too), and the selector and pod labels are untouched.
    assert [c["name"] for c in spec["containers"]] == ["vllm", "extra"]
    vllm = dict(spec["containers"][0])
    assert vllm.pop("env")[-1] == {"name": "EXTRA", "value": "1"}
    assert vllm == {k: v for k, v in before["containers"][0].items() if k != "env"}
    assert spec["containers"][0]["env"][:-1] == before["containers"][0]["env"]
    assert [v["name"] for v in spec["volumes"]] == ["shm", "cache", "hf-token", "extra", "sidecar-token"]
    assert [v for v in spec["volumes"] if v["name"] != "extra"] == before["volumes"]
    assert spec["initContainers"] == before["initContainers"]
    assert extended["spec"]["selector"] == plain["spec"]["selector"]
    assert extended["spec"]["template"]["metadata"] == plain["spec"]["template"]["metadata"]
    assert {k: v for k, v in spec.items() if k not in ("containers", "volumes")} == {
        k: v for k, v in before.items() if k not in ("containers", "volumes")
    }


def _bundled_converters() -> str:
    """cdk8s-plus-35's imported k8s converters (lib/imports/k8s.js in the jsii assembly the wheel ships)."""
    (bundle,) = (Path(kplus.__file__).parent / "_jsii").glob("*.jsii.tgz")
    with tarfile.open(bundle) as tar:
        member = tar.extractfile("package/lib/imports/k8s.js")
        assert member is not None
        return member.read().decode()


def test_the_patch_key_renames_are_every_one_cdk8s_plus_converts() -> None:
    """A patch on a cdk8s-plus object names props keys (manifests/plus): every Kubernetes key whose props key
    differs in the bundled converters is renamed, so a patch never lands on a key the conversion drops."""
    pairs = re.findall(r"^\s+'([A-Za-z0-9]+)': [^,\n]*?obj\.([A-Za-z0-9]+)", _bundled_converters(), re.MULTILINE)
    assert {k: p for k, p in pairs if k != p} == plus.PROPS_KEYS


def test_in_order_keeps_reviewed_keys_first_and_a_users_after() -> None:
    rendered = {"b": 1, "x": {"d": 2, "c": 3}, "a": [{"z": 1, "y": 2}, {"q": 1}], "user": 0}
    reviewed = {"a": [{"y": 0, "z": 0}], "x": {"c": 0, "d": 0}, "b": 0}
    ordered = plus.in_order(rendered, reviewed)
    assert json.dumps(ordered) == json.dumps(
        {"a": [{"y": 2, "z": 1}, {"q": 1}], "x": {"c": 3, "d": 2}, "b": 1, "user": 0}
    )


def test_a_props_change_that_a_shape_needs_is_still_validated() -> None:
    # The chart validates its props before building anything through cdk8s-plus (one line, no jsii traceback).
    with pytest.raises(ValueError, match="is not allowed"):
        VllmChart(cdk8s.App(), "vllm", dataclasses.replace(base_props(), name="Not_A_Name"))


def test_the_neuron_monitors_daemon_set_and_service_synthesize_their_reviewed_dicts() -> None:
    """No cdk.json environment runs on Neuron: its chart's cdk8s-plus objects are checked here."""
    from llm_eks.manifests.neuron_monitor import NeuronMonitorChart

    chart = NeuronMonitorChart(cdk8s.App(), "neuron", image="neuron-monitor:1", namespace="m", scrape_interval="15s")
    synthesized = _objects(chart)
    assert {k for k, _ in chart._reviewed} == {"DaemonSet", "Service"}
    for key, reviewed in chart._reviewed.items():
        assert json.dumps(synthesized[key]) == json.dumps(reviewed), key
    assert [o.kind for o in _plain_objects(chart)] == ["ServiceMonitor"]
