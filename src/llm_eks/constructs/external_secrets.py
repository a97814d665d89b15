"""`ExternalSecrets`: the External Secrets Operator, scoped to its own namespace, syncing named Secrets Manager secrets
into Kubernetes Secrets there (the inference gateway's tenant API keys: Envoy Gateway reads API keys only from
Kubernetes Secrets, and watches them, so a rotated key reaches Envoy without a redeploy).

Scoped: `scopedRBAC` with `scopedNamespace` (its own namespace) gives the controller a Role there instead of a
ClusterRole and turns the cluster-wide reconcilers off (ClusterSecretStore, ClusterExternalSecret,
ClusterPushSecret); the webhook and the certificate controller are off (the CRD schemas still validate objects;
CRD conversion is off by default). Its AWS identity is its own Pod Identity role, which may read exactly the secrets
`add_secret` names (`secret:<name>-??????`, as SecretsStoreCsi.add_secret_reader); a SecretStore without `auth`
uses it (docs/provider/aws-access.md, "EKS Pod Identity Setup").

Sources: external-secrets/external-secrets tag helm-chart-2.9.0 (cc5bfbc): deploy/charts/external-secrets/values.yaml
(scopedNamespace, scopedRBAC, webhook.create, certController.create, installCRDs, crds.create*, process*,
serviceAccount.name, podDisruptionBudget), templates/deployment.yaml (`--namespace`, the cluster reconcilers off with
scopedRBAC), templates/rbac.yaml (Role and RoleBinding with scopedRBAC).
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
    Placement,
    PodIdentityRole,
    addon_namespace,
    check_boundary,
    check_helm_values,
    check_name,
    harden_roles,
    install_chart,
    requests_limits,
    with_helm_values,
)
from llm_eks.error_codes import E308
from llm_eks.errors import errors_at, fail, named_errors
from llm_eks.manifests.gateway import platform
from llm_eks.versions import EXTERNAL_SECRETS_CHART_VERSION

EXTERNAL_SECRETS_CHART = ChartSource(
    "external-secrets", "https://charts.external-secrets.io", EXTERNAL_SECRETS_CHART_VERSION
)
SERVICE_ACCOUNT = "external-secrets"


@dataclass(frozen=True)
class ExternalSecretsOptions:
    """External Secrets Operator options; every default is the production-right one."""

    namespace: str = platform.EXTERNAL_SECRETS_NAMESPACE
    # One controller: a second would only stand by (leader election) while each sync is already retried; a key
    # rotation waits for the refresh interval anyway.
    replicas: int = 1
    placement: Placement = field(default_factory=Placement)
    # The controller Deployment and its CRDs; no hook Jobs (webhook and cert controller off).
    timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.minutes(5))
    # Merged over ours (addons.with_helm_values).
    helm_values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # Your organisation's permissions boundary on the controller's role; None: no boundary.
    permissions_boundary: iam.IManagedPolicy | None = None

    def validate(self) -> None:
        check_name("external_secrets.namespace", self.namespace, label=True)
        if not 1 <= self.replicas <= 2:
            raise fail(E308, "external_secrets.replicas", self.replicas, "must be 1 or 2")
        check_helm_values("external_secrets.helm_values", self.helm_values)
        check_boundary("external_secrets.permissions_boundary", self.permissions_boundary)


@dataclass(frozen=True, kw_only=True)
class ExternalSecretsProps(ExternalSecretsOptions):
    """`ExternalSecretsOptions` on one cluster."""

    cluster: eks.ICluster


class ExternalSecrets(Construct):
    """The namespace, the controller's Pod Identity role, then the release. `add_secret` lets the controller read one
    more Secrets Manager secret by name.

    `namespace_objects` lists the plain Kubernetes objects applied outside Helm, for the review output.
    """

    @named_errors
    def __init__(self, scope: Construct, id: str, props: ExternalSecretsProps) -> None:
        props.validate()
        super().__init__(scope, id)
        self.props = props
        cluster = props.cluster
        self.namespace = props.namespace
        self.namespace_objects = platform.external_secrets_namespace(props.namespace)
        self.namespace_manifest = addon_namespace(self, "Namespace", cluster=cluster, objects=self.namespace_objects)
        self.identity = PodIdentityRole.for_service_account(cluster, props.namespace, SERVICE_ACCOUNT)
        harden_roles(self.identity, props.permissions_boundary)
        self.chart = install_chart(
            self,
            "Chart",
            cluster=cluster,
            source=EXTERNAL_SECRETS_CHART,
            release=platform.EXTERNAL_SECRETS_RELEASE,
            namespace=props.namespace,
            values=with_helm_values(external_secrets_values(props), props.helm_values),
            timeout=props.timeout,
            create_namespace=False,
        )
        # Its pods get AWS credentials only once the association exists.
        self.chart.node.add_dependency(self.namespace_manifest, self.identity)

    def add_secret(self, secret_name: str) -> None:
        """Let the controller read Secrets Manager secret `secret_name` (by name: `secret:<name>-??????`, so neither
        another secret whose name starts the same nor any other)."""
        with errors_at(self.node.path):
            if secret_name.startswith("arn:") or not aws_ids.SECRET_NAME.match(secret_name):
                raise fail(
                    E308,
                    "external_secrets.secret_name",
                    secret_name,
                    "must be a Secrets Manager secret NAME (1-512 of letters, digits and /_+=.@-), not an ARN",
                )
        arn = cdk.Stack.of(self).format_arn(
            service="secretsmanager",
            resource="secret",
            resource_name=f"{secret_name}-??????",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.identity.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="Read" + "".join(p.capitalize() for p in re.split(r"[^A-Za-z0-9]+", secret_name) if p),
                actions=["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                resources=[arn],
            )
        )


def external_secrets_values(props: ExternalSecretsOptions) -> dict[str, Any]:
    """Helm values for external-secrets (values.yaml at 2.9.0)."""
    placement = props.placement.values()
    cluster_kinds_off = {
        "createClusterExternalSecret": False,
        "createClusterSecretStore": False,
        "createClusterGenerator": False,
        "createClusterPushSecret": False,
        "createPushSecret": False,
    }
    return {
        **placement,
        "replicaCount": props.replicas,
        "leaderElect": props.replicas > 1,
        # Only its own namespace: a Role there, no ClusterRole, and the cluster-wide reconcilers off.
        "scopedNamespace": props.namespace,
        "scopedRBAC": True,
        "installCRDs": True,
        # The cluster-scoped kinds and PushSecret are neither watched nor installed (the chart says to turn the
        # matching process* off with them).
        "crds": cluster_kinds_off,
        "processClusterExternalSecret": False,
        "processClusterPushSecret": False,
        "processClusterStore": False,
        "processClusterGenerator": False,
        "processPushSecret": False,
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
        "webhook": {"create": False},
        "certController": {"create": False},
        "resources": requests_limits("50m", "128Mi", memory_limit="512Mi"),
        "podDisruptionBudget": {"enabled": props.replicas > 1, "minAvailable": 1},
    }
