"""`compute: auto-mode` synthesized whole: examples/auto_mode (one model behind an internal ALB), the largest model
(two p5.48xlarge over EFA in a Capacity Block) on Auto Mode, the Inferentia2 example on Auto Mode, and the Auto Mode
example's own environment on self-managed Karpenter for the side-by-side. Each stack passes cdk-nag, llm-eks's checks
and cfn-lint; every Kubernetes object validates against the pinned schemas (Auto Mode's NodeClass against the schema
written from the EKS User Guide)."""

from __future__ import annotations

import collections
import contextlib
import json
import math
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import cdk8s
import pytest
import yaml
from aws_cdk.assertions import Template
from constructs import Construct

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.constructs.cluster import InferenceCluster, InferenceClusterProps
from llm_eks.constructs.gpu_devices import gpu_options_for
from llm_eks.error_codes import E303, E304
from llm_eks.infra.app import add_checks, build_app, new_app, write_review
from llm_eks.manifests.checks import check_objects
from llm_eks.manifests.disruption import AUTO_MODE_GPU_DISRUPTION
from llm_eks.manifests.gateway import GatewayProps
from llm_eks.manifests.gateway.proxy import envoy_proxy
from llm_eks.manifests.node_pools import GpuPoolSpec, NodePoolsChart, NodePoolsProps
from llm_eks.manifests.node_pools.auto_mode import SYSTEM_POOL_SELECTOR, SYSTEM_POOL_TOLERATIONS, builtin_system_pool
from tests.admission import denials
from tests.coded import raises_code
from tests.conftest import REPO_ROOT
from tests.golden_output import AUTO_MODE_GOLDEN, collect
from tests.kube_schema import assert_valid
from tests.test_reserved_capacity import LARGEST

EXAMPLE = REPO_ROOT / "examples" / "auto_mode"
AUTO = "auto"
EXAMPLE_BODY = json.loads((EXAMPLE / "cdk.json").read_text())["context"]["environments"][AUTO]
# The same environment on self-managed Karpenter.
KARPENTER = "karpenter"
# The largest model on Auto Mode: replicas of two p5.48xlarge over EFA, in a two-node Capacity Block.
LARGEST_AUTO = "largest-auto"
LARGEST_BODY = {
    **LARGEST,
    "compute": "auto-mode",
    "workload": {
        **LARGEST["workload"],
        "replicas": {"min": 1, "max": 2},
        "acknowledged_warnings": {"llm-eks:plan-reservation": "the second replica waits for a second block"},
    },
}
# The Inferentia2 example on Auto Mode, on inf2.24xlarge at 16 concurrent requests: with self-managed Karpenter its
# pods take 2 of the 6 chips (the Neuron scheduler extension's contiguous sets); Auto Mode's own device plugin hands
# out one chip or all of them.
INF2_BODY = json.loads((REPO_ROOT / "examples" / "inf2_model" / "cdk.json").read_text())["context"]["environments"]
NEURON_AUTO = "inf2-auto"
NEURON_AUTO_BODY = {
    **INF2_BODY["inf2"],
    "compute": "auto-mode",
    "workload": {**INF2_BODY["inf2"]["workload"], "accelerator": "inf2.24xlarge", "target_concurrency": 16},
}
# Two models behind the inference gateway (the multi-model example) on Auto Mode: the gateway's pods on its system
# pool, its NLB Auto Mode's.
MULTI_BODY = json.loads((REPO_ROOT / "examples" / "multi_model" / "cdk.json").read_text())["context"]["environments"]
GATEWAY_AUTO = "gateway-auto"
GATEWAY_AUTO_BODY = {**MULTI_BODY["team-b"], "compute": "auto-mode"}
CONTEXT = {
    "environments": {
        AUTO: EXAMPLE_BODY,
        GATEWAY_AUTO: GATEWAY_AUTO_BODY,
        KARPENTER: {key: value for key, value in EXAMPLE_BODY.items() if key != "compute"},
        LARGEST_AUTO: LARGEST_BODY,
        NEURON_AUTO: NEURON_AUTO_BODY,
    }
}


