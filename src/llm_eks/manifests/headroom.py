"""Warm headroom: placeholder pods that hold GPU nodes for replicas that do not exist yet.

The Kubernetes over-provisioning pattern (cluster-autoscaler FAQ "How can I configure overprovisioning"; Karpenter
treats the placeholders as any pending pod): a Deployment of pause containers shaped like one serving replica
(same accelerators, CPU, memory, node selector and tolerations) at a PriorityClass below every other pod. Karpenter
keeps a node up for each; when KEDA adds a real replica, the scheduler pre-empts a placeholder (the replica's
priority is higher) and the replica starts on a node that is already Ready, with its image on disk when an image
snapshot is used. The evicted placeholder goes Pending and Karpenter launches a node for it, up to the pool's limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llm_eks.errors import fail
from llm_eks.manifests.checkov import UNLOCKED_IMAGE_SKIP, skip_annotations
from llm_eks.manifests.labels import selector_labels
from llm_eks.manifests.pods import container_security_context, placement, pod_security_context
from llm_eks.manifests.vllm import VllmProps
from llm_eks.versions import PAUSE_IMAGE

HEADROOM_APP = "warm-headroom"
PRIORITY_CLASS = "llm-eks-warm-headroom"
# Below the default priority (0) of every pod without a class, so any pending pod pre-empts a placeholder; pods with
# this class never pre-empt anything themselves.
PRIORITY = -10
# The pause image's own non-root user (registry.k8s.io/pause runs as 65535).
PAUSE_USER = 65535
_SKIPS = {
    "CKV_K8S_8": "A pause container has nothing to probe: it only holds its node for a future replica.",
    "CKV_K8S_9": "A pause container has nothing to probe: it only holds its node for a future replica.",
}


def _skips(image: str) -> dict[str, str]:
    """The placeholder's checkov suppressions; the digest one only while the image has no locked digest."""
    return {**_SKIPS, **({} if "@sha256:" in image else UNLOCKED_IMAGE_SKIP)}


@dataclass(frozen=True)
class HeadroomProps:
    """How many replica-shaped placeholders to keep, for which serving workload."""

    replicas: int
    serving: VllmProps
    # The pause image (a locked digest when the environment has one).
    image: str = PAUSE_IMAGE
    # Emit the cluster-scoped PriorityClass; False where another workload's headroom already carries it.
    priority_class: bool = True


def headroom_objects(p: HeadroomProps) -> list[dict[str, Any]]:
    """The PriorityClass (unless another workload's headroom carries it) and the placeholder Deployment."""
    if p.replicas < 1:
        raise fail("headroom.replicas", p.replicas, "must be at least 1 (leave the headroom out for none)")
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
        "metadata": {"name": name, "namespace": s.namespace, "annotations": skip_annotations(_skips(p.image))},
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
                    "containers": [
                        {
                            "name": "pause",
                            "image": p.image,
                            "imagePullPolicy": "Always",  # a few hundred kB; the tag or digest is re-checked
                            "resources": {
                                "requests": requests,
                                "limits": {k: v for k, v in requests.items() if k != "ephemeral-storage"},
                            },
                            "securityContext": {**container_security_context(), "readOnlyRootFilesystem": True},
                        }
                    ],
                    **placement(s.node_selector, s.tolerations),
                },
            },
        },
    }
    return [priority_class(), deployment] if p.priority_class else [deployment]


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
