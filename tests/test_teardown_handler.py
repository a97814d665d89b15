"""The stack-delete safety net: the teardown Lambda against moto (EC2, IAM), and its construct in a template.

The handler is loaded from its file the way Lambda loads it (module `index`), not through the package.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from llm_eks.constructs.teardown import HANDLER_DIR
from llm_eks.error_codes import E312
from tests.coded import raises_code

REGION = "us-west-2"
CLUSTER = "llm-test"
OTHER = "llm-test-2"  # shares a prefix with CLUSTER on purpose: path and tag matching must be exact


def _load_handler() -> ModuleType:
    spec = importlib.util.spec_from_file_location("teardown_index", HANDLER_DIR / "index.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


handler = _load_handler()
# One botocore session for every test: moto resets boto3's default session on each start, and a new session
# parses the EC2 and IAM service models again (~0.7 s per test).
_BOTOCORE = botocore.session.get_session()


class FakeContext:
    """The part of the Lambda context the handler reads."""

    def __init__(self, remaining_ms: int = 600_000) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def event(request: str, **extra: Any) -> dict[str, Any]:
    return {
        "RequestType": request,
        "ResourceProperties": {"ServiceToken": "arn:aws:lambda:x", "ClusterName": CLUSTER, "Region": REGION},
        **extra,
    }


def karpenter_tags(cluster: str, nodepool: str = "gpu", nodeclass: str = "gpu") -> list[dict[str, str]]:
    """The tags Karpenter v1 puts on instances and launch templates (pkg/utils GetTags)."""
    return [
        {"Key": f"kubernetes.io/cluster/{cluster}", "Value": "owned"},
        {"Key": "eks:eks-cluster-name", "Value": cluster},
        {"Key": "karpenter.sh/nodepool", "Value": nodepool},
        {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": nodeclass},
    ]


def profile_tags(cluster: str, region: str = REGION) -> list[dict[str, str]]:
    """The tags Karpenter v1 puts on instance profiles (EC2NodeClass.InstanceProfileTags)."""
    return [
        {"Key": f"kubernetes.io/cluster/{cluster}", "Value": "owned"},
        {"Key": "eks:eks-cluster-name", "Value": cluster},
        {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": "gpu"},
        {"Key": "topology.kubernetes.io/region", "Value": region},
    ]


class Seeded:
    """Leftovers of CLUSTER and look-alikes that must survive."""

    def __init__(self) -> None:
        self.ec2 = boto3.client("ec2", region_name=REGION)
        self.iam = boto3.client("iam", region_name=REGION)
        self.ami = "ami-12c6146b"  # any id: the handler never reads images (moto's own list is not loaded, see `aws`)
        self.ours = [self._instance(karpenter_tags(CLUSTER)), self._instance(karpenter_tags(CLUSTER, "cpu"))]
        self.stopped = self._instance(karpenter_tags(CLUSTER))
        self.ec2.stop_instances(InstanceIds=[self.stopped])
        self.keep = {
            # The managed system node group: same cluster tag, but EKS's keys and no karpenter.sh/nodepool.
            "system": self._instance(
                [
                    {"Key": f"kubernetes.io/cluster/{CLUSTER}", "Value": "owned"},
                    {"Key": "eks:cluster-name", "Value": CLUSTER},
                    {"Key": "eks:nodegroup-name", "Value": "system"},
                ]
            ),
            "other-cluster": self._instance(karpenter_tags(OTHER)),
            # A node pool tag but not owned by this cluster.
            "unowned": self._instance(
                [{"Key": "karpenter.sh/nodepool", "Value": "gpu"}, {"Key": "eks:eks-cluster-name", "Value": CLUSTER}]
            ),
        }
        self.templates = [self._template("karpenter.k8s.aws/111", karpenter_tags(CLUSTER))]
        self.keep_templates = [
            self._template("karpenter.k8s.aws/222", karpenter_tags(OTHER)),
            self._template("llm-test-user-template", [{"Key": "team", "Value": "ml"}]),
        ]
        self.iam.create_role(RoleName="KarpenterNodeRole", AssumeRolePolicyDocument=json.dumps({"Statement": []}))
        self.profiles = [
            self._profile(f"{CLUSTER}_1", f"/karpenter/{REGION}/{CLUSTER}/uid-a/", profile_tags(CLUSTER)),
            self._profile(f"{CLUSTER}_2", f"/karpenter/{REGION}/{CLUSTER}/uid-b/", profile_tags(CLUSTER)),
        ]
        self.keep_profiles = [
            self._profile(f"{OTHER}_1", f"/karpenter/{REGION}/{OTHER}/uid-c/", profile_tags(OTHER)),
            # Same cluster name in another region: that region's stack owns it.
            self._profile(f"{CLUSTER}_3", f"/karpenter/eu-west-1/{CLUSTER}/uid-d/", profile_tags(CLUSTER, "eu-west-1")),
            # Right path, not Karpenter's tags: never touched.
            self._profile(f"{CLUSTER}_4", f"/karpenter/{REGION}/{CLUSTER}/uid-e/", [{"Key": "team", "Value": "ml"}]),
            self._profile("llm-test-admin", "/", profile_tags(CLUSTER)),
        ]

    def _instance(self, tags: list[dict[str, str]]) -> str:
        reservation = self.ec2.run_instances(
            ImageId=self.ami,
            MinCount=1,
            MaxCount=1,
            InstanceType="g6e.xlarge",
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )
        return reservation["Instances"][0]["InstanceId"]

    def _template(self, name: str, tags: list[dict[str, str]]) -> str:
        created = self.ec2.create_launch_template(
            LaunchTemplateName=name,
            LaunchTemplateData={"ImageId": self.ami},
            TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags}],
        )
        return created["LaunchTemplate"]["LaunchTemplateId"]

    def _profile(self, name: str, path: str, tags: list[dict[str, str]]) -> str:
        self.iam.create_instance_profile(InstanceProfileName=name, Path=path, Tags=tags)
        self.iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName="KarpenterNodeRole")
        return name

    def state(self, instance_id: str) -> str:
        reservations = self.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        return reservations[0]["Instances"][0]["State"]["Name"]

    def template_ids(self) -> set[str]:
        return {t["LaunchTemplateId"] for t in self.ec2.describe_launch_templates()["LaunchTemplates"]}

    def profile_names(self) -> set[str]:
        return {p["InstanceProfileName"] for p in self.iam.list_instance_profiles()["InstanceProfiles"]}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Seeded]:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    # moto would parse its catalogue of public AMIs on every reset: seconds per test, and nothing here reads images.
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    # Waiting between polls is the handler's business; the tests do not sleep.
    monkeypatch.setattr(handler.time, "sleep", lambda seconds: None)
    with mock_aws():
        boto3.setup_default_session(botocore_session=_BOTOCORE)
        yield Seeded()


def test_delete_removes_this_clusters_instances_templates_and_profiles(aws: Seeded) -> None:
    result = handler.on_event(event("Delete", PhysicalResourceId="karpenter-teardown-llm-test"), FakeContext())

    assert result["PhysicalResourceId"] == "karpenter-teardown-llm-test"
    assert result["Data"] == {"instances": "3", "launch_templates": "1", "instance_profiles": "2"}
    for instance in [*aws.ours, aws.stopped]:
        assert aws.state(instance) == "terminated"
    assert not set(aws.templates) & aws.template_ids()
    assert not set(aws.profiles) & aws.profile_names()
    # The node role itself stays (CloudFormation deletes it next); only its profiles are gone.
    assert aws.iam.list_instance_profiles_for_role(RoleName="KarpenterNodeRole")["InstanceProfiles"]
    assert aws.iam.get_role(RoleName="KarpenterNodeRole")


def test_delete_leaves_other_clusters_and_non_karpenter_resources(aws: Seeded) -> None:
    handler.on_event(event("Delete", PhysicalResourceId="karpenter-teardown-llm-test"), FakeContext())

    for name, instance in aws.keep.items():
        assert aws.state(instance) == "running", name
    assert set(aws.keep_templates) <= aws.template_ids()
    assert set(aws.keep_profiles) <= aws.profile_names()


def test_delete_twice_is_harmless(aws: Seeded) -> None:
    handler.on_event(event("Delete", PhysicalResourceId="p"), FakeContext())
    again = handler.on_event(event("Delete", PhysicalResourceId="p"), FakeContext())
    assert again["Data"] == {"instances": "0", "launch_templates": "0", "instance_profiles": "0"}


@pytest.mark.parametrize(
    "request_event",
    [event("Create"), event("Update", PhysicalResourceId="karpenter-teardown-llm-test", OldResourceProperties={})],
    ids=["create", "update"],
)
def test_create_and_update_do_nothing(aws: Seeded, request_event: dict[str, Any]) -> None:
    before = (aws.template_ids(), aws.profile_names())

    result = handler.on_event(request_event, FakeContext())

    assert result == {"PhysicalResourceId": "karpenter-teardown-llm-test"}
    for instance in aws.ours:
        assert aws.state(instance) == "running"
    assert (aws.template_ids(), aws.profile_names()) == before


def test_a_failing_call_is_raised_with_the_reason(aws: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Provider framework turns a raised error into FAILED with this message; nothing waits for a timeout."""
    real_client = boto3.session.Session.client

    def client(self: boto3.session.Session, service: str, *args: Any, **kwargs: Any) -> Any:
        made = real_client(self, service, *args, **kwargs)
        if service == "ec2":

            def denied(**_: Any) -> None:
                raise ClientError(
                    {"Error": {"Code": "UnauthorizedOperation", "Message": "not allowed"}}, "TerminateInstances"
                )

            made.terminate_instances = denied
        return made

    monkeypatch.setattr(boto3.session.Session, "client", client)

    with pytest.raises(handler.TeardownError) as failure:
        handler.on_event(event("Delete", PhysicalResourceId="p"), FakeContext())

    message = str(failure.value)
    assert "terminating instances" in message and CLUSTER in message and "UnauthorizedOperation" in message
    assert aws.ours[0] in message


