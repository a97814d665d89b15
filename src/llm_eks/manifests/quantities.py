"""Kubernetes resource quantities ("8", "500m", "32Gi"): read leniently from any object, or checked strictly as a
chart prop."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from llm_eks.error_codes import E400
from llm_eks.errors import ConfigError

# Every form the API server accepts (sign, decimal exponent, n/u suffixes).
_ANY_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:[eE]([+-]?\d+))?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
# The plain forms chart props take.
_PROP_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_SUFFIX: dict[str | None, Fraction] = {
    None: Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    **{suffix: Fraction(10 ** (3 * power)) for power, suffix in enumerate("kMGTPE", start=1)},
    **{suffix + "i": Fraction(2 ** (10 * power)) for power, suffix in enumerate("KMGTPE", start=1)},
}


def quantity(value: Any) -> Fraction | None:
    """A Kubernetes quantity ("8", "500m", "32Gi", 4) as an exact number; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Fraction(value)
    match = _ANY_QUANTITY.match(value) if isinstance(value, str) else None
    if not match:
        return None
    number = Fraction(match.group(1)) * _SUFFIX[match.group(3)]
    if match.group(2):
        number *= Fraction(10) ** int(match.group(2))
    return number


def parse_quantity(field_name: str, value: str) -> Fraction:
    """A chart prop's quantity as an exact number, or a ConfigError naming the field."""
    number = quantity(value) if isinstance(value, str) and _PROP_QUANTITY.match(value) else None
    if number is None:
        raise ConfigError(
            E400, f"{field_name}: {value!r} is not allowed; must be a Kubernetes quantity such as 8, 500m or 32Gi"
        )
    return number
