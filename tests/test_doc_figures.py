"""The figures the pages quote from a plan, a manifest or the planner's constants, held to them: each test computes
the sentence a page must hold from the shipped environments' plans (cdk.json), their synthesized objects
(tests/golden, held to synth by tests/test_golden_output.py) or the planner, and fails when the page says otherwise.

Figures inside `console` blocks are run by tests/test_docs.py, tables in generated sections are written by docgen
(tests/test_docs.py fails while one is stale), and the verify and canary reports are re-run by tests/test_verify.py
and tests/test_rollout.py. Upstream measurements a page cites (AWS's image-pull times, vLLM's published start-up
terms) are sources, not plans, and are not held here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from benchmarks.cold_start_table import GOALS
from llm_eks.config import load_environments
from llm_eks.config.environment import EnvironmentConfig
from llm_eks.config.plans import plan_workloads
from llm_eks.planner import Plan, PlanRequest, plan
from llm_eks.planner import cold_start as cs
from llm_eks.planner.result import TIMES, tokens_text
from tests.conftest import CDK_JSON, REPO_ROOT

GOLDEN = REPO_ROOT / "tests" / "golden"
DASH = "\N{EN DASH}"


@cache
def environments() -> dict[str, EnvironmentConfig]:
    return load_environments(CDK_JSON["context"], REPO_ROOT / "models")


@cache
def plans(env: str) -> tuple[Plan, ...]:
    return plan_workloads(environments()[env])


@cache
def objects(env: str) -> tuple[dict[str, Any], ...]:
    """The environment's Kubernetes objects as synth writes them (the golden review YAML)."""
    files = sorted((GOLDEN / env / "manifests").glob("*.yaml"))
    return tuple(d for f in files if f.name != "helm-releases.yaml" for d in yaml.safe_load_all(f.read_text()) if d)


