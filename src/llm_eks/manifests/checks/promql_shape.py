"""PROMQL: Every PromQL string (KEDA prometheus triggers' metadata.query, PrometheusRule rule exprs, every `expr` in
Grafana dashboards of ConfigMaps labelled grafana_dashboard) must parse and may use only current vLLM series names
(llm_eks.manifests.promql.check_promql is the one source of the name lists). A KEDA query must also
return at most one element of an instant vector: KEDA fails on more than one ("returned multiple
elements") and cannot decode a scalar result (its promQueryResult reads data.result as a list of
samples; kedacore/keda pkg/scalers/prometheus_scaler.go), so `scalar(...)` or a bare number at the top is
a finding too. The shape is computed on promql-parser's AST (llm_eks.manifests.promql_parse): aggregations without
`by` (or `by` only labels that are already gone) give one element, histogram_quantile drops `le` (so
`histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m])))` is one element), other functions returning a vector
keep one element per element of their vector argument, arithmetic with numbers keeps the shape, one-to-one matching
against a single label-free element (without on/ignoring) stays single, `or vector(0)` keeps it single; a query that
does not parse is a finding. Alerts and dashboards may return many series; only their names are checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import promql_parser as ast

from llm_eks.manifests.checks.findings import PROMQL, Finding
from llm_eks.manifests.checks.objects import group_kind, mapping_at, mappings_at, object_ref, value_at
from llm_eks.manifests.promql import name_problems, unparsable
from llm_eks.manifests.promql_parse import PromQLError, parse_promql, selector_names

_SET_OPS = frozenset({"and", "or", "unless"})
# Aggregations that keep up to k elements per group (one only when k is the number 1).
_K_AGGREGATIONS = frozenset({"topk", "bottomk", "limitk"})


@dataclass(frozen=True)
class _Shape:
    """What an expression returns: a scalar/string, or a (range) vector whose elements are told apart by at most
    `labels` (None: by any labels, i.e. one element per series)."""

    kind: str  # "scalar", "string", "vector", "matrix"
    labels: frozenset[str] | None = None

    @property
    def single(self) -> bool:
        return self.kind == "vector" and self.labels == frozenset()


_SCALAR = _Shape("scalar")
_ONE = _Shape("vector", frozenset())
_ANY = _Shape("vector")


def _shape(node: ast.Expr) -> _Shape:
    """The result shape of a parsed expression (the parser has already checked the argument and operand types)."""
    if isinstance(node, ast.NumberLiteral):
        return _SCALAR
    if isinstance(node, ast.StringLiteral):
        return _Shape("string")
    if isinstance(node, ast.VectorSelector):
        return _ANY
    if isinstance(node, ast.MatrixSelector):
        return _Shape("matrix")
    if isinstance(node, ast.SubqueryExpr):
        return _Shape("matrix", _shape(node.expr).labels)
    if isinstance(node, ast.ParenExpr | ast.UnaryExpr):
        return _shape(node.expr)
    if isinstance(node, ast.AggregateExpr):
        return _aggregation(node)
    if isinstance(node, ast.Call):
        return _call(node)
    if isinstance(node, ast.BinaryExpr):
        return _binary(node)
    raise PromQLError(f"unsupported expression {type(node).__name__}")


def _aggregation(node: ast.AggregateExpr) -> _Shape:
    op = str(node.op)
    inner = _shape(node.expr)
    if op == "count_values":
        return _ANY
    k_is_one = isinstance(node.param, ast.NumberLiteral) and node.param.val == 1
    if op == "limit_ratio" or (op in _K_AGGREGATIONS and not k_is_one):
        return inner if inner.single else _ANY
    modifier = node.modifier
    if inner.single or modifier is None:
        return _ONE
    grouping = frozenset(modifier.labels)
    if modifier.type == ast.AggModifierType.By:
        return _Shape("vector", grouping if inner.labels is None else grouping & inner.labels)
    return _Shape("vector", None if inner.labels is None else inner.labels - grouping)


def _call(node: ast.Call) -> _Shape:
    name = node.func.name
    if node.func.return_type == ast.ValueType.Scalar:
        return _SCALAR
    if name in ("vector", "absent", "absent_over_time"):
        return _ONE
    shapes = [_shape(arg) for arg in node.args]
    if name == "histogram_quantile":
        labels = shapes[1].labels
        return _Shape("vector", None if labels is None else labels - {"le"})
    # Every other vector function returns one element per element of its vector argument.
    vectors = [s for s in shapes if s.kind in ("vector", "matrix")]
    return _Shape("vector", vectors[0].labels) if vectors else _ONE  # minute(), hour()... read vector(time())


def _binary(node: ast.BinaryExpr) -> _Shape:
    op = str(node.op)
    left, right = _shape(node.lhs), _shape(node.rhs)
    modifier = node.modifier
    matching = modifier.matching if modifier is not None else None
    card = modifier.card if modifier is not None else None
    if left.kind == "scalar" and right.kind == "scalar":
        return _SCALAR
    if op in _SET_OPS:
        if op != "or":
            return left
        if left.labels is None or right.labels is None:
            return _ANY
        return _Shape("vector", left.labels | right.labels)
    if left.kind == "scalar":
        return right
    if right.kind == "scalar":
        return left
    if card == ast.VectorMatchCardinality.ManyToOne:
        return left
    if card == ast.VectorMatchCardinality.OneToMany:
        return right
    if left.single and right.single:
        return _ONE
    # One-to-one matching on full label sets: a single, label-free element pairs with at most one element of the
    # other side. With on()/ignoring() several elements of the other side can share its signature, which
    # Prometheus rejects ("many-to-one matching must be explicit"), so that shape is not proved single.
    if matching is None and (left.single or right.single):
        return _ONE
    if left.single:
        return right
    return left if left.labels is not None or right.single else right


_FIX_SYNTAX = "correct the query's syntax"


def _shape_problem(tree: ast.Expr) -> tuple[str, str] | None:
    """(problem, fix) when a KEDA Prometheus query may not return at most one element of an instant vector."""
    shape = _shape(tree)
    if shape.single:
        return None
    if shape.kind in ("scalar", "string"):
        return (
            f"returns a {shape.kind}, which KEDA cannot decode (it reads the result as a list of vector samples); "
            "KEDA reports an error instead of a value",
            "return a one-element vector: sum(...) instead of scalar(...), or vector(<scalar>)",
        )
    if shape.kind == "matrix":
        return (
            "returns a range vector, which KEDA reads as empty (0)",
            "reduce it over time (rate, max_over_time...) and wrap it in sum(...)",
        )
    per = "series" if shape.labels is None else ", ".join(sorted(shape.labels))
    return (
        f"can return one element per {per}; KEDA fails with 'returned multiple elements' when more than one exists",
        "wrap it in sum(...) (or another aggregation without by)",
    )


def promql_shape_problem(query: str) -> str | None:
    """Why a KEDA Prometheus query may not return at most one element of an instant vector; None when it always does."""
    try:
        found = _shape_problem(parse_promql(query))
    except PromQLError as err:
        return unparsable(err)
    return found[0] if found else None


def _expr_findings(ref: str, where: str, expr: str, *, keda: bool = False) -> Iterator[Finding]:
    """Findings for one expression: it does not parse, or its names (then, for KEDA, its shape)."""
    try:
        tree = parse_promql(expr)
    except PromQLError as err:
        yield Finding(PROMQL, ref, f"{where} {unparsable(err)}", _FIX_SYNTAX)
        return
    for line in name_problems(selector_names(tree)):
        problem, sep, fix = line.partition("; ")
        if not sep:
            fix = "use a current vLLM series name (llm_eks.manifests.promql.CURRENT_VLLM_METRICS)"
        yield Finding(PROMQL, ref, f"{where} {problem}", fix)
    shape = _shape_problem(tree) if keda else None
    if shape is not None:
        yield Finding(PROMQL, ref, f"{where} {shape[0]}", shape[1])


def _exprs(node: Any) -> Iterator[str]:
    """Every `expr` string in a Grafana dashboard (panels, nested rows, targets)."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            else:
                yield from _exprs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _exprs(value)


