"""`llm-eks plan --compare`: every instance type that can serve a request, on its best split, ranked by what a
million output tokens cost at the target load; the same as JSON and as an SVG chart."""

from __future__ import annotations

import dataclasses
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from llm_eks.catalog.accelerators import CATALOG as INSTANCES
from llm_eks.cli import main
from llm_eks.cli.compare_chart import CHAR_PX, LABEL_PX, Point, axis, render_svg
from llm_eks.planner import PlanRequest, plan
from llm_eks.planner.compare import COST_FORMULA, compare, cost_per_million_output_tokens, neuron_refusals

X = "\N{MULTIPLICATION SIGN}"
SVG = "{http://www.w3.org/2000/svg}"
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_70B = "meta-llama/Llama-3.3-70B-Instruct"
SMALL = PlanRequest(model=LLAMA_8B, max_model_len=8192)
BIG = PlanRequest(model=LLAMA_70B, weight_format="fp8", max_model_len=16384, target_concurrency=32)


def by_type(request: PlanRequest) -> dict:
    return {r.instance_type: r for r in compare(request)}


# --- The rows ------------------------------------------------------------------------------------------------------


def test_cost_per_million_output_tokens_by_hand() -> None:
    row = by_type(SMALL)["g6.xlarge"]
    # One L4 replica holds 25 sequences >= 16: one replica. 16 sequences x one token per 96 ms (the time per output
    # token, chunked prefill included): 16 x 3600 x 1000 / 96 = 600,000 tokens/h; $0.8048/h / 600,000 x 1e6 =
    # $1.3413.
    assert (row.replicas, row.tpot_ms, row.usd_per_replica_hour) == (1, 96.0, 0.8048)
    assert row.usd_per_million_output_tokens == round(0.8048 / (16 * 3600 * 1000 / 96.0) * 1e6, 4) == 1.3413
    assert cost_per_million_output_tokens(1, 0.8048, 16, 96.0) == pytest.approx(1.3413, abs=1e-4)
    assert row.output_tokens_per_s == round(16 * 1000 / 96.0)


def test_replicas_cover_the_target_when_one_holds_too_few() -> None:
    # Two g6e.xlarge have no EFA between them: compared only when the request accepts TCP.
    assert "g6e.xlarge" not in by_type(BIG)
    row = by_type(dataclasses.replace(BIG, allow_without_efa=True))["g6e.xlarge"]
    # 70B fp8 spans 2 one-GPU nodes (TP1 x PP2) and holds 27 sequences of 1280 tokens: 32 need ceil(32 / 27) = 2.
    assert (row.tensor_parallel_size, row.pipeline_parallel_size, row.nodes_per_replica) == (1, 2, 2)
    assert (row.concurrency_typical, row.replicas, row.meets_targets) == (27, 2, False)
    assert row.usd_per_replica_hour == round(1.861 * 2, 4)
    assert row.usd_per_million_output_tokens == round(2 * 1.861 * 2 / (32 * 3600 * 1000 / row.tpot_ms) * 1e6, 4)


def test_best_first_meets_targets_then_cost_per_token_unpriced_last() -> None:
    rows = compare(BIG)
    met = [r for r in rows if r.meets_targets]
    assert rows[: len(met)] == met and met and len(met) < len(rows)
    priced = [r.usd_per_million_output_tokens for r in met if r.usd_per_million_output_tokens is not None]
    assert priced == sorted(priced)
    assert met[-1].instance_type == "p5e.48xlarge" and met[-1].usd_per_million_output_tokens is None
    missed = [r.usd_per_million_output_tokens for r in rows[len(met) :]]
    assert missed == sorted(missed)


def test_every_nvidia_instance_type_that_can_serve_is_listed_once() -> None:
    rows = compare(SMALL)
    names = [r.instance_type for r in rows]
    assert len(names) == len(set(names))
    # Llama 8B bf16 at 8k fits every NVIDIA instance type of the catalog, and every Neuron one whose host memory can
    # compile it (not inf2.xlarge's 16 GiB nor trn1.2xlarge's 32 GiB): neuron_refusals says why for those.
    neuron = {i.instance_type for i in INSTANCES if i.accelerator_vendor == "neuron"}
    refused = {name for name, _ in neuron_refusals(SMALL)}
    assert refused == {"inf2.xlarge", "trn1.2xlarge"}
    assert set(names) == {i.instance_type for i in INSTANCES if i.accelerator_vendor == "nvidia"} | neuron - refused


