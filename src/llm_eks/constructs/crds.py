"""`PinnedCrds`: install upstream CustomResourceDefinitions at deploy time from pinned URLs, checked by sha256.

Why a custom resource of our own: the Gateway API standard CRDs and the InferencePool CRD have no Helm chart CDK can
install (Envoy's gateway-crds-helm overflows Helm's 1 MiB release Secret, envoyproxy/gateway#6105; no chart ships the
InferencePool CRD alone); aws_eks_v2's KubernetesManifest takes only inline content and applies client-side, whose
last-applied annotation (256 KiB at most) cannot hold httproutes' 429 KB; upstream files are not copied into this
repository, and synth stays offline. So the Lambda in crd_handler/ downloads each pinned URL at deploy time, refuses
it unless its sha256 is the one pinned here, and server-side applies it (see crd_handler/index.py).

Changing any pin (URL, hash, the list) is an Update of the custom resource: the new set is applied. CRDs dropped from
the list are left in the cluster (with every object of their kind); delete them by hand if they must go. A failed
Update rolls back by applying the previous pins again.

On stack delete the CRDs stay, unless `remove_on_delete` (deleting a CRD deletes every object of its kind).

What the Lambda may do, and nothing more:
- AWS: eks:DescribeCluster on this cluster (endpoint and CA), plus running in the VPC.
- Kubernetes: an EKS access entry (type STANDARD, no access policy) puts its role in the group `llm-eks:<name>`; a
  ClusterRole bound to that group allows get, create and patch (and delete, only with `remove_on_delete`) of the
  pinned CRDs by name. `create` can be limited by resourceNames here because a server-side apply names the object in
  the URL and the API server authorizes its implicit create with that name (apiserver handlers/patch.go
  createAuthorizerAttributes; kubernetes/kubernetes#80295); a POST create could not be limited this way.
- Network: it runs in the cluster's private subnets (the endpoint is private by default; NAT reaches GitHub) with a
  security group of its own that allows HTTPS out only, and the cluster security group admits it on 443. Being in
  the VPC, its ENIs can hold up the subnets' delete for a while when the stack is deleted (Lambda releases them).
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct

from llm_eks.constructs import nag
from llm_eks.constructs.handler import python_handler
from llm_eks.constructs.log_encryption import encrypted_log_group
from llm_eks.constructs.nag import iam5_findings
from llm_eks.error_codes import E309
from llm_eks.errors import ConfigError, fail, named_errors
from llm_eks.manifests.source import builds_objects
from llm_eks.versions import AI_GATEWAY_VERSION, ENVOY_GATEWAY_VERSION, GAIE_VERSION, GATEWAY_API_VERSION, LLMD_VERSION

HANDLER_DIR = Path(__file__).parent / "crd_handler"
RESOURCE_TYPE = "Custom::LlmEksPinnedCrds"
# The Provider framework's own onEvent Lambda has 15 minutes; ours must answer before that one is killed.
_MAX_TIMEOUT_MINUTES = 14
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# A CRD's metadata.name is <plural>.<group>: a DNS-1123 subdomain with at least one dot.
_CRD_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")
# A DNS-1123 label, short enough that `llm-eks:<name>` stays readable.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")
_CRD_API = ("apiextensions.k8s.io", "customresourcedefinitions")


@dataclass(frozen=True)
class CrdSource:
    """One upstream CRD file: the CRD's metadata.name, where to download it (https), and its sha256."""

    name: str
    url: str
    sha256: str


# The commit of each pinned tag (`git rev-parse <tag>^{commit}`): a version bump without its commit fails on import,
# and its sha256 pins below must change with it.
# kubernetes-sigs/gateway-api: tag v1.6.1.
GATEWAY_API_COMMIT = {"v1.6.1": "8bb74df00e56ec8f944d48c25e6c1c9c2f6848e3"}[GATEWAY_API_VERSION]
# kubernetes-sigs/gateway-api-inference-extension: tag v1.6.0.
GAIE_COMMIT = {"v1.6.0": "992e5c292afb248801ce8d9234eb5b9d28eea231"}[GAIE_VERSION]
_GATEWAY_API_BASE = (
    f"https://raw.githubusercontent.com/kubernetes-sigs/gateway-api/{GATEWAY_API_COMMIT}/config/crd/standard"
)
_GAIE_BASE = (
    f"https://raw.githubusercontent.com/kubernetes-sigs/gateway-api-inference-extension/{GAIE_COMMIT}/config/crd/bases"
)


