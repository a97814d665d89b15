"""The Karpenter construct, read from synthesized templates and compared with Karpenter's CloudFormation.

One app, synthesized once for the module, holds two stacks:
- "Named": a named cluster in a concrete environment (how InferenceStack uses it): the controller policies are
  JSON objects with the cluster name written out;
- "Generated": a cluster whose name CloudFormation generates, in an environment-agnostic stack: the name is a
  deploy-time token, so the policies are one `Fn::Sub` each, like the reference.
Both must grant exactly the reference's statements.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llm_eks.constructs import karpenter_policies
from llm_eks.errors import ConfigError
from llm_eks.versions import KARPENTER_VERSION
from tests.cdk_fixtures import minimal_cluster, synth_with_nag
from tests.cfn_reference import karpenter_reference

CLUSTER = "llm-test"
ACCOUNT = "111122223333"
REGION = "us-west-2"
NODE_ROLE_ARN = "NODE-ROLE-ARN"
QUEUE_ARN = "QUEUE-ARN"
# Reference managed policy resource -> ours (Karpenter/Controller<concern>Policy).
CONCERNS = ("NodeLifecycle", "IAMIntegration", "EKSIntegration", "Interruption", "ZonalShift", "ResourceDiscovery")


# -- reading CloudFormation ---------------------------------------------------------------------------------------


class Evaluator:
    """Evaluates the intrinsics our templates and the reference use, to compare them as plain values."""

    def __init__(self, refs: dict[str, str], attributes: dict[tuple[str, str], Any]) -> None:
        self.refs = {
            "AWS::Partition": "aws",
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::URLSuffix": "amazonaws.com",
            **refs,
        }
        self.attributes = attributes

    def __call__(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "Ref" in node:
            return self.refs[node["Ref"]]
        if "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return self(self.attributes[(resource, attribute)])
        if "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return delimiter.join(str(self(i)) for i in items)
        if "Fn::Sub" in node:
            text, variables = (node["Fn::Sub"], {}) if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"]
            values = {name: self(value) for name, value in variables.items()}

            def replace(match: re.Match[str]) -> str:
                name = match.group(1)
                if name in values:
                    return str(values[name])
                if "." in name:
                    return str(self({"Fn::GetAtt": name.split(".", 1)}))
                return str(self({"Ref": name}))

            return re.sub(r"\$\{([^}]+)\}", replace, text)
        return {key: self(value) for key, value in node.items()}


def _document(value: Any) -> dict[str, Any]:
    """A policy document evaluated to plain JSON (a whole-document Fn::Sub evaluates to its text)."""
    return json.loads(value) if isinstance(value, str) else value


def _normalized(statement: dict[str, Any]) -> dict[str, Any]:
    """Order-insensitive where IAM is: actions, resources and condition value lists are sets."""

    def as_set(value: Any) -> frozenset[Any]:
        return frozenset(value if isinstance(value, list) else [value])

    return {
        "Sid": statement.get("Sid"),
        "Effect": statement["Effect"],
        "Action": as_set(statement["Action"]),
        "Resource": as_set(statement["Resource"]),
        "Condition": {
            operator: {key: as_set(value) for key, value in block.items()}
            for operator, block in statement.get("Condition", {}).items()
        },
    }


# -- fixtures -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return karpenter_reference()


def reference_policies(reference: dict[str, Any], cluster_name: str) -> dict[str, list[dict[str, Any]]]:
    """The reference's controller policy statements for a cluster of that name, as plain JSON."""
    evaluate = Evaluator(
        {"ClusterName": cluster_name},
        {("KarpenterNodeRole", "Arn"): NODE_ROLE_ARN, ("KarpenterInterruptionQueue", "Arn"): QUEUE_ARN},
    )
    return {
        concern: _document(evaluate(reference[f"{concern}Policy"]["Properties"]["PolicyDocument"]))["Statement"]
        for concern in CONCERNS
    }


