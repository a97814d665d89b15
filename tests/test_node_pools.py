"""What a reviewer checks on the Karpenter node classes and pools, read from the synthesized cdk8s chart."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from typing import Any

import cdk8s
import pytest

from llm_eks.constructs import cluster
from llm_eks.errors import ConfigError
from llm_eks.manifests.node_pools import (
    DISCOVERY_TAG,
    CpuPoolSpec,
    Disruption,
    GpuPoolSpec,
    NodePoolsChart,
    NodePoolsProps,
    supported_families,
    workload_placement,
)
from llm_eks.versions import AL2023_AMI_VERSION, BOTTLEROCKET_AMI_VERSION
from tests.chart_helpers import by_kind_and_name
from tests.conftest import REPO_ROOT
from tests.kube_schema import assert_valid

G6E = GpuPoolSpec(
    name="gpu-g6e",
    vendor="nvidia",
    instance_family="g6e",
    instance_types=("g6e.xlarge", "g6e.2xlarge"),
    accelerators_per_node=1,
)
INF2 = GpuPoolSpec(
    name="gpu-inf2",
    vendor="neuron",
    instance_family="inf2",
    instance_types=("inf2.xlarge",),
    accelerators_per_node=1,
    accelerator_limit=4,
)
BASE = NodePoolsProps(cluster_name="llm-eks-dev", node_role_name="llm-eks-dev-node", gpu_pools=(G6E, INF2))
SNAPSHOT = "snap-0123456789abcdef0"


def with_gpu_disruption(**changes: Any) -> NodePoolsProps:
    return dataclasses.replace(BASE, gpu_pools=(dataclasses.replace(G6E, disruption=Disruption(**changes)),))


def synth(props: NodePoolsProps) -> dict[tuple[str, str], dict[str, Any]]:
    return by_kind_and_name(NodePoolsChart(cdk8s.App(), "node-pools", props).to_json())


@pytest.fixture(scope="module")
def objects() -> dict[tuple[str, str], dict[str, Any]]:
    return synth(BASE)


@pytest.fixture(scope="module")
def al2023() -> dict[tuple[str, str], dict[str, Any]]:
    return synth(dataclasses.replace(BASE, ami_family="al2023"))


@pytest.fixture(scope="module")
def snapshot() -> dict[tuple[str, str], dict[str, Any]]:
    return synth(dataclasses.replace(BASE, image_snapshot_id=SNAPSHOT))


def spec(objs: dict[tuple[str, str], dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return objs[(kind, name)]["spec"]


def requirement(pool: dict[str, Any], key: str) -> dict[str, Any]:
    (req,) = [r for r in pool["template"]["spec"]["requirements"] if r["key"] == key]
    return req


def test_every_object_is_valid_against_the_karpenter_crds(
    objects: dict[Any, Any], al2023: dict[Any, Any], snapshot: dict[Any, Any]
) -> None:
    assert_valid([*objects.values(), *al2023.values(), *snapshot.values()])


def test_the_discovery_tag_is_defined_once() -> None:
    """The key the cluster construct tags subnets with is the key the node classes select on: one definition."""
    literal = re.compile(r"[\"']karpenter\.sh/discovery[\"']")
    src = REPO_ROOT / "src"
    defined = [str(p.relative_to(src)) for p in sorted(src.rglob("*.py")) if literal.search(p.read_text())]
    assert defined == ["llm_eks/manifests/node_pools/specs.py"]
    assert DISCOVERY_TAG == "karpenter.sh/discovery" and cluster.DISCOVERY_TAG is DISCOVERY_TAG


def test_stable_object_names(objects: dict[Any, Any]) -> None:
    assert set(objects) == {
        ("EC2NodeClass", "gpu-nvidia"),
        ("EC2NodeClass", "neuron"),
        ("EC2NodeClass", "default"),
        ("NodePool", "gpu-g6e"),
        ("NodePool", "gpu-inf2"),
        ("NodePool", "cpu"),
    }
    assert {o["apiVersion"] for (kind, _), o in objects.items() if kind == "NodePool"} == {"karpenter.sh/v1"}
    assert {o["apiVersion"] for (kind, _), o in objects.items() if kind == "EC2NodeClass"} == {"karpenter.k8s.aws/v1"}


def test_only_node_classes_in_use_are_created() -> None:
    objs = synth(dataclasses.replace(BASE, gpu_pools=(G6E,), cpu_pool=None))
    assert set(objs) == {("EC2NodeClass", "gpu-nvidia"), ("NodePool", "gpu-g6e")}


@pytest.mark.parametrize("name", ["gpu-nvidia", "neuron", "default"])
def test_node_class_ami_imds_discovery_role(objects: dict[Any, Any], name: str) -> None:
    nc = spec(objects, "EC2NodeClass", name)
    # A pinned Bottlerocket release, never @latest (which drifts every node on each AWS release).
    assert nc["amiSelectorTerms"] == [{"alias": f"bottlerocket@{BOTTLEROCKET_AMI_VERSION}"}]
    assert re.fullmatch(r"v\d+\.\d+\.\d+", BOTTLEROCKET_AMI_VERSION), "a release, as Karpenter's alias takes it"
    assert "amiFamily" not in nc  # inferred from the alias
    # IMDSv2 only, hop limit 1: pods (one hop away) cannot reach the node role's credentials.
    assert nc["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpProtocolIPv6": "disabled",
        "httpPutResponseHopLimit": 1,
        "httpTokens": "required",
    }
    assert nc["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "llm-eks-dev"}}]
    assert nc["securityGroupSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "llm-eks-dev"}}]
    assert nc["role"] == "llm-eks-dev-node"
    assert "instanceProfile" not in nc
    assert nc["tags"] == {"llm-eks.io/node-class": name}


def test_security_groups_by_id_when_given() -> None:
    objs = synth(dataclasses.replace(BASE, security_group_ids=("sg-0123456789abcdef0", "${Token[TOKEN.42]}")))
    nc = spec(objs, "EC2NodeClass", "gpu-nvidia")
    assert nc["securityGroupSelectorTerms"] == [{"id": "sg-0123456789abcdef0"}, {"id": "${Token[TOKEN.42]}"}]


def test_tokens_are_copied_as_text() -> None:
    objs = synth(dataclasses.replace(BASE, cluster_name="${Token[TOKEN.7]}", node_role_name="${Token[TOKEN.8]}"))
    nc = spec(objs, "EC2NodeClass", "neuron")
    assert nc["role"] == "${Token[TOKEN.8]}"
    assert nc["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "${Token[TOKEN.7]}"}}]


def test_bottlerocket_gpu_volumes_encrypted_gp3_and_raid0_where_nvme(objects: dict[Any, Any]) -> None:
    nvidia = spec(objects, "EC2NodeClass", "gpu-nvidia")
    os_volume, data = nvidia["blockDeviceMappings"]
    assert os_volume == {
        "deviceName": "/dev/xvda",
        "ebs": {"volumeSize": "4Gi", "volumeType": "gp3", "encrypted": True, "deleteOnTermination": True},
    }
    assert data["deviceName"] == "/dev/xvdb"
    assert data["rootVolume"] is True
    assert data["ebs"] == {
        "volumeSize": "200Gi",
        "volumeType": "gp3",
        "encrypted": True,
        "deleteOnTermination": True,
        "iops": 16000,
        "throughput": 1000,
    }
    # g6e has local NVMe: RAID0 ephemeral storage (model cache and images at NVMe speed).
    assert nvidia["instanceStorePolicy"] == "RAID0"
    # The NVIDIA variant needs no device settings of ours (device plugin built in), only the parallel image pull.
    assert set(tomllib.loads(nvidia["userData"])["settings"]) == {"container-runtime", "container-runtime-plugins"}
    # inf2 has no instance store: no RAID0; Neuron on Bottlerocket needs device ownership from the securityContext.
    neuron = spec(objects, "EC2NodeClass", "neuron")
    assert "instanceStorePolicy" not in neuron
    assert "[settings.kubernetes]\ndevice-ownership-from-security-context = true\n" in neuron["userData"]
    assert neuron["blockDeviceMappings"][1]["ebs"]["encrypted"] is True


def test_cpu_node_class_has_baseline_volume_and_no_gpu_settings(objects: dict[Any, Any]) -> None:
    cpu = spec(objects, "EC2NodeClass", "default")
    assert [d["deviceName"] for d in cpu["blockDeviceMappings"]] == ["/dev/xvda", "/dev/xvdb"]
    assert cpu["blockDeviceMappings"][1]["ebs"] == {
        "volumeSize": "100Gi",
        "volumeType": "gp3",
        "encrypted": True,
        "deleteOnTermination": True,
    }
    assert "instanceStorePolicy" not in cpu
    assert "userData" not in cpu


def test_al2023_single_encrypted_root_volume_and_pinned_alias(al2023: dict[Any, Any]) -> None:
    for name in ("gpu-nvidia", "neuron", "default"):
        nc = spec(al2023, "EC2NodeClass", name)
        assert nc["amiSelectorTerms"] == [{"alias": f"al2023@{AL2023_AMI_VERSION}"}]
        assert re.fullmatch(r"v\d{8}", AL2023_AMI_VERSION), "a release date, never latest"
        (root,) = nc["blockDeviceMappings"]
        assert root["deviceName"] == "/dev/xvda"
        assert root["rootVolume"] is True
        assert root["ebs"]["encrypted"] is True
        assert root["ebs"]["volumeType"] == "gp3"
        assert "userData" not in nc
    assert spec(al2023, "EC2NodeClass", "gpu-nvidia")["instanceStorePolicy"] == "RAID0"
    labels = spec(al2023, "NodePool", "gpu-g6e")["template"]["metadata"]["labels"]
    assert labels["llm-eks.io/ami-family"] == "al2023"


def test_snapshot_restored_data_volume_keeps_images_off_the_raid(snapshot: dict[Any, Any]) -> None:
    for name in ("gpu-nvidia", "neuron"):
        data = spec(snapshot, "EC2NodeClass", name)["blockDeviceMappings"][1]
        assert data["deviceName"] == "/dev/xvdb"
        assert data["ebs"]["snapshotID"] == SNAPSHOT
        assert data["ebs"]["volumeSize"] == "200Gi"
        assert data["ebs"]["volumeInitializationRate"] == 300
        # A restored volume is encrypted even if someone points the node class at an unencrypted snapshot.
        assert data["ebs"]["encrypted"] is True
    nvidia = spec(snapshot, "EC2NodeClass", "gpu-nvidia")
    # Karpenter's RAID0 would bind /var/lib/containerd to the NVMe and hide the pre-pulled images...
    assert "instanceStorePolicy" not in nvidia
    # ...so only kubelet (emptyDir model cache) and pod logs go to the NVMe.
    assert "[settings.bootstrap-commands.010-llm-eks-instance-store]" in nvidia["userData"]
    assert (
        '["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/kubelet", "/var/log/pods"]'
        in nvidia["userData"]
    )
    assert "/var/lib/containerd" not in nvidia["userData"].split("commands = ")[1]
    # inf2 has no NVMe: nothing to bind, only the Neuron setting.
    assert "bootstrap-commands" not in spec(snapshot, "EC2NodeClass", "neuron")["userData"]
    # A restored image volume keeps containerd's overlayfs snapshotter: switching snapshotters wipes its images.
    for name in ("gpu-nvidia", "neuron"):
        assert "snapshotter" not in tomllib.loads(spec(snapshot, "EC2NodeClass", name)["userData"])["settings"].get(
            "container-runtime", {}
        )
    # The CPU class pulls its own (small) images.
    assert "snapshotID" not in spec(snapshot, "EC2NodeClass", "default")["blockDeviceMappings"][1]["ebs"]


def test_gpu_nodes_pull_images_in_parallel_unless_told_not_to(objects: dict[Any, Any]) -> None:
    """SOCI parallel pull and unpack, as AWS's Bottlerocket blueprint sets it, in TOML Bottlerocket reads."""
    for name in ("gpu-nvidia", "neuron"):
        settings = tomllib.loads(spec(objects, "EC2NodeClass", name)["userData"])["settings"]
        assert settings["container-runtime"] == {"snapshotter": "soci"}
        soci = settings["container-runtime-plugins"]["soci-snapshotter"]
        assert soci == {
            "pull-mode": "parallel-pull-unpack",
            "parallel-pull-unpack": {
                "max-concurrent-downloads-per-image": 20,
                "concurrent-download-chunk-size": "16mb",
                "max-concurrent-unpacks-per-image": 12,
                "discard-unpacked-layers": True,
            },
        }
    off = synth(dataclasses.replace(BASE, parallel_image_pull=False))
    assert "userData" not in spec(off, "EC2NodeClass", "gpu-nvidia")
    # CPU nodes pull small images: containerd's default.
    assert "userData" not in spec(objects, "EC2NodeClass", "default")