def _gateway_api(plural: str, sha256: str) -> CrdSource:
    name = f"{plural}.gateway.networking.k8s.io"
    return CrdSource(name, f"{_GATEWAY_API_BASE}/gateway.networking.k8s.io_{plural}.yaml", sha256)


# Gateway API standard channel (GATEWAY_API_VERSION), the six CRDs we use; sha256 of each file at the tag's commit.
GATEWAY_API_CRDS: tuple[CrdSource, ...] = (
    _gateway_api("gatewayclasses", "53710048ba26f8620eed59d5e51b157ecf040daf5c6eef31a4b991e0808c4be5"),
    _gateway_api("gateways", "25b885f5870b8fff1ae82efa2628b2761cef3745900c2aecf8fb76629a01255a"),
    _gateway_api("httproutes", "a424a0d6c953b162e71d1d97bb7e75012d8f1ac264e7274f2763d1b96ab39852"),
    _gateway_api("grpcroutes", "53a8d029da8f07e55d3fa58a5cf6de5950dab19fbb8d6a8082fb5e51ca5ef6fc"),
    _gateway_api("referencegrants", "8c645e9333cfa67790cc2a53e0c00076f88b2bd4230d2b49688c78bc34f9b2c3"),
    _gateway_api("backendtlspolicies", "0d48c9e4b53dd9510cf615b9b1192d9d7afb07a1cc0498c9515627cb1c075419"),
)
# InferencePool inference.networking.k8s.io/v1 of the Gateway API Inference Extension (GAIE_VERSION).
INFERENCE_POOL_CRD = CrdSource(
    "inferencepools.inference.networking.k8s.io",
    f"{_GAIE_BASE}/inference.networking.k8s.io_inferencepools.yaml",
    "55e0dbf39c50c4bbdd60106493a4573df4bb44479f9ce46762f1af718883e5cd",
)


# envoyproxy/gateway (ENVOY_GATEWAY_VERSION): the plain-YAML CRDs of the gateway-helm chart's `crds` subchart. Helm
# installs a chart's crds/ only on first install and never upgrades them, and that subchart also carries the Gateway
# API experimental channel: llm-eks turns it off (`crds.enabled: false`) and pins the seven it uses here.
# EnvoyPatchPolicy is left out: the controller checks each optional CRD once at start and skips the kinds it does
# not find (internal/provider/kubernetes/controller.go, `crdExists`, eppCRDExists).
ENVOY_GATEWAY_COMMIT = {"v1.9.0": "39763b1c07ec30a5526fe70434a2cfe4181de642"}[ENVOY_GATEWAY_VERSION]
_EG_BASE = (
    f"https://raw.githubusercontent.com/envoyproxy/gateway/{ENVOY_GATEWAY_COMMIT}/charts/gateway-helm/charts/crds/"
    "crds/generated"
)
# envoyproxy/ai-gateway (AI_GATEWAY_VERSION): the CRD chart's templates, each a licence comment, `---` and one CRD
# (the installer applies the CRD document alone). The controller watches all six, MCPRoute and QuotaPolicy included.
AI_GATEWAY_COMMIT = {"v1.1.0": "c217da8a539570ba3f6014a60c2687c29a945f1f"}[AI_GATEWAY_VERSION]
_AIGW_BASE = (
    f"https://raw.githubusercontent.com/envoyproxy/ai-gateway/{AI_GATEWAY_COMMIT}/manifests/charts/"
    "ai-gateway-crds-helm/templates"
)
# llm-d/llm-d-router (LLMD_VERSION): InferenceObjective and InferenceModelRewrite (llm-d.ai/v1alpha2). They must exist
# before an endpoint picker starts: it discovers these kinds once at start (pkg/epp/server/controller_config.go,
# populateWithDiscovery) and without them never reads an objective (every request at priority 0).
LLMD_COMMIT = {"v0.10.0": "71f4f0999f95b96c49a9d0c4afbd18dfdb943c26"}[LLMD_VERSION]
_LLMD_BASE = f"https://raw.githubusercontent.com/llm-d/llm-d-router/{LLMD_COMMIT}/config/crd/bases"


