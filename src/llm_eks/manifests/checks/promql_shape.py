"""PROMQL: Every PromQL string (KEDA prometheus triggers' metadata.query, PrometheusRule rule exprs, every `expr` in
Grafana dashboards of ConfigMaps labelled grafana_dashboard) may use only current vLLM series names
(llm_eks.manifests.promql.check_promql is the one source of the name lists). A KEDA query must also
return at most one element of an instant vector: KEDA fails on more than one ("returned multiple
elements") and cannot decode a scalar result (its promQueryResult reads data.result as a list of
samples; kedacore/keda pkg/scalers/prometheus_scaler.go), so `scalar(...)` or a bare number at the top is
a finding too. The shape is proved by a small PromQL parser: aggregations without `by` (or `by` only
labels that are already gone) give one element, histogram_quantile drops `le` (so
`histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m])))` is one element), element-wise functions and
arithmetic with numbers keep the shape, one-to-one matching against a single label-free element (without
on/ignoring) stays single, `or vector(0)` keeps it single; a query the parser cannot read is a finding.
Alerts and dashboards may return many series; only their metric names are checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_eks.manifests.checks.findings import PROMQL, Finding
from llm_eks.manifests.checks.objects import group_kind, mapping_at, mappings_at, object_ref, value_at
from llm_eks.manifests.promql import check_promql


class PromQLError(ValueError):
    """The text is not PromQL this parser understands."""


_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<duration>(?:\d+(?:ms|s|m|h|d|w|y))+(?![A-Za-z0-9_:]))
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>==|!=|<=|>=|=~|!~|[-+*/%^<>=(),@{}\[\]])
    """,
    re.VERBOSE,
)
_AGGREGATIONS = frozenset(
    {"sum", "avg", "min", "max", "count", "group", "stddev", "stdvar", "quantile", "topk", "bottomk", "limitk"}
    | {"limit_ratio", "count_values"}
)
_SET_OPS = frozenset({"and", "or", "unless"})
_PRECEDENCE = {
    "or": 1,
    "and": 2,
    "unless": 2,
    "==": 3,
    "!=": 3,
    "<=": 3,
    ">=": 3,
    "<": 3,
    ">": 3,
    "+": 4,
    "-": 4,
    "*": 5,
    "/": 5,
    "%": 5,
    "atan2": 5,
    "^": 6,
}
# Functions whose result has one element per element of their (first) vector argument.
_ELEMENTWISE = frozenset(
    {
        *("abs", "ceil", "floor", "exp", "ln", "log2", "log10", "sqrt", "sgn", "round", "clamp", "clamp_min"),
        *("clamp_max", "deg", "rad", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "sin"),
        *("sinh", "tan", "tanh", "timestamp", "sort", "sort_desc", "sort_by_label", "sort_by_label_desc"),
        *("label_replace", "label_join", "rate", "irate", "increase", "delta", "idelta", "deriv", "resets"),
        *("predict_linear", "changes", "holt_winters", "double_exponential_smoothing", "avg_over_time"),
        *("min_over_time", "max_over_time", "sum_over_time", "count_over_time", "quantile_over_time"),
        *("stddev_over_time", "stdvar_over_time", "last_over_time", "first_over_time", "present_over_time"),
        *("mad_over_time", "ts_of_min_over_time", "ts_of_max_over_time", "ts_of_last_over_time", "info"),
        *("histogram_count", "histogram_sum", "histogram_avg", "histogram_stddev", "histogram_stdvar"),
        *("histogram_fraction", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "hour", "minute"),
        *("month", "year"),
    }
)


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