def named(env: str, kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects(env) if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def container(workload: dict[str, Any]) -> dict[str, Any]:
    spec = workload["spec"]["template"]["spec"]
    return dict(spec["containers"][0])


def quotes(page: str, *fragments: str) -> None:
    """The page holds each fragment, whatever the line breaks."""
    text = " ".join((REPO_ROOT / page).read_text().split())
    missing = [f for f in fragments if " ".join(f.split()) not in text]
    assert not missing, f"{page} no longer says (update the page from the plan): {missing}"


def arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


# -- docs/how-to/cold-start.md ------------------------------------------------------------------------------------


def test_cold_start_prose() -> None:
    dev, prod = plans("dev")[0], plans("prod")[0]

    def path(p: Plan, weights: str, image: str) -> int:
        (found,) = [c for c in p.cold_start_paths if (c.weights_source, c.image_source, c.warm_node) ==
                    (weights, image, False)]  # fmt: skip
        return int(found.total_s)

    in_use = {name: int(next(c for c in p.cold_start_paths if c.in_use).total_s) for name, p in (("dev", dev),
              ("prod", prod))}  # fmt: skip
    goals = GOALS
    weights = sorted(int(p.cold_start.weights_s) for p in (dev, prod))
    warmups = sorted(int(p.cold_start.warmup_s) for p in (dev, prod))
    snapshot = path(prod, "staged", "snapshot")
    gpus = prod.instance.accelerators
    assert round(prod.checkpoint_bytes / 1e9, -1) == 140  # the 16-bit files an fp8 start reads
    quotes(
        "docs/how-to/cold-start.md",
        "prod's 70B does not download 140 GB of 16-bit files at every start",
        f"(Hub download with a parallel pull: {path(prod, 'nvme', 'parallel-pull')} s; the path in use: "
        f"{in_use['prod']} s)",
        f"for a new node, 8B ≤ {goals['8B'][0]} s and 70B ≤ {goals['70B'][0]} s, and for a warm node 8B ≤ "
        f"{goals['8B'][1]} s and 70B ≤ {goals['70B'][1]} s",
        f"70B on a new node misses its goal by the path in use ({in_use['prod']} s, "
        f"{in_use['prod'] - goals['70B'][0]} s over: the {gpus} GPUs of prod's {prod.instance_type} add "
        f"{cs.WARMUP_PER_GPU_DOUBLING_S * math.log2(gpus):g} s of warm-up); from an image snapshot it would meet it "
        f"({snapshot} s,",
        f"the weights stream ({weights[0]}{DASH}{weights[-1]} s) and the warm-up ({warmups[0]}{DASH}{warmups[-1]} s",
    )
    # What the page says of the goals: 70B misses the new-node one by its path in use and would meet it from an image
    # snapshot; 8B misses its new-node goal, and the weights and warm-up alone exceed both warm goals.
    assert snapshot <= goals["70B"][0] < in_use["prod"] and in_use["dev"] > goals["8B"][0]
    assert dev.cold_start.weights_s + dev.cold_start.warmup_s > goals["8B"][1]
    assert prod.cold_start.weights_s + prod.cold_start.warmup_s > goals["70B"][1]


def test_cold_start_terms_are_the_planners() -> None:
    quotes(
        "docs/how-to/cold-start.md",
        f"image, pulled: {cs.IMAGE_PULL_BYTES_PER_S / 1e6:g} MB/s and in parallel "
        f"{cs.IMAGE_PARALLEL_PULL_BYTES_PER_S / 1e6:g} MB/s",
        f"image size {cs.IMAGE_COMPRESSED_BYTES / 1e9:g} GB compressed",
        f"image, snapshot: under {cs.IMAGE_SNAPSHOT_S:g} s",
        f"Run:ai streamer at {cs.NVME_READ_BYTES_PER_S / 1e9:g} GB/s capped at {cs.NETWORK_SHARE * 100:.0f} % of the "
        "instance's network",
        f"weights, Hub download: {cs.HF_DOWNLOAD_BYTES_PER_S / 1e6:g} MB/s into the instance store, then "
        f"{cs.NVME_READ_BYTES_PER_S / 1e9:g} GB/s from NVMe",
        f"warm-up: {cs.WARMUP_BASE_S} s for one GPU",
        f"the compile term ({cs.WARMUP_COMPILE_S} s of it) scales by 9/19",
        f"{cs.WARMUP_BASE_S - cs.WARMUP_COMPILE_S + round(cs.WARMUP_CACHED_COMPILE_S)} s for one GPU",
        f"Each doubling of the GPUs adds {cs.WARMUP_PER_GPU_DOUBLING_S} s (NCCL set-up, a slower compile) and each "
        f"node beyond the first {cs.WARMUP_PER_EXTRA_NODE_S} s",
        f"node: {cs.NODE_PROVISION_S} s from Karpenter's launch to a Ready GPU node",
    )


def test_warm_headroom_prose() -> None:
    dev = environments()["dev"]
    two = dataclasses.replace(dev, workload=dataclasses.replace(dev.workload, warm_replicas=2))
    (p,) = plan_workloads(two)
    quotes(
        "docs/how-to/cold-start.md",
        f"keep node(s) up: ${p.warm_headroom_usd_per_hour:.2f}/h; a scale-out then skips the "
        f"{p.cold_start.node_provision_s} s node launch and the {p.cold_start.image_pull_s} s image pull",
        f"the node launch (the plan's {cs.NODE_PROVISION_S} s figure)",
    )


# -- docs/concepts/workloads.md ---------------------------------------------------------------------------------


def test_workloads_probes_drain_and_scale_out() -> None:
    dev = plans("dev")[0]
    vllm = container(named("dev", "Deployment", "vllm-llama-3-1-8b-instruct"))
    pod = named("dev", "Deployment", "vllm-llama-3-1-8b-instruct")["spec"]["template"]["spec"]
    startup, liveness = vllm["startupProbe"], vllm["livenessProbe"]
    budget = math.ceil(dev.cold_start.startup_s * 1.5)
    assert startup["failureThreshold"] == math.ceil(budget / startup["periodSeconds"])
    pre_stop = vllm["lifecycle"]["preStop"]["sleep"]["seconds"]
    shutdown = int(arg(vllm["args"], "--shutdown-timeout"))
    grace = pod["terminationGracePeriodSeconds"]
    (ray,) = [o for o in objects("staging") if o["kind"] == "RayService"]
    worker = ray["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]
    quotes(
        "docs/concepts/workloads.md",
        f"startup `GET /health` every {startup['periodSeconds']} s with failureThreshold = ⌈1.5 {TIMES} planned "
        f"start-up / {startup['periodSeconds']}⌉ (dev: start-up {dev.cold_start.startup_s:g} s → {budget} s budget → "
        f"{startup['failureThreshold']})",
        f"liveness every {liveness['periodSeconds']} s, restart after {liveness['failureThreshold']} failures",
        f"preStop sleep {pre_stop} s + `--shutdown-timeout {shutdown}` = {pre_stop + shutdown} s < "
        f"`terminationGracePeriodSeconds` {grace} s",
        f"Ray Serve workers: preStop {worker['containers'][0]['lifecycle']['preStop']['sleep']['seconds']} s",
        f"< {worker['terminationGracePeriodSeconds']} s.",
        f"(dev: {dev.cold_start.node_provision_s} s node + {dev.cold_start.total_s:g} s to a Ready pod ≈ "
        f"{dev.cold_start.scale_out_s:g} s",
    )


def test_workloads_lora_example() -> None:
    dev = environments()["dev"].workload
    base = plan(dev.plan_request())
    request = dev.plan_request()
    with_lora = plan(dataclasses.replace(request, lora=dataclasses.replace(_lora(2), max_rank=32)))
    lora_gib = (base.kv_cache_bytes_per_gpu - with_lora.kv_cache_bytes_per_gpu) / 2**30
    quotes(
        "docs/concepts/workloads.md",
        f"dev's Llama 3.1 8B with 2 adapters at rank 32 holds {lora_gib:.2f} GiB per GPU, its KV cache drops from "
        f"{tokens_text(base.kv_cache_tokens)} to {tokens_text(with_lora.kv_cache_tokens)} tokens",
    )


def _lora(count: int) -> Any:
    from llm_eks.planner import LoraAdapters

    return LoraAdapters(tuple((f"a{i}", f"acme/a{i}") for i in range(count)))


def test_workloads_staging_scratch_and_alerts() -> None:
    (job,) = [o for o in objects("dev") if o["kind"] == "Job" and o["metadata"]["name"].startswith("stage-")]
    (scratch,) = [v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "scratch"]
    alerts = {r["alert"]: r for o in objects("dev") if o["kind"] == "PrometheusRule" for g in o["spec"]["groups"]
              for r in g["rules"] if "alert" in r}  # fmt: skip
    itl, ttft, kv = (alerts[f"Vllm{n}"] for n in ("InterTokenLatencyAbovePlan", "TimeToFirstTokenAbovePlan",
                                                  "KvCacheBelowPlan"))  # fmt: skip
    assert " 1.5 * llm_eks:plan_itl" in itl["expr"] and " 2 * llm_eks:plan_ttft" in ttft["expr"]
    # The KV alert matches, by a regular expression on the label, every size below 90 % of the plan's tokens.
    below = re.search(r'kv_cache_size_tokens=~"([^"]+)"', kv["expr"])
    assert below is not None
    ninety = int(0.9 * plans("dev")[0].kv_cache_tokens)
    assert re.fullmatch(below.group(1), str(ninety)) and not re.fullmatch(below.group(1), str(ninety + 1))
    quotes(
        "docs/concepts/workloads.md",
        f"(a {scratch['emptyDir']['sizeLimit'].removesuffix('Gi')} GiB scratch volume",
        f"p50 inter-token latency over 10 min > 1.5 {TIMES} the plan's estimate | {itl['for'].removesuffix('m')} min",
        f"p50 TTFT over 10 min > 2 {TIMES} the plan's estimate, while the waiting queue averages under 1 request | "
        f"{ttft['for'].removesuffix('m')} min",
        f"below 90 % of the plan's tokens | {kv['for'].removesuffix('m')} min",
    )


# -- docs/getting-started/environments.md ---------------------------------------------------------------------


def test_environments_table() -> None:
    rows = []
    for env in environments():
        for p in plans(env):
            name = p.instance.accelerator_name.replace("RTX-PRO-6000", "RTX PRO 6000")
            rows.append(f"{p.instance_type} ({p.instance.accelerators}{TIMES} {name}), TP{p.tensor_parallel_size}, "
                        f"{tokens_text(p.kv_cache_tokens)} KV tokens, ${p.cost_per_replica_hour:.2f}/h")  # fmt: skip
    quotes("docs/getting-started/environments.md", *rows)


def test_environments_latency_choice() -> None:
    staging_llama = environments()["staging"].workloads["llama"]
    prod = environments()["prod"].workload
    cheaper = [
        plan(dataclasses.replace(w.plan_request(), accelerator=instance))
        for w, instance in ((staging_llama, "g5.xlarge"), (prod, "g6e.12xlarge"))
    ]
    targets = [w.slo.itl_p99_ms for w in (staging_llama, prod)]
    assert all(p.tpot_estimate_ms > t for p, t in zip(cheaper, targets, strict=True))
    quotes(
        "docs/getting-started/environments.md",
        f"staging's `llama` ({targets[0]:g} ms per output token) and prod ({targets[1]:g} ms) miss them on the cheaper "
        f"g5.xlarge and g6e.12xlarge by the planner's estimates ({cheaper[0].tpot_estimate_ms:.1f} and "
        f"{cheaper[1].tpot_estimate_ms:.1f} ms, chunked prefill included)",
    )


# -- docs/how-to/compare.md, promote.md, largest-models.md --------------------------------------------------------


def test_compare_cost_example() -> None:
    p = plan(PlanRequest(model="meta-llama/Llama-3.1-8B-Instruct", accelerator="g6.xlarge", max_model_len=8192,
                         target_concurrency=16))  # fmt: skip
    tokens_per_h = 16 * 3_600_000 / round(p.tpot_estimate_ms, 1)
    price = p.cost_per_replica_hour
    quotes(
        "docs/how-to/compare.md",
        f"(one replica holds {p.max_concurrency_typical} sequences, so 1 replica for 16; TPOT "
        f"{p.tpot_estimate_ms:.1f} ms",
        f"16 {TIMES} 3,600,000 / {p.tpot_estimate_ms:.1f} = {tokens_per_h:,.0f} tokens/h",
        f"${price:.4f} / {tokens_per_h:,.0f} {TIMES} 1e6 = **${price / tokens_per_h * 1e6:.3f}** per million output "
        "tokens",
    )


def test_promote_canary_overlap_line() -> None:
    from llm_eks.cli import main

    out = io.StringIO()
    context = REPO_ROOT / "tests" / "fixtures" / "docs" / "canary" / "cdk.json"
    with contextlib.redirect_stdout(out):
        assert main(["plan", "--env", "prod", "--context-file", str(context)]) == 0
    (line,) = [ln for ln in out.getvalue().splitlines() if ln.startswith("canary ")]
    quotes("docs/how-to/promote.md", line)


def test_largest_models_prose() -> None:
    ep = plan(PlanRequest(model="deepseek-ai/DeepSeek-V3", accelerator="p5.48xlarge", max_model_len=32768,
                          data_parallel_size=16, tensor_parallel_size=1))  # fmt: skip
    collectives = re.search(r"(\d+\.\d) ms of each decode step", " ".join(ep.assumptions))
    assert collectives is not None
    step = f"{collectives.group(1)} ms of each {ep.itl_estimate_ms:.0f} ms step"
    quotes("docs/concepts/planner.md", f"take {step.replace(' each ', ' a ')} at 16 sequences")
    kimi = plan(PlanRequest(model="moonshotai/Kimi-K2.5", accelerator="p5en.48xlarge", max_model_len=32768))
    k2 = plan(PlanRequest(model="moonshotai/Kimi-K2-Instruct", accelerator="p5en.48xlarge", max_model_len=32768))
    coder = plan(PlanRequest(model="Qwen/Qwen3-Coder-480B-A35B-Instruct", accelerator="p5.48xlarge",
                             max_model_len=32768))  # fmt: skip
    vllm = container(named("prod", "Deployment", "vllm-llama-3-3-70b-instruct"))
    grace = named("prod", "Deployment", "vllm-llama-3-3-70b-instruct")["spec"]["template"]["spec"]
    quotes(
        "docs/how-to/largest-models.md",
        f"over EFA ({step})",
        f"the checkpoint is {kimi.checkpoint_bytes / 1e9:.0f} GB",
        f"Kimi-K2-Instruct's {k2.checkpoint_bytes / 1e12:.2f} TB of FP8 weights fit one p5en.48xlarge with room for "
        f"{tokens_text(k2.kv_cache_tokens)} tokens of cache",
        f"The bf16 checkpoint ({coder.checkpoint_bytes / 1e9:.0f} GB) needs two p5.48xlarge",
        f"({grace['terminationGracePeriodSeconds']} s: preStop {vllm['lifecycle']['preStop']['sleep']['seconds']} s "
        f"plus `--shutdown-timeout` {arg(vllm['args'], '--shutdown-timeout')} s)",
    )


# -- docs/how-to/verify.md ----------------------------------------------------------------------------------------


def test_verify_load_figures() -> None:
    """The quiet MoE the estimate at the observed load is for, and the wave of requests the load Job avoids."""
    from llm_eks.planner.at_load import ObservedLoad, estimate_at_load
    from llm_eks.planner.latency import estimate
    from llm_eks.planner.sizing import Context, evaluate

    staging = dict(zip((s.key for s in environments()["staging"].served), plans("staging"), strict=True))
    qwen = staging["qwen"]
    quiet = estimate_at_load(qwen, ObservedLoad(running=1, prompt_tokens=1024, output_tokens=256))
    (dev,) = plans("dev")
    fit = evaluate(Context(dev.request), dev.instance, dev.tensor_parallel_size, dev.pipeline_parallel_size, 1)
    wave = estimate(dataclasses.replace(fit.step, token_budget=dev.max_num_batched_tokens), synchronized=True)
    quotes(
        "docs/how-to/verify.md",
        f"Qwen3-30B-A3B at {quiet.itl_ms:.1f} ms per token at one sequence against {qwen.itl_estimate_ms:.1f} ms "
        f"planned at {qwen.target_concurrency}",
        f"(the planner puts dev's at {wave.ttft_ms:,.0f} ms, above its {dev.request.max_ttft_ms:,.0f} ms SLO)",
    )


# -- smaller figures on other pages ---------------------------------------------------------------------------------


def test_capacity_gateway_and_checks_figures() -> None:
    from llm_eks.config.environment import GatewayConfig

    template = json.loads((GOLDEN / "dev" / "template.json").read_text())
    (queue,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SQS::Queue"
                and r["Properties"].get("MessageRetentionPeriod")]  # fmt: skip
    (node_class,) = [o for o in objects("dev") if o["kind"] == "EC2NodeClass" and o["metadata"]["name"] == "gpu-nvidia"]
    gp3 = next(m["ebs"] for m in node_class["spec"]["blockDeviceMappings"] if m["ebs"].get("throughput"))
    quotes(
        "docs/concepts/capacity.md",
        f"SQS queue named after the cluster, {queue['Properties']['MessageRetentionPeriod']} s retention",
        f"GPU data volumes are gp3 at {gp3['throughput']:,} MiB/s and {gp3['iops']:,} IOPS",
    )
    mib = GatewayConfig().max_request_bytes / 2**20
    quotes("docs/how-to/gateway.md", f"`max_request_bytes` (default {mib:g} MiB)")
    quotes("docs/getting-started/configure.md", f"`max_request_bytes` ({mib:g} MiB)")


def test_planner_page_terms() -> None:
    from llm_eks.planner import memory

    text = (REPO_ROOT / "docs" / "concepts" / "planner.md").read_text()
    for name, value in (("non-torch workspaces", memory.NON_TORCH_BYTES), ("the CUDA-graph estimate",
                                                                          memory.CUDA_GRAPH_BYTES)):  # fmt: skip
        assert re.search(rf"{name} {value / 2**30:.2f} GiB", " ".join(text.split())), name


def test_the_figures_of_this_module_name_pages_that_exist() -> None:
    source = Path(__file__).read_text()
    for page in set(re.findall(r'"(docs/[\w/.-]+\.md)"', source)):
        assert (REPO_ROOT / page).is_file(), page


def test_planner_and_compare_examples() -> None:
    from llm_eks.planner.memory import GIB, sampler_state_bytes

    quotes(
        "docs/concepts/planner.md", f"{sampler_state_bytes(1024, 150_000) / GIB:.1f} GiB at 1,024 sequences and a 150k"
    )
    split = plan(PlanRequest(model="meta-llama/Llama-3.3-70B-Instruct", accelerator="p5.48xlarge", max_model_len=8192,
                             tensor_parallel_size=1))  # fmt: skip
    quotes(
        "docs/how-to/compare.md",
        "(TP 1 alone for a 70B bf16 model on H100s: the fewest pipeline stages that fit, "
        f"{split.pipeline_parallel_size})",
    )