class Synth:
    def __init__(self, outdir: Path) -> None:
        self.outdir = outdir

    def template(self, env: str) -> dict[str, Any]:
        template: dict[str, Any] = json.loads((self.outdir / f"LlmEks-{env}.template.json").read_text())
        return template

    def resources(self, env: str, kind: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.template(env)["Resources"].items() if r["Type"] == kind}

    def objects(self, env: str) -> list[dict[str, Any]]:
        folder = self.outdir / "manifests" / env
        return [
            d
            for p in sorted(folder.glob("*.yaml"))
            if p.name != "helm-releases.yaml"
            for d in yaml.safe_load_all(p.read_text())
            if d
        ]

    def named(self, env: str, kind: str, name: str) -> dict[str, Any]:
        (found,) = [o for o in self.objects(env) if o["kind"] == kind and o["metadata"]["name"] == name]
        return found

    def releases(self, env: str) -> dict[str, dict[str, Any]]:
        return {
            r["Properties"]["Release"]: r["Properties"]
            for r in self.resources(env, "Custom::AWSCDK-EKS-HelmChart").values()
        }

    def types(self, env: str) -> collections.Counter[str]:
        return collections.Counter(r["Type"] for r in self.template(env)["Resources"].values())


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The five environments in one app, synthesized with cdk-nag and llm-eks's checks (synth fails on any finding),
    from the example's folder as `cdk synth` runs it."""
    outdir = tmp_path_factory.mktemp("auto-mode")
    with contextlib.chdir(EXAMPLE):
        app = new_app(context=CONTEXT, outdir=str(outdir))
        stacks = build_app(app)
        add_checks(app)
        write_review(app, stacks, app.synth())
    return Synth(outdir)


