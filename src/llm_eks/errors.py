"""The errors a user sees, and the helpers that keep their messages in one shape.

Each carries a stable code from `llm_eks.error_codes` (listed with its meaning and fix on the errors reference page)
and a single-line message naming the field, the value and what is allowed. `str()` is the message followed by the
code in brackets, `workloads.chat.replicas.min: 0 is not allowed; must be at least 1 [LLMEKS-E122]`: app.py and the
CLI print that one line and exit non-zero instead of showing a traceback; a program or test reads `.code` and
`.message`.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from llm_eks.error_codes import ErrorCode


class CodedError(Exception):
    """An error a user sees: a stable `code` and a one-line `message`."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.message} [{self.code.id}]"


class ConfigError(CodedError, ValueError):
    """Bad input: configuration, plan request or construct props."""


def fail(code: ErrorCode, path: str, value: Any, allowed: str) -> ConfigError:
    """The one error shape: `<path>: <value> is not allowed; <what is allowed>`."""
    return ConfigError(code, f"{path}: {value!r} is not allowed; {allowed}")


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
    """Re-raise a ConfigError raised inside as `<path>: <message>` with its code, once: an error a nested construct
    already named keeps its own (deeper, more precise) path."""
    try:
        yield
    except ConstructError:
        raise
    except ConfigError as err:
        raise ConstructError(err.code, f"{path}: {err.message}") from None


def named_errors(init: Callable[..., None]) -> Callable[..., None]:
    """Decorator for a construct's `__init__(self, scope, id, ...)`: bad props (and any ConfigError raised while
    building it) come out as one line naming the construct, e.g. `LlmEks-dev/Karpenter: replicas: 0 is not allowed;
    ...`, so a user with several Karpenters or add-ons sees which one is wrong."""

    @functools.wraps(init)
    def wrapper(self: Any, scope: Any, id: str, *args: Any, **kwargs: Any) -> None:
        with errors_at(construct_path(scope, id)):
            init(self, scope, id, *args, **kwargs)

    return wrapper
