"""YAML data compared with its types spelled out: what two readers built must be the same, not merely equal."""

from __future__ import annotations

import datetime
import math
from typing import Any


def canonical(value: Any) -> Any:
    """``value`` with its types spelled out, so that 1, 1.0 and True differ and NaN equals NaN."""
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    if isinstance(value, list):
        return ("list", [canonical(item) for item in value])
    if isinstance(value, tuple):
        return ("tuple", [canonical(item) for item in value])
    if isinstance(value, dict):
        return ("dict", [(canonical(k), canonical(v)) for k, v in value.items()])
    if isinstance(value, set):
        return ("set", sorted(repr(canonical(item)) for item in value))
    if isinstance(value, datetime.datetime | datetime.date):
        return (type(value).__name__, repr(value))
    return (type(value).__name__, value)
