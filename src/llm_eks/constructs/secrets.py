"""`SecretsStoreCsi`: the Secrets Store CSI driver and the AWS provider (ASCP), both in kube-system, so a pod mounts a
Secrets Manager secret as a FILE through EKS Pod Identity. Nothing is copied into a Kubernetes Secret.

Two pinned releases: the AWS provider chart bundles the driver as a dependency with a version *range* (`^1`), so we
install the driver from its own chart at an exact version and set `secrets-store-csi-driver.install: false` on the
provider. The driver upgrades its own two CRDs through a pre-install/pre-upgrade hook Job.

Both are DaemonSets and must run on every node a workload pod can land on, GPU and Neuron nodes included (their
`nvidia.com/gpu` / `aws.amazon.com/neuron` NoSchedule taints): without the driver and provider on that node the vLLM
pod's CSI volume never mounts and the pod never starts.
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
from constructs import Construct

from llm_eks import aws_ids
from llm_eks.constructs.addons import (
    ChartSource,
    PodIdentityRole,
    check_boundary,
    check_helm_values,
    check_kms_key_arn,
    check_name,
    harden_roles,
    install_chart,
    with_helm_values,
)
from llm_eks.error_codes import E308
from llm_eks.errors import ConfigError, errors_at, named_errors
from llm_eks.versions import SECRETS_STORE_CSI_DRIVER_CHART_VERSION, SECRETS_STORE_CSI_PROVIDER_AWS_CHART_VERSION

SECRETS_STORE_CSI_DRIVER_CHART = ChartSource(
    "secrets-store-csi-driver",
    "https://kubernetes-sigs.github.io/secrets-store-csi-driver/charts",
    SECRETS_STORE_CSI_DRIVER_CHART_VERSION,
)
SECRETS_STORE_CSI_PROVIDER_AWS_CHART = ChartSource(
    "secrets-store-csi-driver-provider-aws",
    "https://aws.github.io/secrets-store-csi-driver-provider-aws",
    SECRETS_STORE_CSI_PROVIDER_AWS_CHART_VERSION,
)
NAMESPACE = "kube-system"
# The audience ASCP exchanges for Pod Identity credentials; the driver requests a token for it on every mount.
POD_IDENTITY_AUDIENCE = "pods.eks.amazonaws.com"
# Tolerate every taint: a node plugin belongs on every node that can run a pod that mounts a secret.
TOLERATE_ALL: tuple[Mapping[str, Any], ...] = ({"operator": "Exists"},)

# Secrets Manager names: 1-512 of letters, digits and /_+=.@- (AWS CreateSecret).


@dataclass(frozen=True)
class SecretsStoreCsiOptions:
    """Secrets Store CSI options; every default is the production-right one."""

    # Whatever taints GPU, Neuron or future pools carry (see the module docstring).
    node_tolerations: tuple[Mapping[str, Any], ...] = TOLERATE_ALL
    # The token is read once at vLLM start-up; re-mounting every 2 minutes would only add Secrets Manager calls.
    rotation: bool = False
    # Driver worst case, an upgrade: two pre-upgrade CRD hook Jobs, then the DaemonSet rollout = 3 Helm waits,
    # 3 x 4 + 2 min setup = 14 min, inside the kubectl Lambda's 15.
    driver_timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(4))
    # Provider: no hook Jobs, one wait for the DaemonSet rollout over every node, GPU nodes included.
    provider_timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(8))
    # Merged over our values of each chart (addons.with_helm_values).
    driver_helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    provider_helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # Your organisation's permissions boundary on each reader role `add_secret_reader` hands out; None: no boundary.
    permissions_boundary: iam.IManagedPolicy | None = None

    def validate(self) -> None:
        check_helm_values("secrets_store.driver_helm_values", self.driver_helm_values)
        check_helm_values("secrets_store.provider_helm_values", self.provider_helm_values)
        check_boundary("secrets_store.permissions_boundary", self.permissions_boundary)


@dataclass(frozen=True, kw_only=True)
class SecretsStoreCsiProps(SecretsStoreCsiOptions):
    """`SecretsStoreCsiOptions` on one cluster (`InferenceCluster.add_secrets_store` fills the cluster in)."""

    cluster: eks.ICluster


class SecretsStoreCsi(Construct):
    """The driver, then the AWS provider; `add_secret_reader` grants one service account one secret."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: SecretsStoreCsiProps) -> None:
        props.validate()
        super().__init__(scope, id)
        self.props = props
        self._cluster = cluster = props.cluster
        self.driver = install_chart(
            self,
            "Driver",
            cluster=cluster,
            source=SECRETS_STORE_CSI_DRIVER_CHART,
            release="secrets-store-csi-driver",
            namespace=NAMESPACE,
            values=with_helm_values(driver_values(props), props.driver_helm_values),
            timeout=props.driver_timeout,
            waits=3,
            create_namespace=False,
        )
        self.provider = install_chart(
            self,
            "ProviderAws",
            cluster=cluster,
            source=SECRETS_STORE_CSI_PROVIDER_AWS_CHART,
            release="secrets-store-csi-driver-provider-aws",
            namespace=NAMESPACE,
            values=with_helm_values(
                provider_values(props, region=cdk.Stack.of(self).region), props.provider_helm_values
            ),
            timeout=props.provider_timeout,
            create_namespace=False,
        )
        self.provider.node.add_dependency(self.driver)

    def add_secret_reader(
        self, namespace: str, service_account: str, secret_name: str, *, kms_key_arn: str | None = None
    ) -> iam.Role:
        """Let `namespace/service_account` read exactly one Secrets Manager secret, by name, through Pod Identity.

        The resource is `secret:<name>-??????`: Secrets Manager appends `-` and six random characters to every
        secret's ARN, so the name alone never matches, and `?` (one character each) unlike `*` cannot match another
        secret whose name merely starts with this one (`hf-token-old`). `kms_key_arn` is only needed when the secret
        is encrypted with a customer managed key. Returns the service account's (shared) Pod Identity role.
        """
        with errors_at(self.node.path):
            check_name("secret_reader.namespace", namespace, label=True)
            check_name("secret_reader.service_account", service_account, label=False)
            if secret_name.startswith("arn:") or not aws_ids.SECRET_NAME.match(secret_name):
                raise ConfigError(
                    E308,
                    f"secret_reader.secret_name: {secret_name!r} is not allowed; must be a Secrets Manager secret NAME "
                    "(1-512 of letters, digits and /_+=.@-), not an ARN",
                )
            check_kms_key_arn("secret_reader.kms_key_arn", kms_key_arn)
        identity = PodIdentityRole.for_service_account(self._cluster, namespace, service_account)
        harden_roles(identity, self.props.permissions_boundary)
        stack = cdk.Stack.of(self)
        secret_arn = stack.format_arn(
            service="secretsmanager",
            resource="secret",
            resource_name=f"{secret_name}-??????",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        identity.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid=_sid("ReadSecret", secret_name),
                actions=["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                resources=[secret_arn],
            )
        )
        if kms_key_arn is not None:
            identity.role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid=_sid("DecryptSecret", secret_name),
                    actions=["kms:Decrypt"],
                    resources=[kms_key_arn],
                    conditions={"StringEquals": {"kms:ViaService": f"secretsmanager.{stack.region}.amazonaws.com"}},
                )
            )
        # The pod must not start before its provider can mount the secret.
        identity.node.add_dependency(self.provider)
        return identity.role


def _sid(prefix: str, name: str) -> str:
    """IAM statement ids allow only letters and digits."""
    return prefix + "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", name) if part)


def driver_values(props: SecretsStoreCsiOptions) -> dict[str, Any]:
    """Helm values for secrets-store-csi-driver."""
    return {
        "linux": {"tolerations": [dict(t) for t in props.node_tolerations]},
        # No Kubernetes Secret copies: the token stays a file in the pod's tmpfs volume.
        "syncSecret": {"enabled": False},
        "enableSecretRotation": props.rotation,
        # Only Pod Identity (no IRSA audience): ASCP trades this token for the pod's role credentials.
        "tokenRequests": [{"audience": POD_IDENTITY_AUDIENCE}],
    }


def provider_values(props: SecretsStoreCsiOptions, *, region: str) -> dict[str, Any]:
    """Helm values for secrets-store-csi-driver-provider-aws."""
    return {
        # The driver is its own pinned release (see the module docstring).
        "secrets-store-csi-driver": {"install": False},
        "tolerations": [dict(t) for t in props.node_tolerations],
        # Nodes may block pods from IMDS (hop limit 1), so the provider is told its region instead of asking.
        "awsRegion": region,
    }
