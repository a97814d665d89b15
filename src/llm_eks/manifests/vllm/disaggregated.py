"""Prefill/decode disaggregation of a vLLM workload: a prefill Deployment (`<name>-prefill`, vLLM as NIXL KV
producer) beside the decode Deployment (`<name>`, vLLM as KV consumer behind llm-d's routing sidecar); where a replica
spans nodes, a LeaderWorkerSet each, under the same names.

A replica spanning nodes (data-parallel ranks over a LeaderWorkerSet group, as the aggregated path runs them): every
pod of a group carries its pool's role label and the KV-transfer config, since each of its engines (the leader's and
the workers' data-parallel ranks) is a NIXL producer or consumer with its own side channel (5600 + its global rank,
on its own pod's address) and GPU agents; the InferencePool selects only the leaders (worker index 0), whose API
servers serve the group's ranks, so the picker and the sidecar's allowlist name leaders only. The routing sidecar
runs on the decode leader alone: the workers run --headless and serve no HTTP. vLLM 0.33 takes no pipeline-parallel
pool (planner/disaggregation.py says where): validate_disaggregation refuses it.

The request path: the endpoint picker runs its decode profile first, then (when its prefix-based decider says the
uncached part of the prompt is long enough) the prefill profile, and sends the request to the chosen decode pod with
the prefill pod's address in `x-prefiller-host-port`; the decode pod's routing sidecar (port 8000, the pool's target
port) sends the prompt to that prefill pod (max_tokens 1, `kv_transfer_params.do_remote_decode`), then the request
with the prefill's `kv_transfer_params` to its own vLLM on 8200, whose NIXL connector reads the KV blocks from the
prefill pod (the handshake on the side-channel port, the transfer over UCX/TCP or libfabric/EFA).

llm-d router v0.10.0 (llm-d/llm-d-router, commit 71f4f0999f95b96c49a9d0c4afbd18dfdb943c26):
- the pod role label `llm-d.ai/role` with values `prefill` and `decode` (pkg/epp/framework/plugins/scheduling/
  filter/bylabel/roles.go:9-16; decode-filter also admits pods without the label, :45-47);
- the sidecar image ghcr.io/llm-d/llm-d-router-disagg-sidecar (Makefile:22, 32-34, built from Dockerfile.sidecar,
  USER 65532:65532), on decode pods only as a native sidecar (deploy/components/vllm-decode/deployment.yaml);
- its flags (pkg/sidecar/proxy/options.go:57-90, 262-344): `--port` (default 8000), `--model-server-port` (default
  8200; `--vllm-port` is deprecated at v0.10.0, :266), `--kv-connector` (default `nixlv2`), `--secure-proxy`
  (default true: a self-signed certificate; the gateway speaks plain HTTP to the pool), `--enable-ssrf-protection`
  with `--inference-pool <ns>/<name>`: only the pool's pods may be named as prefill hosts; it lists and watches the
  pool and its pods (pkg/sidecar/proxy/allowlist.go:41, 88-160), so the sidecar, and only it, gets a service
  account token (a projected volume) and the workload's ServiceAccount a Role to read both.

vLLM 0.33.0 (the wheel's source): the NIXL side channel listens on VLLM_NIXL_SIDE_CHANNEL_HOST (default localhost:
here the pod's IP, so the other pool reaches it) and VLLM_NIXL_SIDE_CHANNEL_PORT (default 5600) plus the
data-parallel index (envs.py:232-233, 1720-1727; kv_connector/v1/nixl/base_scheduler.py:76-80).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from llm_eks.error_codes import E138
from llm_eks.errors import ConfigError
from llm_eks.manifests.source import builds_objects
from llm_eks.versions import DISAGG_SIDECAR_IMAGE

PdRole: TypeAlias = Literal["prefill", "decode"]
ROLE_LABEL = "llm-d.ai/role"
# The decode pod's vLLM behind the sidecar (the sidecar's --model-server-port default).
DECODE_VLLM_PORT = 8200
DECODE_VLLM_PORT_NAME = "vllm"
NIXL_SIDE_CHANNEL_PORT = 5600
NIXL_PORT_NAME = "nixl"
PREFILL_APP = "vllm-prefill"
# The sidecar's own user (Dockerfile.sidecar: USER 65532:65532, distroless nonroot).
SIDECAR_USER = 65532
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
INFERENCE_POOL_GROUP = "inference.networking.k8s.io"


@dataclass(frozen=True)
class Disaggregation:
    """The prefill pool of a disaggregated vLLM workload, and each pool's KV-transfer config."""

    # Prefill replicas the planner sized (a starting count: KEDA scales the prefill pool on its own queue).
    prefill_replicas: int
    # vLLM 0.33's --kv-transfer-config JSON of each role (planner/disaggregation.kv_transfer_config).
    prefill_kv_transfer_config: str
    decode_kv_transfer_config: str
    # The InferencePool (name) the sidecar's SSRF allowlist reads; the workload's own pool.
    pool: str
    sidecar_image: str = DISAGG_SIDECAR_IMAGE
    # Most prompt tokens not found in the decode pod's prefix cache that it still prefills itself
    # (prefix-based-pd-decider nonCachedTokens); longer uncached prompts go to the prefill pool.
    non_cached_tokens: int = 256
    # The sidecar's requests: a Go reverse proxy, small; memory bounded by in-flight bodies.
    sidecar_cpu: str = "250m"
    sidecar_memory: str = "256Mi"
    sidecar_memory_limit: str = "1Gi"


