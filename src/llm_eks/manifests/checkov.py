"""checkov suppressions on Kubernetes objects, as the annotations checkov reads (`checkov.io/skip<N>: ID=reason`).

checkov splits the annotation value at `=`, so a reason may not contain one; each reason is one line.
"""

from __future__ import annotations

from collections.abc import Mapping

# Why our GPU serving pods (vLLM, the benchmark Job that runs the same image) differ from checkov's defaults.
SERVING_POD_SKIPS: Mapping[str, str] = {
    "CKV_K8S_11": "No CPU limit on purpose: CFS throttling stalls tokenization and the GPU; CPU is requested.",
    "CKV_K8S_15": "IfNotPresent on purpose: the image is 10+ GB and a re-pull on every start costs minutes.",
    "CKV_K8S_22": "vLLM, torch.compile and Triton write caches under HOME and /tmp at run time.",
    "CKV_K8S_40": "Runs as the vLLM image's own non-root user (UID 2000), not an arbitrary UID the image lacks.",
}
# Only while an image has no locked digest (`llm-eks images lock`): the shipped defaults stay on tags.
UNLOCKED_IMAGE_SKIP: Mapping[str, str] = {
    "CKV_K8S_43": "No verified digest could be locked here; run llm-eks images lock and require_image_digests.",
}


def skip_annotations(reasons: Mapping[str, str]) -> dict[str, str]:
    """`{"checkov.io/skip1": "CKV_K8S_11=reason", ...}` for the given check ids and reasons."""
    annotations = {}
    for i, (check_id, reason) in enumerate(sorted(reasons.items()), start=1):
        if "=" in reason or "\n" in reason or not reason:
            raise ValueError(f"checkov reason for {check_id} must be one non-empty line without '=': {reason!r}")
        annotations[f"checkov.io/skip{i}"] = f"{check_id}={reason}"
    return annotations


def with_image_skips(reasons: Mapping[str, str], image: str) -> dict[str, str]:
    """`reasons`, and the digest one while `image` has no digest."""
    return {**reasons, **({} if "@sha256:" in image else UNLOCKED_IMAGE_SKIP)}


# A Neuron server runs AWS's Neuron container, which has no user of its own for the pod: the same fixed UID.
NEURON_RUN_AS = "Runs as a fixed non-root UID (2000) with GID 0; its caches are on the pod's writable volumes."


def serving_pod_annotations(image: str, *, neuron: bool = False) -> dict[str, str]:
    """The suppressions of a serving pod running `image` (a GPU one, or with `neuron` a Neuron one); the digest one
    only while `image` has no digest."""
    reasons = {**SERVING_POD_SKIPS, **({"CKV_K8S_40": NEURON_RUN_AS} if neuron else {})}
    return skip_annotations(with_image_skips(reasons, image))
