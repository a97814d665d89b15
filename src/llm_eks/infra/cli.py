"""`llm-eks` command line: `llm-eks plan` sizes a deployment before anything deploys.

    llm-eks plan --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --weight-format fp8
    llm-eks plan --env prod [--context-file cdk.json] [--accelerator p5.48xlarge ...]   # an environment's workload
    llm-eks plan --model org/custom --model-config ./config.json [--parameters N]      # a model not in the catalog
    llm-eks plan --catalog                                                              # models and instance types
    llm-eks plan --model meta-llama/Llama-3.1-8B-Instruct --compare [--chart cost.svg]  # every instance type, ranked

A readable table by default, `--json` for machines. Bad input exits 2 with one line on stderr, never a traceback.
Only the planner's pure-Python modules are imported (no aws_cdk, cdk8s or jsii), so it answers in well under a
second.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from llm_eks.catalog.formats import FORMATS
from llm_eks.errors import ConfigError, fail
from llm_eks.infra.plan import TIMES
from llm_eks.infra.plan.memory import DRIVER_VISIBLE_FRACTION

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
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "max_num_seqs",
)


class _UsageError(Exception):
    """argparse's complaint, turned into our one-line error instead of usage text and a SystemExit."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def _parser() -> _Parser:
    parser = _Parser(prog="llm-eks", description="Plan and check LLM deployments on Amazon EKS.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
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
    p.add_argument("--weight-format", help="auto (the checkpoint's own) | " + " | ".join(FORMATS))
    p.add_argument("--kv-cache-dtype", help="auto | fp8")
    p.add_argument("--max-model-len", type=int, help="context length (default: the model's maximum)")
    p.add_argument(
        "--gpu-memory-utilization", type=float, help="vLLM's GPU memory budget fraction (default 0.92, vLLM 0.33's)"
    )
    p.add_argument("--accelerator", help="auto (cheapest that meets the targets) or an instance type")
    p.add_argument("--target-concurrency", type=int, help="concurrent sequences per replica (default 16)")
    p.add_argument("--typical-input-tokens", type=int, help="typical prompt length (default 1024)")
    p.add_argument("--typical-output-tokens", type=int, help="typical completion length (default 256)")
    p.add_argument("--weights-source", help="nvme | s3 | ebs (default nvme)")
    p.add_argument("--max-nodes-per-replica", type=int, help="pipeline parallelism across at most N nodes (default 2)")
    p.add_argument("--max-itl-ms", type=float, help="inter-token latency ceiling the estimate must meet")
    fixed = p.add_argument_group(
        "reproduce a vLLM deployment",
        "as `vllm serve` takes them; left out, the planner chooses (an error says why a given one cannot work)",
    )
    fixed.add_argument("--tensor-parallel-size", type=int, metavar="N", help="GPUs each layer is split over")
    fixed.add_argument("--pipeline-parallel-size", type=int, metavar="N", help="pipeline stages (may span nodes)")
    fixed.add_argument("--max-num-seqs", type=int, metavar="N", help="sequences vLLM batches at most (>= target)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    compare = p.add_argument_group("compare before choosing")
    compare.add_argument(
        "--compare",
        action="store_true",
        help="list every catalog instance type that can serve the request, on its best split, best first (meets "
        "the targets, then $ per million output tokens). $ per 1M output tokens = replicas x $/h per replica / "
        "(target_concurrency x 3600 x 1000 / ITL ms) x 1e6, replicas = ceil(target_concurrency / sequences a "
        "replica runs at the typical size), ITL the estimate at target_concurrency sequences per replica",
    )
    compare.add_argument(
        "--chart",
        metavar="FILE.svg",
        help="with --compare, also write the comparison as an SVG chart (cost per million output tokens against "
        "inter-token latency, one labelled point per instance type); SVG only, no PNG",
    )
    p.set_defaults(func=_plan_command)
    m = commands.add_parser(
        "manifests",
        help="write an environment's Kubernetes YAML for GitOps, with cdk8s alone (no AWS CDK)",
        description="Synthesize the charts the CDK stack would apply, for a GitOps tool. The node role name and "
        "the cluster security group come from your deployed cluster.",
    )
    m.add_argument("--env", metavar="NAME", required=True, help="environment in --context-file")
    m.add_argument("--context-file", default="cdk.json", metavar="PATH", help="CDK context file (default: cdk.json)")
    m.add_argument("--node-role-name", required=True, help="IAM role NAME Karpenter gives its nodes")
    m.add_argument(
        "--security-group-id", action="append", required=True, help="security group for Karpenter nodes (repeat)"
    )
    m.add_argument(
        "--weights-bucket",
        metavar="NAME",
        help="the weights bucket's name (the stack output WeightsBucketName) for staged weights; default: "
        "weights_bucket.name from the context file",
    )
    m.add_argument("--out", default="manifests", metavar="DIR", help="output folder (default: manifests)")
    m.set_defaults(func=_manifests_command)
    from llm_eks.infra.image_lock import add_parser as add_images_parser
    from llm_eks.infra.image_snapshot import add_parser as add_snapshot_parser
    from llm_eks.infra.models_add import add_parser as add_models_parser

    add_snapshot_parser(add_images_parser(commands))
    add_models_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `llm-eks` console script; returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            raise _UsageError("a command is required: plan (see llm-eks --help)")
        code: int = args.func(args)
        return code
    except SystemExit as done:  # --help
        return int(done.code or 0)
    except (_UsageError, ConfigError) as err:
        message = " ".join(str(err).split())  # one line, whatever the message held
        print(f"llm-eks: error: {message}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `llm-eks plan ... | head`: stop quietly, as other CLI tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _plan_command(args: argparse.Namespace) -> int:
    from llm_eks.infra.plan import plan

    if args.catalog:
        _print_catalog(args.json)
        return 0
    if (args.model is None) == (args.env is None):
        raise _UsageError("give exactly one of --model, --env NAME or --catalog")
    overrides = {name: getattr(args, name) for name in _REQUEST_OPTIONS if getattr(args, name) is not None}
    if args.chart is not None and not args.compare:
        raise _UsageError("--chart goes with --compare")
    if args.compare:
        if "accelerator" in overrides:
            raise _UsageError("--compare compares every instance type: leave out --accelerator")
        if args.chart is not None and not args.chart.endswith(".svg"):
            raise fail("--chart", args.chart, "the chart is SVG: name the file *.svg")
        # Every instance type is compared: an accelerator fixed in cdk.json does not narrow it.
        overrides["accelerator"] = "auto"
    if args.workload is not None and args.env is None:
        raise _UsageError("--workload goes with --env")
    targets: list[tuple[Callable[[], Any], str | None]] = (
        _env_requests(args, overrides)
        if args.env is not None
        else [(functools.partial(_model_request, args, overrides), None)]
    )
    if args.compare and len(targets) > 1:
        raise _UsageError("--compare compares one workload: add --workload KEY")
    results = []
    for make_request, path in targets:
        try:
            request = make_request()
            if args.compare:
                from llm_eks.infra.compare_output import print_comparison

                return print_comparison(request, as_json=args.json, chart=args.chart)
            results.append(plan(request))
        except ConfigError as err:
            # A planner error about a value from cdk.json names it as cdk.json does; an option's keeps its own path.
            field = str(err).partition(":")[0].removeprefix("workload.")
            if path is None or field in overrides or not str(err).startswith("workload."):
                raise
            raise ConfigError(f"{path}.{str(err).removeprefix('workload.')}") from None
    keys = [path.rpartition(".")[2] if path and ".workloads." in path else None for _, path in targets]
    if args.json:
        dicts = [result.to_dict() for result in results]
        # One plan (one workload, or --workload) prints as itself; several as {workload: plan}.
        body: Any = dicts[0] if len(dicts) == 1 else dict(zip(keys, dicts, strict=True))
        print(json.dumps(body, indent=2, ensure_ascii=False))
        return 0
    for index, (key, result) in enumerate(zip(keys, results, strict=True)):
        if key is not None:
            print(("\n" if index else "") + f"workload {key}:")
        print(_table(result))
    return 0


def _manifests_command(args: argparse.Namespace) -> int:
    from llm_eks import aws_ids
    from llm_eks.images.lock import LOCK_FILE, load_lock
    from llm_eks.infra.environment_plans import plan_workloads
    from llm_eks.infra.gitops import write_manifests

    if not aws_ids.ROLE_NAME.match(args.node_role_name):
        raise fail(
            "--node-role-name",
            args.node_role_name,
            "must be an IAM role NAME (1-64 letters, digits and + = , . @ _ -), not its ARN",
        )
    for sg in args.security_group_id:
        if not aws_ids.SECURITY_GROUP_ID.match(sg):
            raise fail("--security-group-id", sg, "must be a security group id such as sg-0123456789abcdef0")
    environment = _environment(args)
    if args.weights_bucket is not None and aws_ids.s3_uri_problem(f"s3://{args.weights_bucket}/") is not None:
        raise fail(
            "--weights-bucket", args.weights_bucket, "must be an S3 bucket name (3-63 lowercase letters, digits)"
        )
    written = write_manifests(
        environment,
        plan_workloads(environment),
        Path(args.out),
        node_role_name=args.node_role_name,
        security_group_ids=tuple(args.security_group_id),
        # The lock next to cdk.json, as `cdk synth` reads it.
        images=load_lock(Path(args.context_file).parent / LOCK_FILE),
        weights_bucket=args.weights_bucket,
    )
    for path in written:
        print(path)
    return 0


def _model_request(args: argparse.Namespace, overrides: dict[str, Any]) -> Any:
    from llm_eks.catalog.models import ModelSpec
    from llm_eks.infra.plan import PlanRequest

    if args.model_config is not None:
        spec = ModelSpec.from_hf_config(args.model_config, id=args.model, parameters=args.parameters)
        return PlanRequest(model=spec, **overrides)
    if args.parameters is not None:
        raise _UsageError("--parameters needs --model-config")
    from llm_eks.infra.model_files import MODELS_DIR, recorded_model

    # A model recorded with `llm-eks models add` is read from its file (offline); else the catalog answers.
    models_dir = Path(args.models_dir if args.models_dir is not None else MODELS_DIR)
    recorded = recorded_model(models_dir, args.model, "workload.model")
    return PlanRequest(model=recorded if recorded is not None else args.model, **overrides)


def _env_requests(args: argparse.Namespace, overrides: dict[str, Any]) -> list[tuple[Callable[[], Any], str | None]]:
    """(plan request maker, config path) of each workload of --env, or of --workload alone, with the options
    applied (a request checks its values when made: the caller names a bad one by its path)."""
    if args.model_config is not None or args.parameters is not None:
        raise _UsageError("--model-config and --parameters go with --model, not --env")
    environment = _environment(args)
    served = environment.served
    if args.workload is not None:
        served = tuple(s for s in served if s.key == args.workload)
        if not served:
            names = ", ".join(environment.workloads) or "none: the environment has one `workload`"
            raise fail(
                "--workload", args.workload, f"must name a workload of environments.{args.env}.workloads ({names})"
            )

    def maker(w: Any) -> Callable[[], Any]:
        return lambda: dataclasses.replace(w.plan_request(), **overrides) if overrides else w.plan_request()

    return [(maker(s.config), s.path) for s in served]


def _environment(args: argparse.Namespace) -> Any:
    """The environment named by --env in --context-file, validated."""
    from llm_eks.infra.config import load_environments, select_environments
    from llm_eks.infra.context_file import read_context_file

    # Read strictly: an environment written twice, or 1e400, is an error here too, not a silent loss.
    from llm_eks.infra.model_files import MODELS_DIR

    context = read_context_file(Path(args.context_file), "--context-file")
    # Recorded models are read where synth reads them: the models folder beside cdk.json.
    given = getattr(args, "models_dir", None)  # `manifests` has no --models-dir: beside cdk.json, as synth reads
    models_dir = Path(given) if given is not None else Path(args.context_file).parent / MODELS_DIR
    (environment,) = select_environments(load_environments(context, models_dir), args.env)
    return environment


def _gib(n: float) -> str:
    return f"{n / 1024**3:.2f} GiB"


def _table(p: Any) -> str:
    inst, cold, pod, r = p.instance, p.cold_start, p.pod_resources, p.request
    price = "no on-demand price" if inst.on_demand_usd_per_hour is None else f"${inst.on_demand_usd_per_hour:g}/h"
    cost = "n/a" if p.cost_per_replica_hour is None else f"${p.cost_per_replica_hour:.2f}/h"
    budget = p.usable_bytes_per_gpu + p.reserve_bytes_per_gpu  # vLLM's requested memory (plan/memory.py)
    target = "met" if p.meets_target else "NOT met"
    link = "" if inst.interconnect == "none" else f", {inst.interconnect}"
    rows = [
        ("Model", f"{p.model.id} ({p.model.parameters / 1e9:.2f}B parameters)"),
        (
            "Checkpoint",
            f"{p.checkpoint}, {p.weight_format} weights {p.weight_bytes / 1e9:.1f} GB, "
            f"KV cache {p.kv_cache_dtype}, max_model_len {p.max_model_len}",
        ),
        (
            "Instance",
            f"{inst.instance_type}: {inst.accelerators}{TIMES} {inst.accelerator_name} "
            f"({inst.accelerator_memory_gib:.1f} GiB{link}), {inst.vcpus} vCPU, "
            f"{inst.memory_gib:g} GiB RAM, {inst.local_nvme_gb} GB NVMe, {price}",
        ),
        (
            "Parallelism",
            f"TP {p.tensor_parallel_size} {TIMES} PP {p.pipeline_parallel_size} = "
            f"{p.gpus_per_replica} GPU(s) per replica, "
            f"{p.nodes_per_replica} node(s) per replica, {p.replicas_per_node} replica(s) per node",
        ),
        (
            "Memory / GPU",
            f"{_gib(p.gpu_memory_bytes)} ({DRIVER_VISIBLE_FRACTION:.0%} visible to CUDA) {TIMES} "
            f"{p.gpu_memory_utilization:g} = {_gib(budget)}; "
            f"reserve {_gib(p.reserve_bytes_per_gpu)}, weights {_gib(p.weight_bytes_per_gpu)}, "
            f"KV cache {_gib(p.kv_cache_bytes_per_gpu)}",
        ),
        ("KV cache", f"{p.kv_cache_tokens:,} tokens per replica ({p.kv_bytes_per_token // 1024} KiB per token)"),
        (
            "Concurrency",
            f"{p.max_concurrency_typical} sequences of {r.typical_tokens} tokens (target {r.target_concurrency}: "
            f"{target}); {p.max_concurrency_full_context} at full context",
        ),
        ("Latency", f"~{p.itl_estimate_ms} ms per output token at {r.target_concurrency} sequences (estimate)"),
        ("Cost", f"{cost} per replica (on-demand)"),
        (
            "Cold start",
            f"image {cold.image_pull_s:g} s ({r.image_source}) + weights {cold.weights_s:g} s ({r.weights_source}) + "
            "warm-up "
            f"{cold.warmup_s:g} s = {cold.total_s:g} s; startup probe must allow {cold.startup_s:g} s; "
            f"+{cold.node_provision_s:g} s for a new node",
        ),
        ("Pod requests", f"cpu {pod.cpu}, memory {pod.memory}, {p.extended_resource} {p.gpus_per_pod}"),
        ("Engine args", " ".join(p.engine_args)),
    ]
    if r.warm_replicas:
        price = p.warm_headroom_usd_per_hour
        rows.insert(
            -2,
            (
                "Warm headroom",
                f"{r.warm_replicas} replica-shaped placeholder(s) keep node(s) up: "
                + ("no on-demand price" if price is None else f"${price:.2f}/h")
                + f"; a scale-out then skips the {cold.node_provision_s:g} s node launch and the "
                + f"{cold.image_pull_s:g} s image pull",
            ),
        )
    rows += [("Warning", str(w)) for w in p.warnings]  # with its id, to acknowledge it in the CDK app
    width = max(len(label) for label, _ in rows)
    lines = [p.summary_line(), ""]
    lines += [f"{label:<{width}}  {value}" for label, value in rows]
    lines += ["", *_paths_table(p)]
    lines += ["", "Assumptions:"] + [f"  - {a}" for a in p.assumptions]
    return "\n".join(lines)


# How each source reads in the path table.
_WEIGHTS_LABEL = {"nvme": "Hub download", "s3": "S3 stream", "staged": "S3 + compile cache", "ebs": "EBS volume"}
_IMAGE_LABEL = {"pull": "pulled", "parallel-pull": "parallel pull", "snapshot": "snapshot", "headroom": "on the node"}


def _paths_table(p: Any) -> list[str]:
    """Queue spike to a Ready replica, every path side by side; `*` marks the one in use."""
    head = ("", "weights", "image", "node", "node s", "image s", "weights s", "warm-up s", "total s")
    rows = [
        (
            "*" if c.in_use else "",
            _WEIGHTS_LABEL[c.weights_source],
            _IMAGE_LABEL[c.image_source],
            "warm" if c.warm_node else "new",
            *(f"{value:g}" for value in (c.node_s, c.image_s, c.weights_s, c.warmup_s, c.total_s)),
        )
        for c in p.cold_start_paths
    ]
    widths = [max(len(row[i]) for row in (head, *rows)) for i in range(len(head))]
    lines = ["Cold start by path (queue spike to a Ready replica; * in use; S3 needs the weights in a bucket, the "
             "compile cache staged weights, snapshot an image snapshot, warm node warm_replicas, whose "
             "placeholders pull the image):"]  # fmt: skip
    for row in (head, *rows):
        cells = [cell.ljust(w) if i < 4 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def _print_catalog(as_json: bool) -> None:
    from llm_eks.catalog.accelerators import CATALOG as INSTANCES
    from llm_eks.catalog.accelerators import PRICE_REGION, PRICES_READ
    from llm_eks.catalog.models import CATALOG as MODELS

    if as_json:
        body = {
            "models": [dataclasses.asdict(m) for m in MODELS],
            "instance_types": [{**dataclasses.asdict(i), "extended_resource": i.extended_resource} for i in INSTANCES],
            "prices_read": PRICES_READ,
            "price_region": PRICE_REGION,
        }
        print(json.dumps(body, indent=2, ensure_ascii=False))
        return
    print("Models")
    print(
        f"  {'id':<46} {'attention':<9} {'total':>8} {'active':>8} {'layers':>6} {'heads/kv':>8} {'context':>8}  "
        "checkpoint"
    )
    for m in MODELS:
        moe = f", MoE {m.num_experts}x top-{m.experts_per_token}" if m.is_moe else ""
        active = f"{(m.active_parameters or m.parameters) / 1e9:>7.2f}B"
        print(
            f"  {m.id:<46} {m.attention_kind:<9} {m.parameters / 1e9:>7.2f}B {active} {m.layers:>6} "
            f"{m.attention_heads:>4}/{m.kv_heads:<3} {m.max_position_embeddings:>8}  {m.quantization or m.native_dtype}"
            f"{moe}"
        )
    print()
    print(f"Instance types (on-demand {PRICE_REGION}, prices of {PRICES_READ})")
    print(
        f"  {'instance type':<18} {'accelerators':<20} {'GiB':>6} {'CC':>4} {'vCPU':>5} {'RAM':>6} {'NVMe GB':>8} EFA  "
        f"{'$/h':>9}"
    )
    for i in INSTANCES:
        price = "-" if i.on_demand_usd_per_hour is None else f"{i.on_demand_usd_per_hour:.4f}"
        accel = f"{i.accelerators}{TIMES} {i.accelerator_name}"
        # CUDA compute capability: decides which checkpoint formats vLLM runs natively (catalog/formats.py).
        cc = "-" if i.compute_capability is None else "{}.{}".format(*i.compute_capability)
        print(
            f"  {i.instance_type:<18} {accel:<20} {i.accelerator_memory_gib:>6.1f} {cc:>4} {i.vcpus:>5} "
            f"{i.memory_gib:>6g} {i.local_nvme_gb:>8} {'yes' if i.efa else 'no ':<4} {price:>9}"
        )


if __name__ == "__main__":
    sys.exit(main())
