"""`InferenceCluster.add_*` composition and the escape hatches, through the two tested examples (synthesized together,
once, with cdk-nag and llm-eks's checks), plus the construct-path errors and the Helm values merge (no synth)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam

from llm_eks.constructs.addons import with_helm_values
from llm_eks.constructs.cluster import InferenceCluster, InferenceClusterProps
from llm_eks.constructs.interruption import InterruptionQueue
from llm_eks.constructs.karpenter import Karpenter, KarpenterProps
from llm_eks.constructs.keda import Keda, KedaProps
from llm_eks.error_codes import E312
from llm_eks.errors import ConfigError, errors_at
from llm_eks.infra.app import add_checks
from llm_eks.infra.review import readable
from tests.cdk_fixtures import minimal_cluster
from tests.conftest import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"
HELM = "Custom::AWSCDK-EKS-HelmChart"
MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / name / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Template:
    def __init__(self, path: Path) -> None:
        self.resources: dict[str, dict[str, Any]] = json.loads(path.read_text())["Resources"]

    def of_type(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.resources.items() if r["Type"] == type_}

    def one(self, type_: str, prefix: str) -> tuple[str, dict[str, Any]]:
        (found,) = [(k, r) for k, r in self.of_type(type_).items() if k.startswith(prefix)]
        return found

    def release(self, name: str) -> tuple[str, dict[str, Any]]:
        (found,) = [(k, r) for k, r in self.of_type(HELM).items() if r["Properties"]["Release"] == name]
        return found

    def values(self, release: str) -> dict[str, Any]:
        """Helm values, with CloudFormation references as `${GetAtt:Id.Attr}` text (as the review output shows them)."""
        return json.loads(readable(self.release(release)[1]["Properties"]["Values"]))


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Template]:
    """The three construct examples in one app, synthesized once; synth fails on any cdk-nag or llm-eks finding."""
    outdir = tmp_path_factory.mktemp("examples")
    app = cdk.App(outdir=str(outdir))
    composed = load_example("composed_app").build(app)
    hatches = load_example("escape_hatches").build(app)
    existing = load_example("existing_cluster").build(app)
    add_checks(app)
    app.synth()
    return {
        "composed": Template(outdir / f"{composed.artifact_id}.template.json"),
        "hatches": Template(outdir / f"{hatches.artifact_id}.template.json"),
        "existing": Template(outdir / f"{existing.artifact_id}.template.json"),
    }


def test_the_existing_cluster_example_builds_no_cluster_and_applies_through_its_provider(
    examples: dict[str, Template],
) -> None:
    t = examples["existing"]
    assert not t.of_type("AWS::EKS::Cluster") and not t.of_type("AWS::EC2::VPC")
    token = "arn:aws:lambda:us-west-2:123456789012:function:team-a-kubectl-provider"
    charts = {**t.of_type(HELM), **t.of_type(MANIFEST)}
    assert charts and all(r["Properties"]["ServiceToken"] == token for r in charts.values())
    assert all(r["Properties"]["ClusterName"] == "team-a" for r in charts.values())
    # The queue is named after the existing cluster, as Karpenter's settings expect.
    (queue,) = t.of_type("AWS::SQS::Queue").values()
    assert queue["Properties"]["QueueName"] == "team-a"
    queue_id = next(iter(t.of_type("AWS::SQS::Queue")))
    assert t.values("karpenter")["settings"]["interruptionQueue"] == f"${{GetAtt:{queue_id}.QueueName}}"
    # The node pools apply after the Karpenter controller, so their CRDs exist.
    _, pools = t.one(MANIFEST, "Clusternodepools")
    assert t.release("karpenter")[0] in pools["DependsOn"]


def test_a_cluster_without_a_kubectl_provider_is_one_line() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "NoKubectl")
    from aws_cdk import aws_eks_v2 as eks

    cluster = eks.Cluster.from_cluster_attributes(stack, "Cluster", cluster_name="team-a")
    with pytest.raises(ConfigError) as err:
        Keda(stack, "Keda", KedaProps(cluster=cluster, control_plane_cidrs=("10.0.0.0/16",)))
    assert str(err.value) == (
        "NoKubectl/Keda: cluster: 'team-a' has no kubectl provider, so Helm releases and manifests cannot be applied "
        "to it; create it with kubectl_provider_options, or import it with "
        "kubectl_provider=KubectlProvider.from_kubectl_provider_attributes(...) [LLMEKS-E301]"
    )


def test_composition_example_uses_no_config_objects() -> None:
    text = (EXAMPLES / "composed_app" / "app.py").read_text()
    assert "EnvironmentConfig" not in text and "llm_eks.config" not in text


def test_add_karpenter_wires_the_queue_and_waits_for_system_nodes_and_pod_identity(
    examples: dict[str, Template],
) -> None:
    t = examples["composed"]
    _, controller = t.release("karpenter")
    nodes, _ = t.one("AWS::EKS::Nodegroup", "PlatformClusterNodegroupSystemNodes")
    agent, _ = t.one("AWS::EKS::Addon", "PlatformClusterEksPodIdentityAgent")
    queue, _ = t.one("AWS::SQS::Queue", "InterruptionQueue")
    assert {nodes, agent, queue} <= set(controller["DependsOn"])
    assert t.values("karpenter")["settings"] == {
        "clusterName": "team-a-inference",
        "interruptionQueue": f"${{GetAtt:{queue}.QueueName}}",
        "featureGates": {"nodeRepair": False, "reservedCapacity": True},
    }
    assert len(t.of_type("AWS::Events::Rule")) == 5


def test_add_ons_wait_for_the_system_nodes(examples: dict[str, Template]) -> None:
    t = examples["composed"]
    nodes, _ = t.one("AWS::EKS::Nodegroup", "PlatformClusterNodegroupSystemNodes")
    for release in ("keda", "dcgm-exporter"):
        assert nodes in t.release(release)[1]["DependsOn"], release


def test_add_chart_orders_charts_after_what_they_name(examples: dict[str, Template]) -> None:
    t = examples["composed"]
    _, pools = t.one(MANIFEST, "PlatformClusternodepools")
    _, team = t.one(MANIFEST, "PlatformClusterteama")
    crds, _ = t.release("karpenter-crd")
    controller, _ = t.release("karpenter")
    teardown, _ = t.one("Custom::KarpenterTeardown", "KarpenterTeardown")
    # Node pools after Karpenter, and deleted before its teardown (so Karpenter drains their nodes first).
    assert {crds, controller, teardown} <= set(pools["DependsOn"])
    assert t.release("keda")[0] in team["DependsOn"]
    kinds = [o["kind"] for o in json.loads(readable(pools["Properties"]["Manifest"]))]
    assert kinds.count("NodePool") == 2 and "EC2NodeClass" in kinds


def test_own_node_role_and_queue_create_neither(examples: dict[str, Template]) -> None:
    t = examples["hatches"]
    # No queue and no interruption rule (the one rule left forwards the stack's failed deploys to the alerts topic).
    rules = [r["Properties"]["EventPattern"]["source"] for r in t.of_type("AWS::Events::Rule").values()]
    assert not t.of_type("AWS::SQS::Queue") and rules == [["aws.cloudformation"]]
    descriptions = [r["Properties"].get("Description", "") for r in t.of_type("AWS::IAM::Role").values()]
    assert not [d for d in descriptions if d.startswith("Nodes Karpenter launches")]
    _, entry = t.one("AWS::EKS::AccessEntry", "KarpenterNodeAccessEntry")
    assert entry["Properties"]["PrincipalArn"] == "arn:aws:iam::123456789012:role/team-a-karpenter-node"
    assert entry["Properties"]["Type"] == "EC2_LINUX"
    assert t.values("karpenter")["settings"]["interruptionQueue"] == "team-a-interruptions"
    _, interruption = t.one("AWS::IAM::ManagedPolicy", "KarpenterControllerInterruptionPolicy")
    resources = json.dumps(interruption["Properties"]["PolicyDocument"])
    assert "arn:aws:sqs:us-west-2:123456789012:team-a-interruptions" in resources


def test_permissions_boundary_is_on_every_role_created(examples: dict[str, Template]) -> None:
    roles = examples["hatches"].of_type("AWS::IAM::Role")
    assert len(roles) >= 8
    boundary = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::123456789012:policy/team-a-boundary"]]}
    assert {k: r["Properties"].get("PermissionsBoundary") for k, r in roles.items()} == dict.fromkeys(roles, boundary)


def test_extra_statements_go_on_the_named_roles(examples: dict[str, Template]) -> None:
    t = examples["hatches"]
    _, controller = t.one("AWS::IAM::Policy", "KarpenterControllerRoleDefaultPolicy")
    assert controller["Properties"]["PolicyDocument"]["Statement"] == [
        {
            "Action": "kms:CreateGrant",
            "Condition": {"Bool": {"kms:GrantIsForAWSResource": True}},
            "Effect": "Allow",
            "Resource": "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            "Sid": "EncryptedNodeVolumes",
        }
    ]
    _, system = t.one("AWS::IAM::Policy", "PlatformSystemNodeRoleDefaultPolicy")
    assert system["Properties"]["PolicyDocument"]["Statement"] == [
        {"Action": "s3:GetObject", "Effect": "Allow", "Resource": "arn:aws:s3:::team-a-node-bootstrap/config.toml"}
    ]


def test_extra_helm_values_merge_over_ours(examples: dict[str, Template]) -> None:
    t = examples["hatches"]
    karpenter = t.values("karpenter")
    assert karpenter["logLevel"] == "debug"
    # Deep merge: the memory limit is theirs, the CPU limit and requests stay ours.
    assert karpenter["controller"]["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "1", "memory": "2Gi"},
    }
    keda = t.values("keda")
    assert keda["prometheus"] == {"operator": {"enabled": True, "podMonitor": {"enabled": True}}}
    assert keda["crds"] == {"install": True}
    grafana = t.values("kube-prometheus-stack")["grafana"]
    assert grafana["defaultDashboardsTimezone"] == "utc" and grafana["persistence"] == {"enabled": False}


def test_helm_values_merge_like_helm() -> None:
    ours = {"a": {"b": 1, "c": [1, 2]}, "d": "x"}
    assert with_helm_values(ours, {"a": {"c": [3]}, "e": None}) == {"a": {"b": 1, "c": [3]}, "d": "x", "e": None}
    assert with_helm_values(ours, {}) == ours


def test_construct_errors_name_the_construct_path() -> None:
    stack = cdk.Stack(cdk.App(), "LlmEks-dev")
    with pytest.raises(ConfigError) as err:
        Karpenter(stack, "Karpenter", KarpenterProps(cluster=None, helm_values=["debug"]))  # type: ignore[arg-type]
    assert str(err.value) == (
        "LlmEks-dev/Karpenter: helm_values: ['debug'] is not allowed; must be a mapping of Helm values, "
        "e.g. {'replicas': 3} [LLMEKS-E300]"
    )
    with pytest.raises(ConfigError) as err:
        Keda(stack, "Keda", KedaProps(cluster=None, helm_values={"operator": {1: "x"}}))  # type: ignore[arg-type]
    assert str(err.value) == (
        "LlmEks-dev/Keda: keda.helm_values.operator: {1: 'x'} is not allowed; every key must be a string (found 1)"
        " [LLMEKS-E300]"
    )


def test_statements_for_the_node_role_need_our_node_role() -> None:
    role = iam.Role.from_role_arn(cdk.Stack(cdk.App(), "Roles"), "Own", "arn:aws:iam::123456789012:role/own")
    props = KarpenterProps(
        cluster=None,  # type: ignore[arg-type]
        node_role=role,
        node_role_statements=(iam.PolicyStatement(actions=["s3:GetObject"], resources=["arn:aws:s3:::b/k"]),),
    )
    with pytest.raises(ConfigError) as err:
        props.validate()
    assert str(err.value) == (
        "node_role_statements: 1 is not allowed; must be empty with your own node_role; add statements to that role "
        "yourself [LLMEKS-E302]"
    )


def test_a_nested_construct_error_keeps_its_own_path() -> None:
    with pytest.raises(ConfigError) as err, errors_at("App/Karpenter"), errors_at("App/Karpenter/InterruptionQueue"):
        raise ConfigError(E312, "cluster_name: 'a b' is not allowed; ...")
    assert str(err.value) == "App/Karpenter/InterruptionQueue: cluster_name: 'a b' is not allowed; ... [LLMEKS-E312]"


def test_karpenter_without_a_queue_creates_its_own() -> None:
    stack = cdk.Stack(cdk.App(), "Alone")
    karpenter = Karpenter(stack, "Karpenter", KarpenterProps(cluster=minimal_cluster(stack, cluster_name="alone")))
    assert isinstance(karpenter.node.try_find_child("InterruptionQueue"), InterruptionQueue)
    assert stack.resolve(karpenter.helm_values()["settings"]["interruptionQueue"]) == {
        "Fn::GetAtt": [stack.get_logical_id(karpenter.interruption_queue.queue.node.default_child), "QueueName"]  # type: ignore[union-attr,arg-type]
    }


def test_cluster_errors_name_the_cluster_construct() -> None:
    with pytest.raises(ConfigError) as err:
        InferenceCluster(cdk.Stack(cdk.App(), "TeamA"), "Platform", InferenceClusterProps("c", system_min_size=1))
    assert str(err.value) == (
        "TeamA/Platform: system_min_size: 1 is not allowed; must be at least 2 (Karpenter's 2 replicas need 2 nodes "
        "in 2 AZs) [LLMEKS-E303]"
    )
