"""The GPU device software Helm releases, read from synthesized templates (one minimal aws_eks_v2 cluster each)."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from llm_eks.constructs.gpu_devices import GpuDeviceSoftware, GpuDeviceSoftwareProps
from llm_eks.errors import ConfigError
from llm_eks.manifests.node_pools import GpuPoolSpec, NodePoolsProps
from tests.cdk_fixtures import minimal_cluster

HELM = "Custom::AWSCDK-EKS-HelmChart"
G6E = GpuPoolSpec("gpu-g6e", "nvidia", "g6e", ("g6e.xlarge",), 1)
INF2 = GpuPoolSpec("gpu-inf2", "neuron", "inf2", ("inf2.xlarge",), 1)
# Release, chart, repository, version, namespace.
NVIDIA_DEVICE_PLUGIN = (
    "nvidia-device-plugin",
    "nvidia-device-plugin",
    "https://nvidia.github.io/k8s-device-plugin",
    "0.20.0",
    "nvidia-gpu",
)
DCGM_EXPORTER = (
    "dcgm-exporter",
    "dcgm-exporter",
    "https://nvidia.github.io/dcgm-exporter/helm-charts",
    "4.8.2",
    "nvidia-gpu",
)
NEURON_DEVICE_PLUGIN = (
    "neuron-device-plugin",
    "neuron-helm-chart",
    "oci://public.ecr.aws/neuron/neuron-helm-chart",
    "1.10.0",
    "aws-neuron",
)


@pytest.fixture(scope="module")
def releases() -> dict[str, dict[str, dict[str, Any]]]:
    """Helm releases by release name, for a Bottlerocket cluster (NVIDIA + Neuron) and an AL2023 one (NVIDIA)."""
    app = cdk.App()
    bottlerocket = cdk.Stack(app, "Bottlerocket")
    pools = NodePoolsProps(cluster_name="c", node_role_name="r", gpu_pools=(G6E, INF2))
    GpuDeviceSoftware(
        bottlerocket, "GpuDevices", GpuDeviceSoftwareProps.for_node_pools(minimal_cluster(bottlerocket), pools)
    )
    al2023 = cdk.Stack(app, "Al2023")
    GpuDeviceSoftware(
        al2023, "GpuDevices", GpuDeviceSoftwareProps(cluster=minimal_cluster(al2023), ami_family="al2023")
    )
    out = {}
    for stack in (bottlerocket, al2023):
        charts = Template.from_stack(stack).find_resources(HELM)
        out[stack.stack_name] = {r["Properties"]["Release"]: r["Properties"] for r in charts.values()}
    return out


def values(release: dict[str, Any]) -> dict[str, Any]:
    return json.loads(release["Values"])


def test_bottlerocket_skips_the_nvidia_device_plugin(releases: dict[str, Any]) -> None:
    # Bottlerocket's NVIDIA variant runs the device plugin itself; a DaemonSet copy would double-advertise GPUs.
    assert set(releases["Bottlerocket"]) == {"dcgm-exporter", "neuron-device-plugin"}
    assert set(releases["Al2023"]) == {"nvidia-device-plugin", "dcgm-exporter"}


@pytest.mark.parametrize(
    ("stack", "release", "chart", "repository", "version", "namespace"),
    [
        ("Al2023", *NVIDIA_DEVICE_PLUGIN),
        ("Al2023", *DCGM_EXPORTER),
        ("Bottlerocket", *DCGM_EXPORTER),
        ("Bottlerocket", *NEURON_DEVICE_PLUGIN),
    ],
)
def test_pinned_chart_namespace_wait_and_timeout(
    releases: dict[str, Any], stack: str, release: str, chart: str, repository: str, version: str, namespace: str
) -> None:
    props = releases[stack][release]
    assert props["Chart"] == chart
    assert props["Repository"] == repository
    assert props["Version"] == version
    assert props["Namespace"] == namespace
    # The namespace is ours (Pod Security labels, NetworkPolicies), applied before the release.
    assert not props.get("CreateNamespace")
    # Helm waits for the DaemonSet, and gives up well before the kubectl Lambda's 15 minutes.
    assert props["Wait"] is True
    assert props["Timeout"] == "600s"


def test_nvidia_device_plugin_runs_only_on_non_bottlerocket_nvidia_nodes(releases: dict[str, Any]) -> None:
    v = values(releases["Al2023"]["nvidia-device-plugin"])
    (term,) = v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [
        {"key": "llm-eks.io/accelerator", "operator": "In", "values": ["nvidia"]},
        {"key": "llm-eks.io/ami-family", "operator": "NotIn", "values": ["bottlerocket"]},
    ]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in v["tolerations"]
    assert v["gfd"] == {"enabled": False}
    assert v["nfd"] == {"enabled": False}
    assert v["priorityClassName"] == "system-node-critical"


@pytest.mark.parametrize("stack", ["Al2023", "Bottlerocket"])
def test_dcgm_exporter_on_nvidia_nodes_without_service_monitor(releases: dict[str, Any], stack: str) -> None:
    v = values(releases[stack]["dcgm-exporter"])
    assert v["nodeSelector"] == {"llm-eks.io/accelerator": "nvidia"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in v["tolerations"]
    assert v["serviceMonitor"] == {"enabled": False}
    # The chart's root + CAP_SYS_ADMIN securityContext is kept (Bottlerocket exposes GPUs only with it).
    assert "securityContext" not in v


def test_neuron_chart_installs_only_the_device_plugin(releases: dict[str, Any]) -> None:
    v = values(releases["Bottlerocket"]["neuron-device-plugin"])
    plugin = v["devicePlugin"]
    assert plugin["enabled"] is True
    assert plugin["namespaceOverride"] == "aws-neuron"
    assert plugin["nodeSelector"] == {"llm-eks.io/accelerator": "neuron"}
    (term,) = plugin["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "llm-eks.io/accelerator", "operator": "In", "values": ["neuron"]}]
    assert {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"} in plugin["tolerations"]
    assert v["scheduler"] == {"enabled": False}
    assert v["npd"] == {"enabled": False}
    assert v["draDriver"] == {"enabled": False}


def test_props_follow_the_node_pools() -> None:
    pools = NodePoolsProps(cluster_name="c", node_role_name="r", gpu_pools=(INF2,), ami_family="al2023")
    props = GpuDeviceSoftwareProps.for_node_pools(None, pools)  # type: ignore[arg-type]
    assert (props.nvidia, props.neuron, props.ami_family) == (False, True, "al2023")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"nvidia": False, "neuron": False},
            "nvidia, neuron: both False is not allowed; enable the accelerators the pools use [LLMEKS-E311]",
        ),
        (
            {"ami_family": "ubuntu"},
            "ami_family: 'ubuntu' is not allowed; must be one of al2023, bottlerocket [LLMEKS-E311]",
        ),
        (
            {"helm_timeout": cdk.Duration.minutes(14)},
            "helm_timeout: 14 minutes is not allowed; must be between 1 and 10 minutes (the kubectl Lambda dies at 15)"
            " [LLMEKS-E311]",
        ),
    ],
)
def test_bad_props_are_one_line_errors(changes: dict[str, Any], message: str) -> None:
    props = GpuDeviceSoftwareProps(cluster=None, **changes)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as err:
        GpuDeviceSoftware(cdk.Stack(cdk.App(), "Bad"), "GpuDevices", props)
    assert str(err.value) == f"Bad/GpuDevices: {message}"


def test_gpu_namespaces_are_privileged_with_a_reason_and_deny_by_default() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "Namespaces")
    pools = NodePoolsProps(cluster_name="c", node_role_name="r", gpu_pools=(G6E, INF2))
    devices = GpuDeviceSoftware(
        stack, "GpuDevices", GpuDeviceSoftwareProps.for_node_pools(minimal_cluster(stack), pools)
    )
    template = Template.from_stack(stack)
    manifests = template.find_resources("Custom::AWSCDK-EKS-KubernetesResource")
    by_namespace = {}
    for logical_id, resource in manifests.items():
        objects = json.loads(resource["Properties"]["Manifest"])
        assert objects[0]["kind"] == "Namespace"
        by_namespace[objects[0]["metadata"]["name"]] = (logical_id, objects)
    assert set(by_namespace) == {"nvidia-gpu", "aws-neuron"} == set(devices.namespace_objects)
    for namespace, (_, objects) in by_namespace.items():
        ns, *policies = objects
        assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
        assert "hostPath" in ns["metadata"]["annotations"]["llm-eks.io/pod-security-reason"]
        assert policies[0]["metadata"]["name"] == "default-deny-ingress"
        for obj in objects:  # the manifest's prune label is CDK's, not ours
            obj["metadata"]["labels"] = {
                k: v for k, v in obj["metadata"]["labels"].items() if not k.startswith("aws.cdk.eks/prune-")
            }
        assert objects == devices.namespace_objects[namespace]
    for resource in template.find_resources(HELM).values():
        namespace = resource["Properties"]["Namespace"]
        assert by_namespace[namespace][0] in resource["DependsOn"]
    (dcgm,) = [p for p in by_namespace["nvidia-gpu"][1][1:] if p["metadata"]["name"] == "dcgm-exporter-metrics"]
    assert dcgm["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 9400}]
