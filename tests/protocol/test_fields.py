"""Checked reads from parsed documents: the error names the field's path and what it must be."""

from __future__ import annotations

import enum
import math
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_replay.protocol.fields import (
    FieldError,
    _plain_json,
    check,
    is_int,
    is_number,
    or_null,
    plain_json,
    read,
    refuse_unknown,
)


def test_a_good_value_comes_back() -> None:
    assert read({"code": 200}, "code", "status", "an integer", is_int) == 200


def test_a_missing_required_field_says_so() -> None:
    with pytest.raises(FieldError, match=r"^status\.code must be an integer, got nothing \(the field is missing\)$"):
        read({}, "code", "status", "an integer", is_int)


def test_a_missing_optional_field_gives_its_default() -> None:
    assert read({}, "code", "status", "an integer or null", or_null(is_int), None) is None
    assert read({}, "code", "status", "an integer", is_int, 200) == 200


def test_a_long_bad_value_is_cut_short() -> None:
    with pytest.raises(FieldError) as caught:
        check("x" * 500, "body", "an integer", is_int)
    message = str(caught.value)
    assert message.startswith("body must be an integer, got 'xxx") and "..." in message
    assert len(message) < 160


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None])
def test_is_int_refuses_booleans_floats_and_text(value: object) -> None:
    assert not is_int(value)


@pytest.mark.parametrize(("value", "ok"), [(0, True), (5.5, True), (10, True), (10.5, False), (-1, False)])
def test_is_number_checks_the_range(value: float, ok: bool) -> None:
    assert is_number(value, 0, 10) is ok


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, True])
def test_is_number_refuses_nan_infinities_in_a_range_and_booleans(value: float) -> None:
    assert not is_number(value, 0, 1e300)


def test_or_null_lets_null_through() -> None:
    assert or_null(is_int)(None) and or_null(is_int)(3) and not or_null(is_int)("3")


def test_an_unknown_field_names_the_closest_known_one() -> None:
    with pytest.raises(FieldError, match=r"^options has an unknown field 'modle' \(did you mean model\?\); known: model, tools$"):
        refuse_unknown({"modle": "x"}, "options", ("model", "tools"))


def test_an_unknown_field_far_from_any_known_one_lists_them() -> None:
    with pytest.raises(FieldError, match=r"^options has an unknown field 'zzz'; known: model, tools$"):
        refuse_unknown({"model": "x", "zzz": 1}, "options", ("model", "tools"))


# -- plain_json: the quick copy of plain values and the full conversion agree ----------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner) | st.dictionaries(
        st.text(max_size=3) | st.integers(), inner, max_size=3),
    max_leaves=12,
)


class _Name(str, enum.Enum):
    A = "a"


class _Level(enum.IntEnum):
    ONE = 1


def _outcome(convert: Callable[[object, str], object], value: object) -> tuple[str, object]:
    try:
        return "ok", convert(value, "options.extra")
    except FieldError as exc:
        return "error", str(exc)


@settings(max_examples=300, deadline=None)
@given(value=_JSON | st.sampled_from([_Name.A, _Level.ONE, {"k": _Name.A}, [_Level.ONE], {1.5}, math.nan]))
def test_plain_json_gives_what_the_full_conversion_gives(value: object) -> None:
    result = _outcome(plain_json, value)
    assert result == _outcome(_plain_json, value)
    if result[0] == "ok":
        copied = result[1]
        assert type(copied) in (dict, list, str, int, float, bool, type(None))
        if isinstance(value, (dict, list)):
            assert copied is not value  # a copy: the caller's later changes do not reach the options
