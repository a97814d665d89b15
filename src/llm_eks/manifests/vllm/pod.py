"""The vLLM container and pod spec: one server pod, or the leader and worker pods of a replica that spans nodes."""

from __future__ import annotations

from dataclasses import replace
from importlib import resources
from typing import Any, Literal, TypeAlias

from llm_eks.manifests import pods
from llm_eks.manifests.api_key import api_key_mount, api_key_volume, export_key
from llm_eks.manifests.node_pools.specs import CAPACITY_TYPE_LABEL, LABEL_NODE_POOL
from llm_eks.manifests.pods import container_security_context, hf_token_env, hf_token_mount, hf_token_volume, placement
from llm_eks.manifests.vllm import neuron
from llm_eks.manifests.vllm.disaggregated import (
    DECODE_VLLM_PORT,
    DECODE_VLLM_PORT_NAME,
    NIXL_PORT_NAME,
    NIXL_SIDE_CHANNEL_PORT,
    side_channel_env,
    sidecar_container,
    sidecar_token_volume,
)
from llm_eks.manifests.vllm.props import (
    CACHE_DIR,
    LIVENESS_FAILURE_THRESHOLD,
    LIVENESS_PERIOD_SECONDS,
    LIVENESS_STALL_SECONDS,
    LIVENESS_TIMEOUT_SECONDS,
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
    fetch_weights_init_container,
    wait_for_weights_init_container,
)
from llm_eks.planner import kv_events
from llm_eks.planner.engine import parallel_flags, vllm_flags
from llm_eks.planner.neuron.engine import neuron_flags
from llm_eks.planner.result import EFA_RESOURCE

# "server": the one pod of a single-node replica; "leader"/"worker": the pods of a LeaderWorkerSet group.
Role: TypeAlias = Literal["server", "leader", "worker"]
# Set by LeaderWorkerSet v0.10 in every container of a group (api/leaderworkerset/v1/leaderworkerset_types.go).
LWS_LEADER_ADDRESS = "LWS_LEADER_ADDRESS"
LWS_WORKER_INDEX = "LWS_WORKER_INDEX"
RUNAI_STREAMER_CONCURRENCY = 32
ZONE = "topology.kubernetes.io/zone"
# Labels LeaderWorkerSet sets on a group's pods: its index within the group (0: the leader), and the group's key.
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
# Where vLLM's API server listens: every interface of the pod (a server others reach), or only its loopback.
ALL_INTERFACES = "0.0.0.0"
LOOPBACK = "127.0.0.1"


def data_parallel_size_local(p: VllmProps) -> int | None:
    """The data-parallel ranks on each pod of a replica whose ranks span nodes; None when they do not."""
    if p.data_parallel_size == 1 or p.nodes_per_replica == 1:
        return None
    return p.accelerators_per_pod // p.tensor_parallel_size


