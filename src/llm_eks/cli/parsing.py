"""The CLI's argument parser: argparse's complaints become our one-line errors, never usage text and a SystemExit."""

from __future__ import annotations

import argparse
from typing import NoReturn


class UsageError(Exception):
    """A bad command line; `main` prints it as one line and exits 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)
