from __future__ import annotations

from typing import Any

import pytest

from dsh_replay import (
    BlockSequencer,
    MalformedStreamError,
    StreamChunk,
    Usage,
    check_chunk_sequence,
    chunk_to_json,
    collect,
)

USAGE = Usage(input_tokens=3, output_tokens=4)


def shapes(chunks: list[StreamChunk]) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for chunk in chunks:
        data = chunk_to_json(chunk)
        if data["type"] in ("text-delta", "reasoning-delta"):
            out.append((data["type"], data["index"], data["text"]))
        elif data["type"] == "tool-call-delta":
            out.append((data["type"], data["index"], data["id"], data["argumentsDelta"]))
        elif data["type"] == "block-start":
            out.append(("start", data["index"], data["blockType"]))
        elif data["type"] == "block-end":
            out.append(("end", data["index"]))
        else:
            out.append((data["type"],))
    return out


def test_interleaved_text_and_parallel_tool_calls_come_out_sequential() -> None:
    seq = BlockSequencer()
    out: list[StreamChunk] = []
    out += seq.text("Let me ")
    out += seq.tool_call(0, call_id="call_a", name="get_weather", arguments='{"city":')
    out += seq.tool_call(1, call_id="call_b", name="get_time", arguments='{"tz":')
    out += seq.tool_call(0, arguments='"Paris"}')
    out += seq.text("check.")
    out += seq.tool_call(1, arguments='"CET"}')
    out += seq.finish(usage=USAGE, raw_reason="tool_calls")

    assert check_chunk_sequence(out) == []
    assert shapes(out) == [
        ("start", 0, "text"),
        ("text-delta", 0, "Let me "),
        ("end", 0),
        ("start", 1, "tool-call"),
        ("tool-call-delta", 1, "call_a", '{"city":'),
        ("tool-call-delta", 1, "call_a", '"Paris"}'),
        ("end", 1),
        ("start", 2, "tool-call"),
        ("tool-call-delta", 2, "call_b", '{"tz":'),
        ("tool-call-delta", 2, "call_b", '"CET"}'),
        ("end", 2),
        ("start", 3, "text"),
        ("text-delta", 3, "check."),
        ("end", 3),
        ("usage",),
        ("finish",),
    ]
    turn = collect(out)
    assert [(c.name, c.parsed) for c in turn.tool_calls] == [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})]
    assert turn.text == "Let me check."
    assert turn.finish_reason is not None and (turn.finish_reason.kind, turn.finish_reason.raw) == ("tool-calls", "tool_calls")


def test_deltas_stream_immediately_for_the_current_block() -> None:
    seq = BlockSequencer()
    assert shapes(seq.text("a")) == [("start", 0, "text"), ("text-delta", 0, "a")]
    assert shapes(seq.text("b")) == [("text-delta", 0, "b")]
    # a second tool call waits while the first may still stream
    assert shapes(seq.tool_call(0, call_id="c0", name="f", arguments="{")) == [
        ("end", 0), ("start", 1, "tool-call"), ("tool-call-delta", 1, "c0", "{"),
    ]
    assert seq.tool_call(1, call_id="c1", name="g", arguments="{}") == []
    # the provider ends call 0: call 1 is released with its buffered fragment
    assert shapes(seq.end(0)) == [("end", 1), ("start", 2, "tool-call"), ("tool-call-delta", 2, "c1", "{}")]


def test_zero_argument_call_carries_braces() -> None:
    seq = BlockSequencer()
    out = seq.tool_call("t", call_id="call_1", name="list_issues")
    out += seq.tool_call("t", arguments="")
    out += seq.finish(usage=USAGE, raw_reason="tool_use")
    assert check_chunk_sequence(out) == []
    assert collect(out).tool_calls[0].arguments == "{}"


def test_reasoning_then_text_and_drop_reasoning() -> None:
    def run(drop: bool) -> list[StreamChunk]:
        seq = BlockSequencer(drop_reasoning=drop)
        out = seq.reasoning("thinking")
        out += seq.reasoning("", signature="sig-1")
        out += seq.text("answer")
        out += seq.finish(usage=USAGE, raw_reason="stop")
        return out

    kept = run(False)
    assert check_chunk_sequence(kept) == []
    turn = collect(kept)
    assert (turn.reasoning, turn.text) == ("thinking", "answer")
    assert turn.blocks[0].signature == "sig-1"  # type: ignore[union-attr]
    dropped = run(True)
    assert check_chunk_sequence(dropped) == []
    assert collect(dropped).reasoning == "" and shapes(dropped)[0] == ("start", 0, "text")


