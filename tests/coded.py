"""`pytest.raises` for the errors a user sees, by their stable code (llm_eks.error_codes): a test pins the code, and
the sentence only where the sentence is the point."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from llm_eks.error_codes import ErrorCode
from llm_eks.errors import CodedError


@contextmanager
def raises_code(code: ErrorCode, match: str | None = None) -> Iterator[pytest.ExceptionInfo[CodedError]]:
    """The block raises an error with `code` (and, when given, a line `match` finds with re.search)."""
    with pytest.raises(CodedError, match=match) as info:
        yield info
    assert info.value.code is code, f"{info.value.code.id}, not {code.id}: {info.value}"
