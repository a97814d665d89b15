"""`NeuronMonitorChart`: the Neuron monitor on every Neuron node, and Prometheus's scrape of it.

The Neuron SDK's Prometheus exporter (`neuron-monitor | neuron-monitor-prometheus.py`) reads the Neuron runtime of
its node: NeuronCore utilization (`neuroncore_utilization_ratio`, label `neuroncore`), device and host memory the
runtime holds (`neuron_runtime_memory_used_bytes`, label `memory_location`), execution latency and errors. The
DaemonSet follows AWS's own manifest (aws-neuron-sdk src/k8/k8s-neuron-monitor-daemonset.yml at 81ce03ae: image
public.ecr.aws/neuron/neuron-monitor:1.3.0, `/opt/bin/entrypoint.sh --port 8000 --neuron-monitor-config
/opt/aws/neuron/bin/neuron-monitor.conf`, GOMEMLIMIT 160MiB, its requests and limits, privileged), placed by the
pools' accelerator label instead of that manifest's instance-type list (which names no trn2 size). It runs in the
monitoring namespace (Pod Security privileged already for node-exporter; Prometheus scrapes every pod there).

Its series carry no pod: the ServiceMonitor records each target's node as `node`, and the dashboards join them with
kube-state-metrics' `kube_pod_info` on `node` to show the Neuron nodes a workload's pods run on. The pod-attribution
companion (`neuron-monitor-k8s-info.py`) is Beta in the SDK and not used. Metric names are those of AWS's Grafana
dashboard (src/examples/neuron-monitor/neuron-monitor-grafana.json, same commit); nothing here has been scraped live.
"""

from __future__ import annotations

from typing import Any

from constructs import Construct

from llm_eks.manifests import plus
from llm_eks.manifests.checkov import UNLOCKED_IMAGE_SKIP, skip_annotations
from llm_eks.manifests.labels import PART_OF
from llm_eks.manifests.node_pools import ACCELERATOR_RESOURCE, LABEL_ACCELERATOR, NEURON
from llm_eks.manifests.promql import selector
from llm_eks.manifests.serving_objects import add_objects
from llm_eks.manifests.source import with_source

NEURON_MONITOR_NAME = "neuron-monitor"
NEURON_MONITOR_PORT = 8000
NEURON_MONITOR_LABELS = {"app.kubernetes.io/name": NEURON_MONITOR_NAME, "app.kubernetes.io/part-of": PART_OF}
# What the ServiceMonitor names each target's node (the join key of the dashboards' Neuron panels).
NODE_LABEL = "node"
# AWS's manifest's requests and limits, and its Go memory limit below the memory limit.
_REQUESTS = {"cpu": "256m", "memory": "128Mi"}
_LIMITS = {"cpu": "500m", "memory": "256Mi"}
_SKIPS = {
    "CKV_K8S_16": "The Neuron monitor reads every Neuron device of its node: AWS runs it privileged.",
    "CKV_K8S_20": "The Neuron monitor reads every Neuron device of its node: AWS runs it privileged.",
    "CKV_K8S_23": "AWS's Neuron monitor image runs as root to read the Neuron driver's devices and sysfs.",
    "CKV_K8S_37": "The Neuron monitor reads every Neuron device of its node: AWS runs it privileged.",
    "CKV_K8S_40": "AWS's Neuron monitor image runs as root to read the Neuron driver's devices and sysfs.",
    "CKV_K8S_22": "AWS's Neuron monitor image writes its state at run time; its root filesystem stays as shipped.",
    "CKV_K8S_8": "An exporter with no health endpoint of its own; Prometheus's up series is its liveness signal.",
    "CKV_K8S_9": "An exporter with no health endpoint of its own; Prometheus's up series is its liveness signal.",
    "CKV_K8S_31": "Privileged: a seccomp profile does not apply to a privileged container.",
    "CKV_K8S_28": "Privileged as AWS runs it: dropping one capability does not narrow a privileged container.",
    "CKV_K8S_29": "Privileged as AWS runs it, as root: a pod security context would not narrow it.",
    "CKV_K8S_15": "IfNotPresent on purpose: the image is pinned, and a restart needs no registry round trip.",
}


