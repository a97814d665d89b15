"""`llm-eks verify`: a deployed environment held against its plan, through the user's kubeconfig alone (the
Kubernetes API server, and its service proxy to the environment's Prometheus).

The modules, in the order data flows:

    derive         the plan side: config and capacity plans -> EnvironmentPlan (expected), through the charts' props
                   and rendering functions (the one module that loads cdk8s; imported only when a command runs)
    kube           the API server: the kubeconfig, raw GETs, the objects the plan names (reads: what, and rbac: the
                   ClusterRole that allows exactly that)
    prometheus     the PromQL verify sends and the queries through the service proxy
    checks*        pure functions: observed data + plan -> rows (nodes, pods, routes, metrics, --load's results);
                   latency is held against the planner's estimate at the observed load (planner/at_load.py) and
                   its drift definition (planner/drift.py: the ratios, the samples a percentile needs)
    wait           --wait-ready: until the workloads have settled
    load           --load: the benchmark Jobs, run and read through the API server
    report         the table and the JSON; record: calibration points in the latency fixture's shape; journal: the
                   JSON lines of verify's and canary's steps
    run            one verification, end to end
    rollout        canary and rollback: the route's weights, step by step
    usage          `llm-eks usage`: each gateway tenant's tokens per model over a window, through the same proxy

Importing this package loads neither aws_cdk nor cdk8s nor the kubernetes client.
"""

from llm_eks.manifests.verifier.rbac import cluster_role, cluster_role_binding, rbac_objects, workload_rbac
from llm_eks.verify.rows import FAILING, VERDICTS, Row, Verdict, exit_code, worst

__all__ = [
    "FAILING",
    "VERDICTS",
    "Row",
    "Verdict",
    "cluster_role",
    "cluster_role_binding",
    "exit_code",
    "rbac_objects",
    "workload_rbac",
    "worst",
]