def test_every_stack_passes_cdk_nag_llm_eks_checks_and_cfn_lint(synth: Synth) -> None:
    report = json.loads((synth.outdir / "validation-report.json").read_text())
    assert report["pluginReports"], "no validation plugin ran"
    assert all(not plugin["violations"] for plugin in report["pluginReports"]), report
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    paths = [str(synth.outdir / f"LlmEks-{env}.template.json") for env in (AUTO, LARGEST_AUTO)]
    result = subprocess.run(
        [str(cfn_lint), "--ignore-checks", "W3005", "--", *paths], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_cluster_runs_auto_modes_compute_storage_and_load_balancing(synth: Synth) -> None:
    (cluster,) = synth.resources(AUTO, "AWS::EKS::Cluster").values()
    props = cluster["Properties"]
    assert props["ComputeConfig"]["Enabled"] is True
    # Only the built-in system pool (the controllers'); GPU and CPU capacity is llm-eks's NodePools.
    assert props["ComputeConfig"]["NodePools"] == ["system"]
    assert props["StorageConfig"] == {"BlockStorage": {"Enabled": True}}
    assert props["KubernetesNetworkConfig"]["ElasticLoadBalancing"] == {"Enabled": True}
    (karpenter,) = synth.resources(KARPENTER, "AWS::EKS::Cluster").values()
    assert karpenter["Properties"]["ComputeConfig"] == {"Enabled": False}


def test_no_karpenter_interruption_queue_device_plugin_node_group_or_add_on(synth: Synth) -> None:
    for env in (AUTO, LARGEST_AUTO, NEURON_AUTO):
        releases = synth.releases(env)
        assert not {"karpenter", "karpenter-crd", "nvidia-device-plugin", "neuron-device-plugin"} & set(releases)
        assert not {"aws-load-balancer-controller"} & set(releases)
        types = synth.types(env)
        for kind in ("AWS::SQS::Queue", "AWS::EKS::Nodegroup", "AWS::EKS::Addon"):
            assert types[kind] == 0, (env, kind)
        # The only EventBridge rule is the alerting's stack-failure rule: none feeds an interruption queue.
        rules = synth.resources(env, "AWS::Events::Rule").values()
        assert [r["Properties"]["EventPattern"]["source"] for r in rules] == [["aws.cloudformation"]], env
        assert not [o for o in synth.objects(env) if o["kind"] == "EC2NodeClass"]
    # What Auto Mode does not run stays: GPU metrics, and the EFA device plugin of the EFA pool.
    assert "dcgm-exporter" in synth.releases(AUTO)
    assert "aws-efa-k8s-device-plugin" in synth.releases(LARGEST_AUTO)
    assert {"karpenter", "karpenter-crd", "aws-load-balancer-controller"} <= set(synth.releases(KARPENTER))


def test_gpu_node_pools_reference_auto_modes_node_class(synth: Synth) -> None:
    pool = synth.named(AUTO, "NodePool", "gpu-g6e")["spec"]["template"]["spec"]
    assert pool["nodeClassRef"] == {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "gpu-nvidia"}
    node_class = synth.named(AUTO, "NodeClass", "gpu-nvidia")["spec"]
    (role_id,) = [k for k, r in synth.resources(AUTO, "AWS::IAM::Role").items() if "AutoModeNodesNodeRole" in k]
    assert node_class["role"] == f"${{Ref:{role_id}}}"
    for env in (AUTO, LARGEST_AUTO):
        assert_valid(synth.objects(env))


def test_neuron_on_auto_mode_takes_the_whole_node_from_auto_modes_device_plugin(synth: Synth) -> None:
    """No Neuron chart (device plugin or scheduler extension) and no second scheduler: the pod takes all six chips of
    its inf2.24xlarge from the plugin Auto Mode's nodes run; the Neuron monitor still runs on the node."""
    on_karpenter = {key: value for key, value in NEURON_AUTO_BODY.items() if key != "compute"}
    (karpenter_plan,) = plan_workloads(parse_environment(KARPENTER, on_karpenter))
    assert karpenter_plan.neuron is not None and karpenter_plan.neuron.scheduler_extension
    assert karpenter_plan.gpus_per_pod == 2
    objects = synth.objects(NEURON_AUTO)
    assert not [o for o in objects if o["kind"] == "Namespace" and o["metadata"]["name"] == "aws-neuron"]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["namespace"] == "inference"]
    pod = deployment["spec"]["template"]["spec"]
    assert "schedulerName" not in pod
    assert pod["containers"][0]["resources"]["limits"]["aws.amazon.com/neuron"] == "6"
    assert not [o for o in objects if o.get("spec", {}).get("template", {}).get("spec", {}).get("schedulerName")]
    pool = synth.named(NEURON_AUTO, "NodePool", "gpu-inf2")["spec"]["template"]["spec"]
    assert pool["nodeClassRef"] == {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "neuron"}
    assert {"key": "eks.amazonaws.com/instance-family", "operator": "In", "values": ["inf2"]} in pool["requirements"]
    assert not [r for r in pool["requirements"] if r["key"].startswith("karpenter.k8s.aws/")]
    monitor = [o["kind"] for o in objects if o["metadata"]["name"] == "neuron-monitor"]
    assert sorted(monitor) == ["DaemonSet", "Service", "ServiceMonitor"]
    assert_valid(objects)


def test_efa_placement_group_and_capacity_block_go_through_the_node_class(synth: Synth) -> None:
    (group_id,) = synth.resources(LARGEST_AUTO, "AWS::EC2::PlacementGroup")
    spec = synth.named(LARGEST_AUTO, "NodeClass", "gpu-nvidia-p5-efa32")["spec"]
    # Auto Mode's NodeClass selects the placement group by name (the group's Ref).
    assert spec["placementGroupSelector"] == {"name": f"${{Ref:{group_id}}}"}
    assert spec["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]
    assert [i["interfaceType"] for i in spec["advancedNetworking"]["networkInterfaces"]].count("efa-only") == 32
    pool = synth.named(LARGEST_AUTO, "NodePool", "gpu-p5-efa32")["spec"]["template"]["spec"]
    # A Capacity Block drains within 8 minutes, whatever the restart time.
    assert pool["terminationGracePeriod"] == "8m"
    assert {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]} in pool["requirements"]