def prefill_name(name: str) -> str:
    """The prefill Deployment, Service and ScaledObject of workload `name`."""
    return f"{name}-prefill"


def validate_disaggregation(d: Disaggregation, pipeline_parallel_size: int, neuron: bool) -> None:
    """One-line errors for what the chart cannot serve disaggregated."""
    if pipeline_parallel_size > 1:
        raise ConfigError(
            E138,
            f"disaggregation: not allowed with pipeline_parallel_size {pipeline_parallel_size}; vLLM 0.33's "
            "NixlConnector serves no pipeline-parallel pool (a decode engine with PP > 1 refuses to start, its reader "
            "tells a PP > 1 prefill's stages apart by TP rank only): use a TP or DP x EP layout, or disaggregation off",
        )
    if neuron:
        raise ConfigError(E138, "disaggregation: not allowed on Neuron; the NIXL connector needs the GPU engine")
    if d.prefill_replicas < 0:
        raise ConfigError(
            E138, f"disaggregation.prefill_replicas: {d.prefill_replicas} is not allowed; must be at least 0"
        )
    if d.non_cached_tokens < 0:
        raise ConfigError(
            E138, f"disaggregation.non_cached_tokens: {d.non_cached_tokens} is not allowed; must be at least 0"
        )


def side_channel_env() -> list[dict[str, Any]]:
    """The NIXL handshake listens on the pod's own address (reachable from the other pool), on the default port."""
    return [
        {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)},
    ]


def sidecar_container(d: Disaggregation, namespace: str, http_port: int, http_port_name: str) -> dict[str, Any]:
    """The routing sidecar, a native sidecar (an init container that keeps running): it listens on the pool's port
    and starts before vLLM, so the pod is never Ready without it."""
    return {
        "name": "routing-sidecar",
        "image": d.sidecar_image,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "args": [
            f"--port={http_port}",
            f"--model-server-port={DECODE_VLLM_PORT}",
            "--kv-connector=nixlv2",
            "--secure-proxy=false",
            "--enable-ssrf-protection=true",
            f"--inference-pool={namespace}/{d.pool}",
        ],
        "ports": [{"name": http_port_name, "containerPort": http_port, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": http_port_name}, "periodSeconds": 5},
        "resources": {
            "requests": {"cpu": d.sidecar_cpu, "memory": d.sidecar_memory},
            "limits": {"memory": d.sidecar_memory_limit},
        },
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": SIDECAR_USER,
            "runAsGroup": SIDECAR_USER,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        },
        "volumeMounts": [{"name": "sidecar-token", "mountPath": TOKEN_DIR, "readOnly": True}],
    }


def sidecar_token_volume() -> dict[str, Any]:
    """What the kubelet would mount with automountServiceAccountToken, as a volume only the sidecar mounts (vLLM
    never calls the Kubernetes API)."""
    return {
        "name": "sidecar-token",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
            ]
        },
    }


@builds_objects
def sidecar_rbac(name: str, namespace: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """Read access to the namespace's InferencePools and pods for the workload's ServiceAccount: the sidecar's
    allowlist of prefill hosts."""
    meta = {"name": f"{name}-routing-sidecar", "namespace": namespace, "labels": labels}
    read = ["get", "list", "watch"]
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [
                {"apiGroups": [INFERENCE_POOL_GROUP], "resources": ["inferencepools"], "verbs": read},
                {"apiGroups": [""], "resources": ["pods"], "verbs": read},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": meta["name"]},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]
