"""The compile cache's one writer: a Job that runs the workload's own vLLM, with the same arguments on the same GPU
pool, waits until it serves (it has compiled by then), and publishes the cache once, signed (weights_staging's
compile_cache program). It has a ServiceAccount of its own (add-only on the cache prefix, the only identity that
may sign with the cache's KMS key), no Hub token, no API key, and labels no Service, InferencePool or
NetworkPolicy selects; its vLLM listens on the pod's loopback only (`--host 127.0.0.1`, vLLM 0.33 FrontendArgs.host,
where publish polls /health): no client ever reaches it. The Job is named after a hash of its pod template (a Job's
template is immutable): a changed image or engine argument is a new cache key, so a new Job and a new cache; any
other change to the template is a new Job that finds its cache signed and exits before vLLM is up. A disaggregated
workload has one writer for both pools: it runs the prefill role's server, whose compile the decode pods restore too
(pod.compiled_server says why that is the same compile).

On Neuron (VllmProps.neuron) the writer is where the model is compiled ahead of time: it runs the same server on the
same instance type, without the serving pods' refusal to compile (manifests/vllm/neuron.py), publishes the engine's
artefact directory instead of torch.compile's, and its deadline adds the planned compile time."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from llm_eks.error_codes import E404
from llm_eks.errors import ConfigError
from llm_eks.manifests.checkov import serving_pod_annotations
from llm_eks.manifests.labels import app_labels
from llm_eks.manifests.source import builds_objects
from llm_eks.manifests.vllm import neuron
from llm_eks.manifests.vllm.pod import (
    LOOPBACK,
    compile_cache_key_of,
    compiled_server,
    container_args,
    container_env,
    serving_pod_spec,
    staged_weights_init_containers,
    vllm_port,
)
from llm_eks.manifests.vllm.props import CACHE_DIR, ProbeTiming, VllmProps
from llm_eks.manifests.weights_staging import (
    BUCKET_ENV,
    COMPILE_CACHE_SCRIPT_ENV,
    KEY_LENGTH,
    cache_signing_key_env,
    compile_cache_publish_command,
    compile_cache_script,
)

COMPILE_CACHE_APP = "vllm-compile-cache"
# Karpenter neither consolidates nor drifts a node under a pod with this annotation.
_DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}
# Spot may take the node: two more tries, each compiling from the start.
BACKOFF_LIMIT = 2
# Publishing a few hundred MiB of artefacts, after vLLM's own start-up budget.
PUBLISH_SECONDS = 1800


def cache_key(p: VllmProps) -> str:
    """The cache key of the workload's server: its image and `vllm serve` arguments (pod.compile_cache_key_of)."""
    return compile_cache_key_of(p)


def cache_prefix(p: VllmProps) -> str:
    """The cache key's own prefix: `<compile_cache>/<key>/`."""
    assert p.compile_cache is not None
    return f"{p.compile_cache}{cache_key(p)}/"


def job_name(p: VllmProps, template: dict[str, Any]) -> str:
    """`<workload>-cc-<hash of the Job's pod template>`: a Job's template is immutable, so any change to it (a new
    cache key, image or program) must be a new Job, never an update the API server refuses."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return f"{p.name}-cc-{digest[:KEY_LENGTH]}"


def writer_name(p: VllmProps) -> str:
    """The writer's ServiceAccount: the Job's identity, the only one that may write the cache."""
    return f"{p.name}-compile-cache"


@builds_objects
def writer_objects(p: VllmProps, timing: ProbeTiming) -> list[dict[str, Any]]:
    """The writer's ServiceAccount and Job (vLLM's props as the Deployment has them)."""
    if p.compile_cache is None or p.staged_weights is None:
        raise ConfigError(E404, "compile_cache: only with staged weights (the writer reads them as the replicas do)")
    if p.nodes_per_replica > 1:
        raise ConfigError(
            E404, "compile_cache: not for a replica that spans nodes (one writer pod compiles one server)"
        )
    name, key = writer_name(p), cache_key(p)
    if len(name) > 63 or len(f"{p.name}-cc-{key}") > 63:
        raise ConfigError(E404, f"compile_cache: {p.name!r} is too long for the writer's names (at most 48 characters)")
    # The server as the Deployment runs it, without what a client needs (key, Hub token) and without probes.
    # It compiles for the planned family: on node_selector's pool alone, never a fallback family's.
    # A disaggregated workload's writer compiles as its prefill server (pod.compiled_server says why).
    server = replace(
        compiled_server(p), api_key_secret=None, hf_token_secret=None, pools=(), floor_replicas=0, floor_pools=()
    )
    labels = app_labels(COMPILE_CACHE_APP, name)
    pod = serving_pod_spec(server, timing, selector=labels)
    (container,) = pod["containers"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        container.pop(probe)
    container["command"] = [
        "/bin/sh",
        "-c",
        compile_cache_publish_command(cache_prefix(p), key, CACHE_DIR, vllm_port(server), **neuron.publish_options(p)),
        "vllm",
    ]
    # It serves nobody: its API server listens on the pod's loopback only, where publish polls /health.
    container["args"] = container_args(server, "server", host=LOOPBACK)
    container.pop("ports", None)
    container["env"] = [
        *container_env(server, writer=True),
        {"name": COMPILE_CACHE_SCRIPT_ENV, "value": compile_cache_script()},
        cache_signing_key_env(),
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
    ]
    assert any(e["name"] == BUCKET_ENV for e in container["env"])
    # The wait for the staged weights and the adapter fetches, as a replica has them: the writer compiles from
    # scratch, it never restores.
    pod["initContainers"] = staged_weights_init_containers(server, "server", restore=False)
    pod["serviceAccountName"] = name
    pod["restartPolicy"] = "Never"
    # One writer per key, on a node of its own: it spreads against nothing.
    pod.pop("topologySpreadConstraints", None)
    template = {"metadata": {"labels": labels, "annotations": dict(_DO_NOT_DISRUPT)}, "spec": pod}
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": p.namespace, "labels": labels},
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": job_name(p, template),
                "namespace": p.namespace,
                "labels": labels,
                # It runs the vLLM image as the server does, so the same checkov findings apply for the same reasons.
                "annotations": serving_pod_annotations(p.image, neuron=p.neuron is not None),
            },
            "spec": {
                "backoffLimit": BACKOFF_LIMIT,
                "activeDeadlineSeconds": (
                    p.provisioning_seconds + timing.startup_budget_seconds + p.compile_seconds + PUBLISH_SECONDS
                ),
                # Gone a day after it ends; the cache it published stays, and an unchanged key finds it signed.
                "ttlSecondsAfterFinished": 86400,
                "template": template,
            },
        },
    ]
