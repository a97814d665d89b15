"""Host CPU and memory a vLLM pod requests on its node."""

from __future__ import annotations

from dataclasses import dataclass

# Pods share a node with DaemonSets (CNI, kube-proxy, CSI drivers, device plugin, DCGM and node exporters, log
# agent): keep this much of the node's allocatable CPU and memory for them.
DAEMONSET_CPU_MILLICORES = 1000

DAEMONSET_MEMORY_MIB = 2048

# Host memory a vLLM pod needs at least: API server, engine core, tokenizer, plus per GPU worker process.
MIN_POD_MEMORY_MIB = 6144

MIN_POD_MEMORY_PER_GPU_MIB = 2048


def vllm_host_mib(gpus_per_pod: int) -> int:
    """Host memory (MiB) a vLLM pod needs without a CPU KV tier: MIN_POD_MEMORY_MIB and MIN_POD_MEMORY_PER_GPU_MIB."""
    return MIN_POD_MEMORY_MIB + MIN_POD_MEMORY_PER_GPU_MIB * gpus_per_pod


def shm_mib(gpus_per_pod: int) -> int:
    """/dev/shm of a vLLM pod without a CPU KV tier: NCCL's intra-node buffers and the engine's worker processes need
    more with tensor parallelism."""
    return 2048 if gpus_per_pod == 1 else min(4 * gpus_per_pod, 32) * 1024


@dataclass(frozen=True)
class PodResources:
    """Requests for one vLLM pod: its share of the node's allocatable CPU and memory after DaemonSets."""

    cpu_millicores: int
    memory_mib: int

    @property
    def cpu(self) -> str:
        return f"{self.cpu_millicores}m"

    @property
    def memory(self) -> str:
        return f"{self.memory_mib}Mi"
