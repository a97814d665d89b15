"""Prop checks several charts share: Secrets Manager names, Hugging Face repo ids, model names and numbers
(quantities are in llm_eks.manifests.quantities, DNS names in llm_eks.manifests.labels)."""

from __future__ import annotations

import math
import re
from typing import TypeGuard

from llm_eks.error_codes import E400
from llm_eks.errors import fail

HF_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
# Served model names are Hugging Face ids or plain names; no quotes or braces, so they read cleanly in PromQL.
MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,252}$")
# A LoRA adapter's name as clients send it in `model` (and vLLM parses `name=repo`): no '=', no space, no '/'.
LORA_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# Hugging Face repo ids: org/name of letters, digits, '-', '_' and '.', at most 96 characters, no '--' or '..'
# (huggingface_hub's validate_repo_id).
HF_REPO_ID = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?/[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$")


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
            E400,
            field_name,
            value,
            "must be 1-253 characters of letters, digits and ._/:@+- starting with a letter or digit",
        )


def is_hf_repo_id(value: object) -> bool:
    """A Hugging Face repo id as the Hub accepts it (huggingface_hub's validate_repo_id): org/name, at most 96
    characters, no '--' or '..'. Such an id is also a safe relative path (models/<org>/<name>.json)."""
    return (
        isinstance(value, str)
        and len(value) <= 96
        and HF_REPO_ID.match(value) is not None
        and "--" not in value
        and ".." not in value
    )