def container_args(p: VllmProps, role: Role = "server", *, host: str = ALL_INTERFACES) -> list[str]:
    """`vllm serve` arguments after the subcommand: the model, the chart-owned flags, the engine settings, then
    the extra flags. A replica spanning nodes adds vLLM 0.33's multi-node flags (vllm/engine/arg_utils.py,
    vllm/entrypoints/cli/serve.py), the leader's address from LWS_LEADER_ADDRESS, which LeaderWorkerSet injects
    into every container of a group. Tensor x pipeline parallelism (the multiprocessing backend): every pod gets
    --nnodes and --master-addr, the leader is rank 0 and serves, each worker takes its --node-rank from
    LWS_WORKER_INDEX and runs --headless. Data parallelism: every pod names the leader as --data-parallel-address,
    the leader serves ranks 0 to local - 1, each worker runs its ranks --headless from the start rank its command
    computes (container_command). `host`: where the API server listens (vLLM 0.33 FrontendArgs.host): every
    interface of the pod for a server that serves, the loopback for one that serves nobody (the compile-cache
    writer). A Neuron server (p.neuron) gets its engine path's flags instead (planner/neuron/engine.py) and the local
    directory its staged checkpoint was copied to."""
    if p.neuron is not None:
        model = neuron.MODEL_DIR if p.staged_weights is not None else p.model
        args = [model, "--host", host, "--port", str(PORT), "--served-model-name", p.served_model_name]
        args += ["--tensor-parallel-size", str(p.tensor_parallel_size), *neuron.drain_flags(p)]
        return args + neuron_flags(p.neuron, p.engine) + list(p.extra_engine_args)
    local = data_parallel_size_local(p)
    args = [p.model, "--host", host, "--port", str(vllm_port(p)), "--served-model-name", p.served_model_name]
    args += parallel_flags(
        p.tensor_parallel_size, p.pipeline_parallel_size, p.data_parallel_size, local, p.expert_parallel
    )
    args += ["--shutdown-timeout", str(p.shutdown_timeout_seconds)]
    if p.weights == "s3":
        args += ["--load-format", "runai_streamer"]
    if role != "server":
        # $(VAR) is expanded by the kubelet from the container's env.
        if local is None:
            rank = "0" if role == "leader" else f"$({LWS_WORKER_INDEX})"
            args += ["--nnodes", str(p.nodes_per_replica), "--node-rank", rank]
            args += ["--master-addr", f"$({LWS_LEADER_ADDRESS})"]
        else:
            args += ["--data-parallel-address", f"$({LWS_LEADER_ADDRESS})"]
        if role == "worker":
            args.append("--headless")
    engine = p.engine
    if p.disaggregation is not None and p.pd_role is not None:
        d = p.disaggregation
        transfer = d.prefill_kv_transfer_config if p.pd_role == "prefill" else d.decode_kv_transfer_config
        args += ["--kv-transfer-config", transfer]
        # The CPU tier rides in the connector config (a MultiConnector): --kv-offloading-size would replace it.
        engine = replace(engine, kv_offloading_size=None)
    return args + vllm_flags(engine) + list(p.extra_engine_args)


def compiled_server(p: VllmProps) -> VllmProps:
    """The server whose compile a pod's compile cache holds: its own, or for either pool of a disaggregated workload
    the prefill role's. vLLM 0.33 hashes nothing of the KV-transfer config into the compile cache's directory
    (KVTransferConfig.compute_hash has no factors, config/kv_transfer.py:93-108; VllmConfig.compute_hash,
    config/vllm.py:551-554; compilation/backends.py:1059-1098) nor the side channel's host (an ignored env factor,
    envs.py compile_factors), and both roles run the same engine flags: one compile serves both pools. The prefill
    role's server answers on the pool's port (a decode pod's vLLM is behind its sidecar)."""
    return replace(p, pd_role="prefill") if p.pd_role is not None else p


def compile_cache_key_of(p: VllmProps) -> str:
    """The compile cache's key of `p`'s pods: the image and the `vllm serve` arguments of `compiled_server(p)`."""
    return compile_cache_key(p.image, container_args(compiled_server(p), "server"))


def vllm_port(p: VllmProps) -> int:
    """Where vLLM listens: a decode pod's behind its routing sidecar, which takes the pool's port."""
    return DECODE_VLLM_PORT if p.pd_role == "decode" else PORT


def vllm_port_name(p: VllmProps) -> str:
    return DECODE_VLLM_PORT_NAME if p.pd_role == "decode" else PORT_NAME


def container_command(p: VllmProps, role: Role = "server") -> list[str]:
    """`vllm serve` (explicit, whatever the image's ENTRYPOINT), behind a shell when there is something to compute:
    the API key file exported as VLLM_API_KEY, or a data-parallel worker's first rank (its LWS_WORKER_INDEX x the
    ranks per pod; the kubelet's $(VAR) cannot multiply). `exec` leaves vLLM as PID 1, so SIGTERM still starts its
    drain."""
    steps = [export_key("VLLM_API_KEY")] if p.api_key_secret is not None else []
    local = data_parallel_size_local(p)
    start_rank = f" --data-parallel-start-rank $(({LWS_WORKER_INDEX} * {local}))" if role == "worker" and local else ""
    if not steps and not start_rank:
        return ["vllm", "serve"]
    serve = f'exec vllm serve "$@"{start_rank}'
    # "$@" are container_args: no quoting to get wrong; $0 names the process in shell errors.
    return ["/bin/sh", "-c", "; ".join([*steps, serve]), "vllm"]


