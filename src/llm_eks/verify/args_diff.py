"""How two `vllm serve` argument lists differ, flag by flag (order aside: argparse reads flags in any order), and
how two LLMConfigs differ, key by key."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_FLAG = re.compile(r"^--?[A-Za-z]")
POSITIONAL = "(model)"


def flags(args: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """`[model, --a, 1, --b, --c, x, y]` -> {"(model)": (model,), "--a": ("1",), "--b": (), "--c": ("x", "y")}.
    A repeated flag keeps its last values, as argparse does."""
    out: dict[str, tuple[str, ...]] = {}
    key, values = POSITIONAL, list[str]()
    for token in args:
        if _FLAG.match(token):
            if key != POSITIONAL or values:
                out[key] = tuple(values)
            key, values = token, []
        else:
            values.append(token)
    if key != POSITIONAL or values:
        out[key] = tuple(values)
    return out


def _show(values: tuple[str, ...]) -> str:
    return " ".join(values) if values else "(set)"


def args_difference(planned: Sequence[str], observed: Sequence[str]) -> str | None:
    """One phrase per difference (changed, extra, missing), or None when the flags are the same."""
    want, have = flags(planned), flags(observed)
    if want == have:
        return None
    parts = []
    for key, values in have.items():
        if key not in want:
            parts.append(" ".join(("extra", key, *values)))
        elif want[key] != values:
            parts.append(f"{key} {_show(values)} (planned {_show(want[key])})")
    parts += [" ".join(("missing", key, *values)) for key, values in want.items() if key not in have]
    return "; ".join(parts)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def config_difference(planned: Mapping[str, Any], observed: Mapping[str, Any]) -> str | None:
    """One phrase per key path that differs between two nested mappings, or None when they are equal."""
    want, have = _flatten(planned), _flatten(observed)
    if want == have:
        return None
    parts = [f"{k} {have[k]!r} (planned {want[k]!r})" for k in want if k in have and have[k] != want[k]]
    parts += [f"missing {k}" for k in want if k not in have]
    parts += [f"extra {k} {have[k]!r}" for k in have if k not in want]
    return "; ".join(parts)
