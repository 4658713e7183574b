"""Tests of dsh_replay.testing.scripts: a bad script fails where it is written, naming the argument.

Before these checks, most of these scripts were accepted and then failed inside the
emulator's server thread, so the client saw only a dropped connection.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from dsh_replay.testing import ScriptedResponse, random_fragments, split_by_sizes

NAN = math.nan
BAD_RESPONSES = [
    # delays (negative ones were refused before; keep that)
    ({"delay": NAN}, ValueError, r"delay must be a finite number of seconds >= 0, got nan"),
    ({"delay": math.inf}, ValueError, r"delay must be a finite number"),
    ({"delay": -1}, ValueError, r"delay must be a finite number"),
    ({"delay": "1"}, TypeError, r"delay must be a number of seconds, got '1' \(str\)"),
    ({"delay": True}, TypeError, r"delay must be a number of seconds"),
    ({"delays": [0.1, NAN]}, ValueError, r"delays\[1\] must be a finite number"),
    ({"delays": [-0.5]}, ValueError, r"delays\[0\] must be a finite number"),
    ({"delays": ["0.1"]}, TypeError, r"delays\[0\] must be a number of seconds"),
    ({"delays": "12"}, TypeError, r"delays must be a sequence of numbers of seconds"),
    ({"delays": 0.5}, TypeError, r"delays must be a sequence of numbers of seconds"),
    # fragments
    ({"fragments": "abc"}, TypeError, r"fragments must be a sequence of bytes, got 'abc' \(str\)"),
    ({"fragments": b"abc"}, TypeError, r"fragments must be a sequence of bytes, got b'abc'"),
    ({"fragments": ["a", "b"]}, TypeError, r"fragments\[0\] must be bytes, got 'a' \(str\); encode"),
    ({"fragments": [b"a", 7]}, TypeError, r"fragments\[1\] must be bytes, got 7 \(int\)"),
    ({"fragments": 5}, TypeError, r"fragments must be a sequence of bytes"),
    # status
    ({"status": "200"}, TypeError, r"status must be an int from 100 to 599, got '200' \(str\)"),
    ({"status": 200.5}, TypeError, r"status must be an int from 100 to 599, got 200.5 \(float\)"),
    ({"status": True}, TypeError, r"status must be an int from 100 to 599"),
    ({"status": 600}, ValueError, r"status must be an int from 100 to 599, got 600"),
    ({"status": 99}, ValueError, r"status must be an int from 100 to 599, got 99"),
    # headers: no CR or LF anywhere (header injection)
    ({"headers": {"x": "a\r\nInjected: 1"}}, ValueError, r"headers\['x'\] must not contain CR or LF"),
    ({"headers": {"x": "a\nb"}}, ValueError, r"headers\['x'\] must not contain CR or LF"),
    ({"headers": {"x\r\nInjected": "1"}}, ValueError, r"header names must be HTTP tokens"),
    ({"headers": {"x: y": "1"}}, ValueError, r"header names must be HTTP tokens"),
    ({"headers": {"": "1"}}, ValueError, r"header names must be HTTP tokens"),
    ({"headers": {"x": 1}}, TypeError, r"headers must map str to str, got 'x': 1 \(int\)"),
    ({"headers": [("x", "1")]}, TypeError, r"headers must be a mapping of str to str"),
    # the rest
    ({"chunked": "no"}, TypeError, r"chunked must be True or False, got 'no'"),
    ({"end": "explode"}, ValueError, r"end must be one of 'close', 'truncate', 'reset', 'stall'"),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"), BAD_RESPONSES, ids=[repr(row[0]) for row in BAD_RESPONSES]
)
def test_a_bad_scripted_response_is_refused_when_built(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as raised:
        ScriptedResponse(**kwargs)
    assert type(raised.value) is error


BAD_HELPER_CALLS = [
    ("streaming-str-body", lambda: ScriptedResponse.streaming("data: x\n\n"), TypeError, r"body must be bytes, got 'data: x\\n\\n' \(str\); encode"),  # type: ignore[arg-type]
    ("streaming-float-sizes", lambda: ScriptedResponse.streaming(b"abc", fragment_sizes=1.5), TypeError, r"fragment_sizes must be a sequence of positive ints, got 1.5"),  # type: ignore[arg-type]
    ("streaming-zero-size", lambda: ScriptedResponse.streaming(b"abc", fragment_sizes=[1, 0]), ValueError, r"fragment_sizes\[1\] must be a positive int, got 0"),
    ("streaming-no-sizes", lambda: ScriptedResponse.streaming(b"abc", fragment_sizes=[]), ValueError, r"fragment_sizes must be a positive int or a non-empty sequence"),
    ("streaming-str-sizes", lambda: ScriptedResponse.streaming(b"abc", fragment_sizes="12"), TypeError, r"fragment_sizes must be a sequence of positive ints"),  # type: ignore[arg-type]
    ("streaming-bool-sizes", lambda: ScriptedResponse.streaming(b"abc", fragment_sizes=True), TypeError, r"fragment_sizes must be a sequence"),
    ("streaming-nan-delay", lambda: ScriptedResponse.streaming(b"abc", delay=NAN), ValueError, r"delay must be a finite number"),
    ("streaming-crlf-content-type", lambda: ScriptedResponse.streaming(b"abc", content_type="a\r\nb: c"), ValueError, r"headers\['content-type'\] must not contain CR or LF"),
    ("fragmented-nan-max-size", lambda: ScriptedResponse.fragmented(b"abc" * 10, seed=1, max_size=NAN), TypeError, r"max_size must be a positive int, got nan \(float\)"),  # type: ignore[arg-type]
    ("fragmented-zero-max-size", lambda: ScriptedResponse.fragmented(b"abc" * 10, seed=1, max_size=0), ValueError, r"max_size must be a positive int, got 0"),
    ("fragmented-no-seed", lambda: ScriptedResponse.fragmented(b"abc", seed=None), TypeError, r"seed must be an int, got None"),  # type: ignore[arg-type]
    ("fragmented-str-body", lambda: ScriptedResponse.fragmented("abc", seed=1), TypeError, r"body must be bytes"),  # type: ignore[arg-type]
    ("json-str-status", lambda: ScriptedResponse.json({}, status="503"), TypeError, r"status must be an int from 100 to 599"),  # type: ignore[arg-type]
    ("split-float-size", lambda: split_by_sizes(b"abc", [1.5]), TypeError, r"sizes\[0\] must be a positive int, got 1.5"),  # type: ignore[list-item]
    ("split-str-body", lambda: split_by_sizes("abc", 1), TypeError, r"body must be bytes"),  # type: ignore[arg-type]
    ("random-negative-max-size", lambda: random_fragments(b"abc", seed=1, max_size=-3), ValueError, r"max_size must be a positive int, got -3"),
]


@pytest.mark.parametrize(
    ("call", "error", "message"), [pytest.param(*row[1:], id=row[0]) for row in BAD_HELPER_CALLS]
)
def test_a_bad_argument_to_a_script_helper_is_named(
    call: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as raised:
        call()
    assert type(raised.value) is error


def test_valid_scripts_are_kept_and_frozen() -> None:
    response = ScriptedResponse(
        status=599,
        headers={"X-Request-Id": "req_1", "retry-after": ""},
        fragments=(piece for piece in [bytearray(b"ab"), memoryview(b"c"), b""]),  # type: ignore[arg-type]
        delay=0,
        delays=[0, 0.5],
    )
    assert response.fragments == (b"ab", b"c", b"")
    assert all(type(fragment) is bytes for fragment in response.fragments)
    assert response.delays == (0.0, 0.5)
    assert response.pause_before(2) == 0
    assert ScriptedResponse(status=100).status == 100
    sizes = ScriptedResponse.streaming(bytearray(b"abcde"), fragment_sizes=(2, 1)).fragments  # type: ignore[arg-type]
    assert sizes == (b"ab", b"c", b"de")