class Synth:
    """One stack's template, report findings and a few resolved values."""

    def __init__(self, template: dict[str, Any], findings: list[tuple[str, str]], resolved: dict[str, Any]) -> None:
        self.template = template
        self.resources = template["Resources"]
        self.findings = findings
        self.resolved = resolved

    def of_type(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.resources.items() if r["Type"] == type_}

    def one(self, type_: str, prefix: str = "") -> tuple[str, dict[str, Any]]:
        (found,) = [(k, r) for k, r in self.of_type(type_).items() if k.startswith(prefix)]
        return found

    def id(self, prefix: str) -> str:
        (found,) = [k for k in self.resources if k.startswith(prefix) and not k.startswith(f"{prefix}Logs")]
        return found

    def depends_on(self, logical_id: str) -> set[str]:
        return set(self.resources[logical_id].get("DependsOn", []))

    def evaluator(self) -> Evaluator:
        cluster_id = self.one("AWS::EKS::Cluster")[0]
        queue_id = self.one("AWS::SQS::Queue")[0]
        refs = {cluster_id: self.resolved["cluster_name"]}
        queue_name = self.resources[queue_id]["Properties"]["QueueName"]
        attributes = {
            (self.id("KarpenterNodeRole"), "Arn"): NODE_ROLE_ARN,
            (queue_id, "Arn"): QUEUE_ARN,
            (queue_id, "QueueName"): queue_name,
        }
        return Evaluator(refs, attributes)


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Synth]:
    import aws_cdk as cdk

    from llm_eks.constructs.interruption import InterruptionQueue, InterruptionQueueProps
    from llm_eks.constructs.karpenter import Karpenter, KarpenterProps

    outdir = tmp_path_factory.mktemp("karpenter")
    app = cdk.App(outdir=str(outdir))
    built: dict[str, dict[str, Any]] = {}
    for name, cluster_name, env in (
        ("Named", CLUSTER, cdk.Environment(account=ACCOUNT, region=REGION)),
        ("Generated", None, None),
    ):
        stack = cdk.Stack(app, name, env=env)
        cluster = minimal_cluster(stack, cluster_name=cluster_name)
        queue = InterruptionQueue(
            stack, "Interruption", InterruptionQueueProps(cluster_name=cluster_name or cluster.cluster_name)
        )
        karpenter = Karpenter(
            stack,
            "Karpenter",
            KarpenterProps(cluster=cluster, interruption_queue=queue, depends_on=(cluster.eks_pod_identity_agent,)),
        )
        # Stands in for the node pools chart (cluster.add_cdk8s_chart puts its manifest under the cluster).
        node_pools = cluster.add_manifest(
            "NodePools", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "np", "namespace": "default"}}
        )
        karpenter.add_dependent(node_pools)
        built[name] = {
            "cluster_name": cluster_name or "GENERATED-NAME",
            "node_role_name": stack.resolve(karpenter.node_role_name),
            "helm_values": karpenter.helm_values(),
            "teardown": stack.resolve(karpenter.teardown.resource.node.default_child.logical_id),
        }
    report = synth_with_nag(app)
    findings = [
        (construct["constructPath"], violation["ruleName"])
        for plugin in report["pluginReports"]
        for violation in plugin["violations"]
        for construct in violation["violatingConstructs"]
    ]
    return {
        name: Synth(
            json.loads((outdir / f"{name}.template.json").read_text()),
            [f for f in findings if f[0].startswith(f"{name}/")],
            built[name],
        )
        for name in built
    }


@pytest.fixture(scope="module", params=["Named", "Generated"])
def stack(request: pytest.FixtureRequest, synthesized: dict[str, Synth]) -> Synth:
    return synthesized[request.param]


@pytest.fixture(scope="module")
def named(synthesized: dict[str, Synth]) -> Synth:
    return synthesized["Named"]


# -- node role and access entry -----------------------------------------------------------------------------------


# The one intended difference from Karpenter's node role: aws-node gets the CNI policy through the vpc-cni add-on's
# Pod Identity association (InferenceCluster), so no pod that reaches IMDS on a GPU node can use it.
CNI_POLICY = "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"


