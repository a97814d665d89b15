"""Read JSON strictly (cdk.json, recorded models): a key written twice, or a number no float can hold, is a one-line
ConfigError naming its path instead of a silent loss.

Python's json and the CDK CLI's JSON.parse both keep only the last of two equal keys, so an environment written
twice silently loses its first body. `1e400` parses to infinity, and the CDK CLI hands it to the app as null
(JSON.stringify(Infinity) is "null"), so the app would report None. The CDK CLI reads cdk.json and passes the app
only the merged context, so the app and `llm-eks plan --env` re-read the file themselves with this module.
Pure Python (no aws_cdk): config, the Hub records and the CLI use it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llm_eks.error_codes import E100, E101
from llm_eks.errors import ConfigError, fail


class _Object(dict[str, Any]):
    """A JSON object that remembers the keys it was given more than once (json keeps the last value)."""

    duplicates: tuple[str, ...] = ()


class _Unrepresentable(float):
    """A number a float cannot hold (1e400, -1e400, a 5000-digit integer; NaN and Infinity, which Python's json
    accepts): keeps the text the user wrote."""

    text: str

    def __new__(cls, text: str) -> _Unrepresentable:
        number = super().__new__(cls, "nan" if text == "NaN" else "-inf" if text.startswith("-") else "inf")
        number.text = text
        return number

    def __repr__(self) -> str:
        return self.text


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object()
    seen = []
    for key, value in pairs:
        if key in obj:
            seen.append(key)
        obj[key] = value
    obj.duplicates = tuple(seen)
    return obj


def _float(text: str) -> float:
    value = float(text)
    return value if math.isfinite(value) else _Unrepresentable(text)


def _int(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:  # over Python's 4300-digit limit for int(str)
        return _Unrepresentable(text)


def loads(text: str, source: str, root: str = "") -> Any:
    """Parse JSON `text`; duplicate keys and numbers no float holds are ConfigErrors with their path under `root`
    (a leading `context.` is dropped, so cdk.json errors read like every other config error)."""
    try:
        data = _parse(text)
    except json.JSONDecodeError as err:
        raise ConfigError(E100, f"{source}: not JSON (line {err.lineno}: {err.msg})") from None
    return _plain(data, root, source)


def _parse(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_object, parse_float=_float, parse_int=_int, parse_constant=_float)


def _plain(value: Any, path: str, source: str) -> Any:
    """`value` as plain dicts, lists and numbers, after checking it (depth first, in file order)."""
    if isinstance(value, _Unrepresentable):
        why = (
            "NaN and Infinity are not JSON"
            if value.text.lstrip("-") in ("NaN", "Infinity")
            else "too large for a 64-bit float: JSON readers make it infinity"
        )
        raise fail(E101, path or "(top level)", value, f"must be a finite number ({why})")
    if isinstance(value, list):
        return [_plain(item, f"{path}[{i}]", source) for i, item in enumerate(value)]
    if not isinstance(value, _Object):
        return value
    result = {}
    for key, item in value.items():
        child = key if not path or path == "context" else f"{path}.{key}"
        if key in value.duplicates:
            raise ConfigError(
                E101,
                f"{child}: given twice in {source}; JSON keeps only the last, so the first would be silently "
                "ignored: write each key once",
            )
        result[key] = _plain(item, child, source)
    return result


def read_context_file(path: Path, label: str) -> Mapping[str, Any]:
    """The CDK context of a cdk.json (its `context` object; a file holding only the context also works).

    `label` names the file in errors (`--context-file`, `cdk.json`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            E100, f"{label}: {str(path)!r} does not exist; run from the project root or pass it"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(E100, f"{label}: {str(path)!r} cannot be read ({err.__class__.__name__})") from None
    try:
        parsed = _parse(text)
    except json.JSONDecodeError as err:
        raise ConfigError(E100, f"{label}: {str(path)!r} is not JSON (line {err.lineno}: {err.msg})") from None
    data = _plain(parsed, "", path.name)
    if not isinstance(data, dict):
        return {}
    context = data.get("context", data)
    return context if isinstance(context, Mapping) else {}