def test_an_expiring_node_waits_for_the_replica_before_it_to_serve_again(synth: Synth) -> None:
    """Expiry is forceful (disruption budgets do not hold it): the grace period lets the PodDisruptionBudget hold a
    second expiring node's replica for one replica's restart on a new node (the plan's scale-out), so two nodes
    expiring together never take two replicas at once. Drift (Auto Mode's weekly AMI) goes one node at a time."""
    (plan,) = plan_workloads(parse_environment(AUTO, EXAMPLE_BODY))
    pool = synth.named(AUTO, "NodePool", "gpu-g6e")["spec"]
    assert pool["template"]["spec"]["expireAfter"] == "480h"
    assert pool["disruption"]["budgets"] == [{"nodes": "1"}]
    restart_minutes = math.ceil(plan.cold_start.scale_out_s / 60)
    assert pool["template"]["spec"]["terminationGracePeriod"] == f"{max(10, restart_minutes)}m"
    (pdb,) = [
        o
        for o in synth.objects(AUTO)
        if o["kind"] == "PodDisruptionBudget" and o["metadata"]["namespace"] != "monitoring"
    ]
    assert pdb["spec"]["maxUnavailable"] == 1
    # A Capacity Block drains within 8 minutes of its end whatever a restart takes.
    largest_pool = synth.named(LARGEST_AUTO, "NodePool", "gpu-p5-efa32")["spec"]["template"]["spec"]
    assert largest_pool["terminationGracePeriod"] == "8m"


def test_iam_node_roles_minimal_access_entry_ec2_and_cluster_role_policies(synth: Synth) -> None:
    roles = synth.resources(AUTO, "AWS::IAM::Role")
    for name in ("PlatformSystemNodeRole", "AutoModeNodesNodeRole"):
        (role,) = [r for k, r in roles.items() if k.startswith(name)]
        policies = [p["Fn::Join"][1][-1] for p in role["Properties"]["ManagedPolicyArns"]]
        assert policies == [
            ":iam::aws:policy/AmazonEKSWorkerNodeMinimalPolicy",
            ":iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
        ]
    (entry,) = [
        r["Properties"]
        for r in synth.resources(AUTO, "AWS::EKS::AccessEntry").values()
        if r["Properties"].get("Type") == "EC2"
    ]
    (policy,) = entry["AccessPolicies"]
    assert policy["AccessScope"] == {"Type": "cluster"}
    assert policy["PolicyArn"]["Fn::Join"][1][-1] == ":eks::aws:cluster-access-policy/AmazonEKSAutoNodePolicy"
    cluster_role = next(r for k, r in roles.items() if k.startswith("PlatformClusterRole"))
    cluster_policies = {
        p["Fn::Join"][1][-1].rpartition("/")[2] for p in cluster_role["Properties"]["ManagedPolicyArns"]
    }
    assert cluster_policies == {
        "AmazonEKSClusterPolicy",
        "AmazonEKSComputePolicy",
        "AmazonEKSBlockStoragePolicy",
        "AmazonEKSLoadBalancingPolicy",
        "AmazonEKSNetworkingPolicy",
    }
    trust = cluster_role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert ["sts:TagSession"] in [s["Action"] if isinstance(s["Action"], list) else [s["Action"]] for s in trust]
    (tagging,) = [r for k, r in synth.resources(AUTO, "AWS::IAM::Policy").items() if "AutoModeTagging" in k]
    (statement,) = tagging["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Condition"]["StringEquals"] == {
        "aws:RequestTag/eks:eks-cluster-name": "${aws:PrincipalTag/eks:eks-cluster-name}"
    }