def test_node_role_matches_the_reference_except_the_cni_policy(stack: Synth, reference: dict[str, Any]) -> None:
    evaluate = stack.evaluator()
    role = stack.resources[stack.id("KarpenterNodeRole")]["Properties"]
    upstream = reference["KarpenterNodeRole"]["Properties"]
    (statement,) = evaluate(role["AssumeRolePolicyDocument"])["Statement"]
    (upstream_statement,) = evaluate(upstream["AssumeRolePolicyDocument"])["Statement"]
    assert statement["Principal"] == upstream_statement["Principal"] == {"Service": "ec2.amazonaws.com"}
    assert statement["Action"] == "sts:AssumeRole"
    ours, theirs = set(evaluate(role["ManagedPolicyArns"])), set(evaluate(upstream["ManagedPolicyArns"]))
    assert theirs - ours == {CNI_POLICY}
    assert ours - theirs == set()
    assert sorted(ours) == [
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
    ]


def test_node_role_has_an_ec2_linux_access_entry(stack: Synth) -> None:
    _, entry = stack.one("AWS::EKS::AccessEntry", "KarpenterNodeAccessEntry")
    props = entry["Properties"]
    assert props["Type"] == "EC2_LINUX"
    assert props["PrincipalArn"] == {"Fn::GetAtt": [stack.id("KarpenterNodeRole"), "Arn"]}
    assert props["ClusterName"] == {"Ref": stack.one("AWS::EKS::Cluster")[0]}
    assert not props.get("AccessPolicies")  # not allowed on EC2_LINUX entries


def test_node_role_name_is_what_ec2nodeclass_spec_role_takes(stack: Synth) -> None:
    assert stack.resolved["node_role_name"] == {"Ref": stack.id("KarpenterNodeRole")}


# -- controller identity ------------------------------------------------------------------------------------------


def test_controller_role_is_assumable_only_by_pod_identity_for_kube_system_karpenter(stack: Synth) -> None:
    evaluate = stack.evaluator()
    role = stack.resources[stack.id("KarpenterControllerRole")]["Properties"]
    (statement,) = evaluate(role["AssumeRolePolicyDocument"])["Statement"]
    assert statement == {
        "Effect": "Allow",
        "Principal": {"Service": "pods.eks.amazonaws.com"},
        "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Condition": {
            "StringEquals": {
                "aws:RequestTag/eks-cluster-name": stack.resolved["cluster_name"],
                "aws:RequestTag/kubernetes-namespace": "kube-system",
                "aws:RequestTag/kubernetes-service-account": "karpenter",
            }
        },
    }
    assert "ManagedPolicyArns" not in role and "Policies" not in role


def test_pod_identity_association_binds_the_karpenter_service_account(stack: Synth) -> None:
    logical_id, association = stack.one("AWS::EKS::PodIdentityAssociation", "Karpenter")
    props = association["Properties"]
    assert stack.evaluator()(props["ClusterName"]) == stack.resolved["cluster_name"]
    assert props["Namespace"] == "kube-system"
    assert props["ServiceAccount"] == "karpenter"
    assert props["RoleArn"] == {"Fn::GetAtt": [stack.id("KarpenterControllerRole"), "Arn"]}
    # Created after the cluster even when the name is written out (no Ref to imply it).
    assert stack.one("AWS::EKS::Cluster")[0] in stack.depends_on(logical_id)


# -- controller permissions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("concern", CONCERNS)
def test_controller_policy_matches_the_reference_statement_by_statement(
    stack: Synth, reference: dict[str, Any], concern: str
) -> None:
    """Sid, Effect, actions, resources and every condition (operator, key, values), in the reference's order."""
    policy = stack.resources[stack.id(f"KarpenterController{concern}Policy")]["Properties"]
    ours = _document(stack.evaluator()(policy["PolicyDocument"]))
    upstream = reference_policies(reference, stack.resolved["cluster_name"])[concern]
    assert ours["Version"] == "2012-10-17"
    assert [s.get("Sid") for s in ours["Statement"]] == [s["Sid"] for s in upstream]
    for mine, theirs in zip(ours["Statement"], upstream, strict=True):
        assert _normalized(mine) == _normalized(theirs), mine["Sid"]
        # Spelled out for the reader of a failure: the condition keys themselves.
        assert {op: set(block) for op, block in mine.get("Condition", {}).items()} == {
            op: set(block) for op, block in theirs.get("Condition", {}).items()
        }, mine["Sid"]


