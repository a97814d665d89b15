"""Prefill/decode pools whose replicas span nodes: the example `disaggregated`'s `wide-ep` environment (DeepSeek-V3 on
two p5.48xlarge per replica, 16 data-parallel ranks with expert parallelism) is planned disaggregated and renders
each pool as a LeaderWorkerSet, synthesized here with cdk-nag, llm-eks's checks and the upstream schemas; a
pipeline-parallel layout, which vLLM 0.33's NIXL connector cannot split, stays aggregated (auto) or is one line."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from llm_eks.cli import main
from llm_eks.error_codes import E138
from llm_eks.manifests.vllm.disaggregated import ROLE_LABEL
from llm_eks.planner import TIMES, PlanRequest, plan
from tests.coded import raises_code
from tests.kube_schema import assert_valid
from tests.test_disaggregated_serving import EXAMPLE, _context, _one, _synth
from tests.test_vllm_flags import _check, engine_flags
from tests.upstream_wheels import VLLM, extracted, missing_reason

ENV = "wide-ep"
NAME = "vllm-deepseek-v3"
PREFILL = f"{NAME}-prefill"
DEEPSEEK = "deepseek-ai/DeepSeek-V3"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
LIBFABRIC = {"backends": ["LIBFABRIC"]}


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The example's `wide-ep` environment as `cdk synth -c env=wide-ep` in its folder (fails on any finding)."""
    return _synth(_context(ENV), tmp_path_factory.mktemp("disaggregated-wide-ep"))


def _templates(objects: list[dict[str, Any]], name: str) -> dict[str, dict[str, Any]]:
    template = _one(objects, "LeaderWorkerSet", name)["spec"]["leaderWorkerTemplate"]
    return {"leader": template["leaderTemplate"], "worker": template["workerTemplate"]}


# --- The plan -------------------------------------------------------------------------------------------------------


def _wide_ep(**extra: object) -> PlanRequest:
    body: dict[str, object] = {
        "model": DEEPSEEK,
        "accelerator": "p5.48xlarge",
        "max_model_len": 16384,
        "typical_input_tokens": 8192,
        "typical_output_tokens": 256,
        "target_concurrency": 64,
        "tensor_parallel_size": 1,
        "data_parallel_size": 16,
        "enable_expert_parallel": True,
        "max_itl_ms": 60,
    }
    body.update(extra)
    return PlanRequest(**body)  # type: ignore[arg-type]


def test_a_replica_spanning_nodes_is_planned_in_engines() -> None:
    p = plan(_wide_ep())
    d = p.disaggregation
    assert p.nodes_per_replica == 2 and d is not None and d.disaggregated is not None and d.phase is not None
    assert (d.recommended, d.ratio) == ("disaggregated", "2:1")
    assert d.why.startswith("aggregated misses the targets, prefill/decode meets them ($")
    prefill, decode = d.disaggregated.pools
    assert (prefill.split, prefill.nodes_per_replica, prefill.gpus_per_replica) == ("DP16 TP1 EP16", 2, 16)
    assert (decode.split, decode.nodes_per_replica) == ("DP16 TP1 EP16", 2)
    # A request's KV is one engine's (TP1: one GPU): 61 layers x (512 + 64) latent x 2 B x 8192 prompt tokens, over
    # that GPU's share of its node's 3,200 Gbps (an upper bound), not the two nodes'.
    assert d.phase.kv_bytes_per_request == 61 * (512 + 64) * 2 * 8192
    assert (d.phase.transfer.transport, d.phase.transfer.gb_per_s, d.phase.transfer_ms) == ("efa", 50.0, 11.5)
    # 64 sequences over one decode replica's 16 engines: 4 each, a decode step under the 60 ms target.
    assert d.disaggregated.tpot_ms <= 60 < d.aggregated.tpot_ms
    assert d.kv_transfer_configs() == {
        "prefill": json.dumps(
            {"kv_connector": "NixlConnector", "kv_role": "kv_producer", "kv_connector_extra_config": LIBFABRIC},
            separators=(",", ":"),
        ),
        "decode": json.dumps(
            {"kv_connector": "NixlConnector", "kv_role": "kv_consumer", "kv_connector_extra_config": LIBFABRIC},
            separators=(",", ":"),
        ),
    }