# Llama 8B everywhere on one node; Llama 70B fp8 across 2 nodes on small ones; Qwen 7B's 28 heads cap TP at 4, so an
# 8-GPU node takes two pipeline stages.
QWEN_LONG = PlanRequest(model="Qwen/Qwen2.5-7B-Instruct", max_model_len=32768, target_concurrency=64)


@pytest.mark.parametrize("base", [SMALL, BIG, QWEN_LONG], ids=["llama-8b", "llama-70b-fp8", "qwen-7b-32k"])
def test_a_row_is_what_plan_gives_for_that_instance_and_split(base: PlanRequest) -> None:
    rows = compare(base)
    assert rows
    for row in rows:
        request = dataclasses.replace(
            base,
            accelerator=row.instance_type,
            tensor_parallel_size=row.tensor_parallel_size,
            pipeline_parallel_size=row.pipeline_parallel_size,
        )
        p = plan(request)
        assert (p.kv_cache_tokens, p.max_concurrency_typical, p.itl_estimate_ms, p.nodes_per_replica) == (
            row.kv_cache_tokens,
            row.concurrency_typical,
            row.itl_ms,
            row.nodes_per_replica,
        ), row.instance_type
        assert p.cost_per_replica_hour == row.usd_per_replica_hour


def test_auto_choice_is_among_the_rows_with_its_figures() -> None:
    p = plan(BIG)
    row = by_type(BIG)[p.instance_type]
    assert (row.kv_cache_tokens, row.itl_ms, row.meets_targets) == (p.kv_cache_tokens, p.itl_estimate_ms, True)


def test_the_requests_accelerator_does_not_narrow_the_comparison() -> None:
    pinned = dataclasses.replace(SMALL, accelerator="g6e.xlarge")
    assert compare(pinned) == compare(SMALL)


def test_heads_that_cap_tp_fill_the_node_with_stages() -> None:
    row = by_type(QWEN_LONG)["g6e.48xlarge"]
    assert (row.tensor_parallel_size, row.pipeline_parallel_size, row.nodes_per_replica) == (4, 2, 1)


def test_a_fixed_split_is_compared_on_the_nodes_it_fills() -> None:
    rows = compare(dataclasses.replace(SMALL, tensor_parallel_size=4))
    assert rows and all(r.tensor_parallel_size == 4 for r in rows)
    # TP4 fills a 4-GPU node alone, an 8-GPU one with two pipeline stages; on Neuron, with no pipeline stages, 4
    # NeuronCores fill no node (2 chips of inf2, 1 of trn2 are partial), so no Neuron row.
    assert {(r.gpus_per_node, r.pipeline_parallel_size) for r in rows} == {(4, 1), (8, 2)}


def test_a_given_max_num_seqs_is_sized_into_the_rows() -> None:
    chosen = by_type(BIG)["p5.48xlarge"]
    given = by_type(dataclasses.replace(BIG, max_num_seqs=1024))["p5.48xlarge"]
    # vLLM profiles 1024 sequences instead of 32: a larger logits peak, so a little less KV cache.
    assert given.kv_cache_tokens < chosen.kv_cache_tokens and given.replicas == 1


# --- The chart ------------------------------------------------------------------------------------------------------


def test_axis_is_linear_from_zero_or_log_over_a_decade() -> None:
    linear = axis([0.72, 4.84])
    assert (linear.low, linear.high, linear.log, linear.ticks) == (0.0, 5.0, False, (0.0, 1.0, 2.0, 3.0, 4.0, 5.0))
    log = axis([1.3, 82.1])
    assert (log.low, log.high, log.log, log.ticks) == (1.0, 100.0, True, (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0))
    assert axis([2.2, 25.0]).ticks == (2.0, 5.0, 10.0, 20.0, 50.0)