def test_instances_that_never_terminate_fail_at_the_deadline(aws: Seeded) -> None:
    """Waiting stops at the deadline (taken from the Lambda's remaining time) with the stuck instance ids."""
    stuck = boto3.client("ec2", region_name=REGION)
    stuck.terminate_instances = lambda **_: None  # EC2 accepts the call but the instances stay running.
    clock = [0.0]

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    with pytest.raises(handler.TeardownError) as failure:
        handler.terminate_instances(CLUSTER, ec2=stuck, deadline=120.0, sleep=sleep, now=lambda: clock[0])

    assert "still not terminated at the deadline" in str(failure.value)
    assert all(i in str(failure.value) for i in aws.ours)
    assert clock[0] < 120.0


def test_deadline_leaves_the_reserve_for_the_rest_of_the_teardown(aws: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    """on_event derives the deadline from the Lambda's remaining time minus the reserve."""
    seen: dict[str, float] = {}

    def fake_teardown(cluster_name: str, region: str, *, ec2: Any, iam: Any, deadline: float) -> dict[str, list[str]]:
        seen["budget"] = deadline - handler.time.monotonic()
        return {"instances": [], "launch_templates": [], "instance_profiles": []}

    monkeypatch.setattr(handler, "teardown", fake_teardown)
    # A frozen clock: creating the boto3 clients between the deadline and the call takes seconds on a loaded machine.
    monkeypatch.setattr(handler.time, "monotonic", lambda: 1000.0)
    handler.on_event(event("Delete", PhysicalResourceId="p"), FakeContext(remaining_ms=600_000))
    assert seen["budget"] == 600 - handler.RESERVE_SECONDS


# -- the construct ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def teardown_stack() -> dict[str, Any]:
    import aws_cdk as cdk

    from llm_eks.constructs.teardown import KarpenterTeardown, KarpenterTeardownProps

    # Asset metadata (as the CDK CLI sets it) tells the test where the Lambda's staged code is.
    app = cdk.App(context={"aws:cdk:enable-asset-metadata": True})
    stack = cdk.Stack(app, "Teardown", env=cdk.Environment(account="111122223333", region=REGION))
    KarpenterTeardown(stack, "Teardown", KarpenterTeardownProps(cluster_name=CLUSTER))
    assembly = app.synth()
    return {"template": assembly.get_stack_by_name("Teardown").template, "outdir": Path(assembly.directory)}


def _of_type(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == type_}


def test_custom_resource_names_the_cluster_and_region(teardown_stack: dict[str, Any]) -> None:
    (resource,) = _of_type(teardown_stack["template"], "Custom::KarpenterTeardown").values()
    assert resource["Properties"]["ClusterName"] == CLUSTER
    assert resource["Properties"]["Region"] == REGION
    assert resource["DeletionPolicy"] == "Delete"


def test_handler_is_plain_python_outside_the_vpc(teardown_stack: dict[str, Any]) -> None:
    functions = _of_type(teardown_stack["template"], "AWS::Lambda::Function")
    (ours,) = [f for f in functions.values() if f["Properties"].get("Handler") == "index.on_event"]
    props = ours["Properties"]
    assert props["Runtime"] == "python3.14"
    assert props["Timeout"] == 600
    assert "VpcConfig" not in props  # a VPC Lambda's own ENIs would block the VPC delete it exists to unblock
    # Packaged from the directory as is: only index.py, no bytecode from local test runs.
    asset = teardown_stack["outdir"] / ours["Metadata"]["aws:asset:path"]
    assert sorted(p.name for p in asset.iterdir()) == ["index.py"]


def test_handler_permissions_are_scoped_to_this_clusters_resources(teardown_stack: dict[str, Any]) -> None:
    policies = _of_type(teardown_stack["template"], "AWS::IAM::Policy")
    statements = {
        s.get("Sid"): s
        for p in policies.values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid")
        in {"TerminateKarpenterInstances", "DeleteKarpenterLaunchTemplates", "DeleteKarpenterInstanceProfiles"}
    }
    owned = {"aws:ResourceTag/eks:eks-cluster-name": CLUSTER}
    terminate = statements["TerminateKarpenterInstances"]
    assert terminate["Action"] == "ec2:TerminateInstances"
    assert terminate["Condition"] == {
        "StringEquals": owned,
        "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
    }
    assert statements["DeleteKarpenterLaunchTemplates"]["Condition"] == {"StringEquals": owned}
    profiles = statements["DeleteKarpenterInstanceProfiles"]
    assert set(profiles["Action"]) == {"iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"}
    assert profiles["Condition"] == {"StringEquals": owned}
    assert json.dumps(profiles["Resource"]).endswith(
        f':iam::111122223333:instance-profile/karpenter/{REGION}/{CLUSTER}/*"]]}}'
    )


def test_bad_props_are_one_line_errors() -> None:
    from llm_eks.constructs.teardown import KarpenterTeardownProps

    with raises_code(E312, match=r"^timeout_minutes: 15 is not allowed; must be between 2 and 14 "):
        KarpenterTeardownProps(cluster_name=CLUSTER, timeout_minutes=15).validate()
    with raises_code(E312, match=r"^cluster_name: 'bad name' is not allowed; must be an EKS cluster name"):
        KarpenterTeardownProps(cluster_name="bad name").validate()