def container_env(p: VllmProps, *, writer: bool = False) -> list[dict[str, str]]:
    """The vLLM container's environment; `writer`: the compile cache's writer Job's (it may compile on Neuron)."""
    if p.neuron is not None:
        env = neuron.neuron_env(p, writer=writer)
        if p.aws_region is not None:
            env.append({"name": "AWS_REGION", "value": p.aws_region})
        if writer:
            # The bucket the writer publishes the compiled artefacts to.
            env.append(bucket_env())
        return env
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
    if p.nodes_per_replica > 1:
        # NCCL and Gloo on the pod's own interface (pods.POD_INTERFACE says why, and what is left unset).
        env += [{"name": name, "value": pods.POD_INTERFACE} for name in pods.SOCKET_INTERFACE_ENV]
    if p.pd_role is not None:
        env += side_channel_env()
    if p.engine.kv_events_config is not None:
        # The pod's address in the KV-event topic, $(POD_IP) in --kv-events-config (planner/kv_events.py).
        env += pod_ip_env()
    if p.efa_interfaces:
        # NCCL's init and network lines name the transport it chose: "NET/OFI Selected provider is efa" with the EFA
        # userspace in the image, "Using network Socket" when it fell back to TCP (docs: Largest models).
        env += [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "NCCL_DEBUG_SUBSYS", "value": "INIT,NET"}]
    return env


def pod_ip_env() -> list[dict[str, Any]]:
    return [{"name": kv_events.POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]


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
    if p.neuron is not None:
        # The Neuron engines load a local directory: the checkpoint is copied onto the node (after staging ends).
        fetch = fetch_weights_init_container(prefix, key, neuron.MODEL_DIR, p.image, p.aws_region)
        fetch["volumeMounts"] = [{"name": "cache", "mountPath": CACHE_DIR}]
        containers = [fetch]
    else:
        containers = [wait_for_weights_init_container(BUCKET_ENV, prefix, key, p.image, p.aws_region)]
    for i, (name, adapter_prefix, adapter_key) in enumerate(p.staged_adapters):
        container = fetch_adapter_init_container(
            str(i), adapter_prefix, adapter_key, adapter_dir(name), p.image, p.aws_region
        )
        container["volumeMounts"] = [{"name": "cache", "mountPath": CACHE_DIR}]
        containers.append(container)
    if p.compile_cache is not None and role == "server" and restore:
        cache_key = compile_cache_key_of(p)
        cache = f"{p.compile_cache}{cache_key}/"
        containers.append(
            compile_cache_restore_container(
                cache, cache_key, p.image, p.aws_region, CACHE_DIR, "cache", **neuron.restore_options(p)
            )
        )
    return containers


def _node_affinity(pools: tuple[str, ...], on_demand: bool) -> dict[str, Any]:
    """Required: one of `pools` (by their llm-eks.io/node-pool label), on-demand capacity only with `on_demand`."""
    expressions = [{"key": LABEL_NODE_POOL, "operator": "In", "values": list(pools)}]
    if on_demand:
        expressions.append({"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": ["on-demand"]})
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
    }


def liveness_script() -> str:
    """liveness.py's text, run with `python3 -c` by the vLLM container's liveness probe."""
    text = resources.files("llm_eks.manifests.vllm").joinpath("liveness.py").read_text(encoding="utf-8")
    # The kubelet would expand `$(NAME)` in a probe's command: the script must hold none.
    assert "$(" not in text
    return text


def liveness_command() -> list[str]:
    """The exec probe: /health, then requests running without token progress for LIVENESS_STALL_SECONDS."""
    return liveness_command_on(PORT)


def liveness_command_on(port: int) -> list[str]:
    return ["python3", "-c", liveness_script(), "--port", str(port), "--stall-seconds", str(LIVENESS_STALL_SECONDS)]


