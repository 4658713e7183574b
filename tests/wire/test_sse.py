"""Tests for dsh_replay.wire.sse: the WHATWG event-stream rules, fragmentation, fuzzing."""

from __future__ import annotations

import copy
import pickle
import re
from itertools import pairwise
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_replay.errors import DshReplayError, MalformedStreamError
from dsh_replay.wire.sse import SSEDecoder, SSEEvent

REAL_TRAFFIC = Path(__file__).resolve().parents[2].parent / "shared" / "real-traffic"
BOM = b"\xef\xbb\xbf"


def decode(*fragments: bytes) -> tuple[list[SSEEvent], bool]:
    """Feed ``fragments`` in order, flush, return the events and the truncated flag."""
    decoder = SSEDecoder()
    events = [event for fragment in fragments for event in decoder.feed(fragment)]
    events += decoder.flush()
    return events, decoder.truncated


def events_of(*fragments: bytes) -> list[SSEEvent]:
    return decode(*fragments)[0]


def one_byte_pieces(body: bytes) -> list[bytes]:
    return [body[i : i + 1] for i in range(len(body))]


def reference(body: bytes) -> list[SSEEvent]:
    """A deliberately naive reading of the standard, line by line, as the oracle."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedStreamError("invalid UTF-8") from None
    text = text.removeprefix("\ufeff")
    lines = re.split(r"\r\n|\r|\n", text)
    lines.append("")  # end of body acts as a blank line
    events: list[SSEEvent] = []
    data: list[str] = []
    event_type, last_id, retry = "", None, None
    for line in lines:
        if line == "":
            if data:
                events.append(
                    SSEEvent(
                        event=event_type or "message", data="\n".join(data), id=last_id, retry=retry
                    )
                )
            data, event_type, retry = [], "", None
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            name, value = line.split(":", 1)
            value = value[1:] if value.startswith(" ") else value
        else:
            name, value = line, ""
        if name == "data":
            data.append(value)
        elif name == "event":
            event_type = value
        elif name == "id" and "\0" not in value:
            last_id = value
        elif name == "retry" and value and all("0" <= c <= "9" for c in value):
            retry = int(value)
    return events


# A body that touches most rules at once, for the every-offset tests.
KITCHEN_SINK = (
    BOM
    + b": comment first\r\n"
    + b"event: greeting\r\nid: 7\r\ndata: hello\r\ndata:  world\r\n\r\n"
    + b"data: caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac \xf0\x9f\x98\x80\r\r"
    + b"retry: 1500\ndata\n\n"
    + b'id: bad\x00id\nunknown: x\ndata: {"a": 1}\n\n'
    + b"data: no final blank line"
)

KITCHEN_SINK_EVENTS = [
    SSEEvent(event="greeting", data="hello\n world", id="7"),
    SSEEvent(data="caf\u00e9 \u6771\u4eac \U0001f600", id="7"),
    SSEEvent(data="", id="7", retry=1500),
    SSEEvent(data='{"a": 1}', id="7"),
    SSEEvent(data="no final blank line", id="7"),
]

BODIES = {
    "kitchen-sink": KITCHEN_SINK,
    "openai-like": b'data: {"x":1}\n\ndata: {"x":2}\n\n: keep-alive\n\ndata: [DONE]\n\n',
    "gemini-crlf": b'data: {"a":"\xc3\xa9"}\r\n\r\ndata: {"b":2}\r\n\r\n',
    "lone-cr": b"event: e\rdata: 1\r\rdata: 2\r\r",
    "blank-runs": b"\n\n\ndata: a\n\n\n\n\ndata: b\n\n\n",
}


class TestFragmentation:
    @pytest.mark.parametrize("name", sorted(BODIES))
    def test_every_two_piece_split_gives_the_whole_body_result(self, name: str) -> None:
        body = BODIES[name]
        whole = decode(body)
        assert whole[0], "the sample must produce events"
        for cut in range(len(body) + 1):
            assert decode(body[:cut], body[cut:]) == whole, f"split at byte {cut}"

    @pytest.mark.parametrize("name", sorted(BODIES))
    def test_one_byte_pieces_give_the_whole_body_result(self, name: str) -> None:
        body = BODIES[name]
        assert decode(*one_byte_pieces(body)) == decode(body)

    @pytest.mark.parametrize("name", sorted(BODIES))
    def test_bodies_match_the_reference_reading(self, name: str) -> None:
        assert events_of(BODIES[name]) == reference(BODIES[name])

    def test_kitchen_sink_events_and_state(self) -> None:
        decoder = SSEDecoder()
        events = decoder.feed(KITCHEN_SINK) + decoder.flush()
        assert events == KITCHEN_SINK_EVENTS
        assert decoder.last_event_id == "7"
        assert decoder.retry == 1500
        assert decoder.truncated is True

    def test_empty_fragments_change_nothing(self) -> None:
        assert events_of(b"", b"data: a\r", b"", b"\n", b"", b"\r\n", b"") == [SSEEvent(data="a")]


class TestLineEnds:
    @pytest.mark.parametrize("end", [b"\n", b"\r", b"\r\n"])
    def test_each_line_end_alone(self, end: bytes) -> None:
        body = b"event: e" + end + b"data: a" + end + b"data: b" + end + end
        assert events_of(body) == [SSEEvent(event="e", data="a\nb")]

    def test_mixed_line_ends_in_one_event(self) -> None:
        body = b"data: a\rdata: b\ndata: c\r\n\r"
        assert events_of(body) == [SSEEvent(data="a\nb\nc")]

    def test_crlf_split_across_fragments_is_one_line_end(self) -> None:
        decoder = SSEDecoder()
        assert decoder.feed(b"data: a\r") == []
        # The LF completes the CRLF above; only the CRLF that follows is a blank line.
        assert decoder.feed(b"\n") == []
        assert decoder.feed(b"\r\n") == [SSEEvent(data="a")]

    def test_cr_at_fragment_end_then_cr_is_a_blank_line(self) -> None:
        decoder = SSEDecoder()
        assert decoder.feed(b"data: a\r") == []
        assert decoder.feed(b"\r") == [SSEEvent(data="a")]
        # The LF pairs with the CR just fed; it must not be read as another line.
        assert decoder.feed(b"\ndata: b\n\n") == [SSEEvent(data="b")]

    def test_lf_after_a_cr_in_an_earlier_fragment_is_not_swallowed_twice(self) -> None:
        assert events_of(b"data: a\r", b"\n", b"\n") == [SSEEvent(data="a")]
        assert decode(b"data: a\r", b"\n", b"\n")[1] is False


class TestBom:
    def test_leading_bom_is_dropped(self) -> None:
        assert events_of(BOM + b"data: x\n\n") == [SSEEvent(data="x")]

    @pytest.mark.parametrize("cut", [1, 2, 3])
    def test_bom_split_across_fragments(self, cut: int) -> None:
        body = BOM + b"data: x\n\n"
        assert events_of(body[:cut], body[cut:]) == [SSEEvent(data="x")]
        assert events_of(*one_byte_pieces(body)) == [SSEEvent(data="x")]

    def test_only_the_first_bom_is_dropped(self) -> None:
        # The second BOM becomes part of the field name "\ufeffdata", an unknown field.
        assert events_of(BOM + BOM + b"data: x\n\n") == []

    def test_bom_later_in_the_stream_is_content(self) -> None:
        assert events_of(b"data: a\n\n" + BOM + b"data: b\n\n") == [SSEEvent(data="a")]

    def test_incomplete_bom_alone_is_invalid_utf8(self) -> None:
        with pytest.raises(MalformedStreamError) as info:
            decode(b"\xef\xbb")
        assert info.value.raw == b"\xef\xbb"


class TestFields:
    def test_comments_are_ignored(self) -> None:
        body = b": ping\n\n:\n\ndata: a\n: inside an event\ndata: b\n\n"
        assert events_of(body) == [SSEEvent(data="a\nb")]

    def test_multi_line_data_is_joined_with_lf(self) -> None:
        assert events_of(b"data: one\ndata:\ndata: three\n\n") == [SSEEvent(data="one\n\nthree")]

    def test_only_one_space_after_the_colon_is_removed(self) -> None:
        assert events_of(b"data:x\n\ndata:  y\n\ndata:\tz\n\n") == [
            SSEEvent(data="x"),
            SSEEvent(data=" y"),
            SSEEvent(data="\tz"),
        ]

    def test_value_keeps_later_colons(self) -> None:
        assert events_of(b"data: a: b:c\n\n") == [SSEEvent(data="a: b:c")]

    def test_event_type_defaults_to_message_and_resets_after_dispatch(self) -> None:
        body = b"event: first\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\n"
        assert [e.event for e in events_of(body)] == ["first", "message", "message"]

    def test_id_persists_across_events(self) -> None:
        decoder = SSEDecoder()
        events = decoder.feed(b"id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\n")
        assert [(e.data, e.id) for e in events] == [("a", "1"), ("b", "1"), ("c", "2")]
        assert decoder.last_event_id == "2"

    @pytest.mark.parametrize(
        ("body", "expected"),
        [
            (b"data: a\n\ndata: b\nid: 3\n\n", [("a", None), ("b", "3")]),
            (b"data: a\n\ndata: b\ndata: c\n\n", [("a", None), ("b\nc", None)]),
            (b"data: a\n\n\ndata: b\n\n", [("a", None), ("b", None)]),
            (b"data: a\n\n: note\n\ndata: b\n\n", [("a", None), ("b", None)]),
            (b"data: a\n\ndata:b\n\n", [("a", None), ("b", None)]),
        ],
        ids=["id-line", "second-data-line", "extra-blank-line", "comment", "no-space"],
    )
    def test_one_line_blocks_mixed_with_other_shapes_in_one_fragment(
        self, body: bytes, expected: list[tuple[str, str | None]]
    ) -> None:
        decoder = SSEDecoder()
        assert [(e.data, e.id) for e in decoder.feed(body)] == expected

    @pytest.mark.parametrize("count", [1, 5, 6, 40])
    def test_one_line_events_in_one_fragment_carry_the_last_id(self, count: int) -> None:
        decoder = SSEDecoder()
        assert decoder.feed(b"id: 5\n\n") == []
        body = b"".join(b"data: caf\xc3\xa9 %d\n\n" % i for i in range(count))
        assert decoder.feed(body) == [SSEEvent(data=f"caf\u00e9 {i}", id="5") for i in range(count)]

    @pytest.mark.parametrize("count", [1, 5, 6, 40])
    def test_invalid_utf8_among_one_line_events_names_its_line(self, count: int) -> None:
        body = b"".join(b"data: %d\n\n" % i for i in range(count - 1)) + b"data: bad \xff\n\n"
        with pytest.raises(MalformedStreamError) as caught:
            SSEDecoder().feed(body)
        assert caught.value.raw == b"data: bad \xff"

    def test_id_is_taken_at_dispatch_even_when_after_data(self) -> None:
        assert events_of(b"data: a\nid: 9\n\n") == [SSEEvent(data="a", id="9")]

    def test_id_without_any_id_line_is_none(self) -> None:
        assert events_of(b"data: a\n\n")[0].id is None

    def test_id_holding_nul_is_ignored(self) -> None:
        decoder = SSEDecoder()
        events = decoder.feed(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n")
        assert [e.id for e in events] == ["1", "1"]
        assert decoder.last_event_id == "1"

    def test_empty_id_resets_the_last_event_id(self) -> None:
        events = events_of(b"id: 1\ndata: a\n\nid\ndata: b\n\n")
        assert [e.id for e in events] == ["1", ""]

    def test_id_only_block_updates_state_without_an_event(self) -> None:
        decoder = SSEDecoder()
        assert decoder.feed(b"id: 5\n\n") == []
        assert decoder.last_event_id == "5"
        assert decoder.feed(b"data: x\n\n") == [SSEEvent(data="x", id="5")]

    def test_retry_with_ascii_digits(self) -> None:
        decoder = SSEDecoder()
        assert decoder.feed(b"retry: 3000\ndata: a\n\ndata: b\n\n") == [
            SSEEvent(data="a", retry=3000),
            SSEEvent(data="b"),
        ]
        assert decoder.retry == 3000

    @pytest.mark.parametrize(
        "value",
        [b"3s", b"-1", b"+5", b"1.5", b"", b" 10", b"\xef\xbc\x93", b"\xc2\xb2", b"0x10"],
        ids=[
            "suffix",
            "minus",
            "plus",
            "decimal",
            "empty",
            "extra-space",
            "fullwidth",
            "super2",
            "hex",
        ],
    )
    def test_retry_that_is_not_all_ascii_digits_is_ignored(self, value: bytes) -> None:
        decoder = SSEDecoder()
        events = decoder.feed(b"retry: 10\n\nretry: " + value + b"\ndata: a\n\n")
        assert events == [SSEEvent(data="a")]
        assert decoder.retry == 10

    def test_retry_only_block_dispatches_nothing(self) -> None:
        decoder = SSEDecoder()
        assert decoder.feed(b"retry: 42\n\n") == []
        assert decoder.retry == 42

    def test_field_without_colon_has_an_empty_value(self) -> None:
        assert events_of(b"data\n\n") == [SSEEvent(data="")]
        assert events_of(b"event: x\nevent\ndata: a\n\n") == [SSEEvent(event="message", data="a")]

    def test_unknown_fields_are_ignored(self) -> None:
        assert events_of(b"foo: bar\nDATA: no\ndata : no\ndata: yes\n\n") == [SSEEvent(data="yes")]

    def test_block_without_data_is_not_dispatched(self) -> None:
        assert events_of(b"event: x\n\nid: 1\n\n: c\n\nfoo\n\n") == []

    def test_empty_data_line_is_dispatched(self) -> None:
        assert events_of(b"data:\n\n") == [SSEEvent(data="")]


class TestFlush:
    def test_body_ending_with_a_blank_line_is_not_truncated(self) -> None:
        decoder = SSEDecoder()
        assert decoder.feed(b"data: a\n\n") == [SSEEvent(data="a")]
        assert decoder.flush() == []
        assert decoder.truncated is False

    def test_missing_final_blank_line_yields_the_event_and_flags_it(self) -> None:
        decoder = SSEDecoder()
        assert decoder.feed(b"event: message_stop\ndata: {}\n") == []
        assert decoder.flush() == [SSEEvent(event="message_stop", data="{}")]
        assert decoder.truncated is True

    def test_unterminated_last_line_is_reported(self) -> None:
        assert decode(b"data: a\n\ndata: b") == ([SSEEvent(data="a"), SSEEvent(data="b")], True)

    def test_cut_inside_a_non_data_line_is_truncated_without_an_event(self) -> None:
        assert decode(b"data: a\n\nevent: mess") == ([SSEEvent(data="a")], True)

    def test_trailing_comment_line_is_not_truncation(self) -> None:
        assert decode(b"data: a\n\n: keep-alive\n") == ([SSEEvent(data="a")], False)

    def test_trailing_extra_line_ends_are_not_truncation(self) -> None:
        assert decode(b"data: a\n\n\n\r\n") == ([SSEEvent(data="a")], False)

    def test_cr_as_last_byte_ends_the_line(self) -> None:
        assert decode(b"data: a\r") == ([SSEEvent(data="a")], True)
        assert decode(b"data: a\r\r") == ([SSEEvent(data="a")], False)

    def test_empty_body(self) -> None:
        assert decode() == ([], False)
        assert decode(b"") == ([], False)

    def test_flush_resets_for_a_new_body_but_keeps_stream_state(self) -> None:
        decoder = SSEDecoder()
        decoder.feed(b"id: 3\nretry: 9\ndata: a\n\ndata: cut")
        assert decoder.flush() == [SSEEvent(data="cut", id="3")]
        assert decoder.truncated is True
        assert decoder.feed(BOM + b"data: next\n\n") == [SSEEvent(data="next", id="3")]
        assert decoder.flush() == []
        assert decoder.truncated is False
        assert decoder.retry == 9


class TestUnicode:
    CHAR_BODY = "data: \u00e9\u6771\U0001f600\n\n".encode()

    def test_multi_byte_characters_split_at_every_byte(self) -> None:
        expected = [SSEEvent(data="\u00e9\u6771\U0001f600")]
        for cut in range(len(self.CHAR_BODY) + 1):
            assert events_of(self.CHAR_BODY[:cut], self.CHAR_BODY[cut:]) == expected
        assert events_of(*one_byte_pieces(self.CHAR_BODY)) == expected

    @pytest.mark.parametrize(
        "body",
        [
            b"data: ok\n\ndata: bad \xff here\n\ndata: ok\n\n",  # in a data-only chunk
            b"event: e\ndata: bad \xff here\n\n",  # in a multi-field block
            b"data: ok\n\ndata: bad \xff here",  # in the tail seen only by flush
        ],
    )
    def test_invalid_utf8_raises_with_the_offending_line(self, body: bytes) -> None:
        with pytest.raises(MalformedStreamError) as info:
            decode(body)
        assert info.value.raw == b"data: bad \xff here"
        assert isinstance(info.value, DshReplayError)
        assert "UTF-8" in str(info.value)

    def test_truncated_multi_byte_character_before_a_line_end_is_invalid(self) -> None:
        with pytest.raises(MalformedStreamError):
            decode(b"data: \xe6\x9d\n\n")

    def test_encoded_surrogate_is_invalid(self) -> None:
        with pytest.raises(MalformedStreamError):
            decode(b"data: \xed\xa0\x80\n\n")


class TestEventValue:
    def test_defaults(self) -> None:
        assert SSEEvent() == SSEEvent(event="message", data="", id=None, retry=None)

    def test_immutable_value_without_instance_dict(self) -> None:
        event = SSEEvent(data="x")
        with pytest.raises(AttributeError):
            event.data = "y"  # type: ignore[misc]
        assert not hasattr(event, "__dict__")
        assert (event.event, event.data, event.id, event.retry) == ("message", "x", None, None)

    @pytest.mark.parametrize(
        "body",
        [b"data: x\n\n", b"event: ping\ndata: x\n\n", b"id: 7\ndata: x\n\n", b"data: x"],
        ids=["hot-path", "typed", "general", "flushed"],
    )
    def test_decoded_events_behave_like_constructed_ones(self, body: bytes) -> None:
        decoded = events_of(body)[0]
        built = SSEEvent(*decoded)
        assert isinstance(decoded, SSEEvent)
        assert decoded == built
        assert hash(decoded) == hash(built)
        assert repr(decoded) == repr(built)
        assert repr(decoded).startswith("SSEEvent(event=")
        assert decoded._asdict() == built._asdict()
        assert decoded._replace(data="y") == built._replace(data="y")
        assert not hasattr(decoded, "__dict__")
        with pytest.raises(AttributeError):
            decoded.data = "y"  # type: ignore[misc]
        match decoded:
            case SSEEvent(data=data):
                assert data == "x"
            case _:
                pytest.fail("a decoded event must match the SSEEvent class pattern")

    def test_decoded_events_pickle_and_copy_as_sse_events(self) -> None:
        decoded = events_of(b"id: 7\ndata: x\n\n")[0]
        for revived in (
            pickle.loads(pickle.dumps(decoded)),
            pickle.loads(pickle.dumps(decoded, protocol=0)),
            copy.copy(decoded),
            copy.deepcopy(decoded),
        ):
            assert type(revived) is SSEEvent
            assert revived == SSEEvent(data="x", id="7")


# --- property tests -------------------------------------------------------------

# Text for one line: anything but the characters that end a line (and surrogates,
# which cannot be encoded).
line_text = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=12)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[SSEEvent]]:
    """An event stream written with random line ends, and the events it holds."""
    lines: list[str] = []
    expected: list[SSEEvent] = []
    last_id: str | None = None
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.booleans()):
            lines.append(":" + draw(line_text))
        event_type = draw(st.one_of(st.none(), line_text))
        if event_type is not None:
            lines.append("event: " + event_type)
        event_id = draw(st.one_of(st.none(), line_text.filter(lambda s: "\0" not in s)))
        if event_id is not None:
            lines.append("id: " + event_id)
            last_id = event_id
        retry = draw(st.one_of(st.none(), st.integers(0, 10**6)))
        if retry is not None:
            lines.append(f"retry: {retry}")
        data = draw(st.lists(line_text, min_size=1, max_size=3))
        lines += ["data: " + value for value in data]
        lines.append("")
        expected.append(
            SSEEvent(event=event_type or "message", data="\n".join(data), id=last_id, retry=retry)
        )
    body = b"\xef\xbb\xbf" if draw(st.booleans()) else b""
    previous_end = ""
    for line in lines:
        end = draw(st.sampled_from(["\n", "\r", "\r\n"]))
        if previous_end == "\r" and line == "" and end == "\n":
            end = "\r"  # CR then a lone LF would be read as one CRLF line end
        body += (line + end).encode()
        previous_end = end
    return body, expected


@st.composite
def fragmented(draw: st.DrawFn, body: bytes) -> list[bytes]:
    cuts = sorted(draw(st.sets(st.integers(0, len(body)), max_size=12)))
    bounds = [0, *cuts, len(body)]
    return [body[a:b] for a, b in pairwise(bounds)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_round_trip_through_random_fragments(data: st.DataObject) -> None:
    body, expected = data.draw(streams())
    pieces = data.draw(fragmented(body))
    assert decode(*pieces) == (expected, False)
    assert events_of(body) == expected


raw_bytes = st.lists(
    st.sampled_from(
        [
            b"data",
            b"data:",
            b": ",
            b"event:",
            b"id:",
            b"retry:",
            b"\r",
            b"\n",
            b"\r\n",
            b"\x00",
            b"x",
            b"1",
            b"\xef\xbb\xbf",
            b"\xc3",
            b"\xa9",
            b"\xff",
            b" ",
        ]
    )
    | st.binary(max_size=4),
    max_size=30,
).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(st.data(), raw_bytes)
def test_fuzz_only_malformed_stream_error_and_fragmentation_never_matters(
    data: st.DataObject, body: bytes
) -> None:
    pieces = data.draw(fragmented(body))
    try:
        expected = reference(body)
    except MalformedStreamError:
        with pytest.raises(MalformedStreamError):
            decode(body)
        with pytest.raises(MalformedStreamError):
            decode(*pieces)
        return
    assert events_of(body) == expected
    assert events_of(*pieces) == expected


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.data())
def test_fuzz_arbitrary_bytes_raise_nothing_else(body: bytes, data: st.DataObject) -> None:
    pieces = data.draw(fragmented(body))
    try:
        events = events_of(*pieces)
    except MalformedStreamError as exc:
        assert len(exc.raw) <= 200
    else:
        assert all(isinstance(event, SSEEvent) for event in events)


# --- what feed takes -----------------------------------------------------------------

MANY = b"data: a\n\n" * 8  # past the few-events shortcut of the hot path


@pytest.mark.parametrize("kind", [bytearray, memoryview])
@pytest.mark.parametrize("body", [MANY, b"event: e\r\ndata: x\r\n\r\n" + MANY.replace(b"\n", b"\r"), BOM + MANY])
def test_any_bytes_like_fragments_decode_as_bytes_do(kind: type, body: bytes) -> None:
    for cut in range(len(body) + 1):
        for second in (cut, (cut + len(body)) // 2):
            pieces = [body[:cut], body[cut:second], body[second:]]
            assert decode(*map(kind, pieces)) == decode(*pieces), f"cut at {cut}, {second}"
    assert decode(*map(kind, one_byte_pieces(body))) == decode(body)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from([bytearray, memoryview]))
def test_bytes_like_fragments_round_trip(data: st.DataObject, kind: type) -> None:
    body, expected = data.draw(streams())
    pieces = data.draw(fragmented(body))
    assert decode(*map(kind, pieces)) == (expected, False)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("data: x\n\n", "feed() takes bytes, got str; encode the text first (data.encode())"),
        ("", "feed() takes bytes, got str"),
        (None, "feed() takes bytes, got NoneType"),
        (5, "feed() takes bytes, got int"),
        (object(), "feed() takes bytes, got object"),
    ],
)
@pytest.mark.parametrize(
    ("before", "rest"),
    [(b"", b"data: b\n\n"), (b"data: a\r", b"\ndata: b\n\n"), (b"da", b"ta: b\n\n"), (BOM[:2], BOM[2:] + b"data: b\n\n")],
)
def test_anything_else_is_a_type_error_that_leaves_the_stream_as_it_was(
    value: object, says: str, before: bytes, rest: bytes
) -> None:
    decoder = SSEDecoder()
    events = decoder.feed(before)
    with pytest.raises(TypeError) as info:
        decoder.feed(value)  # type: ignore[arg-type]
    assert str(info.value).startswith(says)
    assert events + decoder.feed(rest) + decoder.flush() == events_of(before, rest)


# --- real traffic ------------------------------------------------------------------


def real_files(pattern: str) -> list[Path]:
    if not REAL_TRAFFIC.is_dir():
        pytest.skip(f"no real traffic folder at {REAL_TRAFFIC}")
    files = sorted(REAL_TRAFFIC.glob(pattern))
    if not files:
        pytest.skip(f"no {pattern} files in {REAL_TRAFFIC}")
    return files


def test_real_traffic_decodes_the_same_whole_and_in_one_byte_pieces() -> None:
    for path in real_files("*.sse"):
        body = path.read_bytes()
        whole = decode(body)
        assert whole[0], path.name
        assert decode(*one_byte_pieces(body)) == whole, path.name
        assert whole[0] == reference(body), path.name
        for event in whole[0]:
            if event.data != "[DONE]":
                orjson.loads(event.data)  # raises, naming the bad event, if not JSON


def test_real_traffic_missing_final_blank_line_still_yields_the_last_event() -> None:
    for path in real_files("*.sse"):
        body = path.read_bytes()
        events, truncated = decode(body)
        assert truncated is (not body.endswith((b"\n\n", b"\r\n\r\n"))), path.name
        if truncated:
            last_block = body.rstrip().rsplit(b"\n\n", 1)[-1]
            assert events[-1].data.encode() in last_block, path.name
