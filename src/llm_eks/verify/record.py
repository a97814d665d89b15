"""`llm-eks verify --record FILE`: what verify observed, one calibration point per workload, in the shape of the
latency fixture's entries (tests/fixtures/latency/published.json: id, source, gpu, gpus, vllm_version, model, ...,
ttft_ms, itl_ms, tpot_ms, regime, and the `llm_eks` object saying how the planner reproduces the point), so a
deployment joins the published measurements as a point of its own. Measured over the Prometheus window from
production traffic, not a benchmark: `regime` is "observed", the concurrency is the mean number of requests
running per engine (Little's law over vLLM's inference-time histogram), and request sizes are the means of vLLM's
per-request token histograms (no fixed input/output length). What verify could
not observe is null."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from llm_eks.catalog.accelerators import INSTANCE_TYPES
from llm_eks.error_codes import E504
from llm_eks.errors import fail
from llm_eks.verify.args_diff import flags
from llm_eks.verify.checks_nodes import INSTANCE_TYPE_LABEL
from llm_eks.verify.checks_pods import VLLM_CONTAINER, pod_starts, serve_llm_config
from llm_eks.verify.expected import EnvironmentPlan, WorkloadPlan
from llm_eks.verify.observed import EMPTY, ClusterState, Latency, Object, WorkloadMetrics, container, labels, name

# Flags the chart owns (addresses, names, drain) or that the record has fields for: the rest are the engine flags a
# measurement lists in `flags`.
_NOT_FLAGS = {
    "(model)",
    "--host",
    "--port",
    "--served-model-name",
    "--shutdown-timeout",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--nnodes",
    "--node-rank",
    "--master-addr",
    "--headless",
}
_VLLM_TAG = re.compile(r"^v?(\d+\.\d+\.\d+(?:\.post\d+)?)$")


def _ms(latency: Latency) -> dict[str, float]:
    if not latency.measured:
        return {}
    assert latency.median_s is not None and latency.p99_s is not None
    return {"median": round(latency.median_s * 1000, 2), "p99": round(latency.p99_s * 1000, 2)}


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def _serving_args(w: WorkloadPlan, pods: tuple[Object, ...]) -> list[str]:
    for pod in pods:
        args = (container(pod, VLLM_CONTAINER) or EMPTY).get("args")
        if args and "--headless" not in args:
            return list(args)
    return list(w.args.get("server") or w.args.get("leader") or ())


def _observed_type(w: WorkloadPlan, pods: tuple[Object, ...], nodes: Mapping[str, Object]) -> str:
    types = Counter(
        labels(nodes[node]).get(INSTANCE_TYPE_LABEL, "")
        for pod in pods
        if (node := str((pod.get("spec") or EMPTY).get("nodeName"))) in nodes
    )
    types.pop("", None)
    return types.most_common(1)[0][0] if types else w.instance_type


def _vllm_version(w: WorkloadPlan, pods: tuple[Object, ...]) -> str | None:
    """vLLM's version from the image tag a serving pod runs (vllm/vllm-openai:v0.33.0); None for Ray Serve, whose
    image is tagged by Ray's version."""
    if w.engine != "vllm":
        return None
    images = [(container(p, VLLM_CONTAINER) or EMPTY).get("image") for p in pods] or [w.image]
    ref = str(images[0] or w.image).split("@", 1)[0]
    match = _VLLM_TAG.match(ref.rsplit(":", 1)[-1]) if ":" in ref.rsplit("/", 1)[-1] else None
    return match.group(1) if match else None


def _engine(w: WorkloadPlan, objs_owner: Object | None, pods: tuple[Object, ...]) -> tuple[int, int, list[str]]:
    """(tensor parallel, pipeline parallel, engine flags) as the pods run them."""
    if w.engine == "ray-serve":
        config = serve_llm_config(objs_owner) if objs_owner is not None else None
        kwargs = dict((config or w.llm_config or {}).get("engine_kwargs") or {})
        tp = int(kwargs.pop("tensor_parallel_size", w.tensor_parallel_size))
        pp = int(kwargs.pop("pipeline_parallel_size", w.pipeline_parallel_size))
        return tp, pp, [f"--{k.replace('_', '-')} {v}" for k, v in kwargs.items()]
    parsed = flags(_serving_args(w, pods))

    def number(flag: str, default: int) -> int:
        values = parsed.get(flag) or ()
        return int(values[0]) if values and values[0].isdigit() else default

    listed = [" ".join((k, *v)) for k, v in parsed.items() if k not in _NOT_FLAGS]
    return (
        number("--tensor-parallel-size", w.tensor_parallel_size),
        number("--pipeline-parallel-size", w.pipeline_parallel_size),
        listed,
    )


