"""Prop checks several charts share: Secrets Manager names, Hugging Face repo ids, model names and numbers
(quantities are in llm_eks.manifests.quantities, DNS names in llm_eks.manifests.labels)."""

from __future__ import annotations

import math
import re
from typing import TypeGuard

from llm_eks.errors import fail

HF_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
# Served model names are Hugging Face ids or plain names; no quotes or braces, so they read cleanly in PromQL.
MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,252}$")
# A LoRA adapter's name as clients send it in `model` (and vLLM parses `name=repo`): no '=', no space, no '/'.
LORA_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def whole_number(value: object) -> TypeGuard[int]:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def positive_number(value: object) -> bool:
    """A finite int or float above 0 that is not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def require_model_name(field_name: str, value: object) -> None:
    """A served model name, as the `model_name` label of every vLLM series carries it."""
    if not isinstance(value, str) or not MODEL_NAME.match(value):
        raise fail(
            field_name, value, "must be 1-253 characters of letters, digits and ._/:@+- starting with a letter or digit"
        )
