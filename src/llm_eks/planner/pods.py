"""Host CPU and memory a vLLM pod requests on its node."""

from __future__ import annotations

# Pods share a node with DaemonSets (CNI, kube-proxy, CSI drivers, device plugin, DCGM and node exporters, log
# agent): keep this much of the node's allocatable CPU and memory for them.
DAEMONSET_CPU_MILLICORES = 1000

DAEMONSET_MEMORY_MIB = 2048

# Host memory a vLLM pod needs at least: API server, engine core, tokenizer, plus per GPU worker process.
MIN_POD_MEMORY_MIB = 6144

MIN_POD_MEMORY_PER_GPU_MIB = 2048
