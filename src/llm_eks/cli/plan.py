"""`llm-eks plan`: size a deployment before anything deploys.

    llm-eks plan --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --weight-format fp8
    llm-eks plan --env prod [--context-file cdk.json] [--accelerator p5.48xlarge ...]   # an environment's workload
    llm-eks plan --model org/custom --model-config ./config.json [--parameters N]      # a model not in the catalog
    llm-eks plan --catalog                                                              # models and instance types
    llm-eks plan --model meta-llama/Llama-3.1-8B-Instruct --compare [--chart cost.svg]  # every instance type, ranked

A readable table by default (llm_eks.cli.plan_table), `--json` for machines. Only the planner's pure-Python modules
are imported (no aws_cdk, cdk8s or jsii), so it answers in well under a second.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_eks.cli.environments import environment
from llm_eks.cli.parsing import UsageError
from llm_eks.cli.plan_table import print_catalog, table
from llm_eks.error_codes import E600, E601
from llm_eks.errors import ConfigError, fail
from llm_eks.planner.cost import COST_FORMULA
from llm_eks.planner.fixes import NoFitError
from llm_eks.planner.request import CHOICES, PlanRequest

# CLI option -> PlanRequest field, for the options that map one to one.
_REQUEST_OPTIONS = (
    "weight_format",
    "kv_cache_dtype",
    "max_model_len",
    "gpu_memory_utilization",
    "accelerator",
    "target_concurrency",
    "typical_input_tokens",
    "typical_output_tokens",
    "weights_source",
    "max_nodes_per_replica",
    "max_itl_ms",
    "max_ttft_ms",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "max_num_seqs",
    "data_parallel_size",
    "enable_expert_parallel",
    "allow_without_efa",
    "compute",
    "disaggregation",
    "prefill_replicas",
    "kv_offload",
    "conversation_turns",
    "think_time_s",
    "prefix_cache_scorer",
)


def _default(field: str) -> str:
    """PlanRequest's default for `field`, as the help states it: what an option left out takes."""
    default = _REQUEST_FIELDS[field].default
    return f"{default:g}" if isinstance(default, float) else str(default)


def _choices(field: str) -> str:
    """The values PlanRequest accepts for `field`, as the help lists them."""
    return " | ".join(CHOICES[field])


_REQUEST_FIELDS = {f.name: f for f in dataclasses.fields(PlanRequest)}


