"""Warm headroom: placeholder pods that hold GPU nodes for replicas that do not exist yet.

The Kubernetes over-provisioning pattern (cluster-autoscaler FAQ "How can I configure overprovisioning"; Karpenter
treats the placeholders as any pending pod): a Deployment of pause containers shaped like one serving replica
(same accelerators, CPU, memory, node selector and tolerations) at a PriorityClass below every other pod. Karpenter
keeps a node up for each; when KEDA adds a real replica, the scheduler pre-empts a placeholder (the replica's
priority is higher) and the replica starts on a node that is already Ready. Each placeholder first runs the serving
image (an init container that exits at once), so the node has pulled it before any replica needs it: the kubelet's
image garbage collection keeps an image while a container that used it exists, and the exited init container exists
as long as the placeholder. The evicted placeholder goes Pending and Karpenter launches a node for it, up to the
pool's limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llm_eks.error_codes import E137
from llm_eks.errors import fail
from llm_eks.manifests.checkov import SERVING_POD_SKIPS, UNLOCKED_IMAGE_SKIP, skip_annotations
from llm_eks.manifests.labels import selector_labels
from llm_eks.manifests.pods import container_security_context, placement, pod_security_context
from llm_eks.manifests.source import builds_objects
from llm_eks.manifests.vllm import VllmProps
from llm_eks.versions import PAUSE_IMAGE

HEADROOM_APP = "warm-headroom"
PRIORITY_CLASS = "llm-eks-warm-headroom"
# Below the default priority (0) of every pod without a class, so any pending pod pre-empts a placeholder; pods with
# this class never pre-empt anything themselves.
PRIORITY = -10
# The pause image's own non-root user (registry.k8s.io/pause runs as 65535).
PAUSE_USER = 65535
# The init container only starts a shell and exits.
PULL_RESOURCES = {"cpu": "100m", "memory": "64Mi"}
_SKIPS = {
    "CKV_K8S_8": "A pause container has nothing to probe: it only holds its node for a future replica.",
    "CKV_K8S_9": "A pause container has nothing to probe: it only holds its node for a future replica.",
    "CKV_K8S_15": SERVING_POD_SKIPS["CKV_K8S_15"],
}


def _skips(*images: str) -> dict[str, str]:
    """The placeholder's checkov suppressions; the digest one only while an image has no locked digest."""
    return {**_SKIPS, **({} if all("@sha256:" in image for image in images) else UNLOCKED_IMAGE_SKIP)}


@dataclass(frozen=True)
class HeadroomProps:
    """How many replica-shaped placeholders to keep, for which serving workload."""

    replicas: int
    serving: VllmProps
    # The pause image (a locked digest when the environment has one); the serving image comes from `serving`.
    image: str = PAUSE_IMAGE
    # Emit the cluster-scoped PriorityClass; False where another workload's headroom already carries it.
    priority_class: bool = True


@builds_objects
def headroom_objects(p: HeadroomProps) -> list[dict[str, Any]]:
    """The PriorityClass (unless another workload's headroom carries it) and the placeholder Deployment."""
    if p.replicas < 1:
        raise fail(E137, "headroom.replicas", p.replicas, "must be at least 1 (leave the headroom out for none)")
    s = p.serving
    name = f"{s.name}-headroom"
    labels = selector_labels(HEADROOM_APP, name)
    # What the replica requests, node-local model cache included, so Karpenter sizes the node for the replica.
    requests = {
        "cpu": s.cpu,
        "memory": s.memory,
        "ephemeral-storage": s.cache_size,
        s.accelerator_resource: str(s.accelerators_per_pod),
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": s.namespace, "annotations": skip_annotations(_skips(p.image, s.image))},
        "spec": {
            "replicas": p.replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": PRIORITY_CLASS,
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 0,
                    "securityContext": pod_security_context(PAUSE_USER, PAUSE_USER),
                    "initContainers": [
                        {
                            # Pulls the serving image onto the node ahead of demand; /bin/sh is in the image already
                            # (the serving container's API-key wrapper runs it).
                            "name": "pull-serving-image",
                            "image": s.image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["/bin/sh", "-c", "exit 0"],
                            "resources": {"requests": PULL_RESOURCES, "limits": PULL_RESOURCES},
                            "securityContext": {**container_security_context(), "readOnlyRootFilesystem": True},
                        }
                    ],
                    "containers": [
                        {
                            "name": "pause",
                            "image": p.image,
                            "imagePullPolicy": "IfNotPresent",  # pinned: a restart needs no registry round trip
                            "resources": {
                                "requests": requests,
                                "limits": {k: v for k, v in requests.items() if k != "ephemeral-storage"},
                            },
                            "securityContext": {**container_security_context(), "readOnlyRootFilesystem": True},
                        }
                    ],
                    **placement(s.node_selector, s.tolerations),
                    # As the replica's: a pod of some of a node's Neuron chips takes contiguous ones from the Neuron
                    # scheduler extension's scheduler.
                    **({"schedulerName": s.scheduler_name} if s.scheduler_name is not None else {}),
                },
            },
        },
    }
    return [priority_class(), deployment] if p.priority_class else [deployment]


@builds_objects
def priority_class() -> dict[str, Any]:
    """The cluster-scoped class of every placeholder: below any ordinary pod, and never pre-empting one itself."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": PRIORITY_CLASS},
        "value": PRIORITY,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "llm-eks warm headroom: placeholders any serving replica pre-empts.",
    }
