"""Build frozen dataclasses from plain JSON (cdk.json context) with one-line errors.

Only what config needs: str, int, float, bool, Optional[...], tuple[X, ...], Mapping[str, X] (X may be Any),
and nested dataclasses. Unknown keys get a "did you mean" hint; a wrong type names the path, the value and the type
wanted.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from llm_eks.error_codes import E103, E104, E105
from llm_eks.errors import ConfigError, did_you_mean, fail

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def build(cls: type[T], data: Any, path: str, hidden: tuple[str, ...] = ()) -> T:
    """Instantiate dataclass `cls` from `data` (a mapping), checking keys and types recursively.

    `hidden` fields are filled by the caller, not the user, and are left out of the "allowed" list.
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise fail(E105, path, data, "must be an object")
    # Derived fields are filled by the loader after the build (e.g. a recorded model), never by the user.
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and not f.metadata.get("derived")}
    hints = typing.get_type_hints(cls)
    for key in data:
        if key not in fields:
            raise ConfigError(
                E103,
                f"{path}: unknown key {key!r}; {did_you_mean(key, fields)}"
                f"allowed: {', '.join(sorted(set(fields) - set(hidden)))}",
            )
    kwargs: dict[str, Any] = {}
    for name, field in fields.items():
        if name in data:
            kwargs[name] = _convert(hints[name], data[name], f"{path}.{name}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError(E104, f"{path}.{name}: missing; this field is required")
    return cls(**kwargs)


def _convert(hint: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _convert_union(typing.get_args(hint), value, path)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return build(hint, value, path)
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise fail(E105, path, value, "must be a list")
        item = typing.get_args(hint)[0]
        return tuple(_convert(item, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin in (Mapping, dict) or hint is dict:
        return _convert_mapping(typing.get_args(hint), value, path)
    if hint in _SCALARS:
        return _SCALARS[hint](value, path)
    if hint is Any:
        return value
    raise TypeError(f"unsupported config type {hint!r} at {path}")  # a bug in our dataclasses, not user input


def _convert_union(args: tuple[Any, ...], value: Any, path: str) -> Any:
    """`X | None` is X or null; a union of several types takes the first that converts (else the last error)."""
    if value is None and type(None) in args:
        return None
    non_none = [a for a in args if a is not type(None)]
    if len(non_none) == 1:
        return _convert(non_none[0], value, path)
    errors = []
    for arg in non_none:
        try:
            return _convert(arg, value, path)
        except ConfigError as err:
            errors.append(err)
    raise errors[-1]


def _convert_mapping(args: tuple[Any, ...], value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise fail(E105, path, value, "must be an object")
    # Mapping[str, Any] (model_spec) keeps its values for the owner to check; Mapping[str, str] (tags) checks here.
    value_hint = args[1] if len(args) == 2 else Any
    converted = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise fail(E105, path, k, "keys must be strings")
        converted[k] = _convert(value_hint, v, f"{path}.{k}")
    return types.MappingProxyType(converted)


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise fail(E105, path, value, "must be true or false")
    return value


def _int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(E105, path, value, "must be an integer")
    return _bounded(value, path)


def _float(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(E105, path, value, "must be a number")
    if isinstance(value, int):
        value = _bounded(value, path)
    if not math.isfinite(value):
        raise fail(E105, path, value, "must be a finite number")
    return float(value)


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise fail(E105, path, value, "must be a string")
    return value


_SCALARS: Mapping[Any, Callable[[Any, str], Any]] = {bool: _bool, int: _int, float: _float, str: _str}


def _bounded(value: int, path: str) -> int:
    """No config number needs more than 64 bits; bigger ones would overflow float() or repr() (4300 digits)."""
    if value.bit_length() > 63:
        raise ConfigError(
            E105,
            f"{path}: an integer of {value.bit_length()} bits is not allowed; must be between -2**63 and 2**63 - 1",
        )
    return value
