"""A vLLM replica bigger than one node: a LeaderWorkerSet whose groups run vLLM's multiprocessing backend across
nodes, with the LeaderWorkerSet controller installed by the stack."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import aws_cdk as cdk
import cdk8s
import pytest
from aws_cdk.assertions import Template

from llm_eks.config import parse_environment
from llm_eks.errors import ConfigError
from llm_eks.infra.charts import build_charts
from llm_eks.infra.images import environment_charts
from llm_eks.infra.stack import InferenceStack
from llm_eks.infra.workloads import VllmWorkload, build_workload
from llm_eks.manifests.checks import catalog_instance_resources, check_objects
from llm_eks.manifests.vllm import VllmProps, validate_vllm_props
from tests.chart_helpers import placement_groups
from tests.environments import plan_environment
from tests.kube_schema import assert_valid

# Qwen3-235B-A22B in FP8 (235 GB of weights) does not fit one g6e.12xlarge (4x L40S, 179 GiB): the plan spans two
# nodes, TP 4 x PP 2.
# An ACM certificate for the ALB cases.
CERT = "arn:aws:acm:us-east-1:111122223333:certificate/0f6b3c1e-1234-4d5e-8f9a-0123456789ab"
BIG = {"workload": {"model": "Qwen/Qwen3-235B-A22B-FP8", "accelerator": "g6e.12xlarge", "max_model_len": 8192,
                    "replicas": {"min": 1, "max": 2}}}  # fmt: skip


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    config = parse_environment("big", BIG)
    workload = build_workload(config, plan_environment(config))
    charts = build_charts(
        cdk8s.App(),
        config,
        [workload],
        node_role_name="r",
        security_group_ids=("sg-0123456789abcdef0",),
        placement_groups=placement_groups([workload]),
    )
    return [o for c in charts if c.apply for o in c.chart.to_json()]


def _one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def _args(pod: dict[str, Any]) -> list[str]:
    return pod["spec"]["containers"][0]["args"]


def test_the_plan_spans_two_nodes() -> None:
    plan = plan_environment(parse_environment("big", BIG))
    assert (plan.nodes_per_replica, plan.tensor_parallel_size, plan.pipeline_parallel_size) == (2, 4, 2)


def test_a_leader_worker_set_replaces_the_deployment(objects: list[dict[str, Any]]) -> None:
    assert not [o for o in objects if o["kind"] == "Deployment"]
    lws = _one(objects, "LeaderWorkerSet")
    spec = lws["spec"]
    assert (spec["replicas"], spec["startupPolicy"]) == (1, "LeaderCreated")
    template = spec["leaderWorkerTemplate"]
    assert (template["size"], template["restartPolicy"]) == (2, "RecreateGroupOnPodRestart")
    leader, worker = template["leaderTemplate"], template["workerTemplate"]
    lead, work = _args(leader), _args(worker)
    # vLLM 0.33's multiprocessing multi-node flags: the leader is rank 0 and serves; a worker takes its rank from
    # LeaderWorkerSet and runs headless.
    assert lead[lead.index("--nnodes") + 1] == work[work.index("--nnodes") + 1] == "2"
    assert lead[lead.index("--node-rank") + 1] == "0" and "--headless" not in lead
    assert work[work.index("--node-rank") + 1] == "$(LWS_WORKER_INDEX)" and "--headless" in work
    assert lead[lead.index("--master-addr") + 1] == work[work.index("--master-addr") + 1] == "$(LWS_LEADER_ADDRESS)"
    assert lead[lead.index("--tensor-parallel-size") + 1] == "4"
    assert lead[lead.index("--pipeline-parallel-size") + 1] == "2"
    for pod in (leader, worker):
        resources = pod["spec"]["containers"][0]["resources"]
        assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == "4"
        (affinity,) = pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert affinity["topologyKey"] == "topology.kubernetes.io/zone"
        assert affinity["matchLabelKeys"] == ["leaderworkerset.sigs.k8s.io/group-key"]
    # Only the leader serves HTTP: the worker has no probes.
    assert "startupProbe" in leader["spec"]["containers"][0]
    assert not {"startupProbe", "readinessProbe", "livenessProbe"} & set(worker["spec"]["containers"][0])


def test_service_keda_and_pool_follow_the_groups(objects: list[dict[str, Any]]) -> None:
    service = _one(objects, "Service")
    assert service["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    scaled = _one(objects, "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"] == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": "vllm-qwen3-235b-a22b-fp8",
    }
    (pool,) = [o for o in objects if o["kind"] == "NodePool" and o["metadata"]["name"] == "gpu-g6e-efa1"]
    assert pool["spec"]["limits"] == {"nvidia.com/gpu": 16}  # 2 replicas x 2 nodes x 4 GPUs
    group = [o for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"]["name"].endswith("-group")]
    assert [p["spec"]["ingress"] for p in group] == [
        [{"from": [{"podSelector": {"matchLabels": group[0]["spec"]["podSelector"]["matchLabels"]}}]}]
    ]


def test_objects_validate_and_pass_the_synth_checks(objects: list[dict[str, Any]]) -> None:
    """The LeaderWorkerSet against the upstream CRD; scheduling, GPU limit (2 replicas x size 2 x 4 GPUs) and
    drain against the checks."""
    assert_valid(objects)
    assert check_objects(objects, instance_resources=catalog_instance_resources) == []


def test_the_gpu_limit_check_counts_every_pod_of_a_group(objects: list[dict[str, Any]]) -> None:
    (pool,) = [o for o in objects if o["kind"] == "NodePool" and o["metadata"]["name"] == "gpu-g6e-efa1"]
    pool["spec"]["limits"] = {"nvidia.com/gpu": 12}
    try:
        assert [f.rule for f in check_objects(objects, instance_resources=catalog_instance_resources)] == ["GPU_LIMIT"]
    finally:
        pool["spec"]["limits"] = {"nvidia.com/gpu": 16}


def test_the_stack_installs_the_controller_first() -> None:
    config = parse_environment("big", BIG)
    plan = plan_environment(config)
    assert environment_charts(config, [plan])["lws"] == "0.10.0"
    template = Template.from_stack(InferenceStack(cdk.App(), config, plan)).to_json()
    resources = template["Resources"]
    (lws_id,) = [k for k, r in resources.items() if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
                 and r["Properties"]["Release"] == "lws"]  # fmt: skip
    release = resources[lws_id]["Properties"]
    assert (release["Chart"], release["Repository"], release["Version"], release["Namespace"]) == (
        "lws",
        "oci://registry.k8s.io/lws/charts/lws",
        "0.10.0",
        "lws-system",
    )
    # The serving chart (id `vllm`) needs the controller's CRD and webhooks; its autoscaling chart comes after it.
    (vllm_id,) = [k for k, r in resources.items() if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
                  and k.startswith("PlatformClustervllm")]  # fmt: skip
    assert lws_id in resources[vllm_id]["DependsOn"]


def test_bad_multi_node_props_are_one_line() -> None:
    config = parse_environment("big", BIG)
    workload = build_workload(config, plan_environment(config))
    assert isinstance(workload, VllmWorkload)
    bad: VllmProps = replace(workload.vllm, accelerators_per_pod=3)
    with pytest.raises(ConfigError) as info:
        validate_vllm_props(bad)
    assert str(info.value) == (
        "accelerators_per_pod: 3 is not allowed; must equal tensor_parallel_size x pipeline_parallel_size x "
        "data_parallel_size / nodes_per_replica (8 / 2), a whole number (vLLM splits the ranks evenly over the nodes)"
        " [LLMEKS-E401]"
    )
    with_alb = parse_environment(
        "big",
        {
            "workload": {
                **BIG["workload"],
                "alb": {
                    "certificate_arn": CERT,
                    "inbound_cidrs": ["192.168.0.0/16"],
                },
            }
        },
    )
    with pytest.raises(ConfigError) as info:
        build_workload(with_alb, plan_environment(with_alb))
    assert str(info.value) == (
        "environments.big.workload.alb: not allowed here; Qwen/Qwen3-235B-A22B-FP8 needs 2 "
        "g6e.12xlarge nodes per replica (a LeaderWorkerSet, whose workers never serve); reach it through its "
        "Service, or use engine 'ray-serve' [LLMEKS-E140]"
    )
