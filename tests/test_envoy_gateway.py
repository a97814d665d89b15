"""EnvoyGateway (Envoy Gateway v1.9.0 + Envoy AI Gateway v1.1.0 + the rate-limit counters' Valkey) and
ExternalSecrets (the External Secrets Operator 2.9.0, scoped): their Helm releases, values and order, their
namespace objects and the flows they admit; the pinned CRDs against the vendored upstream files.

One module-scoped synth of an InferenceCluster with both constructs and the pinned CRDs added the way the stack adds
them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template

from llm_eks import versions
from llm_eks.constructs import crds
from llm_eks.constructs.cluster import InferenceCluster, InferenceClusterProps
from llm_eks.constructs.composition import as_icluster
from llm_eks.constructs.envoy_gateway import EnvoyGateway, EnvoyGatewayOptions, EnvoyGatewayProps
from llm_eks.constructs.external_secrets import ExternalSecrets, ExternalSecretsOptions
from llm_eks.errors import ConfigError
from llm_eks.images.charts import chart_images, digest_values
from llm_eks.infra.review import readable
from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.gateway import platform
from tests.kube_schema import assert_valid
from tests.netpol import Cluster, External, Pod
from tests.upstream import CRDS, SOURCES, sources

VPC_CIDR = "10.0.0.0/16"
SYSTEM = {"llm-eks.io/node-role": "system"}
GATEWAY_NS = "inference-gateway"


class Synth:
    def __init__(self) -> None:
        stack = cdk.Stack(cdk.App(), "Eg", env=cdk.Environment(account="123456789012", region="us-west-2"))
        cluster = InferenceCluster(stack, "Platform", InferenceClusterProps(cluster_name="eg"))
        self.crds = cluster.add_pinned_crds((*crds.ENVOY_GATEWAY_CRDS, *crds.AI_GATEWAY_CRDS), id="GatewayCrds")
        self.gateway = cluster.add_envoy_gateway(
            EnvoyGatewayOptions(
                control_plane_cidrs=(VPC_CIDR,),
                gateway_namespaces=(GATEWAY_NS,),
                metrics_request_headers={"x-llm-eks-tenant": "tenant"},
            )
        )
        self.crds.add_dependent(self.gateway)
        self.secrets = cluster.add_external_secrets()
        self.secrets.add_secret("llm-eks/qa/tenants/team-a/api-key")
        self.template: dict[str, Any] = Template.from_stack(stack).to_json()
        (self.nodegroup_id,) = [k for k, r in self.template["Resources"].items() if r["Type"] == "AWS::EKS::Nodegroup"]

    def releases(self) -> dict[str, dict[str, Any]]:
        out = {}
        for logical_id, resource in self.template["Resources"].items():
            if resource["Type"] == "Custom::AWSCDK-EKS-HelmChart":
                props = dict(resource["Properties"])
                props["Values"] = json.loads(readable(props["Values"]))
                props["LogicalId"] = logical_id
                props["DependsOn"] = resource.get("DependsOn", [])
                out[props["Release"]] = props
        return out


@pytest.fixture(scope="module")
def synth() -> Synth:
    return Synth()


@pytest.fixture(scope="module")
def releases(synth: Synth) -> dict[str, dict[str, Any]]:
    return synth.releases()


# -- the Helm releases ----------------------------------------------------------------------------------------------


def test_three_pinned_releases_in_their_own_namespaces(synth: Synth, releases: dict[str, dict[str, Any]]) -> None:
    assert {r: (p["Chart"], p["Repository"], p["Version"], p["Namespace"]) for r, p in releases.items()} == {
        "eg": ("gateway-helm", "oci://docker.io/envoyproxy/gateway-helm", "v1.9.0", "envoy-gateway-system"),
        "aieg": ("ai-gateway-helm", "oci://docker.io/envoyproxy/ai-gateway-helm", "v1.1.0", "envoy-ai-gateway-system"),
        "external-secrets": ("external-secrets", "https://charts.external-secrets.io", "2.9.0", "external-secrets"),
    }
    eg, aieg = releases["eg"], releases["aieg"]
    # Both controllers discover their kinds at start: the CRDs come first.
    custom = [k for k, r in synth.template["Resources"].items() if r["Type"] == crds.RESOURCE_TYPE]
    assert custom and all(c in eg["DependsOn"] for c in custom) and all(c in aieg["DependsOn"] for c in custom)
    assert eg["LogicalId"] in aieg["DependsOn"]
    for props in releases.values():
        assert not props.get("CreateNamespace") and props["Wait"] is True
        assert synth.nodegroup_id in props["DependsOn"]
    # Helm never installs a chart's crds/ here (PinnedCrds does); 2 waits (certgen hook, rollout) x 5 min.
    assert eg["SkipCrds"] is True and eg["Timeout"] == "300s"


def test_envoy_gateway_values(releases: dict[str, dict[str, Any]]) -> None:
    values = releases["eg"]["Values"]
    assert values["crds"] == {"enabled": False}
    assert values["topologyInjector"] == {"enabled": False}
    assert values["deployment"]["replicas"] == 2 and values["podDisruptionBudget"] == {"minAvailable": 1}
    assert values["deployment"]["pod"]["nodeSelector"] == SYSTEM
    config = values["config"]["envoyGateway"]
    kubernetes = config["provider"]["kubernetes"]
    assert kubernetes["deploy"] == {"type": "GatewayNamespace"}
    assert kubernetes["watch"] == {
        "type": "NamespaceSelector",
        "namespaceSelector": {"matchLabels": {"app.kubernetes.io/part-of": "llm-eks"}},
    }
    ratelimit = kubernetes["rateLimitDeployment"]
    assert ratelimit["replicas"] == 2 and kubernetes["rateLimitPDB"] == {"minAvailable": 1}
    assert {e["name"]: e["value"] for e in ratelimit["container"]["env"]} == {
        "LIMIT_RESPONSE_HEADERS_ENABLED": "true",
        "LIMIT_RESET_HEADER": "Retry-After",
    }
    assert config["rateLimit"] == {
        "backend": {"type": "Redis", "redis": {"url": "valkey.envoy-gateway-system.svc.cluster.local:6379"}},
        "failClosed": False,
    }
    assert config["extensionApis"] == {"enableBackend": True}
    manager = config["extensionManager"]
    assert manager["service"] == {
        "fqdn": {"hostname": "ai-gateway-controller.envoy-ai-gateway-system.svc.cluster.local", "port": 1063}
    }
    assert manager["hooks"]["xdsTranslator"]["post"] == ["Translation", "Cluster", "Route"]
    assert manager["backendResources"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "version": "v1"}
    ]
    assert "failOpen" not in manager and "enableEnvoyPatchPolicy" not in json.dumps(values)


def test_ai_gateway_values(releases: dict[str, dict[str, Any]]) -> None:
    values = releases["aieg"]["Values"]
    controller = values["controller"]
    assert (controller["replicaCount"], controller["leaderElection"]) == (2, {"enabled": True})
    assert controller["podDisruptionBudget"] == {"enabled": True, "minAvailable": 1}
    assert controller["nodeSelector"] == SYSTEM
    assert controller["metricsRequestHeaderAttributes"] == "x-llm-eks-tenant:tenant"
    assert values["envoyGateway"] == {"namespace": "envoy-gateway-system"}
    assert values["extProc"] == {"logLevel": "info"}


def test_external_secrets_is_scoped_to_its_namespace(synth: Synth, releases: dict[str, dict[str, Any]]) -> None:
    values = releases["external-secrets"]["Values"]
    assert (values["scopedNamespace"], values["scopedRBAC"]) == ("external-secrets", True)
    assert values["webhook"] == {"create": False} and values["certController"] == {"create": False}
    assert values["serviceAccount"] == {"create": True, "name": "external-secrets"}
    for kind in ("ClusterExternalSecret", "ClusterPushSecret", "ClusterStore", "ClusterGenerator", "PushSecret"):
        assert values[f"process{kind}"] is False
    # Its Pod Identity role reads exactly the secret it was given, by name.
    statements = [
        s
        for r in synth.template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for s in r["Properties"]["PolicyDocument"]["Statement"]
        if "secretsmanager:GetSecretValue" in s["Action"]
    ]
    (statement,) = statements
    assert statement["Action"] == ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"]
    assert json.dumps(statement["Resource"]).endswith(':secret:llm-eks/qa/tenants/team-a/api-key-??????"]]}')
    associations = [
        r["Properties"] for r in synth.template["Resources"].values() if r["Type"] == "AWS::EKS::PodIdentityAssociation"
    ]
    assert {(a["Namespace"], a["ServiceAccount"]) for a in associations} >= {("external-secrets", "external-secrets")}


def test_locked_images_go_into_the_charts_values() -> None:
    digest = "sha256:" + "a" * 64
    eg = {i.ref: digest for i in chart_images("gateway-helm", versions.ENVOY_GATEWAY_VERSION)}
    assert digest_values("gateway-helm", versions.ENVOY_GATEWAY_VERSION, eg) == {
        "global": {
            "images": {
                "envoyGateway": {"image": f"docker.io/envoyproxy/gateway:v1.9.0@{digest}"},
                "ratelimit": {"image": f"docker.io/envoyproxy/ratelimit:17b1956c@{digest}"},
            }
        }
    }
    ai = {i.ref: digest for i in chart_images("ai-gateway-helm", versions.AI_GATEWAY_VERSION)}
    assert digest_values("ai-gateway-helm", versions.AI_GATEWAY_VERSION, ai) == {
        "controller": {"image": {"tag": f"v1.1.0@{digest}"}},
        "extProc": {"image": {"tag": f"v1.1.0@{digest}"}},
    }


# -- namespace objects and flows ------------------------------------------------------------------------------------


def test_namespace_objects_validate_and_are_restricted(synth: Synth) -> None:
    objects = [*synth.gateway.namespace_objects, *synth.secrets.namespace_objects]
    assert_valid(objects)
    namespaces = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Namespace"}
    assert set(namespaces) == {"envoy-gateway-system", "envoy-ai-gateway-system", "external-secrets"}
    for ns in namespaces.values():
        assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
        # Envoy Gateway watches only namespaces with this label.
        assert ns["metadata"]["labels"]["app.kubernetes.io/part-of"] == "llm-eks"


def test_the_counter_store_is_one_unpersisted_capped_valkey(synth: Synth) -> None:
    objects = {(o["kind"], o["metadata"]["name"]): o for o in synth.gateway.namespace_objects}
    deployment = objects[("Deployment", "valkey")]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == versions.VALKEY_IMAGE
    args = container["args"]
    assert args[args.index("--save") + 1] == "" and args[args.index("--appendonly") + 1] == "no"
    assert args[args.index("--maxmemory-policy") + 1] == "volatile-ttl"
    assert args[args.index("--maxmemory") + 1] == "256mb"
    assert container["resources"]["limits"]["memory"] == "320Mi"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert deployment["spec"]["strategy"] == {"type": "Recreate"} and deployment["spec"]["replicas"] == 1
    # maxUnavailable 1: a single replica with minAvailable 1 would block every node drain.
    assert objects[("PodDisruptionBudget", "valkey")]["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": platform.VALKEY_POD},
    }


ENVOY = Pod(
    GATEWAY_NS,
    {**platform.ENVOY_POD, platform.OWNING_GATEWAY_NAME: "inference", platform.OWNING_GATEWAY_NAMESPACE: GATEWAY_NS},
)
EG = Pod("envoy-gateway-system", {**platform.ENVOY_GATEWAY_POD, "app.kubernetes.io/name": "gateway-helm"})
RATELIMIT = Pod("envoy-gateway-system", platform.RATELIMIT_POD)
VALKEY = Pod("envoy-gateway-system", platform.VALKEY_POD)
AIGW = Pod("envoy-ai-gateway-system", platform.AI_GATEWAY_POD)
ESO = Pod("external-secrets", platform.EXTERNAL_SECRETS_POD)
PROMETHEUS = Pod("monitoring", netpol.PROMETHEUS_POD)
STRAY = Pod("team-a", {"app": "notebook"}, ip="10.0.3.7")
OTHER_ENVOY = Pod("team-b", platform.ENVOY_POD)
CONTROL_PLANE = External("10.0.1.20")


@pytest.mark.parametrize(
    ("name", "source", "dest", "port", "allowed"),
    [
        ("Envoy -> xDS", ENVOY, EG, 18000, True),
        ("Envoy of another namespace -> xDS", OTHER_ENVOY, EG, 18000, False),
        ("rate-limit service -> its xDS", RATELIMIT, EG, 18001, True),
        ("Envoy -> rate-limit xDS", ENVOY, EG, 18001, False),
        ("Prometheus -> Envoy Gateway metrics", PROMETHEUS, EG, 19001, True),
        ("Envoy -> rate-limit checks", ENVOY, RATELIMIT, 8081, True),
        ("stray pod -> rate-limit checks", STRAY, RATELIMIT, 8081, False),
        ("rate-limit service -> Valkey", RATELIMIT, VALKEY, 6379, True),
        ("Envoy -> Valkey", ENVOY, VALKEY, 6379, False),
        ("stray pod -> Valkey", STRAY, VALKEY, 6379, False),
        ("Envoy Gateway -> extension server", EG, AIGW, 1063, True),
        ("Envoy -> extension server", ENVOY, AIGW, 1063, False),
        ("API server -> pod webhook", CONTROL_PLANE, AIGW, 9443, True),
        ("API server -> QuotaPolicy xDS", CONTROL_PLANE, AIGW, 18002, False),
        ("Prometheus -> AI Gateway metrics", PROMETHEUS, AIGW, 8080, True),
        ("Prometheus -> External Secrets metrics", PROMETHEUS, ESO, 8080, True),
        ("stray pod -> External Secrets", STRAY, ESO, 8080, False),
    ],
)
def test_every_flow_into_the_platform_gets_its_verdict(
    synth: Synth, name: str, source: Pod | External, dest: Pod, port: int, allowed: bool
) -> None:
    cluster = Cluster(
        [*synth.gateway.namespace_objects, *synth.secrets.namespace_objects],
        {ns: {} for ns in ("envoy-gateway-system", "envoy-ai-gateway-system", "external-secrets", "monitoring")},
    )
    assert cluster.allows(source, dest, port) is allowed, name


# -- validation -----------------------------------------------------------------------------------------------------

GOOD = EnvoyGatewayOptions(control_plane_cidrs=(VPC_CIDR,))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"control_plane_cidrs": ()},
            "envoy_gateway.control_plane_cidrs: () is not allowed; name the CIDRs the EKS control plane calls "
            "webhooks from (the VPC's CIDR), or the AI Gateway's pod webhook stays unreachable and no Envoy pod "
            "starts [LLMEKS-E310]",
        ),
        ({"replicas": 4}, "envoy_gateway.replicas: 4 is not allowed; must be between 1 and 3 [LLMEKS-E300]"),
        (
            {"counter_store_mib": 8},
            "envoy_gateway.counter_store_mib: 8 is not allowed; must be 64 to 8192 (MiB) [LLMEKS-E310]",
        ),
        (
            {"metrics_request_headers": {"x-tenant": "a:b"}},
            "envoy_gateway.metrics_request_headers: {'x-tenant': 'a:b'} is not allowed; header and attribute names "
            "must be non-empty, without ',', ':' or spaces [LLMEKS-E310]",
        ),
    ],
)
def test_bad_options_are_one_line(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        replace(GOOD, **changes).validate()
    assert str(info.value) == message


def test_construct_errors_name_the_construct() -> None:
    stack = cdk.Stack(cdk.App(), "Bad")
    cluster = InferenceCluster(stack, "Platform", InferenceClusterProps(cluster_name="bad"))
    with pytest.raises(ConfigError) as info:
        EnvoyGateway(stack, "Gw", EnvoyGatewayProps(cluster=as_icluster(cluster.cluster)))
    assert str(info.value).startswith("Bad/Gw: envoy_gateway.control_plane_cidrs: () is not allowed;")
    secrets = cluster.add_external_secrets(ExternalSecretsOptions())
    with pytest.raises(ConfigError) as info:
        secrets.add_secret("arn:aws:secretsmanager:us-west-2:123456789012:secret:x")
    assert "external_secrets.secret_name: 'arn:aws:secretsmanager" in str(info.value)
    assert isinstance(secrets, ExternalSecrets)


# -- the pinned CRDs ------------------------------------------------------------------------------------------------

PINS = (*crds.ENVOY_GATEWAY_CRDS, *crds.AI_GATEWAY_CRDS, *crds.LLMD_CRDS)
# Pinned for deploy time but not vendored: llm-eks creates no object of these kinds (SOURCES.md says so).
NOT_VENDORED = {
    "aigateway.envoyproxy.io_backendsecuritypolicies.yaml",
    "aigateway.envoyproxy.io_mcproutes.yaml",
    "aigateway.envoyproxy.io_quotapolicies.yaml",
}


@pytest.mark.parametrize("source", PINS, ids=lambda s: s.name)
def test_each_pin_is_the_recorded_upstream_file(source: crds.CrdSource) -> None:
    """The sha256 pinned for deploy time is the vendored copy's, downloaded from the repository, commit and path
    SOURCES.md records for it, at the commit of the version versions.py names; the installer accepts the file."""
    from tests.test_crds import handler  # the Lambda's module, loaded as Lambda loads it

    file = source.url.rsplit("/", 1)[1]
    commit = source.url.split("/")[5]
    assert (
        commit
        == {
            "gateway.envoyproxy.io": crds.ENVOY_GATEWAY_COMMIT,
            "aigateway.envoyproxy.io": crds.AI_GATEWAY_COMMIT,
            "llm-d.ai": crds.LLMD_COMMIT,
        }[source.name.split(".", 1)[1]]
    )
    if file in NOT_VENDORED:
        assert not (CRDS / file).exists() and file.removeprefix("aigateway.envoyproxy.io") in SOURCES.read_text()
        return
    data = (CRDS / file).read_bytes()
    assert hashlib.sha256(data).hexdigest() == source.sha256
    row = sources()[f"crds/{file}"]
    assert row.commit == commit
    assert source.url == f"https://raw.githubusercontent.com/{row.repository}/{commit}/{row.path}"
    document = handler.check_crd_text(source.name, source.url, data)
    assert yaml.safe_load(document)["metadata"]["name"] == source.name


def test_the_tags_of_the_vendored_files_are_the_pinned_releases() -> None:
    expected = {
        "envoyproxy/gateway": versions.ENVOY_GATEWAY_VERSION,
        "envoyproxy/ai-gateway": versions.AI_GATEWAY_VERSION,
        "llm-d/llm-d-router": versions.LLMD_VERSION,
        "external-secrets/external-secrets": versions.EXTERNAL_SECRETS_CHART_VERSION,
    }
    rows = [row for row in sources().values() if row.repository in expected]
    assert len(rows) == 14
    for row in rows:
        assert row.release == expected[row.repository], row


def test_a_licence_header_before_the_crd_is_dropped_before_apply() -> None:
    from tests.test_crds import handler

    data = (CRDS / "aigateway.envoyproxy.io_gatewayconfigs.yaml").read_bytes()
    assert data.startswith(b"# Copyright Envoy AI Gateway Authors")
    document = handler.check_crd_text("gatewayconfigs.aigateway.envoyproxy.io", "u", data)
    assert document.startswith(b"apiVersion: apiextensions.k8s.io/v1\n") and b"# Copyright" not in document