def _offload_size(text: str) -> float | str:
    """--kv-offload: "auto" or a size in GiB (the planner checks its range)."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size in GiB or auto") from None


def add_parser(commands: Any) -> None:
    """Register `plan` on the CLI's subcommands."""
    p = commands.add_parser(
        "plan",
        help="size a model on an instance type: parallelism, KV cache, cost, cold start, engine args",
        description="Size a model deployment. Options left out take the planner's defaults, or with --env the "
        "environment's workload values (options given override them).",
    )
    source = p.add_argument_group("what to plan (one of)")
    source.add_argument("--model", help="Hugging Face id from the catalog (or with --model-config, any id)")
    source.add_argument("--env", metavar="NAME", help="plan the workload(s) of environment NAME in --context-file")
    p.add_argument(
        "--workload",
        metavar="KEY",
        help="with --env: plan only this workload of the environment's `workloads` (default: each in turn)",
    )
    source.add_argument("--catalog", action="store_true", help="list the catalog models and instance types")
    p.add_argument("--context-file", default="cdk.json", metavar="PATH", help="CDK context file (default: cdk.json)")
    p.add_argument(
        "--models-dir",
        metavar="DIR",
        help="models recorded by `llm-eks models add` (default: models next to --context-file with --env, else "
        "models in the working directory)",
    )
    p.add_argument("--model-config", metavar="PATH", help="a local Hugging Face config.json describing --model")
    p.add_argument("--parameters", type=int, help="parameter count for --model-config (default: estimated)")
    p.add_argument(
        "--weight-format",
        help=f"{_choices('weight_format')} (default {_default('weight_format')}: the checkpoint's own format)",
    )
    p.add_argument(
        "--kv-cache-dtype",
        help=f"{_choices('kv_cache_dtype')} (default {_default('kv_cache_dtype')}: the activation dtype)",
    )
    p.add_argument("--max-model-len", type=int, help="context length (default: the model's maximum)")
    p.add_argument(
        "--gpu-memory-utilization",
        type=float,
        help=f"vLLM's GPU memory budget fraction (default {_default('gpu_memory_utilization')}, vLLM 0.33's own)",
    )
    p.add_argument(
        "--accelerator",
        help=f"auto (the cheapest that meets the targets) or an instance type (default {_default('accelerator')})",
    )
    p.add_argument(
        "--target-concurrency",
        type=int,
        help=f"concurrent sequences per replica (default {_default('target_concurrency')})",
    )
    p.add_argument(
        "--typical-input-tokens", type=int, help=f"typical prompt length (default {_default('typical_input_tokens')})"
    )
    p.add_argument(
        "--typical-output-tokens",
        type=int,
        help=f"typical completion length (default {_default('typical_output_tokens')})",
    )
    p.add_argument(
        "--weights-source",
        help=f"{_choices('weights_source')} (default {_default('weights_source')}): the Hub into the instance "
        "store, an S3 stream (Run:ai Model Streamer), the same from the environment's weights bucket with the "
        "torch.compile cache restored, or a gp3 volume",
    )
    p.add_argument(
        "--max-nodes-per-replica",
        type=int,
        help="a replica spans at most N nodes, with pipeline stages or a MoE model's data-parallel ranks "
        f"(default {_default('max_nodes_per_replica')})",
    )
    p.add_argument(
        "--max-itl-ms", type=float, help="inter-token latency ceiling the time-per-output-token estimate must meet"
    )
    p.add_argument("--max-ttft-ms", type=float, help="time-to-first-token ceiling the TTFT estimate must meet")
    fixed = p.add_argument_group(
        "reproduce a vLLM deployment",
        "as `vllm serve` takes them; left out, the planner chooses (an error says why a given one cannot work)",
    )
    fixed.add_argument("--tensor-parallel-size", type=int, metavar="N", help="GPUs each layer is split over")
    fixed.add_argument("--pipeline-parallel-size", type=int, metavar="N", help="pipeline stages (may span nodes)")
    fixed.add_argument(
        "--max-num-seqs",
        type=int,
        metavar="N",
        help="sequences vLLM batches at most, per data-parallel rank (times the ranks, at least --target-concurrency)",
    )
    fixed.add_argument(
        "--data-parallel-size",
        type=int,
        metavar="N",
        help="data-parallel ranks of a MoE model, each with --tensor-parallel-size GPUs; implies expert parallelism",
    )
    fixed.add_argument(
        "--enable-expert-parallel",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="spread a MoE model's experts over DP x TP GPUs (--no-enable-expert-parallel: TP x PP only); left "
        "out, the planner compares both",
    )
    p.add_argument(
        "--allow-without-efa",
        action="store_true",
        default=None,
        help="accept a replica spanning nodes without EFA (TCP between them); refused otherwise",
    )
    p.add_argument(
        "--compute",
        help=f"{_choices('compute')} (default {_default('compute')}): where the nodes come from; auto-mode plans EKS "
        "Auto Mode's (its own image pull, no image snapshot, weekly node replacement, a management fee)",
    )
    p.add_argument(
        "--disaggregation",
        help=f"{_choices('disaggregation')} (default {_default('disaggregation')}: separate prefill and decode "
        "pools only where they cost less per million output tokens at the targets, or meet targets one pool misses)",
    )
    p.add_argument(
        "--prefill-replicas",
        type=int,
        metavar="N",
        help="prefill replicas of a disaggregated plan (default: the fewest that meet the TTFT target)",
    )
    p.add_argument(
        "--kv-offload",
        type=_offload_size,
        metavar="GIB|auto",
        help="a CPU tier for the KV cache: GiB per engine (vLLM --kv-offloading-size) or auto (what the pod's memory "
        "share holds beyond vLLM's needs); default off",
    )
    p.add_argument(
        "--conversation-turns",
        type=int,
        metavar="N",
        help=f"turns per conversation (default {_default('conversation_turns')}); above 1 the plan estimates how "
        "much of each prompt the GPU cache and the CPU tier already hold",
    )
    p.add_argument(
        "--think-time-s",
        type=float,
        metavar="S",
        help=f"mean seconds between an answer and the next message (default {_default('think_time_s')}, an assumption)",
    )
    p.add_argument(
        "--prefix-cache-scorer",
        help=f"{_choices('prefix_cache_scorer')} (default {_default('prefix_cache_scorer')}: precise where a CPU tier "
        "is on): how the gateway's endpoint picker scores prefix-cache hits; precise adds vLLM's KV-events flags to "
        "the engine args (with --env the environment's gateway and api_key decide whether it can; with --model a "
        "gateway and api_key false are assumed)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    compare = p.add_argument_group("compare before choosing")
    compare.add_argument(
        "--compare",
        action="store_true",
        help="list every catalog instance type that can serve the request, on its best split, best first (meets "
        f"the targets, then $ per million output tokens). {COST_FORMULA}",
    )
    compare.add_argument(
        "--chart",
        metavar="FILE.svg",
        help="with --compare, also write the comparison as an SVG chart (cost per million output tokens against "
        "the time-per-output-token estimate, one labelled point per instance type); SVG only, no PNG",
    )
    p.set_defaults(func=plan_command)


def plan_command(args: argparse.Namespace) -> int:
    from llm_eks.planner import plan

    if args.catalog:
        print_catalog(args.json)
        return 0
    if (args.model is None) == (args.env is None):
        raise UsageError(E600, "give exactly one of --model, --env NAME or --catalog")
    overrides = {name: getattr(args, name) for name in _REQUEST_OPTIONS if getattr(args, name) is not None}
    if args.chart is not None and not args.compare:
        raise UsageError(E600, "--chart goes with --compare")
    if args.compare:
        if "accelerator" in overrides:
            raise UsageError(E600, "--compare compares every instance type: leave out --accelerator")
        if args.chart is not None and not args.chart.endswith(".svg"):
            raise fail(E600, "--chart", args.chart, "the chart is SVG: name the file *.svg")
        # Every instance type is compared: an accelerator fixed in cdk.json does not narrow it.
        overrides["accelerator"] = "auto"
    if args.workload is not None and args.env is None:
        raise UsageError(E600, "--workload goes with --env")
    targets = (
        _env_requests(args, overrides)
        if args.env is not None
        else [_Target(functools.partial(_model_request, args, overrides), None, None, None)]
    )
    if args.compare and len(targets) > 1:
        raise UsageError(E600, "--compare compares one workload: add --workload KEY")
    results = []
    for target in targets:
        try:
            request = target.make_request()
            if args.compare:
                from llm_eks.cli.compare import print_comparison

                return print_comparison(request, as_json=args.json, chart=args.chart)
            results.append(plan(request))
        except ConfigError as err:
            raise _named(err, target, overrides) from None
    keys = [target.key for target in targets]
    overlaps = _canary_overlaps(args, keys, results) if args.env is not None else {}
    survives = _resilience(args, keys, results) if args.env is not None else {}
    if args.json:
        dicts = [result.to_dict() for result in results]
        for key, plan_body in zip(keys, dicts, strict=True):
            if key in overlaps:
                plan_body["canary_overlap"] = overlaps[key].to_dict()
            if key in survives:
                plan_body["resilience"] = survives[key].to_dict()
        # One plan (one workload, or --workload) prints as itself; several as {workload: plan}.
        body: Any = dicts[0] if len(dicts) == 1 else dict(zip(keys, dicts, strict=True))
        print(json.dumps(body, indent=2, ensure_ascii=False))
        return 0
    for index, (key, result) in enumerate(zip(keys, results, strict=True)):
        if key is not None:
            print(("\n" if index else "") + f"workload {key}:")
        print(table(result))
        if key in overlaps:
            print(overlaps[key].line())
        if key in survives:
            print(survives[key].line())
    return 0


@dataclass(frozen=True)
class _Target:
    """One plan to make: its request (built when planned: it checks its values then), and for a workload of --env its
    config path, key (a canary's is `<key>-canary`; the one-model `workload` has none) and how cdk.json sets a field."""

    make_request: Callable[[], Any]
    path: str | None
    key: str | None
    setting: Callable[[str, Any], str | None] | None


def flag(field: str, value: Any) -> str | None:
    """How `llm-eks plan` sets PlanRequest's `field` to `value`: its option (None: it has none)."""
    if field not in _REQUEST_OPTIONS:
        return None
    option = "--" + field.replace("_", "-")
    return option if value is True else f"{option} {value}"


def _named(err: ConfigError, target: _Target, overrides: dict[str, Any]) -> ConfigError:
    """The planner's error in the terms the user gave the request: a value from cdk.json by its cdk.json path, an
    option's by its own; the changes that would fit (NoFitError) as options, or as cdk.json sets those not given."""
    setting = target.setting
    if isinstance(err, NoFitError):
        message = err.render(
            flag if setting is None else (lambda f, v: flag(f, v) if f in overrides else setting(f, v))
        )
    else:
        message = err.message
    field = message.partition(":")[0].removeprefix("workload.")
    if target.path is None or field in overrides or not message.startswith("workload."):
        return err if message == err.message else ConfigError(err.code, message)
    return ConfigError(err.code, f"{target.path}.{message.removeprefix('workload.')}")


def _canary_overlaps(args: argparse.Namespace, keys: list[str | None], results: list[Any]) -> dict[str, Any]:
    """Each planned next version's capacity beside its current version (by workload key), at the plans made."""
    from llm_eks.config.canary_capacity import canary_overlap

    config = environment(args)
    served = {s.key: s for s in config.served}
    return {
        key: canary_overlap(config, served[key], result)
        for key, result in zip(keys, results, strict=True)
        if key is not None and served[key].canary_of is not None
    }


def _resilience(args: argparse.Namespace, keys: list[str | None], results: list[Any]) -> dict[str | None, Any]:
    """What each planned workload of --env survives at its minimum replicas (llm_eks.config.resilience)."""
    from llm_eks.config.resilience import resilience

    config = environment(args)
    served = {s.key: s for s in config.served}
    return {key: resilience(config, served[key], result) for key, result in zip(keys, results, strict=True)}


def _model_request(args: argparse.Namespace, overrides: dict[str, Any]) -> Any:
    from llm_eks.catalog.models import ModelSpec
    from llm_eks.planner import PlanRequest

    if args.model_config is not None:
        spec = ModelSpec.from_hf_config(args.model_config, id=args.model, parameters=args.parameters)
        return PlanRequest(model=spec, **overrides)
    if args.parameters is not None:
        raise UsageError(E600, "--parameters needs --model-config")
    from llm_eks.hub.records import MODELS_DIR, recorded_model

    # A model recorded with `llm-eks models add` is read from its file (offline); else the catalog answers.
    models_dir = Path(args.models_dir if args.models_dir is not None else MODELS_DIR)
    recorded = recorded_model(models_dir, args.model, "workload.model")
    return PlanRequest(model=recorded if recorded is not None else args.model, **overrides)


def _env_requests(args: argparse.Namespace, overrides: dict[str, Any]) -> list[_Target]:
    """Each workload of --env, or --workload alone, with the options applied."""
    if args.model_config is not None or args.parameters is not None:
        raise UsageError(E600, "--model-config and --parameters go with --model, not --env")
    config = environment(args)
    served = config.served
    if args.workload is not None:
        served = tuple(s for s in served if s.key == args.workload)
        if not served:
            names = ", ".join(config.workloads) or "none: the environment has one `workload`"
            raise fail(
                E601,
                "--workload",
                args.workload,
                f"must name a workload of environments.{args.env}.workloads ({names})",
            )

    def maker(w: Any) -> Callable[[], Any]:
        request = functools.partial(w.plan_request, config.compute, config.gateway is not None)
        return lambda: dataclasses.replace(request(), **overrides) if overrides else request()

    return [_Target(maker(s.config), s.path, s.key if config.workloads else None, s.setting) for s in served]
