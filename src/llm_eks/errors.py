"""The one error type for bad input, and the helpers that keep its messages in one shape.

A message is a single line naming the field, the value and what is allowed; app.py and the CLI print it and exit
non-zero instead of showing a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
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
