"""`Karpenter`: the node role, the controller's Pod Identity and IAM, and the two Helm charts.

What it creates, all matching Karpenter's CloudFormation for the pinned version (../shared/reference/):
- the node role and its EKS access entry of type EC2_LINUX, without which nodes never join an access-entry (API auth
  mode) cluster. The role carries the reference's managed policies except AmazonEKS_CNI_Policy: aws-node gets the
  CNI's permissions through the vpc-cni add-on's Pod Identity association (see `InferenceCluster`), so no pod that
  reaches IMDS could use them;
- the controller role, trusted by EKS Pod Identity for service account kube-system/karpenter only, with the six
  per-concern managed policies of `karpenter_policies`;
- the `karpenter-crd` chart, then the `karpenter` chart at the same version, with node repair off unless asked for
  and reserved capacity on, both written explicitly (`settings.featureGates`; v1.14.1 charts/karpenter/values.yaml:
  "nodeRepair is ALPHA and is disabled by default", "reservedCapacity is BETA and is enabled by default"). The CRDs
  live in their own release because Helm installs a chart's crds/ directory once and never upgrades it: bumping
  KARPENTER_VERSION upgrades `karpenter-crd`, and with it the CRDs;
- by default a `KarpenterTeardown` safety net that runs on stack delete after the charts are gone;
- an `InterruptionQueue` of its own when none is passed (`InferenceCluster.add_karpenter` creates it beside this
  construct, where llm-eks's stacks have always had it).

Escape hatches (see `KarpenterOptions`): your own node role (we create none and attach nothing; the access entry is
still ours) and your own queue (we create no queue, queue policy or EventBridge rules; the controller's IAM and
Helm values point at yours), extra statements for the controller and node roles, a permissions boundary on every
role created here, and extra Helm values merged over ours.

Service account: the chart creates it (serviceAccount.create=true, name karpenter) and CDK creates only the Pod
Identity association. Pod Identity needs no annotation on the service account, so there is nothing for CDK to
write into it; letting Helm own it keeps one owner for an object the chart's RBAC bindings reference, and saves
a kubectl custom resource. The association exists before the chart (explicit dependency), so the first pods
start with credentials.

Ordering. Create: CRDs, IAM, access entry, queue and `depends_on` (system node group, Pod Identity agent:
`InferenceCluster.add_karpenter` passes both) before the controller; the controller before node pools
(`add_dependent`, or `InferenceCluster.add_chart(..., after=(karpenter,))`). Delete is the reverse: node pools go
first while the controller still runs and drains their nodes (put the EC2NodeClasses in that manifest: their
finalizer holds `kubectl delete` until their nodes are gone); then the controller chart; then the teardown safety
net, which must finish before the EKS cluster, the node role, its access entry and the VPC are deleted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct, IConstruct, IDependable

from llm_eks.constructs import karpenter_policies, nag
from llm_eks.constructs.addons import (
    HELM_SETUP_ALLOWANCE,
    KUBECTL_LAMBDA_LIMIT,
    SYSTEM_NODE_SELECTOR,
    ChartSource,
    check_boundary,
    check_helm_values,
    check_statements,
    harden_roles,
    install_chart,
    pod_identity_role,
    with_helm_values,
)
from llm_eks.constructs.interruption import InterruptionQueue, InterruptionQueueProps
from llm_eks.constructs.teardown import KarpenterTeardown, KarpenterTeardownProps
from llm_eks.error_codes import E302
from llm_eks.errors import ConfigError, fail, named_errors
from llm_eks.versions import KARPENTER_VERSION

CHART_REPOSITORY = "oci://public.ecr.aws/karpenter"
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "karpenter"
KUBECTL_HANDLER_TIMEOUT_MINUTES = int(KUBECTL_LAMBDA_LIMIT.to_minutes())
# Both charts have one Helm wait and no hook Jobs (see addons.check_helm_timeout).
MAX_HELM_TIMEOUT_MINUTES = KUBECTL_HANDLER_TIMEOUT_MINUTES - int(HELM_SETUP_ALLOWANCE.to_minutes())

# Karpenter's reference minus AmazonEKS_CNI_Policy (aws-node has it through Pod Identity, not the node role).
NODE_ROLE_MANAGED_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
)

_CHART_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_QUANTITY = re.compile(r"^\d+(\.\d+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")


@dataclass(frozen=True)
class KarpenterOptions:
    """Karpenter for one cluster; every default is the production-right one."""

    # Chart version without a leading "v" (how Karpenter publishes its charts); both charts use it.
    version: str = KARPENTER_VERSION
    # None: an `InterruptionQueue` named after the cluster is created. Your own queue (an `sqs.IQueue`): we create
    # no queue, queue policy or EventBridge rules; feeding it and letting EventBridge send to it are yours.
    interruption_queue: InterruptionQueue | sqs.IQueue | None = None
    # None: a node role with Karpenter's worker policies is created. Your own role: we create none and attach
    # nothing to it (it must carry the worker node policies); its EKS access entry (EC2_LINUX) is still ours.
    node_role: iam.IRole | None = None
    # The controller must never run on nodes it manages: pin it to the system managed node group.
    system_node_selector: Mapping[str, str] = field(default_factory=lambda: SYSTEM_NODE_SELECTOR)
    # Two replicas (leader election) with the chart's one-per-host anti-affinity and zone spread.
    replicas: int = 2
    # requests == limits (Guaranteed QoS), the sizing Karpenter's getting-started guide installs with.
    controller_cpu: str = "1"
    controller_memory: str = "1Gi"
    # helm --wait --timeout: pulling the image and two pods becoming ready takes 1-3 minutes; 10 leaves margin
    # and still ends well before the kubectl Lambda's 15.
    helm_timeout_minutes: int = 10
    # What the controller needs running before its chart installs, typically the system node group (its pods
    # have nowhere to run otherwise and `helm --wait` times out) and the Pod Identity agent add-on (no AWS
    # credentials otherwise). Also deleted only after the controller chart. `InferenceCluster.add_karpenter` adds
    # both for you.
    depends_on: tuple[IDependable, ...] = ()
    # On stack delete, remove instances/launch templates/instance profiles Karpenter left behind.
    teardown: bool = True
    # False: aws-node takes the CNI's permissions from the vpc-cni add-on's Pod Identity association (as
    # InferenceCluster sets it up). True only for a cluster whose aws-node still uses the node role.
    cni_policy_on_node_role: bool = False
    # Added to the controller role (e.g. kms:CreateGrant on the key of encrypted node volumes).
    controller_statements: tuple[iam.PolicyStatement, ...] = ()
    # Added to the node role we create (not allowed with your own node_role: extend that one yourself).
    node_role_statements: tuple[iam.PolicyStatement, ...] = ()
    # Your organisation's permissions boundary on every role this construct creates (node, controller, teardown).
    permissions_boundary: iam.IManagedPolicy | None = None
    # Merged over our `karpenter` chart values (addons.with_helm_values), e.g. `{"logLevel": "debug"}`.
    helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # settings.featureGates.nodeRepair (Alpha in 1.14.1, off in the chart): a GPU node whose AcceleratedHardwareReady
    # (or another condition the EKS node monitoring agent sets) stays False is replaced, not left holding a replica.
    # Off by default, as upstream ships an Alpha gate: turn it on where you accept that (llm-eks's `alpha_features`).
    node_repair: bool = False
    # settings.featureGates.reservedCapacity (Beta, on in the chart since 1.6): pools launch into capacity
    # reservations. Written explicitly, so a chart upgrade that changed the default would not turn it off unseen.
    reserved_capacity: bool = True

    def validate(self) -> None:
        if not _CHART_VERSION.match(self.version):
            raise ConfigError(
                E302,
                f"version: {self.version!r} is not allowed; Karpenter charts are versioned MAJOR.MINOR.PATCH "
                "without a leading 'v' (e.g. 1.14.1)",
            )
        if self.replicas < 1:
            raise ConfigError(E302, f"replicas: {self.replicas} is not allowed; must be at least 1")
        for name in ("controller_cpu", "controller_memory"):
            value = getattr(self, name)
            if not _QUANTITY.match(value):
                raise ConfigError(
                    E302, f"{name}: {value!r} is not allowed; must be a Kubernetes quantity like 1, 500m, 1Gi"
                )
        if not self.system_node_selector:
            raise ConfigError(
                E302,
                "system_node_selector: {} is not allowed; the controller must be pinned to nodes Karpenter does not "
                "manage",
            )
        if not 1 <= self.helm_timeout_minutes <= MAX_HELM_TIMEOUT_MINUTES:
            raise ConfigError(
                E302,
                f"helm_timeout_minutes: {self.helm_timeout_minutes} is not allowed; must be between 1 and "
                f"{MAX_HELM_TIMEOUT_MINUTES} "
                f"(the kubectl provider's Lambda stops at {KUBECTL_HANDLER_TIMEOUT_MINUTES})",
            )
        check_statements("controller_statements", self.controller_statements)
        check_statements("node_role_statements", self.node_role_statements)
        check_boundary("permissions_boundary", self.permissions_boundary)
        check_helm_values("helm_values", self.helm_values)
        for name in ("node_repair", "reserved_capacity"):
            if not isinstance(getattr(self, name), bool):
                raise fail(E302, name, getattr(self, name), "must be True or False")
        if self.node_role is not None:
            if not hasattr(self.node_role, "role_arn"):
                raise fail(E302, "node_role", self.node_role, "must be an aws_iam.IRole, e.g. Role.from_role_arn(...)")
            if self.node_role_statements:
                raise fail(
                    E302,
                    "node_role_statements",
                    len(self.node_role_statements),
                    "must be empty with your own node_role; add statements to that role yourself",
                )
            if self.cni_policy_on_node_role:
                raise fail(
                    E302,
                    "cni_policy_on_node_role",
                    True,
                    "must be False with your own node_role; attach AmazonEKS_CNI_Policy to that role yourself",
                )
        queue = self.interruption_queue
        if queue is not None and not hasattr(queue, "queue_arn"):
            raise fail(E302, "interruption_queue", queue, "must be an InterruptionQueue or an aws_sqs.IQueue")


@dataclass(frozen=True, kw_only=True)
class KarpenterProps(KarpenterOptions):
    """`KarpenterOptions` on one cluster (`InferenceCluster.add_karpenter` fills the cluster in, creates the queue
    and orders the controller after the system nodes and the Pod Identity agent)."""

    cluster: eks.ICluster


def _chart(name: str, version: str) -> ChartSource:
    """Karpenter publishes each chart as its own OCI repository."""
    return ChartSource(name, f"{CHART_REPOSITORY}/{name}", version)


def _cluster_name(cluster: eks.ICluster, resource: IConstruct | None) -> str:
    """The cluster name as a literal when it is known at synth time, else the deploy-time token.

    `Cluster.cluster_name` is always a Ref token, even for a named cluster; the literal (from the AWS::EKS::Cluster
    resource's Name) lets the controller policies be plain JSON objects and the Helm values readable in review.
    """
    name = cluster.cluster_name
    if cdk.Token.is_unresolved(name) and isinstance(resource, eks.CfnCluster):
        literal = resource.name
        if literal and not cdk.Token.is_unresolved(literal):
            return literal
    return name


class Karpenter(Construct):
    """Karpenter's AWS side (node role, access entry, controller IAM via Pod Identity) and its Helm releases."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: KarpenterProps) -> None:
        props.validate()
        super().__init__(scope, id)
        self.props = props
        cluster = props.cluster
        self._cluster_resource = cluster.node.try_find_child("Resource")
        self.cluster_name = _cluster_name(cluster, self._cluster_resource)
        self.interruption_queue: InterruptionQueue | sqs.IQueue = props.interruption_queue or InterruptionQueue(
            self, "InterruptionQueue", InterruptionQueueProps(cluster_name=self.cluster_name)
        )

        # Ours unless you bring one (then nothing is attached to it: see KarpenterOptions.node_role).
        self.node_role: iam.IRole = props.node_role or self._node_role()
        self.node_access_entry = eks.AccessEntry(
            self,
            "NodeAccessEntry",
            cluster=cluster,
            principal=self.node_role.role_arn,
            # EC2_LINUX puts the role in system:nodes; access policies are not allowed on this type.
            access_entry_type=eks.AccessEntryType.EC2_LINUX,
            access_policies=[],
        )

        self.controller_role, self.pod_identity_association = pod_identity_role(
            self,
            "ControllerRole",
            "ControllerPodIdentity",
            cluster_name=self.cluster_name,
            cluster_tag=("eks-cluster-name", self.cluster_name),
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            description=f"Karpenter controller of {self.cluster_name} (Pod Identity {NAMESPACE}/{SERVICE_ACCOUNT})",
        )
        # The cluster's own resource only: manifests added with cluster.add_cdk8s_chart live under the Cluster
        # construct and may depend on this construct (add_dependent), so depending on all of it would be a cycle.
        if isinstance(self._cluster_resource, cdk.CfnResource):
            self.pod_identity_association.add_resource_dependency(self._cluster_resource)
        self.controller_policies = self._controller_policies()

        # The --wait of karpenter-crd lasts until the CRDs are established, so nothing that uses them races
        # their registration.
        self.crds = install_chart(
            self,
            "CrdChart",
            cluster=cluster,
            source=_chart("karpenter-crd", props.version),
            release="karpenter-crd",
            namespace=NAMESPACE,
            timeout=cdk.Duration.minutes(5),
            create_namespace=False,
        )
        self.controller = install_chart(
            self,
            "ControllerChart",
            cluster=cluster,
            source=_chart("karpenter", props.version),
            release="karpenter",
            namespace=NAMESPACE,
            timeout=cdk.Duration.minutes(props.helm_timeout_minutes),
            values=self.helm_values(),
            create_namespace=False,
            # karpenter-crd owns the CRDs. (aws_eks_v2's kubectl handler currently drops --skip-crds; Helm then
            # skips the crds/ directory anyway because the CRDs already exist, so the result is the same.)
            skip_crds=True,
        )
        self.controller.node.add_dependency(
            self.crds,
            # Nodes it launches must be able to join from the first one; on delete the entry outlives the controller.
            self.node_access_entry,
            self.pod_identity_association,
            *self.controller_policies.values(),
            self.interruption_queue,
            *props.depends_on,
        )
        harden_roles(
            self,
            props.permissions_boundary,
            [(self.controller_role, props.controller_statements), (self.node_role, props.node_role_statements)],
        )

        self.teardown: KarpenterTeardown | None = None
        if props.teardown:
            self.teardown = KarpenterTeardown(self, "Teardown", KarpenterTeardownProps(cluster_name=self.cluster_name))
            # Delete order: node pools, the controller chart, then the teardown, then what Karpenter's leftovers
            # block: the VPC (ENIs in its subnets and security groups), the EKS cluster resource (its cluster
            # security group) and the node role (held by instance profiles).
            self.teardown.run_after_deleting(self.controller)
            self.teardown.run_before_deleting(self.node_role, self.node_access_entry)
            if isinstance(self._cluster_resource, cdk.CfnResource):
                self.teardown.run_before_deleting(self._cluster_resource)
            if isinstance(cluster, eks.Cluster):
                # The VPC construct, every subnet, route and gateway in it (an imported cluster has no VPC here;
                # then call teardown.run_before_deleting(vpc) yourself if the VPC is in this stack).
                self.teardown.run_before_deleting(cluster.vpc)

        for name in self.node_role_policies if props.node_role is None else ():
            nag.acknowledge(
                self.node_role, nag.managed_policy(name), "Worker node policy EKS nodes need, as in Karpenter's CFN."
            )
        for policy in self.controller_policies.values():
            for finding in nag.iam5_findings(policy, policy.policy_document):
                nag.acknowledge(
                    policy, finding, "Karpenter's own policy: wildcards only on resources tagged for this cluster."
                )

    # -- public API -----------------------------------------------------------------------------------------

    @property
    def node_role_name(self) -> str:
        """For EC2NodeClass `spec.role`: Karpenter creates the instance profile from the role NAME."""
        return self.node_role.role_name

    def helm_values(self) -> dict[str, Any]:
        """Values of the `karpenter` chart (v1.14 values.yaml keys), with `props.helm_values` merged over them."""
        p = self.props
        resources = {"cpu": p.controller_cpu, "memory": p.controller_memory}
        values: dict[str, Any] = {
            "settings": {
                "clusterName": self.cluster_name,
                # The queue NAME, not its ARN: Karpenter resolves the URL with sqs:GetQueueUrl.
                "interruptionQueue": self.interruption_queue.queue_name,
                # The chart renders FEATURE_GATES from these (templates/deployment.yaml); the others keep its defaults.
                "featureGates": {"nodeRepair": p.node_repair, "reservedCapacity": p.reserved_capacity},
            },
            "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
            "replicas": p.replicas,
            # The controller asks IMDS for its region when AWS_REGION is unset, and system nodes give pods no IMDS
            # (hop limit 1).
            "controller": {
                "env": [{"name": "AWS_REGION", "value": cdk.Stack.of(self).region}],
                "resources": {"requests": resources, "limits": resources},
            },
            # The chart's default (kubernetes.io/os=linux) plus the system node group label.
            "nodeSelector": {"kubernetes.io/os": "linux", **p.system_node_selector},
        }
        return with_helm_values(values, p.helm_values)

    def add_dependent(self, *dependents: IConstruct) -> None:
        """Make node pools / node classes (e.g. the KubernetesManifest of a cdk8s chart) wait for the CRDs and the
        controller on create, and be deleted before the controller on delete, so Karpenter drains their nodes."""
        for dependent in dependents:
            dependent.node.add_dependency(self.crds, self.controller)
            if self.teardown is not None:
                self.teardown.run_after_deleting(dependent)

    # -- building blocks ------------------------------------------------------------------------------------

    @property
    def node_role_policies(self) -> tuple[str, ...]:
        """AWS managed policies of the node role."""
        extra = ("AmazonEKS_CNI_Policy",) if self.props.cni_policy_on_node_role else ()
        return (*NODE_ROLE_MANAGED_POLICIES, *extra)

    def _node_role(self) -> iam.Role:
        return iam.Role(
            self,
            "NodeRole",
            # ec2.${AWS::URLSuffix}, as upstream: right in the aws-cn partition too.
            assumed_by=iam.ServicePrincipal(f"ec2.{cdk.Aws.URL_SUFFIX}"),
            description=f"Nodes Karpenter launches for {self.cluster_name}",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(n) for n in self.node_role_policies],
        )

    def _controller_policies(self) -> dict[str, iam.CfnManagedPolicy]:
        variables = {
            "ClusterName": self.cluster_name,
            "NodeRoleArn": self.node_role.role_arn,
            "InterruptionQueueArn": self.interruption_queue.queue_arn,
        }
        policies = {}
        for concern, statements in karpenter_policies.CONTROLLER_POLICIES.items():
            policies[concern] = iam.CfnManagedPolicy(
                self,
                f"Controller{concern}Policy",
                description=f"Karpenter controller of {self.cluster_name}: {concern}",
                path="/",
                policy_document=karpenter_policies.render(statements, variables),
                roles=[self.controller_role.role_name],
            )
        return policies
