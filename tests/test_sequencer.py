from __future__ import annotations

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
