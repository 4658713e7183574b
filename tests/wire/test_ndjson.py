"""Tests for dsh_replay.wire.ndjson: Ollama-style newline-delimited JSON streams."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_replay.errors import DshReplayError, MalformedStreamError
from dsh_replay.wire.ndjson import NDJSONDecoder

REAL_TRAFFIC = Path(__file__).resolve().parents[2].parent / "shared" / "real-traffic"

OLLAMA_CHAT = (
    b'{"model":"llama3.2","message":{"role":"assistant","content":"Caf\xc3\xa9"},"done":false}\n'
    b'{"model":"llama3.2","message":{"role":"assistant","content":" \xf0\x9f\x98\x80"},"done":false}\n'
    b'{"model":"llama3.2","message":{"role":"assistant","content":""},"done_reason":"stop",'
    b'"done":true,"prompt_eval_count":26,"eval_count":2}\n'
)
OLLAMA_VALUES = [
    {"model": "llama3.2", "message": {"role": "assistant", "content": "Caf\u00e9"}, "done": False},
    {
        "model": "llama3.2",
        "message": {"role": "assistant", "content": " \U0001f600"},
        "done": False,
    },
    {
        "model": "llama3.2",
        "message": {"role": "assistant", "content": ""},
        "done_reason": "stop",
        "done": True,
        "prompt_eval_count": 26,
        "eval_count": 2,
    },
]


def decode(*fragments: bytes) -> list[object]:
    decoder = NDJSONDecoder()
    values = [value for fragment in fragments for value in decoder.feed(fragment)]
    return values + decoder.flush()


def one_byte_pieces(body: bytes) -> list[bytes]:
    return [body[i : i + 1] for i in range(len(body))]


def test_whole_body() -> None:
    assert decode(OLLAMA_CHAT) == OLLAMA_VALUES


def test_every_two_piece_split_and_one_byte_pieces() -> None:
    for cut in range(len(OLLAMA_CHAT) + 1):
        assert decode(OLLAMA_CHAT[:cut], OLLAMA_CHAT[cut:]) == OLLAMA_VALUES, f"split at {cut}"
    assert decode(*one_byte_pieces(OLLAMA_CHAT)) == OLLAMA_VALUES


def test_values_are_returned_as_soon_as_their_line_ends() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed(b'{"a": 1}\n{"b"') == [{"a": 1}]
    assert decoder.feed(b": 2}") == []
    assert decoder.feed(b"\n") == [{"b": 2}]
    assert decoder.flush() == []


def test_blank_and_whitespace_lines_are_skipped() -> None:
    body = b'\n{"a": 1}\n\n   \n\t\r\n{"b": 2}\n\n'
    assert decode(body) == [{"a": 1}, {"b": 2}]


def test_crlf_line_ends() -> None:
    body = b'{"a": 1}\r\n{"b": 2}\r\n'
    assert decode(body) == [{"a": 1}, {"b": 2}]
    assert decode(*one_byte_pieces(body)) == [{"a": 1}, {"b": 2}]


def test_last_line_without_newline_is_parsed_by_flush() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed(b'{"a": 1}\n{"done": true}') == [{"a": 1}]
    assert decoder.flush() == [{"done": True}]
    assert decoder.flush() == []


def test_whitespace_only_tail_at_flush_is_skipped() -> None:
    assert decode(b'{"a": 1}\n  \r') == [{"a": 1}]


def test_any_json_value_per_line() -> None:
    assert decode(b'1\n"s"\nnull\n[1, 2]\ntrue\n-0.5\n') == [1, "s", None, [1, 2], True, -0.5]


def test_multi_byte_character_split_across_fragments() -> None:
    body = '{"t": "\u6771\U0001f600"}\n'.encode()
    for cut in range(len(body) + 1):
        assert decode(body[:cut], body[cut:]) == [{"t": "\u6771\U0001f600"}]


def test_invalid_json_names_the_line_number_and_keeps_the_line() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed(b'{"a": 1}\n\n') == [{"a": 1}]
    with pytest.raises(MalformedStreamError) as info:
        decoder.feed(b'{"b": 2}\n{"c": \n')
    assert "line 4" in str(info.value)
    assert info.value.raw == b'{"c": '
    assert isinstance(info.value, DshReplayError)


def test_invalid_json_in_the_last_unterminated_line() -> None:
    decoder = NDJSONDecoder()
    decoder.feed(b'{"a": 1}\n{"cut')
    with pytest.raises(MalformedStreamError) as info:
        decoder.flush()
    assert "line 2" in str(info.value)
    assert info.value.raw == b'{"cut'


def test_invalid_utf8_is_malformed() -> None:
    with pytest.raises(MalformedStreamError) as info:
        decode(b'{"a": "\xff"}\n')
    assert info.value.raw == b'{"a": "\xff"}'


def test_two_values_on_one_line_are_malformed() -> None:
    with pytest.raises(MalformedStreamError):
        decode(b'{"a": 1} {"b": 2}\n')


def test_long_raw_line_is_truncated_in_the_error() -> None:
    with pytest.raises(MalformedStreamError) as info:
        decode(b"x" * 5000 + b"\n")
    assert info.value.raw == b"x" * 200


# --- property tests -------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8"), max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(st.characters(codec="utf-8"), max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def fragmented(draw: st.DrawFn, body: bytes) -> list[bytes]:
    cuts = sorted(draw(st.sets(st.integers(0, len(body)), max_size=12)))
    return [body[a:b] for a, b in pairwise([0, *cuts, len(body)])]


@settings(max_examples=150, deadline=None)
@given(st.lists(json_values, max_size=6), st.data())
def test_round_trip_through_random_fragments(values: list[object], data: st.DataObject) -> None:
    body = b""
    for value in values:
        body += data.draw(st.sampled_from([b"", b"\n", b"  \n", b"\r\n"]))  # blank lines
        body += orjson.dumps(value) + data.draw(st.sampled_from([b"\n", b"\r\n", b" \n"]))
    cut_last_newline = data.draw(st.booleans())
    if values and cut_last_newline:
        body = body.rstrip(b"\r\n ")  # last line without its newline
    assert decode(*data.draw(fragmented(body))) == values


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.data())
def test_fuzz_only_malformed_stream_error(body: bytes, data: st.DataObject) -> None:
    pieces = data.draw(fragmented(body))
    try:
        whole = decode(body)
    except MalformedStreamError:
        with pytest.raises(MalformedStreamError):
            decode(*pieces)
    else:
        assert decode(*pieces) == whole


# --- what feed takes -----------------------------------------------------------------


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_any_bytes_like_fragments_decode_as_bytes_do(kind: type) -> None:
    for cut in range(len(OLLAMA_CHAT) + 1):
        assert decode(*map(kind, (OLLAMA_CHAT[:cut], OLLAMA_CHAT[cut:]))) == OLLAMA_VALUES, f"split at {cut}"
    assert decode(*map(kind, one_byte_pieces(OLLAMA_CHAT))) == OLLAMA_VALUES
    assert decode(kind(OLLAMA_CHAT.rstrip(b"\n"))) == OLLAMA_VALUES  # the last line, from flush


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ('{"a": 1}\n', "feed() takes bytes, got str; encode the text first (data.encode())"),
        (None, "feed() takes bytes, got NoneType"),
        (7, "feed() takes bytes, got int"),
    ],
)
def test_anything_else_is_a_type_error_that_leaves_the_stream_as_it_was(value: object, says: str) -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed(b'{"a"') == []
    with pytest.raises(TypeError) as info:
        decoder.feed(value)  # type: ignore[arg-type]
    assert str(info.value) == says
    assert decoder.feed(b": 1}\n") == [{"a": 1}]


# --- real traffic ------------------------------------------------------------------


def test_real_traffic_decodes_the_same_whole_and_in_one_byte_pieces() -> None:
    if not REAL_TRAFFIC.is_dir():
        pytest.skip(f"no real traffic folder at {REAL_TRAFFIC}")
    paths = sorted(REAL_TRAFFIC.glob("*.ndjson"))
    if not paths:
        pytest.skip(f"no *.ndjson files in {REAL_TRAFFIC}")
    for path in paths:
        body = path.read_bytes()
        whole = decode(body)
        expected = [orjson.loads(line) for line in body.splitlines() if line.strip()]
        assert whole == expected, path.name
        assert decode(*one_byte_pieces(body)) == whole, path.name
        assert all(isinstance(value, dict) and "done" in value for value in whole), path.name
