"""VllmChart: the objects a user applies, checked the way a reviewer reads them."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
from typing import Any

import pytest
import yaml

from llm_eks.error_codes import E401
from llm_eks.errors import ConfigError
from llm_eks.manifests.api_key import API_KEY_PATH
from llm_eks.manifests.source import SOURCE_ANNOTATION
from llm_eks.manifests.vllm import (
    HF_TOKEN_PATH,
    MAX_GRACE_SECONDS,
    IngressProps,
    VllmChart,
    VllmProps,
    container_args,
    probe_timing,
    validate_vllm_props,
)
from llm_eks.planner.engine import EngineSettings
from llm_eks.versions import VLLM_IMAGE
from tests.chart_helpers import by_kind, by_kind_and_name
from tests.coded import raises_code
from tests.kube_schema import assert_valid

NAME = "vllm-llama-3-1-8b"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
CERTIFICATE_ARN = "arn:aws:acm:eu-west-1:111122223333:certificate/12345678-1234-1234-1234-123456789012"
# What every `vllm serve` command line of base_props carries right after the model.
LISTEN_AND_NAME_ARGS = ("--host", "0.0.0.0", "--port", "8000", "--served-model-name", "llama-3.1-8b")


def base_props(**overrides: Any) -> VllmProps:
    """A plan-shaped VllmProps (Llama 3.1 8B on one GPU); tests override single fields."""
    props = VllmProps(
        name=NAME,
        model="meta-llama/Llama-3.1-8B-Instruct",
        served_model_name="llama-3.1-8b",
        engine=EngineSettings(max_model_len=8192, gpu_memory_utilization=0.9, kv_cache_dtype="fp8"),
        tensor_parallel_size=1,
        accelerators_per_pod=1,
        accelerators_per_node=1,
        cpu="6",
        memory="48Gi",
        shm_size="8Gi",
        cache_size="40Gi",
        startup_seconds=600,
        replicas=1,
        node_selector={"karpenter.sh/nodepool": "gpu-l40s"},
        tolerations=(GPU_TOLERATION,),
        hf_token_secret="llm-eks/dev/hf-token",
        aws_region="eu-west-1",
        ingress=IngressProps(certificate_arn=CERTIFICATE_ARN, inbound_cidrs=("10.0.0.0/16",)),
    )
    return dataclasses.replace(props, **overrides)


def synth(props: VllmProps) -> dict[str, dict[str, Any]]:
    import cdk8s

    return by_kind(VllmChart(cdk8s.App(), "vllm", props).to_json())


@pytest.fixture(scope="module")
def objects() -> dict[str, dict[str, Any]]:
    return synth(base_props())


@pytest.fixture(scope="module")
def container(objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return objects["Deployment"]["spec"]["template"]["spec"]["containers"][0]


@pytest.fixture(scope="module")
def pod(objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return objects["Deployment"]["spec"]["template"]["spec"]


def test_every_object_is_valid(objects: dict[str, dict[str, Any]]) -> None:
    assert sorted(objects) == sorted(
        [
            "Namespace",
            "ServiceAccount",
            "SecretProviderClass",
            "Deployment",
            "Service",
            "PodDisruptionBudget",
            "Ingress",
        ]
    )
    assert_valid(list(objects.values()))


def test_names_and_contract_labels(objects: dict[str, dict[str, Any]]) -> None:
    for kind, obj in objects.items():
        if kind == "Namespace":
            assert obj["metadata"] == {
                "name": "inference",
                "labels": {
                    "app.kubernetes.io/part-of": "llm-eks",
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/warn": "restricted",
                    "pod-security.kubernetes.io/audit": "restricted",
                    "elbv2.k8s.aws/pod-readiness-gate-inject": "enabled",
                },
                "annotations": {SOURCE_ANNOTATION: "llm_eks.manifests.serving_objects"},
            }
            continue
        assert obj["metadata"]["namespace"] == "inference"
        assert obj["metadata"]["labels"] == {
            "app.kubernetes.io/name": "vllm",
            "app.kubernetes.io/instance": NAME,
            "app.kubernetes.io/part-of": "llm-eks",
        }
        expected = f"{NAME}-hf-token" if kind == "SecretProviderClass" else NAME
        assert obj["metadata"]["name"] == expected


def test_vllm_serve_command_and_exact_args(container: dict[str, Any]) -> None:
    assert container["image"] == VLLM_IMAGE
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["command"] == ["vllm", "serve"]
    assert container["args"] == [
        "meta-llama/Llama-3.1-8B-Instruct",
        *LISTEN_AND_NAME_ARGS,
        "--tensor-parallel-size",
        "1",
        "--shutdown-timeout",
        "90",
        "--max-model-len",
        "8192",
        "--gpu-memory-utilization",
        "0.9",
        "--kv-cache-dtype",
        "fp8",
    ]


def test_env_has_cache_token_path_and_no_telemetry_and_no_v0_switch(container: dict[str, Any]) -> None:
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {
        "HF_HOME": "/cache/huggingface",
        "VLLM_CACHE_ROOT": "/cache/vllm",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_TOKEN_PATH": "/var/run/secrets/huggingface/token",
        "AWS_REGION": "eu-west-1",
    }
    assert "VLLM_USE_V1" not in env
    # The token is a mounted file only: no env value, no Kubernetes Secret reference anywhere.
    assert all("valueFrom" not in e for e in container["env"])


def test_probes_startup_budget_arithmetic(container: dict[str, Any]) -> None:
    # startup_seconds 600 x margin 1.5 = 900 s budget; 900 s / 10 s period = 90 failures allowed.
    startup = container["startupProbe"]
    assert startup["httpGet"] == {"path": "/health", "port": "http"}
    assert startup["periodSeconds"] == 10
    assert startup["failureThreshold"] == 90
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600 * 1.5
    assert "initialDelaySeconds" not in startup

    # /health, not /v1/models: it needs no API key, and vLLM only listens once the model is served.
    readiness = container["readinessProbe"]
    assert readiness["httpGet"] == {"path": "/health", "port": "http"}
    assert (readiness["periodSeconds"], readiness["failureThreshold"]) == (10, 3)

    # /health and token progress (tests/test_liveness.py runs the script): a dead server is restarted after
    # 2 x 30 s = 60 s as before, a stalled one within 120 s + 2 x 30 s; a reload costs minutes, so not sooner.
    liveness = container["livenessProbe"]
    command = liveness["exec"]["command"]
    assert command[:2] == ["python3", "-c"] and command[3:] == ["--port", "8000", "--stall-seconds", "120"]
    assert (liveness["periodSeconds"], liveness["failureThreshold"], liveness["timeoutSeconds"]) == (30, 2, 10)
    for probe in (startup, readiness):
        assert probe["timeoutSeconds"] == 5


@pytest.mark.parametrize(
    ("startup_seconds", "margin", "budget", "threshold"),
    [(600, 1.5, 900, 90), (437, 1.5, 656, 66), (90, 1.0, 90, 9), (1, 1.5, 2, 1)],
)
def test_startup_threshold_rounds_up(startup_seconds: int, margin: float, budget: int, threshold: int) -> None:
    timing = probe_timing(base_props(startup_seconds=startup_seconds, startup_margin=margin))
    assert timing.startup_budget_seconds == budget == math.ceil(startup_seconds * margin)
    assert timing.startup_failure_threshold == threshold == math.ceil(budget / 10)


def test_drain_fits_the_spot_notice(container: dict[str, Any], pod: dict[str, Any]) -> None:
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    args = container["args"]
    shutdown = int(args[args.index("--shutdown-timeout") + 1])
    grace = pod["terminationGracePeriodSeconds"]
    # 15 s preStop + 90 s drain = 105 s < 110 s grace <= 120 s Spot notice - 10 s margin.
    assert (pre_stop, shutdown, grace) == (15, 90, 110)
    assert pre_stop + shutdown < grace <= MAX_GRACE_SECONDS == 110


def test_resources_gpu_requests_equal_limits_and_no_cpu_limit(container: dict[str, Any]) -> None:
    resources = container["resources"]
    assert resources["requests"] == {
        "cpu": "6",
        "memory": "48Gi",
        "ephemeral-storage": "40Gi",
        "nvidia.com/gpu": "1",
    }
    assert resources["limits"] == {"memory": "48Gi", "nvidia.com/gpu": "1"}
    assert "cpu" not in resources["limits"]


def test_shm_and_cache_volumes(container: dict[str, Any], pod: dict[str, Any]) -> None:
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert volumes["shm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
    assert mounts["shm"] == "/dev/shm"
    assert volumes["cache"]["emptyDir"] == {"sizeLimit": "40Gi"}
    assert mounts["cache"] == "/cache"
    assert not any("hostPath" in v for v in pod["volumes"])


def test_pod_placement_security_and_rollout(objects: dict[str, dict[str, Any]], pod: dict[str, Any]) -> None:
    assert pod["nodeSelector"] == {"karpenter.sh/nodepool": "gpu-l40s"}
    assert pod["tolerations"] == [GPU_TOLERATION]
    assert pod["serviceAccountName"] == NAME
    assert pod["enableServiceLinks"] is False
    assert pod["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": True,
        "runAsUser": 2000,
        "runAsGroup": 0,
    }
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    spec = objects["Deployment"]["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    # 600 s to launch a node and pull the image + the 900 s startup budget.
    assert spec["progressDeadlineSeconds"] == 1500


def test_zone_and_host_spread(pod: dict[str, Any]) -> None:
    selector = {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": NAME}
    assert pod["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector},
        },
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector},
        },
    ]
    assert (
        "topologySpreadConstraints"
        not in synth(base_props(zone_spread=False))["Deployment"]["spec"]["template"]["spec"]
    )


def test_service_and_pdb_select_the_deployment_pods(objects: dict[str, dict[str, Any]]) -> None:
    pod_labels = objects["Deployment"]["spec"]["template"]["metadata"]["labels"]
    service = objects["Service"]["spec"]
    assert service["type"] == "ClusterIP"
    assert service["ports"] == [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}]
    assert service["selector"].items() <= pod_labels.items()
    pdb = objects["PodDisruptionBudget"]
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    # Both select by the workload's instance label alone: the pods of a first release match as well as those of
    # an on-demand floor (whose own `name` label keeps the Deployments' selectors apart).
    assert service["selector"] == pdb["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/instance": NAME}


def test_an_on_demand_floor_is_a_deployment_of_its_own() -> None:
    """The minimum replicas on on-demand capacity: `<name>-floor`, its selector disjoint from the KEDA-scaled
    Deployment's (both immutable), its pods in the same Service and PDB, spread over zones as a requirement."""
    props = base_props(floor_replicas=2, floor_pools=("gpu-l40s-floor", "gpu-l40s"), pools=("gpu-l40s",))
    import cdk8s

    chart = VllmChart(cdk8s.App(), "vllm", props).to_json()
    deployments = {o["metadata"]["name"]: o for o in chart if o["kind"] == "Deployment"}
    burst, floor = deployments[NAME], deployments[f"{NAME}-floor"]
    assert floor["spec"]["replicas"] == 2
    assert floor["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "vllm-floor",
        "app.kubernetes.io/instance": NAME,
    }
    burst_selector = burst["spec"]["selector"]["matchLabels"]
    floor_labels = floor["spec"]["template"]["metadata"]["labels"]
    assert not burst_selector.items() <= floor_labels.items(), "the burst Deployment must not select floor pods"
    assert (
        not floor["spec"]["selector"]["matchLabels"].items() <= burst["spec"]["template"]["metadata"]["labels"].items()
    )
    (service,) = [o for o in chart if o["kind"] == "Service"]
    assert service["spec"]["selector"].items() <= floor_labels.items()
    spec = floor["spec"]["template"]["spec"]
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [
        {"key": "llm-eks.io/node-pool", "operator": "In", "values": ["gpu-l40s-floor", "gpu-l40s"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]
    assert spec["nodeSelector"] == {"karpenter.sh/nodepool": "gpu-l40s"}, "base_props' own selector, kept"
    zone, host = spec["topologySpreadConstraints"]
    assert (zone["topologyKey"], zone["whenUnsatisfiable"]) == ("topology.kubernetes.io/zone", "DoNotSchedule")
    assert zone["labelSelector"] == {"matchLabels": floor["spec"]["selector"]["matchLabels"]}
    assert host["whenUnsatisfiable"] == "ScheduleAnyway"
    # The KEDA-scaled pods keep a soft spread, on their pools (the planned family's, then a fallback's).
    burst_spec = burst["spec"]["template"]["spec"]
    assert burst_spec["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "ScheduleAnyway"
    assert "llm-eks.io/node-pool" not in burst_spec["nodeSelector"]
    assert_valid(list(deployments.values()))


def test_a_floor_needs_its_pools() -> None:
    with pytest.raises(ConfigError) as err:
        validate_vllm_props(base_props(floor_replicas=2))
    assert str(err.value) == (
        "floor_pools: [] is not allowed with floor_replicas 2; name the NodePools the on-demand floor may use "
        "exactly when it has replicas [LLMEKS-E401]"
    )


def test_secret_provider_class_shape_by_hand(objects: dict[str, dict[str, Any]], pod: dict[str, Any]) -> None:
    """The CRD leaves `parameters` a free map of strings: the AWS provider's keys are checked against the ASCP docs
    (docs.aws.amazon.com/secretsmanager/latest/userguide/ascp-examples.html, "SecretProviderClass YAML structure")."""
    spc = objects["SecretProviderClass"]
    assert spc["apiVersion"] == "secrets-store.csi.x-k8s.io/v1"
    assert set(spc) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(spc["spec"]) == {"provider", "parameters"}
    assert spc["spec"]["provider"] == "aws"
    parameters = spc["spec"]["parameters"]
    assert set(parameters) <= {
        "region",
        "failoverRegion",
        "pathTranslation",
        "usePodIdentity",
        "preferredAddressType",
        "objects",
    }
    assert all(isinstance(v, str) for v in parameters.values())
    assert parameters["usePodIdentity"] == "true"
    assert parameters["region"] == "eu-west-1"
    assert yaml.safe_load(parameters["objects"]) == [
        {"objectName": "llm-eks/dev/hf-token", "objectType": "secretsmanager", "objectAlias": "token"}
    ]
    # The pod mounts exactly this class, read-only, and the file lands where HF_TOKEN_PATH points.
    volume = next(v for v in pod["volumes"] if v["name"] == "hf-token")
    assert volume["csi"] == {
        "driver": "secrets-store.csi.k8s.io",
        "readOnly": True,
        "volumeAttributes": {"secretProviderClass": f"{NAME}-hf-token"},
    }
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "hf-token")
    assert mount["readOnly"] is True
    assert f"{mount['mountPath']}/token" == HF_TOKEN_PATH


def test_internal_alb_ingress(objects: dict[str, dict[str, Any]]) -> None:
    ingress = objects["Ingress"]
    assert ingress["spec"]["ingressClassName"] == "alb"
    assert ingress["metadata"]["annotations"] == {
        "alb.ingress.kubernetes.io/scheme": "internal",
        "alb.ingress.kubernetes.io/target-type": "ip",
        "alb.ingress.kubernetes.io/healthcheck-path": "/health",
        "alb.ingress.kubernetes.io/load-balancer-attributes": "idle_timeout.timeout_seconds=300",
        # The ALB keeps a deregistered pod's connections for its whole drain: 15 + 90 s.
        "alb.ingress.kubernetes.io/target-group-attributes": "deregistration_delay.timeout_seconds=105",
        "alb.ingress.kubernetes.io/listen-ports": '[{"HTTPS": 443}]',
        "alb.ingress.kubernetes.io/certificate-arn": CERTIFICATE_ARN,
        "alb.ingress.kubernetes.io/ssl-policy": "ELBSecurityPolicy-TLS13-1-2-Res-PQ-2025-09",
        "alb.ingress.kubernetes.io/inbound-cidrs": "10.0.0.0/16",
        SOURCE_ANNOTATION: "llm_eks.manifests.vllm.chart",
    }
    # Only the OpenAI API, where vLLM checks the key; /invocations, /tokenize and /metrics stay in the cluster.
    assert ingress["spec"]["rules"][0]["http"]["paths"] == [
        {"path": "/v1", "pathType": "Prefix", "backend": {"service": {"name": NAME, "port": {"name": "http"}}}}
    ]


def test_s3_weights_public_model_no_namespace_no_ingress_on_neuron() -> None:
    props = base_props(
        model="s3://llm-weights/llama-3.1-8b/",
        weights="s3",
        hf_token_secret=None,
        aws_region=None,
        ingress=None,
        create_namespace=False,
        accelerator_resource="aws.amazon.com/neuron",
        tensor_parallel_size=2,
        pipeline_parallel_size=2,
        accelerators_per_pod=4,
        accelerators_per_node=16,
        run_as_user=None,
    )
    objects = synth(props)
    assert sorted(objects) == ["Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"]
    assert_valid(list(objects.values()))
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["args"][:14] == [
        "s3://llm-weights/llama-3.1-8b/",
        *LISTEN_AND_NAME_ARGS,
        "--tensor-parallel-size",
        "2",
        "--pipeline-parallel-size",
        "2",
        "--shutdown-timeout",
        "90",
        "--load-format",
    ]
    assert container["args"][14] == "runai_streamer"
    # The streamer's best published S3 throughput is at 32 concurrent reads (its object-storage default is 8).
    assert {"name": "RUNAI_STREAMER_CONCURRENCY", "value": "32"} in container["env"]
    assert container["resources"]["limits"]["aws.amazon.com/neuron"] == "4"
    assert {e["name"] for e in container["env"]}.isdisjoint({"HF_TOKEN_PATH", "AWS_REGION"})
    assert {v["name"] for v in pod["volumes"]} == {"shm", "cache"}
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"tensor_parallel_size": 16, "accelerators_per_pod": 16, "accelerators_per_node": 8},
            "tensor_parallel_size: 16 is not allowed; must be at most 8 (accelerators per node) [LLMEKS-E401]",
        ),
        (
            {"tensor_parallel_size": 2, "accelerators_per_pod": 1, "accelerators_per_node": 8},
            "accelerators_per_pod: 1 is not allowed; must equal tensor_parallel_size x pipeline_parallel_size x "
            "data_parallel_size / nodes_per_replica (2 / 1), a whole number (vLLM splits the ranks evenly over the "
            "nodes) [LLMEKS-E401]",
        ),
        (
            {
                "tensor_parallel_size": 8,
                "pipeline_parallel_size": 2,
                "accelerators_per_pod": 16,
                "accelerators_per_node": 8,
            },
            "accelerators_per_pod: 16 is not allowed; must be at most 8 (accelerators per node) [LLMEKS-E401]",
        ),
        (
            {"pre_stop_seconds": 10, "shutdown_timeout_seconds": 100, "termination_grace_seconds": 110},
            "drain: preStop 10 s + shutdown timeout 100 s = 110 s must be below terminationGracePeriodSeconds 110 s, "
            "which must be at most 110 s (2-minute Spot notice minus margin) [LLMEKS-E403]",
        ),
        (
            {"termination_grace_seconds": 150},
            "drain: preStop 15 s + shutdown timeout 90 s = 105 s must be below terminationGracePeriodSeconds 150 s, "
            "which must be at most 110 s (2-minute Spot notice minus margin) [LLMEKS-E403]",
        ),
        (
            {"shutdown_timeout_seconds": 0},
            "shutdown_timeout_seconds: 0 is not allowed; must be at least 1 [LLMEKS-E401]",
        ),
        (
            {"name": "vLLM_llama"},
            "name: 'vLLM_llama' is not allowed; must be a DNS-1035 label: lowercase letters, digits and '-', "
            "starting with a letter, at most 63 characters [LLMEKS-E400]",
        ),
        (
            {"namespace": "Inference"},
            "namespace: 'Inference' is not allowed; must be a DNS-1123 label: lowercase letters, digits and '-', "
            "at most 63 characters [LLMEKS-E400]",
        ),
        (
            {"served_model_name": 'llama"3'},
            "served_model_name: 'llama\"3' is not allowed; must be non-empty without '\"', '\\' or a newline "
            "(it is quoted in PromQL) [LLMEKS-E401]",
        ),
        ({"weights": "gcs"}, "weights: 'gcs' is not allowed; must be 'hf' or 's3' [LLMEKS-E401]"),
        (
            {"weights": "s3"},
            "model: 'meta-llama/Llama-3.1-8B-Instruct' is not allowed with weights 's3'; must be an s3:// URI"
            " [LLMEKS-E401]",
        ),
        (
            {"model": "s3://bucket/llama/"},
            "model: 's3://bucket/llama/' is not allowed with weights 'hf'; must be a Hugging Face repo id such as "
            "meta-llama/Llama-3.1-8B-Instruct (for s3:// set weights 's3') [LLMEKS-E401]",
        ),
        (
            {"memory": "4Gi"},
            "memory: 4Gi is not allowed; must be at least shm_size (8Gi) because /dev/shm pages count against "
            "the memory limit [LLMEKS-E401]",
        ),
        (
            {"cpu": "lots"},
            "cpu: 'lots' is not allowed; must be a Kubernetes quantity such as 8, 500m or 32Gi [LLMEKS-E400]",
        ),
        (
            {"extra_engine_args": ("--tensor-parallel-size", "1")},
            "extra_engine_args: '--tensor-parallel-size' is not allowed; the chart sets it from tensor_parallel_size"
            " [LLMEKS-E402]",
        ),
        (
            {"extra_engine_args": ("--port=9000",)},
            "extra_engine_args: '--port' is not allowed; the chart sets it (8000) [LLMEKS-E402]",
        ),
        (
            {"extra_engine_args": ("--enable-chunked-prefill",)},
            "extra_engine_args: '--enable-chunked-prefill' is not allowed; chunked prefill is on by default "
            "(pass --no-enable-chunked-prefill to turn it off) [LLMEKS-E402]",
        ),
        (
            {"extra_engine_args": ("--enable-prefix-caching",)},
            "extra_engine_args: '--enable-prefix-caching' is not allowed; prefix caching is on by default "
            "(pass --no-enable-prefix-caching to turn it off) [LLMEKS-E402]",
        ),
        (
            {"extra_engine_args": ("--num-scheduler-steps", "8")},
            "extra_engine_args: '--num-scheduler-steps' is not allowed; it was removed with the V0 engine"
            " [LLMEKS-E402]",
        ),
        (
            {"engine": EngineSettings(max_model_len=8192, quantization="awq")},
            "engine.quantization: 'awq' is not allowed; it forces the slow AWQ kernel: omit it (auto-detected) or "
            "use awq_marlin [LLMEKS-E202]",
        ),
        (
            {"extra_engine_args": ("--quantization", "awq_marlin")},
            "extra_engine_args: '--quantization' is not allowed; the chart sets it from engine.quantization"
            " [LLMEKS-E402]",
        ),
        (
            {"extra_engine_args": ("--max-num-seqs=64",)},
            "extra_engine_args: '--max-num-seqs' is not allowed; the chart sets it from engine.max_num_seqs"
            " [LLMEKS-E402]",
        ),
        (
            {"engine": EngineSettings(max_model_len=8192, max_num_seqs=64, max_num_batched_tokens=32)},
            "engine.max_num_batched_tokens: 32 is not allowed; must be at least max_num_seqs (64) [LLMEKS-E202]",
        ),
        (
            {"engine": EngineSettings(max_model_len=8192, kv_cache_dtype="fp8 --port 1")},
            "engine.kv_cache_dtype: 'fp8 --port 1' is not allowed; must be one vLLM value such as auto or fp8"
            " [LLMEKS-E202]",
        ),
        (
            {"extra_engine_args": ("--api-key", "x")},
            "extra_engine_args: '--api-key' is not allowed; the chart sets the key from api_key_secret (a Secrets "
            "Manager file, never an argument) [LLMEKS-E402]",
        ),
        (
            {"api_key_secret": "the key itself"},
            "api_key_secret: 'the key itself' is not allowed; must be a Secrets Manager secret name "
            "(letters, digits and /_+=.@-) [LLMEKS-E401]",
        ),
        (
            {"extra_engine_args": ("--disable-log-stats",)},
            "extra_engine_args: '--disable-log-stats' is not allowed; it turns off the Prometheus metrics that "
            "autoscaling and alerts read [LLMEKS-E402]",
        ),
        (
            {"model": "s3://b/m/", "weights": "s3", "extra_engine_args": ("--load-format", "safetensors")},
            "extra_engine_args: '--load-format' is not allowed; the chart sets it (runai_streamer) for weights 's3'"
            " [LLMEKS-E402]",
        ),
        (
            {"hf_token_secret": "hf token!"},
            "hf_token_secret: 'hf token!' is not allowed; must be a Secrets Manager secret name "
            "(letters, digits and /_+=.@-) [LLMEKS-E401]",
        ),
        (
            {"accelerator_resource": "gpu"},
            "accelerator_resource: 'gpu' is not allowed; must be an extended resource name such as "
            "nvidia.com/gpu or aws.amazon.com/neuron [LLMEKS-E401]",
        ),
        ({"startup_seconds": 0}, "startup_seconds: 0 is not allowed; must be at least 1 [LLMEKS-E401]"),
        ({"startup_margin": 0.5}, "startup_margin: 0.5 is not allowed; must be at least 1 [LLMEKS-E401]"),
        ({"replicas": -1}, "replicas: -1 is not allowed; must be at least 0 [LLMEKS-E401]"),
        (
            {"ingress": IngressProps(idle_timeout_seconds=5000)},
            "ingress.idle_timeout_seconds: 5000 is not allowed; must be 1 to 4000 (ALB limit) [LLMEKS-E140]",
        ),
    ],
)
def test_bad_props_get_one_line_errors(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate_vllm_props(base_props(**overrides))
    assert str(err.value) == message
    assert "\n" not in str(err.value)


def test_chart_validates_before_emitting_anything() -> None:
    import cdk8s

    with raises_code(E401, match=r"^tensor_parallel_size: 16 is not allowed"):
        VllmChart(
            cdk8s.App(),
            "vllm",
            base_props(tensor_parallel_size=16, accelerators_per_pod=16, accelerators_per_node=8),
        )


# -- API key ------------------------------------------------------------------------------------------------------

API_KEY_SECRET = "llm-eks/dev/api-key"


@pytest.fixture(scope="module")
def keyed() -> dict[tuple[str, str], dict[str, Any]]:
    import cdk8s

    chart = VllmChart(cdk8s.App(), "vllm", base_props(api_key_secret=API_KEY_SECRET))
    return by_kind_and_name(chart.to_json())


def test_api_key_is_a_secrets_manager_file_never_a_value(keyed: dict[tuple[str, str], dict[str, Any]]) -> None:
    spc = keyed[("SecretProviderClass", f"{NAME}-api-key")]
    assert_valid([spc])
    parameters = spc["spec"]["parameters"]
    assert (parameters["usePodIdentity"], parameters["region"]) == ("true", "eu-west-1")
    assert yaml.safe_load(parameters["objects"]) == [
        {"objectName": API_KEY_SECRET, "objectType": "secretsmanager", "objectAlias": "api-key"}
    ]
    # The Hub token keeps its own class: two files, two mounts.
    assert ("SecretProviderClass", f"{NAME}-hf-token") in keyed
    pod = keyed[("Deployment", NAME)]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volume = next(v for v in pod["volumes"] if v["name"] == "api-key")
    assert volume["csi"] == {
        "driver": "secrets-store.csi.k8s.io",
        "readOnly": True,
        "volumeAttributes": {"secretProviderClass": f"{NAME}-api-key"},
    }
    mount = next(m for m in container["volumeMounts"] if m["name"] == "api-key")
    assert mount == {"name": "api-key", "mountPath": "/var/run/secrets/llm-eks", "readOnly": True}
    assert f"{mount['mountPath']}/api-key" == API_KEY_PATH
    # The shell reads the file and execs `vllm serve` with the chart's exact arguments; no --api-key on the line.
    assert container["command"][:2] == ["/bin/sh", "-c"] and container["command"][3] == "vllm"
    assert API_KEY_PATH in container["command"][2] and 'exec vllm serve "$@"' in container["command"][2]
    assert container["args"] == container_args(base_props())
    assert "--api-key" not in container["args"]
    # Not an env value, not a Kubernetes Secret, and the probes need no key.
    assert "VLLM_API_KEY" not in {e["name"] for e in container["env"]}
    assert all("valueFrom" not in e for e in container["env"])
    assert "Secret" not in {kind for kind, _ in keyed}
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert_valid(list(keyed.values()))


def test_without_a_key_the_command_is_plain_vllm_serve(objects: dict[str, dict[str, Any]], pod: dict[str, Any]) -> None:
    assert pod["containers"][0]["command"] == ["vllm", "serve"]
    assert "api-key" not in {v["name"] for v in pod["volumes"]}
    assert objects["SecretProviderClass"]["metadata"]["name"] == f"{NAME}-hf-token"


def _fake_vllm(tmp_path: Any) -> dict[str, str]:
    """A `vllm` on PATH that prints the key it got and its arguments, one per line."""
    fake = tmp_path / "bin" / "vllm"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "key=$VLLM_API_KEY"\nfor a in "$@"; do echo "$a"; done\n')
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}


