"""Hypothesis strategies for StreamChunk sequences, shared by the test modules.

- :func:`valid_sequences` builds sequences that obey every rule (P1-P12):
  a random number of blocks of random types, text and arguments cut into
  random deltas, unique call ids, tool-call names sometimes streamed as
  prefixes, usage with random counts and the finish kind that matches.
- :func:`interleaved_sequences` is the same, with the blocks' chunks
  interleaved: valid only with ``allow_interleaving=True``.
- :func:`json_values` and :func:`near_chunks` are fuzzing input for the
  validator: arbitrary JSON, and chunk dicts with one thing wrong.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import strategies as st

from dsh_replay.protocol.chunks import (
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
    ToolCallBlock,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from dsh_replay.protocol.jsonl import chunk_to_json

__all__ = [
    "arguments_json",
    "interleaved_sequences",
    "json_values",
    "near_chunks",
    "pieces",
    "texts",
    "usages",
    "valid_sequences",
]

# Any Unicode that survives UTF-8 JSON (no lone surrogates), with some ASCII bias.
_CHARS = st.characters(codec="utf-8")
texts = st.text(_CHARS, min_size=1, max_size=24) | st.sampled_from(
    ["a", "Hello", " ", "\n", "教程", "é", "e\u0301", "🙂", '"', "\\", "{}"]
)

_JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(_CHARS, max_size=8)
)
_JSON_KEYS = st.text(_CHARS, max_size=6)


def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Arbitrary JSON values (what ``orjson.loads`` can return), nested."""
    return st.recursive(
        _JSON_LEAVES,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_JSON_KEYS, inner, max_size=4),
        max_leaves=max_leaves,
    )


@st.composite
def arguments_json(draw: st.DrawFn) -> str:
    """The JSON text of a tool call's arguments: always an object, in varied formatting."""
    value = draw(st.dictionaries(_JSON_KEYS, json_values(6), max_size=4))
    style = draw(st.sampled_from(["orjson", "spaced", "indented", "ascii"]))
    if style == "orjson":
        return orjson.dumps(value).decode()
    if style == "spaced":
        return json.dumps(value, ensure_ascii=False)
    if style == "indented":
        return json.dumps(value, ensure_ascii=False, indent=2)
    return json.dumps(value)


@st.composite
def pieces(draw: st.DrawFn, text: str, *, empty_pieces: bool = False) -> list[str]:
    """``text`` cut at random places into pieces that join back to it.

    Pieces are non-empty unless ``empty_pieces`` (tool-call arguments may stream
    empty slices); an empty ``text`` gives no piece, or only empty ones.
    """
    if text:
        cuts = sorted(
            draw(st.lists(st.integers(1, len(text) - 1), unique=True, max_size=6))
            if len(text) > 1
            else []
        )
        out = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    else:
        out = []
    if empty_pieces:
        for _ in range(draw(st.integers(0, 2))):
            out.insert(draw(st.integers(0, len(out))), "")
    return out


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    counts = st.integers(0, 2**40)
    return Usage(
        input_tokens=draw(counts),
        output_tokens=draw(counts),
        cached_input_tokens=draw(st.none() | counts),
        reasoning_tokens=draw(st.none() | counts),
    )


@st.composite
def _block(draw: st.DrawFn, block_type: str, index: int, call_id: str) -> list[StreamChunk]:
    """The chunks of one complete, valid block: block-start, deltas, block-end."""
    start = BlockStart(index=index, block_type=block_type)  # type: ignore[arg-type]
    if block_type == "text":
        text = draw(texts)
        deltas: list[StreamChunk] = [TextDelta(index=index, text=p) for p in draw(pieces(text))]
        return [start, *deltas, BlockEnd(index=index, block=TextBlock(text=text))]
    if block_type == "reasoning":
        text = draw(texts)
        deltas = [ReasoningDelta(index=index, text=p) for p in draw(pieces(text))]
        signature = draw(st.none() | st.text(_CHARS, max_size=12))
        return [start, *deltas, BlockEnd(index=index, block=ReasoningBlock(text=text, signature=signature))]
    name = draw(st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_.-]{0,15}", fullmatch=True) | texts)
    arguments = draw(arguments_json() | st.just("{}"))
    if arguments == "{}" and draw(st.booleans()):
        slices = draw(pieces("", empty_pieces=True))  # no arguments: no delta, or empty ones
    else:
        slices = draw(pieces(arguments, empty_pieces=True))
    # providers send the name once, in part, or on every delta: any prefix is allowed
    names = st.just(name) | st.integers(0, len(name)).map(lambda k: name[:k])
    deltas = [
        ToolCallDelta(index=index, id=CallId(call_id), name=draw(names), arguments_delta=s)
        for s in slices
    ]
    block = ToolCallBlock(id=CallId(call_id), name=name, arguments=arguments)
    return [start, *deltas, BlockEnd(index=index, block=block)]


