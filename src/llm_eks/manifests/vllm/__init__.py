"""`VllmChart`: one model served by `vllm serve` as an OpenAI-compatible endpoint on GPU (or Neuron) nodes.

`props` holds VllmProps and its checks, `pod` the container and pod spec, `chart` the chart.

Objects: Namespace (optional), ServiceAccount, SecretProviderClass (Hugging Face token, optional),
SecretProviderClass (API key, optional), Deployment (or, for a replica spanning nodes, a LeaderWorkerSet of one
leader and nodes_per_replica - 1 headless workers per group), Service (ClusterIP 8000, also /metrics; a group's
leader only), PodDisruptionBudget, Ingress (optional internal ALB).

Every number comes from the props (the planner and the config fill them); the chart only derives:
- startup probe: failureThreshold = ceil(ceil(startup_seconds x startup_margin) / 10 s period). The kubelet runs no
  liveness or readiness probe until it passes, so a model still loading is never killed. Node launch and image pull
  happen before the container starts and do not count against it.
- liveness: `liveness.py` run in the container every 30 s, 2 failures: `/health` (a dead engine) and token progress
  (requests running with no token processed for 120 s: a stalled engine, which `/health` does not see).
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

from llm_eks.manifests.ingress import IngressProps
from llm_eks.manifests.pods import HF_TOKEN_PATH, MAX_GRACE_SECONDS
from llm_eks.manifests.vllm.chart import LWS_API_VERSION, VllmChart, floor_name
from llm_eks.manifests.vllm.pod import container_args, container_command, container_env, pod_security_context
from llm_eks.manifests.vllm.props import (
    CACHE_DIR,
    PORT,
    PORT_NAME,
    ProbeTiming,
    VllmProps,
    pod_selector,
    pool_label,
    probe_timing,
    service_url,
    validate_vllm_props,
)

__all__ = [
    "CACHE_DIR",
    "HF_TOKEN_PATH",
    "LWS_API_VERSION",
    "MAX_GRACE_SECONDS",
    "PORT",
    "PORT_NAME",
    "IngressProps",
    "ProbeTiming",
    "VllmChart",
    "VllmProps",
    "container_args",
    "container_command",
    "container_env",
    "floor_name",
    "pod_security_context",
    "pod_selector",
    "pool_label",
    "probe_timing",
    "service_url",
    "validate_vllm_props",
]
