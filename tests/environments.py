"""Test helpers for environments with one workload."""

from __future__ import annotations

from llm_eks.config import EnvironmentConfig
from llm_eks.config.plans import plan_workloads
from llm_eks.infra.workloads import only_workload
from llm_eks.planner import Plan


def plan_environment(config: EnvironmentConfig) -> Plan:
    """The capacity plan of an environment with one workload; planner errors carry the workload's path."""
    only_workload(config)
    return plan_workloads(config)[0]
