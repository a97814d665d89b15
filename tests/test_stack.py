"""The composed environments: what is installed, in which order, and that the plan's numbers reach the objects."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llm_eks.catalog.accelerators import INSTANCE_TYPES
from llm_eks.config import load_environments
from tests.conftest import CDK_JSON, ENVIRONMENTS, Synthesized
from tests.environments import plan_environment

HELM = "Custom::AWSCDK-EKS-HelmChart"
MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
# The kubectl provider's Lambda stops at 15 minutes; every release must finish its wait well before.
LAMBDA_MINUTES = 15


def by_type(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == type_}


def release(template: dict[str, Any], name: str) -> tuple[str, dict[str, Any]]:
    (found,) = [(k, r) for k, r in by_type(template, HELM).items() if r["Properties"]["Release"] == name]
    return found


def chart_manifest(template: dict[str, Any], chart_id: str) -> tuple[str, dict[str, Any]]:
    prefix = f"PlatformCluster{chart_id.replace('-', '')}"
    (found,) = [(k, r) for k, r in by_type(template, MANIFEST).items() if k.startswith(prefix)]
    return found


def env_objects(synthesized: Synthesized, env: str, kind: str) -> list[dict[str, Any]]:
    return [o for o in synthesized.objects(env) if o["kind"] == kind]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_helm_release_is_pinned_and_waits_inside_the_lambda(templates: dict[str, Any], env: str) -> None:
    releases = by_type(templates[env], HELM)
    assert len(releases) >= 6
    for logical_id, resource in releases.items():
        props = resource["Properties"]
        assert props["Version"], logical_id
        assert props.get("Wait") is True, logical_id
        minutes = int(props["Timeout"].removesuffix("s")) / 60 if props["Timeout"].endswith("s") else None
        assert minutes is not None and minutes <= LAMBDA_MINUTES - 2, (logical_id, props["Timeout"])


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_install_order(templates: dict[str, Any], env: str) -> None:
    template = templates[env]
    crds, _ = release(template, "karpenter-crd")
    controller, controller_chart = release(template, "karpenter")
    assert crds in controller_chart["DependsOn"]
    node_pools, node_pools_resource = chart_manifest(template, "node-pools")
    # Node pools after Karpenter's CRDs and controller: deleted first on destroy, while Karpenter still runs.
    assert {crds, controller} <= set(node_pools_resource["DependsOn"])
    workload_ids = ["vllm"] if env != "staging" else ["qwen-ray-serve", "llama-vllm"]
    for workload_id in workload_ids:
        _, workload = chart_manifest(template, workload_id)
        assert node_pools in workload["DependsOn"]
    # Controllers wait for the system node group, or `helm --wait` has nowhere to run their pods.
    system_group = next(k for k, r in by_type(template, "AWS::EKS::Nodegroup").items())
    scalers = ["kuberay-operator", "keda"] if env == "staging" else ["keda"]
    for name in (*scalers, "kube-prometheus-stack", "karpenter"):
        _, chart = release(template, name)
        assert system_group in chart["DependsOn"], name


def test_vllm_waits_for_its_operators_and_identity(templates: dict[str, Any]) -> None:
    template = templates["prod"]
    _, vllm = chart_manifest(template, "vllm")
    deps = set(vllm["DependsOn"])
    assert release(template, "secrets-store-csi-driver-provider-aws")[0] in deps
    associations = [
        k
        for k, r in by_type(template, "AWS::EKS::PodIdentityAssociation").items()
        if r["Properties"]["ServiceAccount"] == "vllm-llama-3-3-70b-instruct"
    ]
    assert associations and associations[0] in deps
    _, autoscaling = chart_manifest(template, "autoscaling")
    assert release(template, "keda")[0] in autoscaling["DependsOn"]
    _, monitoring = chart_manifest(template, "monitoring")
    assert release(template, "kube-prometheus-stack")[0] in monitoring["DependsOn"]


def test_karpenter_helm_values_carry_the_queue_name(templates: dict[str, Any]) -> None:
    template = templates["dev"]
    _, chart = release(template, "karpenter")
    values = chart["Properties"]["Values"]
    text = json.dumps(values)
    (queue_id,) = by_type(template, "AWS::SQS::Queue")
    assert template["Resources"][queue_id]["Properties"]["QueueName"] == "llm-eks-dev"
    assert f'"{queue_id}", "QueueName"' in text
    assert "llm-eks-dev" in text


def test_engines_per_environment(synthesized: Synthesized, templates: dict[str, Any]) -> None:
    # staging serves two models, one per engine: KubeRay for the RayService, KEDA for the vLLM Deployment only.
    assert [r["metadata"]["name"] for r in env_objects(synthesized, "staging", "RayService")] == ["ray-qwen"]
    # Behind the gateway: the vLLM workload's endpoint picker, and the rate-limit counters (Valkey); Envoy Gateway
    # runs Envoy and the rate-limit service itself.
    assert [d["metadata"]["name"] for d in env_objects(synthesized, "staging", "Deployment")] == [
        "vllm-llama",
        "vllm-llama-epp",
        # The query endpoint in front of both Prometheus replicas (applied with the monitoring namespace).
        "thanos-query",
        "valkey",
    ]
    assert [s["spec"]["scaleTargetRef"]["name"] for s in env_objects(synthesized, "staging", "ScaledObject")] == [
        "vllm-llama"
    ]
    release(templates["staging"], "kuberay-operator")
    release(templates["staging"], "keda")
    for name in ("eg", "aieg", "external-secrets"):
        release(templates["staging"], name)
    assert not [r for r in by_type(templates["staging"], HELM).values() if "istio" in r["Properties"]["Release"]]
    # Staging's gateway is in-cluster only: no NLB, so no load balancer controller.
    assert not [
        r for r in by_type(templates["staging"], HELM).values() if "load-balancer" in r["Properties"]["Release"]
    ]
    # Ray Serve scales its own replicas: no KEDA where nothing uses it.
    assert not [
        r for r in by_type(templates["prod"], HELM).values() if r["Properties"]["Release"] == "kuberay-operator"
    ]
    assert [d["metadata"]["name"] for d in env_objects(synthesized, "dev", "Deployment")] == [
        "vllm-llama-3-1-8b-instruct",
        "thanos-query",
    ]
    # Production's front door is closed until workload.alb or a gateway is configured: no load balancer at all.
    for env in ("dev", "prod"):
        assert not env_objects(synthesized, env, "Ingress")
        assert not [r for r in by_type(templates[env], HELM).values() if "load-balancer" in r["Properties"]["Release"]]


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_plan_reaches_the_deployment_and_node_pool(synthesized: Synthesized, env: str) -> None:
    config = load_environments(CDK_JSON["context"])[env]
    plan = plan_environment(config)
    (deployment,) = [
        d
        for d in env_objects(synthesized, env, "Deployment")
        if d["metadata"]["labels"].get("app.kubernetes.io/name") == "vllm"
    ]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "vllm"]
    args = container["args"]
    assert args[args.index("--tensor-parallel-size") + 1] == str(plan.tensor_parallel_size)
    assert args[args.index("--max-model-len") + 1] == str(plan.max_model_len)
    assert container["resources"]["limits"]["nvidia.com/gpu"] == str(plan.gpus_per_pod)
    pool_name = f"gpu-{plan.instance.family}"
    # On its pool by a node selector, or (with a fallback family) by a node affinity naming it first.
    affinity = pod.get("affinity", {}).get("nodeAffinity", {})
    terms = affinity.get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
    pools = [e["values"] for t in terms for e in t["matchExpressions"] if e["key"] == "llm-eks.io/node-pool"]
    assert pod["nodeSelector"].get("llm-eks.io/node-pool", pool_name) == pool_name
    assert not pools or pools[0][0] == pool_name
    (pool,) = [p for p in env_objects(synthesized, env, "NodePool") if p["metadata"]["name"] == pool_name]
    requirements = {r["key"]: r for r in pool["spec"]["template"]["spec"]["requirements"]}
    sizes = requirements["node.kubernetes.io/instance-type"]["values"]
    assert sizes[0] == plan.instance.instance_type
    assert all(INSTANCE_TYPES[size].accelerators == plan.instance.accelerators for size in sizes)
    replicas = config.workload.replicas.max
    assert pool["spec"]["limits"]["nvidia.com/gpu"] >= replicas * plan.gpus_per_pod


def test_s3_weights_and_token_for_ray_serve() -> None:
    """A Ray Serve environment streaming weights from S3 with a gated-model token: one Pod Identity role for the
    workers' ServiceAccount reads exactly that prefix and that secret, and the RayService waits for it."""
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from llm_eks.config import parse_environment
    from llm_eks.infra.stack import InferenceStack

    config = parse_environment(
        "s3",
        {
            "workload": {
                "engine": "ray-serve",
                "weights": "s3",
                "weights_s3_uri": "s3://models-bucket/llama-3.1-8b",
                "hf_token_secret": "llm-eks/s3/hf-token",
            }
        },
    )
    template = Template.from_stack(InferenceStack(cdk.App(), config, plan_environment(config))).to_json()
    (association_id, association) = next(
        (k, r)
        for k, r in by_type(template, "AWS::EKS::PodIdentityAssociation").items()
        if r["Properties"]["Namespace"] == "inference"
    )
    assert association["Properties"]["ServiceAccount"] == "ray-llama-3-1-8b-instruct"
    statements = [
        s
        for p in by_type(template, "AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    text = json.dumps(statements)
    assert "models-bucket/llama-3.1-8b/*" in text
    assert ":secret:llm-eks/s3/hf-token-??????" in text
    _, ray = chart_manifest(template, "ray-serve")
    assert association_id in ray["DependsOn"]
    assert release(template, "kuberay-operator")[0] in ray["DependsOn"]


def _secret_reads(template: dict[str, Any], service_account: str) -> list[str]:
    """The secret ARNs the Pod Identity role of `service_account` may read."""
    (role_id,) = [
        r["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        for r in by_type(template, "AWS::EKS::PodIdentityAssociation").values()
        if r["Properties"]["ServiceAccount"] == service_account
    ]
    return sorted(
        json.dumps(s["Resource"])
        for p in by_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "secretsmanager:GetSecretValue" in s["Action"]
    )


def test_generated_api_key_read_by_the_vllm_role_only(synthesized: Synthesized, templates: dict[str, Any]) -> None:
    """dev (vLLM, gated model, staged weights): the stack generates llm-eks/dev/api-key, the template holds only the
    generator, the vLLM role reads exactly the key (the staging Job, not the server, reads the Hub token), and the
    vLLM chart waits for the secret."""
    template = templates["dev"]
    (secret_id, secret) = next(iter(by_type(template, "AWS::SecretsManager::Secret").items()))
    props = secret["Properties"]
    assert props["Name"] == "llm-eks/dev/api-key"
    assert "SecretString" not in props
    assert props["GenerateSecretString"] == {"ExcludePunctuation": True, "IncludeSpace": False, "PasswordLength": 48}
    assert '"SecretString"' not in json.dumps(template)
    assert template["Outputs"]["ApiKeySecretName"]["Value"] == "llm-eks/dev/api-key"
    reads = _secret_reads(template, "vllm-llama-3-1-8b-instruct")
    assert len(reads) == 1
    assert ":secret:llm-eks/dev/api-key-??????" in reads[0]
    _, vllm = chart_manifest(template, "vllm")
    assert secret_id in vllm["DependsOn"]
    # The chart mounts the same name; the benchmark Job (its own ServiceAccount) sends it.
    (spc,) = [
        o for o in env_objects(synthesized, "dev", "SecretProviderClass") if o["metadata"]["name"].endswith("-api-key")
    ]
    assert "llm-eks/dev/api-key" in spc["spec"]["parameters"]["objects"]
    # Ray Serve (staging's qwen) has no key check: only its vLLM neighbour reads the key, and the RayCluster asks
    # KubeRay for token authentication.
    staging = templates["staging"]
    accounts = [
        r["Properties"]["ServiceAccount"] for r in by_type(staging, "AWS::EKS::PodIdentityAssociation").values()
    ]
    assert "ray-qwen" not in accounts
    # Behind staging's JWT-checking gateway the vLLM neighbour has no key of its own (the token takes the header).
    assert "llm-eks/staging/api-key" not in json.dumps(staging)
    (ray,) = env_objects(synthesized, "staging", "RayService")
    assert ray["spec"]["rayClusterConfig"]["authOptions"] == {"mode": "token"}


def test_named_api_key_secret_is_read_not_created() -> None:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from llm_eks.config import parse_environment
    from llm_eks.infra.stack import InferenceStack

    config = parse_environment("own", {"workload": {"api_key_secret": "team/llm/api-key"}})
    template = Template.from_stack(InferenceStack(cdk.App(), config, plan_environment(config))).to_json()
    assert not by_type(template, "AWS::SecretsManager::Secret")
    assert "Outputs" not in template or "ApiKeySecretName" not in template["Outputs"]
    (read,) = _secret_reads(template, "vllm-llama-3-1-8b-instruct")
    assert ":secret:team/llm/api-key-??????" in read