def test_every_controller_policy_is_attached_to_the_controller_role(stack: Synth) -> None:
    policies = stack.of_type("AWS::IAM::ManagedPolicy")
    controller = {k: p for k, p in policies.items() if k.startswith("KarpenterController")}
    assert len(controller) == len(CONCERNS)
    for policy in controller.values():
        assert policy["Properties"]["Roles"] == [{"Ref": stack.id("KarpenterControllerRole")}]


def test_named_cluster_policies_are_json_objects_with_the_name_written_out(named: Synth) -> None:
    policy = named.resources[named.id("KarpenterControllerNodeLifecyclePolicy")]["Properties"]["PolicyDocument"]
    deletion = next(s for s in policy["Statement"] if s["Sid"] == "AllowScopedDeletion")
    assert deletion["Condition"]["StringEquals"] == {f"aws:ResourceTag/kubernetes.io/cluster/{CLUSTER}": "owned"}


def test_generated_cluster_name_policies_are_one_sub_each(synthesized: dict[str, Synth]) -> None:
    """A condition KEY cannot hold an intrinsic, so a token cluster name goes through Fn::Sub, as upstream."""
    generated = synthesized["Generated"]
    policy = generated.resources[generated.id("KarpenterControllerNodeLifecyclePolicy")]["Properties"]
    text, variables = policy["PolicyDocument"]["Fn::Sub"]
    assert "aws:ResourceTag/kubernetes.io/cluster/${ClusterName}" in text
    assert variables == {"ClusterName": {"Ref": generated.one("AWS::EKS::Cluster")[0]}}


def test_each_policy_fits_the_managed_policy_size_limit_in_the_worst_case() -> None:
    """IAM counts a managed policy without whitespace, limit 6,144: use the longest names a deploy can have."""
    worst = {
        "${ClusterName}": "c" * 100,
        "${AWS::Partition}": "aws-iso-b",
        "${AWS::Region}": "ap-southeast-7",
        "${AWS::AccountId}": "123456789012",
        "${NodeRoleArn}": "arn:aws-iso-b:iam::123456789012:role/" + "r" * 64,
        "${InterruptionQueueArn}": "arn:aws-iso-b:sqs:ap-southeast-7:123456789012:" + "q" * 80,
    }
    sizes = {}
    for concern, statements in karpenter_policies.CONTROLLER_POLICIES.items():
        text = karpenter_policies.policy_text(statements)
        for placeholder, value in worst.items():
            text = text.replace(placeholder, value)
        assert "${" not in text
        sizes[concern] = len(re.sub(r"\s", "", text))
    assert max(sizes.values()) <= karpenter_policies.MANAGED_POLICY_MAX_CHARS, sizes
    # Why the split exists: all statements in one document would not fit.
    assert sum(sizes.values()) > karpenter_policies.MANAGED_POLICY_MAX_CHARS


# -- Helm charts --------------------------------------------------------------------------------------------------


def _charts(stack: Synth) -> tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]:
    charts = stack.of_type("Custom::AWSCDK-EKS-HelmChart")
    (crd,) = [(k, c) for k, c in charts.items() if k.startswith("KarpenterCrdChart")]
    (controller,) = [(k, c) for k, c in charts.items() if k.startswith("KarpenterControllerChart")]
    return crd, controller


def test_crd_and_controller_charts_are_pinned_to_the_same_version(stack: Synth) -> None:
    (_, crd), (_, controller) = _charts(stack)
    assert crd["Properties"]["Version"] == controller["Properties"]["Version"] == KARPENTER_VERSION
    # Karpenter publishes its charts without the tag's leading "v".
    assert re.fullmatch(r"\d+\.\d+\.\d+", KARPENTER_VERSION)


def test_charts_come_from_karpenters_public_ecr_into_kube_system(stack: Synth) -> None:
    (_, crd), (_, controller) = _charts(stack)
    assert crd["Properties"]["Repository"] == "oci://public.ecr.aws/karpenter/karpenter-crd"
    assert controller["Properties"]["Repository"] == "oci://public.ecr.aws/karpenter/karpenter"
    assert (crd["Properties"]["Release"], controller["Properties"]["Release"]) == ("karpenter-crd", "karpenter")
    for chart in (crd, controller):
        assert chart["Properties"]["Namespace"] == "kube-system"
        assert "CreateNamespace" not in chart["Properties"]
    # The CRDs are karpenter-crd's: the controller chart must not install (and then never upgrade) its own copy.
    assert controller["Properties"]["SkipCrds"] is True
    assert "SkipCrds" not in crd["Properties"]