@st.composite
def _blocks(draw: st.DrawFn, max_blocks: int) -> list[list[StreamChunk]]:
    types = draw(st.lists(st.sampled_from(["text", "tool-call", "reasoning"]), max_size=max_blocks))
    n = len(types)
    if draw(st.booleans()):
        indexes = list(range(n))  # what adapters do
    else:
        indexes = draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n, unique=True))
    call_ids = draw(st.lists(st.text(_CHARS, min_size=1, max_size=10), min_size=n, max_size=n, unique=True))
    return [draw(_block(t, i, c)) for t, i, c in zip(types, indexes, call_ids, strict=True)]


@st.composite
def _ending(draw: st.DrawFn, blocks: list[list[StreamChunk]]) -> list[StreamChunk]:
    tool = any(isinstance(b[0], BlockStart) and b[0].block_type == "tool-call" for b in blocks)
    raw = draw(st.none() | st.sampled_from(["stop", "end_turn", "length", "tool_calls", ""]))
    return [
        UsageChunk(usage=draw(usages())),
        Finish(reason=FinishReason(kind="tool-calls" if tool else "stop", raw=raw)),
    ]


@st.composite
def valid_sequences(draw: st.DrawFn, max_blocks: int = 6) -> list[StreamChunk]:
    """A chunk sequence that obeys every rule (``check_chunk_sequence`` finds nothing)."""
    blocks = draw(_blocks(max_blocks))
    return [chunk for block in blocks for chunk in block] + draw(_ending(blocks))


@st.composite
def interleaved_sequences(draw: st.DrawFn, max_blocks: int = 5) -> list[StreamChunk]:
    """Like :func:`valid_sequences`, with blocks interleaved (each block's order kept)."""
    blocks = draw(_blocks(max_blocks))
    queues = [list(b) for b in blocks]
    merged: list[StreamChunk] = []
    while any(queues):
        live = [q for q in queues if q]
        merged.append(draw(st.sampled_from(live)).pop(0))
    return merged + draw(_ending(blocks))


def _replace(data: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = dict(data)
    if len(path) == 1:
        out[path[0]] = value
    else:
        out[path[0]] = _replace(out[path[0]], path[1:], value)
    return out


def _remove(data: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    out = dict(data)
    if len(path) == 1:
        del out[path[0]]
    else:
        out[path[0]] = _remove(out[path[0]], path[1:])
    return out


def _paths(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for key, value in data.items():
        found.append((*prefix, key))
        if isinstance(value, dict):
            found.extend(_paths(value, (*prefix, key)))
    return found


@st.composite
def near_chunks(draw: st.DrawFn) -> Any:
    """A chunk's JSON with one thing changed: a field dropped, retyped or given an odd value."""
    chunk = draw(st.sampled_from(draw(valid_sequences(max_blocks=3))))
    data = chunk_to_json(chunk)
    path = draw(st.sampled_from(_paths(data)))
    how = draw(st.sampled_from(["remove", "value", "type", "bool", "negative"]))
    if how == "remove":
        return _remove(data, path)
    if how == "type":
        return _replace(
            data,
            ("type",),
            draw(
                st.sampled_from(
                    ["block-start", "text-delta", "reasoning-delta", "tool-call-delta",
                     "block-end", "usage", "finish", "raised", "Text-Delta", ""]
                )
            ),
        )
    if how == "bool":
        return _replace(data, path, draw(st.booleans()))
    if how == "negative":
        return _replace(data, path, draw(st.integers(-(2**70), -1)))
    return _replace(data, path, draw(json_values(4)))
