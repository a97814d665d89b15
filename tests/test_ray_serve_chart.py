"""RayServeChart: the RayService a user applies, its Serve config, and the KubeRay cluster behind it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import yaml

from llm_eks.errors import ConfigError
from llm_eks.manifests.ray_monitoring import pod_selector
from llm_eks.manifests.ray_serve import (
    IMPORT_PATH,
    RayServeChart,
    RayServeProps,
    llm_deployment_name,
    worker_gpus_total,
)
from llm_eks.manifests.vllm import HF_TOKEN_PATH
from llm_eks.planner.engine import EngineSettings
from llm_eks.versions import RAY_LLM_IMAGE, RAY_VERSION
from tests.chart_helpers import by_kind
from tests.kube_schema import assert_valid

NAME = "ray-llama-3-1-8b"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

# Field names of Ray 2.60.0's pydantic models (extra="forbid": an unknown key fails the Serve deploy).
# ray/llm/_internal/serve/core/configs/llm_config.py (LLMConfig, ModelLoadingConfig),
# ray/llm/_internal/common/placement.py (PlacementGroupConfig), ray/serve/config.py (AutoscalingConfig).
LLM_CONFIG_FIELDS = {
    "runtime_env",
    "model_loading_config",
    "llm_engine",
    "engine_kwargs",
    "accelerator_type",
    "accelerator_config",
    "placement_group_config",
    "lora_config",
    "deployment_config",
    "server_cls",
    "experimental_configs",
    "log_engine_metrics",
    "callback_config",
}
MODEL_LOADING_FIELDS = {"model_id", "model_source", "tokenizer_source"}
PLACEMENT_GROUP_FIELDS = {"bundle_per_worker", "bundles", "strategy"}
# Serve deployment options (ray/serve/schema.py, DeploymentSchema) that deployment_config may carry.
DEPLOYMENT_CONFIG_FIELDS = {
    "num_replicas",
    "max_ongoing_requests",
    "max_queued_requests",
    "user_config",
    "autoscaling_config",
    "graceful_shutdown_wait_loop_s",
    "graceful_shutdown_timeout_s",
    "health_check_period_s",
    "health_check_timeout_s",
    "ray_actor_options",
    "placement_group_bundles",
    "placement_group_strategy",
    "max_replicas_per_node",
    "logging_config",
    "request_router_config",
}
AUTOSCALING_FIELDS = {
    "min_replicas",
    "initial_replicas",
    "max_replicas",
    "target_ongoing_requests",
    "metrics_interval_s",
    "look_back_period_s",
    "smoothing_factor",
    "upscale_smoothing_factor",
    "downscale_smoothing_factor",
    "upscaling_factor",
    "downscaling_factor",
    "downscale_delay_s",
    "downscale_to_zero_delay_s",
    "upscale_delay_s",
    "aggregation_function",
    "policy",
}


def base_props(**overrides: Any) -> RayServeProps:
    """Plan-shaped props: Llama 3.1 8B on one L40S per replica."""
    props = RayServeProps(
        name=NAME,
        model_id="llama-3.1-8b",
        model_source="meta-llama/Llama-3.1-8B-Instruct",
        accelerator_type="L40S",
        gpus_per_worker=1,
        tensor_parallel_size=1,
        pipeline_parallel_size=1,
        engine=EngineSettings(
            max_model_len=8192, gpu_memory_utilization=0.9, kv_cache_dtype="fp8", max_num_batched_tokens=8192
        ),
        min_replicas=1,
        max_replicas=3,
        target_ongoing_requests=16,
        worker_cpu="6",
        worker_memory="48Gi",
        node_selector={"karpenter.sh/nodepool": "gpu-l40s"},
        tolerations=(GPU_TOLERATION,),
        hf_token_secret="llm-eks/dev/hf-token",
        aws_region="eu-west-1",
        worker_ephemeral_storage="60Gi",
    )
    return dataclasses.replace(props, **overrides)


def multi_node_props() -> RayServeProps:
    """A model too big for one node: TP 8 within each p5 node, PP 2 across two nodes."""
    return base_props(
        name="ray-llama-3-1-405b",
        model_id="llama-3.1-405b",
        model_source="s3://llm-eks-weights/meta-llama/Llama-3.1-405B-Instruct",
        accelerator_type="H100",
        gpus_per_worker=8,
        tensor_parallel_size=8,
        pipeline_parallel_size=2,
        engine=EngineSettings(max_model_len=8192, gpu_memory_utilization=0.9),
        min_replicas=1,
        max_replicas=2,
        worker_cpu="180",
        worker_memory="1800Gi",
        hf_token_secret=None,
        worker_ephemeral_storage=None,
        node_selector={"karpenter.sh/nodepool": "gpu-h100"},
        # A head on Karpenter on-demand capacity instead of the system node group.
        head_node_selector={"karpenter.sh/nodepool": "system", "karpenter.sh/capacity-type": "on-demand"},
    )


def synth(props: RayServeProps) -> dict[str, dict[str, Any]]:
    import cdk8s

    return by_kind(RayServeChart(cdk8s.App(), "ray-serve", props).to_json())


@pytest.fixture(scope="module")
def objects() -> dict[str, dict[str, Any]]:
    return synth(base_props())


@pytest.fixture(scope="module")
def multi_node() -> dict[str, dict[str, Any]]:
    return synth(multi_node_props())


def cluster(objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return objects["RayService"]["spec"]["rayClusterConfig"]


def llm_configs(objects: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    serve = yaml.safe_load(objects["RayService"]["spec"]["serveConfigV2"])
    return serve["applications"][0]["args"]["llm_configs"]


def test_every_object_is_valid(objects: dict[str, dict[str, Any]], multi_node: dict[str, dict[str, Any]]) -> None:
    assert sorted(objects) == ["Namespace", "RayService", "SecretProviderClass", "ServiceAccount"]
    assert_valid(list(objects.values()))
    assert_valid(list(multi_node.values()))
    assert objects["RayService"]["apiVersion"] == "ray.io/v1"
    assert "namespace" not in objects["Namespace"]["metadata"]
    for kind in ("RayService", "ServiceAccount", "SecretProviderClass"):
        assert objects[kind]["metadata"]["namespace"] == "inference"


def test_serve_config_v2_is_the_ray_serve_llm_app(objects: dict[str, dict[str, Any]]) -> None:
    serve = yaml.safe_load(objects["RayService"]["spec"]["serveConfigV2"])
    assert serve == {
        "applications": [
            {
                "name": "llm",
                "route_prefix": "/",
                "import_path": "ray.serve.llm:build_openai_app",
                "args": {
                    "llm_configs": [
                        {
                            "model_loading_config": {
                                "model_id": "llama-3.1-8b",
                                "model_source": "meta-llama/Llama-3.1-8B-Instruct",
                            },
                            "accelerator_type": "L40S",
                            "engine_kwargs": {
                                "tensor_parallel_size": 1,
                                "pipeline_parallel_size": 1,
                                "max_model_len": 8192,
                                "gpu_memory_utilization": 0.9,
                                "kv_cache_dtype": "fp8",
                                "max_num_batched_tokens": 8192,
                            },
                            "placement_group_config": {"bundle_per_worker": {"GPU": 1}, "strategy": "STRICT_PACK"},
                            "deployment_config": {
                                "autoscaling_config": {
                                    "min_replicas": 1,
                                    "max_replicas": 3,
                                    "target_ongoing_requests": 16,
                                },
                                "graceful_shutdown_timeout_s": 85,
                                "graceful_shutdown_wait_loop_s": 2,
                            },
                            "log_engine_metrics": True,
                        }
                    ]
                },
            }
        ]
    }
    assert IMPORT_PATH == "ray.serve.llm:build_openai_app"


def test_llm_config_uses_only_current_ray_field_names(
    objects: dict[str, dict[str, Any]], multi_node: dict[str, dict[str, Any]]
) -> None:
    for config in (*llm_configs(objects), *llm_configs(multi_node)):
        assert set(config) <= LLM_CONFIG_FIELDS
        assert set(config["model_loading_config"]) <= MODEL_LOADING_FIELDS
        assert set(config["placement_group_config"]) <= PLACEMENT_GROUP_FIELDS
        assert set(config["deployment_config"]) <= DEPLOYMENT_CONFIG_FIELDS
        assert set(config["deployment_config"]["autoscaling_config"]) <= AUTOSCALING_FIELDS
        # Ray Serve LLM sets these itself and refuses them in engine_kwargs.
        assert not {"model", "served_model_name", "distributed_executor_backend"} & set(config["engine_kwargs"])


def test_no_deprecated_fields(objects: dict[str, dict[str, Any]]) -> None:
    spec = objects["RayService"]["spec"]
    assert "serviceUnhealthySecondThreshold" not in spec
    assert "deploymentUnhealthySecondThreshold" not in spec
    assert "VLLM_USE_V1" not in spec["serveConfigV2"]
    assert spec["upgradeStrategy"] == {"type": "NewCluster"}


def test_in_tree_autoscaling(objects: dict[str, dict[str, Any]]) -> None:
    config = cluster(objects)
    assert config["rayVersion"] == RAY_VERSION
    assert config["enableInTreeAutoscaling"] is True
    options = config["autoscalerOptions"]
    assert (options["version"], options["upscalingMode"], options["idleTimeoutSeconds"]) == ("v2", "Default", 300)
    assert options["resources"]["requests"] == options["resources"]["limits"]


def test_head_runs_on_system_nodes_without_gpu(objects: dict[str, dict[str, Any]]) -> None:
    head = cluster(objects)["headGroupSpec"]
    assert head["rayStartParams"] == {"num-cpus": "0", "num-gpus": "0"}
    pod = head["template"]["spec"]
    assert pod["nodeSelector"] == {"llm-eks.io/node-role": "system"}
    assert pod["tolerations"] == []
    (container,) = pod["containers"]
    assert container["image"] == RAY_LLM_IMAGE
    assert container["resources"] == {
        "requests": {"cpu": "2", "memory": "8Gi"},
        "limits": {"cpu": "2", "memory": "8Gi"},
    }
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert (ports["serve"], ports["metrics"]) == (8000, 8080)
    assert "volumes" not in pod and "env" not in container
    # The system node group is not Karpenter's: nothing to protect from consolidation there.
    assert "annotations" not in head["template"]["metadata"]


def test_gpu_worker_group(objects: dict[str, dict[str, Any]]) -> None:
    (group,) = cluster(objects)["workerGroupSpecs"]
    assert (group["groupName"], group["replicas"], group["minReplicas"], group["maxReplicas"]) == ("gpu", 1, 1, 3)
    assert "numOfHosts" not in group
    assert group["rayStartParams"] == {"num-gpus": "1"}
    assert group["resources"] == {"accelerator_type:L40S": "1"}
    pod = group["template"]["spec"]
    assert pod["serviceAccountName"] == NAME
    assert pod["nodeSelector"] == {"karpenter.sh/nodepool": "gpu-l40s"}
    assert pod["tolerations"] == [GPU_TOLERATION]
    (container,) = pod["containers"]
    resources = container["resources"]
    assert resources["requests"] == resources["limits"]
    assert resources["limits"] == {"cpu": "6", "memory": "48Gi", "nvidia.com/gpu": "1", "ephemeral-storage": "60Gi"}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert pod["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": True,
        "runAsUser": 1000,
    }
    # KubeRay injects the probes (raylet + Serve proxy health); the chart must not half-override them.
    assert not {"readinessProbe", "livenessProbe", "startupProbe"} & set(container)


def test_hugging_face_token_is_a_csi_file_on_the_workers(objects: dict[str, dict[str, Any]]) -> None:
    spc = objects["SecretProviderClass"]
    assert spc["apiVersion"] == "secrets-store.csi.x-k8s.io/v1"
    assert spc["metadata"]["name"] == f"{NAME}-hf-token"
    assert spc["spec"]["provider"] == "aws"
    parameters = spc["spec"]["parameters"]
    assert parameters["usePodIdentity"] == "true"
    assert parameters["region"] == "eu-west-1"
    assert yaml.safe_load(parameters["objects"]) == [
        {"objectName": "llm-eks/dev/hf-token", "objectType": "secretsmanager", "objectAlias": "token"}
    ]
    pod = cluster(objects)["workerGroupSpecs"][0]["template"]["spec"]
    assert pod["volumes"] == [
        {
            "name": "hf-token",
            "csi": {
                "driver": "secrets-store.csi.k8s.io",
                "readOnly": True,
                "volumeAttributes": {"secretProviderClass": f"{NAME}-hf-token"},
            },
        }
    ]
    container = pod["containers"][0]
    assert {"name": "HF_TOKEN_PATH", "value": HF_TOKEN_PATH} in container["env"]
    (mount,) = container["volumeMounts"]
    assert mount["readOnly"] is True and f"{mount['mountPath']}/token" == HF_TOKEN_PATH
    # The token never appears in a manifest: no Secret, no token value in the environment.
    assert "Secret" not in objects
    assert {e["name"] for e in container["env"]} == {"HF_TOKEN_PATH", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"}
    assert objects["ServiceAccount"]["metadata"]["name"] == NAME


def test_multi_node_replica_spans_pipeline_stages(multi_node: dict[str, dict[str, Any]]) -> None:
    (config,) = llm_configs(multi_node)
    assert config["engine_kwargs"] == {
        "tensor_parallel_size": 8,
        "pipeline_parallel_size": 2,
        "max_model_len": 8192,
        "gpu_memory_utilization": 0.9,
    }
    assert config["model_loading_config"]["model_source"] == "s3://llm-eks-weights/meta-llama/Llama-3.1-405B-Instruct"
    # PACK: fill one node, spill the next pipeline stage to the second.
    assert config["placement_group_config"] == {"bundle_per_worker": {"GPU": 1}, "strategy": "PACK"}
    assert config["accelerator_type"] == "H100"
    (group,) = cluster(multi_node)["workerGroupSpecs"]
    # Two worker pods (nodes) per model replica: 1-2 replicas are 2-4 pods.
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 2, 4)
    assert group["rayStartParams"] == {"num-gpus": "8"}
    limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "180", "memory": "1800Gi", "nvidia.com/gpu": "8"}
    assert "volumes" not in group["template"]["spec"]
    assert "SecretProviderClass" not in multi_node
    props = multi_node_props()
    assert props.nodes_per_replica == 2
    assert worker_gpus_total(props) == 32


def test_serve_endpoint_service_name() -> None:
    assert base_props().serve_service_name == f"{NAME}-serve-svc"


def test_optional_fields_are_left_to_ray_and_vllm() -> None:
    from llm_eks.manifests.ray_serve import llm_config

    config = llm_config(
        base_props(
            engine=EngineSettings(max_model_len=8192),
            max_ongoing_requests=64,
            runtime_env_vars={"VLLM_LOGGING_LEVEL": "INFO"},
            extra_engine_kwargs={"enable_expert_parallel": True},
        )
    )
    assert "kv_cache_dtype" not in config["engine_kwargs"]
    assert "max_num_batched_tokens" not in config["engine_kwargs"]
    assert config["engine_kwargs"]["enable_expert_parallel"] is True
    assert config["deployment_config"]["max_ongoing_requests"] == 64
    assert config["runtime_env"] == {"env_vars": {"VLLM_LOGGING_LEVEL": "INFO"}}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"accelerator_type": "L40"},
            "ray_serve.accelerator_type: 'L40' is not allowed; must be one of Ray 2.60.0's NVIDIA types: V100, P100, "
            "T4, P4, K80, A10G, L4, L40S, A100, A100-40G, A100-80G, H100, H200, H20, B200, B300, GB200, GB300, "
            "RTX-PRO-6000 [LLMEKS-E405]",
        ),
        (
            {"tensor_parallel_size": 16, "gpus_per_worker": 8},
            "ray_serve.tensor_parallel_size: 16 is not allowed; must be at most 8 (GPUs per worker node; tensor "
            "parallelism stays within a node) [LLMEKS-E405]",
        ),
        (
            {"tensor_parallel_size": 4, "pipeline_parallel_size": 3, "gpus_per_worker": 8},
            "ray_serve.pipeline_parallel_size: 3 is not allowed; must make tensor_parallel_size x "
            "pipeline_parallel_size (12 GPUs) a whole number of 8-GPU worker nodes [LLMEKS-E405]",
        ),
        (
            {"tensor_parallel_size": 2, "gpus_per_worker": 4},
            "ray_serve.gpus_per_worker: 4 is not allowed; must equal tensor_parallel_size x pipeline_parallel_size "
            "(2) when one node holds a replica [LLMEKS-E405]",
        ),
        (
            {"gpu_resource": "aws.amazon.com/neuron"},
            "ray_serve.gpu_resource: 'aws.amazon.com/neuron' is not allowed; must be nvidia.com/gpu (Ray Serve LLM "
            "runs vLLM on CUDA here) [LLMEKS-E405]",
        ),
        (
            {"min_replicas": 4, "max_replicas": 3},
            "ray_serve.min_replicas: 4 is not allowed; must be at most max_replicas (3) [LLMEKS-E405]",
        ),
        (
            {"max_replicas": 0},
            "ray_serve.max_replicas: 0 is not allowed; must be a whole number of at least 1 [LLMEKS-E405]",
        ),
        (
            {"engine": EngineSettings(max_model_len=8192, gpu_memory_utilization=1.2)},
            "ray_serve.engine.gpu_memory_utilization: 1.2 is not allowed; must be a fraction in (0, 1] [LLMEKS-E202]",
        ),
        (
            {"engine": EngineSettings(max_model_len=0)},
            "ray_serve.engine.max_model_len: 0 is not allowed; must be a whole number of at least 1 [LLMEKS-E202]",
        ),
        (
            {"engine": EngineSettings(max_model_len=8192, quantization="awq")},
            "ray_serve.engine.quantization: 'awq' is not allowed; it forces the slow AWQ kernel: omit it "
            "(auto-detected) or use awq_marlin [LLMEKS-E202]",
        ),
        (
            {"name": "ray-" + "x" * 44},
            f"ray_serve.name: {'ray-' + 'x' * 44!r} is not allowed; must be at most 47 characters (KubeRay appends "
            "suffixes) [LLMEKS-E405]",
        ),
        (
            {"name": "Ray_Llama"},
            "ray_serve.name: 'Ray_Llama' is not allowed; must be a DNS-1035 label: lowercase letters, digits and '-', "
            "starting with a letter, at most 63 characters [LLMEKS-E400]",
        ),
        (
            {"model_source": "https://example.com/model"},
            "ray_serve.model_source: 'https://example.com/model' is not allowed; must be a Hugging Face repo id "
            "(org/name) or an s3:// URI [LLMEKS-E405]",
        ),
        (
            {"extra_engine_kwargs": {"distributed_executor_backend": "mp"}},
            "ray_serve.extra_engine_kwargs: 'distributed_executor_backend' is not allowed; Ray Serve LLM always uses "
            "the ray executor [LLMEKS-E405]",
        ),
        (
            {"extra_engine_kwargs": {"max_model_len": 4096}},
            "ray_serve.extra_engine_kwargs: 'max_model_len' is not allowed; it has its own setting "
            "(engine.max_model_len) [LLMEKS-E405]",
        ),
        (
            {"extra_engine_kwargs": {"tensor_parallel_size": 2}},
            "ray_serve.extra_engine_kwargs: 'tensor_parallel_size' is not allowed; it has its own prop [LLMEKS-E405]",
        ),
        (
            {"worker_memory": "48GB"},
            "ray_serve.worker_memory: '48GB' is not allowed; must be a Kubernetes quantity such as 8, 500m or 32Gi"
            " [LLMEKS-E400]",
        ),
        (
            {"max_ongoing_requests": 8},
            "ray_serve.max_ongoing_requests: 8 is not allowed; must be a whole number of at least 16 [LLMEKS-E405]",
        ),
        (
            {"upscaling_mode": "Fast"},
            "ray_serve.upscaling_mode: 'Fast' is not allowed; must be one of Default, Aggressive, Conservative"
            " [LLMEKS-E405]",
        ),
        (
            {"upgrade_strategy": "NewClusterWithIncrementalUpgrade"},
            "ray_serve.upgrade_strategy: 'NewClusterWithIncrementalUpgrade' is not allowed; must be one of "
            "NewCluster, None [LLMEKS-E405]",
        ),
        (
            {"ray_version": "2.51.1"},
            "ray_serve.ray_version: '2.51.1' is not allowed; must be 2.52.0 or later (Ray token authentication, "
            "which every RayCluster here turns on) [LLMEKS-E405]",
        ),
        (
            {"ray_version": "latest"},
            "ray_serve.ray_version: 'latest' is not allowed; must be 2.52.0 or later (Ray token authentication, "
            "which every RayCluster here turns on) [LLMEKS-E405]",
        ),
    ],
)
def test_bad_props_fail_with_one_line(overrides: dict[str, Any], message: str) -> None:
    import cdk8s

    with pytest.raises(ConfigError) as err:
        RayServeChart(cdk8s.App(), "ray-serve", base_props(**overrides))
    assert str(err.value) == message
    assert "\n" not in str(err.value)


def test_gpu_workers_drain_within_the_spot_notice(objects: dict[str, dict[str, Any]]) -> None:
    props = base_props()
    pod = cluster(objects)["workerGroupSpecs"][0]["template"]["spec"]
    (container,) = pod["containers"]
    grace = pod["terminationGracePeriodSeconds"]
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    env = {e["name"]: e["value"] for e in container["env"]}
    drain = int(env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"])
    (config,) = llm_configs(objects)
    serve = config["deployment_config"]
    assert (grace, pre_stop, drain) == (110, 15, 90)
    assert (serve["graceful_shutdown_timeout_s"], serve["graceful_shutdown_wait_loop_s"]) == (85, 2)
    # Serve stops routing to the replica and lets it finish within Ray's drain, all before the kubelet's SIGKILL,
    # all inside the 2-minute Spot notice minus Karpenter's margin.
    assert pre_stop + serve["graceful_shutdown_timeout_s"] == 100
    assert serve["graceful_shutdown_timeout_s"] + 5 <= drain
    assert pre_stop + drain == 105 < grace <= 110
    assert (props.pre_stop_seconds, props.drain_timeout_seconds, props.termination_grace_seconds) == (15, 90, 110)
    # The head is on-demand capacity and gets none of this.
    head = cluster(objects)["headGroupSpec"]["template"]["spec"]
    assert "terminationGracePeriodSeconds" not in head and "lifecycle" not in head["containers"][0]


def test_head_on_karpenter_capacity_is_never_disrupted(multi_node: dict[str, dict[str, Any]]) -> None:
    head = cluster(multi_node)["headGroupSpec"]["template"]
    assert head["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    assert head["spec"]["nodeSelector"] == {
        "karpenter.sh/nodepool": "system",
        "karpenter.sh/capacity-type": "on-demand",
    }
    # GPU workers stay disruptable: the Ray autoscaler and Karpenter consolidate idle GPU nodes.
    worker = cluster(multi_node)["workerGroupSpecs"][0]["template"]
    assert "annotations" not in worker["metadata"]


def test_every_ray_pod_is_scraped_on_its_metrics_port(objects: dict[str, dict[str, Any]]) -> None:
    """The PodMonitor of RayMonitoringChart selects head and workers and finds port `metrics` on both."""
    spec = cluster(objects)
    for template in (spec["headGroupSpec"]["template"], spec["workerGroupSpecs"][0]["template"]):
        # KubeRay adds ray.io/is-ray-node=yes to every Ray pod; the rest must come from the chart's template.
        labels = {**template["metadata"]["labels"], "ray.io/is-ray-node": "yes"}
        assert pod_selector(NAME).items() <= labels.items()
        (container,) = template["spec"]["containers"]
        assert {"name": "metrics", "containerPort": 8080} in container["ports"]


def test_llm_deployment_name_follows_ray_serve_llm() -> None:
    assert llm_deployment_name("llama-3.1-8b") == "LLMServer:llama-3_1-8b"
    assert llm_deployment_name("meta-llama/Llama-3.1-8B-Instruct") == "LLMServer:meta-llama--Llama-3_1-8B-Instruct"
    assert base_props().llm_deployment_name == "LLMServer:llama-3_1-8b"


def test_no_pre_stop_when_it_is_zero() -> None:
    from llm_eks.manifests.ray_serve import worker_group_spec

    worker = worker_group_spec(base_props(pre_stop_seconds=0, drain_timeout_seconds=105))
    assert "lifecycle" not in worker["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"drain_timeout_seconds": 100},
            "ray_serve.drain: preStop 15 s + Ray drain timeout 100 s = 115 s must be below "
            "terminationGracePeriodSeconds 110 s, which must be at most 110 s (2-minute Spot notice minus margin)"
            " [LLMEKS-E403]",
        ),
        (
            {"termination_grace_seconds": 120, "drain_timeout_seconds": 100},
            "ray_serve.drain: preStop 15 s + Ray drain timeout 100 s = 115 s must be below "
            "terminationGracePeriodSeconds 120 s, which must be at most 110 s (2-minute Spot notice minus margin)"
            " [LLMEKS-E403]",
        ),
        (
            {"termination_grace_seconds": 105},
            "ray_serve.drain: preStop 15 s + Ray drain timeout 90 s = 105 s must be below "
            "terminationGracePeriodSeconds 105 s, which must be at most 110 s (2-minute Spot notice minus margin)"
            " [LLMEKS-E403]",
        ),
        (
            {"graceful_shutdown_timeout_seconds": 90},
            "ray_serve.graceful_shutdown_timeout_seconds: 90 is not allowed; must be at most drain_timeout_seconds - 5 "
            "(85): Ray stops the node at its drain deadline [LLMEKS-E405]",
        ),
        (
            {"graceful_shutdown_wait_loop_seconds": 85},
            "ray_serve.graceful_shutdown_wait_loop_seconds: 85 is not allowed; must be below "
            "graceful_shutdown_timeout_seconds (85) [LLMEKS-E405]",
        ),
        (
            {"drain_timeout_seconds": 0},
            "ray_serve.drain_timeout_seconds: 0 is not allowed; must be a whole number of at least 1 [LLMEKS-E405]",
        ),
        (
            {"pre_stop_seconds": -1},
            "ray_serve.pre_stop_seconds: -1 is not allowed; must be a whole number of at least 0 [LLMEKS-E405]",
        ),
        (
            {"head_node_selector": {"karpenter.sh/nodepool": "system", "karpenter.sh/capacity-type": "spot"}},
            "ray_serve.head_node_selector: {'karpenter.sh/nodepool': 'system', 'karpenter.sh/capacity-type': 'spot'} "
            "is not allowed; the head (GCS, Serve controller) must run on on-demand capacity, never Spot [LLMEKS-E405]",
        ),
    ],
)
def test_bad_drain_and_head_placement_fail_with_one_line(overrides: dict[str, Any], message: str) -> None:
    import cdk8s

    with pytest.raises(ConfigError) as err:
        RayServeChart(cdk8s.App(), "ray-serve", base_props(**overrides))
    assert str(err.value) == message
    assert "\n" not in str(err.value)


def test_ray_token_authentication_on_every_ray_cluster(
    objects: dict[str, dict[str, Any]], multi_node: dict[str, dict[str, Any]]
) -> None:
    """KubeRay 1.7 generates the token Secret and sets RAY_AUTH_MODE/RAY_AUTH_TOKEN on every Ray container itself;
    the chart only asks for it (no secretName: no token of ours in any manifest)."""
    for chart in (objects, multi_node):
        config = cluster(chart)
        assert config["authOptions"] == {"mode": "token"}
        pods = [config["headGroupSpec"]["template"]["spec"]] + [
            g["template"]["spec"] for g in config["workerGroupSpecs"]
        ]
        for pod in pods:
            for container in pod["containers"]:
                assert not {"RAY_AUTH_MODE", "RAY_AUTH_TOKEN"} & {e["name"] for e in container.get("env", [])}
        assert "Secret" not in chart


def test_engine_settings_render_as_engine_kwargs() -> None:
    from llm_eks.manifests.ray_serve import llm_config

    engine = EngineSettings(
        max_model_len=16384,
        gpu_memory_utilization=0.92,
        max_num_seqs=32,
        max_num_batched_tokens=8192,
        kv_cache_dtype="fp8",
        quantization="fp8",
        dtype="bfloat16",
    )
    kwargs = llm_config(base_props(engine=engine, extra_engine_kwargs={"enable_expert_parallel": True}))
    assert list(kwargs["engine_kwargs"].items()) == [
        ("tensor_parallel_size", 1),
        ("pipeline_parallel_size", 1),
        ("max_model_len", 16384),
        ("gpu_memory_utilization", 0.92),
        ("dtype", "bfloat16"),
        ("kv_cache_dtype", "fp8"),
        ("quantization", "fp8"),
        ("max_num_batched_tokens", 8192),
        ("max_num_seqs", 32),
        ("enable_expert_parallel", True),
    ]