def test_svg_has_one_labelled_point_per_row_and_titled_axes() -> None:
    points = [
        Point("a.xlarge", 10.0, 1.0, True),
        Point("b.xlarge", 20.0, 2.5, False),
        Point("c.xlarge", 30.0, 4.1, True),
    ]
    root = ET.fromstring(render_svg(points, "T <&>", "latency (ms)", "$ per M tokens"))
    assert root.tag == f"{SVG}svg"
    circles = root.findall(f".//{SVG}circle[@class='point']")
    assert [(c.get("data-label"), c.get("data-x"), c.get("data-y")) for c in circles] == [
        ("c.xlarge", "30", "4.1"),
        ("b.xlarge", "20", "2.5"),
        ("a.xlarge", "10", "1"),
    ]
    labels = [t.text for t in root.findall(f".//{SVG}text[@class='label']")]
    assert sorted(labels) == ["a.xlarge", "b.xlarge", "c.xlarge"]
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "T <&>" in texts and "latency (ms)" in texts and "$ per M tokens" in texts
    x_axis = root.find(f".//{SVG}g[@class='x-axis']")
    y_axis = root.find(f".//{SVG}g[@class='y-axis']")
    assert x_axis is not None and y_axis is not None
    # x: 10..30 ms, linear from 0 to 30 in steps of 10 (30 / 5 = 6 -> 10); y: 1..4.1, from 0 to 5.
    assert (x_axis.get("data-low"), x_axis.get("data-high"), x_axis.get("data-scale")) == ("0", "30", "linear")
    assert [t.text for t in x_axis.findall(f"{SVG}text[@class='tick']")] == ["0", "10", "20", "30"]
    assert (y_axis.get("data-low"), y_axis.get("data-high")) == ("0", "5")
    # Each point sits inside the plot area, at its value's place on the axes.
    plot = root.find(f"{SVG}rect[@fill='none']")
    assert plot is not None
    left, top = float(plot.get("x", 0)), float(plot.get("y", 0))
    width, height = float(plot.get("width", 0)), float(plot.get("height", 0))
    c = circles[0]  # c.xlarge: x 30 of 0..30, y 4.1 of 0..5
    assert float(c.get("cx", 0)) == pytest.approx(left + width, abs=0.1)
    assert float(c.get("cy", 0)) == pytest.approx(top + (1 - 4.1 / 5) * height, abs=0.1)


def test_labels_of_points_at_the_same_place_do_not_overlap() -> None:
    points = [Point(f"g6.{n}xlarge", 82.1, 1.0 + n / 100, True) for n in range(1, 6)]
    root = ET.fromstring(render_svg(points, "t", "x", "y"))
    boxes = []
    for t in root.findall(f".//{SVG}text[@class='label']"):
        x, y, width = float(t.get("x", 0)), float(t.get("y", 0)), len(t.text or "") * CHAR_PX
        left = x if t.get("text-anchor") == "start" else x - width
        boxes.append((left, y - LABEL_PX, left + width, y + 2))
    assert len(boxes) == 5
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (a, b)


# --- Through the CLI ------------------------------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compare_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "plan", "--model", LLAMA_8B, "--max-model-len", "8192", "--compare")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == (
        "meta-llama/Llama-3.1-8B-Instruct at bf16 (KV cache auto), max_model_len 8192: target 16 sequences of 1280 "
        "tokens per replica"
    )
    assert lines[1] == f"{len(compare(SMALL))} instance types can serve it, best first:"
    assert lines[3].split() == ["instance", "type", "GPU", "layout", "nodes", "KV", "tokens", "seqs", "TTFT", "ms",
                                "ITL", "ms", "TPOT", "ms", "tok/s", "$/h/replica", "replicas", "$/M", "out", "tok",
                                "targets"]  # fmt: skip
    g6 = next(line for line in lines if line.startswith("g6.xlarge "))
    assert g6.split() == ["g6.xlarge", f"1{X}", "L4", "TP1", "PP1", "1", "33,088", "25", "528", "82.9", "96.0", "167",
                          "0.80", "1", "1.341", "met"]  # fmt: skip
    assert " ".join(out.split()).count(" ".join(COST_FORMULA.split())) == 1