def test_controllers_run_on_the_system_pool_and_storage_and_ingress_move_to_auto_mode(synth: Synth) -> None:
    values = synth.releases(AUTO)["keda"]["Values"]
    keda = json.loads(values) if isinstance(values, str) else values
    assert keda["nodeSelector"] == {"karpenter.sh/nodepool": "system", "kubernetes.io/arch": "amd64"}
    assert keda["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert synth.named(AUTO, "StorageClass", "gp3-encrypted")["provisioner"] == "ebs.csi.eks.amazonaws.com"
    assert synth.named(KARPENTER, "StorageClass", "gp3-encrypted")["provisioner"] == "ebs.csi.aws.com"
    assert synth.named(AUTO, "IngressClass", "alb")["spec"] == {"controller": "eks.amazonaws.com/alb"}
    assert synth.named(AUTO, "ConfigMap", "amazon-vpc-cni")["data"] == {"enable-network-policy-controller": "true"}


def test_every_gateway_pod_runs_on_the_system_pool_behind_auto_modes_nlb(synth: Synth) -> None:
    """Envoy (EnvoyProxy), the pickers, Valkey and, in the Helm values, Envoy Gateway's controller, its certgen Job
    and rate-limit service, the AI Gateway's controller and the External Secrets Operator: all on Auto Mode's system
    pool, tolerating its taint. The NLB is Auto Mode's, and the Service policy admits that class."""
    system = {"karpenter.sh/nodepool": "system", "kubernetes.io/arch": "amd64"}
    tolerations = [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    objects = synth.objects(GATEWAY_AUTO)
    assert_valid(objects)
    proxy = synth.named(GATEWAY_AUTO, "EnvoyProxy", "inference")["spec"]["provider"]["kubernetes"]
    pod = proxy["envoyDeployment"]["pod"]
    assert (pod["nodeSelector"], pod["tolerations"]) == (system, tolerations)
    pickers = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-epp")]
    valkey = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "valkey"]
    assert [o["metadata"]["name"] for o in pickers] == ["vllm-chat-epp", "vllm-fast-epp"] and len(valkey) == 1
    for deployment in (*pickers, *valkey):
        spec = deployment["spec"]["template"]["spec"]
        assert (spec["nodeSelector"], spec["tolerations"]) == (system, tolerations), deployment["metadata"]["name"]
    releases = synth.releases(GATEWAY_AUTO)
    values = {name: json.loads(v) if isinstance(v := releases[name]["Values"], str) else v for name in releases}
    eg = values["eg"]
    kubernetes = eg["config"]["envoyGateway"]["provider"]["kubernetes"]
    for placed in (
        eg["deployment"]["pod"],
        eg["certgen"]["job"],
        kubernetes["rateLimitDeployment"]["pod"],
        values["aieg"]["controller"],
        values["external-secrets"],
    ):
        assert (placed["nodeSelector"], placed["tolerations"]) == (system, tolerations)
    service = proxy["envoyService"]
    assert service["type"] == "LoadBalancer" and service["loadBalancerClass"] == "eks.amazonaws.com/nlb"
    assert service["annotations"]["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert "service.beta.kubernetes.io/aws-load-balancer-type" not in service["annotations"]
    # The Service Envoy Gateway makes of envoyService is admitted; one for the AWS Load Balancer Controller is not.
    policy = synth.named(GATEWAY_AUTO, "ValidatingAdmissionPolicy", "llm-eks-gateway-services")
    envoy_service = {
        "metadata": {
            "name": "envoy-inference",
            "namespace": "inference-gateway",
            "annotations": service["annotations"],
        },
        "spec": {"type": "LoadBalancer", "loadBalancerClass": service["loadBalancerClass"]},
    }
    assert denials(policy, envoy_service, kind="Service") == []
    other_class = {**envoy_service, "spec": {"type": "LoadBalancer", "loadBalancerClass": "service.k8s.aws/nlb"}}
    assert denials(policy, other_class, kind="Service") != []
    # No AWS Load Balancer Controller and no IngressClass: Auto Mode's load balancing makes the NLB itself.
    assert "aws-load-balancer-controller" not in releases
    assert not [o for o in objects if o["kind"] == "IngressClass"]


def test_the_guard_runs_before_the_cluster_in_both_modes(synth: Synth) -> None:
    for env, mode in ((AUTO, "auto-mode"), (KARPENTER, "karpenter")):
        ((guard_id, guard),) = synth.resources(env, "Custom::ComputeModeGuard").items()
        assert guard["Properties"]["ComputeMode"] == mode
        assert guard["Properties"]["ClusterName"] == f"llm-eks-{env}"
        (cluster,) = synth.resources(env, "AWS::EKS::Cluster").values()
        assert guard_id in cluster["DependsOn"]


def _ids(template: dict[str, Any]) -> set[str]:
    """Logical ids without CDK's 8-character hash."""
    return {re.sub(r"[0-9A-F]{8}$", "", key) for key in template["Resources"]}


def test_side_by_side_auto_mode_adds_and_removes_these_resources(synth: Synth) -> None:
    """The example's environment on both compute modes: what Auto Mode takes off the template, and what it adds."""
    auto, karpenter = synth.types(AUTO), synth.types(KARPENTER)
    assert (sum(karpenter.values()), sum(auto.values())) == (144, 106)
    assert dict(karpenter - auto) == {
        # The system node group and its launch template; the managed add-ons (vpc-cni, CoreDNS, kube-proxy, Pod
        # Identity agent, EBS CSI, node monitoring agent) and the VPC CNI's and EBS CSI's Pod Identity roles.
        "AWS::EKS::Nodegroup": 1,
        "AWS::EC2::LaunchTemplate": 1,
        "AWS::EKS::Addon": 6,
        # The interruption queue and its five EventBridge rules.
        "AWS::SQS::Queue": 1,
        "AWS::SQS::QueuePolicy": 1,
        "AWS::Events::Rule": 5,
        # Karpenter: its controller's six policies, its role and Pod Identity, its node role; the teardown Lambda
        # and its Provider framework; the AWS Load Balancer Controller's role and Pod Identity.
        "AWS::IAM::ManagedPolicy": 6,
        "AWS::IAM::Role": 6,
        "AWS::IAM::Policy": 2,
        "AWS::EKS::PodIdentityAssociation": 2,
        "AWS::Lambda::Function": 2,
        "AWS::Logs::LogGroup": 2,
        "Custom::KarpenterTeardown": 1,
        # karpenter-crd, karpenter and aws-load-balancer-controller.
        "Custom::AWSCDK-EKS-HelmChart": 3,
    }
    added = _ids(synth.template(AUTO)) - _ids(synth.template(KARPENTER))
    assert added == {
        "AutoModeNodesNodeRole",
        "AutoModeNodesNodeAccessEntry",
        "PlatformAutoModeTagging",
        "PlatformClustermanifestIngressClass",
        "PlatformClustermanifestNetworkPolicyController",
    }
    assert len(_ids(synth.template(KARPENTER)) - _ids(synth.template(AUTO))) == 43


# --- the constructs alone, without llm-eks's config -------------------------------------------------------------


class AutoModeComposed(cdk.Stack):
    """Auto Mode from the constructs, as a user's own app composes them: the cluster, the NodeClasses' node role,
    KEDA (on the system pool by default), the GPU device software and a node pools chart."""

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id, env=cdk.Environment(account="123456789012", region="us-west-2"))
        self.platform = InferenceCluster(
            self, "Platform", InferenceClusterProps(cluster_name="team-auto", auto_mode=True)
        )
        self.nodes = nodes = self.platform.add_auto_mode_nodes()
        self.platform.add_keda()
        charts = cdk8s.App()
        pools = NodePoolsChart(
            charts,
            "node-pools",
            NodePoolsProps(
                cluster_name="team-auto",
                node_role_name=nodes.node_role_name,
                gpu_pools=(
                    GpuPoolSpec(
                        name="gpu-g6e",
                        vendor="nvidia",
                        instance_family="g6e",
                        instance_types=("g6e.xlarge",),
                        disruption=AUTO_MODE_GPU_DISRUPTION,
                    ),
                ),
                cpu_pool=None,
                compute="auto-mode",
                security_group_ids=(self.platform.cluster.cluster_security_group_id,),
            ),
        )
        self.pools = self.platform.add_chart("node-pools", pools, after=(nodes,))
        self.platform.add_gpu_devices(gpu_options_for(pools.props))


def test_the_constructs_compose_auto_mode_without_config_objects(tmp_path: Path) -> None:
    app = new_app(context={}, outdir=str(tmp_path))
    stack = AutoModeComposed(app, "TeamAuto")
    add_checks(app)
    app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    assert all(not plugin["violations"] for plugin in report["pluginReports"]), report
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::EKS::Cluster", {"ComputeConfig": {"Enabled": True, "NodePools": ["system"]}})
    template.resource_count_is("AWS::EKS::Nodegroup", 0)
    template.resource_count_is("AWS::EKS::Addon", 0)
    keda = next(
        r["Properties"]["Values"]
        for r in template.find_resources("Custom::AWSCDK-EKS-HelmChart").values()
        if r["Properties"]["Release"] == "keda"
    )
    assert json.loads(keda)["nodeSelector"]["karpenter.sh/nodepool"] == "system"
    releases = {r["Properties"]["Release"] for r in template.find_resources("Custom::AWSCDK-EKS-HelmChart").values()}
    assert "nvidia-device-plugin" not in releases and "dcgm-exporter" in releases
    # The node pools wait for the NodeClasses' role and its access entry (deleted after them).
    pools_id = stack.get_logical_id(stack.pools.node.default_child)
    depends = template.to_json()["Resources"][pools_id]["DependsOn"]
    for resource in (stack.nodes.node_access_entry, stack.nodes.node_role):
        assert stack.get_logical_id(resource.node.default_child) in depends


def test_karpenter_and_the_lb_controller_are_refused_on_an_auto_mode_cluster() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "Refused")
    platform = InferenceCluster(stack, "Platform", InferenceClusterProps(cluster_name="refused", auto_mode=True))
    with raises_code(E304, match=r"^add_karpenter: not allowed on an EKS Auto Mode cluster, which runs"):
        platform.add_karpenter()
    with raises_code(E304, match=r"^add_load_balancer_controller: not allowed on an EKS Auto Mode cluster"):
        platform.add_load_balancer_controller()
    with raises_code(E303, match=r"^system_min_size: 4 is not allowed with auto_mode; the controllers run"):
        InferenceClusterProps(cluster_name="x", auto_mode=True, system_min_size=4).validate()


