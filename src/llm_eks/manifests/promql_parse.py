"""PromQL text to an AST, through `promql-parser` (Python bindings of GreptimeTeam's Rust PromQL parser, modelled on
Prometheus's own grammar and type checks: unknown functions, wrong argument types and range vectors where an instant
vector belongs are parse errors). The name checks (llm_eks.manifests.promql) and the KEDA shape check
(llm_eks.manifests.checks.promql_shape) read this AST.

Grafana dashboards hold PromQL with Grafana template variables (`$__rate_interval`, `$var`, `${var:format}`,
`[[var]]`), which Grafana replaces before Prometheus sees the query. `parse_promql` reads each one as Grafana would send
it: a duration inside a range (`[$__rate_interval]`) or after `offset`, a timestamp after `@`, a label name in a
`by (...)`-style list, and elsewhere a series name, or a number if the query parses only that way (`topk($n, ...)`).
Variables inside string literals are label values and stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import promql_parser


class PromQLError(ValueError):
    """The text is not PromQL (the message is the parser's reason)."""


# A string literal (left as is) or a Grafana variable reference outside one.
_STRING_OR_VARIABLE = re.compile(
    r"""(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)"""
    r"|(?P<variable>\[\[[A-Za-z0-9_.:]+\]\]|\$\{[^}\s]*\}|\$[A-Za-z_][A-Za-z0-9_]*)"
)
_AFTER_OFFSET = re.compile(r"\boffset\s*-?$")
# Inside a label list: by (...), without (...), on (...), ignoring (...), group_left (...), group_right (...).
_IN_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*$")
# Stand-ins for a variable outside a range, tried in this order.
_SERIES_STAND_IN = "grafana_variable"
_NUMBER_STAND_IN = "1"


def _substitute_variables(expr: str, stand_in: str) -> str:
    """`expr` with every Grafana variable outside a string replaced by a value of the kind its position needs."""
    out: list[str] = []
    depth = pos = 0
    for match in _STRING_OR_VARIABLE.finditer(expr):
        code = expr[pos : match.start()]
        depth += code.count("[") - code.count("]")
        out.append(code)
        pos = match.end()
        if match.lastgroup == "string":
            out.append(match.group())
            continue
        before = "".join(out).rstrip()
        if depth > 0 or _AFTER_OFFSET.search(before):
            out.append("5m")
        elif before.endswith("@"):
            out.append("0")
        elif _IN_LABEL_LIST.search(before):
            out.append(_SERIES_STAND_IN)
        else:
            out.append(stand_in)
    out.append(expr[pos:])
    return "".join(out)


def parse_promql(expr: str) -> promql_parser.Expr:
    """The AST of a PromQL expression (Grafana variables read as the module docstring says); PromQLError when the
    text is not PromQL."""
    try:
        return promql_parser.parse(expr)
    except ValueError as err:
        if not any(m.lastgroup == "variable" for m in _STRING_OR_VARIABLE.finditer(expr)):
            raise PromQLError(str(err)) from None
        first = err
    for stand_in in (_SERIES_STAND_IN, _NUMBER_STAND_IN):
        try:
            return promql_parser.parse(_substitute_variables(expr, stand_in))
        except ValueError:
            continue
    raise PromQLError(str(first)) from None


def selector_names(ast: promql_parser.Expr) -> list[str]:
    """The metric names the expression selects, in order: selector names and `{__name__="..."}` matchers (regex
    matchers name no single series). Label values and function names are never metric names here."""
    names: list[str] = []

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name is not None:
                names.append(node.name)
            names.extend(_name_matchers(node.matchers))

    promql_parser.walk(ast, pre_visit=visit)
    return names


def _name_matchers(matchers: promql_parser.Matchers) -> Iterator[str]:
    groups = [matchers.matchers, *matchers.or_matchers]
    for group in groups:
        for matcher in group:
            if matcher.name == "__name__" and matcher.op == promql_parser.MatchOp.Equal:
                yield matcher.value