def test_help_states_the_formula_the_table_uses(capsys: pytest.CaptureFixture[str]) -> None:
    """`plan --help` gives the formula the ranking computes (time per output token, chunked prefill included), not
    one on the inter-token latency; and the chart's axis as the chart draws it."""
    code, out, _ = run(capsys, "plan", "--help")
    text = " ".join(out.split())
    assert code == 0 and " ".join(COST_FORMULA.split()) in text and "ITL ms" not in text
    assert "cost per million output tokens against the time-per-output-token estimate" in text


def test_compare_json_is_the_same_rows(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--model", LLAMA_8B, "--max-model-len", "8192", "--compare", "--json")
    assert code == 0
    body = json.loads(out)
    assert body["rows"] == [r.to_dict() for r in compare(SMALL)]
    assert body["cost_formula"] == COST_FORMULA


def test_compare_chart_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    chart = tmp_path / "cost.svg"
    code, out, _ = run(capsys, "plan", "--model", LLAMA_70B, "--weight-format", "fp8", "--max-model-len", "16384",
                       "--target-concurrency", "32", "--compare", "--chart", str(chart))  # fmt: skip
    assert code == 0 and out.splitlines()[-1] == f"Chart: {chart}"
    root = ET.parse(chart).getroot()
    rows = [r for r in compare(BIG) if r.usd_per_million_output_tokens is not None]
    circles = root.findall(f".//{SVG}circle[@class='point']")
    assert sorted(c.get("data-label") or "" for c in circles) == sorted(r.instance_type for r in rows)
    x_axis, y_axis = root.find(f".//{SVG}g[@class='x-axis']"), root.find(f".//{SVG}g[@class='y-axis']")
    assert x_axis is not None and y_axis is not None
    tpot = [r.tpot_ms for r in rows]
    cost = [r.usd_per_million_output_tokens or 0.0 for r in rows]
    for g, values in ((x_axis, tpot), (y_axis, cost)):
        low, high = float(g.get("data-low", "nan")), float(g.get("data-high", "nan"))
        assert low <= min(values) and max(values) <= high
        # 1-2-5 log ticks: the extent is at most one tick step beyond the data at either end.
        assert low > min(values) / 2.5 and high < max(values) * 2.5
    # p5e.48xlarge has no on-demand price: said in the note, not plotted.
    assert any("no price, not plotted: p5e.48xlarge" in (t.text or "") for t in root.iter(f"{SVG}text"))
    assert not math.isnan(float(x_axis.get("data-low", "nan")))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--chart", "c.svg"], "llm-eks: error: --chart goes with --compare [LLMEKS-E600]\n"),
        (
            ["--compare", "--chart", "c.png"],
            "llm-eks: error: --chart: 'c.png' is not allowed; the chart is SVG: name the file *.svg [LLMEKS-E600]\n",
        ),
        (
            ["--compare", "--accelerator", "g6e.xlarge"],
            "llm-eks: error: --compare compares every instance type: leave out --accelerator [LLMEKS-E600]\n",
        ),
    ],
)
def test_compare_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert run(capsys, "plan", "--model", LLAMA_8B, *argv) == (2, "", message)


def test_compare_when_nothing_fits_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    # 141 GB of bf16 weights on one GPU: no one-GPU instance type holds them.
    code, out, err = run(capsys, "plan", "--model", LLAMA_70B, "--max-model-len", "8192", "--tensor-parallel-size",
                         "1", "--pipeline-parallel-size", "1", "--compare")  # fmt: skip
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith(
        "llm-eks: error: workload.tensor_parallel_size: 1 is not allowed; meta-llama/Llama-3.3-70B-Instruct at bf16 "
        f"does not fit max_model_len 8192 with TP1 {X} PP1 on g7e.2xlarge (96.0 GiB RTX-PRO-6000): "
    )