def test_the_scheduling_check_places_envoy_gateways_envoy_pods() -> None:
    """The EnvoyProxy's Envoy pods are pods like a Deployment's to the SCHEDULING check: without the system pool's
    toleration they are reported, with it they place."""
    placed = GatewayProps(routes=(), tenants=(), expose="cluster", node_selector=SYSTEM_POOL_SELECTOR)
    (finding,) = check_objects([builtin_system_pool(), envoy_proxy(placed)])
    assert str(finding).startswith(
        "[SCHEDULING] EnvoyProxy/inference-gateway/inference: envoy: no NodePool can run this pod (system: does not "
        "tolerate taint CriticalAddonsOnly:NoSchedule); EKS Auto Mode would leave it Pending"
    )
    tolerated = replace(placed, tolerations=SYSTEM_POOL_TOLERATIONS)
    assert check_objects([builtin_system_pool(), envoy_proxy(tolerated)]) == []


def test_the_auto_mode_example_equals_its_golden_files(synth: Synth) -> None:
    """examples/auto_mode's output is held in tests/golden_auto_mode like the default app's in tests/golden: a change
    of Auto Mode output shows in a reviewed diff (`make golden` rewrites both)."""
    expected = {
        str(path.relative_to(AUTO_MODE_GOLDEN)): path.read_text()
        for path in sorted(AUTO_MODE_GOLDEN.rglob("*"))
        if path.is_file()
    }
    actual = collect(synth.outdir, (AUTO,))
    assert sorted(actual) == sorted(expected), "files differ; `make golden` rewrites them"
    for name, text in expected.items():
        assert actual[name] == text, f"{name} differs; `make golden` rewrites it"