def _crd(base: str, group: str, plural: str, sha256: str) -> CrdSource:
    return CrdSource(f"{plural}.{group}", f"{base}/{group}_{plural}.yaml", sha256)


# sha256 of each file at the commits above (sha256sum of `git show <commit>:<path>`).
ENVOY_GATEWAY_CRDS: tuple[CrdSource, ...] = tuple(
    _crd(_EG_BASE, "gateway.envoyproxy.io", plural, sha256)
    for plural, sha256 in (
        ("backends", "bb1901aea758d05458b853b07db04a96a1ea4346b177e392e5ce7398573805be"),
        ("backendtrafficpolicies", "cd75a4c222df5487aa9ca8957b48bcc3255eb25de02ed9153faf620bc160f786"),
        ("clienttrafficpolicies", "2c7eaa1ce30de626e9c362b8d9002281c2f435f970020fa81902ad7f30b38d5b"),
        ("envoyextensionpolicies", "92f4dfdd67be4b242511381d6175f517782e655233fdf5b5e28a400ea5601f79"),
        ("envoyproxies", "3e9ea2f348445e3798b02daf02bf024b0d944227cf5ef8a18da7f675a1afd223"),
        ("httproutefilters", "ad46193dbec0a28cc97fa93a64bcd1f464858544d884eeac5e4d767526dcfd3d"),
        ("securitypolicies", "6412914ec5b7c48f58b85f60a80767ba15a50c8d374480cf5f2d872e4a764466"),
    )
)
AI_GATEWAY_CRDS: tuple[CrdSource, ...] = tuple(
    _crd(_AIGW_BASE, "aigateway.envoyproxy.io", plural, sha256)
    for plural, sha256 in (
        ("aigatewayroutes", "c6ca0a06b214d93f1c7eefe8f9735fa551f23948088e0bf3c317b792ad68f162"),
        ("aiservicebackends", "35f6323a486a6f447be41fe1de4327f6e6e7254a0ca61d33186cb03fe11888f6"),
        ("backendsecuritypolicies", "b2a2cfef49fd3253c70339231eef1745562515488022dcedc0c732df1c96c8f3"),
        ("gatewayconfigs", "3e409ab57d85ee6c42b993ed869c7db28fde4b0e952c35c84a1240df09f21c1e"),
        ("mcproutes", "dd0a32cf5c7028eead8db0099ce2a959c72209dcc8043a14466d8290cf8e1a84"),
        ("quotapolicies", "0e8b899c520e6ff5b224b7e4e6064f959e8256e6949817615cde8cf37269eb85"),
    )
)
LLMD_CRDS: tuple[CrdSource, ...] = tuple(
    _crd(_LLMD_BASE, "llm-d.ai", plural, sha256)
    for plural, sha256 in (
        ("inferenceobjectives", "c1e763412fcbe2b55e9282850156269a10053be2d052547cb80a2ca639c09990"),
        ("inferencemodelrewrites", "62a07fff40e10e919c245d895457a9c15be22947b45f06815552ae8fffaab405"),
    )
)


def _private_subnets() -> ec2.SubnetSelection:
    return ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)


