"""The one error type for bad input, and the helpers that keep its messages in one shape.

A message is a single line naming the field, the value and what is allowed; app.py and the CLI print it and exit
non-zero instead of showing a traceback.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any


class ConfigError(ValueError):
    """Bad input: configuration, plan request or construct props."""


def fail(path: str, value: Any, allowed: str) -> ConfigError:
    """The one error shape: `<path>: <value> is not allowed; <what is allowed>`."""
    return ConfigError(f"{path}: {value!r} is not allowed; {allowed}")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`did you mean 'x'? ` for the closest choice, or nothing."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


class ConstructError(ConfigError):
    """A ConfigError whose message already starts with the path of the construct that raised it."""


def construct_path(scope: Any, id: str) -> str:
    """The path a construct `id` gets under `scope` (`LlmEks-dev/Karpenter`), known before the construct exists."""
    parent = scope.node.path
    return f"{parent}/{id}" if parent else id


@contextmanager
def errors_at(path: str) -> Iterator[None]:
    """Re-raise a ConfigError raised inside as `<path>: <message>`, once: an error a nested construct already named
    keeps its own (deeper, more precise) path."""
    try:
        yield
    except ConstructError:
        raise
    except ConfigError as err:
        raise ConstructError(f"{path}: {err}") from None


def named_errors(init: Callable[..., None]) -> Callable[..., None]:
    """Decorator for a construct's `__init__(self, scope, id, ...)`: bad props (and any ConfigError raised while
    building it) come out as one line naming the construct, e.g. `LlmEks-dev/Karpenter: replicas: 0 is not allowed;
    ...`, so a user with several Karpenters or add-ons sees which one is wrong."""

    @functools.wraps(init)
    def wrapper(self: Any, scope: Any, id: str, *args: Any, **kwargs: Any) -> None:
        with errors_at(construct_path(scope, id)):
            init(self, scope, id, *args, **kwargs)

    return wrapper