class _PromQL:
    """A small recursive-descent PromQL parser that computes the result shape, never the values."""

    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            if text[pos] in "{[":
                end = self._closing(text, pos)
                self.tokens.append(("matchers" if text[pos] == "{" else "range", text[pos + 1 : end]))
                pos = end + 1
                continue
            match = _TOKEN.match(text, pos)
            if not match:
                raise PromQLError(f"unexpected character {text[pos]!r} at offset {pos}")
            if match.lastgroup != "space":
                self.tokens.append((str(match.lastgroup), match.group()))
            pos = match.end()
        self.i = 0

    @staticmethod
    def _closing(text: str, start: int) -> int:
        """Index of the bracket closing text[start], skipping quoted strings (label values may hold any bracket)."""
        close = "}" if text[start] == "{" else "]"
        pos = start + 1
        while pos < len(text):
            c = text[pos]
            if c in "\"'`":
                match = _TOKEN.match(text, pos)
                if not match or match.lastgroup != "string":
                    raise PromQLError(f"unterminated string at offset {pos}")
                pos = match.end()
                continue
            if c == close:
                return pos
            if c in "{[":
                raise PromQLError(f"unexpected {c!r} at offset {pos}")
            pos += 1
        raise PromQLError(f"missing {close!r} for {text[start]!r} at offset {start}")

    def peek(self, offset: int = 0) -> tuple[str, str]:
        j = self.i + offset
        return self.tokens[j] if j < len(self.tokens) else ("eof", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token[0] == "eof" or (value is not None and token[1] != value):
            raise PromQLError(f"expected {value or 'more'} but found {token[1] or 'the end'}")
        self.i += 1
        return token

    def parse(self) -> _Shape:
        shape = self.expr(0)
        if self.peek()[0] != "eof":
            raise PromQLError(f"unexpected {self.peek()[1]!r}")
        return shape

    def expr(self, min_precedence: int) -> _Shape:
        left = self.unary()
        while True:
            kind, value = self.peek()
            op = value if kind in ("op", "ident") else ""
            precedence = _PRECEDENCE.get(op)
            if precedence is None or precedence < min_precedence:
                return left
            self.take()
            if self.peek()[1] == "bool":
                self.take()
            matching, group = self.modifiers()
            right = self.expr(precedence if op == "^" else precedence + 1)
            left = self.binary(op, left, right, matching, group)

    def modifiers(self) -> tuple[str | None, str | None]:
        matching = group = None
        if self.peek()[1] in ("on", "ignoring"):
            matching = self.take()[1]
            self.labels()
        if self.peek()[1] in ("group_left", "group_right"):
            group = self.take()[1]
            if self.peek()[1] == "(":
                self.labels()
        return matching, group

    def labels(self) -> frozenset[str]:
        self.take("(")
        names: set[str] = set()
        while self.peek()[1] != ")":
            kind, value = self.take()
            if kind not in ("ident", "string"):
                raise PromQLError(f"expected a label name but found {value!r}")
            names.add(value.strip("\"'`"))
            if self.peek()[1] == ",":
                self.take()
        self.take(")")
        return frozenset(names)

    @staticmethod
    def binary(op: str, left: _Shape, right: _Shape, matching: str | None, group: str | None) -> _Shape:
        if left.kind == "scalar" and right.kind == "scalar" and op not in _SET_OPS:
            return _SCALAR
        if left.kind not in ("scalar", "vector") or right.kind not in ("scalar", "vector"):
            raise PromQLError(f"operator {op} needs scalars or instant vectors")
        if op in _SET_OPS:
            if op != "or":
                return left
            if left.labels is None or right.labels is None:
                return _Shape("vector")
            return _Shape("vector", left.labels | right.labels)
        if left.kind == "scalar":
            return right
        if right.kind == "scalar":
            return left
        if group == "group_left":
            return left
        if group == "group_right":
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

    def unary(self) -> _Shape:
        if self.peek()[1] in ("-", "+"):
            self.take()
            return self.unary()
        return self.postfix(self.primary())

    def postfix(self, shape: _Shape) -> _Shape:
        while True:
            kind, value = self.peek()
            if kind == "range":
                self.take()
                if shape.kind != "vector" and ":" not in value:
                    raise PromQLError("a range selector needs an instant vector")
                shape = _Shape("matrix", shape.labels)
            elif value == "offset":
                self.take()
                if self.peek()[1] in ("-", "+"):
                    self.take()
                self.take()
            elif value == "@":
                self.take()
                if self.peek()[1] in ("-", "+"):
                    self.take()
                token = self.take()
                if token[1] in ("start", "end"):
                    self.take("(")
                    self.take(")")
            else:
                return shape

    def primary(self) -> _Shape:
        kind, value = self.take()
        if kind in ("number", "duration"):
            return _SCALAR
        if kind == "string":
            return _Shape("string")
        if kind == "matchers":
            return _Shape("vector")
        if value == "(":
            inner = self.expr(0)
            self.take(")")
            return inner
        if kind == "ident":
            lowered = value.lower()
            if lowered in ("inf", "nan"):
                return _SCALAR
            if value in _AGGREGATIONS and self.peek()[1] in ("(", "by", "without"):
                return self.aggregation(value)
            if self.peek()[1] == "(":
                return self.function(value)
            if self.peek()[0] == "matchers":
                self.take()
            return _Shape("vector")
        raise PromQLError(f"unexpected {value!r}")

    def arguments(self) -> list[_Shape]:
        self.take("(")
        args: list[_Shape] = []
        while self.peek()[1] != ")":
            args.append(self.expr(0))
            if self.peek()[1] == ",":
                self.take()
            elif self.peek()[1] != ")":
                raise PromQLError(f"expected ',' or ')' but found {self.peek()[1] or 'the end'}")
        self.take(")")
        return args

    def aggregation(self, op: str) -> _Shape:
        clause = grouping = None
        if self.peek()[1] in ("by", "without"):
            clause = self.take()[1]
            grouping = self.labels()
        # topk(1, v) keeps one element per group, like sum; a larger k keeps up to k.
        k_is_one = self.peek(1)[0] == "number" and float(self.peek(1)[1]) == 1 and self.peek(2)[1] == ","
        args = self.arguments()
        if clause is None and self.peek()[1] in ("by", "without"):
            clause = self.take()[1]
            grouping = self.labels()
        if not args or args[-1].kind != "vector":
            raise PromQLError(f"{op}() needs an instant vector")
        inner = args[-1]
        if op == "count_values":
            return _Shape("vector")
        if op == "limit_ratio" or (op in ("topk", "bottomk", "limitk") and not k_is_one):
            return inner if inner.single else _Shape("vector")
        return _Shape("vector", self._grouped(inner, clause, grouping))

    @staticmethod
    def _grouped(inner: _Shape, clause: str | None, grouping: frozenset[str] | None) -> frozenset[str] | None:
        if inner.single or clause is None:
            return frozenset()
        assert grouping is not None
        if clause == "by":
            return grouping if inner.labels is None else grouping & inner.labels
        return None if inner.labels is None else inner.labels - grouping

    def function(self, name: str) -> _Shape:
        args = self.arguments()
        vectors = [a for a in args if a.kind in ("vector", "matrix")]
        if name in ("scalar", "time", "pi"):
            return _SCALAR
        if name in ("vector", "absent", "absent_over_time"):
            return _ONE
        if name == "histogram_quantile":
            if len(args) != 2 or args[1].kind != "vector":
                raise PromQLError("histogram_quantile(φ, v) needs a number and an instant vector")
            labels = args[1].labels
            return _Shape("vector", None if labels is None else labels - {"le"})
        if name in _ELEMENTWISE:
            if not vectors:
                return _ONE  # minute(), hour()... default to vector(time())
            return _Shape("vector", vectors[0].labels)
        return _Shape("vector")


def _keda_shape(query: str) -> tuple[str, str] | None:
    """(problem, fix) when a KEDA Prometheus query may not return at most one element of an instant vector."""
    try:
        shape = _PromQL(query).parse()
    except PromQLError as err:
        return f"cannot be parsed as PromQL ({err})", "correct the query's syntax"
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
    found = _keda_shape(query)
    return found[0] if found else None


def _name_findings(ref: str, where: str, expr: str) -> Iterator[Finding]:
    for line in check_promql(expr):
        problem, sep, fix = line.partition("; ")
        if not sep:
            fix = "use a current vLLM series name (llm_eks.manifests.promql.CURRENT_VLLM_METRICS)"
        yield Finding(PROMQL, ref, f"{where} {problem}", fix)


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
                yield from _name_findings(ref, where, query)
                shape = _keda_shape(query)
                if shape is not None:
                    yield Finding(PROMQL, ref, f"{where} {shape[0]}", shape[1])
        elif group == "monitoring.coreos.com" and kind == "PrometheusRule":
            for rule_group in mappings_at(spec, "groups"):
                for rule in mappings_at(rule_group, "rules"):
                    expr = rule.get("expr")
                    if isinstance(expr, str):
                        name = rule.get("alert") or rule.get("record") or "?"
                        yield from _name_findings(ref, f"rule {name}:", expr)
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
                    yield from _name_findings(ref, f"dashboard {key}:", expr)
