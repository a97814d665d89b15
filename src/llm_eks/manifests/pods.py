"""Pod-spec pieces the serving charts and the benchmark Job share: the Spot drain budget, the Hugging Face token file,
security contexts and placement. Plain dicts, no cdk8s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The 2-minute Spot notice minus what Karpenter needs to receive the interruption event and start evicting.
SPOT_NOTICE_SECONDS = 120
SPOT_MARGIN_SECONDS = 10
MAX_GRACE_SECONDS = SPOT_NOTICE_SECONDS - SPOT_MARGIN_SECONDS
# The pod's own interface under the VPC CNI: NCCL's bootstrap and socket transport and torch.distributed's Gloo
# groups of a replica spanning nodes use it, never a host or loopback one (the vllm-project/recipes multi-node
# strategies set NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME; vLLM's expert parallel guide: "export
# GLOO_SOCKET_IFNAME=eth0"). EFA itself needs no NCCL or libfabric variable: aws-ofi-nccl picks the efa provider and
# its platform defaults on EC2 (aws/aws-ofi-nccl src/platform-aws.cpp), and its cheatsheet (doc/efa-env-var.md)
# says FI_EFA_USE_DEVICE_RDMA, FI_PROVIDER and RDMAV_FORK_SAFE are not to be set with current versions.
POD_INTERFACE = "eth0"
SOCKET_INTERFACE_ENV = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")

HF_TOKEN_DIR = "/var/run/secrets/huggingface"
HF_TOKEN_FILE = "token"
HF_TOKEN_PATH = f"{HF_TOKEN_DIR}/{HF_TOKEN_FILE}"
HF_TOKEN_VOLUME = "hf-token"


def secret_provider_class_name(name: str) -> str:
    """The SecretProviderClass of workload `name`'s Hugging Face token."""
    return f"{name}-hf-token"


def hf_token_env() -> dict[str, str]:
    """huggingface_hub reads the token from this file; it is never an env value or a Kubernetes Secret."""
    return {"name": "HF_TOKEN_PATH", "value": HF_TOKEN_PATH}


def hf_token_volume(name: str) -> dict[str, Any]:
    """The Secrets Store CSI volume carrying workload `name`'s token file."""
    return {
        "name": HF_TOKEN_VOLUME,
        "csi": {
            "driver": "secrets-store.csi.k8s.io",
            "readOnly": True,
            "volumeAttributes": {"secretProviderClass": secret_provider_class_name(name)},
        },
    }


def hf_token_mount() -> dict[str, Any]:
    """Where the token file appears in the container (HF_TOKEN_PATH)."""
    return {"name": HF_TOKEN_VOLUME, "mountPath": HF_TOKEN_DIR, "readOnly": True}


def pod_security_context(run_as_user: int | None, run_as_group: int | None = None) -> dict[str, Any]:
    """RuntimeDefault seccomp, and the image's non-root user when one is given (None: the image default)."""
    ctx: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if run_as_user is not None:
        ctx.update({"runAsNonRoot": True, "runAsUser": run_as_user})
        if run_as_group is not None:
            ctx["runAsGroup"] = run_as_group
    return ctx


def container_security_context() -> dict[str, Any]:
    """No privilege escalation, no capabilities."""
    # The root filesystem stays writable: Triton, FlashInfer and torch.compile JIT-compile kernels under $HOME.
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def placement(node_selector: Mapping[str, str], tolerations: tuple[Mapping[str, Any], ...]) -> dict[str, Any]:
    """nodeSelector and tolerations for a pod spec, each only when set."""
    spec: dict[str, Any] = {}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    return spec
