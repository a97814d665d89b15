"""`VllmChart`: one model served by `vllm serve` as an OpenAI-compatible endpoint on GPU (or Neuron) nodes.

Objects: Namespace (optional), ServiceAccount, SecretProviderClass (Hugging Face token, optional),
SecretProviderClass (API key, optional), Deployment, Service (ClusterIP 8000, also /metrics), PodDisruptionBudget,
Ingress (optional internal ALB).

Every number comes from the props (the planner and the config fill them); the chart only derives:
- startup probe: failureThreshold = ceil(ceil(startup_seconds x startup_margin) / 10 s period). The kubelet runs no
  liveness or readiness probe until it passes, so a model still loading is never killed. Node launch and image pull
  happen before the container starts and do not count against it.
- drain (Spot gives 120 s notice): preStop sleep, then SIGTERM, then vLLM drains for up to --shutdown-timeout, all
  inside terminationGracePeriodSeconds: pre_stop + shutdown_timeout < grace <= 110 s (120 s minus the time
  Karpenter needs to notice the interruption and evict). Defaults 15 + 90 = 105 < 110. The kubelet stops liveness
  probes once the pod is deleting, so a draining server (vLLM answers /health with 503 then) is not restarted.

Model cache: an emptyDir (size-limited, and requested as ephemeral storage so the scheduler only picks nodes with
room). With Karpenter's `instanceStorePolicy: RAID0` the kubelet's directory, and so every emptyDir, lives on the
instance-store NVMe array: it is the node's NVMe without a hostPath. A hostPath would also survive pod replacement
on the same node, but that rarely helps here (a GPU node usually holds one replica, and Karpenter replaces nodes
rather than pods), while it costs a lot: it breaks the baseline Pod Security Standard, needs root to write, has no
size limit, and leaves half-written downloads behind. The emptyDir survives container restarts, which is the
restart that matters (a liveness restart reloads from local disk, not from the Hub). For fast cold starts on new
nodes use weights="s3": the Run:ai streamer reads straight from S3 into GPU memory.

API key (api_key_secret): the Secrets Store CSI driver mounts the Secrets Manager secret as a file and the container's
shell exports it as VLLM_API_KEY before it execs `vllm serve` (llm_eks.manifests.api_key). vLLM 0.33 then requires
`Authorization: Bearer <key>` on paths under /v1, /v2, /inference and /cohere only
(vllm/entrypoints/serve/middleware/authenticate.py, GUARDED_PREFIX). Everything else on port 8000 stays open:
/health, /metrics (Prometheus scrapes it without a key), /ping, /version, /tokenize, /detokenize, and /invocations,
the SageMaker route that is always registered and runs the same completions as /v1 (vllm/entrypoints/serve/sagemaker/
api_router.py; the --api-key help says so). So the key is one layer: the NetworkPolicies decide who reaches port 8000
at all, and a load balancer in front should forward /v1 only.
Readiness uses /health: vLLM binds its port before the engine starts but listens only once the engine core reports
READY and the app is built (vllm/entrypoints/launchers/api_server/entry.py, run_server_worker), so /health refuses
connections while the model loads and answers 200 once it is served (503 once the engine is dead,
vllm/entrypoints/serve/instrumentator/health.py); /v1/models, the old readiness path, would need the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

import cdk8s
from constructs import Construct

from llm_eks import aws_ids
from llm_eks.errors import ConfigError
from llm_eks.manifests import pods
from llm_eks.manifests.api_key import api_key_mount, api_key_secret_provider_class, api_key_volume, export_key
from llm_eks.manifests.checkov import serving_pod_annotations
from llm_eks.manifests.engine import VLLM_FLAG_FIELDS, EngineSettings, parallel_flags, validate_engine, vllm_flags
from llm_eks.manifests.ingress import IngressProps as IngressProps  # re-exported: VllmProps.ingress takes it
from llm_eks.manifests.ingress import ingress_annotations, ingress_rule, validate_ingress
from llm_eks.manifests.labels import (
    VLLM_APP,
    app_labels,
    plain_object,
    require_dns1035,
    require_dns1123,
    selector_labels,
)
from llm_eks.manifests.pods import HF_TOKEN_PATH as HF_TOKEN_PATH  # re-exported: where the token file is
from llm_eks.manifests.pods import (
    MAX_GRACE_SECONDS,
    container_security_context,
    hf_token_env,
    hf_token_mount,
    hf_token_volume,
    placement,
)
from llm_eks.manifests.quantities import parse_quantity
from llm_eks.manifests.serving_objects import workload_identity, workload_namespace
from llm_eks.manifests.validation import HF_REPO
from llm_eks.versions import VLLM_IMAGE

PORT = 8000
PORT_NAME = "http"
CACHE_DIR = "/cache"

STARTUP_PERIOD_SECONDS = 10
PROBE_PERIOD_SECONDS = 10
# The API server's event loop shares the CPU with tokenization under load; 1 s (the default) flaps readiness.
PROBE_TIMEOUT_SECONDS = 5
READINESS_FAILURE_THRESHOLD = 3
# A restart costs a full model reload (minutes): only restart after a minute of a wedged server.
LIVENESS_FAILURE_THRESHOLD = 6

# Flags the chart sets from typed props, or that would break its contracts: extra_engine_args must not hold them.
_CHART_FLAGS = {
    "--host": "the chart sets it (0.0.0.0)",
    "--port": f"the chart sets it ({PORT})",
    "--model": "the chart passes model as the positional argument",
    "--served-model-name": "the chart sets it from served_model_name",
    "--shutdown-timeout": "the chart sets it from shutdown_timeout_seconds",
    "--tensor-parallel-size": "the chart sets it from tensor_parallel_size",
    "-tp": "the chart sets it from tensor_parallel_size",
    "--pipeline-parallel-size": "the chart sets it from pipeline_parallel_size",
    "-pp": "the chart sets it from pipeline_parallel_size",
    "--download-dir": f"weights are cached under HF_HOME on the cache volume ({CACHE_DIR})",
    "--api-key": "the chart sets the key from api_key_secret (a Secrets Manager file, never an argument)",
    "--disable-log-stats": "it turns off the Prometheus metrics that autoscaling and alerts read",
}
# Switches of the removed V0 engine, or defaults the V1 engine already has (DESIGN.md).
_STALE_FLAGS = {
    "--enable-chunked-prefill": "chunked prefill is on by default (pass --no-enable-chunked-prefill to turn it off)",
    "--enable-prefix-caching": "prefix caching is on by default (pass --no-enable-prefix-caching to turn it off)",
    "--use-v2-block-manager": "it was removed with the V0 engine",
    "--num-scheduler-steps": "it was removed with the V0 engine",
}


@dataclass(frozen=True)
class VllmProps:
    """One served model. Filled by the lead from the config and the capacity plan; the chart derives no sizes."""

    # Deployment, Service, ServiceAccount, PDB name (DNS-1035), e.g. "vllm-llama-3-1-8b".
    name: str
    # Hugging Face repo id (weights="hf") or s3://bucket/prefix (weights="s3").
    model: str
    # The name clients send and the `model_name` label on every vLLM metric.
    served_model_name: str
    # From the plan: context length, memory share, batch limits, dtypes; rendered as `vllm serve` flags.
    engine: EngineSettings
    # Must fit one node (at most accelerators_per_node).
    tensor_parallel_size: int
    # Accelerators the pod requests: tensor_parallel_size x pipeline_parallel_size (one node).
    accelerators_per_pod: int
    # Of the planned node pool's instance type; a pod can never span nodes here.
    accelerators_per_node: int
    # CPU and memory requests, right-sized by the planner (memory must include shm_size: tmpfs is charged to it).
    cpu: str
    memory: str
    # /dev/shm size (NCCL and the engine's worker processes exchange tensors through it).
    shm_size: str
    # Model cache volume size: the weights on disk plus headroom (planner).
    cache_size: str
    # Planner's cold-start estimate from container start to serving (download or stream, load, warm-up).
    startup_seconds: int
    # Initial replicas; the KEDA ScaledObject owns the count afterwards.
    replicas: int
    # From the node-pool helper: selects the planned GPU pool and tolerates its taint.
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    # Single-node pipeline parallelism is rare (tensor parallelism is faster within a node).
    pipeline_parallel_size: int = 1
    # NVIDIA is the common case; aws.amazon.com/neuron for Inferentia/Trainium (with a Neuron image).
    accelerator_resource: str = "nvidia.com/gpu"
    # hf needs nothing prepared; s3 (Run:ai streamer) starts faster once the weights are copied to a bucket.
    weights: Literal["hf", "s3"] = "hf"
    # Secrets Manager secret NAME holding the Hugging Face token; None for public models (or S3 weights).
    hf_token_secret: str | None = None
    # Secrets Manager secret NAME holding the OpenAI endpoint's API key (the whole SecretString); None: no key.
    # The config turns it on by default; a chart built directly must name its secret.
    api_key_secret: str | None = None
    # Region of the secret / S3 bucket; None lets the AWS provider and SDKs look it up (one more call per mount).
    aws_region: str | None = None
    # The workload namespace every chart and the Pod Identity association agree on.
    namespace: str = "inference"
    # Emit the Namespace object (one chart must own it; the lead decides which).
    create_namespace: bool = True
    # The pinned vLLM release (versions.py).
    image: str = VLLM_IMAGE
    # The image's own non-root `vllm` user (UID 2000, GID 0); None runs as the image default, root.
    run_as_user: int | None = 2000
    # Sleep before SIGTERM so kube-proxy and the ALB stop sending new requests first.
    pre_stop_seconds: int = 15
    # vLLM's --shutdown-timeout: how long in-flight requests may finish after SIGTERM.
    shutdown_timeout_seconds: int = 90
    # Everything above must fit in it, and it must fit in the Spot notice.
    termination_grace_seconds: int = MAX_GRACE_SECONDS
    # The startup probe allows this multiple of startup_seconds before it gives up.
    startup_margin: float = 1.5
    # Node launch and image pull before the container starts; Kubernetes' own progress-deadline default.
    provisioning_seconds: int = 600
    # Spread replicas over zones (soft: an AZ without GPU capacity must not leave a replica Pending).
    zone_spread: bool = True
    # One replica at a time may be voluntarily disrupted (consolidation, drift, node upgrades).
    pdb_max_unavailable: int = 1
    ingress: IngressProps | None = None
    # Further `vllm serve` flags, after the rendered ones: none of the chart's, the engine settings' or V0-era ones.
    extra_engine_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProbeTiming:
    """Derived probe numbers, exposed so tests and the README show the arithmetic."""

    startup_budget_seconds: int
    startup_failure_threshold: int


def probe_timing(props: VllmProps) -> ProbeTiming:
    budget = math.ceil(props.startup_seconds * Fraction(str(props.startup_margin)))
    return ProbeTiming(budget, math.ceil(Fraction(budget, STARTUP_PERIOD_SECONDS)))


def service_url(props: VllmProps) -> str:
    """In-cluster base URL of the OpenAI-compatible endpoint."""
    return f"http://{props.name}.{props.namespace}.svc.cluster.local:{PORT}"


def _at_least(field_name: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise ConfigError(f"{field_name}: {value} is not allowed; must be at least {minimum}")


def validate_vllm_props(p: VllmProps) -> None:
    """Every check the chart makes on its input; raises ConfigError with one line."""
    require_dns1035("name", p.name)
    require_dns1123("namespace", p.namespace)
    if not p.served_model_name or any(c in p.served_model_name for c in '"\\\n'):
        raise ConfigError(
            f"served_model_name: {p.served_model_name!r} is not allowed; must be non-empty without '\"', '\\' "
            "or a newline (it is quoted in PromQL)"
        )
    if p.weights not in ("hf", "s3"):
        raise ConfigError(f"weights: {p.weights!r} is not allowed; must be 'hf' or 's3'")
    if p.weights == "s3" and not p.model.startswith("s3://"):
        raise ConfigError(f"model: {p.model!r} is not allowed with weights 's3'; must be an s3:// URI")
    if p.weights == "hf" and not HF_REPO.match(p.model):
        raise ConfigError(
            f"model: {p.model!r} is not allowed with weights 'hf'; must be a Hugging Face repo id such as "
            "meta-llama/Llama-3.1-8B-Instruct (for s3:// set weights 's3')"
        )
    for field_name, secret in (("hf_token_secret", p.hf_token_secret), ("api_key_secret", p.api_key_secret)):
        if secret is not None and not aws_ids.SECRET_NAME.match(secret):
            raise ConfigError(
                f"{field_name}: {secret!r} is not allowed; must be a Secrets Manager secret name "
                "(letters, digits and /_+=.@-)"
            )
    for name, value in (
        ("tensor_parallel_size", p.tensor_parallel_size),
        ("pipeline_parallel_size", p.pipeline_parallel_size),
    ):
        _at_least(name, value, 1)
    _at_least("accelerators_per_node", p.accelerators_per_node, 1)
    if p.tensor_parallel_size > p.accelerators_per_node:
        raise ConfigError(
            f"tensor_parallel_size: {p.tensor_parallel_size} is not allowed; must be at most "
            f"{p.accelerators_per_node} (accelerators per node)"
        )
    wanted = p.tensor_parallel_size * p.pipeline_parallel_size
    if p.accelerators_per_pod != wanted:
        raise ConfigError(
            f"accelerators_per_pod: {p.accelerators_per_pod} is not allowed; must equal tensor_parallel_size x "
            f"pipeline_parallel_size ({wanted})"
        )
    if p.accelerators_per_pod > p.accelerators_per_node:
        raise ConfigError(
            f"accelerators_per_pod: {p.accelerators_per_pod} is not allowed; must be at most "
            f"{p.accelerators_per_node} (accelerators per node)"
        )
    if "/" not in p.accelerator_resource:
        raise ConfigError(
            f"accelerator_resource: {p.accelerator_resource!r} is not allowed; must be an extended resource "
            "name such as nvidia.com/gpu or aws.amazon.com/neuron"
        )
    if parse_quantity("cpu", p.cpu) <= 0:
        raise ConfigError(f"cpu: {p.cpu!r} is not allowed; must be above 0")
    memory = parse_quantity("memory", p.memory)
    shm = parse_quantity("shm_size", p.shm_size)
    if parse_quantity("cache_size", p.cache_size) <= 0:
        raise ConfigError(f"cache_size: {p.cache_size!r} is not allowed; must be above 0")
    if shm <= 0:
        raise ConfigError(f"shm_size: {p.shm_size!r} is not allowed; must be above 0")
    if memory < shm:
        raise ConfigError(
            f"memory: {p.memory} is not allowed; must be at least shm_size ({p.shm_size}) because /dev/shm "
            "pages count against the memory limit"
        )
    _at_least("startup_seconds", p.startup_seconds, 1)
    _at_least("replicas", p.replicas, 0)
    _at_least("provisioning_seconds", p.provisioning_seconds, 0)
    if not p.startup_margin >= 1:
        raise ConfigError(f"startup_margin: {p.startup_margin} is not allowed; must be at least 1")
    if p.run_as_user is not None:
        _at_least("run_as_user", p.run_as_user, 1)
    _at_least("pdb_max_unavailable", p.pdb_max_unavailable, 1)
    _validate_drain(p)
    validate_engine(p.engine, "engine")
    _validate_extra_engine_args(p)
    if p.ingress is not None:
        validate_ingress(p.ingress)


def _validate_drain(p: VllmProps) -> None:
    _at_least("pre_stop_seconds", p.pre_stop_seconds, 0)
    # 0 would make vLLM abort in-flight requests on SIGTERM.
    _at_least("shutdown_timeout_seconds", p.shutdown_timeout_seconds, 1)
    drain = p.pre_stop_seconds + p.shutdown_timeout_seconds
    if not drain < p.termination_grace_seconds <= MAX_GRACE_SECONDS:
        raise ConfigError(
            f"drain: preStop {p.pre_stop_seconds} s + shutdown timeout {p.shutdown_timeout_seconds} s = {drain} s "
            f"must be below terminationGracePeriodSeconds {p.termination_grace_seconds} s, which must be at most "
            f"{MAX_GRACE_SECONDS} s (2-minute Spot notice minus margin)"
        )


def _validate_extra_engine_args(p: VllmProps) -> None:
    for token in p.extra_engine_args:
        if not isinstance(token, str):
            raise ConfigError(f"extra_engine_args: {token!r} is not allowed; every argument must be a string")
        flag = token.partition("=")[0]
        if not flag.startswith("-"):
            continue
        reason = _CHART_FLAGS.get(flag) or _STALE_FLAGS.get(flag)
        if flag in VLLM_FLAG_FIELDS:
            reason = f"the chart sets it from engine.{VLLM_FLAG_FIELDS[flag]}"
        if flag == "--load-format" and p.weights == "s3":
            reason = "the chart sets it (runai_streamer) for weights 's3'"
        if reason:
            raise ConfigError(f"extra_engine_args: {flag!r} is not allowed; {reason}")


def container_args(p: VllmProps) -> list[str]:
    """`vllm serve` arguments after the subcommand: the model, the chart-owned flags, the engine settings, then
    the extra flags."""
    args = [p.model, "--host", "0.0.0.0", "--port", str(PORT), "--served-model-name", p.served_model_name]
    args += parallel_flags(p.tensor_parallel_size, p.pipeline_parallel_size)
    args += ["--shutdown-timeout", str(p.shutdown_timeout_seconds)]
    if p.weights == "s3":
        args += ["--load-format", "runai_streamer"]
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
    if p.hf_token_secret is not None:
        env.append(hf_token_env())
    if p.aws_region is not None:
        env.append({"name": "AWS_REGION", "value": p.aws_region})
    return env


def pod_security_context(p: VllmProps) -> dict[str, Any]:
    """The pod security context of vLLM pods (the server, and the benchmark Job running the same image)."""
    # GID 0: the image makes /home/vllm and its caches group-0 writable for exactly this user.
    return pods.pod_security_context(p.run_as_user, run_as_group=0)


class VllmChart(cdk8s.Chart):
    """The vLLM serving workload for one model (see the module docstring for the timing arithmetic)."""

    def __init__(self, scope: Construct, construct_id: str, props: VllmProps) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        validate_vllm_props(props)
        self.props = props
        self.timing = probe_timing(props)
        labels = app_labels(VLLM_APP, props.name)
        selector = selector_labels(VLLM_APP, props.name)

        def meta(name: str, **extra: Any) -> dict[str, Any]:
            return {"name": name, "namespace": props.namespace, "labels": labels, **extra}

        if props.create_namespace:
            # The ALB controller then gates rollouts on ALB target health, not only on pod readiness.
            readiness_gate = {"elbv2.k8s.aws/pod-readiness-gate-inject": "enabled"} if props.ingress is not None else {}
            workload_namespace(self, props.namespace, readiness_gate)
        workload_identity(self, meta, props.name, props.hf_token_secret, props.aws_region)
        if props.api_key_secret is not None:
            api_key_secret_provider_class(self, meta, props.name, props.api_key_secret, props.aws_region)
        plain_object(
            self,
            "deployment",
            api_version="apps/v1",
            kind="Deployment",
            metadata=meta(props.name, annotations=serving_pod_annotations(props.image)),
            body={"spec": self._deployment_spec(props, labels, selector)},
        )
        plain_object(
            self,
            "service",
            api_version="v1",
            kind="Service",
            metadata=meta(props.name),
            body={
                "spec": {
                    "type": "ClusterIP",
                    "selector": selector,
                    "ports": [{"name": PORT_NAME, "port": PORT, "targetPort": PORT_NAME, "protocol": "TCP"}],
                }
            },
        )
        plain_object(
            self,
            "pdb",
            api_version="policy/v1",
            kind="PodDisruptionBudget",
            metadata=meta(props.name),
            body={
                "spec": {
                    "maxUnavailable": props.pdb_max_unavailable,
                    "selector": {"matchLabels": selector},
                    # A replica that never became Ready (stuck loading) must not block a drain.
                    "unhealthyPodEvictionPolicy": "AlwaysAllow",
                }
            },
        )
        if props.ingress is not None:
            self._ingress(props, props.ingress, meta)

    def _deployment_spec(self, p: VllmProps, labels: dict[str, str], selector: dict[str, str]) -> dict[str, Any]:
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

        container = {
            "name": "vllm",
            "image": p.image,
            "imagePullPolicy": "IfNotPresent",
            "command": container_command(p),
            "args": container_args(p),
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
            "startupProbe": {
                **http_probe("/health"),
                "periodSeconds": STARTUP_PERIOD_SECONDS,
                "failureThreshold": self.timing.startup_failure_threshold,
            },
            # /health answers only once the model is served, and needs no key (module docstring).
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
            "lifecycle": {"preStop": {"sleep": {"seconds": p.pre_stop_seconds}}},
            "securityContext": container_security_context(),
        }
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
        pod_spec.update(placement(p.node_selector, p.tolerations))
        if p.zone_spread:
            # ScheduleAnyway: GPU capacity is scarce per AZ; a skewed replica beats a Pending one. Karpenter
            # still tries the emptier zone first.
            pod_spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": key,
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": selector},
                }
                for key in ("topology.kubernetes.io/zone", "kubernetes.io/hostname")
            ]
        return {
            "replicas": p.replicas,
            "selector": {"matchLabels": selector},
            # Surge one new replica before removing an old one: capacity never dips during a rollout.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "progressDeadlineSeconds": p.provisioning_seconds + self.timing.startup_budget_seconds,
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        }

    def _ingress(self, p: VllmProps, i: IngressProps, meta: Any) -> None:
        # The ALB keeps a deregistered pod's connections for as long as the pod drains.
        annotations = ingress_annotations(i, drain_seconds=p.pre_stop_seconds + p.shutdown_timeout_seconds)
        plain_object(
            self,
            "ingress",
            api_version="networking.k8s.io/v1",
            kind="Ingress",
            metadata=meta(p.name, annotations=annotations),
            body={"spec": {"ingressClassName": "alb", "rules": [ingress_rule(i, p.name, PORT_NAME)]}},
        )
