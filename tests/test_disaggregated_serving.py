"""A disaggregated vLLM workload on the cluster: the example `disaggregated` (synthesized here from its own cdk.json,
with cdk-nag and llm-eks's checks) renders a prefill and a decode Deployment, the routing sidecar on the decode pods,
the endpoint picker's prefill/decode profiles beside flow control, a ScaledObject per pool and the NetworkPolicies
between the pools; what the chart cannot serve disaggregated is a one-line error."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.infra.workloads import build_workloads
from llm_eks.manifests.checks import violations
from llm_eks.manifests.vllm import VllmProps, validate_vllm_props
from llm_eks.manifests.vllm.disaggregated import DISAGG_SIDECAR_IMAGE, ROLE_LABEL, Disaggregation
from tests.conftest import REPO_ROOT
from tests.kube_schema import assert_valid
from tests.test_examples import synth_example
from tests.test_gateway_picker import check_config
from tests.test_vllm_chart import base_props
from tests.test_vllm_flags import _check, engine_flags
from tests.upstream_wheels import VLLM, extracted, missing_reason

EXAMPLE = REPO_ROOT / "examples" / "disaggregated"
NAME = "vllm-llama-3-3-70b-instruct"
PREFILL = f"{NAME}-prefill"


def _synth(context: dict[str, Any], outdir: Path) -> list[dict[str, Any]]:
    return synth_example("disaggregated", context, outdir)


def _context(env: str = "rag") -> dict[str, Any]:
    """The example's context, `env` selected (`-c env=NAME`): its stack alone."""
    return {**json.loads((EXAMPLE / "cdk.json").read_text())["context"], "env": env}


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The example "disaggregated" as `cdk synth` in its folder: synth fails on any cdk-nag or llm-eks finding."""
    return _synth(_context(), tmp_path_factory.mktemp("disaggregated"))


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def test_every_object_validates(objects: list[dict[str, Any]]) -> None:
    # The weights ConfigMap carries the bucket's name as a CloudFormation token until deploy.
    inference = [o for o in objects if o["metadata"].get("namespace") == "inference"]
    assert_valid([o for o in inference if o["metadata"]["name"] != "llm-eks-weights"])


def test_two_deployments_one_per_role_in_the_workloads_pool(objects: list[dict[str, Any]]) -> None:
    decode, prefill = _one(objects, "Deployment", NAME), _one(objects, "Deployment", PREFILL)
    for deployment, role in ((decode, "decode"), (prefill, "prefill")):
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert labels[ROLE_LABEL] == role
        # Both roles' pods are in the one InferencePool the picker reads.
        pool = _one(objects, "InferencePool", NAME)["spec"]["selector"]["matchLabels"]
        assert pool.items() <= labels.items()
    # The selectors (immutable) never match each other's pods.
    assert decode["spec"]["selector"] != prefill["spec"]["selector"]
    assert prefill["spec"]["replicas"] == 4
    # In-cluster clients of the Service reach the decode pods' sidecars.
    assert _one(objects, "Service", NAME)["spec"]["selector"][ROLE_LABEL] == "decode"


def test_each_pool_runs_nixl_in_its_role_over_efa(objects: list[dict[str, Any]]) -> None:
    expected = {NAME: ("kv_consumer", 8200), PREFILL: ("kv_producer", 8000)}
    for name, (role, port) in expected.items():
        pod = _one(objects, "Deployment", name)["spec"]["template"]["spec"]
        vllm = pod["containers"][0]
        args = vllm["args"]
        assert args[args.index("--port") + 1] == str(port)
        transfer = json.loads(args[args.index("--kv-transfer-config") + 1])
        assert transfer == {
            "kv_connector": "NixlConnector",
            "kv_role": role,
            "kv_connector_extra_config": {"backends": ["LIBFABRIC"]},
        }
        _check(engine_flags(args))
        env = {e["name"]: e for e in vllm["env"]}
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == "5600"
        assert {"name": "nixl", "containerPort": 5600, "protocol": "TCP"} in vllm["ports"]
        # p5.48xlarge: 32 EFA interfaces for its 8 GPUs, all to the pod that takes the node.
        assert vllm["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
        assert vllm["readinessProbe"]["httpGet"]["port"] == ("vllm" if role == "kv_consumer" else "http")


def test_the_connector_is_registered_by_vllm_0_33() -> None:
    wheel = extracted(VLLM)
    if wheel is None:
        pytest.skip(missing_reason(VLLM))
    factory = (wheel / "vllm" / "distributed/kv_transfer/kv_connector/factory.py").read_text()
    assert re.search(r'register_connector\(\s*"NixlConnector",', factory)


def test_the_routing_sidecar_fronts_the_decode_vllm_only(objects: list[dict[str, Any]]) -> None:
    decode = _one(objects, "Deployment", NAME)["spec"]["template"]["spec"]
    sidecar = decode["initContainers"][-1]
    assert sidecar["name"] == "routing-sidecar" and sidecar["restartPolicy"] == "Always"
    assert sidecar["image"] == DISAGG_SIDECAR_IMAGE
    assert sidecar["args"] == [
        "--port=8000",
        "--model-server-port=8200",
        "--kv-connector=nixlv2",
        "--secure-proxy=false",
        "--enable-ssrf-protection=true",
        f"--inference-pool=inference/{NAME}",
    ]
    assert sidecar["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert sidecar["resources"]["requests"] == {"cpu": "250m", "memory": "256Mi"}
    assert sidecar["resources"]["limits"] == {"memory": "1Gi"}
    # Only the sidecar gets a token (vLLM never calls the API); its Role reads the pool and the pods.
    assert decode["automountServiceAccountToken"] is False
    mounts = [m["name"] for c in decode["containers"] for m in c["volumeMounts"]]
    assert "sidecar-token" not in mounts
    role = _one(objects, "Role", f"{NAME}-routing-sidecar")
    assert {r["resources"][0] for r in role["rules"]} == {"inferencepools", "pods"}
    assert all(r["verbs"] == ["get", "list", "watch"] for r in role["rules"])
    prefill = _one(objects, "Deployment", PREFILL)["spec"]["template"]["spec"]
    assert "routing-sidecar" not in [c["name"] for c in prefill.get("initContainers", [])]
    for spec in (decode, prefill):
        assert violations(spec, "restricted") == []


def test_the_picker_config_has_both_profiles_beside_flow_control(objects: list[dict[str, Any]]) -> None:
    config = yaml.safe_load(_one(objects, "ConfigMap", f"{NAME}-epp")["data"]["plugins.yaml"])
    assert check_config(config) == []
    assert config["featureGates"] == ["flowControl"] and "flowControl" in config
    plugins = {p["type"]: p.get("parameters") for p in config["plugins"]}
    assert plugins["disagg-profile-handler"] == {
        "profiles": {"prefill": "prefill", "decode": "decode"},
        "deciders": {"prefill": "prefix-based-pd-decider"},
    }
    assert plugins["prefix-based-pd-decider"] == {"nonCachedTokens": 256, "promptTokens": 0}
    profiles = {p["name"]: [ref["pluginRef"] for ref in p["plugins"]] for p in config["schedulingProfiles"]}
    assert profiles["decode"][0] == "decode-filter" and profiles["prefill"][0] == "prefill-filter"
    assert all(refs[-1] == "max-score-picker" for refs in profiles.values())


def test_each_pool_scales_on_its_own_queue_with_the_fail_safe(objects: list[dict[str, Any]]) -> None:
    decode, prefill = _one(objects, "ScaledObject", NAME), _one(objects, "ScaledObject", PREFILL)
    assert prefill["spec"]["scaleTargetRef"]["name"] == PREFILL
    for so in (decode, prefill):
        assert so["spec"]["fallback"]["behavior"] == "currentReplicasIfHigher"
        for trigger in so["spec"]["triggers"]:
            assert trigger["metadata"]["ignoreNullValues"] == "false"
    decode_triggers = {t["name"]: t["metadata"]["query"] for t in decode["spec"]["triggers"]}
    prefill_triggers = {t["name"]: t["metadata"]["query"] for t in prefill["spec"]["triggers"]}
    assert set(decode_triggers) == {"waiting-requests", "kv-cache-usage", "held-requests"}
    assert set(prefill_triggers) == {"waiting-requests", "held-requests"}
    assert (
        f'vllm:num_requests_waiting{{model_name="meta-llama/Llama-3.3-70B-Instruct", job="{PREFILL}"}}'
        in (prefill_triggers["waiting-requests"])
    )
    assert f'deployment="{PREFILL}"' in prefill_triggers["waiting-requests"]
    assert f'job="{NAME}"' in decode_triggers["kv-cache-usage"]
    # The planner's 4:1 carried to replicas.max 2.
    assert (prefill["spec"]["minReplicaCount"], prefill["spec"]["maxReplicaCount"]) == (1, 8)


def test_the_pools_reach_each_other_and_only_each_other(objects: list[dict[str, Any]]) -> None:
    to_prefill = _one(objects, "NetworkPolicy", f"{NAME}-prefill-from-decode")["spec"]
    to_decode = _one(objects, "NetworkPolicy", f"{NAME}-decode-from-prefill")["spec"]
    prefill = {"app.kubernetes.io/instance": NAME, ROLE_LABEL: "prefill"}
    decode = {"app.kubernetes.io/instance": NAME, ROLE_LABEL: "decode"}
    assert to_prefill["podSelector"]["matchLabels"] == prefill
    assert to_prefill["ingress"] == [{"from": [{"podSelector": {"matchLabels": decode}}]}]
    assert to_decode["ingress"] == [{"from": [{"podSelector": {"matchLabels": prefill}}]}]
    # The picker reaches both pools (it scrapes and picks them): the gateway's policy selects the whole pool.
    gateway = _one(objects, "NetworkPolicy", f"{NAME}-gateway")["spec"]
    assert gateway["podSelector"]["matchLabels"] == {"app.kubernetes.io/instance": NAME}


def test_the_node_pool_holds_both_pools_at_their_largest(objects: list[dict[str, Any]]) -> None:
    pools = [o for o in objects if o["kind"] == "NodePool" and o["spec"].get("limits", {}).get("nvidia.com/gpu")]
    # replicas.max 2 decode + 8 prefill, and the compile cache's writer: 11 p5.48xlarge nodes of 8 GPUs.
    assert [p["spec"]["limits"]["nvidia.com/gpu"] for p in pools] == [88]


def test_without_a_gateway_it_is_one_line(tmp_path: Path) -> None:
    context = _context()
    del context["environments"]["rag"]["gateway"]
    with pytest.raises(ConfigError) as err:
        _synth(context, tmp_path)
    assert str(err.value) == (
        "environments.rag.workload.disaggregation: 'auto' is not allowed; the plan disaggregates prefill and decode, "
        "which the gateway's endpoint picker routes (its prefill and decode profiles): add a gateway to the "
        "environment, or use disaggregation off [LLMEKS-E138]"
    )


def _props(**overrides: Any) -> VllmProps:
    d = Disaggregation(
        prefill_replicas=1,
        prefill_kv_transfer_config='{"kv_connector":"NixlConnector","kv_role":"kv_producer"}',
        decode_kv_transfer_config='{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}',
        pool="vllm-x",
    )
    return base_props(ingress=None, disaggregation=d, **overrides)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"nodes_per_replica": 2, "pipeline_parallel_size": 2},
            "disaggregation: not allowed with pipeline_parallel_size 2; vLLM 0.33's NixlConnector serves no "
            "pipeline-parallel pool (a decode engine with PP > 1 refuses to start, its reader tells a PP > 1 "
            "prefill's stages apart by TP rank only): use a TP or DP x EP layout, or disaggregation off [LLMEKS-E138]",
        ),
        (
            # One node too: the refusal is vLLM's, not the LeaderWorkerSet's.
            {"accelerators_per_pod": 2, "accelerators_per_node": 2, "pipeline_parallel_size": 2},
            "disaggregation: not allowed with pipeline_parallel_size 2; vLLM 0.33's NixlConnector serves no "
            "pipeline-parallel pool (a decode engine with PP > 1 refuses to start, its reader tells a PP > 1 "
            "prefill's stages apart by TP rank only): use a TP or DP x EP layout, or disaggregation off [LLMEKS-E138]",
        ),
        (
            {"extra_engine_args": ("--kv-transfer-config", "{}")},
            "extra_engine_args: '--kv-transfer-config' is not allowed; the chart sets it for each pool of a "
            "disaggregated workload (the plan's NIXL config) [LLMEKS-E402]",
        ),
    ],
)
def test_what_the_chart_cannot_serve_disaggregated_is_one_line(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate_vllm_props(_props(**overrides))
    assert str(err.value) == message


def test_efa_false_where_the_kv_cache_moves_over_efa_is_one_line() -> None:
    """Without EFA devices in its pods NIXL's libfabric backend cannot start, and the plan's TTFT counts the transfer
    at EFA's rate: `efa: false` on a plan that disaggregates over EFA is refused before anything is built."""
    body = _context()["environments"]["rag"]
    body["workload"]["efa"] = False
    config = parse_environment("rag", body)
    with pytest.raises(ConfigError) as err:
        build_workloads(config, plan_workloads(config))
    assert str(err.value) == (
        "environments.rag.workload.efa: False is not allowed; the plan disaggregates prefill and decode on "
        "p5.48xlarge, moving the KV cache over EFA (NIXL's libfabric backend), which needs EFA in every pod: leave "
        "efa unset, or use disaggregation off [LLMEKS-E124]"
    )
    # Served aggregated, the same workload may leave EFA off (one replica per node: nothing crosses nodes).
    body["workload"]["disaggregation"] = "off"
    config = parse_environment("rag", body)
    (workload,) = build_workloads(config, plan_workloads(config))
    assert workload.vllm.efa_interfaces == 0 and workload.vllm.disaggregation is None


