"""What a reviewer checks on the cluster, read from the synthesized templates of the default app."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from tests.conftest import ENVIRONMENTS


def resources(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: r["Properties"] for k, r in template["Resources"].items() if r["Type"] == type_}


def only(template: dict[str, Any], type_: str) -> dict[str, Any]:
    (props,) = resources(template, type_).values()
    return props


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_cluster_version_logging_encryption_endpoint(templates: dict[str, Any], env: str) -> None:
    cluster = only(templates[env], "AWS::EKS::Cluster")
    assert cluster["Name"] == f"llm-eks-{env}"
    assert cluster["Version"] == "1.35"
    assert {t["Type"] for t in cluster["Logging"]["ClusterLogging"]["EnabledTypes"]} == {
        "api",
        "audit",
        "authenticator",
        "controllerManager",
        "scheduler",
    }
    assert cluster["EncryptionConfig"][0]["Resources"] == ["secrets"]
    key_id = cluster["EncryptionConfig"][0]["Provider"]["KeyArn"]["Fn::GetAtt"][0]
    assert templates[env]["Resources"][key_id]["Properties"]["EnableKeyRotation"] is True
    # Private endpoint by default; the deploying role gets no standing admin.
    assert cluster["ResourcesVpcConfig"]["EndpointPublicAccess"] is False
    assert cluster["ResourcesVpcConfig"]["EndpointPrivateAccess"] is True
    assert cluster["AccessConfig"] == {"AuthenticationMode": "API", "BootstrapClusterCreatorAdminPermissions": False}
    # Node-group mode, not Auto Mode (which would fight Karpenter).
    assert cluster["ComputeConfig"] == {"Enabled": False}


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_system_node_group_spans_two_azs(templates: dict[str, Any], env: str) -> None:
    groups = resources(templates[env], "AWS::EKS::Nodegroup")
    (group,) = groups.values()
    # No fixed name: a create-only change (node role, launch template, instance type) must be able to replace it.
    assert "NodegroupName" not in group
    assert group["ScalingConfig"]["MinSize"] >= 2
    assert group["CapacityType"] == "ON_DEMAND"
    assert group["Labels"] == {"llm-eks.io/node-role": "system"}
    assert group["AmiType"] == "AL2023_x86_64_STANDARD"
    assert "Taints" not in group
    subnet_ids = [s["Ref"] for s in group["Subnets"]]
    assert len(subnet_ids) >= 2
    subnets = templates[env]["Resources"]
    zones = {json.dumps(subnets[s]["Properties"]["AvailabilityZone"], sort_keys=True) for s in subnet_ids}
    assert len(zones) == len(subnet_ids) >= 2
    for s in subnet_ids:
        tags = {t["Key"]: t["Value"] for t in subnets[s]["Properties"]["Tags"]}
        assert tags["karpenter.sh/discovery"] == f"llm-eks-{env}"


def test_node_group_sizes_follow_config(templates: dict[str, Any]) -> None:
    prod = list(resources(templates["prod"], "AWS::EKS::Nodegroup").values())
    assert prod[0]["ScalingConfig"] == {"DesiredSize": 3, "MaxSize": 6, "MinSize": 3}
    assert prod[0]["InstanceTypes"] == ["m7i.2xlarge"]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_managed_addons(templates: dict[str, Any], env: str) -> None:
    addons = {a["AddonName"]: a for a in resources(templates[env], "AWS::EKS::Addon").values()}
    assert set(addons) >= {"vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent", "aws-ebs-csi-driver"}
    ebs = addons["aws-ebs-csi-driver"]
    (association,) = ebs["PodIdentityAssociations"]
    assert association["ServiceAccount"] == "ebs-csi-controller-sa"
    role = templates[env]["Resources"][association["RoleArn"]["Fn::GetAtt"][0]]["Properties"]
    statement = role["AssumeRolePolicyDocument"]["Statement"][0]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]


def test_vpc_flow_logs_and_nat_per_az(templates: dict[str, Any]) -> None:
    template = Template.from_json(templates["dev"])
    template.resource_count_is("AWS::EC2::NatGateway", 2)
    template.has_resource_properties("AWS::EC2::FlowLog", {"TrafficType": "REJECT", "ResourceType": "VPC"})
    template.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": "10.0.0.0/16"})


def test_kubectl_provider_runs_in_the_vpc(templates: dict[str, Any]) -> None:
    functions = resources(templates["dev"], "AWS::Lambda::Function")
    handlers = [f for k, f in functions.items() if "KubectlProviderHandler" in k]
    assert handlers and all(h["VpcConfig"]["SubnetIds"] for h in handlers)
    assert handlers[0]["Timeout"] == 900


def test_stacks_are_tagged(templates: dict[str, Any]) -> None:
    Template.from_json(templates["prod"]).has_resource_properties(
        "AWS::EKS::Cluster",
        {"Tags": Match.array_with([{"Key": "cost-center", "Value": "ml-platform-prod"}])},
    )


def test_admin_and_rollout_roles_get_access_entries() -> None:
    """Access entries for configured admin and rollout roles (built in-process: the default app lists none)."""
    import aws_cdk as cdk

    from llm_eks.config import parse_environment
    from llm_eks.infra.stack import InferenceStack
    from tests.environments import plan_environment

    arn = "arn:aws:iam::123456789012:role/platform-admins"
    release = "arn:aws:iam::123456789012:role/release-managers"
    config = parse_environment(
        "adm",
        {
            "admin_role_arns": [arn],
            "rollout_role_arns": [release],
            "endpoint": {"access": "public", "public_cidrs": ["198.51.100.0/24"]},
        },
    )
    stack = InferenceStack(cdk.App(), config, plan_environment(config))
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::EKS::AccessEntry",
        {
            "PrincipalArn": arn,
            "AccessPolicies": [
                {
                    "AccessScope": {"Type": "cluster"},
                    "PolicyArn": Match.any_value(),
                }
            ],
        },
    )
    # `llm-eks canary`/`rollback` and verify: their groups' RBAC only, no EKS access policy.
    (entry,) = [
        r["Properties"]
        for r in template.find_resources("AWS::EKS::AccessEntry").values()
        if r["Properties"]["PrincipalArn"] == release
    ]
    assert entry["KubernetesGroups"] == ["llm-eks-verify", "llm-eks-rollout"]
    assert entry["Type"] == "STANDARD" and "AccessPolicies" not in entry
    template.has_resource_properties(
        "AWS::EKS::Cluster",
        {
            "ResourcesVpcConfig": Match.object_like(
                {"EndpointPublicAccess": True, "PublicAccessCidrs": ["198.51.100.0/24"]}
            )
        },
    )


# -- system node hardening and the VPC CNI's own identity (issue 8) -------------------------------------------------

CNI_POLICY = "AmazonEKS_CNI_Policy"


def managed_policy_names(role: dict[str, Any]) -> list[str]:
    """AWS managed policy names of an AWS::IAM::Role: the tail of each `arn:${Partition}:iam::aws:policy/...` join
    (references to our own managed policies are skipped)."""
    arns = [a["Fn::Join"][1][-1] if "Fn::Join" in a else "" for a in role.get("ManagedPolicyArns", [])]
    return [arn.rsplit("/", 1)[-1] for arn in arns if ":iam::aws:policy/" in arn]


def system_nodegroup(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (found,) = [(k, r) for k, r in template["Resources"].items() if r["Type"] == "AWS::EKS::Nodegroup"]
    return found


def vpc_cni(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (k, r)
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == "vpc-cni"
    ]
    return found


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_system_nodes_use_a_launch_template_that_keeps_pods_off_imds(templates: dict[str, Any], env: str) -> None:
    template = templates[env]
    _, group = system_nodegroup(template)
    props = group["Properties"]
    # The root volume lives in the launch template now; EKS rejects DiskSize next to one.
    assert "DiskSize" not in props
    template_id = props["LaunchTemplate"]["Id"]["Ref"]
    assert props["LaunchTemplate"]["Version"] == {"Fn::GetAtt": [template_id, "LatestVersionNumber"]}
    data = template["Resources"][template_id]["Properties"]["LaunchTemplateData"]
    assert data["MetadataOptions"] == {
        "HttpEndpoint": "enabled",
        "HttpTokens": "required",
        "HttpPutResponseHopLimit": 1,
    }
    # The AL2023 EKS AMI's root device; the node group's configured size, encrypted gp3.
    assert data["BlockDeviceMappings"] == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {"DeleteOnTermination": True, "Encrypted": True, "VolumeSize": 50, "VolumeType": "gp3"},
        }
    ]
    # A managed node group's launch template must not name an instance profile (EKS sets the node role).
    assert "IamInstanceProfile" not in data


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_no_node_role_carries_the_cni_policy(templates: dict[str, Any], env: str) -> None:
    template = templates[env]
    _, group = system_nodegroup(template)
    role_id = group["Properties"]["NodeRole"]["Fn::GetAtt"][0]
    role = template["Resources"][role_id]["Properties"]
    assert sorted(managed_policy_names(role)) == ["AmazonEC2ContainerRegistryPullOnly", "AmazonEKSWorkerNodePolicy"]
    roles = {k: r["Properties"] for k, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Role"}
    with_cni = [k for k, r in roles.items() if CNI_POLICY in managed_policy_names(r)]
    # Only the vpc-cni add-on's Pod Identity role; no EC2 (node) role, the Karpenter GPU node role included.
    _, addon = vpc_cni(template)
    (association,) = addon["Properties"]["PodIdentityAssociations"]
    assert with_cni == [association["RoleArn"]["Fn::GetAtt"][0]]
    for role_props in roles.values():
        principals = json.dumps(role_props["AssumeRolePolicyDocument"])
        if '"ec2.' in principals:
            assert CNI_POLICY not in managed_policy_names(role_props)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_vpc_cni_uses_pod_identity_and_enforces_network_policy(templates: dict[str, Any], env: str) -> None:
    template = templates[env]
    addon_id, addon = vpc_cni(template)
    props = addon["Properties"]
    assert json.loads(props["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}
    (association,) = props["PodIdentityAssociations"]
    assert association["ServiceAccount"] == "aws-node"
    role = template["Resources"][association["RoleArn"]["Fn::GetAtt"][0]]["Properties"]
    assert managed_policy_names(role) == [CNI_POLICY]
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    condition = statement["Condition"]["StringEquals"]
    assert condition["aws:RequestTag/kubernetes-namespace"] == "kube-system"
    assert condition["aws:RequestTag/kubernetes-service-account"] == "aws-node"
    cluster_id = next(k for k, r in template["Resources"].items() if r["Type"] == "AWS::EKS::Cluster")
    assert condition["aws:RequestTag/eks-cluster-arn"] == {"Fn::GetAtt": [cluster_id, "Arn"]}
    # Order: the Pod Identity agent, then vpc-cni (with its association), then the nodes, so the first aws-node
    # pod is admitted with Pod Identity credentials.
    agent_id = next(
        k
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == "eks-pod-identity-agent"
    )
    assert agent_id in addon["DependsOn"]
    group_id, group = system_nodegroup(template)
    assert addon_id in group["DependsOn"]
    assert group_id not in addon.get("DependsOn", [])


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_only_each_addons_own_service_account_can_assume_its_role(templates: dict[str, Any], env: str) -> None:
    """The vpc-cni and EBS CSI roles trust Pod Identity for their own kube-system service account of this cluster
    only, not any association in the account that names them."""
    template = templates[env]
    cluster_id = next(k for k, r in template["Resources"].items() if r["Type"] == "AWS::EKS::Cluster")
    addons = {
        r["Properties"]["AddonName"]: r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EKS::Addon" and "PodIdentityAssociations" in r["Properties"]
    }
    assert sorted(addons) == ["aws-ebs-csi-driver", "vpc-cni"]
    for props in addons.values():
        (association,) = props["PodIdentityAssociations"]
        role = template["Resources"][association["RoleArn"]["Fn::GetAtt"][0]]["Properties"]
        (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Condition"] == {
            "StringEquals": {
                "aws:RequestTag/eks-cluster-arn": {"Fn::GetAtt": [cluster_id, "Arn"]},
                "aws:RequestTag/kubernetes-namespace": "kube-system",
                "aws:RequestTag/kubernetes-service-account": association["ServiceAccount"],
            }
        }


def test_system_disk_size_reaches_the_launch_template() -> None:
    """The configured size lands in the template's root device (built in-process: cdk.json keeps the default)."""
    import aws_cdk as cdk

    from llm_eks.constructs.cluster import InferenceCluster, InferenceClusterProps

    stack = cdk.Stack(cdk.App(), "Disk")
    InferenceCluster(stack, "Platform", InferenceClusterProps(cluster_name="disk", system_disk_gib=120))
    Template.from_stack(stack).has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": Match.object_like(
                {"BlockDeviceMappings": [Match.object_like({"Ebs": Match.object_like({"VolumeSize": 120})})]}
            )
        },
    )


