"""``collect``: the turn an agent loop builds from a chunk sequence."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from dsh_replay import (
    BlockEnd,
    BlockStart,
    CallId,
    Finish,
    FinishReason,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCall,
    ToolCallBlock,
    ToolCallDelta,
    Turn,
    Usage,
    UsageChunk,
    chunk_to_json,
    collect,
)

try:
    from tests.strategies import valid_sequences
except ImportError:  # tests/ is not a package: pytest put it on sys.path itself
    from strategies import valid_sequences  # type: ignore[no-redef, import-not-found]

SEED: list[StreamChunk] = [
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text="runoob"),
    TextDelta(index=0, text=" 教程"),
    BlockEnd(index=0, block=TextBlock(text="runoob 教程")),
    BlockStart(index=1, block_type="tool-call"),
    ToolCallDelta(index=1, id=CallId("call-123"), name="bash", arguments_delta='{"command":"echo runoob"}'),
    BlockEnd(
        index=1,
        block=ToolCallBlock(id=CallId("call-123"), name="bash", arguments='{"command":"echo runoob"}'),
    ),
    UsageChunk(usage=Usage(input_tokens=100, output_tokens=50)),
    Finish(reason=FinishReason(kind="tool-calls")),
]


def _call(index: int, call_id: str, name: str, arguments: str) -> list[StreamChunk]:
    return [
        BlockStart(index=index, block_type="tool-call"),
        ToolCallDelta(index=index, id=CallId(call_id), name=name, arguments_delta=arguments),
        BlockEnd(index=index, block=ToolCallBlock(id=CallId(call_id), name=name, arguments=arguments)),
    ]


def _text(index: int, text: str) -> list[StreamChunk]:
    return [
        BlockStart(index=index, block_type="text"),
        TextDelta(index=index, text=text),
        BlockEnd(index=index, block=TextBlock(text=text)),
    ]


def _reasoning(index: int, text: str, signature: str | None = None) -> list[StreamChunk]:
    return [
        BlockStart(index=index, block_type="reasoning"),
        ReasoningDelta(index=index, text=text),
        BlockEnd(index=index, block=ReasoningBlock(text=text, signature=signature)),
    ]


def test_seed_example() -> None:
    turn = collect(SEED)
    assert turn.text == "runoob 教程"
    assert turn.reasoning == ""
    assert turn.tool_calls == (
        ToolCall(
            id=CallId("call-123"),
            name="bash",
            arguments='{"command":"echo runoob"}',
            parsed={"command": "echo runoob"},
        ),
    )
    assert turn.tool_calls[0].ok
    assert turn.usage == Usage(input_tokens=100, output_tokens=50)
    assert turn.finish_reason == FinishReason(kind="tool-calls")
    assert turn.blocks == (SEED[3].block, SEED[6].block)  # type: ignore[union-attr]


def test_multi_block_turn() -> None:
    usage = Usage(input_tokens=7, output_tokens=9, cached_input_tokens=2, reasoning_tokens=4)
    chunks = [
        *_reasoning(0, "Let me think. ", signature="sig"),
        *_text(1, "First "),
        *_call(2, "c-1", "read_file", '{"path": "a.txt", "lines": [1, 2]}'),
        *_reasoning(3, "Then more."),
        *_text(4, "second."),
        *_call(5, "c-2", "broken", '{"path": '),
        *_call(6, "c-3", "listy", "[1, 2]"),
        *_call(7, "c-4", "noop", "{}"),
        UsageChunk(usage=usage),
        Finish(reason=FinishReason(kind="tool-calls", raw="tool_use")),
    ]
    turn = collect(chunks)
    assert turn.text == "First second."
    assert turn.reasoning == "Let me think. Then more."
    assert [(c.id, c.name) for c in turn.tool_calls] == [
        ("c-1", "read_file"),
        ("c-2", "broken"),
        ("c-3", "listy"),
        ("c-4", "noop"),
    ]
    assert [c.parsed for c in turn.tool_calls] == [{"path": "a.txt", "lines": [1, 2]}, None, None, {}]
    assert [c.ok for c in turn.tool_calls] == [True, False, False, True]
    assert turn.tool_calls[1].arguments == '{"path": '  # the raw text is kept when it does not parse
    assert [type(b).__name__ for b in turn.blocks] == [
        "ReasoningBlock",
        "TextBlock",
        "ToolCallBlock",
        "ReasoningBlock",
        "TextBlock",
        "ToolCallBlock",
        "ToolCallBlock",
        "ToolCallBlock",
    ]
    assert turn.blocks[0] == ReasoningBlock(text="Let me think. ", signature="sig")
    assert turn.usage == usage
    assert turn.finish_reason == FinishReason(kind="tool-calls", raw="tool_use")


@pytest.mark.parametrize(
    ("arguments", "parsed"),
    [
        ('{"id": 123456789012345678901234567890}', {"id": 123456789012345678901234567890}),
        ('{"x": 0.1, "y": -0}', {"x": 0.1, "y": 0}),
        ('  {"a": "\\u00e9\\ud83d\\ude42"}\n', {"a": "é🙂"}),
        ('{"a": NaN}', None),
        ('{"a": Infinity}', None),
        ("null", None),
        ('"{}"', None),
        ("", None),
        ("{" * 5000 + "}" * 5000, None),
    ],
)
def test_arguments_are_parsed_exactly(arguments: str, parsed: object) -> None:
    (call,) = collect(_call(0, "c", "f", arguments)).tool_calls
    assert call.parsed == parsed
    assert call.ok is (parsed is not None)
    if isinstance(parsed, dict) and "id" in parsed:
        assert type(call.parsed["id"]) is int  # type: ignore[index]


def test_empty_generation() -> None:
    turn = collect([UsageChunk(usage=Usage(input_tokens=3, output_tokens=0)), Finish(reason=FinishReason(kind="stop"))])
    assert turn == Turn(usage=Usage(input_tokens=3, output_tokens=0), finish_reason=FinishReason(kind="stop"))
    assert turn.text == "" and turn.tool_calls == () and turn.blocks == ()


def test_only_complete_blocks_count() -> None:
    chunks = [*_text(0, "done"), BlockStart(index=1, block_type="text"), TextDelta(index=1, text="cut off")]
    turn = collect(chunks)
    assert turn.text == "done"
    assert turn.usage is None and turn.finish_reason is None


def test_collect_takes_any_iterable() -> None:
    assert collect(iter(SEED)) == collect(SEED)
    assert collect(c for c in SEED) == collect(SEED)


def test_collect_takes_the_chunks_json_dicts_too() -> None:
    assert collect([chunk_to_json(c) for c in SEED]) == collect(SEED)
    assert collect([chunk_to_json(c) for c in SEED]).text == collect(SEED).text != ""


@pytest.mark.parametrize(
    ("items", "error", "says"),
    [
        ([None], TypeError, "collect() takes StreamChunk objects or their JSON dicts; the item at position 0 is NoneType None"),
        ([*SEED[:2], "text"], TypeError, "the item at position 2 is str 'text'"),
        ([SEED[0], {"type": "text-delta", "index": 0}], ValueError, "the chunk at position 1 is not a valid chunk: text-delta: missing field 'text'"),
        ([{"type": "nope"}], ValueError, "the chunk at position 0 is not a valid chunk: unknown chunk type 'nope'"),
    ],
)
def test_anything_else_is_refused_naming_its_position(items: list[Any], error: type[Exception], says: str) -> None:
    with pytest.raises(error) as info:
        collect(items)
    assert says in str(info.value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_sequences())
def test_collect_matches_the_deltas(chunks: list[StreamChunk]) -> None:
    turn = collect(chunks)
    assert turn.text == "".join(c.text for c in chunks if isinstance(c, TextDelta))
    assert turn.reasoning == "".join(c.text for c in chunks if isinstance(c, ReasoningDelta))
    calls = [c.block for c in chunks if isinstance(c, BlockEnd) and isinstance(c.block, ToolCallBlock)]
    assert [(t.id, t.name, t.arguments) for t in turn.tool_calls] == [(b.id, b.name, b.arguments) for b in calls]
    assert [t.parsed for t in turn.tool_calls] == [json.loads(b.arguments) for b in calls]
    assert isinstance(chunks[-2], UsageChunk) and isinstance(chunks[-1], Finish)
    assert turn.usage == chunks[-2].usage
    assert turn.finish_reason == chunks[-1].reason
    assert (turn.finish_reason.kind == "tool-calls") == bool(turn.tool_calls)
