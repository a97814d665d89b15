"""The vLLM chart's public API for cdk8s users: its typed cdk8s-plus attributes (a snapshot, so a release that removes
or retypes one is seen), the cdk8s-plus objects synthesizing exactly the reviewed dicts for every chart shape, the
JSON patches that make them so (pinned: a cdk8s-plus upgrade that renders differently shows here), and the plain
ApiObjects left, each with its reason."""

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
    ("prefill_service", "kplus.Service | None"),
    ("service", "kplus.Service"),
    ("pod_disruption_budget", "cdk8s.ApiObject"),
    ("compile_cache_job", "kplus.Job | None"),
    ("compile_cache_service_account", "kplus.ServiceAccount | None"),
    ("selector", "dict[str, str]"),
)

# Plain ApiObjects the chart still builds, by kind, each with the reason.
RAW_OBJECTS = {
    "Namespace": "built by serving_objects.workload_namespace, shared with the Ray Serve chart: it moves to "
    "cdk8s-plus (kplus.Namespace) with that chart",
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
    assert charts["compile-cache"].compile_cache_job is not None and charts["default"].compile_cache_job is None


def _objects(chart: VllmChart) -> dict[tuple[str, str], dict[str, Any]]:
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
def environment_charts() -> dict[str, VllmChart]:
    """The vLLM chart of each environment of the default cdk.json, as `llm-eks manifests` builds it."""
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
        (out[name],) = [c.chart for c in charts if isinstance(c.chart, VllmChart)]
    return out


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
