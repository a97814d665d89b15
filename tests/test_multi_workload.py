"""Several workloads in one environment (`workloads`): each planned on its own, its objects in its own namespace
under its own names, GPU NodePools shared per family with the sum of their limits."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import cdk8s
import pytest
import yaml

from llm_eks.cli import main
from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.infra.charts import build_charts
from llm_eks.infra.gitops import write_manifests
from llm_eks.infra.workloads import build_workloads
from llm_eks.manifests.checks import catalog_instance_resources, check_objects
from tests.conftest import CDK_JSON, Synthesized
from tests.kube_schema import assert_valid

SG = ("sg-0123456789abcdef0",)
SMALL = {"model": "meta-llama/Llama-3.1-8B-Instruct", "accelerator": "g6e.xlarge", "replicas": {"min": 1, "max": 3}}
MID = {"model": "Qwen/Qwen3-8B", "accelerator": "g6e.xlarge", "replicas": {"min": 1, "max": 2}}


def _workloads(body: dict[str, Any]) -> tuple[Any, tuple[Any, ...]]:
    config = parse_environment("qa", body)
    return config, build_workloads(config, plan_workloads(config))


def _objects(body: dict[str, Any]) -> list[dict[str, Any]]:
    config, workloads = _workloads(body)
    charts = build_charts(cdk8s.App(), config, workloads, node_role_name="r", security_group_ids=SG, region="us-west-2")
    return [o for c in charts if c.apply for o in c.chart.to_json()]


def _error(body: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        _workloads(body)
    return str(info.value)


# -- config -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"workload": {}, "workloads": {"chat": {}}},
            "environments.qa.workload: not allowed together with workloads; move it into workloads under a name"
            " [LLMEKS-E102]",
        ),
        (
            {"workloads": {}},
            "environments.qa.workloads: {} is not allowed; must name at least one workload (or use workload for one "
            "model) [LLMEKS-E102]",
        ),
        (
            {"workloads": {"Chat": {}}},
            "environments.qa.workloads: 'Chat' is not allowed; workload names are 1-20 characters: lowercase letters, "
            "digits and '-', starting with a letter and not ending with '-' (they name the workload's namespace "
            "inference-<name>) [LLMEKS-E120]",
        ),
        (
            {
                "workloads": {
                    "chat": {"alb": {"certificate_arn": "arn:aws:acm:us-east-1:1:certificate/x", "inbound_cidrs": []}}
                }
            },
            "environments.qa.workloads.chat.alb: only allowed in the one-model `workload`; the workloads of "
            "`workloads` are reached through the environment's gateway or in-cluster through each workload's Service"
            " [LLMEKS-E140]",
        ),
        (
            {
                "workloads": {
                    "a": {"image_snapshot_id": "snap-0123456789abcdef0"},
                    "b": {"model": "Qwen/Qwen3-8B", "image_snapshot_id": "snap-0fedcba9876543210"},
                }
            },
            "environments.qa.workloads: ['snap-0123456789abcdef0', 'snap-0fedcba9876543210'] is not allowed; "
            "image_snapshot_id must be the same in every workload that gives one (GPU nodes of every workload restore "
            "the one data-volume snapshot of the node class) [LLMEKS-E120]",
        ),
        (
            {"workloads": {"chat": {"replicas": {"min": 1, "max": 0}}}},
            "environments.qa.workloads.chat.replicas.max: 0 is not allowed; must be at least replicas.min (1) and at "
            "least 1 [LLMEKS-E122]",
        ),
        (
            {"workloads": {"chat": {"max_model_len": 10**7}}},
            "environments.qa.workloads.chat.max_model_len: 10000000 is not allowed; must be an integer from 1 to "
            "131072 [LLMEKS-E202]",
        ),
    ],
)
def test_config_errors_name_the_workload(body: dict[str, Any], message: str) -> None:
    assert _error(body) == message


def test_two_workloads_may_not_answer_to_one_model_name() -> None:
    body = {"workloads": {"a": SMALL, "b": {**SMALL, "max_model_len": 4096}}}
    assert _error(body) == (
        "environments.qa.workloads.b.model: 'meta-llama/Llama-3.1-8B-Instruct' is not allowed; is already served by "
        "environments.qa.workloads.a; served model and adapter names must be unique in an environment (rename one, "
        "or drop one of the two) [LLMEKS-E120]"
    )


# -- shared capacity --------------------------------------------------------------------------------------------


def test_workloads_on_one_family_share_its_pool_with_the_sum_of_their_limits() -> None:
    objects = _objects({"workloads": {"small": SMALL, "mid": MID}})
    (pool,) = [o for o in objects if o["kind"] == "NodePool" and o["metadata"]["name"].startswith("gpu-")]
    assert pool["metadata"]["name"] == "gpu-g6e"
    assert pool["spec"]["limits"] == {"nvidia.com/gpu": 5}  # 3 + 2 replicas of one GPU each, one per node
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    assert set(deployments) == {"vllm-small", "vllm-mid"}
    for d in deployments.values():
        assert d["spec"]["template"]["spec"]["nodeSelector"]["llm-eks.io/node-pool"] == "gpu-g6e"
    # The synth-time checks (scheduling, GPU limit, drain, PromQL) hold for every workload.
    assert check_objects(objects, instance_resources=catalog_instance_resources) == []
    assert_valid(objects)


def test_the_gpu_limit_check_sums_the_workloads_of_a_shared_pool() -> None:
    objects = _objects({"workloads": {"small": SMALL, "mid": MID}})
    (pool,) = [o for o in objects if o["kind"] == "NodePool" and o["metadata"]["name"] == "gpu-g6e"]
    pool["spec"]["limits"] = {"nvidia.com/gpu": 4}  # what the larger workload alone would need, plus one
    findings = check_objects(objects, instance_resources=catalog_instance_resources)
    assert [f.rule for f in findings] == ["GPU_LIMIT"]
    assert "gpu-g6e" in findings[0].message


def test_a_dedicated_pool_keeps_its_own_limit() -> None:
    objects = _objects({"workloads": {"small": SMALL, "mid": {**MID, "dedicated_pool": True}}})
    pools = {
        o["metadata"]["name"]: o["spec"]["limits"]["nvidia.com/gpu"]
        for o in objects
        if o["kind"] == "NodePool" and o["metadata"]["name"].startswith("gpu-")
    }
    assert pools == {"gpu-g6e": 3, "gpu-g6e-mid": 2}
    (mid,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "vllm-mid"]
    assert mid["spec"]["template"]["spec"]["nodeSelector"]["llm-eks.io/node-pool"] == "gpu-g6e-mid"
    assert check_objects(objects, instance_resources=catalog_instance_resources) == []


def test_a_workload_of_one_capacity_type_is_pinned_to_it_in_a_shared_pool() -> None:
    body = {"workloads": {"small": {**SMALL, "capacity_types": ["on-demand"]}, "mid": MID}}
    objects = _objects(body)
    (pool,) = [o for o in objects if o["kind"] == "NodePool" and o["metadata"]["name"] == "gpu-g6e"]
    (types,) = [r for r in pool["spec"]["template"]["spec"]["requirements"] if r["key"] == "karpenter.sh/capacity-type"]
    assert types["values"] == ["spot", "on-demand"]
    selectors = {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]["nodeSelector"]
        for o in objects
        if o["kind"] == "Deployment"
    }
    assert selectors["vllm-small"]["karpenter.sh/capacity-type"] == "on-demand"
    assert "karpenter.sh/capacity-type" not in selectors["vllm-mid"]


def test_cluster_wide_objects_exist_once() -> None:
    """The headroom PriorityClass and the dcgm-exporter ServiceMonitor are one per cluster, whatever the count of
    workloads that need them."""
    warm = {"warm_replicas": 1}
    objects = _objects({"workloads": {"small": {**SMALL, **warm}, "mid": {**MID, **warm}}})
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "PriorityClass"] == ["llm-eks-warm-headroom"]
    # It belongs to no workload: it goes with the node pools, so removing a workload never deletes it.
    config, workloads = _workloads({"workloads": {"small": {**SMALL, **warm}, "mid": {**MID, **warm}}})
    charts = build_charts(cdk8s.App(), config, workloads, node_role_name="r", security_group_ids=SG, region="us-west-2")
    owners = [c.id for c in charts for o in c.chart.to_json() if o["kind"] == "PriorityClass"]
    assert owners == ["node-pools"]
    placeholders = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-headroom")]
    assert sorted(o["metadata"]["name"] for o in placeholders) == ["vllm-mid-headroom", "vllm-small-headroom"]
    monitors = [o for o in objects if o["kind"] == "ServiceMonitor" and o["metadata"]["name"] == "dcgm-exporter"]
    assert len(monitors) == 1
    # Each workload keeps its GPU panels, filtered to its own namespace.
    dashboards = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")]
    for board in dashboards:
        text = next(iter(board["data"].values()))
        assert "DCGM_FI_DEV_GPU_UTIL" in text and board["metadata"]["namespace"] in text


# -- the default staging environment -----------------------------------------------------------------------------


def test_staging_serves_two_models_each_in_its_own_namespace(synthesized: Synthesized) -> None:
    assert synthesized.error is None, synthesized.error
    files = {name: objs for name, objs in synthesized.manifests("staging").items() if name[:2].isdigit()}
    assert list(files) == [
        "01-node-pools.yaml",
        "02-gpu-monitoring.yaml",
        "03-qwen-ray-serve.yaml",
        "04-qwen-monitoring.yaml",
        "05-llama-vllm.yaml",
        "06-llama-autoscaling.yaml",
        "07-llama-monitoring.yaml",
        "08-gateway.yaml",
        "09-qwen-route.yaml",
        "10-llama-route.yaml",
        "11-llama-benchmark.yaml",
    ]
    for name, objs in files.items():
        match = re.match(r"\d+-(qwen|llama|gateway)", name)
        if match:
            # The gateway's tenant keys are synced in the External Secrets Operator's own namespace.
            extra = {"external-secrets"} if match.group(1) == "gateway" else set()
            # A cluster-scoped object is the Namespace itself, or the load admission policy named for its namespace.
            assert {
                o["metadata"].get("namespace", o["metadata"]["name"].removeprefix("llm-eks-load-")) for o in objs
            } == {f"inference-{match.group(1)}", *extra}, name
    every = [o for objs in files.values() for o in objs]
    keys = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in every]
    assert len(keys) == len(set(keys)), "two objects with one name"
    # The one DCGM ServiceMonitor and the GPU rules that read it belong to no workload: adding or removing one never
    # moves them.
    (dcgm,) = [o for o in every if o["kind"] == "ServiceMonitor" and o["metadata"]["name"] == "dcgm-exporter"]
    (gpu,) = [o for o in every if o["kind"] == "PrometheusRule" and o["metadata"]["name"] == "dcgm-exporter-alerts"]
    assert dcgm["metadata"]["namespace"] == gpu["metadata"]["namespace"] == "monitoring"
    assert files["02-gpu-monitoring.yaml"] == [dcgm, gpu]


def test_the_ray_head_runs_off_the_system_nodes_on_on_demand_capacity_it_keeps(synthesized: Synthesized) -> None:
    """Losing a system node never restarts the Ray cluster, and the system nodes' capacity is the controllers': the
    head runs on the CPU pool's on-demand capacity, never consolidated or drifted away (do-not-disrupt)."""
    (service,) = [o for o in synthesized.manifests("staging")["03-qwen-ray-serve.yaml"] if o["kind"] == "RayService"]
    head = service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]
    assert head["spec"]["nodeSelector"] == {"llm-eks.io/node-pool": "cpu", "karpenter.sh/capacity-type": "on-demand"}
    assert head["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    (pools,) = [synthesized.manifests("staging")["01-node-pools.yaml"]]
    cpu = [o for o in pools if o["kind"] == "NodePool" and o["metadata"]["name"] == "cpu"]
    assert cpu, "the CPU pool the head runs on"


def test_each_served_name_reaches_only_its_own_pods(synthesized: Synthesized) -> None:
    """In the cluster each model is reached through its own Service, whose selector picks that workload's pods
    only: the vLLM Service by its instance label, Ray Serve by its own (test_gateway checks the gateway's routes)."""
    objects = [o for name, objs in synthesized.manifests("staging").items() if name[:2].isdigit() for o in objs]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "vllm-llama"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--served-model-name") + 1] == "meta-llama/Llama-3.1-8B-Instruct"
    (service,) = [o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "vllm-llama"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    (ray,) = [o for o in objects if o["kind"] == "RayService"]
    assert "model_id: Qwen/Qwen3-30B-A3B" in ray["spec"]["serveConfigV2"]
    assert ray["metadata"]["namespace"] == "inference-qwen"


def test_plan_warnings_are_annotated_per_workload(templates: dict[str, Any]) -> None:
    """Each workload's manifest carries its own plan in the stack description."""
    description = templates["staging"]["Description"]
    assert description.startswith("llm-eks staging: Qwen3-30B-A3B on p5.4xlarge")
    assert "; Llama-3.1-8B-Instruct on g6e.xlarge" in description


def test_gitops_writes_the_same_objects_for_several_workloads(tmp_path: Path, synthesized: Synthesized) -> None:
    config = parse_environment("staging", CDK_JSON["context"]["environments"]["staging"])
    written = write_manifests(
        config,
        plan_workloads(config),
        tmp_path,
        node_role_name="r",
        security_group_ids=SG,
        weights_bucket="b-weights",
        # Staging's gateway trusts the cluster's own service-account tokens.
        oidc_issuer="https://oidc.eks.us-east-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE",
        # Where the tenants' keys are (the stack's own region; staging names none).
        region="us-east-1",
    )
    gitops = {
        re.sub(r"^\d+-", "", p.name).split(".")[0]: {
            (o["kind"], o["metadata"]["name"]) for o in yaml.safe_load_all(p.read_text()) if o
        }
        for p in written
    }
    stack = {
        re.sub(r"^\d+-", "", name).split(".")[0]: {(o["kind"], o["metadata"]["name"]) for o in objs}
        for name, objs in synthesized.manifests("staging").items()
        # cluster-objects.yaml: what the stack's own constructs apply (a GitOps user deploys the stack too).
        if name not in ("helm-releases.yaml", "cluster-objects.yaml")
    }
    assert gitops == stack


# -- llm-eks plan --env -----------------------------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_prints_each_workload(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "plan", "--env", "staging")
    assert code == 0
    assert re.findall(r"^workload (\w+):$", out, flags=re.MULTILINE) == ["qwen", "llama"]
    code, out, _ = _cli(capsys, "plan", "--env", "staging", "--workload", "llama", "--json")
    assert code == 0 and json.loads(out)["instance"]["instance_type"] == "g6e.xlarge"
    code, out, _ = _cli(capsys, "plan", "--env", "staging", "--json")
    assert code == 0 and list(json.loads(out)) == ["qwen", "llama"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("--workload", "mistral"),
            "llm-eks: error: --workload: 'mistral' is not allowed; must name a workload of "
            "environments.staging.workloads (qwen, llama) [LLMEKS-E601]\n",
        ),
        (("--compare",), "llm-eks: error: --compare compares one workload: add --workload KEY [LLMEKS-E600]\n"),
        (
            ("--workload", "llama", "--max-model-len", "0"),
            # An option's value keeps the option's own name, as with one workload.
            "llm-eks: error: workload.max_model_len: 0 is not allowed; must be an integer from 1 to 131072"
            " [LLMEKS-E202]\n",
        ),
    ],
)
def test_plan_errors_for_several_workloads(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    code, out, err = _cli(capsys, "plan", "--env", "staging", *argv)
    assert (code, out, err) == (2, "", message)


def test_cli_names_a_planner_error_by_its_workload_path(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    context = tmp_path / "cdk.json"
    body = {
        "workloads": {"chat": SMALL, "big": {"model": "meta-llama/Llama-3.3-70B-Instruct", "accelerator": "g5.xlarge"}}
    }
    context.write_text(json.dumps({"context": {"environments": {"qa": body}}}))
    code, out, err = _cli(capsys, "plan", "--env", "qa", "--context-file", str(context))
    assert (code, out) == (2, "") and err.startswith("llm-eks: error: environments.qa.workloads.big.accelerator: "), err