def check_promql_objects(objects: Sequence[Mapping[str, Any]]) -> Iterator[Finding]:
    """PROMQL findings for KEDA triggers, PrometheusRules and Grafana dashboard ConfigMaps."""
    for obj in objects:
        group, kind = group_kind(obj)
        ref = object_ref(obj)
        spec = mapping_at(obj, "spec")
        if group == "keda.sh" and kind in ("ScaledObject", "ScaledJob"):
            for i, trigger in enumerate(mappings_at(spec, "triggers")):
                query = value_at(trigger, "metadata", "query")
                if trigger.get("type") != "prometheus" or not isinstance(query, str):
                    continue
                where = f"trigger {trigger.get('name') or i} query {query!r}:"
                yield from _expr_findings(ref, where, query, keda=True)
        elif group == "monitoring.coreos.com" and kind == "PrometheusRule":
            for rule_group in mappings_at(spec, "groups"):
                for rule in mappings_at(rule_group, "rules"):
                    expr = rule.get("expr")
                    if isinstance(expr, str):
                        name = rule.get("alert") or rule.get("record") or "?"
                        yield from _expr_findings(ref, f"rule {name}:", expr)
        elif (group, kind) == ("", "ConfigMap") and "grafana_dashboard" in mapping_at(obj, "metadata", "labels"):
            for key, text in mapping_at(obj, "data").items():
                if not str(key).endswith(".json"):
                    continue
                try:
                    dashboard = json.loads(text)
                except (TypeError, ValueError) as err:
                    yield Finding(PROMQL, ref, f"dashboard {key} is not valid JSON ({err})", "fix the dashboard JSON")
                    continue
                for expr in dict.fromkeys(_exprs(dashboard)):
                    yield from _expr_findings(ref, f"dashboard {key}:", expr)