def test_system_disk_size_is_validated() -> None:
    from llm_eks.constructs.cluster import InferenceClusterProps
    from llm_eks.errors import ConfigError

    with pytest.raises(ConfigError) as error:
        InferenceClusterProps(cluster_name="disk", system_disk_gib=10).validate()
    assert (
        str(error.value) == "system_disk_gib: 10 is not allowed; must be 20 (the AMI's own size) to 16384 [LLMEKS-E303]"
    )


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_internal_load_balancers_get_subnets_no_pod_uses(templates: dict[str, Any], env: str) -> None:
    """Without an internal load balancer (dev; staging, whose gateway is in-cluster only; prod, whose front door is
    closed until one is configured) the private subnets keep the internal-elb tag. With one, one /26 per AZ at the top
    of the VPC carries it instead (tests/test_ingress.py)."""
    subnets = resources(templates[env], "AWS::EC2::Subnet").values()
    tags = [({t["Key"]: t["Value"] for t in s["Tags"]}, s["CidrBlock"]) for s in subnets]
    for_lbs = sorted(cidr for t, cidr in tags if t.get("kubernetes.io/role/internal-elb") == "1")
    for_pods = sorted(cidr for t, cidr in tags if "karpenter.sh/discovery" in t)
    assert for_lbs == for_pods