def test_latent_attention_moves_its_kv_once_per_tp_rank() -> None:
    """MLA keeps the whole latent on every TP rank and each decode rank reads its own copy: TP2 moves twice the
    bytes, over two GPUs' share of the node (the same transfer time)."""
    d = plan(_wide_ep(tensor_parallel_size=2, data_parallel_size=8)).disaggregation
    assert d is not None and d.phase is not None
    assert d.phase.kv_bytes_per_request == 2 * 61 * (512 + 64) * 2 * 8192
    assert (d.phase.transfer.gb_per_s, d.phase.transfer_ms) == (100.0, 11.5)


def test_a_pipeline_parallel_layout_stays_aggregated_and_says_why() -> None:
    """DeepSeek-V3 as TP8 x PP2 over two p5.48xlarge: vLLM 0.33 refuses a PP > 1 KV consumer, and its pull connector
    reads only a producer's first stage."""
    tp_pp = _wide_ep(tensor_parallel_size=8, data_parallel_size=None, enable_expert_parallel=False)
    d = plan(tp_pp).disaggregation
    assert d is not None and d.recommended == "aggregated" and d.disaggregated is None
    assert d.why == (
        "TP8 PP2: vLLM 0.33's NixlConnector serves no pipeline-parallel pool: a decode engine with PP > 1 refuses to "
        "start (kv_consumer) and its reader tells a PP > 1 prefill's stages apart by TP rank only"
    )
    with raises_code(E138) as err:
        plan(_wide_ep(tensor_parallel_size=8, data_parallel_size=None, enable_expert_parallel=False,
                      disaggregation="on"))  # fmt: skip
    assert str(err.value) == (
        "workload.disaggregation: 'on' is not allowed; this plan needs TP8 PP2 on 2 node(s): vLLM 0.33's "
        "NixlConnector serves no pipeline-parallel pool: a decode engine with PP > 1 refuses to start (kv_consumer) "
        "and its reader tells a PP > 1 prefill's stages apart by TP rank only; use auto or off [LLMEKS-E138]"
    )


def test_vllm_0_33_refuses_a_pipeline_parallel_consumer_and_pulls_by_tp_rank() -> None:
    """The two facts the refusal rests on, in the pinned wheel's NIXL connector."""
    wheel = extracted(VLLM)
    if wheel is None:
        pytest.skip(missing_reason(VLLM))
    nixl = wheel / "vllm/distributed/kv_transfer/kv_connector/v1/nixl"
    base = (nixl / "base_worker.py").read_text()
    guard = base[base.index("        if self.pp_size > 1:") :]
    guard = guard[: guard.index("        # Keep heartbeat")]
    assert 'kv_role == "kv_consumer"' in guard and "raise NotImplementedError" in guard
    assert "self.dst_xfer_side_handles[engine_id][remote_tp_rank] = (" in base
    pull = (nixl / "pull_worker.py").read_text()
    assert "self._remote_agents[dst_engine_id][(0, remote_rank)]" in pull
    scheduler = (nixl / "base_scheduler.py").read_text()
    assert re.search(
        r"envs\.VLLM_NIXL_SIDE_CHANNEL_PORT\s*\+ vllm_config\.parallel_config\.data_parallel_index", scheduler
    )


def test_plan_prints_the_pools_on_their_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--env", ENV, "--context-file", str(EXAMPLE / "cdk.json")]) == 0
    out = capsys.readouterr().out
    pools = f"2{TIMES} prefill DP16 TP1 EP16 on 2 nodes + 1{TIMES} decode DP16 TP1 EP16 on 2 nodes"
    assert f"  disaggregated  {pools}: TTFT ~" in out
    assert (
        "; served so: a prefill and a decode LeaderWorkerSet (2 pods per replica) behind the gateway's endpoint picker"
        in out
    )