def test_signature_without_reasoning_text_makes_no_block() -> None:
    seq = BlockSequencer()
    out = seq.reasoning("", signature="opaque")
    out += seq.text("hi")
    out += seq.finish(usage=USAGE)
    assert check_chunk_sequence(out) == []
    assert [c for c in shapes(out) if c[0] == "start"] == [("start", 0, "text")]


def test_continuation_name_does_not_overwrite() -> None:
    seq = BlockSequencer()
    out = seq.tool_call(0, call_id="c", name="weather", arguments='{"a":')
    out += seq.tool_call(0, name="", arguments="1}")
    out += seq.finish(usage=USAGE)
    assert collect(out).tool_calls[0].name == "weather"
    assert check_chunk_sequence(out) == []


def test_tool_call_waits_for_its_id_and_name() -> None:
    seq = BlockSequencer()
    assert seq.tool_call(0, arguments='{"x":1}') == []
    out = seq.tool_call(0, call_id="c", name="f")
    assert shapes(out) == [("start", 0, "tool-call"), ("tool-call-delta", 0, "c", '{"x":1}')]


def test_a_call_named_without_an_id_gets_a_derived_id_from_its_position() -> None:
    # Gemini, Ollama and Gemini's OpenAI-compatible endpoint ("id": "") send calls without ids
    seq = BlockSequencer()
    out = seq.text("Checking.")
    out += seq.tool_call("a", call_id="", name="get_weather", arguments='{"city":"Paris"}')
    out += seq.tool_call("b", call_id="given_1", name="get_time", arguments="{}")
    out += seq.tool_call("c", name="get_weather", arguments='{"city":"Rome"}')
    out += seq.finish(usage=USAGE, raw_reason="stop")
    assert check_chunk_sequence(out) == []
    turn = collect(out)
    # n counts tool calls only (not the text block), in order of first appearance
    assert [c.id for c in turn.tool_calls] == ["call_0_get_weather", "given_1", "call_2_get_weather"]
    assert turn.finish_reason is not None and (turn.finish_reason.kind, turn.finish_reason.raw) == ("tool-calls", "stop")


def test_derived_ids_are_the_same_for_the_same_pieces() -> None:
    def ids() -> list[str]:
        seq = BlockSequencer()
        out = seq.tool_call(0, name="f", arguments="{}") + seq.tool_call(1, name="f", arguments="{}")
        return [c.id for c in collect(out + seq.finish(usage=USAGE)).tool_calls]

    assert ids() == ids() == ["call_0_f", "call_1_f"]


def test_finish_kind_follows_the_blocks_not_the_provider_reason() -> None:
    seq = BlockSequencer()
    reason = collect(seq.text("no call after all") + seq.finish(usage=USAGE, raw_reason="tool_calls")).finish_reason
    assert reason is not None and (reason.kind, reason.raw) == ("stop", "tool_calls")


def test_a_call_that_never_gets_a_name_is_malformed() -> None:
    seq = BlockSequencer()
    seq.tool_call(0, call_id="c", arguments="{}")
    with pytest.raises(MalformedStreamError, match="never received its name"):
        seq.finish(usage=USAGE)


def test_empty_generation() -> None:
    out = BlockSequencer().finish(usage=Usage(input_tokens=0, output_tokens=0), raw_reason="stop")
    assert shapes(out) == [("usage",), ("finish",)]
    assert check_chunk_sequence(out) == []


def test_nothing_after_finish() -> None:
    seq = BlockSequencer()
    seq.finish(usage=USAGE)
    with pytest.raises(MalformedStreamError, match="after the generation finished"):
        seq.text("late")


def test_a_second_finish_is_refused_not_repeated() -> None:
    seq = BlockSequencer()
    out = seq.text("hi") + seq.finish(usage=USAGE)
    with pytest.raises(MalformedStreamError, match="already finished; finish\\(\\) may be called once"):
        seq.finish(usage=USAGE)
    assert check_chunk_sequence(out) == []