def test_system_instance_type_is_an_ec2_instance_type() -> None:
    from llm_eks.constructs.cluster import InferenceClusterProps
    from llm_eks.errors import ConfigError

    with pytest.raises(ConfigError) as error:
        InferenceClusterProps(cluster_name="typo", system_instance_type="m7i.xlargee").validate()
    assert str(error.value) == (
        "system_instance_type: 'm7i.xlargee' is not allowed; not an EC2 instance type (botocore 1.44.8's list); "
        "closest: m7i.xlarge, m7i.8xlarge, m7i.4xlarge [LLMEKS-E201]"
    )
    InferenceClusterProps(cluster_name="ok", system_instance_type="c7i.2xlarge").validate()


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_no_subnet_gives_a_public_ip_at_launch(templates: dict[str, Any], env: str) -> None:
    """Public subnets hold NAT gateways and load balancers, which take Elastic IPs: nothing launched there gets a
    public address by default. The property updates in place: CloudFormation's AWS::EC2::Subnet schema (cfn-lint's
    copy) does not list it among the properties whose change replaces the subnet."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    subnets = Template.from_json(templates[env]).find_resources("AWS::EC2::Subnet")
    assert len(subnets) >= 4
    # Absent: CloudFormation's default, false (the internal load balancers' own subnets).
    assert {k: s["Properties"].get("MapPublicIpOnLaunch", False) for k, s in subnets.items()} == dict.fromkeys(
        subnets, False
    )
    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", "AWS::EC2::Subnet").schema
    assert "/properties/MapPublicIpOnLaunch" not in schema["createOnlyProperties"]
    assert "/properties/CidrBlock" in schema["createOnlyProperties"]  # the list is the one that matters
