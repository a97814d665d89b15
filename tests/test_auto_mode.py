"""`compute: auto-mode` without a CDK synth: the plan (fee, image path, node replacement), the config refusals, EKS
Auto Mode's NodeClasses and NodePools, validated against the schema written from the EKS User Guide, and the guard
that refuses switching a deployed cluster's compute mode."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import cdk8s
import pytest

from llm_eks.catalog import auto_mode as catalog
from llm_eks.cli import main
from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.constructs.compute_guard_handler import index as guard
from llm_eks.constructs.gpu_devices import GpuDeviceSoftwareOptions, gpu_options_for
from llm_eks.error_codes import E201, E202, E207, E311
from llm_eks.errors import ConfigError
from llm_eks.infra.workloads.pools import gpu_disruption
from llm_eks.manifests.disruption import AUTO_MODE_CPU_DISRUPTION, AUTO_MODE_GPU_DISRUPTION, GPU_DISRUPTION, Disruption
from llm_eks.manifests.node_pools import (
    CpuPoolSpec,
    GpuPoolSpec,
    NodePoolsChart,
    NodePoolsProps,
    ReservedCapacity,
)
from llm_eks.planner import PlanRequest, plan
from llm_eks.planner.compare import compare
from llm_eks.planner.compute_mode import image_source_on, node_replacement
from tests.chart_helpers import by_kind_and_name
from tests.coded import raises_code
from tests.conftest import REPO_ROOT
from tests.kube_schema import assert_valid, validation_errors

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
G6E = GpuPoolSpec(
    name="gpu-g6e",
    vendor="nvidia",
    instance_family="g6e",
    instance_types=("g6e.xlarge",),
    disruption=AUTO_MODE_GPU_DISRUPTION,
)
P5_EFA = GpuPoolSpec(
    name="gpu-p5-efa32",
    vendor="nvidia",
    instance_family="p5",
    instance_types=("p5.48xlarge",),
    accelerator_limit=16,
    efa_interfaces=32,
    capacity_types=("reserved", "on-demand"),
    reservation=ReservedCapacity(tags={"purpose": "inference"}, owner_id="123456789012"),
    disruption=AUTO_MODE_GPU_DISRUPTION,
)
INF2 = GpuPoolSpec(
    name="gpu-inf2",
    vendor="neuron",
    instance_family="inf2",
    instance_types=("inf2.xlarge",),
    accelerator_limit=4,
    disruption=AUTO_MODE_GPU_DISRUPTION,
)
PROPS = NodePoolsProps(
    cluster_name="llm-eks-auto",
    node_role_name="llm-eks-auto-nodes",
    gpu_pools=(G6E, P5_EFA, INF2),
    cpu_pool=CpuPoolSpec(disruption=AUTO_MODE_CPU_DISRUPTION),
    compute="auto-mode",
    security_group_ids=("sg-0123456789abcdef0",),
    placement_groups={"gpu-nvidia-p5-efa32": "llm-eks-auto-efa"},
    tags={"team": "ml-platform"},
)


def synth(props: NodePoolsProps) -> dict[tuple[str, str], dict[str, Any]]:
    return by_kind_and_name(NodePoolsChart(cdk8s.App(), "node-pools", props).to_json())


@pytest.fixture(scope="module")
def objects() -> dict[tuple[str, str], dict[str, Any]]:
    return synth(PROPS)


# --- the plan ---------------------------------------------------------------------------------------------------


def test_the_plan_prints_auto_modes_fee_as_unknown_beside_every_price(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--model", LLAMA_8B, "--accelerator", "g6e.xlarge", "--max-model-len", "8192"]
    assert main([*argv, "--compute", "auto-mode"]) == 0
    out = capsys.readouterr().out
    lines = {line.split("  ")[0]: line for line in out.splitlines()[2:] if line and not line.startswith(" ")}
    assert lines["Instance"].endswith("$1.861/h + Auto Mode fee: unknown")
    assert lines["Cost"].endswith("$1.86/h per replica (on-demand) + Auto Mode fee: unknown")
    assert out.splitlines()[0].endswith("$1.86/h per replica (Auto Mode fee: unknown)")
    assert "restart(s) per replica per month" in lines["Node lifetime"]
    # Self-managed Karpenter: no fee, no node-lifetime row (its nodes live 30 days and change only on a deploy).
    assert main(argv) == 0
    karpenter = capsys.readouterr().out
    assert "Auto Mode" not in karpenter and "Node lifetime" not in karpenter


def test_no_page_states_a_fee_so_every_type_is_unknown_and_never_a_share_of_the_price() -> None:
    assert dict(catalog.FEE_USD_PER_HOUR) == {}
    assert catalog.fee_text("p5.48xlarge") == "Auto Mode fee: unknown"
    body = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192, compute="auto-mode"))
    assert body.to_dict()["compute"]["auto_mode_fee_usd_per_hour"] is None
    assert (
        body.cost_per_replica_hour
        == plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192)).cost_per_replica_hour
    )


def test_weekly_ami_drift_restarts_each_replica_about_four_times_a_month() -> None:
    auto = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192, compute="auto-mode"))
    karpenter = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192))
    # A new Auto Mode AMI about every 7 days drifts each node: 30 / 7 restarts a month, each the replica's cold start
    # on a node launched first (drift is graceful).
    assert auto.node_replacement.every_days == 7
    assert auto.node_replacement.restarts_per_replica_month == round(30 / 7, 2)
    assert auto.node_replacement.restart_s == auto.cold_start.total_s
    # Karpenter's 720 h expiry: one a month, and forceful (the node launch comes after the drain).
    assert karpenter.node_replacement.restarts_per_replica_month == 1
    assert karpenter.node_replacement.restart_s == karpenter.cold_start.total_s + karpenter.cold_start.node_provision_s
    # A replica spanning two nodes restarts when either of them is replaced.
    assert node_replacement("auto-mode", 2, 300, 90).restarts_per_replica_month == round(2 * 30 / 7, 2)


def test_auto_mode_pulls_with_its_own_parallel_pull_on_g_p_trn_and_plainly_on_inferentia() -> None:
    assert [image_source_on("auto-mode", "parallel-pull", f) for f in ("g6e", "p5en", "trn2", "gr6", "inf2")] == [
        "parallel-pull",
        "parallel-pull",
        "parallel-pull",
        "parallel-pull",
        "pull",
    ]
    assert image_source_on("karpenter", "snapshot", "g6e") == "snapshot"


def test_no_cold_start_path_restores_a_snapshot_on_auto_mode() -> None:
    request = PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192)
    karpenter = {c.image_source for c in plan(request).cold_start_paths}
    auto = {c.image_source for c in plan(dataclasses.replace(request, compute="auto-mode")).cold_start_paths}
    assert karpenter == {"pull", "parallel-pull", "snapshot", "headroom"}
    assert auto == {"parallel-pull", "headroom"}
    assumptions = plan(dataclasses.replace(request, compute="auto-mode")).assumptions
    assert any("no node restores an image snapshot" in a for a in assumptions)


def test_an_image_snapshot_or_a_family_auto_mode_does_not_launch_is_refused_before_planning() -> None:
    with raises_code(E207, match=r"^workload\.image_source: 'snapshot' is not allowed; needs a node data"):
        PlanRequest(model=LLAMA_8B, image_source="snapshot", compute="auto-mode")
    with raises_code(E201, match=r"^workload\.accelerator: 'g7\.2xlarge' is not allowed; g7 is not an EKS"):
        PlanRequest(model=LLAMA_8B, accelerator="g7.2xlarge", compute="auto-mode")
    with raises_code(E202, match=r"^workload\.compute: 'fargate' is not allowed; allowed: karpenter, auto"):
        PlanRequest(model=LLAMA_8B, compute="fargate")


def test_compare_on_auto_mode_lists_only_its_families_and_says_the_fee_is_unknown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    request = PlanRequest(model=LLAMA_8B, max_model_len=8192, compute="auto-mode")
    families = {r.instance_type.partition(".")[0] for r in compare(request)}
    assert families and families <= catalog.ACCELERATED_FAMILIES
    assert "g7" in {
        r.instance_type.partition(".")[0] for r in compare(dataclasses.replace(request, compute="karpenter"))
    }
    assert main(["plan", "--model", LLAMA_8B, "--max-model-len", "8192", "--compute", "auto-mode", "--compare"]) == 0
    assert "EKS Auto Mode families only, each $/h + Auto Mode fee: unknown" in capsys.readouterr().out.splitlines()[0]


def test_a_pools_grace_period_lasts_one_replica_restart_on_auto_mode() -> None:
    """Expiry is forceful: the PodDisruptionBudget can hold a second expiring node's replica only for the grace
    period, which on Auto Mode lasts the plan's scale-out (a new node and the cold start), 10 minutes at least."""
    slow = plan(
        PlanRequest(
            model="meta-llama/Llama-3.3-70B-Instruct",
            weight_format="fp8",
            max_model_len=16384,
            accelerator="p4d.24xlarge",
            compute="auto-mode",
        )
    )
    assert slow.cold_start.scale_out_s > 600
    minutes = -(-slow.cold_start.scale_out_s // 60)
    assert gpu_disruption(slow, "auto-mode", capacity_block=False).termination_grace_period == f"{minutes}m"
    assert gpu_disruption(slow, "auto-mode", capacity_block=True).termination_grace_period == "8m"
    # Self-managed Karpenter keeps its 10 minutes (its 720 h expiry is the same forceful kind, but monthly).
    assert gpu_disruption(slow, "karpenter", capacity_block=False) == GPU_DISRUPTION
    fast = plan(PlanRequest(model=LLAMA_8B, accelerator="g6e.xlarge", max_model_len=8192, compute="auto-mode"))
    assert gpu_disruption(fast, "auto-mode", capacity_block=False).termination_grace_period == "10m"


def test_the_comparison_pages_figures_are_dev_plans_on_both_modes() -> None:
    """docs/reference/compute-modes.md: dev's replica restarts a month and each restart's seconds, on both modes."""
    body = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]["environments"]["dev"]
    auto_body = {key: value for key, value in body.items() if key != "system_nodes"} | {"compute": "auto-mode"}
    ((karpenter,), (auto,)) = (plan_workloads(parse_environment("dev", b)) for b in (body, auto_body))
    k, a = karpenter.node_replacement, auto.node_replacement
    row = (
        f"| **Replica restarts a month** (dev) | {k.restarts_per_replica_month:g}, each {k.restart_s:g} s (node launch"
    )
    page = (REPO_ROOT / "docs" / "reference" / "compute-modes.md").read_text()
    assert row in page
    assert f"| ~{a.restarts_per_replica_month:.1f}, each {a.restart_s:g} s (the cold start;" in page
    in_use = [c.total_s for p in (karpenter, auto) for c in p.cold_start_paths if c.in_use]
    assert f"| **Cold start on a new node** (dev, path in use) | {in_use[0]:g} s | {in_use[1]:g} s " in page