def serving_pod_spec(
    p: VllmProps, timing: ProbeTiming, selector: dict[str, str], role: Role = "server", *, floor: bool = False
) -> dict[str, Any]:
    """The pod spec of a server, a group leader or a group worker; with `floor`, of the on-demand floor's (its
    pools, on-demand only, spread over zones as a requirement). A worker serves no HTTP, so it has no probes; the
    group is recreated when any of its pods fails (LeaderWorkerSet's RecreateGroupOnPodRestart)."""
    accelerators = str(p.accelerators_per_pod)
    # Extended resources: the request equals the limit. The EFA devices of the node go to its one serving pod.
    devices = {
        p.accelerator_resource: accelerators,
        **({EFA_RESOURCE: str(p.efa_interfaces)} if p.efa_interfaces else {}),
    }
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
        return {"httpGet": {"path": path, "port": vllm_port_name(p)}, "timeoutSeconds": PROBE_TIMEOUT_SECONDS}

    ports = [{"name": vllm_port_name(p), "containerPort": vllm_port(p), "protocol": "TCP"}]
    if p.pd_role is not None:
        # The NIXL handshake (data-parallel rank i on 5600 + i).
        ports += [
            {
                "name": f"{NIXL_PORT_NAME}-{i}" if i else NIXL_PORT_NAME,
                "containerPort": NIXL_SIDE_CHANNEL_PORT + i,
                "protocol": "TCP",
            }
            for i in range(p.data_parallel_size)
        ]

    container: dict[str, Any] = {
        "name": "vllm",
        "image": p.image,
        "imagePullPolicy": "IfNotPresent",
        "command": container_command(p, role),
        "args": container_args(p, role),
        "env": container_env(p),
        "ports": ports,
        "resources": {
            # No CPU limit: CFS throttling stalls the tokenizer and scheduler threads and shows up as
            # latency spikes; the request reserves what the planner sized. Memory limit = request
            # (memory is not compressible, and an overcommitted GPU node evicts the expensive pod).
            "requests": {
                "cpu": p.cpu,
                "memory": p.memory,
                "ephemeral-storage": p.cache_size,
                **devices,
            },
            "limits": {"memory": p.memory, **devices},
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
                # /health and token progress (manifests/vllm/liveness.py): a wedged GPU keeps /health at 200.
                "livenessProbe": {
                    "exec": {"command": liveness_command_on(vllm_port(p))},
                    "periodSeconds": LIVENESS_PERIOD_SECONDS,
                    "timeoutSeconds": LIVENESS_TIMEOUT_SECONDS,
                    "failureThreshold": LIVENESS_FAILURE_THRESHOLD,
                },
            }
        )
    container["lifecycle"] = {"preStop": {"sleep": {"seconds": neuron.pre_stop_seconds(p)}}}
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
    if p.pd_role == "decode" and p.disaggregation is not None and role != "worker":
        # Last of the init containers: a native sidecar starts after the ones before it have finished. A group's
        # workers run --headless: only its leader serves, behind the sidecar.
        sidecar = sidecar_container(p.disaggregation, p.namespace, PORT, PORT_NAME)
        pod_spec["initContainers"] = [*pod_spec.get("initContainers", []), sidecar]
        volumes.append(sidecar_token_volume())
    pools = p.floor_pools if floor else p.pools
    # With pools, the node affinity names them: the node selector keeps everything but the pool.
    node_selector = {k: v for k, v in p.node_selector.items() if k != LABEL_NODE_POOL} if pools else p.node_selector
    pod_spec.update(placement(node_selector, p.tolerations))
    pod_spec.update(neuron.scheduler(p))
    affinity: dict[str, Any] = {}
    if pools:
        affinity["nodeAffinity"] = _node_affinity(pools, on_demand=floor)
    if role != "server":
        # A group's pods exchange tensors every step: all of them in the leader's zone (never NCCL across AZs).
        # matchLabelKeys adds the pod's own group key to the selector (GA in Kubernetes 1.33).
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": selector},
                    "matchLabelKeys": [LWS_GROUP_KEY_LABEL],
                    "topologyKey": "topology.kubernetes.io/zone",
                }
            ]
        }
    if affinity:
        pod_spec["affinity"] = affinity
    if p.zone_spread:
        # ScheduleAnyway: GPU capacity is scarce per AZ; a skewed replica beats a Pending one. Karpenter
        # still tries the emptier zone first. A group spreads its pods over hosts, and groups over zones. The
        # on-demand floor requires its zone spread (DoNotSchedule): the minimum replicas in every zone, so a zone's
        # loss never takes them all (Karpenter launches in the zone the constraint asks for).
        pod_spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": key,
                "whenUnsatisfiable": "DoNotSchedule" if floor and key == ZONE else "ScheduleAnyway",
                "labelSelector": {"matchLabels": selector},
            }
            for key in (("kubernetes.io/hostname",) if role == "worker" else (ZONE, "kubernetes.io/hostname"))
        ]
    return pod_spec