@dataclass(frozen=True)
class PinnedCrdsProps:
    """Which CRDs go into which cluster, and where the installer Lambda runs."""

    cluster: eks.ICluster
    sources: tuple[CrdSource, ...]
    # Off: deleting a CRD deletes every object of its kind, so the stack's delete (or this construct's) leaves them.
    remove_on_delete: bool = False
    # The ClusterRole, its binding and the access entry's group are `llm-eks:<name>`; give each PinnedCrds on one
    # cluster its own name.
    name: str = "crd-installer"
    # None: the cluster's VPC.
    vpc: ec2.IVpc | None = None
    # Subnets with a route out (NAT: GitHub, the EKS API) from which the cluster endpoint is reachable.
    subnets: ec2.SubnetSelection = field(default_factory=_private_subnets)
    # Seven downloads under 1 MB and a few API calls take seconds; the rest is room for retries (3 per URL).
    timeout_minutes: int = 10
    # One month of handler logs: enough to read what a failed deploy did, short enough to cost nothing.
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH

    def validate(self) -> None:
        if not self.sources:
            raise fail(E309, "sources", self.sources, "list at least one CrdSource")
        seen: dict[str, int] = {}
        for i, source in enumerate(self.sources):
            _check_source(f"sources[{i}]", source)
            if source.name in seen:
                first = f"sources[{seen[source.name]}]"
                raise fail(E309, f"sources[{i}].name", source.name, f"each CRD may be listed once (also {first})")
            seen[source.name] = i
        if not _NAME.match(self.name):
            raise fail(E309, "name", self.name, "must be a DNS label of 1-40 lowercase letters, digits and '-'")
        if not 2 <= self.timeout_minutes <= _MAX_TIMEOUT_MINUTES:
            raise ConfigError(
                E309,
                f"timeout_minutes: {self.timeout_minutes} is not allowed; must be between 2 and "
                f"{_MAX_TIMEOUT_MINUTES} (the Provider framework's Lambda stops at 15)",
            )


def _check_source(path: str, source: CrdSource) -> None:
    if not _CRD_NAME.match(source.name):
        raise fail(
            E309,
            f"{path}.name",
            source.name,
            "must be the CRD's metadata.name, <plural>.<group> (a DNS subdomain with a dot, e.g. "
            "httproutes.gateway.networking.k8s.io)",
        )
    parts = urllib.parse.urlsplit(source.url)
    if parts.scheme != "https" or not parts.hostname or any(c.isspace() for c in source.url):
        raise fail(E309, f"{path}.url", source.url, "must be an https:// URL")
    if not _SHA256.match(source.sha256):
        raise fail(E309, f"{path}.sha256", source.sha256, "must be 64 lowercase hex digits (sha256sum of the file)")


@builds_objects
def rbac_objects(name: str, crd_names: list[str], *, delete: bool) -> list[dict[str, Any]]:
    """The ClusterRole (only the pinned CRDs, by name) and its binding to the access entry's group."""
    qualified = f"llm-eks:{name}"
    labels = {"app.kubernetes.io/part-of": "llm-eks"}
    verbs = ["get", "create", "patch", *(["delete"] if delete else [])]
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": qualified, "labels": labels},
            "rules": [
                {
                    "apiGroups": [_CRD_API[0]],
                    "resources": [_CRD_API[1]],
                    # create too: server-side apply authorizes its create with the name in the URL (see module doc).
                    "resourceNames": crd_names,
                    "verbs": verbs,
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": qualified, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": qualified},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": qualified}],
        },
    ]


