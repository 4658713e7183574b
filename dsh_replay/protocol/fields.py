"""Checked reads from parsed YAML/JSON documents: every error names the field's path.

Cassettes and options files are edited by hand and written by other tools, so a
field is checked where it is read. A wrong one is reported by its path in the
document (``interactions[0].response.status.code``, ``options.messages[2].role``),
never by the Python error it would cause later. The caller turns
:class:`FieldError` into its own error, naming the file.
"""

from __future__ import annotations

import difflib
import math
import re
import reprlib
from collections.abc import Callable, Collection, Mapping
from typing import Any

__all__ = [
    "MISSING",
    "FieldError",
    "check",
    "is_header_name",
    "is_int",
    "is_list",
    "is_mapping",
    "is_name",
    "is_number",
    "is_text",
    "or_null",
    "plain_json",
    "read",
    "refuse_unknown",
    "shown",
]

MISSING: Any = object()


class FieldError(ValueError):
    """A field with the wrong type or value: "<path> must be <what>, got <value>"."""


# Error messages echo a bad value, but a 400-digit int or a pasted document should
# not fill the terminal; URLs are long, so strings get more room than reprlib's 30.
_REPR = reprlib.Repr()
_REPR.maxstring = 120
_REPR.maxlong = 40
_REPR.maxother = 80

# An HTTP header name (an RFC 9110 token): no ':', space, CR or LF.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def shown(value: object) -> str:
    """``repr(value)`` cut to a length that fits in an error message."""
    return _REPR.repr(value)


def check(value: Any, where: str, what: str, ok: Callable[[Any], bool]) -> Any:
    """``value`` if ``ok(value)``; else :class:`FieldError` saying what ``where`` must be."""
    if value is MISSING or not ok(value):
        raise _wrong(value, where, what)
    return value


def read(
    raw: Mapping[str, Any], key: str, where: str, what: str, ok: Callable[[Any], bool], default: Any = MISSING
) -> Any:
    """``raw[key]`` checked by :func:`check`; without a ``default`` the field is required."""
    value = raw.get(key, default)
    if value is MISSING or not ok(value):
        # the path is spelt out only when it is shown: a document has thousands of good fields
        raise _wrong(value, f"{where}.{key}", what)
    return value


def _wrong(value: Any, where: str, what: str) -> FieldError:
    got = "nothing (the field is missing)" if value is MISSING else shown(value)
    return FieldError(f"{where} must be {what}, got {got}")


def refuse_unknown(raw: Mapping[str, Any], where: str, known: Collection[str]) -> None:
    """A field ``raw`` does not know is an error: a misspelt one would be dropped unseen."""
    for name in raw:
        if name not in known:
            close = difflib.get_close_matches(str(name), list(known), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise FieldError(f"{where} has an unknown field {name!r}{hint}; known: {', '.join(known)}")


def or_null(ok: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or ok(value)


def is_mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)  # the ABC check is the slow one


def is_list(value: Any) -> bool:
    return isinstance(value, list)


def is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def is_text(value: Any) -> bool:
    return isinstance(value, str)


def is_int(value: Any, low: int = -(2**63), high: float = float("inf")) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def is_header_name(value: Any) -> bool:
    return isinstance(value, str) and _HEADER_NAME.fullmatch(value) is not None


def is_number(value: Any, low: float = float("-inf"), high: float = float("inf")) -> bool:
    # the range test also refuses NaN
    return isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high


def plain_json(value: Any, where: str) -> Any:
    """``value`` as plain JSON values: dict, list, str, int, float, bool, None.

    Subclasses (a ``StrEnum`` model name, an ``IntEnum`` in a schema) become their
    plain values, so that what is sent, stored in a cassette and dumped as YAML is
    the same. Anything that is not JSON (a set, an object, NaN) is a
    :class:`FieldError` naming where it is.
    """
    try:
        return _copy_plain(value)
    except _NotPlain:
        return _plain_json(value, where)


class _NotPlain(Exception):
    """A value :func:`_copy_plain` leaves to the full conversion."""


def _copy_plain(value: Any) -> Any:
    # The common case, values of the exact JSON types, copied without spelling out
    # a path per key; anything else goes to _plain_json, which names where it is.
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float and math.isfinite(value):
        return value
    if kind is dict:
        copied = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            copied[key] = _copy_plain(item)
        return copied
    if kind is list or kind is tuple:
        return [_copy_plain(item) for item in value]
    raise _NotPlain


def _plain_json(value: Any, where: str) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        check(value, where, "a finite number", math.isfinite)
        return float(value)
    if isinstance(value, Mapping):
        for key in value:
            check(key, f"{where} key", "a string", is_text)
        return {str.__str__(key): _plain_json(item, f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_json(item, f"{where}[{position}]") for position, item in enumerate(value)]
    raise FieldError(f"{where} must be JSON (a string, number, true/false, null, list or object), got {value!r}")
