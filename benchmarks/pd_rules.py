"""The rules that decide, before any scoring, which published prefill/decode (P/D) benchmarks the planner's P/D
estimate (src/llm_eks/planner/disaggregation.py) is scored on, and how a benchmark's settings map onto a plan. Each
rule reads only what the benchmark's source states (tests/fixtures/pd/published.json), never the planner's error on
it; a benchmark that breaks one stays in the fixture and is listed with the rule's id. The accuracy page prints these
rules and the sources looked at (docgen/accuracy.py) above the table they decide.

How an admitted benchmark is planned: its model, the catalog instance of its GPU, the pools' TP (one layout for both
pools), its prompt and output lengths, its concurrency as target_concurrency, its prefill replica count as
prefill_replicas with disaggregation on (the planner sizes the decode pool itself). Compared: the P/D TTFT (the
median where published, else the mean) with the plan's disaggregated TTFT; the P/D time per output token (the median
ITL where it is one decode step, else the TPOT) with the disaggregated decode step; and, where the source measured
both modes and says which served better, the planner's `auto` recommendation with that finding.
"""

from __future__ import annotations

from benchmarks.latency_rules import Rule, Run, version_rule
from llm_eks.catalog.accelerators import instance_type
from llm_eks.catalog.models import model
from llm_eks.errors import ConfigError

# The KV transports the planner has a rate for (disaggregation.transfer_rate): NIXL's libfabric backend over EFA, and
# TCP. RoCE, InfiniBand or NVLink within a node move the KV cache at other rates the planner does not hold.
MODELLED_TRANSPORTS = ("efa", "tcp")


def _hardware(run: Run) -> str | None:
    try:
        inst = instance_type(run["llm_eks"]["instance_type"])
        model(run["llm_eks"]["model"])
    except (ConfigError, KeyError) as error:
        return f"not in the catalog: {error}"
    if inst.accelerator_vendor != "nvidia":
        return f"{inst.accelerator_name} is not an NVIDIA GPU"
    return None


def _same_layout(run: Run) -> str | None:
    prefill, decode = run["prefill"], run["decode"]
    if int(prefill["tp"]) != int(decode["tp"]):
        return (
            f"prefill TP{prefill['tp']} and decode TP{decode['tp']}: the planner sizes one layout for both pools, so "
            "neither pool would be planned as it was served"
        )
    return None


def _load(run: Run) -> str | None:
    if run.get("regime") != "fixed-concurrency":
        return (
            f"regime {run.get('regime')!r}: the planner takes a number of requests in flight, and turning a request "
            "rate into one needs the measured latency"
        )
    return None


def _transport(run: Run) -> str | None:
    if run.get("transport") not in MODELLED_TRANSPORTS:
        return f"KV transfer over {run.get('transport')!r}, a rate the planner does not hold"
    return None


RULES: tuple[Rule, ...] = (
    Rule("P1", "An NVIDIA GPU of a catalog instance and a catalog model.", _hardware),
    Rule("P2", "The source states a vLLM version of 0.10 or later (the V1 engine, NixlConnector).", version_rule),
    Rule(
        "P3",
        "Prefill and decode pools run the same TP (the planner sizes one layout for both pools; a benchmark with "
        "another layout per pool is not a plan the planner can make).",
        _same_layout,
    ),
    Rule(
        "P4",
        "A fixed number of requests in flight (a closed loop at a stated concurrency); runs at a request rate are "
        "not scored.",
        _load,
    ),
    Rule(
        "P5",
        "Time to first token only: the KV cache moved over EFA or TCP, the two transports the planner has a rate for.",
        _transport,
        ttft_only=True,
    ),
)

# Published P/D benchmarks looked at that hold no row of the fixture, and why (figures not in the fixture are not
# scored, and none is copied from an image or a truncated excerpt).
SOURCES_LOOKED_AT: tuple[tuple[str, str], ...] = (
    (
        "https://github.com/ai-dynamo/dynamo/blob/main/docs/benchmarks/llama-3-70b-topology.mdx",
        "Llama-3.3-70B FP8 on H100/H200, aggregated TP4 vs 2xTP2 prefill + 1xTP4 decode, 8192/1024 tokens, 16 "
        "requests per GPU: states its settings but, in its words, does not publish result numbers",
    ),
    (
        "https://blog.lmcache.ai/2025-04-29-pdbench/",
        "Llama-3.1-8B on an 8xH100 node (NVLink), 1P1D at 3.6 requests per second with 8,000-token prompts: a "
        "request rate, a transport within one node, and its example result is a chart",
    ),
    (
        "https://github.com/llm-d/llm-d/blob/main/guides/pd-disaggregation/PD_DISAGGREGATION_TEST_RESULTS.md",
        "Qwen2.5-3B, 1P1D on RTX 6000 Ada: states no prompt or output length and no load",
    ),
    (
        "https://github.com/vllm-project/vllm/pull/6170",
        "vLLM's first disaggregated prefill (2048/150 tokens, 2 TP4 instances, 2 to 8 requests per second): a "
        "request rate, and results as a chart",
    ),
    (
        "https://github.com/crazyguitar/pysheeet/blob/master/docs/notes/appendix/disaggregated-prefill-decode.rst",
        "DeepSeek-V2-Lite, vLLM 0.15.1, NIXL LIBFABRIC over EFA, 4 nodes of 8 GPUs at TP8 (1P3D, 2P2D vs data "
        "parallel): names no GPU or instance type, sends 1,024 prompts with no rate or concurrency cap, and gives its "
        "results as charts; the figures in its text are bounds (TTFT above 37 s, ITL as low as 10 ms)",
    ),
    (
        "https://github.com/novitalabs/pegaflow/pull/365",
        "DeepSeek-V2-Lite on H200, vLLM 0.23.0, TP2/TP2, 2048/128 tokens, 8 in flight: settings stated, but its "
        "results table could not be read when this page was written",
    ),
)


def excluded(run: Run) -> tuple[str, str] | None:
    """The first rule that excludes the whole run, as (rule id, why), or None."""
    for rule in RULES:
        if not rule.ttft_only and (why := rule.check(run)):
            return rule.id, why
    return None


def every_breach(run: Run) -> list[tuple[str, str]]:
    """Every rule the run breaks (rule id, why): the page lists them all, so a reader sees how far each is off."""
    return [(rule.id, why) for rule in RULES if (why := rule.check(run))]


def ttft_excluded(run: Run) -> tuple[str, str] | None:
    """The first rule that excludes the run's TTFT (the whole-run rules included), or None."""
    for rule in RULES:
        if why := rule.check(run):
            return rule.id, why
    return None
