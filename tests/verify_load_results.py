"""`vllm bench serve` results for the `--load` tests, in the shape vLLM 0.33 saves them, and the Job's log around
one."""

from __future__ import annotations

import json
from typing import Any

from llm_eks.verify.checks_load import LoadSpec


def bench_result(
    spec: LoadSpec,
    *,
    ttft: float = 1.1,
    itl: float = 1.05,
    throughput: float = 0.95,
    completed: int | None = None,
    failed: int = 0,
    p99_ttft_ms: float | None = None,
) -> dict[str, Any]:
    """A `vllm bench serve --save-result` file as vLLM 0.33 writes it without --save-detailed
    (vllm/benchmarks/serve.py: result_json's setup and traffic keys, then benchmark()'s result and the mean, median,
    std and percentiles of each of --percentile-metrics), its medians and throughput at these multiples of the
    estimate, its p99s inside the SLO."""
    assert spec.estimate is not None and spec.planned_throughput is not None
    done = spec.num_prompts - failed if completed is None else completed
    out: dict[str, Any] = {
        "date": "20261203-101500", "endpoint_type": "openai", "backend": "openai", "label": None,
        "model_id": "meta-llama/Llama-3.1-8B-Instruct", "tokenizer_id": "/work/tokenizer",
        "num_prompts": spec.num_prompts, "request_rate": 1.15, "burstiness": 1.0, "max_concurrency": spec.concurrency,
        "duration": 347.2, "completed": done, "failed": failed, "total_input_tokens": done * spec.input_len,
        "total_output_tokens": done * spec.output_len, "request_throughput": done / 347.2,
        "request_goodput": done / 347.2 * 0.99, "output_throughput": spec.planned_throughput * throughput,
        "total_token_throughput": 0.0, "max_output_tokens_per_s": 0.0, "max_concurrent_requests": spec.concurrency,
        "rtfx": 0.0,
    }  # fmt: skip
    medians = {
        "ttft": spec.estimate.ttft_ms * ttft,
        "tpot": spec.estimate.itl_ms * itl * 1.02,
        "itl": spec.estimate.itl_ms * itl,
        "e2el": spec.estimate.ttft_ms + spec.output_len * spec.estimate.itl_ms,
    }
    p99s = {"ttft": spec.slo_ttft_p99_ms * 0.8, "tpot": spec.slo_itl_p99_ms * 0.7, "itl": spec.slo_itl_p99_ms * 0.9}
    if p99_ttft_ms is not None:
        p99s["ttft"] = p99_ttft_ms
    for metric, median in medians.items():
        p99 = p99s.get(metric, median * 1.3)
        out |= {f"mean_{metric}_ms": median * 1.02, f"median_{metric}_ms": median, f"std_{metric}_ms": median / 10}
        out |= {f"p50_{metric}_ms": median, f"p90_{metric}_ms": (median + p99) / 2, f"p99_{metric}_ms": p99}
    return out


def bench_log(result: dict[str, Any]) -> str:
    """The Job's log: vLLM's summary lines, then the marker and the result file (manifests/benchmark.py SCRIPT)."""
    return "\n".join(
        [
            "============ Serving Benchmark Result ============",
            f"Successful requests:                     {result['completed']}",
            "==================================================",
            "=== vllm bench serve result.json ===",
            json.dumps(result),
            "",
        ]
    )
