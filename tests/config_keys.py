"""Every key cdk.json accepts, with its default and whether it is required, read from the typed config's dataclasses
(the same fields `llm_eks.config.schema.build` reads). Paths are under `environments.<env>` (`gateway.auth.mode`);
the promotion pipeline's under `pipeline.`. `workloads.<name>` takes the same keys as `workload`, so only
`workload.…` is listed; a `<name>` step stands for a map's key (`capacity_reservations.<family>.…`).

Run as a script (`python tests/config_keys.py`) it prints the table as JSON for whichever llm_eks is first on the
Python path: tests/baseline.py runs it against a previous release's source to record that release's keys.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
import types
import typing
from collections.abc import Mapping
from typing import Any

Key = dict[str, Any]


def _json(value: Any) -> Any:
    """A default as cdk.json would write it."""
    if isinstance(value, enum.Enum):
        return _json(value.value)
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


def _dataclass_in(hint: Any) -> type[Any] | None:
    """The dataclass a field holds (itself, or inside `X | None`), else None."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _dataclass_in(inner[0]) if len(inner) == 1 else None
    return None


def _walk(cls: type[Any], prefix: str, out: dict[str, Key], skip: frozenset[str]) -> None:
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if not field.init or field.metadata.get("derived") or prefix + field.name in skip:
            continue
        path = prefix + field.name
        hint = hints[field.name]
        if field.default is not dataclasses.MISSING:
            default: Any = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            default = dataclasses.MISSING
        nested = _dataclass_in(hint)
        out[path] = {
            "required": default is dataclasses.MISSING,
            "default": None if default is dataclasses.MISSING or dataclasses.is_dataclass(default) else _json(default),
        }
        if nested is not None:
            _walk(nested, path + ".", out, skip)
        elif typing.get_origin(hint) in (Mapping, dict) and (value := _dataclass_in(typing.get_args(hint)[-1])):
            _walk(value, path + ".<name>.", out, skip)


def config_keys() -> dict[str, Key]:
    """path -> {"required": bool, "default": JSON value or None} for every key of an environment and the pipeline."""
    from llm_eks.config.environment import EnvironmentConfig
    from llm_eks.config.pipeline import PipelineConfig

    out: dict[str, Key] = {}
    # name: the environment's key in `environments`; workloads.<name>: the same keys as workload.
    _walk(EnvironmentConfig, "", out, frozenset({"name", "workloads"}))
    out["workloads"] = {"required": False, "default": {}}
    _walk(PipelineConfig, "pipeline.", out, frozenset())
    return dict(sorted(out.items()))


if __name__ == "__main__":
    json.dump(config_keys(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
