"""`RayServeChart`: one model served by Ray Serve LLM (vLLM inside Ray) as a KubeRay `ray.io/v1` RayService.

Objects: Namespace (optional), ServiceAccount, SecretProviderClass (Hugging Face token, optional), RayService.
KubeRay creates the RayCluster, its head Service and the OpenAI-compatible endpoint `<name>-serve-svc` on port
8000 (port name `serve`).

How the pieces scale:
- Ray Serve autoscales model replicas on ongoing requests per replica (`target_ongoing_requests`, the plan's
  concurrency per replica) between min and max replicas.
- Each model replica is a placement group of tensor_parallel_size x pipeline_parallel_size GPU bundles (Ray Serve
  LLM always runs vLLM with the Ray executor). The in-tree Ray autoscaler (v2) adds GPU worker pods for pending
  bundles and removes idle ones; Karpenter launches the nodes those pods need.
- One GPU worker pod holds `gpus_per_worker` GPUs (the node's GPUs the plan uses). A replica that needs more GPUs
  than one worker has spans pipeline_parallel_size nodes (tensor parallel within a node, pipeline parallel across
  nodes, vLLM's multi-node recipe); the placement group uses PACK then, so it fills a node before spilling to the
  next, and STRICT_PACK otherwise, so a tensor-parallel group never straddles two nodes.

The head runs on system (CPU) capacity and takes no Ray work (`num-cpus: "0"`, `num-gpus: "0"`): only the GCS,
the dashboard, the Serve controller and proxy, and the autoscaler sidecar KubeRay injects. If its node selector
points at Karpenter capacity instead, the head pod gets `karpenter.sh/do-not-disrupt` (consolidation or drift would
restart the whole cluster) and must not ask for Spot.
Authentication (KubeRay 1.7 `authOptions.mode: token`, Ray 2.52 or later; KubeRay refuses older versions): the operator
creates a Kubernetes Secret named after the RayCluster with a random 32-byte token (key `auth_token`), sets
RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (from that Secret) on the head, worker, autoscaler and wait-gcs-ready containers,
and sends the token itself (`x-ray-authorization: Bearer`) when it deploys serveConfigV2 through the dashboard
(ray-operator/controllers/ray/raycluster_controller.go reconcileAuthSecret, common/pod.go SetContainerTokenAuthEnvVars,
utils/util.go GetRayDashboardClientFunc). The token is generated in the cluster: it is in no template or manifest.
With it, Ray 2.60 requires the token on the GCS (6379), the Ray client server (10001) and the dashboard and Jobs API
(8265), except its health paths (/api/healthz, /api/gcs_healthz, /api/local_raylet_healthz, /-/healthz: KubeRay's
probes keep working; ray/dashboard/http_server_head.py), so a pod that reaches the head can no longer submit a job.
Not covered: Ray's metrics export (8080, a plain prometheus_client server; Prometheus keeps scraping) and the Serve
endpoint (8000): the Serve proxy has no token check (ray/serve/_private/proxy.py), and Ray Serve LLM 2.60's
`build_openai_app` has no API key setting (LLMServingArgs takes llm_configs, ingress_cls_config and
ingress_deployment_config; OpenAiIngress checks no Authorization header; ray/llm/_internal/serve/core/ingress/). The
OpenAI endpoint of a Ray Serve workload is guarded by the NetworkPolicies alone.

KubeRay also injects probes, a memory-backed /dev/shm sized to the container's memory and the `metrics` port (8080,
Ray's metrics export on every pod; llm_eks.manifests.ray_monitoring scrapes it); the chart sets none of them.

Spot drain of a GPU worker pod (2-minute notice; Karpenter deletes the pods when the interruption event arrives):
1. preStop sleeps pre_stop_seconds (15 s): Kubernetes drops the pod from the `<name>-serve-svc` endpoints as the
   deletion starts, but kube-proxy and load balancers apply that seconds later; until then this pod's Serve proxy
   and replica keep answering.
2. SIGTERM reaches `ray start --block` (the container's process under KubeRay). Ray's SIGTERM handler marks the node
   draining in the GCS (reason PREEMPTION, deadline = now + RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S, set here to
   drain_timeout_seconds = 90 s), then waits for the node to empty, at most that long, before it stops Ray
   (python/ray/_private/node.py, _drain_node_before_shutdown; default 30 s in ray_constants.py).
3. The Serve controller sees the draining node, starts a replacement replica elsewhere (the Ray autoscaler asks for a
   new worker pod at once), and at deadline - graceful_shutdown_timeout_s stops the old replica: routers stop sending
   it requests, and it waits (polling every graceful_shutdown_wait_loop_s) for in-flight requests for up to
   graceful_shutdown_timeout_s = 85 s (python/ray/serve/_private/deployment_state.py,
   migrate_replicas_on_draining_nodes). 85 = 90 - 5: Serve gets 5 s to notice the drain, so routing stops about as
   soon as Ray knows and the replica finishes before Ray tears the node down.
Arithmetic: preStop 15 + graceful shutdown 85 = 100 <= preStop 15 + drain 90 = 105 < terminationGracePeriodSeconds
110 <= 110 (120 s notice minus Karpenter's reaction margin). A replica spanning several nodes (pipeline parallel)
lives on one of them: losing another of its nodes fails the replica, and Serve restarts it elsewhere.

Staged weights (`staged_weights`, weights "staged" in the config): the serve config cannot name the weights bucket,
whose name exists only at deploy time (a pod learns it from ConfigMap `llm-eks-weights`; serveConfigV2 is a string
KubeRay hands to Ray as is). So every GPU worker pod copies the staged checkpoint to its own node before Ray starts
there: init container `fetch-weights` (manifests.weights_staging, wait.py with --fetch-to, run by the Ray image's
python3 with boto3) waits for the staging key's marker, then copies exactly the files the marker lists, each checked
against its recorded size and sha256, into an emptyDir (sized as the Hub download's cache) that the Ray container
mounts read-only at STAGED_WEIGHTS_DIR; model_source names that directory. The Ray pods' ServiceAccount reads the
prefix and the key's markers (Pod Identity, read-only); the staging Job, with a ServiceAccount of its own, holds the
Hub token, so no Ray pod does. The head gets no copy: nothing on it loads the model. Upstream, read in the ray
2.60.0 wheel (RAY_VERSION; ray/llm/_internal/...):
- ModelLoadingConfig.model_source is "a HuggingFace model ID, S3 mirror config, GCS mirror config, or a local path"
  (serve/core/configs/llm_config.py:125-138);
- for a model source that is neither a mirror config nor a remote s3:// / gs:// path, download_model_files logs "No
  cloud storage mirror configured" and returns it unchanged, so vLLM gets the local path as its model
  (common/utils/download_utils.py:246-299); an s3:// source would instead be listed and downloaded with boto3,
  with no checksum of any file (common/utils/cloud_filesystem/s3_filesystem.py:230-300, S3FileSystem.download_files);
- the replica actor takes the first bundle of the model's placement group, with the first engine worker
  (serve/core/server/llm_server.py:110-131, _merge_replica_actor_and_child_actor_bundles, used at 811): it runs on a
  GPU worker, where the copy is, never on the head (which advertises no CPU or GPU);
- Ray LLM's own S3 code imports boto3 (s3_filesystem.py:13), and the Ray images install it (ray-project/ray
  docker/base-deps/requirements.in, read on main @e852f9b), which the init container needs.
No torch.compile cache is kept for Ray Serve workloads (the vLLM chart's compile-cache Job serves `vllm serve` only).

The package: `props` (RayServeProps, its constants and validation) and `chart` (the RayService built from them).
"""

