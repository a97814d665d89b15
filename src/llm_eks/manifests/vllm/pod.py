"""The vLLM container and pod spec: one server pod, or the leader and worker pods of a replica that spans nodes."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from llm_eks.manifests import pods
from llm_eks.manifests.api_key import api_key_mount, api_key_volume, export_key
from llm_eks.manifests.pods import container_security_context, hf_token_env, hf_token_mount, hf_token_volume, placement
from llm_eks.manifests.vllm.props import (
    CACHE_DIR,
    LIVENESS_FAILURE_THRESHOLD,
    PORT,
    PORT_NAME,
    PROBE_PERIOD_SECONDS,
    PROBE_TIMEOUT_SECONDS,
    READINESS_FAILURE_THRESHOLD,
    STARTUP_PERIOD_SECONDS,
    ProbeTiming,
    VllmProps,
)
from llm_eks.manifests.weights_staging import (
    BUCKET_ENV,
    bucket_env,
    compile_cache_key,
    compile_cache_restore_container,
    fetch_adapter_init_container,
    wait_for_weights_init_container,
)
from llm_eks.planner.engine import parallel_flags, vllm_flags

# "server": the one pod of a single-node replica; "leader"/"worker": the pods of a LeaderWorkerSet group.
Role: TypeAlias = Literal["server", "leader", "worker"]
# Set by LeaderWorkerSet v0.10 in every container of a group (api/leaderworkerset/v1/leaderworkerset_types.go).
LWS_LEADER_ADDRESS = "LWS_LEADER_ADDRESS"
LWS_WORKER_INDEX = "LWS_WORKER_INDEX"
RUNAI_STREAMER_CONCURRENCY = 32
# Labels LeaderWorkerSet sets on a group's pods: its index within the group (0: the leader), and the group's key.
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"


def container_args(p: VllmProps, role: Role = "server") -> list[str]:
    """`vllm serve` arguments after the subcommand: the model, the chart-owned flags, the engine settings, then
    the extra flags. A replica spanning nodes adds vLLM 0.33's multiprocessing multi-node flags
    (vllm/engine/arg_utils.py, vllm/entrypoints/cli/serve.py): every pod of a LeaderWorkerSet group gets
    --nnodes and the leader's address as --master-addr; the leader is rank 0 and serves, each worker takes its
    rank from LWS_WORKER_INDEX and runs --headless (no API server, its executor joins the leader's)."""
    args = [p.model, "--host", "0.0.0.0", "--port", str(PORT), "--served-model-name", p.served_model_name]
    args += parallel_flags(p.tensor_parallel_size, p.pipeline_parallel_size)
    args += ["--shutdown-timeout", str(p.shutdown_timeout_seconds)]
    if p.weights == "s3":
        args += ["--load-format", "runai_streamer"]
    if role != "server":
        # $(VAR) is expanded by the kubelet from the env LeaderWorkerSet injects into every container of a group.
        rank = "0" if role == "leader" else f"$({LWS_WORKER_INDEX})"
        args += ["--nnodes", str(p.nodes_per_replica), "--node-rank", rank, "--master-addr", f"$({LWS_LEADER_ADDRESS})"]
        if role == "worker":
            args.append("--headless")
    return args + vllm_flags(p.engine) + list(p.extra_engine_args)


def container_command(p: VllmProps) -> list[str]:
    """`vllm serve` (explicit, whatever the image's ENTRYPOINT), behind a shell that exports the API key file as
    VLLM_API_KEY when there is one. `exec` leaves vLLM as PID 1, so SIGTERM still starts its drain."""
    if p.api_key_secret is None:
        return ["vllm", "serve"]
    # "$@" are container_args: no quoting to get wrong; $0 names the process in shell errors.
    return ["/bin/sh", "-c", f'{export_key("VLLM_API_KEY")}; exec vllm serve "$@"', "vllm"]


def container_env(p: VllmProps) -> list[dict[str, str]]:
    env = [
        # Weights and the torch.compile cache on the cache volume: a container restart reuses both.
        {"name": "HF_HOME", "value": f"{CACHE_DIR}/huggingface"},
        {"name": "VLLM_CACHE_ROOT", "value": f"{CACHE_DIR}/vllm"},
        {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
        {"name": "DO_NOT_TRACK", "value": "1"},
    ]
    if p.weights == "s3":
        # The Run:ai streamer's best published S3 throughput is at 32 concurrent reads (its default for object
        # storage is 8): runai-model-streamer docs/src/benchmarks.md, 15 GB in 4.88 s on g5.12xlarge.
        env.append({"name": "RUNAI_STREAMER_CONCURRENCY", "value": str(RUNAI_STREAMER_CONCURRENCY)})
    if p.hf_token_secret is not None:
        env.append(hf_token_env())
    if p.aws_region is not None:
        env.append({"name": "AWS_REGION", "value": p.aws_region})
    if p.staged_weights is not None:
        # The bucket's name, for $(LLM_EKS_WEIGHTS_BUCKET) in the model argument.
        env.append(bucket_env())
    return env


def pod_security_context(p: VllmProps) -> dict[str, Any]:
    """The pod security context of vLLM pods (the server, and the benchmark Job running the same image)."""
    # GID 0: the image makes /home/vllm and its caches group-0 writable for exactly this user.
    return pods.pod_security_context(p.run_as_user, run_as_group=0)


def adapter_dir(name: str) -> str:
    """Where a staged LoRA adapter is restored in the pod (on the cache volume), and where --lora-modules points."""
    return f"{CACHE_DIR}/lora/{name}"


def staged_weights_init_containers(p: VllmProps, role: Role, *, restore: bool = True) -> list[dict[str, Any]]:
    """Every pod of a replica streams its share of the weights: each waits until staging has finished, fetches
    its staged LoRA adapters, verified, then (a single-node server, unless not `restore`: the cache's writer)
    restores the signed compile cache its writer Job published (compile_job)."""
    assert p.staged_weights is not None
    prefix, key = p.staged_weights
    containers = [wait_for_weights_init_container(BUCKET_ENV, prefix, key, p.image, p.aws_region)]
    for i, (name, adapter_prefix, adapter_key) in enumerate(p.staged_adapters):
        container = fetch_adapter_init_container(
            str(i), adapter_prefix, adapter_key, adapter_dir(name), p.image, p.aws_region
        )
        container["volumeMounts"] = [{"name": "cache", "mountPath": CACHE_DIR}]
        containers.append(container)
    if p.compile_cache is not None and role == "server" and restore:
        cache_key = compile_cache_key(p.image, container_args(p, "server"))
        cache = f"{p.compile_cache}{cache_key}/"
        containers.append(compile_cache_restore_container(cache, cache_key, p.image, p.aws_region, CACHE_DIR, "cache"))
    return containers


def serving_pod_spec(
    p: VllmProps, timing: ProbeTiming, selector: dict[str, str], role: Role = "server"
) -> dict[str, Any]:
    """The pod spec of a server, a group leader or a group worker. A worker serves no HTTP, so it has no probes;
    the group is recreated when any of its pods fails (LeaderWorkerSet's RecreateGroupOnPodRestart)."""
    accelerators = str(p.accelerators_per_pod)
    volumes: list[dict[str, Any]] = [
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": p.shm_size}},
        {"name": "cache", "emptyDir": {"sizeLimit": p.cache_size}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "shm", "mountPath": "/dev/shm"},
        {"name": "cache", "mountPath": CACHE_DIR},
    ]
    if p.hf_token_secret is not None:
        volumes.append(hf_token_volume(p.name))
        mounts.append(hf_token_mount())
    if p.api_key_secret is not None:
        volumes.append(api_key_volume(p.name))
        mounts.append(api_key_mount())

    def http_probe(path: str) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": PORT_NAME}, "timeoutSeconds": PROBE_TIMEOUT_SECONDS}

    container: dict[str, Any] = {
        "name": "vllm",
        "image": p.image,
        "imagePullPolicy": "IfNotPresent",
        "command": container_command(p),
        "args": container_args(p, role),
        "env": container_env(p),
        "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
        "resources": {
            # No CPU limit: CFS throttling stalls the tokenizer and scheduler threads and shows up as
            # latency spikes; the request reserves what the planner sized. Memory limit = request
            # (memory is not compressible, and an overcommitted GPU node evicts the expensive pod).
            "requests": {
                "cpu": p.cpu,
                "memory": p.memory,
                "ephemeral-storage": p.cache_size,
                p.accelerator_resource: accelerators,
            },
            "limits": {"memory": p.memory, p.accelerator_resource: accelerators},
        },
        "volumeMounts": mounts,
    }
    if role != "worker":
        container.update(
            {
                "startupProbe": {
                    **http_probe("/health"),
                    "periodSeconds": STARTUP_PERIOD_SECONDS,
                    "failureThreshold": timing.startup_failure_threshold,
                },
                # /health answers only once the model is served, and needs no key (package docstring).
                "readinessProbe": {
                    **http_probe("/health"),
                    "periodSeconds": PROBE_PERIOD_SECONDS,
                    "failureThreshold": READINESS_FAILURE_THRESHOLD,
                },
                "livenessProbe": {
                    **http_probe("/health"),
                    "periodSeconds": PROBE_PERIOD_SECONDS,
                    "failureThreshold": LIVENESS_FAILURE_THRESHOLD,
                },
            }
        )
    container["lifecycle"] = {"preStop": {"sleep": {"seconds": p.pre_stop_seconds}}}
    container["securityContext"] = container_security_context()
    pod_spec: dict[str, Any] = {
        "serviceAccountName": p.name,
        # vLLM never calls the Kubernetes API; Pod Identity and the CSI driver bring their own tokens.
        "automountServiceAccountToken": False,
        # Service env vars would include VLLM_*_PORT style names that vLLM reads as its own settings.
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": p.termination_grace_seconds,
        "securityContext": pod_security_context(p),
        "containers": [container],
        "volumes": volumes,
    }
    if p.staged_weights is not None:
        pod_spec["initContainers"] = staged_weights_init_containers(p, role)
    pod_spec.update(placement(p.node_selector, p.tolerations))
    if role != "server":
        # A group's pods exchange tensors every step: all of them in the leader's zone (never NCCL across AZs).
        # matchLabelKeys adds the pod's own group key to the selector (GA in Kubernetes 1.33).
        pod_spec["affinity"] = {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": selector},
                        "matchLabelKeys": [LWS_GROUP_KEY_LABEL],
                        "topologyKey": "topology.kubernetes.io/zone",
                    }
                ]
            }
        }
    if p.zone_spread:
        # ScheduleAnyway: GPU capacity is scarce per AZ; a skewed replica beats a Pending one. Karpenter
        # still tries the emptier zone first. A group spreads its pods over hosts, and groups over zones.
        pod_spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": key,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": selector},
            }
            for key in (
                ("kubernetes.io/hostname",)
                if role == "worker"
                else ("topology.kubernetes.io/zone", "kubernetes.io/hostname")
            )
        ]
    return pod_spec