# --- the environment's config ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"compute": "fargate"},
            "environments.e.compute: 'fargate' is not allowed; must be one of karpenter, auto-mode",
        ),
        (
            {"compute": "auto-mode", "workload": {"image_snapshot_id": "snap-0123456789abcdef0"}},
            "environments.e.workload.image_snapshot_id: 'snap-0123456789abcdef0' is not allowed; needs a node data "
            "volume restored from the snapshot, which EKS Auto Mode cannot give",
        ),
        (
            {"compute": "auto-mode", "system_nodes": {"min_size": 4, "desired_size": 4}},
            "environments.e.system_nodes: ",
        ),
        (
            {"compute": "auto-mode", "alpha_features": {"node-repair": "GPU faults"}},
            "environments.e.alpha_features.node-repair: 'GPU faults' is not allowed; it is self-managed Karpenter's",
        ),
    ],
)
def test_what_auto_mode_cannot_do_is_refused_in_one_line(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_environment("e", body)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_compute_defaults_to_self_managed_karpenter_and_reaches_the_plan() -> None:
    assert parse_environment("e", {}).compute == "karpenter"
    config = parse_environment("e", {"compute": "auto-mode", "workload": {"max_model_len": 8192}})
    assert config.workload.plan_request(config.compute).compute == "auto-mode"


# --- NodeClasses and NodePools ---------------------------------------------------------------------------------


def test_node_classes_are_auto_modes_and_every_object_is_valid(objects: dict[tuple[str, str], Any]) -> None:
    classes = {name: obj for (kind, name), obj in objects.items() if kind == "NodeClass"}
    # Auto Mode's built-in NodeClass is `default`: the CPU pool's own is `cpu`.
    assert set(classes) == {"gpu-nvidia", "gpu-nvidia-p5-efa32", "neuron", "cpu"}
    assert {obj["apiVersion"] for obj in classes.values()} == {"eks.amazonaws.com/v1"}
    assert not [kind for kind, _ in objects if kind == "EC2NodeClass"]
    gpu = classes["gpu-nvidia"]["spec"]
    assert gpu["role"] == "llm-eks-auto-nodes"
    assert gpu["ephemeralStorage"] == {"size": "200Gi", "iops": 16000, "throughput": 1000}
    assert gpu["networkPolicy"] == "DefaultAllow"
    assert gpu["tags"] == {"llm-eks.io/node-class": "gpu-nvidia", "team": "ml-platform"}
    # Nothing of an AMI, user data or block devices: Auto Mode takes none.
    assert not {"amiSelectorTerms", "userData", "blockDeviceMappings", "metadataOptions"} & set(gpu)
    assert_valid(list(objects.values()))


def test_node_pools_reference_auto_modes_node_class_with_its_labels(objects: dict[tuple[str, str], Any]) -> None:
    for name, node_class in (("gpu-g6e", "gpu-nvidia"), ("gpu-inf2", "neuron"), ("cpu", "cpu")):
        template = objects[("NodePool", name)]["spec"]["template"]["spec"]
        assert template["nodeClassRef"] == {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": node_class}
        keys = [r["key"] for r in template["requirements"]]
        assert "kubernetes.io/os" not in keys and not [k for k in keys if k.startswith("karpenter.k8s.aws/")]
        # 20 days: inside Auto Mode's 21-day cap, so the pool's own expiry and grace period decide.
        assert template["expireAfter"] == "480h"
    g6e = objects[("NodePool", "gpu-g6e")]["spec"]["template"]["spec"]["requirements"]
    assert {"key": "eks.amazonaws.com/instance-family", "operator": "In", "values": ["g6e"]} in g6e
    cpu = objects[("NodePool", "cpu")]["spec"]["template"]["spec"]["requirements"]
    assert {"key": "eks.amazonaws.com/instance-category", "operator": "In", "values": ["c", "m", "r"]} in cpu


def test_efa_and_reservations_go_through_the_node_class(objects: dict[tuple[str, str], Any]) -> None:
    spec = objects[("NodeClass", "gpu-nvidia-p5-efa32")]["spec"]
    interfaces = spec["advancedNetworking"]["networkInterfaces"]
    # The primary interface carries a /28 for the node's pods: Auto Mode adds no address after launch.
    assert interfaces[0] == {
        "networkCardIndex": 0,
        "deviceIndex": 0,
        "interfaceType": "interface",
        "secondaryIPv4PrefixCount": 1,
    }
    assert [i["interfaceType"] for i in interfaces].count("efa-only") == 32
    assert spec["advancedNetworking"]["associatePublicIPAddress"] is False
    assert spec["placementGroupSelector"] == {"name": "llm-eks-auto-efa"}
    # Auto Mode names the owning account `owner` (Karpenter's EC2NodeClass: `ownerID`).
    assert spec["capacityReservationSelectorTerms"] == [{"tags": {"purpose": "inference"}, "owner": "123456789012"}]


def test_the_node_class_schema_refuses_what_auto_mode_does_not_document(objects: dict[tuple[str, str], Any]) -> None:
    node_class = objects[("NodeClass", "gpu-nvidia")]
    for field, value in (
        ("amiSelectorTerms", [{"alias": "bottlerocket@latest"}]),
        ("userData", "[settings]"),
        ("blockDeviceMappings", []),
    ):
        bad = {**node_class, "spec": {**node_class["spec"], field: value}}
        assert validation_errors(bad), field
    slow = {**node_class, "spec": {**node_class["spec"], "ephemeralStorage": {"size": "200Gi", "iops": 100}}}
    assert validation_errors(slow) == [
        "NodeClass/gpu-nvidia: spec.ephemeralStorage.iops: 100 is less than the minimum of 3000"
    ]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"ami_family": "al2023"}, "ami_family: 'al2023' is not allowed; EKS Auto Mode picks the node AMI"),
        ({"ami_version": "v1.65.0"}, "ami_version: 'v1.65.0' is not allowed; EKS Auto Mode picks the node AMI"),
        (
            {"image_snapshot_id": "snap-0123456789abcdef0"},
            "image_snapshot_id: 'snap-0123456789abcdef0' is not allowed; EKS Auto Mode's NodeClass takes no block",
        ),
        ({"parallel_image_pull": False}, "parallel_image_pull: False is not allowed; EKS Auto Mode configures"),
        ({"tags": {"eks.amazonaws.com/owner": "me"}}, "tags.eks.amazonaws.com/owner: 'me' is not allowed; uses a tag"),
        (
            {"gpu_pools": (dataclasses.replace(G6E, disruption=Disruption(expire_after="720h")),)},
            "gpu_pools[0].disruption.expire_after: '720h' is not allowed; EKS Auto Mode replaces every node at 21 days",
        ),
    ],
)
def test_what_auto_mode_refuses_of_the_node_pools(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        synth(dataclasses.replace(PROPS, placement_groups={}, **{"gpu_pools": (G6E,), **changes}))


def test_auto_modes_nodes_bring_their_own_device_plugins() -> None:
    options = gpu_options_for(PROPS)
    assert options.managed_device_plugins and options.nvidia and options.neuron and options.efa
    with raises_code(E311, match=r"^neuron_scheduler: True is not allowed; the Neuron scheduler extension"):
        GpuDeviceSoftwareOptions(neuron=True, neuron_scheduler=True, managed_device_plugins=True).validate()


# --- switching compute on a deployed cluster ---------------------------------------------------------------------

EVENT = {
    "RequestType": "Update",
    "ResponseURL": "https://cloudformation-custom-resource-response.example/x",
    "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/LlmEks-dev/1",
    "RequestId": "r-1",
    "LogicalResourceId": "PlatformComputeModeGuard",
    "PhysicalResourceId": "compute-mode-guard-llm-eks-dev",
    "ResourceProperties": {"ClusterName": "llm-eks-dev", "ComputeMode": "auto-mode"},
}


def respond_into(sent: list[tuple[str, dict[str, Any]]]) -> Any:
    return lambda url, body: sent.append((url, json.loads(json.dumps(body))))


def test_the_guard_refuses_a_deployed_karpenter_cluster_becoming_auto_mode() -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    body = guard.handle(EVENT, lambda name: {"name": name, "computeConfig": {"enabled": False}}, respond_into(sent))
    assert sent == [(EVENT["ResponseURL"], body)]
    assert body["Status"] == "FAILED"
    assert body["Reason"].startswith(
        "compute: karpenter -> auto-mode on the deployed cluster llm-eks-dev is refused: nodes, NodePools, load "
        "balancers and volumes would all move in one deployment"
    )
    back = {**EVENT, "ResourceProperties": {"ClusterName": "llm-eks-dev", "ComputeMode": "karpenter"}}
    refused = guard.handle(back, lambda name: {"computeConfig": {"enabled": True}}, respond_into([]))
    assert refused["Reason"].startswith("compute: auto-mode -> karpenter on the deployed cluster llm-eks-dev")


def test_the_guard_passes_a_new_cluster_the_same_mode_and_any_delete() -> None:
    assert guard.handle({**EVENT, "RequestType": "Create"}, lambda name: None, respond_into([]))["Status"] == "SUCCESS"
    same = guard.handle(EVENT, lambda name: {"computeConfig": {"enabled": True}}, respond_into([]))
    assert same["Status"] == "SUCCESS" and "runs compute auto-mode" in same["Reason"]

    def unreachable(name: str) -> dict[str, Any]:
        raise AssertionError("a delete reads nothing")

    assert guard.handle({**EVENT, "RequestType": "Delete"}, unreachable, respond_into([]))["Status"] == "SUCCESS"
