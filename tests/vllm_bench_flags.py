"""`vllm bench serve`'s parser, as vLLM 0.33.0 builds it, for the flags llm-eks's benchmark Job passes.

vLLM's parser cannot be built here (vllm.benchmarks.serve imports the tokenizers, aiohttp and vLLM's utilities, which
need torch), so each flag's `add_argument` is pinned below with the file and line it is on in the 0.33.0 wheel
(vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl, `vllm/_version.py`: 0.33.0, commit g4ba787ec9):
vllm/benchmarks/serve.py `add_cli_args` (which calls vllm/benchmarks/datasets/datasets.py `add_dataset_parser`). The
type, action, nargs and choices are the source's; `parser()` builds an argparse parser of them, so the Job's
arguments are parsed as vLLM parses them: an unknown flag, a value of the wrong type, a choice vLLM does not offer or
a missing value is an error. `make upstream` extracts those two files from the pinned wheel (tests/upstream_wheels.py)
and a test re-reads every pinned line there (tests/test_verify_load.py).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Flag:
    file: str
    line: int
    # argparse keywords: type, action, nargs, choices (as the source passes them).
    kwargs: tuple[tuple[str, Any], ...] = ()


SERVE = "benchmarks/serve.py"
DATASETS = "benchmarks/datasets/datasets.py"
# vllm/benchmarks/lib/endpoint_request_func.py ASYNC_REQUEST_FUNCS, the --backend choices (its keys).
BACKENDS = (
    "vllm", "openai", "openai-chat", "openai-responses", "openai-audio", "openai-embeddings",
    "openai-embeddings-chat", "openai-embeddings-clip", "openai-embeddings-vlm2vec", "infinity-embeddings",
    "infinity-embeddings-clip", "vllm-pooling", "vllm-rerank",
)  # fmt: skip
DATASET_NAMES = (
    "sharegpt", "burstgpt", "random", "random-mm", "random-rerank", "hf", "custom", "custom_audio", "custom_image",
    "prefix_repetition", "spec_bench", "speed_bench", "timed_trace",
)  # fmt: skip

BENCH_FLAGS: dict[str, Flag] = {
    "--backend": Flag(SERVE, 1647, (("type", str), ("choices", BACKENDS))),
    "--base-url": Flag(SERVE, 1654, (("type", str),)),
    "--endpoint": Flag(SERVE, 1663, (("type", str),)),
    "--max-concurrency": Flag(SERVE, 1678, (("type", int),)),
    "--model": Flag(SERVE, 1692, (("type", str),)),
    "--tokenizer": Flag(SERVE, 1715, (("type", str),)),
    "--request-rate": Flag(SERVE, 1745, (("type", float),)),
    "--disable-tqdm": Flag(SERVE, 1775, (("action", "store_true"),)),
    "--save-result": Flag(SERVE, 1791, (("action", "store_true"),)),
    "--result-dir": Flag(SERVE, 1815, (("type", str),)),
    "--result-filename": Flag(SERVE, 1822, (("type", str),)),
    "--ignore-eos": Flag(SERVE, 1831, (("action", "store_true"),)),
    "--percentile-metrics": Flag(SERVE, 1847, (("type", str),)),
    "--metric-percentiles": Flag(SERVE, 1858, (("type", str),)),
    "--goodput": Flag(SERVE, 1867, (("nargs", "+"),)),
    "--served-model-name": Flag(SERVE, 1935, (("type", str),)),
    "--seed": Flag(DATASETS, 1585, (("type", int),)),
    "--num-prompts": Flag(DATASETS, 1586, (("type", int),)),
    "--dataset-name": Flag(DATASETS, 1592, (("type", str), ("choices", DATASET_NAMES))),
    "--random-input-len": Flag(DATASETS, 1887, (("type", int),)),
    "--random-output-len": Flag(DATASETS, 1893, (("type", int),)),
}


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse exits; a test wants the message
        raise _Refused(message)


def parser() -> argparse.ArgumentParser:
    """An argparse parser of the pinned flags (no abbreviations: vLLM's FlexibleArgumentParser spells them out)."""
    p = _Parser(prog="vllm bench serve", allow_abbrev=False)
    for flag, spec in BENCH_FLAGS.items():
        p.add_argument(flag, **dict(spec.kwargs))
    return p


def parse(args: list[str]) -> argparse.Namespace:
    """The arguments as vLLM 0.33's `vllm bench serve` reads them; AssertionError naming the problem otherwise."""
    try:
        return parser().parse_args(args)
    except _Refused as err:
        raise AssertionError(f"vllm bench serve refuses {args}: {err}") from None
