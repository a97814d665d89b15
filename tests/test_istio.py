"""IstioGateway (istiod as the Gateway API controller, charts base + istiod 1.30.3): the two Helm releases, their
values and order, the istio-system namespace objects; and the vendored Istio CRDs (EnvoyFilter, DestinationRule)
the gateway's objects are validated against.

One module-scoped synth of an InferenceCluster with the construct added the way the other add-ons are.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template

from llm_eks import versions
from llm_eks.constructs.cluster import InferenceCluster, InferenceClusterProps
from llm_eks.constructs.composition import as_icluster
from llm_eks.constructs.istio import IstioGateway, IstioGatewayOptions, IstioGatewayProps, istiod_values
from llm_eks.errors import ConfigError
from llm_eks.infra.review import readable
from llm_eks.manifests import network_policies as netpol
from tests.kube_schema import assert_valid, validation_errors
from tests.netpol import Cluster, External, Pod
from tests.upstream import CRDS, sources

VPC_CIDR = "10.0.0.0/16"
REPOSITORY = "https://istio-release.storage.googleapis.com/charts"
SYSTEM = {"llm-eks.io/node-role": "system"}
GATEWAY_NS = "inference-gateway"


class Synth:
    def __init__(self) -> None:
        stack = cdk.Stack(cdk.App(), "Istio", env=cdk.Environment(account="123456789012", region="us-west-2"))
        platform = InferenceCluster(stack, "Platform", InferenceClusterProps(cluster_name="istio"))
        props = IstioGatewayProps(cluster=as_icluster(platform.cluster), control_plane_cidrs=(VPC_CIDR,))
        self.istio = platform.add_addon(IstioGateway(stack, "Istio", props))
        self.template: dict[str, Any] = Template.from_stack(stack).to_json()
        (self.nodegroup_id,) = [k for k, r in self.template["Resources"].items() if r["Type"] == "AWS::EKS::Nodegroup"]

    def releases(self) -> dict[str, dict[str, Any]]:
        """Helm release name -> properties (Values decoded), with its logical id and DependsOn."""
        out = {}
        for logical_id, resource in self.template["Resources"].items():
            if resource["Type"] == "Custom::AWSCDK-EKS-HelmChart":
                props = dict(resource["Properties"])
                props["Values"] = json.loads(readable(props["Values"]))
                props["LogicalId"] = logical_id
                props["DependsOn"] = resource.get("DependsOn", [])
                out[props["Release"]] = props
        return out

    def namespace_manifest_id(self) -> str:
        (found,) = [
            logical_id
            for logical_id, r in self.template["Resources"].items()
            if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
            and any(o["kind"] == "Namespace" for o in json.loads(readable(r["Properties"]["Manifest"])))
        ]
        return found


@pytest.fixture(scope="module")
def synth() -> Synth:
    return Synth()


@pytest.fixture(scope="module")
def releases(synth: Synth) -> dict[str, dict[str, Any]]:
    return synth.releases()


# -- the Helm releases ----------------------------------------------------------------------------------------------


def test_two_pinned_charts_in_istio_system_base_first(synth: Synth, releases: dict[str, dict[str, Any]]) -> None:
    assert versions.ISTIO_CHART_VERSION == "1.30.3"
    assert {r: (p["Chart"], p["Repository"], p["Version"], p["Namespace"]) for r, p in releases.items()} == {
        "istio-base": ("base", REPOSITORY, "1.30.3", "istio-system"),
        "istiod": ("istiod", REPOSITORY, "1.30.3", "istio-system"),
    }
    base, istiod = releases["istio-base"], releases["istiod"]
    namespace = synth.namespace_manifest_id()
    # Our Namespace (Pod Security labels, NetworkPolicies) first; Helm creates none.
    for props in (base, istiod):
        assert not props.get("CreateNamespace")
        assert namespace in props["DependsOn"]
        assert props["Wait"] is True
    # istiod after base: base installs the CRDs istiod watches and its webhooks validate.
    assert base["LogicalId"] in istiod["DependsOn"]
    assert istiod["LogicalId"] not in base["DependsOn"]
    # Like every controller: after the system nodes.
    assert synth.nodegroup_id in istiod["DependsOn"] and synth.nodegroup_id in base["DependsOn"]
    assert (base["Timeout"], istiod["Timeout"]) == ("180s", "300s")


def test_base_keeps_the_chart_defaults(releases: dict[str, dict[str, Any]]) -> None:
    """Every CRD (no base.excludedCRDs), the default revision's validator; only the namespace istiod runs in."""
    assert releases["istio-base"]["Values"] == {"global": {"istioNamespace": "istio-system"}}