# --- The chart ------------------------------------------------------------------------------------------------------


def test_every_object_validates(objects: list[dict[str, Any]]) -> None:
    inference = [o for o in objects if o["metadata"].get("namespace") == "inference"]
    assert_valid([o for o in inference if o["metadata"]["name"] != "llm-eks-weights"])


def test_each_pool_is_a_leader_worker_set_of_two_node_groups(objects: list[dict[str, Any]]) -> None:
    assert not [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] in (NAME, PREFILL)]
    for name, replicas, role in ((NAME, 1, "decode"), (PREFILL, 2, "prefill")):
        spec = _one(objects, "LeaderWorkerSet", name)["spec"]
        assert (spec["replicas"], spec["leaderWorkerTemplate"]["size"]) == (replicas, 2)
        assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
        for template in _templates(objects, name).values():
            # Leaders and workers alike carry the role: the NetworkPolicies between the pools select them by it.
            assert template["metadata"]["labels"][ROLE_LABEL] == role
            assert template["metadata"]["labels"]["llm-eks.io/inference-pool"] == NAME
    # The picker's pool, and so the sidecar's allowlist of prefill hosts, holds the groups' leaders only.
    assert _one(objects, "InferencePool", NAME)["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/instance": NAME,
        WORKER_INDEX: "0",
    }
    assert _one(objects, "Service", NAME)["spec"]["selector"] == {
        "app.kubernetes.io/instance": NAME,
        ROLE_LABEL: "decode",
        WORKER_INDEX: "0",
    }
    assert _one(objects, "Service", PREFILL)["spec"]["selector"] == {
        "app.kubernetes.io/name": "vllm-prefill",
        "app.kubernetes.io/instance": NAME,
        WORKER_INDEX: "0",
    }


def test_every_pod_runs_nixl_in_its_pool_s_role_and_its_data_parallel_ranks(objects: list[dict[str, Any]]) -> None:
    for name, role, port in ((NAME, "kv_consumer", "8200"), (PREFILL, "kv_producer", "8000")):
        for kind, template in _templates(objects, name).items():
            vllm = template["spec"]["containers"][0]
            args = vllm["args"]
            assert json.loads(args[args.index("--kv-transfer-config") + 1]) == {
                "kv_connector": "NixlConnector",
                "kv_role": role,
                "kv_connector_extra_config": LIBFABRIC,
            }
            assert args[args.index("--port") + 1] == port
            assert args[args.index("--data-parallel-address") + 1] == "$(LWS_LEADER_ADDRESS)"
            assert ("--headless" in args) == (kind == "worker")
            _check(engine_flags(args))
            if kind == "worker":
                start = "--data-parallel-start-rank $((LWS_WORKER_INDEX * 8))"
                assert vllm["command"][2].endswith(f'exec vllm serve "$@" {start}')
            env = {e["name"]: e for e in vllm["env"]}
            # Each engine's side channel on its own pod's address, at 5600 + its global data-parallel rank.
            assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
            assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == "5600"
            nixl = [p["containerPort"] for p in vllm["ports"] if p["name"].startswith("nixl")]
            assert nixl == list(range(5600, 5616))
            # KV over EFA: every pod of both pools holds all 32 of its node's interfaces.
            assert vllm["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
            assert vllm["resources"]["limits"]["nvidia.com/gpu"] == "8"


def test_the_routing_sidecar_runs_on_the_decode_leader_only(objects: list[dict[str, Any]]) -> None:
    def init(name: str, kind: str) -> list[str]:
        return [c["name"] for c in _templates(objects, name)[kind]["spec"].get("initContainers", [])]

    assert init(NAME, "leader")[-1] == "routing-sidecar"
    assert "routing-sidecar" not in init(NAME, "worker")
    assert "routing-sidecar" not in init(PREFILL, "leader") + init(PREFILL, "worker")
    leader = _templates(objects, NAME)["leader"]["spec"]
    assert "sidecar-token" in [v["name"] for v in leader["volumes"]]
    assert "sidecar-token" not in [v["name"] for v in _templates(objects, NAME)["worker"]["spec"]["volumes"]]
    # The workers serve no HTTP: no probes; the leaders' vLLM is probed on its own port.
    assert "readinessProbe" not in _templates(objects, NAME)["worker"]["spec"]["containers"][0]
    assert leader["containers"][0]["readinessProbe"]["httpGet"]["port"] == "vllm"


def test_every_prefill_pod_reaches_every_decode_pod_and_back(objects: list[dict[str, Any]]) -> None:
    prefill = {"app.kubernetes.io/instance": NAME, ROLE_LABEL: "prefill"}
    decode = {"app.kubernetes.io/instance": NAME, ROLE_LABEL: "decode"}
    flows = ((f"{NAME}-prefill-from-decode", prefill, decode), (f"{NAME}-decode-from-prefill", decode, prefill))
    for policy, to, peer in flows:
        spec = _one(objects, "NetworkPolicy", policy)["spec"]
        # Leaders and workers: every GPU worker's NIXL agent reads or is read, on ports UCX picks at run time.
        assert spec == {
            "podSelector": {"matchLabels": to},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": peer}}]}],
        }
    # Within a group (and between groups of the workload): NCCL, Gloo and the data-parallel RPCs.
    assert _one(objects, "NetworkPolicy", f"{NAME}-group")["spec"]["ingress"] == [
        {"from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/instance": NAME}}}]}
    ]