@pytest.mark.parametrize(
    "call",
    [
        lambda seq: seq.text("x", key=[1]),
        lambda seq: seq.reasoning("x", key={"a": 1}),
        lambda seq: seq.tool_call(("tool", [0]), call_id="c", name="f"),
        lambda seq: seq.end([0]),
    ],
)
def test_an_unhashable_key_is_a_type_error_naming_key(call: Any) -> None:
    with pytest.raises(TypeError, match=r"^key must be hashable \(a str, an int or a tuple of them\), got (list|dict|tuple) "):
        call(BlockSequencer())


# -- property: whatever order the provider sends pieces in, the output obeys the rules ---------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_piece = st.one_of(
    st.tuples(st.just("text"), st.just("t0"), st.text(max_size=4)),
    st.tuples(st.just("reasoning"), st.just("r0"), st.text(max_size=4)),
    st.tuples(st.just("signature"), st.just("r0"), st.text(min_size=1, max_size=3)),
    st.tuples(st.just("tool"), st.integers(0, 3), st.text(alphabet='{}":ab1 ', max_size=4)),
    st.tuples(st.just("end"), st.integers(0, 3), st.just("")),
)


def _feed(seq: BlockSequencer, pieces: list[tuple[str, object, str]]) -> list[StreamChunk]:
    out: list[StreamChunk] = []
    for kind, key, text in pieces:
        if kind == "text":
            out += seq.text(text, key=key)  # type: ignore[arg-type]
        elif kind == "reasoning":
            out += seq.reasoning(text, key=key)  # type: ignore[arg-type]
        elif kind == "signature":
            out += seq.reasoning("", key=key, signature=text)  # type: ignore[arg-type]
        elif kind == "tool":
            out += seq.tool_call(key, call_id=f"call_{key}", name=f"fn{key}", arguments=text)  # type: ignore[arg-type]
        else:
            out += seq.end(key)  # type: ignore[arg-type]
    return out + seq.finish(usage=USAGE, raw_reason="x")


def _reopens_an_ended_call(pieces: list[tuple[str, object, str]]) -> bool:
    started: set[object] = set()
    ended: set[object] = set()
    for kind, key, _ in pieces:
        if kind == "tool":
            if key in ended:
                return True
            started.add(key)
        elif kind == "end" and key in started:
            ended.add(key)
    return False


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(_piece, max_size=40), drop=st.booleans())
def test_any_interleaving_comes_out_valid_and_lossless(pieces: list[tuple[str, object, str]], drop: bool) -> None:
    try:
        out = _feed(BlockSequencer(drop_reasoning=drop), pieces)
    except MalformedStreamError as exc:
        # the provider contradicted itself: refused, never turned into a repeated call id
        assert "after it ended" in str(exc)
        assert _reopens_an_ended_call(pieces)
        return
    assert check_chunk_sequence(out, json_arguments=False) == []
    turn = collect(out)
    assert turn.text == "".join(text for kind, _, text in pieces if kind == "text")
    reasoning = "".join(text for kind, _, text in pieces if kind == "reasoning")
    assert turn.reasoning == ("" if drop else reasoning)
    # each call once, in order of first appearance, its argument pieces joined ("{}" when none)
    expected: dict[str, str] = {}
    for kind, key, text in pieces:
        if kind == "tool":
            expected[f"call_{key}"] = expected.get(f"call_{key}", "") + text
    assert [(c.id, c.arguments) for c in turn.tool_calls] == [(k, v or "{}") for k, v in expected.items()]


def test_more_content_for_an_ended_call_is_refused_not_repeated() -> None:
    seq = BlockSequencer()
    seq.tool_call(0, call_id="c", name="f", arguments="{}")
    seq.end(0)
    with pytest.raises(MalformedStreamError, match="tool call 0 received more content after it ended"):
        seq.tool_call(0, arguments="{}")


def test_two_calls_with_one_id_are_refused() -> None:
    seq = BlockSequencer()
    seq.tool_call(0, call_id="same", name="f", arguments="{}")
    with pytest.raises(MalformedStreamError, match="tool call id 'same' is used by two calls"):
        seq.tool_call(1, call_id="same", name="g", arguments="{}")
        seq.finish(usage=USAGE)
