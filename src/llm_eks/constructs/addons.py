"""Shared plumbing for the cluster add-ons: pinned Helm installs that finish inside the kubectl Lambda, controller
placement on the system node group, and EKS Pod Identity roles.

Why the Helm time budget matters: aws_eks_v2 runs `helm upgrade --install` inside the kubectl provider Lambda, which
AWS stops after 15 minutes. A Helm install that outlives it leaves CloudFormation waiting for a response that never
comes (the anchors' known failure). Helm's `--timeout` bounds each wait separately: the main `--wait` and every hook
Job each get the full timeout. So a chart's worst case is `timeout x waits` plus the time the handler spends before
Helm starts (kubeconfig, repository index, chart download), and that sum must stay under 15 minutes.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from llm_eks import aws_ids
from llm_eks.error_codes import E300, E301
from llm_eks.errors import ConfigError, fail, named_errors
from llm_eks.images.charts import IMAGE_DIGESTS_CONTEXT, digest_values, merge_values
from llm_eks.images.lock import check_digests, pin
from llm_eks.manifests.labels import SYSTEM_NODE_LABEL

# Label on the system node group (manifests.labels, which the charts read too); controllers select it.
SYSTEM_NODE_SELECTOR: Mapping[str, str] = MappingProxyType({SYSTEM_NODE_LABEL[0]: SYSTEM_NODE_LABEL[1]})

# The kubectl provider Lambda's hard limit (aws_eks_v2 sets the handler timeout to 15 minutes).
KUBECTL_LAMBDA_LIMIT = cdk.Duration.minutes(15)
# update-kubeconfig, the repository index and the chart download happen before Helm's clock starts.
HELM_SETUP_ALLOWANCE = cdk.Duration.minutes(2)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# IAM resources need the key ARN; an alias ARN would match nothing.
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@dataclass(frozen=True)
class Placement:
    """Where a controller's pods run: the system node group unless told otherwise."""

    # Controllers never share GPU nodes: a GPU node can be a Spot node that Karpenter removes at any time.
    node_selector: Mapping[str, str] = field(default_factory=lambda: dict(SYSTEM_NODE_SELECTOR))
    # The system node group carries no taint, so controllers need no toleration.
    tolerations: tuple[Mapping[str, Any], ...] = ()

    def values(self) -> dict[str, Any]:
        """`nodeSelector` / `tolerations` as most charts spell them."""
        return {"nodeSelector": dict(self.node_selector), "tolerations": [dict(t) for t in self.tolerations]}


@dataclass(frozen=True)
class ChartSource:
    """A pinned chart: name, classic Helm repository URL and exact version (never a range)."""

    chart: str
    repository: str
    version: str


def check_name(field_name: str, value: str, *, label: bool) -> str:
    """A Kubernetes namespace (DNS label) or object name (DNS subdomain); one-line ConfigError otherwise."""
    if label:
        pattern, limit, kind = _DNS_LABEL, 63, "DNS label (lowercase letters, digits and '-'"
    else:
        pattern, limit, kind = _DNS_SUBDOMAIN, 253, "DNS subdomain (lowercase letters, digits, '-' and '.'"
    if not value or len(value) > limit or not pattern.match(value):
        raise ConfigError(
            E300, f"{field_name}: {value!r} is not allowed; must be a {kind}, at most {limit} characters)"
        )
    return value


def check_cidrs(field_name: str, values: tuple[str, ...]) -> None:
    """IPv4 CIDRs (a deploy-time token passes: CloudFormation resolves it, e.g. the VPC's own CIDR)."""
    for value in values:
        if cdk.Token.is_unresolved(value):
            continue
        try:
            ipaddress.IPv4Network(value)
        except ValueError:
            raise ConfigError(
                E300, f"{field_name}: {value!r} is not allowed; must be IPv4 CIDRs such as 10.0.0.0/16"
            ) from None


def check_kms_key_arn(field_name: str, value: str | None) -> None:
    """None, or a KMS key ARN (not an alias)."""
    if value is not None and not aws_ids.KMS_KEY_ARN.match(value):
        raise ConfigError(E300, f"{field_name}: {value!r} is not allowed; must be a KMS key ARN (not an alias)")


def check_replicas(field_name: str, value: int) -> None:
    """Controllers run 1-3 replicas: more only adds standbys that compete for the system nodes."""
    if not 1 <= value <= 3:
        raise ConfigError(E300, f"{field_name}: {value} is not allowed; must be between 1 and 3")


