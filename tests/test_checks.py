"""Synth-time checks (issue 3, item 5): hand-made Kubernetes objects per rule, the PromQL shape parser, and the CDK
validation plugin on two tiny aws_eks_v2 apps (one that must fail `synth`, one that must pass)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_eks.manifests.checks import (
    DRAIN,
    GPU_LIMIT,
    PROMQL,
    SCHEDULING,
    Finding,
    InstanceResources,
    StaticNodeGroup,
    catalog_instance_resources,
    check_objects,
    promql_shape_problem,
    quantity,
)
from tests.kube_schema import assert_valid

NS = "inference"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


# ------------------------------------------------------------------------------------------------ object makers


def node_pool(
    name: str,
    *,
    instance_types: list[str] | None = None,
    requirements: list[dict[str, Any]] | None = None,
    taints: list[dict[str, Any]] | None = None,
    limits: dict[str, Any] | None = None,
    node_class: str = "gpu-nvidia",
) -> dict[str, Any]:
    reqs = list(requirements or [])
    if instance_types is not None:
        reqs.append({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": instance_types})
    reqs.append({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]})
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": {"llm-eks.io/node-pool": name}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class},
                "requirements": reqs,
                "taints": taints if taints is not None else [GPU_TAINT],
            },
        },
    }
    if limits is not None:
        spec["limits"] = limits
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def gpu_pool(instance_types: list[str], limit: int = 8, name: str = "gpu-g6e") -> dict[str, Any]:
    return node_pool(name, instance_types=instance_types, limits={"nvidia.com/gpu": limit})


def cpu_pool() -> dict[str, Any]:
    return node_pool(
        "cpu",
        requirements=[
            {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
            {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["5"]},
        ],
        taints=[],
        limits={"cpu": 64},
        node_class="default",
    )


def node_class(name: str, *, root_gib: int, raid0: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": "bottlerocket@v1.65.0"}],
        "role": "node-role",
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
        "blockDeviceMappings": [
            {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "4Gi", "volumeType": "gp3"}},
            {
                "deviceName": "/dev/xvdb",
                "rootVolume": True,
                "ebs": {"volumeSize": f"{root_gib}Gi", "volumeType": "gp3"},
            },
        ],
    }
    if raid0:
        spec["instanceStorePolicy"] = "RAID0"
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name}, "spec": spec}


def container(name: str = "app", *, gpus: int = 0, cpu: str = "1", memory: str = "4Gi", **extra: Any) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu, "memory": memory}
    limits: dict[str, Any] = {"memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
        limits["nvidia.com/gpu"] = str(gpus)
    return {"name": name, "image": "busybox:1.37", "resources": {"requests": requests, "limits": limits}, **extra}


def vllm_container(*, shutdown: str | None = "--shutdown-timeout", seconds: int = 90, pre_stop: int = 15) -> dict:
    args = ["meta-llama/Llama-3.1-8B-Instruct", "--port", "8000"]
    if shutdown == "--shutdown-timeout":
        args += ["--shutdown-timeout", str(seconds)]
    elif shutdown is not None:
        args.append(f"{shutdown}={seconds}")
    return container(
        "vllm",
        gpus=1,
        cpu="3",
        memory="20Gi",
        image="vllm/vllm-openai:v0.33.0",
        command=["vllm", "serve"],
        args=args,
        lifecycle={"preStop": {"sleep": {"seconds": pre_stop}}},
    )


def pod_spec(
    containers: list[dict[str, Any]],
    *,
    pool: str | None = "gpu-g6e",
    tolerate_gpu: bool = True,
    grace: int | None = 110,
    **extra: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers, **extra}
    if pool is not None:
        spec["nodeSelector"] = {"llm-eks.io/node-pool": pool, **spec.get("nodeSelector", {})}
    if tolerate_gpu:
        spec["tolerations"] = [GPU_TOLERATION]
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return spec


def deployment(name: str, spec: dict[str, Any], replicas: int = 1) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def daemonset(name: str, cpu: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name}
    spec = {"tolerations": [{"operator": "Exists"}], "containers": [container(cpu=cpu, memory="100Mi")]}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": spec}},
    }


def scaled_object(target: str, *, max_replicas: int | None = 6, queries: dict[str, str] | None = None) -> dict:
    queries = queries if queries is not None else {"waiting": 'sum(vllm:num_requests_waiting{model_name="llama"})'}
    spec: dict[str, Any] = {
        "scaleTargetRef": {"name": target},
        "minReplicaCount": 1,
        "triggers": [
            {
                "type": "prometheus",
                "name": name,
                "metadata": {
                    "serverAddress": "http://thanos-query.monitoring.svc.cluster.local:10902",
                    "query": query,
                    "threshold": "4",
                },
            }
            for name, query in queries.items()
        ],
    }
    if max_replicas is not None:
        spec["maxReplicaCount"] = max_replicas
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": target, "namespace": NS},
        "spec": spec,
    }


def ray_service(name: str, *, head: dict[str, Any], worker: dict[str, Any], max_replicas: int, hosts: int) -> dict:
    def template(spec: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"labels": {"app.kubernetes.io/instance": name}}, "spec": spec}

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "rayClusterConfig": {
                "rayVersion": "2.60.0",
                "enableInTreeAutoscaling": True,
                "headGroupSpec": {"rayStartParams": {"num-cpus": "0"}, "template": template(head)},
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": 1,
                        "minReplicas": 1,
                        "maxReplicas": max_replicas,
                        "numOfHosts": hosts,
                        "rayStartParams": {},
                        "template": template(worker),
                    }
                ],
            }
        },
    }


def messages(findings: list[Finding], rule: str | None = None) -> list[str]:
    return [str(f) for f in findings if rule is None or f.rule == rule]


def run(objects: list[dict[str, Any]], **kwargs: Any) -> list[Finding]:
    return check_objects(objects, instance_resources=catalog_instance_resources, **kwargs)


def test_hand_made_objects_are_valid_kubernetes() -> None:
    head = pod_spec([container("ray-head")], pool="cpu", tolerate_gpu=False)
    objects = [
        gpu_pool(["g6e.12xlarge"]),
        cpu_pool(),
        node_class("gpu-nvidia", root_gib=200, raid0=True),
        deployment("vllm-llama", pod_spec([vllm_container()])),
        daemonset("agent", "100m"),
        scaled_object("vllm-llama"),
        ray_service("ray", head=head, worker=pod_spec([container(gpus=1)]), max_replicas=2, hosts=2),
        prometheus_rule("max(vllm:num_requests_waiting) > 5"),
        dashboard({"panels": [{"title": "x", "targets": [{"expr": "sum(vllm:num_requests_running)"}]}]}),
    ]
    assert_valid(objects)


# ------------------------------------------------------------------------------------------------- SCHEDULING


def test_pod_placed_on_a_pool_with_big_enough_instances_passes() -> None:
    objects = [gpu_pool(["g6e.12xlarge"]), cpu_pool(), deployment("vllm-llama", pod_spec([container(gpus=4)]))]
    assert run(objects) == []


def test_too_many_gpus_for_the_pools_instance_type() -> None:
    objects = [gpu_pool(["g6e.xlarge"]), cpu_pool(), deployment("vllm-llama", pod_spec([container(gpus=4)]))]
    assert messages(run(objects)) == [
        "[SCHEDULING] Deployment/inference/vllm-llama: no NodePool can run this pod (gpu-g6e: needs 4 nvidia.com/gpu "
        "but g6e.xlarge has 1); Karpenter would leave it Pending. Fix: set workload.accelerator to an instance type "
        "with at least 4 nvidia.com/gpu (and allow it in NodePool gpu-g6e) or lower the tensor-parallel size"
    ]


def test_several_allowed_types_name_the_largest() -> None:
    objects = [gpu_pool(["g6e.xlarge", "g6e.12xlarge"]), deployment("vllm", pod_spec([container(gpus=8)]))]
    assert [f.problem for f in run(objects)] == [
        "no NodePool can run this pod (gpu-g6e: needs 8 nvidia.com/gpu but the largest allowed type, g6e.12xlarge, "
        "has 4); Karpenter would leave it Pending"
    ]


def test_missing_toleration_points_at_the_gpu_pool_not_the_cpu_pool() -> None:
    spec = pod_spec([container(gpus=1)], pool=None, tolerate_gpu=False)
    objects = [gpu_pool(["g6e.xlarge"]), cpu_pool(), deployment("vllm", spec)]
    assert messages(run(objects)) == [
        "[SCHEDULING] Deployment/inference/vllm: no NodePool can run this pod (gpu-g6e: does not tolerate taint "
        "nvidia.com/gpu=true:NoSchedule); Karpenter would leave it Pending. Fix: add a toleration for "
        "nvidia.com/gpu=true:NoSchedule (llm_eks.manifests.node_pools.workload_placement returns it)"
    ]


def test_custom_label_the_pool_does_not_set_never_matches() -> None:
    spec = pod_spec([container(gpus=1)], nodeSelector={"team": "search"})
    objects = [gpu_pool(["g6e.xlarge"]), deployment("vllm", spec)]
    assert messages(run(objects)) == [
        "[SCHEDULING] Deployment/inference/vllm: no NodePool can run this pod (gpu-g6e: the pod requires team In "
        "[search] but the pool neither sets nor requires team); Karpenter would leave it Pending. Fix: remove team "
        "from the pod's nodeSelector/affinity or add it to NodePool gpu-g6e's labels"
    ]


def test_conflicting_pool_label() -> None:
    objects = [gpu_pool(["g6e.xlarge"]), deployment("vllm", pod_spec([container(gpus=1)], pool="gpu-g5"))]
    assert [f.problem for f in run(objects)] == [
        "no NodePool can run this pod (gpu-g6e: the pod requires llm-eks.io/node-pool In [gpu-g5] but the pool has "
        "llm-eks.io/node-pool In [gpu-g6e]); Karpenter would leave it Pending"
    ]


def test_well_known_labels_need_not_be_set_by_the_pool_but_must_match_the_instance() -> None:
    def with_selector(selector: dict[str, str]) -> list[Finding]:
        spec = pod_spec([container(gpus=1)])
        spec["nodeSelector"].update(selector)
        return run([gpu_pool(["g6e.xlarge", "g6e.12xlarge"]), deployment("vllm", spec)])

    # Karpenter fills in zone, capacity type and the instance labels itself.
    ok = {"topology.kubernetes.io/zone": "us-east-1a", "karpenter.k8s.aws/instance-gpu-name": "l40s"}
    assert with_selector(ok) == []
    assert with_selector({"karpenter.k8s.aws/instance-gpu-count": "4"}) == []
    assert [f.problem for f in with_selector({"karpenter.k8s.aws/instance-gpu-count": "8"})] == [
        "no NodePool can run this pod (gpu-g6e: no allowed instance type matches the requirements (g6e.12xlarge has "
        "karpenter.k8s.aws/instance-gpu-count=4; g6e.xlarge has karpenter.k8s.aws/instance-gpu-count=1)); Karpenter "
        "would leave it Pending"
    ]
    # A deprecated key is normalized the way Karpenter does it.
    assert [f.problem for f in with_selector({"beta.kubernetes.io/instance-type": "p5.48xlarge"})] == [
        "no NodePool can run this pod (gpu-g6e: the pod requires node.kubernetes.io/instance-type In [p5.48xlarge] "
        "but the pool has node.kubernetes.io/instance-type In [g6e.12xlarge, g6e.xlarge]); Karpenter would leave it "
        "Pending"
    ]


def test_required_affinity_terms_are_ored_and_operators_follow_karpenter() -> None:
    def affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
                }
            }
        }

    def findings(*terms: list[dict[str, Any]]) -> list[Finding]:
        spec = pod_spec([container(cpu="1")], pool=None, tolerate_gpu=False, affinity=affinity(*terms))
        return run([cpu_pool(), deployment("web", spec)])

    gen = "karpenter.k8s.aws/instance-generation"
    # The pool allows generation > 5; Lt 5 cannot overlap, Gt 6 can.
    assert [f.problem for f in findings([{"key": gen, "operator": "Lt", "values": ["5"]}])] == [
        f"no NodePool can run this pod (cpu: the pod requires {gen} Exists <=4 but the pool has {gen} Exists >=6); "
        "Karpenter would leave it Pending"
    ]
    assert findings([{"key": gen, "operator": "Gt", "values": ["6"]}]) == []
    # The first term fails, the second matches: Karpenter relaxes to it.
    assert (
        findings([{"key": gen, "operator": "Lt", "values": ["5"]}], [{"key": gen, "operator": "In", "values": ["7"]}])
        == []
    )
    # An unset custom key is fine with NotIn / DoesNotExist, not with Exists.
    assert findings([{"key": "team", "operator": "NotIn", "values": ["a"]}]) == []
    assert findings([{"key": "team", "operator": "DoesNotExist"}]) == []
    assert [f.fix for f in findings([{"key": "team", "operator": "Exists"}])] == [
        "remove team from the pod's nodeSelector/affinity or add it to NodePool cpu's labels"
    ]


def test_tolerations_follow_kubernetes_matching() -> None:
    taints = [
        {"key": "dedicated", "value": "llm", "effect": "NoSchedule"},
        {"key": "soft", "value": "x", "effect": "PreferNoSchedule"},  # relaxed by Karpenter
        {"key": "tier", "value": "3", "effect": "NoExecute"},
    ]
    pool = node_pool("p", instance_types=["m7i.xlarge"], taints=taints, node_class="default")

    def findings(tolerations: list[dict[str, Any]]) -> list[str]:
        spec = pod_spec([container()], pool="p", tolerate_gpu=False, tolerations=tolerations)
        return [f.problem for f in run([pool, deployment("web", spec)])]

    assert findings([{"operator": "Exists"}]) == []
    assert findings([{"key": "dedicated", "operator": "Exists"}, {"key": "tier", "operator": "Gt", "value": "2"}]) == []
    assert findings([{"key": "dedicated", "value": "llm"}, {"key": "tier", "operator": "Lt", "value": "3"}]) == [
        "no NodePool can run this pod (p: does not tolerate taint tier=3:NoExecute); Karpenter would leave it Pending"
    ]
    assert findings(
        [{"key": "dedicated", "value": "other"}, {"key": "tier", "operator": "Exists", "effect": "NoExecute"}]
    ) == [
        "no NodePool can run this pod (p: does not tolerate taint dedicated=llm:NoSchedule); Karpenter would leave it "
        "Pending"
    ]


def test_cpu_and_memory_must_fit_allocatable_after_daemonsets() -> None:
    # g6e.xlarge: Karpenter's allocatable is 3920m CPU and 29,317 MiB.
    pool = gpu_pool(["g6e.xlarge"])
    fits = deployment("vllm", pod_spec([container(gpus=1, cpu="3", memory="28Gi")]))
    assert run([pool, fits]) == []
    assert messages(run([pool, fits, daemonset("agent", "1")])) == [
        "[SCHEDULING] Deployment/inference/vllm: no NodePool can run this pod (gpu-g6e: needs 3 cpu plus 1 cpu for "
        "DaemonSets but g6e.xlarge has allocatable 3.92); Karpenter would leave it Pending. Fix: lower the pod's cpu "
        "request to at most 2.92 cpu or allow a larger instance type in NodePool gpu-g6e"
    ]
    too_big = deployment("vllm", pod_spec([container(gpus=1, cpu="2", memory="30Gi")]))
    assert [f.problem for f in run([pool, too_big])] == [
        "no NodePool can run this pod (gpu-g6e: needs 30Gi memory but g6e.xlarge has allocatable 28.6Gi); Karpenter "
        "would leave it Pending"
    ]


def test_ephemeral_storage_is_checked_against_the_node_class() -> None:
    spec = pod_spec([container(gpus=1, cpu="2", memory="8Gi")])
    spec["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "300Gi"
    workload = deployment("vllm", spec)
    # RAID0 instance store: g6e.xlarge's 250 GB of NVMe is 232.8Gi; less 1Gi kube-reserved and 10 % (23.3Gi) for
    # eviction: 208.5Gi.
    nvme = node_class("gpu-nvidia", root_gib=500, raid0=True)
    assert [f.problem for f in run([gpu_pool(["g6e.xlarge"]), nvme, workload])] == [
        "no NodePool can run this pod (gpu-g6e: needs 300Gi ephemeral-storage but g6e.xlarge has allocatable "
        "208.5Gi); Karpenter would leave it Pending"
    ]
    # Without RAID0 the root (data) volume counts: 500Gi less 1Gi and 10 %.
    assert run([gpu_pool(["g6e.xlarge"]), node_class("gpu-nvidia", root_gib=500, raid0=False), workload]) == []


def test_pool_without_instance_types_is_judged_by_what_its_family_offers() -> None:
    spec = pod_spec([container(gpus=1)], pool="cpu", tolerate_gpu=False)
    assert messages(run([cpu_pool(), deployment("vllm", spec)])) == [
        "[SCHEDULING] Deployment/inference/vllm: no NodePool can run this pod (cpu: offers no nvidia.com/gpu "
        "(karpenter.k8s.aws/instance-category In [c, m, r])); Karpenter would leave it Pending. Fix: select a "
        "NodePool whose instance types provide nvidia.com/gpu"
    ]
    family_pool = node_pool(
        "gpu-any",
        requirements=[{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g6e", "p5"]}],
    )
    assert run([family_pool, deployment("vllm", pod_spec([container(gpus=8)], pool="gpu-any"))]) == []


def test_static_node_groups_use_kube_scheduler_label_semantics() -> None:
    system = StaticNodeGroup(
        "system",
        labels={"llm-eks.io/node-role": "system"},
        taints=({"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"},),
        instance_types=("m7i.xlarge",),
        capacity_type="ON_DEMAND",
    )
    head = pod_spec([container("ray-head", cpu="2", memory="8Gi")], pool=None, tolerate_gpu=False)
    head["nodeSelector"] = {"llm-eks.io/node-role": "system", "eks.amazonaws.com/capacityType": "ON_DEMAND"}
    worker = pod_spec([container("ray-worker", gpus=1)])
    ray = ray_service("ray-qwen", head=head, worker=worker, max_replicas=1, hosts=1)
    assert messages(run([gpu_pool(["g6e.xlarge"]), ray], static_nodes=[system])) == [
        "[SCHEDULING] RayService/inference/ray-qwen: head: no NodePool or node group can run this pod (node group "
        "system: does not tolerate taint CriticalAddonsOnly=true:NoSchedule); it would stay Pending. Fix: add a "
        "toleration for CriticalAddonsOnly=true:NoSchedule (llm_eks.manifests.node_pools.workload_placement returns it)"
    ]
    head["tolerations"] = [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert run([gpu_pool(["g6e.xlarge"]), ray], static_nodes=[system]) == []
    # A Karpenter instance label is never on a managed node group's nodes.
    head["nodeSelector"]["karpenter.k8s.aws/instance-family"] = "m7i"
    assert [f.problem for f in run([gpu_pool(["g6e.xlarge"]), ray], static_nodes=[system])] == [
        "head: no NodePool or node group can run this pod (node group system: the pod requires "
        "karpenter.k8s.aws/instance-family In [m7i] but its nodes have no label karpenter.k8s.aws/instance-family); "
        "it would stay Pending"
    ]


def test_scheduling_is_skipped_without_any_known_capacity() -> None:
    assert run([deployment("vllm", pod_spec([container(gpus=64)]))]) == []


def test_unknown_instance_types_are_assumed_to_fit() -> None:
    objects = [gpu_pool(["x9.huge"], limit=1000), deployment("vllm", pod_spec([container(gpus=64)]))]
    assert run(objects) == []
    # No instance_resources: no sizing.
    assert check_objects([gpu_pool(["g6e.xlarge"], limit=1000), objects[1]]) == []


def test_custom_instance_resources() -> None:
    def lookup(name: str) -> InstanceResources | None:
        return (
            InstanceResources(vcpus=8, memory_gib=32, accelerators={"nvidia.com/gpu": 2}) if name == "x9.huge" else None
        )

    objects = [gpu_pool(["x9.huge"]), deployment("vllm", pod_spec([container(gpus=4, cpu="7", memory="30Gi")]))]
    # Karpenter's formula: 8000m - 60 - 10 - 10 - 10 = 7910m; 32768 MiB - 2458 (7.5 %) - 1465 - 100 = 28745 MiB.
    assert [f.problem for f in check_objects(objects, instance_resources=lookup)] == [
        "no NodePool can run this pod (gpu-g6e: needs 4 nvidia.com/gpu but x9.huge has 2); Karpenter would leave it "
        "Pending"
    ]
    assert InstanceResources(vcpus=8, memory_gib=32).allocatable_memory == 28745 * 2**20


def test_every_pod_template_kind_is_checked() -> None:
    worker = pod_spec([container(gpus=8)])
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws", "namespace": NS},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": {"spec": pod_spec([container(gpus=1)])},
                "workerTemplate": {"spec": worker},
            },
        },
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "bench", "namespace": NS},
        "spec": {"template": {"spec": {**pod_spec([container(gpus=8)]), "restartPolicy": "Never"}}},
    }
    ray = ray_service("ray", head=pod_spec([container()]), worker=worker, max_replicas=1, hosts=1)
    found = run([gpu_pool(["g6e.xlarge"]), lws, job, ray, daemonset("exempt", "100m")])
    assert [(f.object, f.problem.split(":")[0]) for f in found] == [
        ("LeaderWorkerSet/inference/lws", "worker"),
        ("Job/inference/bench", "no NodePool can run this pod (gpu-g6e"),
        ("RayService/inference/ray", "worker group gpu"),
    ]


# --------------------------------------------------------------------------------------------------- GPU_LIMIT


def test_max_replicas_times_gpus_must_fit_the_pool_limit() -> None:
    objects = [
        gpu_pool(["g6e.12xlarge"], limit=8),
        deployment("vllm", pod_spec([container(gpus=4)])),
        scaled_object("vllm"),
    ]
    assert messages(run(objects)) == [
        "[GPU_LIMIT] Deployment/inference/vllm: 6 replicas (ScaledObject maxReplicaCount 6) x 4 nvidia.com/gpu need "
        "24 nvidia.com/gpu but NodePool gpu-g6e allows 8 (spec.limits); replicas beyond 2 stay Pending. Fix: raise "
        'NodePool gpu-g6e\'s spec.limits["nvidia.com/gpu"] to at least 24 (workload.accelerator_limit) or lower the '
        "ScaledObject's maxReplicaCount (workload.replicas.max) to 2"
    ]
    objects[0] = gpu_pool(["g6e.12xlarge"], limit=24)
    assert run(objects) == []


def test_keda_default_max_replicas_and_spec_replicas() -> None:
    workload = deployment("vllm", pod_spec([container(gpus=1)]), replicas=3)
    pool = gpu_pool(["g6e.xlarge"], limit=8)
    assert [f.problem for f in run([pool, workload, scaled_object("vllm", max_replicas=None)])] == [
        "100 replicas (ScaledObject maxReplicaCount unset: KEDA's 100) x 1 nvidia.com/gpu need 100 nvidia.com/gpu "
        "but NodePool gpu-g6e allows 8 (spec.limits); replicas beyond 8 stay Pending"
    ]
    assert run([pool, workload]) == []  # spec.replicas 3 without an autoscaler


def test_limits_count_whole_nodes() -> None:
    # 3-GPU pods on 4-GPU nodes: each replica takes a whole g6e.12xlarge.
    objects = [
        gpu_pool(["g6e.12xlarge"], limit=8),
        deployment("vllm", pod_spec([container(gpus=3)])),
        scaled_object("vllm", max_replicas=3),
    ]
    assert [f.problem for f in run(objects)] == [
        "3 replicas (ScaledObject maxReplicaCount 3) x 3 nvidia.com/gpu need 12 nvidia.com/gpu (3 g6e.12xlarge "
        "nodes, 1 pod each) but NodePool gpu-g6e allows 8 (spec.limits); replicas beyond 2 stay Pending"
    ]


def test_ray_worker_group_counts_max_replicas_times_hosts() -> None:
    worker = pod_spec([container(gpus=4)])
    ray = ray_service(
        "ray", head=pod_spec([container()], pool="cpu", tolerate_gpu=False), worker=worker, max_replicas=3, hosts=2
    )
    assert messages(run([gpu_pool(["g6e.12xlarge"], limit=16), cpu_pool(), ray])) == [
        "[GPU_LIMIT] RayService/inference/ray: worker group gpu: 6 pods (maxReplicas 3 x numOfHosts 2) x 4 "
        "nvidia.com/gpu need 24 nvidia.com/gpu but NodePool gpu-g6e allows 16 (spec.limits); pods beyond 4 stay "
        'Pending. Fix: raise NodePool gpu-g6e\'s spec.limits["nvidia.com/gpu"] to at least 24 '
        "(workload.accelerator_limit) or lower the worker group gpu's maxReplicas to 2"
    ]


def test_workloads_sharing_a_pool_are_summed() -> None:
    objects = [
        gpu_pool(["g6e.12xlarge"], limit=8),
        deployment("a", pod_spec([container(gpus=4)])),
        scaled_object("a", max_replicas=1),
        deployment("b", pod_spec([container(gpus=4)]), replicas=2),
    ]
    assert messages(run(objects)) == [
        "[GPU_LIMIT] NodePool/gpu-g6e: the workloads it runs need 12 nvidia.com/gpu at their maximum scale "
        "(Deployment/inference/a 4, Deployment/inference/b 8) but its limit is 8; the last pods stay Pending. Fix: "
        'raise spec.limits["nvidia.com/gpu"] to at least 12 (workload.accelerator_limit) or lower the workloads\' '
        "maximum replicas"
    ]


def test_pool_without_a_gpu_limit_is_not_limited() -> None:
    pool = node_pool("gpu-g6e", instance_types=["g6e.12xlarge"], limits={"cpu": 1000})
    assert run([pool, deployment("vllm", pod_spec([container(gpus=4)])), scaled_object("vllm", max_replicas=50)]) == []


# ------------------------------------------------------------------------------------------------------- DRAIN


def vllm_findings(c: dict[str, Any], grace: int | None = 110) -> list[str]:
    return messages(run([deployment("vllm", pod_spec([c], grace=grace))]), DRAIN)


def test_drain_chain_that_fits_the_spot_notice_passes() -> None:
    assert vllm_findings(vllm_container(seconds=90, pre_stop=15)) == []
    assert vllm_findings(vllm_container(shutdown="--shutdown_timeout", seconds=60)) == []


def test_vllm_without_a_shutdown_timeout() -> None:
    assert vllm_findings(vllm_container(shutdown=None)) == [
        "[DRAIN] Deployment/inference/vllm: container vllm runs vLLM without --shutdown-timeout, so SIGTERM aborts "
        "in-flight requests (vLLM's default 0 = abort). Fix: pass --shutdown-timeout N with preStop 15 s + N below "
        "terminationGracePeriodSeconds (at most 110 s), e.g. 90"
    ]
    assert "with --shutdown-timeout 0" in vllm_findings(vllm_container(seconds=0))[0]


def test_drain_longer_than_the_grace_period() -> None:
    c = vllm_container(shutdown="--shutdown-timeout", seconds=100)
    c["lifecycle"] = {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 15"]}}}
    assert vllm_findings(c) == [
        "[DRAIN] Deployment/inference/vllm: container vllm: preStop 15 s + --shutdown-timeout 100 s = 115 s is not "
        "below terminationGracePeriodSeconds 110 s; the kubelet kills vLLM before in-flight requests finish. Fix: "
        "lower --shutdown-timeout to at most 94 or raise terminationGracePeriodSeconds above 115 (at most 110)"
    ]
    # The Kubernetes default grace period (30 s) when unset.
    assert "terminationGracePeriodSeconds 30 s" in vllm_findings(vllm_container(), grace=None)[0]


def test_grace_period_beyond_the_spot_notice() -> None:
    assert vllm_findings(vllm_container(seconds=90), grace=120) == [
        "[DRAIN] Deployment/inference/vllm: container vllm: terminationGracePeriodSeconds 120 s is above 110 s, "
        "longer than a Spot interruption leaves (2-minute notice); the node goes away mid-drain. Fix: set "
        "terminationGracePeriodSeconds to at most 110 and keep preStop + --shutdown-timeout below it"
    ]


def test_what_counts_as_a_vllm_server() -> None:
    image_only = {"name": "vllm", "image": "public.ecr.aws/x/vllm/vllm-openai:v0.33.0", "args": ["m"]}
    shell = {"name": "vllm", "image": "python:3.12", "command": ["/bin/sh", "-c", "exec vllm serve m --port 8000"]}
    api_server = {"name": "vllm", "image": "x", "command": ["python", "-m", "vllm.entrypoints.openai.api_server"]}
    bench = {"name": "bench", "image": "vllm/vllm-openai:v0.33.0", "command": ["/bin/sh", "-c", "vllm bench serve"]}
    assert len(vllm_findings(image_only)) == 1
    assert len(vllm_findings(shell)) == 1
    assert len(vllm_findings(api_server)) == 1
    assert vllm_findings(bench) == []  # the entrypoint is replaced, and `vllm bench serve` is a client
    from_env = {**shell, "command": ["/bin/sh", "-c", "vllm serve m --shutdown-timeout $TIMEOUT"]}
    assert vllm_findings(from_env) == []  # only known at run time


# ------------------------------------------------------------------------------------------------------ PROMQL


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("sum(rate(vllm:prompt_tokens_total[5m]))", None),
        ('avg(vllm:kv_cache_usage_perc{model_name="llama"})', None),
        ('sum(vllm:num_requests_waiting{model_name=~"a|b", pod!="x{y}"}) > 3', None),
        ("sum(vllm:num_requests_waiting) or vector(0)", None),
        ("sum(vllm:num_requests_waiting) / count(vllm:num_requests_running)", None),
        ("2 * max(vllm:num_requests_running) + 1", None),
        ("sum by () (vllm:num_requests_running)", None),
        ("topk(1, sum by (pod) (vllm:num_requests_waiting))", None),
        ("max(max_over_time(vllm:num_requests_waiting[10m:1m]))", None),
        ("sum(rate(vllm:generation_tokens_total[5m] offset 5m))", None),
        # A by(le)-only aggregation loses every label but le, and histogram_quantile drops le: one element.
        ("histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m])))", None),
        ("histogram_quantile(0.9, sum(rate(vllm:time_to_first_token_seconds_bucket[5m])) by (le))", None),
        (
            "histogram_quantile(0.99, sum by (le, pod) (rate(vllm:time_to_first_token_seconds_bucket[5m])))",
            "can return one element per pod; KEDA fails with 'returned multiple elements' when more than one exists",
        ),
        (
            "sum by (pod) (vllm:num_requests_waiting)",
            "can return one element per pod; KEDA fails with 'returned multiple elements' when more than one exists",
        ),
        (
            "vllm:num_requests_waiting",
            "can return one element per series; KEDA fails with 'returned multiple elements' when more than one exists",
        ),
        (
            "sum without (pod) (vllm:num_requests_waiting)",
            "can return one element per series; KEDA fails with 'returned multiple elements' when more than one exists",
        ),
        (
            "topk(3, vllm:num_requests_waiting)",
            "can return one element per series; KEDA fails with 'returned multiple elements' when more than one exists",
        ),
        (
            "sum by (le) (vllm:num_requests_waiting) / ignoring(le) sum(vllm:num_requests_running)",
            "can return one element per le; KEDA fails with 'returned multiple elements' when more than one exists",
        ),
        (
            "scalar(sum(vllm:num_requests_waiting))",
            "returns a scalar, which KEDA cannot decode (it reads the result as a list of vector samples); KEDA "
            "reports an error instead of a value",
        ),
        ("rate(vllm:prompt_tokens_total[5m])[5m:]", "returns a range vector, which KEDA reads as empty (0)"),
        # The reasons in parentheses are promql-parser's.
        ("sum(vllm:num_requests_waiting", "cannot be parsed as PromQL (unclosed left parenthesis)"),
        ('sum(x{a="b)', 'cannot be parsed as PromQL (unterminated quoted string ")'),
        # The parser type-checks like Prometheus: rate() of an instant vector is an error, not a shape.
        (
            "sum(rate(vllm:prompt_tokens_total))",
            "cannot be parsed as PromQL (expected type matrix in call to function 'rate', got vector)",
        ),
        ("sum(vllm:num_requests_waiting) atan2 1", None),
        (
            "vllm:num_requests_running * on() group_left sum(vllm:num_requests_waiting)",
            "can return one element per series; KEDA fails with 'returned multiple elements' when more than one exists",
        ),
    ],
)
def test_keda_query_shape(query: str, problem: str | None) -> None:
    assert promql_shape_problem(query) == problem


def test_keda_trigger_findings() -> None:
    so = scaled_object(
        "vllm",
        queries={
            "ok": 'sum(vllm:num_requests_waiting{model_name="llama"})',
            "per-pod": "sum by (pod) (vllm:num_requests_waiting)",
            "removed": "avg(vllm:gpu_cache_usage_perc)",
            "scalar": "scalar(sum(vllm:num_requests_running))",
        },
    )
    assert messages(run([so])) == [
        "[PROMQL] ScaledObject/inference/vllm: trigger per-pod query 'sum by (pod) (vllm:num_requests_waiting)': can "
        "return one element per pod; KEDA fails with 'returned multiple elements' when more than one exists. Fix: "
        "wrap it in sum(...) (or another aggregation without by)",
        "[PROMQL] ScaledObject/inference/vllm: trigger removed query 'avg(vllm:gpu_cache_usage_perc)': "
        "vllm:gpu_cache_usage_perc was removed from vLLM. Fix: use vllm:kv_cache_usage_perc",
        "[PROMQL] ScaledObject/inference/vllm: trigger scalar query 'scalar(sum(vllm:num_requests_running))': returns "
        "a scalar, which KEDA cannot decode (it reads the result as a list of vector samples); KEDA reports an error "
        "instead of a value. Fix: return a one-element vector: sum(...) instead of scalar(...), or vector(<scalar>)",
    ]


def test_a_keda_query_that_does_not_parse_is_one_finding() -> None:
    so = scaled_object("vllm", queries={"broken": "sum(vllm:gpu_cache_usage_perc"})
    assert messages(run([so])) == [
        "[PROMQL] ScaledObject/inference/vllm: trigger broken query 'sum(vllm:gpu_cache_usage_perc': cannot be parsed "
        "as PromQL (unclosed left parenthesis). Fix: correct the query's syntax"
    ]


def prometheus_rule(expr: str) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "vllm", "namespace": NS},
        "spec": {"groups": [{"name": "vllm", "rules": [{"alert": "VllmSlow", "expr": expr, "for": "5m"}]}]},
    }


def dashboard(body: Any) -> dict[str, Any]:
    text = body if isinstance(body, str) else json.dumps(body)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "vllm-dashboard", "namespace": NS, "labels": {"grafana_dashboard": "1"}},
        "data": {"vllm.json": text},
    }


def test_alerts_may_return_many_series_but_must_use_current_names() -> None:
    good = "histogram_quantile(0.99, sum by (le, pod) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 1"
    assert run([prometheus_rule(good)]) == []
    assert messages(run([prometheus_rule("max by (pod) (vllm:time_per_output_token_seconds_bucket) > 1")])) == [
        "[PROMQL] PrometheusRule/inference/vllm: rule VllmSlow: vllm:time_per_output_token_seconds_bucket was removed "
        "from vLLM. Fix: use vllm:inter_token_latency_seconds (or vllm:request_time_per_output_token_seconds per "
        "request)"
    ]


def test_alert_and_dashboard_exprs_must_parse() -> None:
    assert messages(run([prometheus_rule("max by (pod) (vllm:kv_cache_usage_perc) >")])) == [
        "[PROMQL] PrometheusRule/inference/vllm: rule VllmSlow: cannot be parsed as PromQL (invalid promql query). "
        "Fix: correct the query's syntax"
    ]
    # Grafana's variables are read as Grafana sends them; the names are still checked.
    board = {"panels": [{"targets": [{"expr": "topk($k, sum by ($by) (rate(vllm:prompt_tokens[$__range])))"}]}]}
    assert [f.problem for f in run([dashboard(board)])] == [
        "dashboard vllm.json: vllm:prompt_tokens is a counter and is exposed only as vllm:prompt_tokens_total"
    ]


def test_dashboard_exprs_in_nested_rows_are_checked() -> None:
    board = {
        "panels": [
            {
                "type": "row",
                "panels": [{"targets": [{"expr": "sum by (pod) (rate(vllm:prompt_tokens[$__rate_interval]))"}]}],
            },
            {"targets": [{"expr": "vllm:num_requests_running"}]},
        ]
    }
    assert messages(run([dashboard(board)])) == [
        "[PROMQL] ConfigMap/inference/vllm-dashboard: dashboard vllm.json: vllm:prompt_tokens is a counter and is "
        "exposed only as vllm:prompt_tokens_total. Fix: use a current vLLM series name "
        "(llm_eks.manifests.promql.CURRENT_VLLM_METRICS)"
    ]
    assert [f.problem for f in run([dashboard("{not json")])] == [
        "dashboard vllm.json is not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
        "(char 1))"
    ]


def test_quantities() -> None:
    assert quantity("500m") == quantity("0.5") == quantity(0.5)
    assert quantity("1Gi") == 2**30
    assert quantity("1e3") == 1000
    assert quantity("12Mi") == 12 * 2**20
    assert quantity("lots") is None


# --------------------------------------------------------------------------------------------- the CDK plugin

# What each tiny app carries: a GPU Deployment placed on a NodePool whose only instance type has 1 GPU (bad) or 4
# (good), a token in a manifest (the cluster name), and a system node group with a Ray-style head placed on it.


def _app(tmp: Path, instance_type: str) -> Any:
    import aws_cdk as cdk
    import cdk8s
    from aws_cdk import aws_ec2 as ec2

    from llm_eks.infra.checks import LlmEksChecks
    from tests.cdk_fixtures import minimal_cluster

    app = cdk.App(
        outdir=str(tmp),
        context={"@aws-cdk/core:validationReportJson": True, "@aws-cdk/core:appMode": "inmemory"},
    )
    stack = cdk.Stack(app, "Checks")
    cluster = minimal_cluster(stack)
    cluster.add_nodegroup_capacity(
        "System",
        nodegroup_name="system",
        instance_types=[ec2.InstanceType("m7i.xlarge")],
        labels={"llm-eks.io/node-role": "system"},
    )
    chart = cdk8s.Chart(cdk8s.App(), "workload", disable_resource_name_hashes=True)
    pool = gpu_pool([instance_type])
    head = pod_spec([container("head", cpu="2", memory="8Gi")], pool=None, tolerate_gpu=False)
    head["nodeSelector"] = {"llm-eks.io/node-role": "system"}
    head["containers"][0]["env"] = [{"name": "CLUSTER", "value": cluster.cluster_name}]  # a deploy-time token
    for obj in (pool, deployment("vllm-llama", pod_spec([container(gpus=4)])), deployment("head", head)):
        api = cdk8s.ApiObject(
            chart, obj["metadata"]["name"], api_version=obj["apiVersion"], kind=obj["kind"], metadata=obj["metadata"]
        )
        api.add_json_patch(cdk8s.JsonPatch.add("/spec", obj["spec"]))
    cluster.add_cdk8s_chart("workload", chart)
    cdk.Validations.of(app).add_plugins(LlmEksChecks())
    return app


@pytest.fixture(scope="module")
def bad_synth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    outdir = tmp_path_factory.mktemp("bad")
    with pytest.raises(RuntimeError) as info:  # jsii surfaces CDK's ValidationError as a RuntimeError
        _app(outdir, "g6e.xlarge").synth()
    return outdir, str(info.value)


def test_plugin_fails_synth_naming_the_deployment_and_the_fix(bad_synth: tuple[Path, str]) -> None:
    outdir, error = bad_synth
    # What `cdk synth` prints (the CLI writes the same report to stderr and exits non-zero).
    assert (
        "Deployment/inference/vllm-llama: no NodePool or node group can run this pod (gpu-g6e: needs 4 "
        "nvidia.com/gpu but g6e.xlarge has 1); it would stay Pending (llm-eks)" in error
    )
    assert (
        "Suggested fix: set workload.accelerator to an instance type with at least 4 nvidia.com/gpu (and allow it in "
        "NodePool gpu-g6e) or lower the tensor-parallel size" in error
    )
    assert "Acknowledge with 'llm-eks::SCHEDULING'" in error
    # cdk.out/validation-report.json is always written; policy-validation-report.json with the context flag.
    (current,) = json.loads((outdir / "validation-report.json").read_text())["pluginReports"]
    assert [(v["ruleName"], v["severity"]) for v in current["violations"]] == [("SCHEDULING", "error")]
    assert current["violations"][0]["description"].startswith("Deployment/inference/vllm-llama: no NodePool")
    report = json.loads((outdir / "policy-validation-report.json").read_text())
    (plugin,) = report["pluginReports"]
    assert plugin["summary"] == {"pluginName": "llm-eks", "status": "failure"}
    (violation,) = plugin["violations"]
    assert violation["ruleName"] == "SCHEDULING"
    assert violation["fix"].startswith("set workload.accelerator to an instance type with at least 4 nvidia.com/gpu")
    (resource,) = violation["violatingResources"]
    assert resource["locations"] == ["Properties/Manifest/1"]
    assert resource["constructPath"] == "Checks/Cluster/workload/Resource/Default"


def test_plugin_passes_a_good_app(tmp_path_factory: pytest.TempPathFactory) -> None:
    from llm_eks.infra.checks import kubernetes_objects, static_node_groups

    outdir = tmp_path_factory.mktemp("good")
    assembly = _app(outdir, "g6e.12xlarge").synth()
    template = json.loads((Path(assembly.directory) / "Checks.template.json").read_text())
    # The plugin saw the objects (a token rendered as a placeholder) and the managed node group.
    objects = [obj for obj, _ in kubernetes_objects(template)]
    assert [o["kind"] for o in objects] == ["NodePool", "Deployment", "Deployment"]
    (env,) = objects[2]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert re.fullmatch(r"\$\{Token\[Ref:Cluster[0-9A-F]{8}\]\}", env["value"]), env
    (system,) = static_node_groups(template)
    assert (system.name, dict(system.labels), system.instance_types, system.arch) == (
        "system",
        {"llm-eks.io/node-role": "system"},
        ("m7i.xlarge",),
        "amd64",
    )


def test_manifest_tokens_outside_strings_become_null() -> None:
    from llm_eks.infra.checks import render_manifest

    manifest = {
        "Fn::Join": [
            "",
            [
                '[{"kind":"Deployment","spec":{"replicas":',
                {"Ref": "Replicas"},
                ',"x":"a\\"',
                {"Fn::GetAtt": ["R", "Arn"]},
                '"}}]',
            ],
        ]
    }
    assert render_manifest(manifest) == [
        {"kind": "Deployment", "spec": {"replicas": None, "x": 'a"${Token[GetAtt:R.Arn]}'}}
    ]


def test_plugin_reports_each_finding_on_its_manifest_and_warns_on_unreadable_ones() -> None:
    from llm_eks.infra.checks import LlmEksChecks

    good = json.dumps([gpu_pool(["g6e.xlarge"]), deployment("vllm", pod_spec([container(gpus=4)]))])
    template = {
        "Resources": {
            "Workload": {"Type": "Custom::AWSCDK-EKS-KubernetesResource", "Properties": {"Manifest": good}},
            "Broken": {"Type": "Custom::AWSCDK-EKS-KubernetesResource", "Properties": {"Manifest": "[{"}},
        }
    }
    scheduling, unreadable = LlmEksChecks().check_template(template, "/out/S.template.json")
    assert (scheduling.rule_name, scheduling.severity, scheduling.description.split(":")[0]) == (
        "SCHEDULING",
        None,
        "Deployment/inference/vllm",
    )
    (resource,) = scheduling.violating_resources
    assert (resource.resource_logical_id, resource.locations) == ("Workload", ["Properties/Manifest/1"])
    assert (unreadable.rule_name, unreadable.severity) == ("UNREADABLE_MANIFEST", "warning")
    assert unreadable.description.startswith("the Kubernetes objects of Broken could not be read (")


def test_findings_are_frozen_one_liners() -> None:
    finding = Finding(GPU_LIMIT, "Deployment/ns/x", "too many", "fewer")
    assert (finding.message, str(finding)) == (
        "Deployment/ns/x: too many. Fix: fewer",
        "[GPU_LIMIT] Deployment/ns/x: too many. Fix: fewer",
    )
    with pytest.raises(AttributeError):
        finding.rule = SCHEDULING  # type: ignore[misc]
    found = run(
        [deployment("vllm", pod_spec([vllm_container(shutdown=None)])), scaled_object("vllm", queries={"q": "x"})]
    )
    assert [f.rule for f in found] == [DRAIN, PROMQL]
    assert all("\n" not in str(f) for f in found)


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, value in items:
        out += _paths(value, (*path, key))
    return out


_WELL_FORMED = [
    gpu_pool(["g6e.12xlarge"]),
    cpu_pool(),
    node_class("gpu-nvidia", root_gib=200, raid0=True),
    deployment("vllm", pod_spec([vllm_container()])),
    daemonset("agent", "1"),
    scaled_object("vllm"),
    ray_service("ray", head=pod_spec([container()]), worker=pod_spec([container(gpus=1)]), max_replicas=2, hosts=2),
    prometheus_rule("sum(vllm:num_requests_running)"),
    dashboard({"panels": [{"targets": [{"expr": "vllm:num_requests_running"}]}]}),
]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_malformed_field_never_raises(data: st.DataObject) -> None:
    """Users' YAML may carry a field of the wrong type: the checks read it as absent instead of crashing synth."""
    objects = copy.deepcopy(_WELL_FORMED)
    target = data.draw(st.sampled_from(objects))
    path = data.draw(st.sampled_from(_paths(target)[1:]))
    parent = target
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = data.draw(st.sampled_from([None, "x", "-1", 3, 1.5, True, [], {}, ["x"], {"x": 1}]))
    assert all(isinstance(f, Finding) for f in run(objects))


def test_objects_are_not_modified() -> None:
    objects = [gpu_pool(["g6e.xlarge"]), deployment("vllm", pod_spec([container(gpus=4)])), scaled_object("vllm")]
    before = copy.deepcopy(objects)
    run(objects)
    assert objects == before