def calibration_point(
    environment: str,
    context: str,
    observed_at: datetime,
    window: str,
    w: WorkloadPlan,
    state: ClusterState,
    m: WorkloadMetrics,
) -> dict[str, Any]:
    """One workload's calibration point (see the module docstring)."""
    objs = state.workloads[w.name]
    nodes = {name(n): n for n in state.nodes}
    pods = tuple(p for p in objs.pods if not (p.get("metadata") or EMPTY).get("deletionTimestamp"))
    instance_type = _observed_type(w, pods, nodes)
    instance = INSTANCE_TYPES.get(instance_type)
    tp, pp, engine_flags = _engine(w, objs.owner, pods)
    starts = [] if w.engine == "ray-serve" else pod_starts(w, objs, nodes, observed_at)[0]
    slowest = max(starts, key=lambda s: s.seconds, default=None)
    kv = Counter(s.tokens for s in m.kv).most_common(1)
    stamp = observed_at.strftime("%Y%m%dT%H%M%SZ")
    accelerator = instance.accelerator_name if instance is not None else w.accelerator_name
    return {
        "id": f"llm-eks-verify-{environment}-{w.name}-{stamp}",
        "source": {
            "kind": "llm-eks-verify",
            "environment": environment,
            "cluster": context,
            "observed_at": observed_at.isoformat().replace("+00:00", "Z"),
            "window": window,
        },
        "gpu": accelerator,
        "gpus": tp * pp,
        "interconnect": instance.interconnect if instance is not None else None,
        "vllm_version": _vllm_version(w, pods),
        "model": w.model,
        "model_type": w.model_type,
        "weight_format": w.weight_format,
        "kv_cache_dtype": None if w.kv_cache_dtype == "auto" else w.kv_cache_dtype,
        "tp": tp,
        "pp": pp,
        "dp": 1,
        "ep": 1,
        "concurrency": _round(m.running_mean, 2),
        "concurrency_kind": "observed mean running",
        "request_rate": None,
        "num_prompts": None,
        "input_len": None,
        "output_len": None,
        "dataset": None,
        "mean_input_tokens": _round(m.mean_input_tokens),
        "mean_output_tokens": _round(m.mean_output_tokens),
        "flags": engine_flags,
        "ttft_ms": _ms(m.ttft),
        "tpot_ms": {},
        "itl_ms": _ms(m.itl),
        "output_throughput_tok_s": _round(m.output_tokens_per_s, 2),
        "vllm_v1": True,
        "notes": (
            f"observed by llm-eks verify over {window} of production traffic on workload {w.name} "
            f"({w.namespace}); latency percentiles interpolated within vLLM's histogram buckets"
        ),
        "regime": "observed",
        "gpu_family": accelerator,
        "bench_client": None,
        "node_gpus": instance.accelerators if instance is not None else w.accelerators_per_node,
        "kv_cache_tokens": kv[0][0] if kv else None,
        "startup_s": round(slowest.seconds) if slowest is not None else None,
        "startup_path": ("new node" if slowest.new_node else "warm node") if slowest is not None else None,
        "instance_type": instance_type,
        # How the planner reproduces the point, as the fixture's entries say it (benchmarks/latency_error_table.py):
        # production requests arrive on their own, not in synchronized waves.
        "llm_eks": {
            "instance_type": instance_type,
            "weight_format": w.requested_weight_format,
            "arrivals": "steady",
            "model": w.model,
        },
    }


def calibration_points(
    plan: EnvironmentPlan,
    state: ClusterState,
    metrics: Mapping[str, WorkloadMetrics],
    observed_at: datetime,
    window: str,
) -> list[dict[str, Any]]:
    return [
        calibration_point(plan.environment, state.context, observed_at, window, w, state, metrics[w.name])
        for w in plan.workloads
    ]


def write_points(path: str, points: list[dict[str, Any]]) -> None:
    try:
        Path(path).write_text(json.dumps(points, indent=1, ensure_ascii=False) + "\n")
    except OSError as err:
        raise fail(E504, "--record", path, f"cannot be written ({err.strerror or err})") from None