from __future__ import annotations

from llm_eks.manifests.ray_serve.chart import (
    RayServeChart,
    head_group_spec,
    llm_config,
    serve_config,
    worker_gpus_total,
    worker_group_spec,
)
from llm_eks.manifests.ray_serve.props import (
    APPLICATION_NAME,
    DO_NOT_DISRUPT,
    IMPORT_PATH,
    MAX_NAME_LENGTH,
    METRICS_PORT,
    METRICS_PORT_NAME,
    MIN_TOKEN_AUTH_RAY_VERSION,
    RAY_DRAIN_TIMEOUT_ENV,
    RAY_NVIDIA_ACCELERATOR_TYPES,
    RAY_SERVE_APP,
    SERVE_DRAIN_NOTICE_SECONDS,
    SERVE_PORT,
    STAGED_WEIGHTS_DIR,
    WORKER_GROUP,
    RayServeProps,
    llm_deployment_name,
    validate,
)

__all__ = [
    "APPLICATION_NAME",
    "DO_NOT_DISRUPT",
    "IMPORT_PATH",
    "MAX_NAME_LENGTH",
    "METRICS_PORT",
    "METRICS_PORT_NAME",
    "MIN_TOKEN_AUTH_RAY_VERSION",
    "RAY_DRAIN_TIMEOUT_ENV",
    "RAY_NVIDIA_ACCELERATOR_TYPES",
    "RAY_SERVE_APP",
    "SERVE_DRAIN_NOTICE_SECONDS",
    "SERVE_PORT",
    "STAGED_WEIGHTS_DIR",
    "WORKER_GROUP",
    "RayServeChart",
    "RayServeProps",
    "head_group_spec",
    "llm_config",
    "llm_deployment_name",
    "serve_config",
    "validate",
    "worker_gpus_total",
    "worker_group_spec",
]