class PinnedCrds(Construct):
    """Custom resource that server-side applies pinned, hash-checked upstream CRDs to one EKS cluster.

    Make whatever uses these CRDs (a Helm release, a chart's KubernetesManifest) wait for `custom_resource`:
    `pinned.add_dependent(chart)` or `chart.node.add_dependency(pinned.custom_resource)`.
    """

    @named_errors
    def __init__(self, scope: Construct, id: str, props: PinnedCrdsProps) -> None:
        props.validate()
        super().__init__(scope, id)
        self.props = props
        cluster = props.cluster
        vpc = props.vpc or cluster.vpc
        self.group = f"llm-eks:{props.name}"
        crd_names = [s.name for s in props.sources]

        # HTTPS out only: GitHub (through NAT), the EKS and STS APIs, the cluster endpoint. DNS to the VPC resolver
        # is not subject to security groups.
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="PinnedCrds installer Lambda: HTTPS out only",
            allow_all_outbound=False,
        )
        self.security_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS to GitHub, the EKS API and the cluster endpoint"
        )
        # The cluster security group sits on the control plane's ENIs; admit the installer on 443 only (aws_eks_v2's
        # kubectl provider gets in by running in that group itself, which would also open every node to it).
        self.cluster_ingress = ec2.CfnSecurityGroupIngress(
            self,
            "ClusterIngress",
            group_id=cluster.cluster_security_group_id,
            source_security_group_id=self.security_group.security_group_id,
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            description="PinnedCrds installer Lambda to the Kubernetes API",
        )

        self.function = python_handler(
            self,
            description="Installs pinned, sha256-checked CRDs into an EKS cluster (server-side apply)",
            source=HANDLER_DIR,
            timeout=cdk.Duration.minutes(props.timeout_minutes),
            memory_size=256,
            log_retention=props.log_retention,
            environment={"AWS_STS_REGIONAL_ENDPOINTS": "regional"},
            vpc=vpc,
            vpc_subnets=props.subnets,
            security_groups=[self.security_group],
        )
        role = self.function.role
        if role is None:  # always set for a Function created here without an imported role
            raise TypeError("the PinnedCrds handler has no role")
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                sid="DescribeThisCluster", actions=["eks:DescribeCluster"], resources=[cluster.cluster_arn]
            )
        )

        # STANDARD with no access policy: the role's only Kubernetes permissions come from the ClusterRole below.
        self.access_entry = eks_l1.CfnAccessEntry(
            self,
            "AccessEntry",
            cluster_name=cluster.cluster_name,
            principal_arn=role.role_arn,
            type="STANDARD",
            kubernetes_groups=[self.group],
        )
        self.rbac = eks.KubernetesManifest(
            self,
            "Rbac",
            cluster=cluster,
            manifest=rbac_objects(props.name, crd_names, delete=props.remove_on_delete),
            # kubectl apply: a later deploy with other pins updates the ClusterRole in place.
            overwrite=True,
        )

        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.function,
            log_group=encrypted_log_group(self, "ProviderLogs", props.log_retention),
        )
        self.custom_resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=self.provider.service_token,
            resource_type=RESOURCE_TYPE,
            properties={
                "ClusterName": cluster.cluster_name,
                "Crds": [{"Name": s.name, "Url": s.url, "Sha256": s.sha256} for s in props.sources],
                "RemoveOnDelete": props.remove_on_delete,
            },
        )
        # Access before the first call; on delete, the CRDs go (if they do) while access still exists.
        self.custom_resource.node.add_dependency(self.access_entry, self.rbac, self.cluster_ingress)
        self._acknowledge_findings()

    def add_dependent(self, *dependents: IConstruct) -> None:
        """Make these (e.g. a Helm release or chart that creates Gateways or InferencePools) wait for the CRDs."""
        for dependent in dependents:
            dependent.node.add_dependency(self.custom_resource)

    def _acknowledge_findings(self) -> None:
        basic_execution = nag.managed_policy("service-role/AWSLambdaBasicExecutionRole")
        nag.acknowledge(self.function, basic_execution, "Lets the CRD installer Lambda write its own logs.")
        nag.acknowledge(
            self.function,
            nag.managed_policy("service-role/AWSLambdaVPCAccessExecutionRole"),
            "Lambda needs it to attach the installer to the VPC, where the private cluster endpoint is.",
        )
        framework = self.provider.node.find_child("framework-onEvent")
        for function in (self.function, framework):
            nag.skip_custom_resource_lambda_checks(function)
        nag.skip_checkov(
            framework, "CKV_AWS_117", "Only invokes the installer Lambda through the Lambda API; needs no VPC."
        )
        nag.acknowledge(framework, basic_execution, "Lets the Provider framework Lambda write its own logs.")
        for finding in iam5_findings(
            self, {"Statement": [{"Effect": "Allow", "Resource": f"{self.function.function_arn}:*"}]}
        ):
            nag.acknowledge(framework, finding, "The Provider framework may invoke only our handler (any version).")