def check_helm_timeout(field_name: str, timeout: cdk.Duration, waits: int) -> None:
    """Fail at synth when a chart's worst case (`timeout` x `waits` + setup) could outlive the kubectl Lambda."""
    minutes = timeout.to_seconds() / 60
    worst = minutes * waits + HELM_SETUP_ALLOWANCE.to_minutes()
    if minutes <= 0 or worst > KUBECTL_LAMBDA_LIMIT.to_minutes():
        raise ConfigError(
            E300,
            f"{field_name}: {minutes:g} min is not allowed; {waits} Helm wait(s) x timeout + "
            f"{HELM_SETUP_ALLOWANCE.to_minutes()} min setup must fit the kubectl Lambda's "
            f"{KUBECTL_LAMBDA_LIMIT.to_minutes()} minutes (at most "
            f"{round((KUBECTL_LAMBDA_LIMIT.to_minutes() - HELM_SETUP_ALLOWANCE.to_minutes()) / waits, 1):g} min)",
        )


def check_helm_values(field_name: str, values: object) -> None:
    """Extra Helm values a user merges over ours: a mapping with string keys at every level."""
    if not isinstance(values, Mapping):
        raise fail(E300, field_name, values, "must be a mapping of Helm values, e.g. {'replicas': 3}")
    for key, value in values.items():
        if not isinstance(key, str):
            raise fail(E300, field_name, values, f"every key must be a string (found {key!r})")
        if isinstance(value, Mapping):
            check_helm_values(f"{field_name}.{key}", value)


