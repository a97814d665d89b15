"""`InferenceStack`: the composition root for one environment (`LlmEks-<env>`)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import cdk8s
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from llm_eks.constructs.cluster import InferenceCluster, InferenceClusterProps
from llm_eks.infra.config import EnvironmentConfig


class InferenceStack(cdk.Stack):
    """One environment: cluster, capacity, operators and workloads, in dependency order."""

    def __init__(self, scope: Construct, config: EnvironmentConfig, **kwargs: Any) -> None:
        env = cdk.Environment(account=config.account, region=config.region) if config.account else None
        super().__init__(
            scope,
            config.stack_name,
            env=env,
            description=f"llm-eks {config.name}: EKS inference platform for {config.workload.model}",
            **kwargs,
        )
        self.config = config
        # The cdk8s app that holds this stack's charts; its objects also go to cdk.out/manifests/<env>/.
        self.k8s_app = cdk8s.App()
        self._charts: list[tuple[str, cdk8s.Chart]] = []

        cdk.Tags.of(self).add("llm-eks:environment", config.name)
        for key, value in config.tags.items():
            cdk.Tags.of(self).add(key, value)

        self.cluster = InferenceCluster(self, "Platform", self._cluster_props(config))

    def _cluster_props(self, config: EnvironmentConfig) -> InferenceClusterProps:
        s = config.system_nodes
        return InferenceClusterProps(
            cluster_name=config.cluster_name,
            vpc=self._imported_vpc(config) if config.vpc.imported else None,
            vpc_cidr=config.vpc.cidr,
            availability_zones=config.vpc.availability_zones,
            public_endpoint_cidrs=config.endpoint.public_cidrs,
            system_instance_type=s.instance_type,
            system_min_size=s.min_size,
            system_desired_size=s.desired_size,
            system_max_size=s.max_size,
            system_disk_gib=s.disk_gib,
            admin_role_arns=config.admin_role_arns,
        )

    def _imported_vpc(self, config: EnvironmentConfig) -> ec2.IVpc:
        v = config.vpc
        return ec2.Vpc.from_vpc_attributes(
            self,
            "ImportedVpc",
            vpc_id=v.vpc_id or "",
            availability_zones=list(v.availability_zones),
            private_subnet_ids=list(v.private_subnet_ids),
            public_subnet_ids=list(v.public_subnet_ids) or None,
        )

    def add_chart(self, id: str, chart: cdk8s.Chart, *, after: tuple[Construct, ...] = ()) -> Construct:
        """Apply a cdk8s chart after the constructs it needs (operators, CRDs) and record it for review."""
        manifest = self.cluster.cluster.add_cdk8s_chart(id, chart)
        for dependency in after:
            manifest.node.add_dependency(dependency)
        self._charts.append((id, chart))
        return manifest

    def review_objects(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """Each chart's Kubernetes objects with CDK tokens resolved to CloudFormation references."""
        return [(id, self.resolve(chart.to_json())) for id, chart in self._charts]