def test_helm_waits_but_gives_up_before_the_kubectl_lambda_does(stack: Synth) -> None:
    from llm_eks.constructs.karpenter import KUBECTL_HANDLER_TIMEOUT_MINUTES

    for _, chart in _charts(stack):
        assert chart["Properties"]["Wait"] is True
        seconds = int(chart["Properties"]["Timeout"].removesuffix("s"))
        assert seconds <= (KUBECTL_HANDLER_TIMEOUT_MINUTES - 2) * 60
    (_, crd), (_, controller) = _charts(stack)
    assert (crd["Properties"]["Timeout"], controller["Properties"]["Timeout"]) == ("300s", "600s")


def test_helm_values_carry_the_queue_name_token_and_the_cluster_name(stack: Synth) -> None:
    (_, _), (_, controller) = _charts(stack)
    raw = controller["Properties"]["Values"]
    queue_id = stack.one("AWS::SQS::Queue")[0]
    # The very attribute of the queue resource, not a second spelling of the name (nor its ARN).
    assert {"Fn::GetAtt": [queue_id, "QueueName"]} in raw["Fn::Join"][1]
    values = json.loads(stack.evaluator()(raw))
    queue_name = stack.evaluator()(stack.resources[queue_id]["Properties"]["QueueName"])
    assert values["settings"] == {
        "clusterName": stack.resolved["cluster_name"],
        "interruptionQueue": queue_name,
        # Node repair off unless asked for (Alpha, off in the chart); reserved capacity on explicitly (Beta, on).
        "featureGates": {"nodeRepair": False, "reservedCapacity": True},
    }
    assert queue_name == stack.resolved["cluster_name"]


