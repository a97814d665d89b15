"""The planner against published vLLM start-up logs (tests/fixtures/vllm_startup_logs.json): prints one row per
logged figure with the planner's figure and the error. A benchmark that prints numbers, not a test.

    .venv/bin/python benchmarks/kv_error_table.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from llm_eks.catalog.accelerators import instance_type
from llm_eks.catalog.models import MODELS, ModelSpec
from llm_eks.infra.plan import PlanRequest
from llm_eks.infra.plan.kv_cache import kv_layout
from llm_eks.infra.plan.memory import GIB, batch_defaults
from llm_eks.infra.plan.sizing import Context, evaluate

ROOT = Path(__file__).resolve().parents[1]


def rows() -> list[tuple[str, str, str, float, float]]:
    """(model, setting, figure, logged, planned) for every comparable figure of every record."""
    records = json.loads((ROOT / "tests" / "fixtures" / "vllm_startup_logs.json").read_text())["records"]
    out = []
    for rec in records:
        spec = MODELS.get(rec["model"])
        where = f"{rec.get('gpu') or 'GPU not logged'}, TP{rec['tp']}, vLLM {rec['vllm']}"
        if spec is None:  # only the per-token KV spec is compared: the log gives the memory it had
            arch = rec["architecture"]
            spec = ModelSpec(id=rec["model"], parameters=10**9, layers=arch["layers"], hidden_size=arch["kv_heads"] *
                             arch["head_dim"], attention_heads=arch["kv_heads"], kv_heads=arch["kv_heads"],
                             head_dim=arch["head_dim"], max_position_embeddings=rec["max_model_len"],
                             vocab_size=1000, intermediate_size=1024)  # fmt: skip
        if "kv_cache_tokens" in rec and "available_kv_gib" in rec:
            layout = kv_layout(spec, rec["tp"], 1, 2, 2 * 8192)
            tokens = layout.logged_tokens(layout.num_blocks(int(rec["available_kv_gib"] * GIB)), rec["max_model_len"])
            out.append((rec["model"], where, "KV tokens from the logged memory", rec["kv_cache_tokens"], tokens))
        if rec.get("instance") and rec["model"] in MODELS:
            inst = instance_type(rec["instance"])
            request = PlanRequest(model=rec["model"], max_model_len=rec["max_model_len"],
                                  gpu_memory_utilization=rec["gpu_memory_utilization"], accelerator=rec["instance"],
                                  target_concurrency=batch_defaults(inst)[1])  # fmt: skip
            fit = evaluate(Context(request), inst, rec["tp"], 1, 1)
            if "available_kv_gib" in rec:
                available = (fit.usable_bytes_per_gpu - fit.weight_bytes_per_gpu) / GIB
                out.append((rec["model"], where, "available KV memory (GiB)", rec["available_kv_gib"], available))
            if "kv_cache_tokens" in rec:
                out.append((rec["model"], where, "KV tokens, planned end to end", rec["kv_cache_tokens"],
                            fit.kv_cache_tokens))  # fmt: skip
        if "model_loading_gib" in rec:
            weights = Context(PlanRequest(model=rec["model"])).weight_bytes / rec["tp"] / GIB
            out.append((rec["model"], where, "weights per GPU (GiB)", rec["model_loading_gib"], weights))
    return out


def main() -> int:
    print(f"{'model':28} {'where':42} {'figure':34} {'logged':>10} {'planned':>10} {'error':>7}")
    for model, where, figure, logged, planned in rows():
        error = (planned - logged) / logged
        print(f"{model:28} {where[:42]:42} {figure:34} {logged:10,.2f} {planned:10,.2f} {error:+7.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