def test_both_pools_run_on_efa_nodes_of_the_cluster_security_group(objects: list[dict[str, Any]]) -> None:
    """EFA's traffic needs all traffic to and from the nodes' own security group: the EKS cluster security group's
    default rules (tests/test_largest_models.py checks the stack never narrows them). Both pools' pods land on the
    one EFA pool, whose node class carries that group and nothing else."""
    pools = {_one(objects, "Deployment", n)["spec"]["template"]["spec"]["nodeSelector"]["llm-eks.io/node-pool"]
             for n in (NAME, PREFILL)}  # fmt: skip
    (pool,) = pools
    node_pool = _one(objects, "NodePool", pool)
    assert node_pool["spec"]["template"]["metadata"]["labels"]["llm-eks.io/efa"] == "true"
    node_class = _one(objects, "EC2NodeClass", node_pool["spec"]["template"]["spec"]["nodeClassRef"]["name"])
    assert node_class["spec"]["securityGroupSelectorTerms"] == [
        {"id": {"Fn::GetAtt": ["PlatformCluster6842C9C4", "ClusterSecurityGroupId"]}}
    ]
    assert len(node_class["spec"]["networkInterfaces"]) == 33


def _restore_key(deployment: dict[str, Any]) -> str:
    (restore,) = [
        c for c in deployment["spec"]["template"]["spec"]["initContainers"] if c["name"] == "restore-compile-cache"
    ]
    return str(restore["args"][restore["args"].index("--cache-key") + 1])


