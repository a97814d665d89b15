"""The typed result of config + plan: one workload type per engine, and the add-ons their charts wait for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from llm_eks.manifests.autoscaling import AutoscalingProps
from llm_eks.manifests.benchmark import BenchmarkProps
from llm_eks.manifests.gateway import GatewayProps
from llm_eks.manifests.headroom import HeadroomProps
from llm_eks.manifests.monitoring import MonitoringProps
from llm_eks.manifests.node_pools import CpuPoolSpec, GpuPoolSpec
from llm_eks.manifests.ray_monitoring import RayMonitoringProps
from llm_eks.manifests.ray_serve import RayServeProps
from llm_eks.manifests.vllm import VllmProps
from llm_eks.manifests.weights_staging import WeightsStagingProps

# The add-ons a workload's charts can wait for, by the names ChartPlan.needs and the CDK stack use.
Addon: TypeAlias = Literal["keda", "kuberay", "lws", "secrets", "weights", "staging", "alb", "envoy-gateway"]


@dataclass(frozen=True)
class VllmWorkload:
    """One model served by `vllm serve`: KEDA scales it, Prometheus alerts on it, a benchmark Job measures it."""

    gpu_pool: GpuPoolSpec
    cpu_pool: CpuPoolSpec
    vllm: VllmProps
    autoscaling: AutoscalingProps
    monitoring: MonitoringProps
    benchmark: BenchmarkProps
    # Replica-shaped placeholders kept warm (manifests/headroom.py); 0: none.
    headroom: HeadroomProps | None = None
    # The Job that copies the weights into the environment's bucket (weights "staged"); None: no staging.
    staging: WeightsStagingProps | None = None
    # One staging Job per LoRA adapter (each with its own ServiceAccount and prefix), as (adapter name, props).
    adapter_stagings: tuple[tuple[str, WeightsStagingProps], ...] = ()
    # Its name in `workloads`; None: the one-model `workload` shorthand.
    key: str | None = None
    # The environment's gateway (one object, shared by every workload of the environment); None: no gateway.
    gateway: GatewayProps | None = None
    # Its other GPU pools: the on-demand floor's, a fallback family's; none by default.
    extra_pools: tuple[GpuPoolSpec, ...] = ()
    # A next version: the key of the workload whose pool it joins (pool share); it is scaled by `llm-eks canary`,
    # not by KEDA.
    canary_of: str | None = None

    @property
    def pools(self) -> tuple[GpuPoolSpec, ...]:
        """Every GPU NodePool the workload's pods may use: the planned family's first."""
        return (self.gpu_pool, *self.extra_pools)

    # On Neuron: the Neuron monitor's image (a locked digest when the environment has one), which the cluster's one
    # NeuronMonitorChart runs on every Neuron node; None: not on Neuron.
    neuron_monitor_image: str | None = None

    @property
    def service_account(self) -> tuple[str, str]:
        """(namespace, name) of the serving pods' ServiceAccount."""
        return self.vllm.namespace, self.vllm.name

    @property
    def secrets(self) -> tuple[str, ...]:
        """The Secrets Manager secrets (by name) the pods read: the Hub token, the API key."""
        return tuple(name for name in (self.vllm.hf_token_secret, self.vllm.api_key_secret) if name is not None)

    @property
    def api_key_secret(self) -> str | None:
        """The secret holding the endpoint's API key; None when the key is off."""
        return self.vllm.api_key_secret

    @property
    def weights_s3_uri(self) -> str | None:
        """The S3 prefix the pods stream weights from, in a bucket the user fills; None: the Hugging Face Hub, or the
        environment's bucket (`staging`)."""
        return self.vllm.model if self.vllm.weights == "s3" and self.staging is None else None


@dataclass(frozen=True)
class RayServeWorkload:
    """One model served by Ray Serve LLM on a KubeRay RayService, which scales its own replicas."""

    gpu_pool: GpuPoolSpec
    cpu_pool: CpuPoolSpec
    ray: RayServeProps
    monitoring: RayMonitoringProps
    # Its name in `workloads`; None: the one-model `workload` shorthand.
    key: str | None = None
    # The environment's gateway (one object, shared by every workload of the environment); None: no gateway.
    gateway: GatewayProps | None = None
    # The Job that copies the weights into the environment's bucket (weights "staged"); None: no staging.
    staging: WeightsStagingProps | None = None

    @property
    def adapter_stagings(self) -> tuple[tuple[str, WeightsStagingProps], ...]:
        """None: Ray Serve LLM serves no staged LoRA adapters (config refuses lora_adapters with ray-serve)."""
        return ()

    @property
    def pools(self) -> tuple[GpuPoolSpec, ...]:
        """Every GPU NodePool the workload's pods may use."""
        return (self.gpu_pool,)

    @property
    def service_account(self) -> tuple[str, str]:
        """(namespace, name) of the Ray pods' ServiceAccount."""
        return self.ray.namespace, self.ray.name

    @property
    def secrets(self) -> tuple[str, ...]:
        """The Secrets Manager secrets (by name) the pods read: the Hub token."""
        return () if self.ray.hf_token_secret is None else (self.ray.hf_token_secret,)

    @property
    def api_key_secret(self) -> str | None:
        """Always None: Ray Serve LLM's endpoint has no API key check (see manifests.ray_serve)."""
        return None

    @property
    def weights_s3_uri(self) -> str | None:
        """The S3 prefix the workers read weights from, in a bucket the user fills; None: the Hugging Face Hub, or the
        environment's bucket (`staging`)."""
        return self.ray.model_source if self.ray.model_source.startswith("s3://") else None


# Everything the stack needs to place one environment's model: one type per engine.
Workload: TypeAlias = VllmWorkload | RayServeWorkload