def test_istiod_values(releases: dict[str, dict[str, Any]]) -> None:
    values = releases["istiod"]["Values"]
    assert values["global"] == {
        "hub": "docker.io/istio",
        "tag": "1.30.3",
        "istioNamespace": "istio-system",
        "operatorManageWebhooks": True,
    }
    assert values["env"] == {
        "ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "true",
        "ENABLE_SELECTOR_BASED_K8S_GATEWAY_POLICY": "false",
    }
    assert "pilot" not in values
    assert values["seccompProfile"] == {"type": "RuntimeDefault"}
    assert values["gateways"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    # Fixed replicas (the chart then renders a PDB, minAvailable 1), no HPA.
    assert (values["autoscaleEnabled"], values["replicaCount"]) == (False, 2)
    assert values["gatewayClasses"] == {
        "istio": {"deployment": {"spec": {"replicas": 2}}, "podDisruptionBudget": {"spec": {"minAvailable": 1}}}
    }
    assert values["nodeSelector"] == SYSTEM
    assert values["tolerations"] == []
    assert values["topologySpreadConstraints"][0]["labelSelector"] == {"matchLabels": {"app": "istiod"}}
    assert values["resources"] == {
        "requests": {"cpu": "250m", "memory": "512Mi"},
        "limits": {"cpu": "2", "memory": "2Gi"},
    }
    # Telemetry, the sidecar-injector ConfigMap (istiod renders gateways from it) and the validator: chart defaults.
    for key in ("telemetry", "sidecarInjectorWebhook", "meshConfig", "base"):
        assert key not in values
    assert "PILOT_ENABLE_ALPHA_GATEWAY_API" not in json.dumps(values)


def test_one_gateway_replica_gets_no_pdb() -> None:
    values = istiod_values(IstioGatewayOptions(control_plane_cidrs=(VPC_CIDR,), gateway_replicas=1))
    assert values["gatewayClasses"] == {"istio": {"deployment": {"spec": {"replicas": 1}}}}


def test_user_helm_values_merge_over_ours() -> None:
    stack = cdk.Stack(cdk.App(), "Merge")
    platform = InferenceCluster(stack, "Platform", InferenceClusterProps(cluster_name="merge"))
    props = IstioGatewayProps(
        cluster=as_icluster(platform.cluster),
        control_plane_cidrs=(VPC_CIDR,),
        namespace="istio-gw",
        helm_values={"env": {"PILOT_TRACE_SAMPLING": "0"}, "global": {"logAsJson": True}},
    )
    IstioGateway(stack, "Istio", props)
    charts = [
        r["Properties"]
        for r in Template.from_stack(stack).to_json()["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    ]
    values = {c["Release"]: json.loads(readable(c["Values"])) for c in charts}
    assert values["istiod"]["env"] == {
        "ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "true",
        "ENABLE_SELECTOR_BASED_K8S_GATEWAY_POLICY": "false",
        "PILOT_TRACE_SAMPLING": "0",
    }
    assert values["istiod"]["global"]["logAsJson"] is True and values["istiod"]["global"]["hub"] == "docker.io/istio"
    # A namespace of your own: both charts are told where istiod runs.
    assert values["istiod"]["global"]["istioNamespace"] == values["istio-base"]["global"]["istioNamespace"]
    assert values["istio-base"]["global"]["istioNamespace"] == "istio-gw"
    assert {c["Namespace"] for c in charts} == {"istio-gw"}


# -- namespace objects ----------------------------------------------------------------------------------------------


def test_namespace_objects_validate_and_are_restricted(synth: Synth) -> None:
    objects = synth.istio.namespace_objects
    assert_valid(objects)
    (namespace,) = [o for o in objects if o["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == "istio-system"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert netpol.REASON_ANNOTATION not in namespace["metadata"].get("annotations", {})
    assert sorted(o["metadata"]["name"] for o in objects if o["kind"] == "NetworkPolicy") == [
        netpol.DEFAULT_DENY,
        "istiod-metrics",
        "istiod-webhooks",
        "istiod-xds",
    ]
    # What the construct applies is what the template holds (plus aws_eks_v2's prune label).
    resource = synth.template["Resources"][synth.namespace_manifest_id()]
    manifest = json.loads(readable(resource["Properties"]["Manifest"]))
    for obj in manifest:
        labels = obj["metadata"]["labels"]
        for key in [k for k in labels if k.startswith("aws.cdk.eks/prune-")]:
            del labels[key]
    assert manifest == objects


ISTIOD = Pod("istio-system", {"app": "istiod", "istio": "pilot"})
# The labels istiod puts on a generated gateway pod (kube-gateway.yaml).
GATEWAY = Pod(
    GATEWAY_NS, {netpol.GATEWAY_NAME_LABEL: "inference", "gateway.networking.k8s.io/gateway-class-name": "istio"}
)
PROMETHEUS = Pod("monitoring", netpol.PROMETHEUS_POD)
STRAY = Pod("team-a", {"app": "notebook"}, ip="10.0.3.7")
CONTROL_PLANE = External("10.0.1.20")


def _flows(objects: list[dict[str, Any]]) -> list[tuple[str, Pod | External, int, bool]]:
    other_gateway = Pod("team-b", {netpol.GATEWAY_NAME_LABEL: "mine"})
    return [
        ("gateway pod -> xDS/CA", GATEWAY, 15012, True),
        ("gateway pod in another namespace -> xDS/CA", other_gateway, 15012, True),
        ("gateway pod -> plaintext xDS", GATEWAY, 15010, False),
        ("gateway pod -> webhooks", GATEWAY, 15017, False),
        ("gateway pod -> debug", GATEWAY, 8080, False),
        ("API server -> webhooks", CONTROL_PLANE, 15017, True),
        ("API server -> xDS", CONTROL_PLANE, 15012, False),
        ("Prometheus -> metrics", PROMETHEUS, 15014, True),
        ("Prometheus -> xDS", PROMETHEUS, 15012, False),
        ("unlabelled pod -> xDS", Pod(GATEWAY_NS, {"app": "epp"}), 15012, False),
        ("pod by VPC address -> metrics", STRAY, 15014, False),
    ]


def test_every_flow_into_istiod_gets_its_verdict(synth: Synth) -> None:
    objects = synth.istio.namespace_objects
    cluster = Cluster(objects, {"istio-system": {}, GATEWAY_NS: {}, "monitoring": {}, "team-a": {}, "team-b": {}})
    wrong = [
        f"{name}: expected {'allowed' if want else 'denied'}"
        for name, source, port, want in _flows(objects)
        if cluster.allows(source, ISTIOD, port) != want
    ]
    assert not wrong, "\n".join(wrong)


def test_gateway_namespaces_narrow_xds() -> None:
    objects = netpol.istio_namespace("istio-system", (VPC_CIDR,), gateway_namespaces=(GATEWAY_NS,))
    assert_valid(objects)
    cluster = Cluster(objects, {"istio-system": {}, GATEWAY_NS: {}, "team-b": {}})
    assert cluster.allows(GATEWAY, ISTIOD, 15012)
    assert not cluster.allows(Pod("team-b", {netpol.GATEWAY_NAME_LABEL: "mine"}), ISTIOD, 15012)


# -- validation -----------------------------------------------------------------------------------------------------

GOOD = IstioGatewayOptions(control_plane_cidrs=(VPC_CIDR,))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"control_plane_cidrs": ()},
            "istio.control_plane_cidrs: () is not allowed; name the CIDRs the EKS control plane calls webhooks from "
            "(the VPC's CIDR), or istiod's validating webhooks stay unreachable",
        ),
        (
            {"control_plane_cidrs": ("10.0.0.0/33",)},
            "istio.control_plane_cidrs: '10.0.0.0/33' is not allowed; must be IPv4 CIDRs such as 10.0.0.0/16",
        ),
        (
            {"namespace": "Istio"},
            "istio.namespace: 'Istio' is not allowed; must be a DNS label (lowercase letters, digits and '-', at "
            "most 63 characters)",
        ),
        (
            {"gateway_namespaces": ("ok", "not_ok")},
            "istio.gateway_namespaces[1]: 'not_ok' is not allowed; must be a DNS label (lowercase letters, digits "
            "and '-', at most 63 characters)",
        ),
        ({"replicas": 0}, "istio.replicas: 0 is not allowed; must be between 1 and 3"),
        ({"gateway_replicas": 0}, "istio.gateway_replicas: 0 is not allowed; must be between 1 and 20"),
        (
            {"helm_values": {"pilot": {"env": {"PILOT_ENABLE_ALPHA_GATEWAY_API": "true"}}}},
            "istio.helm_values.pilot.env.PILOT_ENABLE_ALPHA_GATEWAY_API: 'true' is not allowed; leave it unset: with "
            "the Gateway API standard CRDs istiod 1.30 would wait forever for v1alpha2 TCPRoute/UDPRoute",
        ),
        (
            {"helm_values": {"env": {"PILOT_ENABLE_ALPHA_GATEWAY_API": "false"}}},
            "istio.helm_values.env.PILOT_ENABLE_ALPHA_GATEWAY_API: 'false' is not allowed; leave it unset: with "
            "the Gateway API standard CRDs istiod 1.30 would wait forever for v1alpha2 TCPRoute/UDPRoute",
        ),
    ],
)
def test_bad_options_are_one_line(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        replace(GOOD, **changes).validate()
    assert str(info.value) == message


def test_construct_errors_name_the_construct() -> None:
    stack = cdk.Stack(cdk.App(), "Bad")
    platform = InferenceCluster(stack, "Platform", InferenceClusterProps(cluster_name="bad"))
    with pytest.raises(ConfigError) as info:
        IstioGateway(stack, "Istio", IstioGatewayProps(cluster=as_icluster(platform.cluster), replicas=4,
                                                       control_plane_cidrs=(VPC_CIDR,)))  # fmt: skip
    assert str(info.value) == "Bad/Istio: istio.replicas: 4 is not allowed; must be between 1 and 3"
    assert stack.node.try_find_child("Istio") is None


# -- the vendored Istio CRDs ----------------------------------------------------------------------------------------


def test_the_istio_crds_are_the_pinned_releases() -> None:
    """Every Istio CRD the objects are validated against comes from the tag of the pinned charts (their bytes are
    held to SOURCES.md by tests/test_upstream_files.py)."""
    rows = [row for row in sources().values() if row.repository == "istio/istio"]
    assert {row.file for row in rows} == {
        f"crds/{group}_{plural}.yaml"
        for group, plural in (
            ("networking.istio.io", "envoyfilters"),
            ("networking.istio.io", "destinationrules"),
            ("security.istio.io", "authorizationpolicies"),
            ("security.istio.io", "requestauthentications"),
            ("telemetry.istio.io", "telemetries"),
        )
    }
    for row in rows:
        assert row.release == versions.ISTIO_CHART_VERSION, row
        crd = yaml.safe_load((CRDS.parent / row.file).read_text())
        group, plural = row.file.removeprefix("crds/").removesuffix(".yaml").split("_")
        assert crd["metadata"]["name"] == f"{plural}.{group}"


EXT_PROC = "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"


def envoy_filter(**spec: Any) -> dict[str, Any]:
    """An ext_proc filter on one Gateway's Envoy, the shape the inference gateway synthesizes."""
    return {
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "EnvoyFilter",
        "metadata": {"name": "payload-processor", "namespace": GATEWAY_NS},
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference"}],
            "configPatches": [
                {
                    "applyTo": "HTTP_FILTER",
                    "match": {
                        "context": "GATEWAY",
                        "listener": {
                            "filterChain": {
                                "filter": {
                                    "name": "envoy.filters.network.http_connection_manager",
                                    "subFilter": {"name": "envoy.filters.http.router"},
                                }
                            }
                        },
                    },
                    "patch": {
                        "operation": "INSERT_FIRST",
                        "value": {
                            "name": "envoy.filters.http.ext_proc",
                            "typed_config": {
                                "@type": EXT_PROC,
                                "grpc_service": {
                                    "envoy_grpc": {"cluster_name": "outbound|9004||ipp.gw.svc.cluster.local"}
                                },
                            },
                        },
                    },
                }
            ],
            **spec,
        },
    }


def test_an_ext_proc_envoy_filter_validates() -> None:
    obj = envoy_filter()
    assert validation_errors(obj) == []
    assert_valid([obj])


def test_an_envoy_filter_enum_violation_fails() -> None:
    obj = envoy_filter()
    obj["spec"]["configPatches"][0]["patch"]["operation"] = "PREPEND"
    (error,) = validation_errors(obj)
    assert error.startswith(
        "EnvoyFilter/payload-processor: spec.configPatches.0.patch.operation: 'PREPEND' is not one of"
    )
    obj = envoy_filter()
    obj["spec"]["configPatches"][0]["match"]["context"] = "INGRESS"
    assert len(validation_errors(obj)) == 1
    obj = envoy_filter()
    obj["spec"]["configPatches"][0]["match"]["proxyVersion"] = "^1\\.30.*"  # not a field of `match`: strict schemas
    assert validation_errors(obj) == [
        "EnvoyFilter/payload-processor: spec.configPatches.0.match: Additional properties are not allowed "
        "('proxyVersion' was unexpected)"
    ]


def test_cel_rules_are_not_evaluated() -> None:
    """targetRefs together with workloadSelector breaks the CRD's CEL rule, which only the API server enforces: our
    validator (jsonschema) passes it. The rule is there, so the cluster rejects such an object."""
    both = envoy_filter(workloadSelector={"labels": {netpol.GATEWAY_NAME_LABEL: "inference"}})
    assert validation_errors(both) == []
    crd = yaml.safe_load((CRDS / "networking.istio.io_envoyfilters.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert [r["message"] for r in spec["x-kubernetes-validations"]] == [
        "only one of targetRefs or workloadSelector can be set"
    ]


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_destination_rules_validate(version: str) -> None:
    """TLS to the EPP/IPP Services without verification (their serving certs are self-signed), as the charts do."""
    rule = {
        "apiVersion": f"networking.istio.io/{version}",
        "kind": "DestinationRule",
        "metadata": {"name": "qwen-epp", "namespace": GATEWAY_NS},
        "spec": {
            "host": f"qwen-epp.{GATEWAY_NS}.svc.cluster.local",
            "trafficPolicy": {"tls": {"mode": "SIMPLE", "insecureSkipVerify": True}},
        },
    }
    assert validation_errors(rule) == []
    rule["spec"]["trafficPolicy"]["tls"]["mode"] = "STRICT"
    (error,) = validation_errors(rule)
    assert re.match(r"DestinationRule/qwen-epp: spec\.trafficPolicy\.tls\.mode: 'STRICT' is not one of", error)