def with_helm_values(ours: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Our values with the user's `extra` deep-merged over them, as Helm merges a second values file: mappings merge
    key by key, anything else (a list, a scalar) replaces ours. Locked image digests are applied last, over both."""
    return merge_values(ours, extra) or {}


def check_statements(field_name: str, statements: object) -> None:
    """Extra IAM statements: a tuple of `iam.PolicyStatement`."""
    if not isinstance(statements, tuple) or not all(isinstance(s, iam.PolicyStatement) for s in statements):
        raise fail(E300, field_name, statements, "must be a tuple of aws_iam.PolicyStatement")


def check_boundary(field_name: str, boundary: object) -> None:
    """A permissions boundary: an `iam.IManagedPolicy` (e.g. `ManagedPolicy.from_managed_policy_name(...)`)."""
    if boundary is not None and not hasattr(boundary, "managed_policy_arn"):
        raise fail(
            E300, field_name, boundary, "must be an aws_iam.IManagedPolicy (ManagedPolicy.from_managed_policy_arn)"
        )


def harden_roles(
    scope: Construct,
    boundary: iam.IManagedPolicy | None,
    statements: Sequence[tuple[iam.IRole, tuple[iam.PolicyStatement, ...]]] = (),
) -> None:
    """The IAM escape hatches: `boundary` on every role created under `scope` (an aspect, so roles added later are
    covered too), and each role's extra statements in its default policy."""
    if boundary is not None:
        iam.PermissionsBoundary.of(scope).apply(boundary)
    for role, extra in statements:
        for statement in extra:
            role.add_to_principal_policy(statement)


def require_kubectl(cluster: eks.ICluster) -> None:
    """A cluster without a kubectl provider cannot take Helm releases or manifests: say so in one line, not in a
    jsii traceback from deep inside aws_eks_v2 ("Kubectl Provider is not defined in this cluster")."""
    if cluster.kubectl_provider is None:
        name = cluster.cluster_name if not cdk.Token.is_unresolved(cluster.cluster_name) else "the cluster"
        raise ConfigError(
            E301,
            f"cluster: {name!r} has no kubectl provider, so Helm releases and manifests cannot be applied to it; "
            "create it with kubectl_provider_options, or import it with kubectl_provider="
            "KubectlProvider.from_kubectl_provider_attributes(...)",
        )


def install_chart(
    scope: Construct,
    id: str,
    *,
    cluster: eks.ICluster,
    source: ChartSource,
    release: str,
    namespace: str,
    timeout: cdk.Duration,
    values: Mapping[str, Any] | None = None,
    waits: int = 1,
    create_namespace: bool = True,
    skip_crds: bool = False,
) -> eks.HelmChart:
    """`helm upgrade --install --wait` of a pinned chart with a timeout that fits the kubectl Lambda.

    `waits` is the number of separate Helm waits in the chart's worst case: 1 for the main `--wait` plus one per
    hook Job. The release name is fixed (not CDK's hashed default) so a reviewer finds it with `helm ls`.
    `values=None` leaves the chart's own values file untouched (not even an empty override in the template).
    """
    require_kubectl(cluster)
    check_helm_timeout(f"{release}.timeout", timeout, waits)
    # Images locked by digest (CDK context IMAGE_DIGESTS_CONTEXT, set from images.lock.json) go in through the
    # chart's own values; see llm_eks.images.charts for what each chart allows.
    digests = scope.node.try_get_context(IMAGE_DIGESTS_CONTEXT)
    if digests:
        overlay = digest_values(source.chart, source.version, check_digests(digests, IMAGE_DIGESTS_CONTEXT))
        values = merge_values(values, overlay)
    return eks.HelmChart(
        scope,
        id,
        cluster=cluster,
        chart=source.chart,
        repository=source.repository,
        version=source.version,
        release=release,
        namespace=namespace,
        create_namespace=create_namespace,
        # Without --wait CloudFormation reports success before a single pod runs, and the charts that need this
        # controller's CRDs or webhooks race it.
        wait=True,
        timeout=timeout,
        values=None if values is None else dict(values),
        skip_crds=skip_crds,
    )


def context_pin(scope: Construct, ref: str) -> str:
    """`ref@sha256:...` when the app's locked digests (CDK context IMAGE_DIGESTS_CONTEXT) hold `ref`, else `ref`: for
    images of objects a construct applies itself, as install_chart does for the charts' values."""
    digests = scope.node.try_get_context(IMAGE_DIGESTS_CONTEXT)
    return pin(ref, check_digests(digests, IMAGE_DIGESTS_CONTEXT)) if digests else ref


def addon_namespace(
    scope: Construct, id: str, *, cluster: eks.ICluster, objects: list[dict[str, Any]]
) -> eks.KubernetesManifest:
    """The add-on's Namespace (with its Pod Security labels) and NetworkPolicies, applied before its Helm releases
    (which then install with `create_namespace=False` and depend on this). `overwrite`: a namespace Helm created in
    an earlier deploy is taken over by `kubectl apply` instead of failing `kubectl create`."""
    require_kubectl(cluster)
    return eks.KubernetesManifest(scope, id, cluster=cluster, manifest=objects, overwrite=True)


class AddonProps(Protocol):
    """What `SingleChartAddon` reads from an add-on's props."""

    @property
    def namespace(self) -> str: ...

    @property
    def timeout(self) -> cdk.Duration: ...

    @property
    def helm_values(self) -> Mapping[str, Any]: ...

    @property
    def cluster(self) -> eks.ICluster: ...

    def validate(self) -> None: ...


P = TypeVar("P", bound=AddonProps)


class SingleChartAddon(Construct):
    """An add-on that is one pinned chart in its own namespace, with nothing on the AWS side.

    Validates `props` before anything is added to the tree, then applies `namespace_objects` (the Namespace with
    its Pod Security labels, and its NetworkPolicies) and installs `source` as `release` into `props.namespace`
    with `values(props)` (and `props.helm_values` merged over them) and `props.timeout`. `namespace_objects` is kept
    for the review output.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        source: ChartSource,
        release: str,
        props: P,
        values: Callable[[P], Mapping[str, Any]],
        namespace_objects: list[dict[str, Any]],
    ) -> None:
        props.validate()
        super().__init__(scope, id)
        cluster = props.cluster
        self.namespace = props.namespace
        self.namespace_objects = namespace_objects
        self.namespace_manifest = addon_namespace(self, "Namespace", cluster=cluster, objects=namespace_objects)
        self.chart = install_chart(
            self,
            "Chart",
            cluster=cluster,
            source=source,
            release=release,
            namespace=props.namespace,
            values=with_helm_values(values(props), props.helm_values),
            timeout=props.timeout,
            create_namespace=False,
        )
        self.chart.node.add_dependency(self.namespace_manifest)


def pod_identity_role(
    scope: Construct,
    role_id: str,
    association_id: str,
    *,
    cluster_name: str,
    cluster_tag: tuple[str, str],
    namespace: str,
    service_account: str,
    description: str,
) -> tuple[iam.Role, eks.CfnPodIdentityAssociation]:
    """An IAM role only `namespace/service_account` of one cluster can assume through EKS Pod Identity, and the
    association that hands it to that service account.

    The trust policy is the one EKS documents (`pods.eks.amazonaws.com`, `sts:AssumeRole` + `sts:TagSession`),
    narrowed by the session tags Pod Identity sets to the cluster (`cluster_tag`: `("eks-cluster-arn", arn)` or
    `("eks-cluster-name", name)`), namespace and service account, so no other association in the account can use
    the role. An association does not need the service account to exist yet.
    """
    tag, value = cluster_tag
    principal = iam.ServicePrincipal("pods.eks.amazonaws.com").with_conditions(
        {
            "StringEquals": {
                f"aws:RequestTag/{tag}": value,
                "aws:RequestTag/kubernetes-namespace": namespace,
                "aws:RequestTag/kubernetes-service-account": service_account,
            }
        }
    )
    role = iam.Role(scope, role_id, assumed_by=principal.with_session_tags(), description=description)
    association = eks.CfnPodIdentityAssociation(
        scope,
        association_id,
        cluster_name=cluster_name,
        namespace=namespace,
        service_account=service_account,
        role_arn=role.role_arn,
    )
    return role, association


@dataclass(frozen=True)
class PodIdentityRoleProps:
    """Which service account of which cluster may assume the role."""

    cluster: eks.ICluster
    namespace: str
    service_account: str


class PodIdentityRole(Construct):
    """The `pod_identity_role` of one Kubernetes service account, trusted by cluster ARN.

    The service account itself is created by whoever owns the pods (the Helm chart or the cdk8s chart).
    EKS allows one association per service account, so `for_service_account` hands out one shared role per
    (cluster, namespace, service account): the vLLM pod reading both its Hugging Face token and its model weights
    gets one role with both grants.
    """

    @named_errors
    def __init__(self, scope: Construct, id: str, props: PodIdentityRoleProps) -> None:
        cluster, namespace, service_account = props.cluster, props.namespace, props.service_account
        check_name("namespace", namespace, label=True)
        check_name("service_account", service_account, label=False)
        super().__init__(scope, id)
        self.namespace = namespace
        self.service_account = service_account
        self.role, self.association = pod_identity_role(
            self,
            "Role",
            "Association",
            cluster_name=cluster.cluster_name,
            cluster_tag=("eks-cluster-arn", cluster.cluster_arn),
            namespace=namespace,
            service_account=service_account,
            description=f"EKS Pod Identity role for service account {namespace}/{service_account}",
        )
        # The agent DaemonSet serves the credentials; anything depending on this role waits for it too.
        agent = pod_identity_agent(cluster)
        if agent is not None:
            self.association.node.add_dependency(agent)

    @staticmethod
    def for_service_account(cluster: eks.ICluster, namespace: str, service_account: str) -> PodIdentityRole:
        """The one role of `namespace/service_account` on `cluster`, created on first use."""
        stack = cdk.Stack.of(cluster)
        holder_id = f"{cluster.node.id}PodIdentity"
        holder = stack.node.try_find_child(holder_id) or Construct(stack, holder_id)
        child_id = f"{namespace}-{service_account}"
        existing = holder.node.try_find_child(child_id)
        if isinstance(existing, PodIdentityRole):
            return existing
        return PodIdentityRole(holder, child_id, PodIdentityRoleProps(cluster, namespace, service_account))


def runs_auto_mode(cluster: eks.ICluster) -> bool:
    """Whether `cluster` is an EKS Auto Mode cluster of this app (its AWS::EKS::Cluster enables ComputeConfig); an
    imported cluster reads as not."""
    resource = cluster.node.try_find_child("Resource")
    config = getattr(resource, "compute_config", None) if isinstance(resource, eks.CfnCluster) else None
    enabled = config.get("enabled") if isinstance(config, Mapping) else getattr(config, "enabled", None)
    return enabled is True


def pod_identity_agent(cluster: eks.ICluster) -> IConstruct | None:
    """What serves Pod Identity credentials, for the associations to wait for: the EKS Pod Identity agent add-on
    (created on first use), or None on EKS Auto Mode, whose nodes run the agent themselves ("You do not have to
    install the EKS Pod Identity Agent on EKS Auto Mode clusters", EKS User Guide, automode)."""
    if runs_auto_mode(cluster):
        return None
    return cluster.eks_pod_identity_agent


def requests_limits(cpu: str, memory: str, cpu_limit: str = "1", memory_limit: str | None = None) -> dict[str, Any]:
    """Pod resources with both limits set explicitly.

    Explicit because Helm deep-merges values: a limit we leave out keeps the chart's default (kuberay-operator's
    is a 100m CPU limit that throttles it), and a `null` to delete it is dropped on the way through jsii.
    """
    return {
        "requests": {"cpu": cpu, "memory": memory},
        "limits": {"cpu": cpu_limit, "memory": memory_limit or memory},
    }