def neuron_monitor_objects(namespace: str, image: str) -> list[dict[str, Any]]:
    """The DaemonSet on every Neuron node and the headless Service Prometheus discovers it through."""
    pod_spec = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "priorityClassName": "system-node-critical",
        "nodeSelector": {LABEL_ACCELERATOR: NEURON},
        "tolerations": [
            {"key": ACCELERATOR_RESOURCE[NEURON], "operator": "Exists", "effect": "NoSchedule"},
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
        ],
        "containers": [
            {
                "name": NEURON_MONITOR_NAME,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["/opt/bin/entrypoint.sh"],
                "args": [
                    "--port",
                    str(NEURON_MONITOR_PORT),
                    "--neuron-monitor-config",
                    "/opt/aws/neuron/bin/neuron-monitor.conf",
                ],
                "ports": [{"name": "metrics", "containerPort": NEURON_MONITOR_PORT, "protocol": "TCP"}],
                "env": [{"name": "GOMEMLIMIT", "value": "160MiB"}],
                "resources": {"requests": dict(_REQUESTS), "limits": dict(_LIMITS)},
                "securityContext": {"privileged": True},
            }
        ],
    }
    skips = {**_SKIPS, **({} if "@sha256:" in image else UNLOCKED_IMAGE_SKIP)}
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {
                "name": NEURON_MONITOR_NAME,
                "namespace": namespace,
                "labels": dict(NEURON_MONITOR_LABELS),
                "annotations": skip_annotations(skips),
            },
            "spec": {
                "selector": {"matchLabels": dict(NEURON_MONITOR_LABELS)},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {"metadata": {"labels": dict(NEURON_MONITOR_LABELS)}, "spec": pod_spec},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": NEURON_MONITOR_NAME, "namespace": namespace, "labels": dict(NEURON_MONITOR_LABELS)},
            "spec": {
                "clusterIP": "None",
                "selector": dict(NEURON_MONITOR_LABELS),
                "ports": [{"name": "metrics", "port": NEURON_MONITOR_PORT, "targetPort": "metrics", "protocol": "TCP"}],
            },
        },
    ]


def neuron_service_monitor(namespace: str, scrape_interval: str) -> dict[str, Any]:
    """Prometheus's scrape of the monitor, each target's node recorded as `node`."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": NEURON_MONITOR_NAME, "namespace": namespace, "labels": dict(NEURON_MONITOR_LABELS)},
        "spec": {
            "selector": {"matchLabels": dict(NEURON_MONITOR_LABELS)},
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": [
                {
                    "port": "metrics",
                    "path": "/metrics",
                    "interval": scrape_interval,
                    "relabelings": [
                        {
                            "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                            "targetLabel": NODE_LABEL,
                            "action": "replace",
                        }
                    ],
                }
            ],
        },
    }


def on_workload_nodes(expr: str, namespace: str) -> str:
    """`expr` (a Neuron monitor series with `node`) on the nodes that run a pod of `namespace`."""
    pods = f"kube_pod_info{selector({'namespace': namespace})}"
    return f"{expr} * on ({NODE_LABEL}) group_left () max by ({NODE_LABEL}) ({pods})"


class NeuronMonitorChart(plus.PlusChart):
    """The Neuron monitor's DaemonSet and Service (cdk8s-plus objects: manifests/plus) and ServiceMonitor, in the
    monitoring namespace (the cluster's one copy, whichever workloads run on Neuron)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, image: str, namespace: str, scrape_interval: str
    ) -> None:
        super().__init__(scope, construct_id)
        objects = [*neuron_monitor_objects(namespace, image), neuron_service_monitor(namespace, scrape_interval)]
        add_objects(self, [with_source(obj, __name__) for obj in objects])