def test_each_pool_scales_its_leader_worker_set_with_the_fail_safe_fallback(objects: list[dict[str, Any]]) -> None:
    for name, high, triggers in (
        (NAME, 2, ["waiting-requests", "kv-cache-usage", "held-requests"]),
        (PREFILL, 4, ["waiting-requests", "held-requests"]),
    ):
        spec = _one(objects, "ScaledObject", name)["spec"]
        assert spec["scaleTargetRef"] == {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "name": name,
        }
        assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, high)
        assert spec["fallback"] == {"failureThreshold": 3, "replicas": 1, "behavior": "currentReplicasIfHigher"}
        assert [t["name"] for t in spec["triggers"]] == triggers
        for trigger in spec["triggers"]:
            # Guarded on the LeaderWorkerSet's leader StatefulSet (named after it), as the aggregated groups are.
            ready = f'kube_statefulset_status_replicas_ready{{namespace="inference", statefulset="{name}"}}'
            assert f"or on() (sum({ready}) == 0)" in trigger["metadata"]["query"]


def test_the_node_pool_holds_both_pools_groups_at_their_largest(objects: list[dict[str, Any]]) -> None:
    pools = [o for o in objects if o["kind"] == "NodePool" and o["spec"].get("limits", {}).get("nvidia.com/gpu")]
    # replicas.max 2 decode + 4 prefill groups of 2 p5.48xlarge (8 GPUs each); no compile-cache writer across nodes.
    assert [p["spec"]["limits"]["nvidia.com/gpu"] for p in pools] == [96]


def test_a_pending_pod_of_either_pool_s_groups_is_alerted(objects: list[dict[str, Any]]) -> None:
    """LeaderWorkerSet pods are `<name>-<group>` (leaders) and `<name>-<group>-<index>` (workers), of both pools."""
    rules = _one(objects, "PrometheusRule", f"{NAME}-alerts")["spec"]["groups"]
    (pending,) = [r for g in rules for r in g["rules"] if r.get("alert") == "GpuPodsPendingTooLong"]
    assert f'pod=~"({NAME}|{PREFILL})-[0-9]+(-[0-9]+)?"' in pending["expr"]
