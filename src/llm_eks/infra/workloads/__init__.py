"""Map one environment's config and capacity plans onto the props of its charts.

Pure Python (no aws_cdk): every number a chart or node pool uses comes from the plan or the config through here.
`types` holds one workload type per engine, `pools` the GPU node pools, `props` each chart's props, `build` the
environment's workloads together.
"""

from llm_eks.infra.workloads.build import build_workload, build_workloads, warm_headroom
from llm_eks.infra.workloads.pools import gpu_pool, merge_pools, placement, pool_sizes
from llm_eks.infra.workloads.props import (
    api_key_secret,
    autoscaling_props,
    benchmark_props,
    cache_size,
    generated_api_key_secret,
    ingress_props,
    monitoring_props,
    only_workload,
    ray_monitoring_props,
    ray_props,
    shm_size,
    slug,
    vllm_props,
    workload_name,
    workload_namespace,
)
from llm_eks.infra.workloads.types import Addon, RayServeWorkload, VllmWorkload, Workload

__all__ = [
    "Addon",
    "RayServeWorkload",
    "VllmWorkload",
    "Workload",
    "api_key_secret",
    "autoscaling_props",
    "benchmark_props",
    "build_workload",
    "build_workloads",
    "cache_size",
    "generated_api_key_secret",
    "gpu_pool",
    "ingress_props",
    "merge_pools",
    "monitoring_props",
    "only_workload",
    "placement",
    "pool_sizes",
    "ray_monitoring_props",
    "ray_props",
    "shm_size",
    "slug",
    "vllm_props",
    "warm_headroom",
    "workload_name",
    "workload_namespace",
]
