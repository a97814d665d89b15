"""EFA for replicas that span nodes: the EC2NodeClass interfaces per family and EFA count, the EFA NodePool, the
pods' `vpc.amazonaws.com/efa` requests and NCCL settings, and the config that asks for it (or refuses it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cdk8s
import pytest
import yaml

from llm_eks.catalog.accelerators import CATALOG
from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.infra.charts import efa_node_classes
from llm_eks.infra.workloads import VllmWorkload, build_workloads
from llm_eks.manifests.checks import catalog_instance_resources, check_objects
from llm_eks.manifests.node_pools import EFA_RESOURCE, NodePoolsChart, NodePoolsProps, network_interfaces
from tests.chart_helpers import environment_objects
from tests.crd_cel import EC2_NODE_CLASS, failed_rules
from tests.kube_schema import assert_valid

SG = ("sg-0123456789abcdef0",)
# DeepSeek-V3 (fp8 block weights, 673 GB) on 2 x p5.48xlarge, TP 8 x PP 2: the planner's multi-node layout.
DEEPSEEK = {
    "weights_bucket": {},
    "workload": {
        "model": "deepseek-ai/DeepSeek-V3",
        "accelerator": "p5.48xlarge",
        "tensor_parallel_size": 8,
        "pipeline_parallel_size": 2,
        "max_model_len": 8192,
        "replicas": {"min": 1, "max": 1},
        "weights": "staged",
    },
}


def _objects(body: dict[str, Any]) -> list[dict[str, Any]]:
    return environment_objects("largest", body)


def _named(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return _objects(DEEPSEEK)


def test_p5_node_class_lists_ena_then_32_efa_only_interfaces(objects: list[dict[str, Any]]) -> None:
    spec = _named(objects, "EC2NodeClass", "gpu-nvidia-p5-efa32")["spec"]
    interfaces = spec["networkInterfaces"]
    assert interfaces[:2] == [
        {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
        {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"},
    ]
    assert interfaces[2:] == [
        {"networkCardIndex": card, "deviceIndex": 0, "interfaceType": "efa-only"} for card in range(1, 32)
    ]
    # Karpenter counts the efa-only entries as the node's vpc.amazonaws.com/efa capacity (types.go, efas()).
    assert sum(i["interfaceType"] == "efa-only" for i in interfaces) == 32
    assert spec["placementGroupSelector"] == {"id": "pg-0123456789abcdef0"}
    assert spec["associatePublicIPAddress"] is False
    assert spec["securityGroupSelectorTerms"] == [{"id": SG[0]}]
    assert failed_rules(EC2_NODE_CLASS, "networkInterfaces", interfaces) == []
    assert failed_rules(EC2_NODE_CLASS, "placementGroupSelector", spec["placementGroupSelector"]) == []


@pytest.mark.parametrize("row", [r for r in CATALOG if r.efa_interfaces], ids=lambda r: r.instance_type)
def test_every_efa_instance_type_gets_a_list_the_crd_accepts(row: Any) -> None:
    interfaces = network_interfaces(row.efa_interfaces)
    assert sum(i["interfaceType"] == "efa-only" for i in interfaces) == row.efa_interfaces
    assert failed_rules(EC2_NODE_CLASS, "networkInterfaces", interfaces) == []


def test_the_efa_pool_keeps_to_its_family_and_labels_its_nodes(objects: list[dict[str, Any]]) -> None:
    pool = _named(objects, "NodePool", "gpu-p5-efa32")
    template = pool["spec"]["template"]
    assert template["metadata"]["labels"]["llm-eks.io/efa"] == "true"
    assert template["spec"]["nodeClassRef"]["name"] == "gpu-nvidia-p5-efa32"
    requirements = {r["key"]: r["values"] for r in template["spec"]["requirements"]}
    assert requirements["karpenter.k8s.aws/instance-family"] == ["p5"]
    assert requirements["node.kubernetes.io/instance-type"] == ["p5.48xlarge"]
    assert requirements["karpenter.sh/capacity-type"] == ["spot", "on-demand"]
    assert pool["spec"]["limits"] == {"nvidia.com/gpu": 16}
    # No shared gpu-nvidia node class: nothing of this environment runs outside EFA.
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "EC2NodeClass"] == ["gpu-nvidia-p5-efa32", "default"]


def test_every_pod_of_a_group_takes_its_nodes_efa_and_nccl_stays_on_eth0(objects: list[dict[str, Any]]) -> None:
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    template = lws["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        pod = template[role]["spec"]
        (container,) = pod["containers"]
        resources = container["resources"]
        assert resources["requests"][EFA_RESOURCE] == resources["limits"][EFA_RESOURCE] == "32"
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "eth0"
        assert (env["NCCL_DEBUG"], env["NCCL_DEBUG_SUBSYS"]) == ("INFO", "INIT,NET")
        # aws-ofi-nccl's cheatsheet: not needed, or not to be set, with current EFA software.
        assert not {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "FI_EFA_FORK_SAFE", "RDMAV_FORK_SAFE", "NCCL_PROTO"} & set(
            env
        )
        assert pod["nodeSelector"]["llm-eks.io/node-pool"] == "gpu-p5-efa32"
        # The group stays in its leader's zone (and the placement group keeps the pool in one).
        (affinity,) = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert affinity["topologyKey"] == "topology.kubernetes.io/zone"


def test_objects_validate_and_pass_the_synth_checks(objects: list[dict[str, Any]]) -> None:
    assert_valid(objects)
    assert check_objects(objects, instance_resources=catalog_instance_resources) == []


def test_a_single_node_replica_gets_no_efa() -> None:
    objects = _objects({"workload": {"model": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 8192}})
    assert not [o for o in objects if o["kind"] == "EC2NodeClass" and "networkInterfaces" in o["spec"]]
    deployment = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("vllm"))
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert EFA_RESOURCE not in container["resources"]["requests"]
    assert "NCCL_SOCKET_IFNAME" not in {e["name"] for e in container["env"]}


def test_efa_false_runs_the_group_over_tcp_once_acknowledged() -> None:
    body = {**DEEPSEEK, "workload": {**DEEPSEEK["workload"], "efa": False}}
    with pytest.raises(ConfigError) as err:
        _objects(body)
    assert str(err.value) == (
        "environments.largest.workload.efa: False is not allowed; a replica spans 2 p5.48xlarge nodes, which would "
        "then talk over TCP: accept that with acknowledged_warnings llm-eks:plan-no-efa, or leave efa unset"
        " [LLMEKS-E124]"
    )
    body["workload"]["acknowledged_warnings"] = {"llm-eks:plan-no-efa": "EFA userspace not in our image yet"}
    objects = _objects(body)
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "NodePool"] == ["gpu-p5", "cpu"]
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    (container,) = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
    assert EFA_RESOURCE not in container["resources"]["requests"]


def test_efa_true_on_an_instance_type_without_efa_is_one_line() -> None:
    with pytest.raises(ConfigError) as err:
        parse_environment("qa", {"workload": {"accelerator": "g6e.xlarge", "efa": True}})
    assert str(err.value) == (
        "environments.qa.workload.efa: True is not allowed; g6e.xlarge has no EFA interface (g6e sizes with EFA: "
        "g6e.8xlarge, g6e.12xlarge, g6e.16xlarge, g6e.24xlarge, g6e.48xlarge); choose an instance type with EFA, or "
        "leave efa unset [LLMEKS-E124]"
    )


def test_efa_true_on_a_replica_that_fits_one_node_is_one_line() -> None:
    config = parse_environment("qa", {"workload": {"accelerator": "g6e.12xlarge", "efa": True}})
    with pytest.raises(ConfigError) as err:
        build_workloads(config, plan_workloads(config))
    assert str(err.value) == (
        "environments.qa.workload.efa: True is not allowed; a replica of meta-llama/Llama-3.1-8B-Instruct fits one "
        "g6e.12xlarge: nothing crosses nodes; leave efa unset [LLMEKS-E124]"
    )


def test_a_bad_image_override_is_one_line() -> None:
    with pytest.raises(ConfigError) as err:
        parse_environment("qa", {"workload": {"image": "example.com/vllm-efa"}})
    assert str(err.value) == (
        "environments.qa.workload.image: 'example.com/vllm-efa' is not allowed; must carry a tag (repository:tag); "
        "an untagged reference means ':latest', which moves [LLMEKS-E139]"
    )


def test_the_image_override_reaches_every_pod_of_the_group() -> None:
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-efa:v0.33.0-efa1.50.0"
    config = parse_environment("largest", {**DEEPSEEK, "workload": {**DEEPSEEK["workload"], "image": image}})
    (workload,) = build_workloads(config, plan_workloads(config))
    assert isinstance(workload, VllmWorkload)
    assert workload.vllm.image == image
    assert workload.staging is not None and workload.staging.image == image


def test_an_efa_pool_without_its_placement_group_is_one_line() -> None:
    config = parse_environment("largest", DEEPSEEK)
    workloads = build_workloads(config, plan_workloads(config))
    assert efa_node_classes(workloads) == ("gpu-nvidia-p5-efa32",)
    props = NodePoolsProps(cluster_name="c", node_role_name="r", gpu_pools=(workloads[0].gpu_pool,))
    with pytest.raises(ConfigError) as err:
        NodePoolsChart(cdk8s.App(), "pools", props)
    assert str(err.value) == (
        "placement_groups: {} is not allowed; must name the cluster placement group (pg-...) of EFA node class "
        "gpu-nvidia-p5-efa32 [LLMEKS-E407]"
    )


def test_gitops_takes_the_placement_group_of_each_efa_node_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from llm_eks.cli import main

    context = tmp_path / "cdk.json"
    context.write_text(json.dumps({"context": {"environments": {"largest": DEEPSEEK}}}))
    base = ["manifests", "--env", "largest", "--context-file", str(context), "--node-role-name", "r"]
    base += ["--security-group-id", SG[0], "--weights-bucket", "weights", "--out", str(tmp_path / "out")]
    assert main([*base, "--placement-group", "gpu-nvidia-p5-efa32=pg-0abc"]) == 0
    pools = [d for d in yaml.safe_load_all((tmp_path / "out" / "01-node-pools.yaml").read_text()) if d]
    (node_class,) = [o for o in pools if o["metadata"]["name"] == "gpu-nvidia-p5-efa32"]
    assert node_class["spec"]["placementGroupSelector"] == {"id": "pg-0abc"}
    capsys.readouterr()
    assert main(base) == 2
    assert capsys.readouterr().err == (
        "llm-eks: error: placement_groups: {} is not allowed; must name the cluster placement group (pg-...) of EFA "
        "node class gpu-nvidia-p5-efa32 [LLMEKS-E407]\n"
    )
    assert main([*base, "--placement-group", "pg-0abc"]) == 2
    assert capsys.readouterr().err == (
        "llm-eks: error: --placement-group: 'pg-0abc' is not allowed; must be NODECLASS=pg-... (an EFA node class "
        "and its placement group) [LLMEKS-E601]\n"
    )