def test_api_key_command_exports_the_file_and_execs_vllm(
    keyed: dict[tuple[str, str], dict[str, Any]], tmp_path: Any
) -> None:
    (container,) = keyed[("Deployment", NAME)]["spec"]["template"]["spec"]["containers"]
    key_file = tmp_path / "api-key"
    key_file.write_text("k3yFromSecretsManager\n")
    script = container["command"][2].replace(API_KEY_PATH, str(key_file))
    result = subprocess.run(
        ["/bin/sh", "-c", script, "vllm", *container["args"]],
        capture_output=True,
        text=True,
        env=_fake_vllm(tmp_path),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["key=k3yFromSecretsManager", "serve", *container["args"]]


@pytest.mark.parametrize("content", [None, "", "\n"])
def test_api_key_command_stops_without_a_key(
    keyed: dict[tuple[str, str], dict[str, Any]], tmp_path: Any, content: str | None
) -> None:
    (container,) = keyed[("Deployment", NAME)]["spec"]["template"]["spec"]["containers"]
    key_file = tmp_path / "api-key"
    if content is not None:
        key_file.write_text(content)
    script = container["command"][2].replace(API_KEY_PATH, str(key_file))
    result = subprocess.run(
        ["/bin/sh", "-c", script, "vllm"], capture_output=True, text=True, env=_fake_vllm(tmp_path), check=False
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1] == f"no API key in {key_file} (Secrets Store CSI mount)"


def test_engine_settings_render_as_flags_before_the_extra_ones() -> None:
    engine = EngineSettings(
        max_model_len=16384,
        gpu_memory_utilization=0.92,
        max_num_seqs=32,
        max_num_batched_tokens=8192,
        kv_cache_dtype="fp8",
        quantization="fp8",
        dtype="bfloat16",
    )
    args = container_args(base_props(engine=engine, extra_engine_args=("--enable-expert-parallel",)))
    assert args[11:] == [
        "--max-model-len", "16384",
        "--gpu-memory-utilization", "0.92",
        "--dtype", "bfloat16",
        "--kv-cache-dtype", "fp8",
        "--quantization", "fp8",
        "--max-num-seqs", "32",
        "--max-num-batched-tokens", "8192",
        "--enable-expert-parallel",
    ]  # fmt: skip