def test_gpu_node_pool_requirements_taints_labels(objects: dict[Any, Any]) -> None:
    pool = spec(objects, "NodePool", "gpu-g6e")
    assert pool["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "gpu-nvidia",
    }
    assert requirement(pool, "karpenter.k8s.aws/instance-family") == {
        "key": "karpenter.k8s.aws/instance-family",
        "operator": "In",
        "values": ["g6e"],
    }
    assert requirement(pool, "node.kubernetes.io/instance-type")["values"] == ["g6e.xlarge", "g6e.2xlarge"]
    assert requirement(pool, "karpenter.sh/capacity-type") == {
        "key": "karpenter.sh/capacity-type",
        "operator": "In",
        "values": ["spot", "on-demand"],
    }
    assert requirement(pool, "kubernetes.io/arch")["values"] == ["amd64"]
    assert requirement(pool, "kubernetes.io/os")["values"] == ["linux"]
    assert pool["template"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert pool["template"]["metadata"]["labels"] == {
        "llm-eks.io/node-pool": "gpu-g6e",
        "llm-eks.io/accelerator": "nvidia",
        "llm-eks.io/ami-family": "bottlerocket",
    }
    assert pool["limits"] == {"nvidia.com/gpu": 8}

    neuron = spec(objects, "NodePool", "gpu-inf2")
    assert neuron["template"]["spec"]["nodeClassRef"]["name"] == "neuron"
    assert neuron["template"]["spec"]["taints"] == [
        {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}
    ]
    assert neuron["template"]["metadata"]["labels"]["llm-eks.io/accelerator"] == "neuron"
    assert neuron["limits"] == {"aws.amazon.com/neuron": 4}


@pytest.mark.parametrize("name", ["gpu-g6e", "gpu-inf2"])
def test_gpu_disruption_never_evicts_running_inference(objects: dict[Any, Any], name: str) -> None:
    pool = spec(objects, "NodePool", name)
    assert pool["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "10m",
        "budgets": [{"nodes": "1"}],
    }
    assert pool["template"]["spec"]["expireAfter"] == "720h"
    assert pool["template"]["spec"]["terminationGracePeriod"] == "10m"


def test_limit_and_nvme_follow_the_catalog() -> None:
    big = GpuPoolSpec("gpu-g6e", "nvidia", "g6e", ("g6e.xlarge", "g6e.12xlarge"), accelerator_limit=16)
    assert (big.accelerators, big.nvme) == (4, True)
    assert (INF2.accelerators, INF2.nvme) == (1, False)
    objs = synth(dataclasses.replace(BASE, gpu_pools=(big,)))
    assert spec(objs, "NodePool", "gpu-g6e")["limits"] == {"nvidia.com/gpu": 16}


def test_each_pool_carries_its_own_disruption() -> None:
    """One Disruption per pool: the g6e pool's settings reach its NodePool and nothing else's."""
    relaxed = Disruption(
        budget_nodes="2", consolidate_after="30m", expire_after="Never", termination_grace_period="15m"
    )
    objs = synth(dataclasses.replace(BASE, gpu_pools=(dataclasses.replace(G6E, disruption=relaxed), INF2)))
    pool = spec(objs, "NodePool", "gpu-g6e")
    assert pool["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "30m",
        "budgets": [{"nodes": "2"}],
    }
    assert pool["template"]["spec"]["expireAfter"] == "Never"
    assert pool["template"]["spec"]["terminationGracePeriod"] == "15m"
    for other in ("gpu-inf2", "cpu"):
        template = spec(objs, "NodePool", other)["template"]["spec"]
        assert (template["expireAfter"], template["terminationGracePeriod"]) == ("720h", "10m"), other
    assert spec(objs, "NodePool", "gpu-inf2")["disruption"]["consolidateAfter"] == "10m"
    assert spec(objs, "NodePool", "cpu")["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "5m",
        "budgets": [{"nodes": "1"}],
    }


def test_cpu_pool(objects: dict[Any, Any]) -> None:
    pool = spec(objects, "NodePool", "cpu")
    assert pool["template"]["spec"]["nodeClassRef"]["name"] == "default"
    assert requirement(pool, "karpenter.k8s.aws/instance-category")["values"] == ["c", "m", "r"]
    assert requirement(pool, "karpenter.k8s.aws/instance-generation") == {
        "key": "karpenter.k8s.aws/instance-generation",
        "operator": "Gt",
        "values": ["5"],
    }
    assert requirement(pool, "karpenter.sh/capacity-type")["values"] == ["spot", "on-demand"]
    assert requirement(pool, "kubernetes.io/arch")["values"] == ["amd64"]
    assert "taints" not in pool["template"]["spec"]
    assert pool["template"]["metadata"]["labels"]["llm-eks.io/node-pool"] == "cpu"
    assert pool["limits"] == {"cpu": 64}
    assert pool["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert pool["disruption"]["budgets"] == [{"nodes": "1"}]


# --- placement round trip: what a pod selects and tolerates must match what the pool's nodes carry -------------


def node_labels_allowed(pool: dict[str, Any], key: str, value: str) -> bool:
    """Can a node launched from `pool` carry label key=value? (template labels, or an In requirement)."""
    labels = pool["template"]["metadata"]["labels"]
    if key in labels:
        return labels[key] == value
    reqs = [r for r in pool["template"]["spec"]["requirements"] if r["key"] == key]
    return bool(reqs) and all(r["operator"] == "In" and value in r["values"] for r in reqs)


def tolerates(tolerations: list[dict[str, str]], taint: dict[str, str]) -> bool:
    """Kubernetes toleration matching (operator Equal/Exists, effect empty matches all)."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("operator", "Equal") == "Exists" and t.get("key") in (None, taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("value") == taint.get("value"):
            return True
    return False


def lands_on(pool: dict[str, Any], selector: dict[str, str], tolerations: list[dict[str, str]]) -> bool:
    return all(node_labels_allowed(pool, k, v) for k, v in selector.items()) and all(
        tolerates(tolerations, taint) for taint in pool["template"]["spec"].get("taints", [])
    )


@pytest.mark.parametrize("spec_", [G6E, INF2, CpuPoolSpec()], ids=lambda s: s.name)
def test_workload_placement_lands_on_its_pool_only(objects: dict[Any, Any], spec_: Any) -> None:
    selector, tolerations = workload_placement(spec_)
    pools = {name: o["spec"] for (kind, name), o in objects.items() if kind == "NodePool"}
    assert {name for name, pool in pools.items() if lands_on(pool, selector, tolerations)} == {spec_.name}
    # Without the tolerations a GPU pod never lands on a GPU node.
    if isinstance(spec_, GpuPoolSpec):
        assert not lands_on(pools[spec_.name], selector, [])


def test_workload_placement_values() -> None:
    assert workload_placement(G6E) == (
        {"llm-eks.io/node-pool": "gpu-g6e", "llm-eks.io/accelerator": "nvidia"},
        [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
    )
    assert workload_placement(CpuPoolSpec(), capacity_type="on-demand") == (
        {"llm-eks.io/node-pool": "cpu", "karpenter.sh/capacity-type": "on-demand"},
        [],
    )


def test_on_demand_placement_fits_the_pool(objects: dict[Any, Any]) -> None:
    selector, tolerations = workload_placement(CpuPoolSpec(), capacity_type="on-demand")
    assert lands_on(spec(objects, "NodePool", "cpu"), selector, tolerations)


def test_placement_refuses_a_capacity_type_the_pool_does_not_allow() -> None:
    spot_only = dataclasses.replace(G6E, capacity_types=("spot",))
    with pytest.raises(ConfigError) as err:
        workload_placement(spot_only, capacity_type="on-demand")
    assert (
        str(err.value)
        == "capacity_type: 'on-demand' is not allowed; must be one pool gpu-g6e allows: spot [LLMEKS-E407]"
    )


# --- bad input: one line naming the field, the value and what is allowed ----------------------------------------


def pool(**changes: Any) -> NodePoolsProps:
    return dataclasses.replace(BASE, gpu_pools=(dataclasses.replace(G6E, **changes), INF2))


BAD_INPUT = [
    (
        pool(instance_family="trn3", instance_types=("trn3.3xlarge",)),
        "gpu_pools[0].instance_family: 'trn3' is not allowed; must be a catalog family: "
        + ", ".join(supported_families())
        + " [LLMEKS-E406]",
    ),
    (
        pool(instance_family="g7", instance_types=("g7.2xlarge",)),
        "gpu_pools[0].instance_family: 'g7' is not allowed; its RTX PRO 4500 GPUs need NVIDIA driver 595 and the "
        "pinned EKS AMIs ship 580 [LLMEKS-E406]",
    ),
    (pool(vendor="amd"), "gpu_pools[0].vendor: 'amd' is not allowed; must be one of neuron, nvidia [LLMEKS-E406]"),
    (
        pool(vendor="neuron"),
        "gpu_pools[0].vendor: 'neuron' is not allowed; must be 'nvidia' for instance family g6e [LLMEKS-E406]",
    ),
    (
        pool(capacity_types=("spot", "reserved")),
        "gpu_pools[0].capacity_types[1]: 'reserved' is not allowed; must be 'spot' or 'on-demand' (or 'reserved', "
        "with a reservation) [LLMEKS-E406]",
    ),
    (
        pool(capacity_types=()),
        "gpu_pools[0].capacity_types: () is not allowed; must list 'spot', 'on-demand' or both [LLMEKS-E406]",
    ),
    (
        pool(capacity_types=("spot", "spot")),
        "gpu_pools[0].capacity_types: ('spot', 'spot') is not allowed; must not repeat a capacity type [LLMEKS-E406]",
    ),
    (
        pool(instance_types=("g6e.xlarge", "g6e.12xlarge"), accelerators_per_node=None, accelerator_limit=2),
        "gpu_pools[0].accelerator_limit: 2 is not allowed; must be at least 4 (one g6e.12xlarge node), "
        "or no node can launch [LLMEKS-E406]",
    ),
    (
        pool(instance_types=("g6e.12xlarge",), accelerators_per_node=1),
        "gpu_pools[0].accelerators_per_node: 1 is not allowed; must be 4, the accelerators of the largest planned "
        "size (or None) [LLMEKS-E406]",
    ),
    (
        pool(instance_types=("g6.xlarge",)),
        "gpu_pools[0].instance_types[0]: 'g6.xlarge' is not allowed; must be one of g6e.xlarge, g6e.2xlarge, "
        "g6e.4xlarge, g6e.8xlarge, g6e.12xlarge, g6e.16xlarge, g6e.24xlarge, g6e.48xlarge [LLMEKS-E406]",
    ),
    (
        pool(instance_types=()),
        "gpu_pools[0].instance_types: () is not allowed; must list at least one g6e size [LLMEKS-E406]",
    ),
    (
        pool(name="GPU_g6e"),
        "gpu_pools[0].name: 'GPU_g6e' is not allowed; must be a DNS label: lowercase letters, digits and '-', "
        "at most 63 characters [LLMEKS-E406]",
    ),
    (
        pool(name="cpu"),
        "gpu_pools[0].name: 'cpu' is not allowed; must be unique across gpu_pools and cpu_pool [LLMEKS-E407]",
    ),
    (
        dataclasses.replace(BASE, gpu_pools=(G6E, dataclasses.replace(INF2, has_nvme=True))),
        "gpu_pools[1].has_nvme: True is not allowed; must be False or None: no planned inf2 size has instance-store "
        "NVMe [LLMEKS-E406]",
    ),
    (
        dataclasses.replace(BASE, gpu_pools=()),
        "gpu_pools: () is not allowed; must list at least one GPU pool [LLMEKS-E407]",
    ),
    (
        dataclasses.replace(BASE, ami_family="ubuntu"),
        "ami_family: 'ubuntu' is not allowed; must be one of al2023, bottlerocket [LLMEKS-E407]",
    ),
    (
        dataclasses.replace(BASE, ami_version="latest"),
        "ami_version: 'latest' is not allowed; pin a release (latest drifts and replaces every node whenever AWS "
        "publishes an AMI) [LLMEKS-E407]",
    ),
    (
        dataclasses.replace(BASE, ami_version="v20260903"),
        "ami_version: 'v20260903' is not allowed; must be a Bottlerocket release tag like v1.65.0 [LLMEKS-E407]",
    ),
    (
        dataclasses.replace(BASE, ami_family="al2023", ami_version="v1.65.0"),
        "ami_version: 'v1.65.0' is not allowed; must be an amazon-eks-ami release tag like v20260903 [LLMEKS-E407]",
    ),
    (
        dataclasses.replace(BASE, ami_family="al2023", image_snapshot_id=SNAPSHOT),
        "image_snapshot_id: 'snap-0123456789abcdef0' is not allowed; needs ami_family 'bottlerocket' "
        "(ami_family is 'al2023': images live on its root volume) [LLMEKS-E407]",
    ),
    (
        dataclasses.replace(BASE, image_snapshot_id="ami-0123456789abcdef0"),
        "image_snapshot_id: 'ami-0123456789abcdef0' is not allowed; must be an EBS snapshot id like "
        "snap-0123456789abcdef0 [LLMEKS-E407]",
    ),
    (
        with_gpu_disruption(expire_after="30d"),
        "gpu_pools[0].disruption.expire_after: '30d' is not allowed; must be a duration like 30m, 720h, 1h30m, or "
        "Never [LLMEKS-E409]",
    ),
    (
        with_gpu_disruption(consolidate_after="ten minutes"),
        "gpu_pools[0].disruption.consolidate_after: 'ten minutes' is not allowed; must be a duration like 30m, 720h, "
        "1h30m, or Never [LLMEKS-E409]",
    ),
    (
        with_gpu_disruption(termination_grace_period="Never"),
        "gpu_pools[0].disruption.termination_grace_period: 'Never' is not allowed; must be a duration like 10m or 1h"
        " [LLMEKS-E409]",
    ),
    (
        with_gpu_disruption(budget_nodes="one"),
        "gpu_pools[0].disruption.budget_nodes: 'one' is not allowed; must be a node count like '1' or a percentage "
        "like '10%' [LLMEKS-E409]",
    ),
    (
        with_gpu_disruption(consolidation_policy="WhenIdle"),
        "gpu_pools[0].disruption.consolidation_policy: 'WhenIdle' is not allowed; must be 'WhenEmpty', "
        "'WhenEmptyOrUnderutilized' or 'Balanced' [LLMEKS-E409]",
    ),
    (
        dataclasses.replace(BASE, root_volume_gib=20),
        "root_volume_gib: 20 is not allowed; must be between 40 and 16384 GiB (a vLLM image alone takes ~30 GB)"
        " [LLMEKS-E407]",
    ),
    (
        dataclasses.replace(BASE, node_role_name="arn:aws:iam::123456789012:role/node"),
        "node_role_name: 'arn:aws:iam::123456789012:role/node' is not allowed; must be the node IAM role's NAME, "
        "not its ARN [LLMEKS-E407]",
    ),
    (
        dataclasses.replace(BASE, cluster_name=""),
        "cluster_name: '' is not allowed; must be the EKS cluster name (or a CDK token for it) [LLMEKS-E407]",
    ),
    (
        dataclasses.replace(BASE, security_group_ids=("default",)),
        "security_group_ids[0]: 'default' is not allowed; must be a security group id like sg-0123456789abcdef0"
        " [LLMEKS-E407]",
    ),
    (
        dataclasses.replace(BASE, tags={"kubernetes.io/cluster/x": "owned"}),
        "tags.kubernetes.io/cluster/x: 'owned' is not allowed; uses a tag key Karpenter reserves for node ownership"
        " [LLMEKS-E407]",
    ),
    (
        dataclasses.replace(BASE, cpu_pool=CpuPoolSpec(instance_categories=("c", "t"))),
        "cpu_pool.instance_categories[1]: 't' is not allowed; must be 'c', 'm' or 'r' [LLMEKS-E406]",
    ),
    (
        dataclasses.replace(BASE, cpu_pool=CpuPoolSpec(capacity_types=("on-demand", "reserved"))),
        "cpu_pool.capacity_types[1]: 'reserved' is not allowed; must be 'spot' or 'on-demand' (or 'reserved', with a "
        "reservation) [LLMEKS-E406]",
    ),
    (
        dataclasses.replace(BASE, cpu_pool=CpuPoolSpec(cpu_limit=1)),
        "cpu_pool.cpu_limit: 1 is not allowed; must be at least 2 vCPUs (the smallest c/m/r size) [LLMEKS-E406]",
    ),
    (
        dataclasses.replace(BASE, cpu_pool=CpuPoolSpec(disruption=Disruption(consolidation_policy="Always"))),
        "cpu_pool.disruption.consolidation_policy: 'Always' is not allowed; must be 'WhenEmpty', "
        "'WhenEmptyOrUnderutilized' or 'Balanced' [LLMEKS-E409]",
    ),
]


@pytest.mark.parametrize(("props", "message"), BAD_INPUT, ids=lambda v: v.split(":")[0] if isinstance(v, str) else "")
def test_bad_input_is_one_line_naming_the_field(props: NodePoolsProps, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        NodePoolsChart(cdk8s.App(), "node-pools", props)
    assert str(err.value) == message
    assert "\n" not in str(err.value)
