"""The capacity plan of each workload of an environment. Pure Python (no aws_cdk, cdk8s or jsii): `llm-eks plan`,
`llm-eks images lock` and `llm-eks manifests` import it as `cdk synth` does."""

from __future__ import annotations

from llm_eks.config import EnvironmentConfig
from llm_eks.errors import ConfigError
from llm_eks.planner import Plan, plan
from llm_eks.planner.fixes import NoFitError


def plan_workloads(config: EnvironmentConfig) -> tuple[Plan, ...]:
    """The capacity plan of each workload, in `config.served` order; planner errors carry the workload's path."""
    plans = []
    for s in config.served:
        try:
            plans.append(plan(s.config.plan_request(config.compute)))
        except ConfigError as err:
            # The changes that would fit, named as cdk.json sets them for this workload.
            message = err.render(s.setting) if isinstance(err, NoFitError) else str(err)
            if message.startswith("workload."):
                message = f"{s.path}.{message.removeprefix('workload.')}"
            raise ConfigError(message) from None
    return tuple(plans)
