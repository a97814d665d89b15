"""The CLI's argument parser: argparse's complaints become our one-line errors, never usage text and a SystemExit."""

from __future__ import annotations

import argparse
from typing import NoReturn

from llm_eks.error_codes import E600
from llm_eks.errors import CodedError


class UsageError(CodedError):
    """A bad command line; `main` prints it as one line and exits 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(E600, message)
