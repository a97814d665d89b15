"""Write an environment's Kubernetes objects as YAML with cdk8s alone, for GitOps (Argo CD, Flux).

    llm-eks manifests --env dev --node-role-name KarpenterNodeRole-dev --security-group-id sg-0123... --out k8s/

The same charts the CDK stack applies (charts.build_charts), built without aws_cdk: the two values that only a
deploy knows, the Karpenter node role name and the cluster security group id, are passed in. One file per chart,
numbered in apply order; a chart's `needs` are the add-ons to install first (docs: GitOps). Before them,
`00-addon-namespaces.yaml` holds the add-ons' namespaces with their Pod Security labels and NetworkPolicies, the same
objects the stack applies before its Helm releases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import cdk8s

from llm_eks.config import EnvironmentConfig
from llm_eks.error_codes import E601
from llm_eks.errors import ConfigError
from llm_eks.images.lock import ImageLock
from llm_eks.infra.charts import addon_namespaces, build_charts
from llm_eks.infra.review import dump_all
from llm_eks.infra.workloads import build_workloads
from llm_eks.planner import Plan

ADDONS_HEADER = (
    "# needs: nothing. Apply first, then install the add-ons into these namespaces without --create-namespace:\n"
    "# each Namespace carries its Pod Security level, each NetworkPolicy one flow the add-on needs.\n"
)


def write_manifests(
    config: EnvironmentConfig,
    plans: Sequence[Plan],
    out: Path,
    *,
    node_role_name: str,
    security_group_ids: tuple[str, ...],
    images: ImageLock | None = None,
    weights_bucket: str | None = None,
    oidc_issuer: str | None = None,
    region: str | None = None,
    placement_groups: Mapping[str, str] | None = None,
) -> list[Path]:
    """Synthesize every chart of `config` into `out` (cleared of old YAML first); return the files written.
    `plans`: one per workload, in `config.served` order. Images locked in `images` are pinned by digest, as the CDK
    stack pins them. `weights_bucket`: the bucket's name for staged weights (default: weights_bucket.name in the
    config; a bucket the stack creates is named only at deploy, by its output WeightsBucketName). `oidc_issuer`: the
    cluster's OIDC issuer URL, for a gateway that trusts the cluster's service-account tokens. `region`: where the
    gateway's tenant API keys are in Secrets Manager (default: the environment's region). `placement_groups`:
    the cluster placement group id (pg-...) of each EFA node class, by node class name (a replica spanning nodes)."""
    workloads = build_workloads(config, plans, region=config.region, images=images)
    if weights_bucket is None and config.weights_bucket is not None:
        weights_bucket = config.weights_bucket.name
    staged = [s.path for s in config.served if s.config.weights == "staged"]
    if staged and weights_bucket is None:
        raise ConfigError(
            E601,
            f"--weights-bucket: None is not allowed; {staged[0]} has weights 'staged' in a bucket the stack creates: "
            "pass its name (stack output WeightsBucketName)",
        )
    charts = build_charts(
        cdk8s.App(),
        config,
        workloads,
        node_role_name=node_role_name,
        security_group_ids=security_group_ids,
        weights_bucket=weights_bucket,
        cluster_oidc_issuer=oidc_issuer,
        region=region,
        placement_groups=placement_groups,
    )
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.yaml"):
        old.unlink()
    first = out / "00-addon-namespaces.yaml"
    first.write_text(ADDONS_HEADER + dump_all(addon_namespaces(workloads, config)))
    written = [first]
    for index, planned in enumerate(charts, start=1):
        suffix = "" if planned.apply else ".manual"
        path = out / f"{index:02d}-{planned.id}{suffix}.yaml"
        header = f"# needs: {', '.join(planned.needs) or 'nothing'}\n"
        path.write_text(header + dump_all(planned.chart.to_json()))
        written.append(path)
    return written
