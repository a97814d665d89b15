"""What a Neuron server's pod differs in (VllmProps.neuron): where the checkpoint and the compiled artefacts live, the
engines' environment, the drain of an engine without --shutdown-timeout, and the scheduler for partial-node pods.

- The checkpoint: both Neuron engines load a local directory (NxD Inference shards it in host memory; neither reads
  S3 the way vLLM's Run:ai streamer does), so an init container copies the staged checkpoint into MODEL_DIR on the
  cache volume, every file checked against its staging record, and `vllm serve` gets that directory.
- Compiled artefacts: NxD Inference keeps them in NEURON_COMPILED_ARTIFACTS ("When pointed to a path that contains a
  pre-compiled model, we load the pre-compiled model directly", aws-neuron-sdk libraries/nxd-inference/
  developer_guides/vllm-user-guide-v1.rst at 81ce03ae); vllm-neuron under $VLLM_CACHE_ROOT/neuron/compile_cache
  (vllm-neuron/docs/design/compilation/compilation_cache.md, same commit). The compile cache's writer Job compiles
  there and publishes the directory, signed; serving pods restore it before the engine starts. A vllm-neuron serving
  pod refuses to compile (VLLM_NEURON_DISABLE_WARMUP_COMPILE=1 and NEURON_LIBTORCH_DISABLE_GRAPH_CAPTURE_BACKEND=1,
  the documented way to guarantee no compile on production instances, cpu_compilation.md): a missing artefact is an
  error, never a silent 40-minute compile, so their restore is `--required` and waits in Init for the writer's
  signed artefacts. NxD Inference has no such switch: a pod whose restore found nothing compiles, and its startup
  probe allows it (planner/neuron/cold_start.py).
- Drain: vLLM 0.16.0 (NxD Inference's path) has no --shutdown-timeout; its launcher cancels the server on SIGTERM
  (entrypoints/launcher.py), so in-flight requests must finish before SIGTERM: the preStop sleep holds the whole
  window (pre_stop_seconds + shutdown_timeout_seconds) while the endpoints controller has already taken the pod out
  of its Service.
- Scheduler: a pod of more than one but fewer than all of a node's Neuron chips needs contiguous chips, which only the
  Neuron scheduler extension hands out; pods name its second scheduler (neuron-helm-chart's customScheduler
  fullnameOverride "my-scheduler", deploy/infrastructure/scheduler.rst: "schedulerName: my-scheduler").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llm_eks.manifests.vllm.props import CACHE_DIR

if TYPE_CHECKING:
    from llm_eks.manifests.vllm.props import VllmProps

NEURON_SCHEDULER_NAME = "my-scheduler"
MODEL_DIR = f"{CACHE_DIR}/model"
# Below CACHE_DIR: the directory the compile cache restores into and publishes from, per engine path.
ARTIFACTS_SUBDIR = {"nxd-inference": "neuron/artifacts", "vllm-neuron": "vllm/neuron/compile_cache"}


# The compiled artefacts' sizes are not published (a traced NxD Inference model holds its NEFFs): the writer publishes
# files up to 16 GiB (the GPU cache's cap is 2 GiB) and a serving pod gives the restore half an hour (GPU: 5 min).
MAX_FILE_BYTES = 16 * 1024**3
RESTORE_DEADLINE_SECONDS = 1800


def restore_options(p: VllmProps) -> dict[str, Any]:
    """The compile cache restore's options for this server: none on GPUs."""
    if p.neuron is None:
        return {}
    return {
        "subdir": ARTIFACTS_SUBDIR[p.neuron.engine],
        "deadline_seconds": RESTORE_DEADLINE_SECONDS,
        # vllm-neuron's serving pods refuse to compile: they wait in Init for the writer's artefacts.
        "required": p.neuron.engine == "vllm-neuron",
    }


def publish_options(p: VllmProps) -> dict[str, Any]:
    """The compile cache writer's publish options for this server: none on GPUs."""
    if p.neuron is None:
        return {}
    return {"subdir": ARTIFACTS_SUBDIR[p.neuron.engine], "max_file_bytes": MAX_FILE_BYTES}


def neuron_env(p: VllmProps, *, writer: bool = False) -> list[dict[str, str]]:
    """The engine's environment on Neuron: caches on the cache volume, and (serving pods of vllm-neuron) no compile."""
    assert p.neuron is not None
    env = [
        {"name": "HF_HOME", "value": f"{CACHE_DIR}/huggingface"},
        {"name": "VLLM_CACHE_ROOT", "value": f"{CACHE_DIR}/vllm"},
        # The container's user has no home in the image: the compiler and the runtime write under HOME.
        {"name": "HOME", "value": f"{CACHE_DIR}/home"},
        {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
        {"name": "DO_NOT_TRACK", "value": "1"},
    ]
    if p.neuron.engine == "nxd-inference":
        env.append({"name": "NEURON_COMPILED_ARTIFACTS", "value": f"{CACHE_DIR}/{ARTIFACTS_SUBDIR['nxd-inference']}"})
    elif not writer:
        env += [
            {"name": "VLLM_NEURON_DISABLE_WARMUP_COMPILE", "value": "1"},
            {"name": "NEURON_LIBTORCH_DISABLE_GRAPH_CAPTURE_BACKEND", "value": "1"},
        ]
    return env


def pre_stop_seconds(p: VllmProps) -> int:
    """The preStop sleep: endpoint removal, plus the in-flight drain where the engine cannot drain after SIGTERM."""
    if p.neuron is not None and not p.neuron.shutdown_timeout:
        return p.pre_stop_seconds + p.shutdown_timeout_seconds
    return p.pre_stop_seconds


def drain_flags(p: VllmProps) -> list[str]:
    """--shutdown-timeout where the engine's vLLM has it."""
    if p.neuron is not None and not p.neuron.shutdown_timeout:
        return []
    return ["--shutdown-timeout", str(p.shutdown_timeout_seconds)]


def scheduler(p: VllmProps) -> dict[str, Any]:
    return {"schedulerName": p.scheduler_name} if p.scheduler_name is not None else {}