def test_both_pools_restore_the_one_compile_cache_its_writer_publishes(objects: list[dict[str, Any]]) -> None:
    """vLLM 0.33 hashes nothing of the KV-transfer config into its compile cache's directory (KVTransferConfig's
    compute_hash has no factors; the side channel's host is an ignored env factor), so a prefill server's compile
    serves the decode pods too: one writer, running the prefill role, whose vLLM answers /health on the port its
    publish step polls."""
    decode, prefill = _one(objects, "Deployment", NAME), _one(objects, "Deployment", PREFILL)
    key = _restore_key(prefill)
    assert _restore_key(decode) == key
    (job,) = [o for o in objects if o["kind"] == "Job" and o["metadata"]["name"].startswith(f"{NAME}-cc-")]
    (writer,) = job["spec"]["template"]["spec"]["containers"]
    script, args = writer["command"][2], writer["args"]
    assert f"--cache-key {key} " in script
    port = args[args.index("--port") + 1]
    assert f"--health http://127.0.0.1:{port}/health " in script
    transfer = json.loads(args[args.index("--kv-transfer-config") + 1])
    assert transfer["kv_role"] == "kv_producer"
    # The writer compiles with the serving pods' own engine flags and the same KV connector.
    served = _one(objects, "Deployment", PREFILL)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert engine_flags(args) == engine_flags(served)


def test_the_kv_transfer_config_is_no_factor_of_vllm_0_33_s_compile_cache() -> None:
    wheel = extracted(VLLM)
    if wheel is None:
        pytest.skip(missing_reason(VLLM))
    source = (wheel / "vllm/config/kv_transfer.py").read_text()
    body = source[source.index("    def compute_hash(self) -> str:") :]
    body = body[: body.index("\n    def ")]
    assert "factors: list[Any] = []" in body and "self." not in body.split('"""')[-1]
    envs = (wheel / "vllm/envs.py").read_text()
    ignored = envs[envs.index("def compile_factors()") :]
    assert '"VLLM_NIXL_SIDE_CHANNEL_HOST",' in ignored[: ignored.index("}")]