def test_helm_values_pin_two_guaranteed_replicas_to_the_system_nodes(stack: Synth) -> None:
    values = stack.resolved["helm_values"]
    assert values["replicas"] == 2
    assert values["nodeSelector"] == {"kubernetes.io/os": "linux", "llm-eks.io/node-role": "system"}
    resources = values["controller"]["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "1", "memory": "1Gi"}
    # The chart creates the service account Pod Identity is associated with; no IRSA annotation.
    assert values["serviceAccount"] == {"create": True, "name": "karpenter"}


def test_controller_is_told_its_region_because_pods_cannot_reach_imds(stack: Synth) -> None:
    (_, _), (_, controller) = _charts(stack)
    values = json.loads(stack.evaluator()(controller["Properties"]["Values"]))
    assert values["controller"]["env"] == [{"name": "AWS_REGION", "value": REGION}]


# -- ordering -----------------------------------------------------------------------------------------------------


def test_controller_chart_waits_for_crds_identity_permissions_queue_and_prerequisites(stack: Synth) -> None:
    (crd_id, _), (controller_id, _) = _charts(stack)
    needs = stack.depends_on(controller_id)
    assert crd_id in needs
    assert stack.one("AWS::EKS::PodIdentityAssociation", "Karpenter")[0] in needs
    assert {stack.id(f"KarpenterController{c}Policy") for c in CONCERNS} <= needs
    assert stack.one("AWS::SQS::Queue")[0] in needs
    assert stack.one("AWS::EKS::Addon")[0] in needs  # the Pod Identity agent, passed as depends_on
    assert crd_id not in stack.depends_on(crd_id) and controller_id not in stack.depends_on(crd_id)


def test_node_pools_depend_on_crds_and_controller_so_they_are_deleted_first(stack: Synth) -> None:
    (crd_id, _), (controller_id, _) = _charts(stack)
    (node_pools_id,) = [k for k in stack.resources if k.startswith("ClustermanifestNodePools")]
    assert {crd_id, controller_id, stack.resolved["teardown"]} <= stack.depends_on(node_pools_id)


def test_teardown_runs_after_the_controller_and_before_cluster_vpc_and_node_role(stack: Synth) -> None:
    teardown = stack.resolved["teardown"]
    (_, _), (controller_id, _) = _charts(stack)
    assert teardown in stack.depends_on(controller_id)
    needs = stack.depends_on(teardown)
    assert stack.one("AWS::EKS::Cluster")[0] in needs
    assert stack.one("AWS::EC2::VPC")[0] in needs
    assert {r for r in stack.of_type("AWS::EC2::Subnet")} <= needs
    assert {stack.id("KarpenterNodeRole"), stack.one("AWS::EKS::AccessEntry", "KarpenterNodeAccessEntry")[0]} <= needs


# -- quality gates ------------------------------------------------------------------------------------------------


def test_no_unacknowledged_cdk_nag_findings_in_our_constructs(stack: Synth) -> None:
    ours = [f for f in stack.findings if "/Karpenter/" in f[0] or "/Interruption/" in f[0]]
    assert ours == []


def test_cfn_lint_passes(synthesized: dict[str, Synth], tmp_path: Path) -> None:
    """The "Generated" stack only: the named, concrete-environment shape is the default app's, which test_quality
    lints."""
    path = tmp_path / "Generated.json"
    path.write_text(json.dumps(synthesized["Generated"].template))
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    # W3005: CDK's own redundant DependsOn. W3010: the bare test VPC uses CDK's placeholder zones (no lookups).
    result = subprocess.run(
        [str(cfn_lint), "--ignore-checks", "W3005", "W3010", "--", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# -- props --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"version": "v1.14.1"},
            "version: 'v1.14.1' is not allowed; Karpenter charts are versioned MAJOR.MINOR.PATCH without a leading "
            "'v' (e.g. 1.14.1) [LLMEKS-E302]",
        ),
        (
            {"helm_timeout_minutes": 15},
            "helm_timeout_minutes: 15 is not allowed; must be between 1 and 13 (the kubectl provider's Lambda stops "
            "at 15) [LLMEKS-E302]",
        ),
        ({"replicas": 0}, "replicas: 0 is not allowed; must be at least 1 [LLMEKS-E302]"),
        (
            {"controller_memory": "1 GB"},
            "controller_memory: '1 GB' is not allowed; must be a Kubernetes quantity like 1, 500m, 1Gi [LLMEKS-E302]",
        ),
        (
            {"system_node_selector": {}},
            "system_node_selector: {} is not allowed; the controller must be pinned to nodes Karpenter does not manage"
            " [LLMEKS-E302]",
        ),
    ],
    ids=["leading-v", "timeout", "replicas", "memory", "selector"],
)
def test_bad_props_are_one_line_errors(change: dict[str, Any], message: str) -> None:
    from llm_eks.constructs.karpenter import KarpenterProps

    props = KarpenterProps(cluster=None, interruption_queue=None, **change)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as error:
        props.validate()
    assert str(error.value) == message


def test_cni_policy_stays_on_the_node_role_only_when_asked() -> None:
    """For a cluster whose aws-node still uses the node role (no vpc-cni Pod Identity association)."""
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from llm_eks.constructs.interruption import InterruptionQueue, InterruptionQueueProps
    from llm_eks.constructs.karpenter import Karpenter, KarpenterProps

    stack = cdk.Stack(cdk.App(), "LegacyCni")
    cluster = minimal_cluster(stack, cluster_name=CLUSTER)
    queue = InterruptionQueue(stack, "Interruption", InterruptionQueueProps(cluster_name=CLUSTER))
    props = KarpenterProps(cluster=cluster, interruption_queue=queue, teardown=False, cni_policy_on_node_role=True)
    karpenter = Karpenter(stack, "Karpenter", props)
    role = Template.from_stack(stack).to_json()["Resources"][
        stack.resolve(karpenter.node_role.node.default_child.logical_id)
    ]
    arns = [arn["Fn::Join"][1][-1] for arn in role["Properties"]["ManagedPolicyArns"]]
    assert sorted(arns) == [
        ":iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
        ":iam::aws:policy/AmazonEKSWorkerNodePolicy",
        ":iam::aws:policy/AmazonEKS_CNI_Policy",
        ":iam::aws:policy/AmazonSSMManagedInstanceCore",
    ]
