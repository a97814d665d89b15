"""The planner against published vLLM start-up logs (tests/fixtures/vllm_startup_logs.json): one row per logged
figure with the planner's figure for the same settings and the error, then the median error per figure and vLLM
accounting era. A benchmark that prints numbers, not a test.

    .venv/bin/python benchmarks/kv_error_table.py

The planner mirrors vLLM 0.33. Logs from before 0.21 size the KV cache before CUDA graphs are captured, so for
them the planner's CUDA-graph estimate is left out; eager runs capture no graphs in any version. Logs of the V1 model
runner get no sampler state (its per-request penalty buffers are the V2 runner's). Where a log prints
the GPU's memory, the planner's budget starts from that figure instead of its own driver-visible estimate, so the
error is the terms', not the GPU total's. Every other setting is the record's.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_eks.catalog.accelerators import instance_type
from llm_eks.catalog.models import MODELS, ModelSpec
from llm_eks.planner import PlanRequest
from llm_eks.planner.kv_cache import BLOCK_TOKENS, KvLayout, kv_layout
from llm_eks.planner.memory import (
    CUDA_GRAPH_BYTES,
    GIB,
    NON_TORCH_BYTES,
    available_kv_bytes,
    batch_defaults,
    profile_peak_bytes,
    requested_bytes,
    sampler_state_bytes,
    visible_bytes,
)
from llm_eks.planner.sizing import Context, evaluate

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "fixtures" / "vllm_startup_logs.json"
CURRENT = "0.21+"


@dataclass(frozen=True)
class Row:
    model: str
    where: str
    accounting: str
    figure: str
    logged: float
    planned: float
    # Where the log was published (a URL, or the search index's file id where the repository is not known).
    source: str = ""

    @property
    def error(self) -> float:
        return (self.planned - self.logged) / self.logged


def records() -> list[dict[str, Any]]:
    return list(json.loads(LOGS.read_text())["records"])


def _spec(rec: dict[str, Any]) -> ModelSpec:
    spec = MODELS.get(rec["model"])
    if spec is not None:
        return spec
    # Only the per-token KV spec is compared for a model outside the catalog: the log gives the memory it had.
    arch = rec["architecture"]
    return ModelSpec(id=rec["model"], parameters=10**9, layers=arch["layers"], hidden_size=arch["kv_heads"] *
                     arch["head_dim"], attention_heads=arch["kv_heads"], kv_heads=arch["kv_heads"],
                     head_dim=arch["head_dim"], max_position_embeddings=rec["max_model_len"], vocab_size=1000,
                     intermediate_size=1024)  # fmt: skip


def _layout(rec: dict[str, Any], spec: ModelSpec, batched: int) -> KvLayout:
    dtype_bytes = 1 if rec.get("kv_cache_dtype") == "fp8" else 2
    return kv_layout(spec, rec["tp"], 1, dtype_bytes, 2 * batched)


def _logged_tokens(rec: dict[str, Any], layout: KvLayout, num_blocks: int) -> int:
    """The "GPU KV cache size" line for `num_blocks`: 0.33 logs max concurrency x max_model_len; vLLM 0.10 logged
    num_blocks // groups x block size (vllm/v1/core/kv_cache_utils.py), which differs for sliding-window models."""
    if rec.get("kv_tokens_logged_as") == "blocks per group":
        return num_blocks // sum(layout.groups) * BLOCK_TOKENS
    return layout.logged_tokens(num_blocks, rec["max_model_len"])


def rows_for(rec: dict[str, Any]) -> list[Row]:
    """Every figure of one record the planner can be compared on."""
    spec = _spec(rec)
    where = f"{rec.get('gpu') or 'GPU not logged'}, TP{rec['tp']}, vLLM {rec['vllm'].split(' (')[0]}"
    accounting = rec.get("accounting", CURRENT)
    out: list[Row] = []

    def add(figure: str, logged: float, planned: float) -> None:
        out.append(Row(rec["model"], where, accounting, figure, logged, planned, rec.get("source", "")))

    inst = instance_type(rec["instance"]) if rec.get("instance") else None
    batched, seqs = rec.get("max_num_batched_tokens"), rec.get("max_num_seqs")
    if inst is not None:
        batched, seqs = batched or batch_defaults(inst)[0], seqs or batch_defaults(inst)[1]
    layout = _layout(rec, spec, batched or 8192)
    if "kv_cache_tokens" in rec and "available_kv_gib" in rec:
        blocks = layout.num_blocks(int(rec["available_kv_gib"] * GIB))
        add("KV tokens from the logged memory", rec["kv_cache_tokens"], _logged_tokens(rec, layout, blocks))
    if rec["model"] not in MODELS:
        return out
    request = PlanRequest(model=rec["model"], weight_format=rec.get("weight_format", "auto"))
    weights = evaluate(Context(request), inst or instance_type("p5.48xlarge"), rec["tp"], 1, 1).weight_bytes_per_gpu
    if "model_loading_gib" in rec:
        add("weights per GPU (GiB)", rec["model_loading_gib"], weights / GIB)
    if inst is None or batched is None or seqs is None:
        return out

    graphs = CUDA_GRAPH_BYTES if accounting == CURRENT and not rec.get("enforce_eager") else 0
    peak = profile_peak_bytes(spec, rec["tp"], batched, seqs)
    # Only the V2 model runner (0.33's default) keeps the sampler's per-request vocabulary buffers from start-up.
    sampler = sampler_state_bytes(seqs, spec.vocab_size) if rec.get("model_runner") == "v2" else 0
    if "peak_activation_gib" in rec:
        # From 0.21 vLLM logs its CUDA-graph estimate inside "peak activation".
        add("peak activation (GiB)", rec["peak_activation_gib"], (peak + graphs) / GIB)
    if "non_torch_gib" in rec:
        # What vLLM logs as non-torch (from 0.21: consumed memory less the weights) holds the sampler state too.
        add("non-torch memory (GiB)", rec["non_torch_gib"], (NON_TORCH_BYTES + sampler) / GIB)
    total = int(rec["total_gib"] * GIB) if "total_gib" in rec else visible_bytes(inst)
    requested = requested_bytes(total, rec["gpu_memory_utilization"])
    # The planner's own deductions, with its graph estimate given back where the log's vLLM did not deduct one.
    available = available_kv_bytes(requested, weights, sampler, peak) + CUDA_GRAPH_BYTES - graphs
    if "available_kv_gib" in rec:
        add("available KV memory (GiB)", rec["available_kv_gib"], available / GIB)
    if "kv_cache_tokens" in rec:
        add(
            "KV tokens, planned end to end",
            rec["kv_cache_tokens"],
            _logged_tokens(rec, layout, layout.num_blocks(available)),
        )
    return out


def rows() -> list[Row]:
    return [row for rec in records() for row in rows_for(rec)]


def main() -> int:
    table = rows()
    print(f"{'model':40} {'where':34} {'figure':34} {'logged':>12} {'planned':>12} {'error':>7}")
    for r in table:
        print(f"{r.model[:40]:40} {r.where[:34]:34} {r.figure:34} {r.logged:12,.2f} {r.planned:12,.2f} {r.error:+7.1%}")
    print("\nmedian |error| by figure and vLLM accounting (records)")
    groups: dict[tuple[str, str], list[float]] = {}
    for r in table:
        groups.setdefault((r.figure, r.accounting), []).append(abs(r.error))
    for (figure, accounting), errors in sorted(groups.items()):
        median, worst = statistics.median(errors), max(errors)
        print(f"  {figure:34} {accounting:12} {median:6.1%} (worst {worst:5.1%}, {len(errors)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
